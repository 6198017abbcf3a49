#include "sched/rnic_params.h"

#include <charconv>
#include <cmath>

namespace isoroce::sched {

namespace {

struct Preset {
  std::string_view name;
  RnicParams params;
};

// Calibrated with bench/justitia/calibrate.sweep.toml against the paper's Figs. 1-2
// (docs/isolation.md gives the figures, the fit and the error per figure).
constexpr Preset kPresets[] = {
    // 40 Gb/s, MTU 1024: 3.84x median / 4.05x p99 (paper 3.82x / 4x).
    {"cx4-roce", {.batch_packets = 2, .pipeline_packets = 22, .pipeline_jitter_packets = 4}},
    // 56 Gb/s, MTU 4096: 1.85x / 2.33x (paper 1.85x / 2.23x); 5.4 M msgs/s gives
    // Fig. 2's 69.5% message-rate loss.
    {"cx3-ib", {.batch_packets = 1, .pipeline_packets = 0, .pipeline_jitter_packets = 3,
                .max_msgs_per_sec = 5'400'000}},
    // 40 Gb/s, MTU 1024: 1.29x / 94.9x (paper 1.11x / 95x): packet round robin, but
    // the first 980 KB of a new message leave in one go.
    {"t6-iwarp", {.batch_packets = 1, .message_burst_bytes = 980'000}},
    // Whole-message round robin: exactly the fifo policy.
    {"fifo", {.batch_packets = 1, .message_burst_bytes = kWholeMessage}},
};

constexpr std::string_view kNames[] = {"cx4-roce", "cx3-ib", "t6-iwarp", "fifo"};
static_assert(std::size(kNames) == std::size(kPresets));

bool parse_u64(std::string_view text, double scale, std::uint64_t max, std::uint64_t* out) {
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v) || v < 0) return false;
  const double x = std::round(v * scale);
  if (x > static_cast<double>(max) || (scale == 1 && x != v)) return false;
  *out = static_cast<std::uint64_t>(x);
  return true;
}

}  // namespace

std::string_view validate(const RnicParams& p) {
  if (p.batch_packets == 0 || p.batch_packets > 1'000'000) return "batch_packets must be 1 .. 1000000";
  if (p.pipeline_packets > 1'000'000) return "pipeline_packets must be 0 .. 1000000";
  if (p.pipeline_jitter_packets > 1'000'000) return "pipeline_jitter_packets must be 0 .. 1000000";
  if (p.max_msgs_per_sec > 1'000'000'000'000ull) return "max_mops must be at most 1000000";
  return {};
}

bool set(RnicParams& p, std::string_view name, std::string_view value) {
  RnicParams q = p;
  std::uint64_t u = 0;
  bool ok = false;
  if (name == "preset") {
    ok = rnic_preset(value, &q);
    q.seed = p.seed;
  } else if (name == "batch_packets") {
    ok = parse_u64(value, 1, 1'000'000, &u) && u >= 1;
    q.batch_packets = static_cast<std::uint32_t>(u);
  } else if (name == "pipeline_packets") {
    ok = parse_u64(value, 1, 1'000'000, &u);
    q.pipeline_packets = static_cast<std::uint32_t>(u);
  } else if (name == "pipeline_jitter_packets") {
    ok = parse_u64(value, 1, 1'000'000, &u);
    q.pipeline_jitter_packets = static_cast<std::uint32_t>(u);
  } else if (name == "seed") {
    ok = parse_u64(value, 1, ~0ull >> 11, &q.seed);
  } else if (name == "message_burst_bytes") {
    if (value == "whole") {
      q.message_burst_bytes = kWholeMessage;
      ok = true;
    } else {
      ok = parse_u64(value, 1, kWholeMessage - 1, &q.message_burst_bytes);
    }
  } else if (name == "max_mops") {
    ok = parse_u64(value, 1e6, 1'000'000'000'000ull, &q.max_msgs_per_sec);
  }
  if (!ok || !validate(q).empty()) return false;
  p = q;
  return true;
}

bool set(RnicParams& p, std::string_view assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) return false;
  return set(p, assignment.substr(0, eq), assignment.substr(eq + 1));
}

bool rnic_preset(std::string_view name, RnicParams* out) {
  for (const Preset& p : kPresets) {
    if (p.name == name) {
      *out = p.params;
      return true;
    }
  }
  return false;
}

std::span<const std::string_view> rnic_preset_names() { return kNames; }

}  // namespace isoroce::sched
