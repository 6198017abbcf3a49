#include "tools/ctl/live_trace.h"

#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "ctrl/client.h"
#include "ctrl/protocol.h"
#include "sched/trace.h"
#include "tools/trace/chrome_trace.h"

namespace isoroce::tools {
namespace {

using nlohmann::json;

int fail(int code, const std::string& what) {
  std::fprintf(stderr, "isoroce-ctl: trace: %s\n", what.c_str());
  return code;
}

// The records of the daemon's memfd (it wrote whole records only).
std::vector<trace::Record> read_records(int fd, uint64_t expect) {
  std::vector<trace::Record> rs(expect);
  size_t want = rs.size() * sizeof(trace::Record), got = 0;
  char* p = reinterpret_cast<char*>(rs.data());
  while (got < want) {
    const ssize_t n = pread(fd, p + got, want - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  rs.resize(got / sizeof(trace::Record));
  return rs;
}

}  // namespace

// Long on purpose: one session from checks to file, in the order it happens.
int run_live_trace(const LiveTraceArgs& a) {
  trace::EventMask mask = 0;
  std::string error;
  if (!trace::parse_events(a.events, &mask, &error)) return fail(2, "--events: " + error);
  if (!(a.seconds > 0)) return fail(2, "--seconds must be positive");
  std::ofstream out(a.out, std::ios::binary | std::ios::trunc);
  if (!out) return fail(2, "cannot write '" + a.out + "': " + std::strerror(errno));

  auto client = ctrl::Client::connect(a.socket, &error);
  if (!client) return fail(1, error);
  json req = {{"op", "trace_start"}, {"seconds", a.seconds}, {"events", a.events}};
  std::string device = a.device;
  if (!a.qp.empty()) {
    std::string named;
    uint32_t qpn = 0;
    if (!ctrl::parse_qp_name(a.qp, &named, &qpn)) return fail(2, "--qp: '" + a.qp + "' is not a QP (DEVICE/QPN or a QPN)");
    if (!named.empty() && !device.empty() && named != device)
      return fail(2, "--qp " + a.qp + " and --device " + device + " name different devices");
    if (!named.empty()) device = named;
    req["qp"] = qpn;
  }
  if (!device.empty()) req["device"] = device;
  if (a.ring_records != 0) req["ring_records"] = a.ring_records;
  if (a.max_records != 0) req["max_records"] = a.max_records;
  std::vector<int> fds;
  json r = client->call(req, {}, &fds);
  if (!r.value("ok", false) || fds.empty()) {
    for (int f : fds) close(f);
    return fail(r.value("errno", 0) == EINVAL ? 2 : 1, r.value("error", std::string("trace_start failed")));
  }
  const int fd = fds[0];
  for (size_t i = 1; i < fds.size(); ++i) close(fds[i]);
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  r = client->call({{"op", "trace_stop"}});
  if (!r.value("ok", false)) {
    close(fd);
    return fail(1, r.value("error", std::string("trace_stop failed")));
  }
  const std::vector<trace::Record> rs = read_records(fd, r.value("records", uint64_t{0}));
  close(fd);

  TraceMeta meta;
  meta.source = "isoroced";
  meta.dropped = r.value("dropped", uint64_t{0});
  meta.truncated = r.value("truncated", uint64_t{0});
  // One process per lane on a port with lanes ("isoroce0 lane 1"; its records' port is index + 256 x lane).
  for (const json& d : r["devices"])
    meta.port_names[d["port"].get<uint16_t>()] =
        d["name"].get<std::string>() +
        (d.value("lanes", 1u) > 1 ? " lane " + std::to_string(d.value("lane", 0u)) : std::string());
  if (a.raw) out.write(reinterpret_cast<const char*>(rs.data()), static_cast<std::streamsize>(rs.size() * sizeof(trace::Record)));
  else write_chrome_trace(out, rs, meta);
  out.close();
  if (!out) return fail(1, "writing '" + a.out + "' failed");

  r.erase("ok");
  r.erase("id");
  r["out"] = a.out;
  if (a.json) {
    fmt::print("{}\n", r.dump(2));
  } else {
    size_t devices = 0;  // lane 0 of each (devices lists every lane)
    for (const json& d : r["devices"]) devices += d.value("lane", 0u) == 0;
    fmt::print("{} records from {} device(s) in {}\n", rs.size(), devices, a.out);
    for (const json& g : r["rings"]) {
      std::string names;
      for (const json& port : g["ports"])
        if (auto it = meta.port_names.find(port.get<uint16_t>()); it != meta.port_names.end())
          names += (names.empty() ? "" : ", ") + it->second;
      fmt::print("  worker {} ({}): {} recorded, {} dropped (ring of {})\n", g["worker"].get<unsigned>(), names,
                 g["recorded"].get<uint64_t>(), g["dropped"].get<uint64_t>(), g["ring_records"].get<uint64_t>());
    }
  }
  if (meta.dropped != 0 || meta.truncated != 0)
    std::fprintf(stderr, "isoroce-ctl: trace: %llu record(s) dropped (ring full: --ring more), %llu truncated "
                 "(--max-records more)\n", static_cast<unsigned long long>(meta.dropped),
                 static_cast<unsigned long long>(meta.truncated));
  return 0;
}

}  // namespace isoroce::tools
