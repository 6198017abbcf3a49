#include "tools/sim/sim_trace.h"

#include <fmt/format.h>

#include <algorithm>

namespace isoroce::tools {

using trace::Event;

SimTrace::SimTrace(const sim::Scenario& scenario, trace::EventMask keep, bool decisions)
    : scenario_(scenario), keep_(keep), decisions_(decisions), hosts_(scenario.hosts.size()) {}

void SimTrace::record(const trace::Record& r) {
  if (keep_ & trace::bit(r.event)) records_.push_back(r);
  if (decisions_ && r.port < hosts_.size()) follow(r);
}

namespace {

std::string rate_text(uint64_t bps) {
  if (bps == 0) return "none";
  return fmt::format("{:.3f} Gb/s", static_cast<double>(bps) / 1e9);
}

}  // namespace

// A QP's packet is ready from its activation, or, while it stays backlogged, from
// the moment its previous packet has left the link; what it waits beyond that is the
// scheduler's doing (rate, tokens, other QPs, control packets).
void SimTrace::follow(const trace::Record& r) {
  HostState& h = hosts_[r.port];
  const uint64_t key = uint64_t{r.port} << 32 | r.qp;
  switch (r.event) {
    case Event::kActivate:
      qps_[key].ready = r.time;
      break;
    case Event::kRate:
      qps_[key].rate_bps = r.a;
      break;
    case Event::kTokenGrant:
    case Event::kTokenIssue:
      h.tokens = static_cast<int64_t>(r.a);
      break;
    case Event::kGrant: {
      if (r.b != 0) {
        h.grants.push_back({r.qp, 0, true});
        break;
      }
      QpState& q = qps_[key];
      const sched::Picos departure = r.a;
      h.grants.push_back({r.qp, departure > q.ready ? departure - q.ready : 0, false});
      const uint64_t bps = scenario_.hosts[r.port].link_bps;
      q.ready = departure + static_cast<sched::Picos>(static_cast<unsigned __int128>(r.bytes) * 8 *
                                                      sched::kPicosPerSecond / bps);
      break;
    }
    case Event::kFrameTx: {
      while (!h.grants.empty() && h.grants.front().qp != r.qp) h.grants.pop_front();
      const std::string& policy = scenario_.hosts[r.port].policy;
      if (h.grants.empty()) {
        h.comment = fmt::format("isoroce policy={}; no grant seen", policy);
        break;
      }
      const PendingGrant g = h.grants.front();
      h.grants.pop_front();
      if (g.control) {
        h.comment = fmt::format("isoroce policy={}; control packet, sent ahead of data", policy);
        break;
      }
      h.comment = fmt::format("isoroce policy={}; waited {:.3f} us in the scheduler; rate limit {}",
                              policy, static_cast<double>(g.waited) / 1e6,
                              rate_text(qps_[key].rate_bps));
      if (h.tokens >= 0)  // justitia's token events seen h.comment += fmt::format("; tokens {}", h.tokens);
      break;
    }
    default:
      break;
  }
}

}  // namespace isoroce::tools
