#include "sched/justitia_params.h"

#include <charconv>
#include <cmath>
#include <string>

namespace isoroce::sched {

namespace {

constexpr std::string_view kClassNames[] = {"latency", "throughput", "bandwidth", "reference", "auto"};
constexpr std::string_view kSignalNames[] = {"probe", "passive", "both"};
constexpr std::string_view kClassifyNames[] = {"declared", "auto", "verify"};

template <typename E, std::size_t N>
bool parse_name(const std::string_view (&names)[N], std::string_view text, E* out) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == text) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

bool parse_number(std::string_view text, double* out) {
  if (text.empty()) return false;
  // std::from_chars for double is in libstdc++ 11+.
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

bool to_u64(double v, double scale, std::uint64_t max, std::uint64_t* out) {
  const double x = std::round(v * scale);
  if (x > static_cast<double>(max)) return false;
  *out = static_cast<std::uint64_t>(x);
  return true;
}

}  // namespace

std::string_view to_string(FlowClass cls) {
  const auto i = static_cast<std::size_t>(cls);
  return i < std::size(kClassNames) ? kClassNames[i] : "?";
}

bool parse_flow_class(std::string_view text, FlowClass* cls) { return parse_name(kClassNames, text, cls); }

std::string_view to_string(LatencySignal s) {
  const auto i = static_cast<std::size_t>(s);
  return i < std::size(kSignalNames) ? kSignalNames[i] : "?";
}

std::string_view to_string(Classify c) {
  const auto i = static_cast<std::size_t>(c);
  return i < std::size(kClassifyNames) ? kClassifyNames[i] : "?";
}

std::string_view validate(const JustitiaParams& p) {
  if (p.target99 == 0) return "target99_us must be above 0";
  if (p.ref_period == 0) return "ref_period_us must be above 0";
  if (p.window == 0 || p.window > 1'000'000) return "window must be 1 .. 1000000";
  if (p.token_bytes < 64) return "token_bytes must be at least 64";
  if (p.split_bytes < 64 || p.split_bytes > p.token_bytes) return "split_bytes must be 64 .. token_bytes";
  if (p.max_tokens == 0 || p.max_tokens > 1'000'000) return "max_tokens must be 1 .. 1000000";
  if (p.max_rate_bps > 1'600'000'000'000ull) return "max_rate_gbps must be at most 1600";
  if (p.latency_idle == 0) return "latency_idle_us must be above 0";
  if (p.classify_bytes < 64) return "classify_bytes must be at least 64";
  if (p.classify_messages == 0 || p.classify_messages > 1'000'000) return "classify_messages must be 1 .. 1000000";
  return {};
}

bool set(JustitiaParams& p, std::string_view name, std::string_view value) {
  if (name == "signal") return parse_name(kSignalNames, value, &p.signal);
  if (name == "classify") return parse_name(kClassifyNames, value, &p.classify);
  double v = 0;
  if (!parse_number(value, &v)) return false;
  JustitiaParams q = p;
  std::uint64_t u = 0;
  auto u32 = [&](std::uint32_t* field) {
    if (!to_u64(v, 1, 0xffff'ffffu, &u) || std::round(v) != v) return false;
    *field = static_cast<std::uint32_t>(u);
    return true;
  };
  auto picos = [&](Picos* field, double scale) {
    if (!to_u64(v, scale, kNever / 2, &u)) return false;
    *field = u;
    return true;
  };
  bool ok = false;
  if (name == "target99_us") ok = picos(&q.target99, 1e6);
  else if (name == "ref_period_us") ok = picos(&q.ref_period, 1e6);
  else if (name == "window") ok = u32(&q.window);
  else if (name == "token_bytes") ok = u32(&q.token_bytes);
  else if (name == "split_bytes") ok = u32(&q.split_bytes);
  else if (name == "token_ops") ok = u32(&q.token_ops);
  else if (name == "max_tokens") ok = u32(&q.max_tokens);
  else if (name == "max_rate_gbps") ok = to_u64(v, 1e9, 1'600'000'000'000ull, &q.max_rate_bps);
  else if (name == "increase_step_gbps") ok = to_u64(v, 1e9, 1'600'000'000'000ull, &q.increase_step_bps);
  else if (name == "unattainable_after_s") ok = picos(&q.unattainable_after, 1e12);
  else if (name == "latency_idle_us") ok = picos(&q.latency_idle, 1e6);
  else if (name == "classify_bytes") ok = u32(&q.classify_bytes);
  else if (name == "classify_messages") ok = u32(&q.classify_messages);
  if (!ok) return false;
  p = q;
  return true;
}

bool set(JustitiaParams& p, std::string_view assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) return false;
  return set(p, assignment.substr(0, eq), assignment.substr(eq + 1));
}

}  // namespace isoroce::sched
