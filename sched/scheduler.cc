#include "sched/scheduler.h"

#include "sched/fifo.h"
#include "sched/justitia.h"
#include "sched/rnic.h"
#include "sched/tassel.h"

namespace isoroce::sched {

std::string_view to_string(Policy policy) {
  switch (policy) {
    case Policy::kFifo:
      return "fifo";
    case Policy::kTassel:
      return "tassel";
    case Policy::kJustitia:
      return "justitia";
    case Policy::kRnic:
      return "rnic";
  }
  return "?";
}

bool parse_policy(std::string_view text, Policy* policy) {
  if (text == "fifo") {
    *policy = Policy::kFifo;
  } else if (text == "tassel") {
    *policy = Policy::kTassel;
  } else if (text == "justitia") {
    *policy = Policy::kJustitia;
  } else if (text == "rnic") {
    *policy = Policy::kRnic;
  } else {
    return false;
  }
  return true;
}

std::string_view validate(const Config& config) {
  if (config.link_bps == 0) return "link_bps must be positive";
  if (config.max_qps == 0) return "max_qps must be positive";
  if (config.max_qps >= kNil) return "max_qps must be below 2^32 - 1";
  if (config.control_capacity == 0 || config.control_capacity > (1u << 30)) {
    return "control_capacity must be in 1 .. 2^30";
  }
  return {};
}

std::unique_ptr<Scheduler> make_scheduler(Policy policy, const Config& config) {
  if (!validate(config).empty()) return nullptr;
  switch (policy) {
    case Policy::kFifo:
      return std::make_unique<FifoScheduler>(config);
    case Policy::kTassel:
      return std::make_unique<TasselScheduler>(config);
    case Policy::kJustitia:
      if (!validate(config.justitia).empty()) return nullptr;
      return std::make_unique<JustitiaScheduler>(config);
    case Policy::kRnic:
      if (!validate(config.rnic).empty()) return nullptr;
      return std::make_unique<RnicScheduler>(config);
  }
  return nullptr;
}

}  // namespace isoroce::sched
