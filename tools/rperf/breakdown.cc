#include "tools/rperf/breakdown.h"

#include <algorithm>
#include <cmath>

namespace isoroce::tools::rperf {
namespace {

using E = trace::Event;

bool is(const trace::Record& r, QpRef q) { return r.port == q.port && r.qp == q.qp; }

// At one instant a message can end and the next begin (a closed loop posts
// when the completion is written): its ACK and completion go first, then the
// post, then what the new message does.
int rank(E e) {
  switch (e) {
    case E::kAck: return 0;
    case E::kCompletion: return 1;
    case E::kPost: return 2;
    default: return 3;
  }
}

std::vector<trace::Record> by_time(std::span<const trace::Record> records) {
  std::vector<trace::Record> rs(records.begin(), records.end());
  std::stable_sort(rs.begin(), rs.end(), [](const auto& a, const auto& b) {
    return a.time != b.time ? a.time < b.time : rank(a.event) < rank(b.event);
  });
  return rs;
}

constexpr uint64_t kBthAcknowledge = 0x11;  // RC ACKNOWLEDGE (IBTA 9.2, table 38)

// The completion times of q's successful messages, in post order.
std::vector<Picos> completions(const std::vector<trace::Record>& rs, QpRef q) {
  std::vector<std::pair<uint32_t, Picos>> done;
  for (const auto& r : rs)
    if (is(r, q) && r.event == E::kCompletion && r.a == 0) done.push_back({r.psn, r.time});
  std::stable_sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Picos> t;
  for (const auto& d : done) t.push_back(d.second);
  return t;
}

double ns(Picos p) { return static_cast<double>(p) / 1000.0; }

}  // namespace

// The wire QP is closed loop, as RPerf's latency generator: the events between
// a post and its completion belong to that message.
std::vector<Message> messages(std::span<const trace::Record> records, QpRef wire, std::optional<QpRef> peer) {
  std::vector<Message> out;
  Message* cur = nullptr;
  for (const trace::Record& r : by_time(records)) {
    if (is(r, wire) && r.event == E::kPost) {
      out.push_back(Message{r.psn, r.time, r.b});
      cur = &out.back();
      continue;
    }
    if (cur == nullptr || cur->completion) continue;
    if (is(r, wire)) {
      switch (r.event) {
        case E::kGrant:
          if (r.b == 0 && !cur->grant) cur->grant = r.a;  // data, its departure
          break;
        case E::kFrameTx:
          if (!cur->tx) cur->tx = r.time;
          break;
        case E::kAck: cur->ack = r.time; break;
        case E::kCompletion:
          if (r.psn == cur->id) cur->completion = r.time;
          break;
        default: break;
      }
    } else if (peer && is(r, *peer)) {
      if (r.event == E::kFrameRx && cur->tx) cur->resp_rx = r.time;
      if (r.event == E::kFrameTx && (r.a & 0x1f) == kBthAcknowledge && cur->resp_rx && !cur->resp_ack_tx)
        cur->resp_ack_tx = r.time;
    }
  }
  return out;
}

Percentiles percentiles(std::vector<Picos> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) { return ns(v[static_cast<std::size_t>(std::ceil(q * v.size())) - 1]); };
  p.p50_ns = rank(0.50);
  p.p99_ns = rank(0.99);
  p.p999_ns = rank(0.999);
  p.max_ns = ns(v.back());
  double sum = 0;
  for (Picos x : v) sum += ns(x);
  p.mean_ns = sum / static_cast<double>(v.size());
  return p;
}

std::vector<Picos> rperf_rtts(std::span<const trace::Record> records, QpRef wire, QpRef loopback) {
  const std::vector<trace::Record> rs = by_time(records);
  const std::vector<Picos> tw = completions(rs, wire), tl = completions(rs, loopback);
  std::vector<Picos> rtt;
  for (std::size_t k = 0; k < std::min(tw.size(), tl.size()); ++k) rtt.push_back(tw[k] > tl[k] ? tw[k] - tl[k] : 0);
  return rtt;
}

std::vector<Stage> breakdown(const std::vector<Message>& msgs) {
  std::vector<Picos> ring, sched, wire, resp, ret, net, comp, total;
  bool have_peer = false;
  const bool have_ring = std::any_of(msgs.begin(), msgs.end(), [](const Message& m) { return m.ring != 0; });
  for (const Message& m : msgs) {
    if (!m.completion) continue;
    ring.push_back(m.ring);
    if (m.grant) sched.push_back(*m.grant - std::min(*m.grant, m.post));
    if (m.tx && m.resp_rx && m.resp_ack_tx && m.ack) {
      have_peer = true;
      wire.push_back(*m.resp_rx - *m.tx);
      resp.push_back(*m.resp_ack_tx - *m.resp_rx);
      ret.push_back(*m.ack - *m.resp_ack_tx);
    }
    if (m.tx && m.ack) net.push_back(*m.ack - *m.tx);
    if (m.ack) comp.push_back(*m.completion - *m.ack);
    total.push_back(*m.completion - m.post + m.ring);
  }
  std::vector<Stage> out;
  if (have_ring) out.push_back({"ring", percentiles(ring)});
  out.push_back({"scheduler", percentiles(sched)});
  if (have_peer) {
    out.push_back({"wire", percentiles(wire)});
    out.push_back({"responder", percentiles(resp)});
    out.push_back({"return", percentiles(ret)});
  } else {
    out.push_back({"network", percentiles(net)});
  }
  out.push_back({"completion", percentiles(comp)});
  out.push_back({"total", percentiles(total)});
  return out;
}

}  // namespace isoroce::tools::rperf
