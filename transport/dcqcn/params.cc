#include "transport/dcqcn/params.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace isoroce::dcqcn {

namespace {

constexpr ParamInfo kTable[] = {
    {"enabled", ParamType::kBool, "", "roce_np/enable, roce_rp/enable (sysfs /sys/class/net/<if>/ecn/)",
     "CNPs for CE-marked packets and rate reaction to CNPs on this port"},
    {"alpha_update_us", ParamType::kDouble, "us", "rp_dce_tcp_rtt",
     "period of the alpha update: alpha = (1 - g) alpha + g if a CNP arrived in the period, else (1 - g) alpha"},
    {"g", ParamType::kDouble, "", "rp_dce_tcp_g (g = (1024 - value) / 1024)", "gain of the alpha update, (0, 1]"},
    {"initial_alpha", ParamType::kDouble, "", "rp_initial_alpha_value (value / 1024)",
     "alpha when the first CNP of a QP arrives, [0, 1]"},
    {"rate_decrease_period_us", ParamType::kDouble, "us", "rp_rate_reduce_monitor_period",
     "the rate is cut at most once per period, if a CNP arrived in it: rate = rate (1 - alpha / 2)"},
    {"rate_on_first_cnp_mbps", ParamType::kDouble, "Mb/s", "rp_rate_to_set_on_first_cnp",
     "current and target rate on the first CNP of a QP (0: keep the current rate)"},
    {"min_rate_mbps", ParamType::kDouble, "Mb/s", "rp_min_rate", "no cut goes below this rate"},
    {"clamp_target", ParamType::kBool, "", "rp_clamp_tgt_rate",
     "every cut sets the target rate to the current rate (otherwise only when the timer has increased the rate "
     "since the last cut, as rp_clamp_tgt_rate_ati = 1)"},
    {"rp_timer_us", ParamType::kDouble, "us", "rp_time_reset", "period of the rate increase timer after a cut"},
    {"byte_counter_bytes", ParamType::kUint, "bytes", "rp_byte_reset",
     "a rate increase event every this many bytes sent after a cut (0: no byte counter)"},
    {"fast_recovery_stages", ParamType::kUint, "", "rp_threshold",
     "increase events of fast recovery (rate halfway to target) before additive increase"},
    {"ai_mbps", ParamType::kDouble, "Mb/s", "rp_ai_rate", "target increase per additive increase event"},
    {"hai_mbps", ParamType::kDouble, "Mb/s", "rp_hai_rate", "target increase per hyper increase event"},
    {"min_time_between_cnps_us", ParamType::kDouble, "us", "np_min_time_between_cnps",
     "a QP sends at most one CNP per this period"},
    {"cnp_dscp", ParamType::kUint, "", "np_cnp_dscp", "DSCP of CNPs, 0..63"},
};

template <typename T>
bool parse_number(std::string_view s, T* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end;
}

std::string fmt_double(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Shortest text that reads back to the same double.
  for (int prec = 1; prec <= 17; ++prec) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    double back = 0;
    if (parse_number(std::string_view(b), &back) && back == v) return b;
  }
  return buf;
}

struct Field {
  bool* b = nullptr;
  double* d = nullptr;
  uint64_t* u64 = nullptr;
  uint32_t* u32 = nullptr;
};

Field field(Params& p, std::string_view n) {
  if (n == "enabled") return {.b = &p.enabled};
  if (n == "alpha_update_us") return {.d = &p.alpha_update_us};
  if (n == "g") return {.d = &p.g};
  if (n == "initial_alpha") return {.d = &p.initial_alpha};
  if (n == "rate_decrease_period_us") return {.d = &p.rate_decrease_period_us};
  if (n == "rate_on_first_cnp_mbps") return {.d = &p.rate_on_first_cnp_mbps};
  if (n == "min_rate_mbps") return {.d = &p.min_rate_mbps};
  if (n == "clamp_target") return {.b = &p.clamp_target};
  if (n == "rp_timer_us") return {.d = &p.rp_timer_us};
  if (n == "byte_counter_bytes") return {.u64 = &p.byte_counter_bytes};
  if (n == "fast_recovery_stages") return {.u32 = &p.fast_recovery_stages};
  if (n == "ai_mbps") return {.d = &p.ai_mbps};
  if (n == "hai_mbps") return {.d = &p.hai_mbps};
  if (n == "min_time_between_cnps_us") return {.d = &p.min_time_between_cnps_us};
  if (n == "cnp_dscp") return {.u32 = &p.cnp_dscp};
  return {};
}

std::string known_names() {
  std::string s;
  for (const auto& i : kTable) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

// Per-parameter ranges: [lo, hi]; lo_open excludes lo.
struct Range {
  double lo, hi;
  bool lo_open;
};
Range range_of(std::string_view n) {
  if (n == "g") return {0, 1, true};
  if (n == "initial_alpha") return {0, 1, false};
  if (n == "alpha_update_us" || n == "rate_decrease_period_us" || n == "rp_timer_us") return {0, 1e9, true};
  if (n == "min_rate_mbps") return {0, 1e7, true};
  if (n == "cnp_dscp") return {0, 63, false};
  if (n == "fast_recovery_stages") return {0, 1e6, false};
  if (n == "byte_counter_bytes") return {0, 1e15, false};
  return {0, 1e9, false};  // rates in Mb/s, min_time_between_cnps_us
}

std::string range_text(const Range& r) {
  return std::string(r.lo_open ? "(" : "[") + fmt_double(r.lo) + ", " + fmt_double(r.hi) + "]";
}

}  // namespace

std::span<const ParamInfo> param_table() { return kTable; }

std::string set_param(Params& p, std::string_view name, std::string_view value) {
  const Field f = field(p, name);
  const std::string n(name);
  if (!f.b && !f.d && !f.u64 && !f.u32) return "unknown parameter \"" + n + "\" (known: " + known_names() + ")";
  const std::string v(value);
  if (f.b) {
    if (value == "true" || value == "1") *f.b = true;
    else if (value == "false" || value == "0") *f.b = false;
    else return n + ": \"" + v + "\" is not true or false";
    return {};
  }
  const Range r = range_of(name);
  if (f.d) {
    double x = 0;
    if (!parse_number(value, &x) || !std::isfinite(x)) return n + ": \"" + v + "\" is not a number";
    if (x < r.lo || x > r.hi || (r.lo_open && x == r.lo)) return n + ": must be in " + range_text(r) + " (got " + v + ")";
    *f.d = x;
    return {};
  }
  uint64_t x = 0;
  if (!parse_number(value, &x)) return n + ": \"" + v + "\" is not a non-negative integer";
  if (static_cast<double>(x) > r.hi) return n + ": must be in " + range_text(r) + " (got " + v + ")";
  if (f.u64) *f.u64 = x;
  else *f.u32 = static_cast<uint32_t>(x);
  return {};
}

std::string set_param(Params& p, std::string_view nv) {
  const size_t eq = nv.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return "\"" + std::string(nv) + "\" is not NAME=VALUE";
  return set_param(p, nv.substr(0, eq), nv.substr(eq + 1));
}

std::string get_param(const Params& p, std::string_view name) {
  const Field f = field(const_cast<Params&>(p), name);
  if (f.b) return *f.b ? "true" : "false";
  if (f.d) return fmt_double(*f.d);
  if (f.u64) return std::to_string(*f.u64);
  if (f.u32) return std::to_string(*f.u32);
  return {};
}

std::string validate(const Params& p) {
  Params copy = p;
  for (const auto& i : kTable) {
    if (i.type == ParamType::kBool) continue;
    // Every value must be one set_param would accept.
    if (auto e = set_param(copy, i.name, get_param(p, i.name)); !e.empty()) return e;
  }
  if (p.hai_mbps < p.ai_mbps) return "hai_mbps: is below ai_mbps";
  return {};
}

}  // namespace isoroce::dcqcn
