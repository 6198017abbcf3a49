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
    case Event::kEligible: {
      QpState& q = qps_[key];
      q.eligible_seen = true;
      q.start = r.a;
      q.finish = r.b;
      q.phi_q16 = r.psn;
      break;
    }
    case Event::kTokenGrant:
    case Event::kTokenIssue:
      h.tokens = static_cast<int64_t>(r.a);
      break;
    case Event::kGrant: {
      if (r.b != 0) {
        h.grants.push_back({r.qp, 0, true, {}});
        break;
      }
      QpState& q = qps_[key];
      const sched::Picos departure = r.a;
      h.grants.push_back({r.qp, departure > q.ready ? departure - q.ready : 0, false, q});
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
                              rate_text(g.at_grant.rate_bps));
      if (g.at_grant.eligible_seen)  // tassel: the packet's S and F (virtual us) and Phi
        h.comment += fmt::format("; S {:.3f} us F {:.3f} us phi {:.4f}", static_cast<double>(g.at_grant.start) / 1e6,
                                 static_cast<double>(g.at_grant.finish) / 1e6, trace::phi_of(g.at_grant.phi_q16));
      if (h.tokens >= 0) h.comment += fmt::format("; tokens {}", h.tokens);  // justitia's token events seen
      break;
    }
    default:
      break;
  }
}

TraceMeta SimTrace::chrome_meta() const {
  TraceMeta m;
  m.source = "isoroce-sim";
  m.seed = scenario_.seed;
  for (size_t h = 0; h < scenario_.hosts.size(); ++h)
    m.port_names[static_cast<uint16_t>(h)] = fmt::format("host {} ({})", scenario_.hosts[h].name, scenario_.hosts[h].policy);
  std::map<uint64_t, uint64_t> last_tx;
  sched::Picos last_t = 0;
  for (const sim::SimSample& s : samples_) {
    for (size_t h = 0; h < s.hosts.size(); ++h)
      m.counters.push_back({static_cast<uint16_t>(h), s.time, "switch queue to host", "bytes",
                            static_cast<double>(s.hosts[h].queue_bytes)});
    for (const sim::QpSample& q : s.qps) {
      const uint64_t key = uint64_t{q.host} << 32 | q.qpn;
      m.qp_labels[key] = q.flow < 0 ? "reference probe" : scenario_.flows[static_cast<size_t>(q.flow)].name;
      if (s.time > last_t && q.requester) {
        const double gbps = static_cast<double>(q.tx_bytes - last_tx[key]) * 8 * 1e3 / static_cast<double>(s.time - last_t);
        m.counters.push_back({static_cast<uint16_t>(q.host), s.time, fmt::format("throughput QP {}/{} ({:#x})", scenario_.hosts[q.host].name, q.qpn, q.qpn), "Gbps", gbps});
      }
      last_tx[key] = q.tx_bytes;
    }
    last_t = s.time;
  }
  return m;
}

}  // namespace isoroce::tools
