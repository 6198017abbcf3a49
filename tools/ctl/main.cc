// isoroce-ctl: inspect and steer a running isoroced. Manual: docs/isoroce-ctl.md.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <string>

#include "ctrl/client.h"
#include "ctrl/protocol.h"
#include "tools/ctl/live_run.h"
#include "tools/ctl/live_trace.h"
#include "tools/ctl/rate.h"
#include "tools/sim/report_format.h"
#include "tools/sim/scenario_toml.h"

using nlohmann::json;
using isoroce::ctrl::Client;

namespace {

int print_error(const json& r) {
  std::fprintf(stderr, "isoroce-ctl: %s\n", r.value("error", std::string("request failed")).c_str());
  return 1;
}

std::string num(const json& v) {
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  return v.is_string() ? v.get<std::string>() : v.dump();
}

void print_devices(const json& list) {
  fmt::print("{:<10} {:<16} {:<14} {:<18} {:<20} {:>8} {:>6} {:<7} {:>4}\n", "device", "ip", "driver", "mac",
             "gid", "gbps", "mtu", "policy", "qps");
  for (const json& d : list)
    fmt::print("{:<10} {:<16} {:<14} {:<18} {:<20} {:>8} {:>6} {:<7} {:>4}\n", num(d["name"]), num(d["ip"]),
               num(d["driver"]), num(d["mac"]), num(d["gid"][0]), num(d["link_gbps"]), num(d["active_mtu"]),
               num(d["policy"]), num(d["qps"]));
}

void print_qps(const json& list) {
  fmt::print("{:<10} {:>8} {:<4} {:<5} {:>8} {:<10} {:>5} {:>12} {:>14} {:>8} {:>6} {:>6} {:>12} {:<16}\n",
             "device", "qpn", "type", "state", "dest", "class", "app", "tx_packets", "tx_bytes", "retrans", "naks",
             "errors", "rate_bps", "owner");
  for (const json& q : list)
    fmt::print("{:<10} {:>8} {:<4} {:<5} {:>8} {:<10} {:>5} {:>12} {:>14} {:>8} {:>6} {:>6} {:>12} {:<16}\n",
               num(q["device"]), num(q["qpn"]), num(q["type"]), num(q["state"]), num(q["dest_qpn"]),
               q.value("class", std::string("-")), q.contains("app") ? num(q["app"]) : std::string("-"),
               num(q["tx_packets"]), num(q["tx_bytes"]),
               num(q["retransmits"]), num(q["naks_received"]), num(q["errors"]),
               q["rate_bps"] == 0 ? std::string("-") : num(q["rate_bps"]),
               q.contains("pid") ? fmt::format("{} ({})", num(q["comm"]), num(q["pid"])) : std::string("-"));
}

// key: value lines, nested objects indented.
void print_tree(const json& j, int indent = 0) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_object()) {
      fmt::print("{:{}}{}:\n", "", indent, it.key());
      print_tree(*it, indent + 2);
    } else if (it->is_array() && !it->empty() && (*it)[0].is_object()) {
      fmt::print("{:{}}{}:\n", "", indent, it.key());
      for (const json& e : *it) {
        print_tree(e, indent + 2);
        fmt::print("\n");
      }
    } else {
      fmt::print("{:{}}{}: {}\n", "", indent, it.key(), it->is_array() ? it->dump() : num(*it));
    }
  }
}

}  // namespace

// Long on purpose: every option with its binding and check, read top to bottom (CLI11).
int main(int argc, char** argv) {
  CLI::App app{"isoroce-ctl: inspect and steer a running isoroced (docs/isoroce-ctl.md)"};
  std::string socket = isoroce::ctrl::default_socket_path();
  bool as_json = false;
  app.add_option("--socket", socket, "isoroced's control socket (ISOROCE_SOCKET, default /run/isoroce/isoroced.sock)");
  app.add_flag("--json", as_json, "print the daemon's answer as JSON");
  app.require_subcommand(1);
  auto* status = app.add_subcommand("status", "daemon, workers, clients");
  auto* devices = app.add_subcommand("devices", "the emulated RNIC devices");
  auto* qps = app.add_subcommand("qps", "every QP with its owner and counters");
  // A QP is DEVICE/QPN (isoroce0/15) or a bare QPN where one device has it; QPNs
  // repeat across devices (every device's reference echo is 15).
  std::string qp_name, qp_device;
  const char* kQpHelp = "DEVICE/QPN (isoroce0/15), or a QPN that only one device has";
  auto* qp = app.add_subcommand("qp", "one QP");
  qp->add_option("QP", qp_name, kQpHelp)->required();
  auto* stats = app.add_subcommand("stats", "per-device counters (engine, port, ARP/ND/ping)");
  auto* sched = app.add_subcommand("sched", "per-device transmit scheduler");
  std::string dev, policy, rate_text, cls;
  auto* set_policy = app.add_subcommand("set-policy", "a device's transmit scheduler (a registered policy: fifo, tassel, justitia, or a plugin's the daemon loaded); the device must be unused");
  set_policy->add_option("DEVICE", dev, "isoroce0, ...")->required();
  set_policy->add_option("POLICY", policy, "fifo, tassel, justitia, ...")->required();
  std::vector<std::string> dcqcn_params;
  auto* set_dcqcn = app.add_subcommand("set-dcqcn", "a device's DCQCN parameters NAME=VALUE (docs/dcqcn.md); the device must be unused");
  set_dcqcn->add_option("DEVICE", dev, "isoroce0, ...")->required();
  set_dcqcn->add_option("PARAM", dcqcn_params, "NAME=VALUE, e.g. enabled=true ai_mbps=5")->required();
  std::vector<std::string> justitia_params;
  auto* set_justitia = app.add_subcommand(
      "set-justitia", "a device's justitia parameters NAME=VALUE (docs/isoroced.md); the device must be unused");
  set_justitia->add_option("DEVICE", dev, "isoroce0, ...")->required();
  set_justitia->add_option("PARAM", justitia_params, "NAME=VALUE, e.g. target99_us=50 ref_period_us=200")->required();
  auto* set_rate = app.add_subcommand("set-rate", "a QP's rate limit (10G, 500M, 100K bits/s; 0 or none: unlimited)");
  set_rate->add_option("QP", qp_name, kQpHelp)->required();
  set_rate->add_option("RATE", rate_text, "bits per second with an optional K/M/G suffix")->required();
  auto* set_class = app.add_subcommand("set-class", "a QP's flow class (latency, throughput, bandwidth)");
  set_class->add_option("QP", qp_name, kQpHelp)->required();
  std::string tenant;
  uint32_t tenant_weight = 0;
  auto* set_tenant = app.add_subcommand("set-tenant", "a QP's tenant (tenants share above applications; docs/isolation.md)");
  set_tenant->add_option("QP", qp_name, kQpHelp)->required();
  for (auto* sub : {qp, set_rate, set_class, set_tenant})
    sub->add_option("--device", qp_device, "the QP's device (the same as DEVICE/ in QP)");
  set_class->add_option("CLASS", cls, "latency, throughput or bandwidth")->required();
  set_tenant->add_option("TENANT", tenant, "a name (1 to 64 of A-Z a-z 0-9 _ - .)")->required();
  set_tenant->add_option("--weight", tenant_weight, "the tenant's weight (privileged)")->check(CLI::Range(1, 1000000));
  std::string scenario_path;
  auto* run = app.add_subcommand("run", "run a scenario of isoroce-sim on live daemons (its hosts name socket and device)");
  run->add_option("SCENARIO", scenario_path, "scenario TOML file (docs/isoroce-ctl.md)")->required();
  isoroce::tools::LiveTraceArgs ta;
  auto* trace = app.add_subcommand("trace", "record the daemon's trace events for a while into a Perfetto file "
                                            "(privileged; docs/profiling.md)");
  trace->add_option("--seconds", ta.seconds, "how long to record (at most 600)")->required();
  trace->add_option("--out", ta.out, "the trace file (Chrome trace-event JSON)")->required();
  trace->add_option("--device", ta.device, "only this device (default: all)");
  trace->add_option("--qp", ta.qp, "only this QP's events: DEVICE/QPN (isoroce0/17), or a QPN that only one device has");
  trace->add_option("--events", ta.events, "comma-separated event names or all (sched/trace.h)");
  trace->add_option("--ring", ta.ring_records, "records per worker ring (default 65536)");
  trace->add_option("--max-records", ta.max_records, "records kept in all (default 4194304)");
  trace->add_flag("--raw", ta.raw, "write the 40-byte trace::Records as they are");
  for (auto* sub : app.get_subcommands({})) sub->add_flag("--json", as_json, "print JSON");
  CLI11_PARSE(app, argc, argv);

  if (*run) {
    isoroce::tools::ScenarioParse parsed = isoroce::tools::load_scenario(scenario_path);
    if (!parsed.ok()) {
      std::fprintf(stderr, "isoroce-ctl: %s\n", parsed.error->to_string().c_str());
      return 2;
    }
    std::string error;
    auto report = isoroce::tools::run_live(parsed.scenario, &error);
    if (!report) {
      std::fprintf(stderr, "isoroce-ctl: run %s: %s\n", scenario_path.c_str(), error.c_str());
      return 1;
    }
    isoroce::tools::ReportOptions opts;
    opts.live = true;
    if (as_json) fmt::print("{}\n", isoroce::tools::report_to_json(*report, opts).dump(2));
    else fmt::print("{}", isoroce::tools::report_to_table(*report, opts));
    for (const auto& f : report->flows)
      if (!f.integrity_ok) return 3;
    return 0;
  }

  if (*trace) {
    ta.socket = socket;
    ta.json = as_json;
    return isoroce::tools::run_live_trace(ta);
  }

  uint32_t qpn = 0;
  if (*qp || *set_rate || *set_class || *set_tenant) {
    std::string named;
    if (!isoroce::ctrl::parse_qp_name(qp_name, &named, &qpn)) {
      std::fprintf(stderr, "isoroce-ctl: '%s' is not a QP (DEVICE/QPN, e.g. isoroce0/15, or a QPN)\n", qp_name.c_str());
      return 2;
    }
    if (!named.empty() && !qp_device.empty() && named != qp_device) {
      std::fprintf(stderr, "isoroce-ctl: QP %s and --device %s name different devices\n", qp_name.c_str(),
                   qp_device.c_str());
      return 2;
    }
    if (qp_device.empty()) qp_device = named;
  }
  json req;
  if (*status) req = {{"op", "status"}};
  if (*devices) req = {{"op", "devices"}};
  if (*qps) req = {{"op", "qps"}};
  if (*qp) req = {{"op", "qp"}, {"qpn", qpn}};
  if (*stats) req = {{"op", "stats"}};
  if (*sched) req = {{"op", "sched"}};
  if (*set_policy) req = {{"op", "set_policy"}, {"device", dev}, {"policy", policy}};
  if (*set_dcqcn) req = {{"op", "set_dcqcn"}, {"device", dev}, {"params", dcqcn_params}};
  if (*set_justitia) req = {{"op", "set_justitia"}, {"device", dev}, {"params", justitia_params}};
  if (*set_rate) {
    uint64_t bps;
    if (!isoroce::tools::parse_rate(rate_text, &bps)) {
      std::fprintf(stderr, "isoroce-ctl: set-rate: '%s' is not a rate (10G, 500M, 100K, 0)\n", rate_text.c_str());
      return 2;
    }
    req = {{"op", "set_rate"}, {"qpn", qpn}, {"bps", bps}};
  }
  if (*set_class) req = {{"op", "set_class"}, {"qpn", qpn}, {"class", cls}};
  if (*set_tenant) {
    req = {{"op", "set_tenant"}, {"qpn", qpn}, {"tenant", tenant}};
    if (tenant_weight != 0) req["weight"] = tenant_weight;
  }
  if ((*qp || *set_rate || *set_class || *set_tenant) && !qp_device.empty()) req["device"] = qp_device;

  std::string error;
  auto client = Client::connect(socket, &error);
  if (!client) {
    std::fprintf(stderr, "isoroce-ctl: %s\n", error.c_str());
    return 1;
  }
  json r = client->call(req);
  if (!r.value("ok", false)) return print_error(r);
  r.erase("ok");
  r.erase("id");
  if (as_json) {
    fmt::print("{}\n", r.dump(2));
    return 0;
  }
  if (*devices) print_devices(r["devices"]);
  else if (*qps) print_qps(r["qps"]);
  else print_tree(r);
  return 0;
}
