#include "tools/sim/timeseries.h"

#include <fmt/format.h>

#include <map>

namespace isoroce::tools {

std::string timeseries_csv(const SimTrace& t) {
  const sim::Scenario& sc = t.scenario();
  std::string out =
      "time_us,host,qpn,flow,role,rate_bps,throughput_bps,queue_bytes,safe_util_bps,tokens,current99_us\n";
  std::map<uint64_t, uint64_t> last_tx;
  sched::Picos last_t = 0;
  bool first = true;
  for (const sim::SimSample& s : t.samples()) {
    const sched::Picos dt = s.time - last_t;
    for (const sim::QpSample& q : s.qps) {
      const uint64_t key = uint64_t{q.host} << 32 | q.qpn;
      const uint64_t sent = q.tx_bytes - last_tx[key];
      last_tx[key] = q.tx_bytes;
      if (first || dt == 0) continue;  // the sample at 0 only sets the counters' base
      const sim::HostSample& h = s.hosts[q.host];
      const uint64_t bps = static_cast<uint64_t>(static_cast<unsigned __int128>(sent) * 8 * sched::kPicosPerSecond / dt);
      const std::string flow = q.flow < 0 ? "reference" : sc.flows[static_cast<size_t>(q.flow)].name;
      out += fmt::format("{:.3f},{},{:#x},{},{},{},{},{},", static_cast<double>(s.time) / 1e6, sc.hosts[q.host].name,
                         q.qpn, flow, q.requester ? "requester" : "responder", q.rate_bps, bps, h.queue_bytes);
      if (h.justitia)
        out += fmt::format("{},{},{:.3f}\n", h.safe_util_bps, h.tokens, static_cast<double>(h.current99) / 1e6);
      else
        out += ",,\n";
    }
    first = false;
    last_t = s.time;
  }
  return out;
}

}  // namespace isoroce::tools
