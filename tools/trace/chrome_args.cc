#include "tools/trace/chrome_args.h"

#include <fmt/format.h>
#include <infiniband/verbs.h>

#include "sched/justitia_params.h"

namespace isoroce::tools::chrome {

using trace::Event;

std::string us(sched::Picos ps) { return fmt::format("{}.{:06}", ps / 1'000'000, ps % 1'000'000); }

std::string us_diff(sched::Picos later, sched::Picos earlier) {
  return later >= earlier ? us(later - earlier) : "-" + us(earlier - later);
}

std::string quote(std::string_view s) {
  std::string q = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (static_cast<unsigned char>(c) < 0x20) q += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    else q += c;
  }
  return q + "\"";
}

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

namespace {

std::string gbps(uint64_t bps) { return fmt::format("{}", static_cast<double>(bps) / 1e9); }

// The decoded fields of r, each as ',"key":value'.
std::string decoded(const trace::Record& r) {
  switch (r.event) {
    case Event::kPost:
      return fmt::format(R"(,"verb":"{}","msg_id":{},"ring_us":{})", wr_name(r.a), r.psn, us(r.b));
    case Event::kEligible:
      return fmt::format(R"(,"S_us":{},"F_us":{},"phi":{})", us(r.a), us(r.b), trace::phi_of(r.psn));
    case Event::kTokenGrant: return fmt::format(R"(,"tokens_left":{})", r.a);
    case Event::kGrant: return fmt::format(R"(,"departure_us":{},"control":{})", us(r.a), r.b != 0);
    case Event::kFrameTx:
    case Event::kFrameRx: return fmt::format(R"(,"opcode":{})", r.a);
    case Event::kAck:
    case Event::kNak: return fmt::format(R"(,"syndrome":{})", r.a);
    case Event::kCnp: return fmt::format(R"(,"received":{})", r.a != 0);
    case Event::kRetransmit: return fmt::format(R"(,"retries_left":{})", r.a);
    case Event::kCompletion:
      return fmt::format(R"(,"status":{},"opcode":{},"receive":{})", r.a, r.b, r.b >= IBV_WC_RECV);
    case Event::kRate: return fmt::format(R"(,"Gbps":{})", gbps(r.a));
    case Event::kDcqcnCut:
      return fmt::format(R"(,"rate_Gbps":{},"alpha":{})", gbps(r.a), static_cast<double>(r.b) / (1 << 20));
    case Event::kDcqcnIncrease: return fmt::format(R"(,"rate_Gbps":{},"target_Gbps":{})", gbps(r.a), gbps(r.b));
    case Event::kSafeUtil: return fmt::format(R"(,"safe_util_Gbps":{},"current99_us":{})", gbps(r.a), us(r.b));
    case Event::kTokenIssue: return fmt::format(R"(,"tokens_banked":{},"tau_us":{})", r.a, us(r.b));
    case Event::kDrop: return fmt::format(R"(,"reason":{})", r.a);
    default: return {};
  }
}

}  // namespace

std::string args(const trace::Record& r) {
  return fmt::format(R"({{"qp":{},"psn":{},"bytes":{},"class":{},"class_name":"{}","a":{},"b":{}{}}})", r.qp, r.psn,
                     r.bytes, r.cls, sched::to_string(static_cast<sched::FlowClass>(r.cls)), r.a, r.b, decoded(r));
}

}  // namespace isoroce::tools::chrome
