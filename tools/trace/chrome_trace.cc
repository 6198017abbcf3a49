#include "tools/trace/chrome_trace.h"

#include <fmt/format.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>

#include "sched/justitia_params.h"
#include "tools/trace/chrome_args.h"
#include "transport/wire/opcode.h"

namespace isoroce::tools {

using chrome::us;
using trace::Event;
using trace::Record;

namespace {

// A message of one QP from post to completion (the requester's frames by PSN order;
// a PSN not after the highest sent is a retransmission and changes no stage).
struct Message {
  uint32_t id = 0;
  uint64_t opcode = 0;
  uint32_t bytes = 0;
  sched::Picos post = 0, ring = 0, first_tx = sched::kNever, last_tx = sched::kNever;
  uint32_t frames = 0;
};
struct QpTrack {
  std::deque<Message> open;
  bool sent_any = false;
  uint32_t max_psn = 0;
};
struct Slice {
  uint16_t port;
  uint32_t qp;
  sched::Picos start, end;
  std::string name, cat, args;
};
struct Line {
  bool meta;
  sched::Picos ts;
  std::string text;
};

bool psn_after(uint32_t a, uint32_t b) { return ((a - b) & 0xffffff) != 0 && ((a - b) & 0xffffff) < 0x800000; }

uint64_t key_of(uint16_t port, uint32_t qp) { return uint64_t{port} << 32 | qp; }

// A frame the requester sends for a message (not a response, ACK or UC).
bool request_frame(uint64_t opcode) {
  const auto& info = wire::opcode_info(static_cast<uint8_t>(opcode));
  const bool ud = opcode == wire::op::kUdSendOnly || opcode == wire::op::kUdSendOnlyImm;
  return ud || (opcode < wire::op::kUcBase && info.kind != wire::OpKind::kAck &&
                info.kind != wire::OpKind::kAtomicAck && info.kind != wire::OpKind::kReadResponse);
}

class Writer {
 public:
  Writer(std::span<const Record> records, const TraceMeta& meta) : rs_(records.begin(), records.end()), meta_(meta) {
    std::stable_sort(rs_.begin(), rs_.end(), [](const Record& x, const Record& y) { return x.time < y.time; });
  }
  void write(std::ostream& out);

 private:
  void on_record(const Record& r);
  void frame_tx(const Record& r);
  void completion(const Record& r);
  void counter(uint16_t port, sched::Picos t, const std::string& name, const std::string& key, const std::string& v) {
    lines_.push_back({false, t, fmt::format(R"({{"ph":"C","pid":{},"tid":0,"ts":{},"name":{},"args":{{{}:{}}}}})",
                                            port + 1u, us(t), chrome::quote(name), chrome::quote(key), v)});
  }
  void place_slices();
  void names();
  // A port's name (the device, else "port N") and a QP's, whole: "QP isoroce0/16
  // (0x10)" — QPNs repeat across devices (issue 19), so a track or counter name
  // carries its device even where Perfetto shows it outside its process.
  std::string port_name(uint16_t port) const {
    auto it = meta_.port_names.find(port);
    return it != meta_.port_names.end() ? it->second : fmt::format("port {}", port);
  }
  std::string qp_name(uint16_t port, uint32_t qpn) const {
    return fmt::format("QP {}/{} ({:#x})", port_name(port), qpn, qpn);
  }

  std::vector<Record> rs_;
  const TraceMeta& meta_;
  std::vector<Line> lines_;
  std::vector<Slice> slices_;
  std::map<uint64_t, QpTrack> tracks_;
  std::map<uint64_t, uint32_t> lanes_;  // port << 32 | QPN -> lanes used
};

void Writer::frame_tx(const Record& r) {
  if (!request_frame(r.a)) return;
  QpTrack& q = tracks_[key_of(r.port, r.qp)];
  if (q.sent_any && !psn_after(r.psn, q.max_psn)) return;  // a retransmission
  q.sent_any = true;
  q.max_psn = r.psn;
  const bool ud = r.a == wire::op::kUdSendOnly || r.a == wire::op::kUdSendOnlyImm;
  for (Message& m : q.open) {
    if (m.last_tx != sched::kNever) continue;
    if (m.first_tx == sched::kNever) m.first_tx = r.time;
    ++m.frames;
    if (ud || wire::opcode_info(static_cast<uint8_t>(r.a)).is_last()) m.last_tx = r.time;
    break;
  }
}

void Writer::completion(const Record& r) {
  if (r.b >= IBV_WC_RECV) return;
  QpTrack& q = tracks_[key_of(r.port, r.qp)];
  auto it = std::find_if(q.open.begin(), q.open.end(), [&](const Message& m) { return m.id == r.psn; });
  if (it == q.open.end()) return;
  const Message m = *it;
  q.open.erase(it);
  const auto cls = sched::to_string(static_cast<sched::FlowClass>(r.cls));
  std::string a = fmt::format(R"({{"msg_id":{},"bytes":{},"status":{},"class":"{}","frames":{},"ring_us":{})", m.id,
                              m.bytes, r.a, cls, m.frames, us(m.ring));
  if (m.first_tx != sched::kNever) {
    const sched::Picos last = m.last_tx != sched::kNever ? m.last_tx : m.first_tx;
    // Waiting for the scheduler's first grant; on the wire, paced; the response's way back.
    a += fmt::format(R"(,"post_to_first_tx_us":{},"first_to_last_tx_us":{},"last_tx_to_completion_us":{})",
                     chrome::us_diff(m.first_tx, m.post), us(last - m.first_tx), chrome::us_diff(r.time, last));
  }
  a += "}";
  slices_.push_back({r.port, r.qp, m.post - std::min(m.post, m.ring), r.time,
                     fmt::format("{} {} B", chrome::wr_name(m.opcode), m.bytes), std::string(cls), std::move(a)});
}

void Writer::on_record(const Record& r) {
  const bool port = r.qp == trace::kNoQp;
  lines_.push_back({false, r.time,
                    fmt::format(R"({{"ph":"i","s":"{}","pid":{},"tid":{},"ts":{},"name":"{}","args":{}}})",
                                port ? "p" : "t", r.port + 1u, port ? 0u : r.qp, us(r.time), trace::name(r.event),
                                chrome::args(r))});
  switch (r.event) {
    case Event::kPost: tracks_[key_of(r.port, r.qp)].open.push_back({r.psn, r.a, r.bytes, r.time, r.b}); break;
    case Event::kFrameTx: frame_tx(r); break;
    case Event::kCompletion: completion(r); break;
    case Event::kRate:
      counter(r.port, r.time, "rate limit " + qp_name(r.port, r.qp), "Gbps",
              fmt::format("{}", static_cast<double>(r.a) / 1e9));
      break;
    case Event::kSafeUtil:
      counter(r.port, r.time, "SafeUtil", "Gbps", fmt::format("{}", static_cast<double>(r.a) / 1e9));
      counter(r.port, r.time, "Current99", "us", us(r.b));
      break;
    case Event::kTokenGrant:
    case Event::kTokenIssue: counter(r.port, r.time, "tokens", "banked", fmt::format("{}", r.a)); break;
    default: break;
  }
}

// Slices of one QP that overlap go on lanes (the first lane whose last slice has
// ended), so that every thread's slices nest.
void Writer::place_slices() {
  std::stable_sort(slices_.begin(), slices_.end(), [](const Slice& x, const Slice& y) { return x.start < y.start; });
  std::map<uint64_t, std::vector<sched::Picos>> ends;  // per QP, per lane
  for (const Slice& s : slices_) {
    auto& lane_end = ends[key_of(s.port, s.qp)];
    uint32_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > s.start) ++lane;
    if (lane == lane_end.size() && lane < 127) lane_end.push_back(0);
    lane = std::min<uint32_t>(lane, static_cast<uint32_t>(lane_end.size() - 1));
    lane_end[lane] = s.end;
    uint32_t& used = lanes_[key_of(s.port, s.qp)];
    used = std::max(used, lane + 1);
    lines_.push_back({false, s.start,
                      fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":"{}","cat":"{}","args":{}}})",
                                  s.port + 1u, s.qp + (lane << kLaneShift), us(s.start), us(s.end - s.start), s.name,
                                  s.cat, s.args)});
  }
}

void Writer::names() {
  std::set<uint16_t> ports;
  std::set<uint64_t> qps;
  for (const auto& [port, name] : meta_.port_names) ports.insert(port);
  for (const auto& [key, label] : meta_.qp_labels) qps.insert(key);
  for (const Record& r : rs_) {
    ports.insert(r.port);
    if (r.qp != trace::kNoQp) qps.insert(key_of(r.port, r.qp));
  }
  for (const TraceCounter& c : meta_.counters) ports.insert(c.port);
  auto meta_line = [&](uint32_t pid, uint32_t tid, std::string_view what, const std::string& args) {
    lines_.push_back({true, 0, fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"{}","args":{}}})", pid, tid, what, args)});
  };
  for (uint16_t p : ports) {
    const std::string name = port_name(p);
    meta_line(p + 1u, 0, "process_name", fmt::format(R"({{"name":{}}})", chrome::quote(name)));
    meta_line(p + 1u, 0, "process_sort_index", fmt::format(R"({{"sort_index":{}}})", p));
    meta_line(p + 1u, 0, "thread_name", R"j({"name":"scheduler (port)"})j");
  }
  for (uint64_t key : qps) {
    const auto port = static_cast<uint16_t>(key >> 32);
    const auto qpn = static_cast<uint32_t>(key);
    auto it = meta_.qp_labels.find(key);
    const std::string label = it != meta_.qp_labels.end() ? " (" + it->second + ")" : "";
    const uint32_t lanes = std::max<uint32_t>(1, lanes_.count(key) ? lanes_[key] : 1);
    for (uint32_t lane = 0; lane < lanes; ++lane)
      meta_line(port + 1u, qpn + (lane << kLaneShift), "thread_name",
                fmt::format(R"({{"name":{}}})", chrome::quote(fmt::format("{}{}{}", qp_name(port, qpn), label,
                                                                                  lane ? fmt::format(" #{}", lane) : ""))));
  }
}

void Writer::write(std::ostream& out) {
  for (const Record& r : rs_) on_record(r);
  for (const TraceCounter& c : meta_.counters)
    counter(c.port, c.time, c.name, c.key, fmt::format("{}", std::isfinite(c.value) ? c.value : 0.0));
  place_slices();
  names();
  std::stable_sort(lines_.begin(), lines_.end(), [](const Line& x, const Line& y) {
    if (x.meta != y.meta) return x.meta;
    return x.ts < y.ts;
  });
  out << R"({"displayTimeUnit":"ns","otherData":{"generator":)" << chrome::quote(meta_.source) << R"(,"records":)" << rs_.size()
      << R"(,"dropped":)" << meta_.dropped << R"(,"truncated":)" << meta_.truncated;
  if (meta_.seed) out << R"(,"seed":)" << *meta_.seed;
  out << R"(,"time_unit":"us"},)" << "\n\"traceEvents\":[\n";
  for (size_t i = 0; i < lines_.size(); ++i) out << (i ? ",\n" : "") << lines_[i].text;
  out << "\n]}\n";
}

}  // namespace

void write_chrome_trace(std::ostream& out, std::span<const Record> records, const TraceMeta& meta) {
  Writer(records, meta).write(out);
}

}  // namespace isoroce::tools
