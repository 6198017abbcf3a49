#include "tools/sim/chrome_trace.h"

#include <fmt/format.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <deque>
#include <map>

#include "transport/wire/opcode.h"

namespace isoroce::tools {

using nlohmann::json;
using trace::Event;
using trace::Record;

namespace {

double us(sched::Picos t) { return static_cast<double>(t) / 1e6; }

std::string_view wr_name(uint64_t op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE: return "WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM: return "WRITE_IMM";
    case IBV_WR_SEND: return "SEND";
    case IBV_WR_SEND_WITH_IMM: return "SEND_IMM";
    case IBV_WR_RDMA_READ: return "READ";
    case IBV_WR_ATOMIC_CMP_AND_SWP: return "CMP_SWAP";
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return "FETCH_ADD";
    default: return "WR";
  }
}

// A message of one QP from post to completion (the requester's frames by PSN order;
// a PSN not after the highest sent is a retransmission and changes no stage).
struct Message {
  uint32_t id = 0;
  uint64_t opcode = 0;
  uint32_t bytes = 0;
  sched::Picos post = 0, first_tx = sched::kNever, last_tx = sched::kNever;
  uint32_t frames = 0;
};
struct QpTrack {
  std::deque<Message> open;
  bool sent_any = false;
  uint32_t max_psn = 0;
  uint32_t retransmits = 0;
};

bool psn_after(uint32_t a, uint32_t b) { return ((a - b) & 0xffffff) != 0 && ((a - b) & 0xffffff) < 0x800000; }

class Builder {
 public:
  explicit Builder(const SimTrace& t) : t_(t) {}
  json build();

 private:
  void names();
  void on_record(const Record& r);
  void on_samples();
  void instant(const Record& r, json args);
  void counter(uint32_t pid, sched::Picos time, const std::string& name, json args) {
    out_.push_back({{"ph", "C"}, {"pid", pid}, {"tid", 0}, {"ts", us(time)}, {"name", name}, {"args", std::move(args)}});
  }
  std::string qp_label(uint32_t host, uint32_t qpn) const;

  const SimTrace& t_;
  std::vector<json> out_;
  std::map<uint64_t, QpTrack> tracks_;
  std::map<uint64_t, int32_t> flow_of_;  // host << 32 | QPN -> flow (-1: reference probe)
};

std::string Builder::qp_label(uint32_t host, uint32_t qpn) const {
  auto it = flow_of_.find(uint64_t{host} << 32 | qpn);
  std::string flow = "?";
  if (it != flow_of_.end())
    flow = it->second < 0 ? "reference probe" : t_.scenario().flows[static_cast<size_t>(it->second)].name;
  return fmt::format("QP {:#x} ({})", qpn, flow);
}

void Builder::names() {
  const sim::Scenario& s = t_.scenario();
  for (const sim::SimSample& smp : t_.samples())
    for (const sim::QpSample& q : smp.qps) flow_of_[uint64_t{q.host} << 32 | q.qpn] = q.flow;
  std::map<uint64_t, bool> qps;
  for (const auto& [key, flow] : flow_of_) qps[key] = true;
  for (const Record& r : t_.records())
    if (r.qp != trace::kNoQp) qps[uint64_t{r.port} << 32 | r.qp] = true;
  for (size_t h = 0; h < s.hosts.size(); ++h) {
    const auto pid = static_cast<uint32_t>(h + 1);
    out_.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_name"},
                    {"args", {{"name", fmt::format("host {} ({})", s.hosts[h].name, s.hosts[h].policy)}}}});
    out_.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_sort_index"}, {"args", {{"sort_index", h}}}});
    out_.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "thread_name"}, {"args", {{"name", "scheduler (port)"}}}});
  }
  for (const auto& [key, unused] : qps) {
    const auto host = static_cast<uint32_t>(key >> 32);
    const auto qpn = static_cast<uint32_t>(key);
    out_.push_back({{"ph", "M"}, {"pid", host + 1}, {"tid", qpn}, {"name", "thread_name"},
                    {"args", {{"name", qp_label(host, qpn)}}}});
  }
}

void Builder::instant(const Record& r, json args) {
  const bool port = r.qp == trace::kNoQp;
  out_.push_back({{"ph", "i"}, {"s", port ? "p" : "t"}, {"pid", r.port + 1u}, {"tid", port ? 0u : r.qp},
                  {"ts", us(r.time)}, {"name", trace::name(r.event)}, {"args", std::move(args)}});
}

// One record to its slice, instant or counter (a: and b: as sched/trace.h says).
void Builder::on_record(const Record& r) {
  const uint64_t key = uint64_t{r.port} << 32 | r.qp;
  const auto cls = sched::to_string(static_cast<sched::FlowClass>(r.cls));
  switch (r.event) {
    case Event::kPost:
      tracks_[key].open.push_back({r.psn, r.a, r.bytes, r.time});
      break;
    case Event::kFrameTx: {
      QpTrack& q = tracks_[key];
      const auto& info = wire::opcode_info(static_cast<uint8_t>(r.a));
      const bool request = r.a < wire::op::kUcBase && info.kind != wire::OpKind::kAck &&
                           info.kind != wire::OpKind::kAtomicAck && info.kind != wire::OpKind::kReadResponse;
      const bool ud = r.a == wire::op::kUdSendOnly || r.a == wire::op::kUdSendOnlyImm;
      if (!(request || ud)) break;
      if (q.sent_any && !psn_after(r.psn, q.max_psn)) {
        ++q.retransmits;
        break;
      }
      q.sent_any = true;
      q.max_psn = r.psn;
      for (Message& m : q.open) {
        if (m.last_tx != sched::kNever) continue;
        if (m.first_tx == sched::kNever) m.first_tx = r.time;
        ++m.frames;
        if (ud || info.is_last()) m.last_tx = r.time;
        break;
      }
      break;
    }
    case Event::kCompletion: {
      if (r.b >= IBV_WC_RECV) {
        instant(r, {{"status", r.a}, {"opcode", r.b}, {"bytes", r.bytes}, {"receive", true}});
        break;
      }
      QpTrack& q = tracks_[key];
      auto it = std::find_if(q.open.begin(), q.open.end(), [&](const Message& m) { return m.id == r.psn; });
      if (it == q.open.end()) break;
      const Message m = *it;
      q.open.erase(it);
      json args = {{"msg_id", m.id}, {"bytes", m.bytes}, {"status", r.a}, {"class", cls}, {"frames", m.frames}};
      if (m.first_tx != sched::kNever) {
        args["post_to_first_tx_us"] = us(m.first_tx - m.post);  // waiting for the scheduler's first grant
        const sched::Picos last = m.last_tx != sched::kNever ? m.last_tx : m.first_tx;
        args["first_to_last_tx_us"] = us(last - m.first_tx);     // on the wire, paced by the scheduler
        args["last_tx_to_completion_us"] = us(r.time - last);    // the response's way back
      }
      out_.push_back({{"ph", "X"}, {"pid", r.port + 1u}, {"tid", r.qp}, {"ts", us(m.post)}, {"dur", us(r.time - m.post)},
                      {"name", fmt::format("{} {} B", wr_name(m.opcode), m.bytes)}, {"cat", cls}, {"args", std::move(args)}});
      break;
    }
    case Event::kRate:
      counter(r.port + 1u, r.time, fmt::format("rate limit QP {:#x}", r.qp), {{"Gbps", static_cast<double>(r.a) / 1e9}});
      break;
    case Event::kSafeUtil:
      counter(r.port + 1u, r.time, "SafeUtil", {{"Gbps", static_cast<double>(r.a) / 1e9}});
      counter(r.port + 1u, r.time, "Current99", {{"us", us(r.b)}});
      break;
    case Event::kTokenGrant:
    case Event::kTokenIssue:
      counter(r.port + 1u, r.time, "tokens", {{"banked", r.a}});
      if (r.event == Event::kTokenGrant) instant(r, {{"token_bytes", r.bytes}, {"tokens_left", r.a}, {"class", cls}});
      else instant(r, {{"token_bytes", r.bytes}, {"tokens_banked", r.a}, {"tau_us", us(r.b)}});
      break;
    case Event::kActivate: instant(r, {{"bytes", r.bytes}, {"class", cls}}); break;
    case Event::kEligible: instant(r, {{"bytes", r.bytes}, {"S_us", us(r.a)}, {"F_us", us(r.b)}}); break;
    case Event::kTokenWithhold: instant(r, {{"bytes", r.bytes}, {"class", cls}}); break;
    case Event::kGrant:
      instant(r, {{"bytes", r.bytes}, {"departure_us", us(r.a)}, {"control", r.b != 0}, {"class", cls}});
      break;
    case Event::kFrameRx: instant(r, {{"psn", r.psn}, {"bytes", r.bytes}, {"opcode", r.a}}); break;
    case Event::kAck: instant(r, {{"psn", r.psn}, {"syndrome", r.a}}); break;
    case Event::kNak: instant(r, {{"psn", r.psn}, {"syndrome", r.a}}); break;
    case Event::kCnp: instant(r, {{"received", r.a != 0}}); break;
    case Event::kRetransmit: instant(r, {{"from_psn", r.psn}, {"retries_left", r.a}}); break;
    case Event::kDcqcnCut:
      instant(r, {{"rate_Gbps", static_cast<double>(r.a) / 1e9}, {"alpha", static_cast<double>(r.b) / (1 << 20)}});
      break;
    case Event::kDcqcnIncrease:
      instant(r, {{"rate_Gbps", static_cast<double>(r.a) / 1e9}, {"target_Gbps", static_cast<double>(r.b) / 1e9}});
      break;
    case Event::kChunkSplit: instant(r, {{"chunk_bytes", r.bytes}, {"class", cls}}); break;
    case Event::kDrop: instant(r, {{"bytes", r.bytes}, {"reason", r.a}}); break;
    default: break;
  }
  if (r.event == Event::kFrameTx) {
    // Frames are stamped with their departure; their instant goes on the QP's track too.
    instant(r, {{"psn", r.psn}, {"bytes", r.bytes}, {"opcode", r.a}});
  }
}

// Throughput per QP (bytes sent between samples) and the switch queue toward each host.
void Builder::on_samples() {
  const auto& samples = t_.samples();
  std::map<uint64_t, uint64_t> last_tx;
  sched::Picos last_t = 0;
  for (const sim::SimSample& s : samples) {
    for (size_t h = 0; h < s.hosts.size(); ++h)
      counter(static_cast<uint32_t>(h + 1), s.time, "switch queue to host", {{"bytes", s.hosts[h].queue_bytes}});
    for (const sim::QpSample& q : s.qps) {
      const uint64_t key = uint64_t{q.host} << 32 | q.qpn;
      if (s.time > last_t && q.requester) {
        const double gbps = static_cast<double>(q.tx_bytes - last_tx[key]) * 8 / (us(s.time - last_t) * 1e3);
        counter(q.host + 1, s.time, fmt::format("throughput QP {:#x}", q.qpn), {{"Gbps", gbps}});
      }
      last_tx[key] = q.tx_bytes;
    }
    last_t = s.time;
  }
}

json Builder::build() {
  names();
  for (const Record& r : t_.records()) on_record(r);
  on_samples();
  // One time order (frames are stamped with their future departure; metadata first).
  std::stable_sort(out_.begin(), out_.end(), [](const json& a, const json& b) {
    const bool ma = a["ph"] == "M", mb = b["ph"] == "M";
    if (ma != mb) return ma;
    if (ma) return false;
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  json doc;
  doc["displayTimeUnit"] = "ns";
  doc["traceEvents"] = std::move(out_);
  doc["otherData"] = {{"generator", "isoroce-sim"}, {"seed", t_.scenario().seed}, {"time_unit", "us (virtual)"}};
  return doc;
}

}  // namespace

json chrome_trace(const SimTrace& t) { return Builder(t).build(); }

}  // namespace isoroce::tools
