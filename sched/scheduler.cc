#include "sched/scheduler.h"

#include "sched/index_list.h"  // kNil

namespace isoroce::sched {

std::string_view validate(const Config& config) {
  if (config.link_bps == 0) return "link_bps must be positive";
  if (config.max_qps == 0) return "max_qps must be positive";
  if (config.max_qps >= kNil) return "max_qps must be below 2^32 - 1";
  if (config.control_capacity == 0 || config.control_capacity > (1u << 30)) {
    return "control_capacity must be in 1 .. 2^30";
  }
  if (config.catch_up > 1'000'000'000'000) return "catch_up must be at most 1 s";
  return {};
}

}  // namespace isoroce::sched
