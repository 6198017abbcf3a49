#include "ctrl/telemetry.h"

#include <rte_telemetry.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "ctrl/daemon.h"
#include "ctrl/protocol.h"

namespace isoroce::ctrl {
namespace {

std::atomic<Daemon*> g_daemon{nullptr};

std::string clip(std::string s) {
  if (s.size() >= RTE_TEL_MAX_STRING_LEN) s.resize(RTE_TEL_MAX_STRING_LEN - 1);
  return s;
}

// One level of containers (what DPDK telemetry allows); deeper objects are
// flattened into their container, keys joined by "_" ("justitia_reference_probes":
// DPDK telemetry takes names of letters, digits, "_" and "/" only),
// deeper arrays given as text.
void fill(rte_tel_data* d, const json& obj, bool nested, const std::string& prefix = "", size_t* count = nullptr) {
  size_t own = 0;
  size_t& n = count ? *count : own;
  size_t i = 0;
  for (auto it = obj.begin(); it != obj.end() && n < RTE_TEL_MAX_DICT_ENTRIES; ++it, ++i) {
    const std::string key = clip(prefix + (obj.is_array() ? std::to_string(i) : it.key()));
    const json& v = *it;
    if (nested && v.is_object()) {
      fill(d, v, true, key + "_", &n);
      continue;
    }
    ++n;
    if (v.is_number_unsigned()) {
      rte_tel_data_add_dict_u64(d, key.c_str(), v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      rte_tel_data_add_dict_int(d, key.c_str(), static_cast<int>(v.get<int64_t>()));
    } else if (v.is_boolean()) {
      rte_tel_data_add_dict_int(d, key.c_str(), v.get<bool>() ? 1 : 0);
    } else if (v.is_string()) {
      rte_tel_data_add_dict_string(d, key.c_str(), clip(v.get<std::string>()).c_str());
    } else if ((v.is_object() || v.is_array()) && !nested) {
      rte_tel_data* c = rte_tel_data_alloc();
      if (c == nullptr) continue;
      rte_tel_data_start_dict(c);
      fill(c, v, true);
      rte_tel_data_add_dict_container(d, key.c_str(), c, 0);
    } else {
      rte_tel_data_add_dict_string(d, key.c_str(), clip(v.dump()).c_str());
    }
  }
}

int answer(rte_tel_data* d, const json& obj) {
  rte_tel_data_start_dict(d);
  fill(d, obj, false);
  return 0;
}

Daemon* daemon_or_stopping(rte_tel_data* d) {
  Daemon* dm = g_daemon.load();
  if (dm == nullptr) {
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_string(d, "status", "stopping");
  }
  return dm;
}

// Lists keyed by name (devices), so each entry is one container.
json keyed(const json& list, const char* key) {
  json out = json::object();
  for (const json& e : list) out[e[key].is_string() ? e[key].get<std::string>() : e[key].dump()] = e;
  return out;
}

int cmd_status(const char*, const char*, rte_tel_data* d) {
  Daemon* dm = daemon_or_stopping(d);
  return dm ? answer(d, dm->status_view()) : 0;
}
int cmd_devices(const char*, const char*, rte_tel_data* d) {
  Daemon* dm = daemon_or_stopping(d);
  return dm ? answer(d, keyed(dm->devices_view(), "name")) : 0;
}
int cmd_qps(const char*, const char*, rte_tel_data* d) {
  Daemon* dm = daemon_or_stopping(d);
  if (dm == nullptr) return 0;
  json out = json::object();  // keyed DEVICE/QPN: QPNs repeat across devices
  for (const json& q : dm->qps_view()) out[q.value("device", "?") + "/" + q["qpn"].dump()] = q;
  return answer(d, out);
}
int cmd_qp(const char*, const char* params, rte_tel_data* d) {
  Daemon* dm = daemon_or_stopping(d);
  if (dm == nullptr) return 0;
  // "QPN" or "DEVICE/QPN" (QPNs repeat across devices: /isoroce/qp,isoroce1/15).
  std::string device, error;
  uint32_t qpn = 0;
  int err = 0;
  if (params == nullptr || !parse_qp_name(params, &device, &qpn)) return -EINVAL;
  DeviceEntry* e = dm->find_qp(qpn, device, &err, &error);
  if (e == nullptr) return -err;
  auto v = dm->qp_view(*e, qpn);
  if (!v) return -ENOENT;
  return answer(d, *v);
}
int cmd_stats(const char*, const char*, rte_tel_data* d) {
  Daemon* dm = daemon_or_stopping(d);
  return dm ? answer(d, dm->stats_view()) : 0;
}
int cmd_sched(const char*, const char*, rte_tel_data* d) {
  Daemon* dm = daemon_or_stopping(d);
  return dm ? answer(d, dm->sched_view()) : 0;
}

}  // namespace

void register_telemetry(Daemon* daemon) {
  static bool registered = false;
  g_daemon = daemon;
  if (registered) return;
  registered = true;
  rte_telemetry_register_cmd("/isoroce/status", cmd_status, "isoroced status. Takes no parameters");
  rte_telemetry_register_cmd("/isoroce/devices", cmd_devices, "Emulated RNIC devices. Takes no parameters");
  rte_telemetry_register_cmd("/isoroce/qps", cmd_qps, "Every QP with its counters. Takes no parameters");
  rte_telemetry_register_cmd("/isoroce/qp", cmd_qp, "One QP. Parameters: QPN");
  rte_telemetry_register_cmd("/isoroce/stats", cmd_stats, "Per-device counters. Takes no parameters");
  rte_telemetry_register_cmd("/isoroce/sched", cmd_sched, "Per-device scheduler. Takes no parameters");
}

void unregister_telemetry() { g_daemon = nullptr; }

}  // namespace isoroce::ctrl
