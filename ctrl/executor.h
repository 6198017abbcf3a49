// The seam between the control thread and the thread that owns a device's
// engine: every engine call of an operation runs through Executor::call. In
// isoroced that is the device's worker lcore (dataplane::Worker::call over an
// rte_ring); in tests/ctrl it is the test itself, running the function inline
// at its virtual time.
#pragma once

#include <functional>

#include "sched/scheduler.h"

namespace isoroce::ctrl {

class Executor {
 public:
  // Runs fn on the engine's thread with the current time and returns when it
  // has run. Never from that thread itself.
  virtual void call(const std::function<void(sched::Picos now)>& fn) = 0;

 protected:
  ~Executor() = default;
};

}  // namespace isoroce::ctrl
