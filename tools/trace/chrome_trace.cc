#include "tools/trace/chrome_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

namespace isoroce::tools {
namespace {

constexpr uint32_t kPortQp = trace::kNoQp;  // records about the whole port

std::string ts(sched::Picos ps) { return fmt::format("{}.{:06}", ps / 1'000'000, ps % 1'000'000); }

uint32_t tid(uint32_t qp) { return qp == kPortQp ? 0 : qp; }

bool is_counter(trace::Event e) {
  using E = trace::Event;
  return e == E::kRate || e == E::kDcqcnCut || e == E::kDcqcnIncrease || e == E::kSafeUtil || e == E::kTokenIssue;
}

// The counter track of a record: its name and value.
std::pair<std::string, uint64_t> counter(const trace::Record& r) {
  using E = trace::Event;
  switch (r.event) {
    case E::kSafeUtil: return {"safe_util bps", r.a};
    case E::kTokenIssue: return {"tokens banked", r.a};
    default: return {fmt::format("rate QP {} bps", r.qp), r.a};
  }
}

}  // namespace

void write_chrome_trace(std::ostream& out, std::span<const trace::Record> records, const TraceMeta& meta) {
  std::vector<trace::Record> rs(records.begin(), records.end());
  std::stable_sort(rs.begin(), rs.end(), [](const trace::Record& x, const trace::Record& y) { return x.time < y.time; });
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":\"" << meta.source << "\",\"records\":" << rs.size()
      << ",\"dropped\":" << meta.dropped << ",\"truncated\":" << meta.truncated << "},\n\"traceEvents\":[\n";
  bool first = true;
  auto line = [&](const std::string& s) {
    out << (first ? "" : ",\n") << s;
    first = false;
  };
  // Names of the ports and QPs that appear.
  std::set<uint16_t> ports;
  std::set<std::pair<uint16_t, uint32_t>> qps;
  for (const auto& r : rs) {
    ports.insert(r.port);
    qps.insert({r.port, tid(r.qp)});
  }
  for (uint16_t p : ports) {
    auto it = meta.port_names.find(p);
    const std::string name = it != meta.port_names.end() ? it->second : fmt::format("port {}", p);
    line(fmt::format(R"j({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"{}"}}}})j", p, name));
  }
  for (const auto& [p, q] : qps)
    line(fmt::format(R"j({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})j", p, q,
                     q == 0 ? std::string("port") : fmt::format("QP {}", q)));
  // Messages: post .. completion of the same (port, QP, message id).
  std::map<std::tuple<uint16_t, uint32_t, uint32_t>, const trace::Record*> posted;
  for (const auto& r : rs) {
    const std::string name(trace::name(r.event));
    if (r.event == trace::Event::kPost) posted[{r.port, r.qp, r.psn}] = &r;
    if (r.event == trace::Event::kCompletion) {
      auto it = posted.find({r.port, r.qp, r.psn});
      if (it != posted.end()) {
        const trace::Record& p = *it->second;
        line(fmt::format(R"j({{"ph":"X","cat":"message","name":"message {} ({} B)","pid":{},"tid":{},"ts":{},"dur":{},)j"
                         R"j("args":{{"msg":{},"bytes":{},"opcode":{},"status":{},"class":{}}}}})j",
                         r.psn, p.bytes, r.port, tid(r.qp), ts(p.time), ts(r.time - p.time), r.psn, p.bytes, p.a,
                         r.a, r.cls));
        posted.erase(it);
      }
    }
    if (is_counter(r.event)) {
      const auto [cname, value] = counter(r);
      line(fmt::format(R"j({{"ph":"C","name":"{}","pid":{},"ts":{},"args":{{"value":{}}}}})j", cname, r.port,
                       ts(r.time), value));
    }
    line(fmt::format(R"j({{"ph":"i","s":"t","cat":"event","name":"{}","pid":{},"tid":{},"ts":{},)j"
                     R"j("args":{{"qp":{},"psn":{},"bytes":{},"class":{},"a":{},"b":{}}}}})j",
                     name, r.port, tid(r.qp), ts(r.time), r.qp, r.psn, r.bytes, r.cls, r.a, r.b));
  }
  out << "\n]}\n";
}

}  // namespace isoroce::tools
