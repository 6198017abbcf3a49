// Names of the flow enums (as scenario files spell them), the work completion
// status names, and the latency summary.
#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <vector>

#include "workload/flow_config.h"
#include "workload/flow_report.h"

namespace isoroce::workload {

namespace {

constexpr std::array<std::string_view, 2> kTransports = {"rc", "ud"};
constexpr std::array<std::string_view, 7> kVerbs = {"send", "send_imm", "write", "write_imm",
                                                    "read", "fetch_add", "cmp_swap"};
constexpr std::array<std::string_view, 4> kClasses = {"latency", "throughput", "bandwidth", "auto"};

template <typename E, size_t N>
bool parse_enum(const std::array<std::string_view, N>& names, std::string_view s, E* out) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view to_string(Transport t) { return kTransports[static_cast<size_t>(t)]; }
std::string_view to_string(Verb v) { return kVerbs[static_cast<size_t>(v)]; }
std::string_view to_string(FlowClass c) { return kClasses[static_cast<size_t>(c)]; }
bool parse_transport(std::string_view s, Transport* out) { return parse_enum(kTransports, s, out); }
bool parse_verb(std::string_view s, Verb* out) { return parse_enum(kVerbs, s, out); }
bool parse_flow_class(std::string_view s, FlowClass* out) { return parse_enum(kClasses, s, out); }

std::string_view wc_status_name(int status) {
  static constexpr std::string_view kNames[] = {
      "IBV_WC_SUCCESS",           "IBV_WC_LOC_LEN_ERR",         "IBV_WC_LOC_QP_OP_ERR",
      "IBV_WC_LOC_EEC_OP_ERR",    "IBV_WC_LOC_PROT_ERR",        "IBV_WC_WR_FLUSH_ERR",
      "IBV_WC_MW_BIND_ERR",       "IBV_WC_BAD_RESP_ERR",        "IBV_WC_LOC_ACCESS_ERR",
      "IBV_WC_REM_INV_REQ_ERR",   "IBV_WC_REM_ACCESS_ERR",      "IBV_WC_REM_OP_ERR",
      "IBV_WC_RETRY_EXC_ERR",     "IBV_WC_RNR_RETRY_EXC_ERR",   "IBV_WC_LOC_RDD_VIOL_ERR",
      "IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR",      "IBV_WC_INV_EECN_ERR",
      "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",           "IBV_WC_RESP_TIMEOUT_ERR",
      "IBV_WC_GENERAL_ERR",       "IBV_WC_TM_ERR",              "IBV_WC_TM_RNDV_INCOMPLETE"};
  if (status < 0 || static_cast<size_t>(status) >= std::size(kNames)) return "IBV_WC_UNKNOWN";
  return kNames[status];
}

LatencySummary summarize(std::span<const Picos> picos) {
  LatencySummary s;
  if (picos.empty()) return s;
  std::vector<Picos> v(picos.begin(), picos.end());
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    i = std::clamp<size_t>(i, 1, v.size());
    return static_cast<double>(v[i - 1]) / 1e6;
  };
  s.p50_us = rank(0.50);
  s.p99_us = rank(0.99);
  s.p999_us = rank(0.999);
  s.max_us = static_cast<double>(v.back()) / 1e6;
  long double sum = 0;
  for (Picos p : v) sum += p;
  s.mean_us = static_cast<double>(sum / v.size() / 1e6);
  return s;
}

}  // namespace isoroce::workload
