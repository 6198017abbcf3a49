// Every device's CM agent (QP1): made, started, paused around a new engine,
// stopped; recorded in the QP registry as the daemon's own.
#include "ctrl/control.h"
#include "ctrl/log.h"

namespace isoroce::ctrl {

void Control::start_cm(DeviceEntry& d) {
  if (d.cm) return;
  auto cm = std::make_unique<CmAgent>(*d.driver, cm_seed_);
  std::string error;
  d.run([&](sched::Picos now) { error = cm->start(now); });
  if (!error.empty()) {
    d.run([&](sched::Picos) { cm->stop(); });
    log(LogLevel::kError, "{}: the CM agent (QP1) failed: {}; rdma_cm cannot connect through it", d.name(), error);
    return;
  }
  d.cm = std::move(cm);
  registry_.set(&d, CmAgent::kQpn, QpInfo::daemons_own());
}

void Control::stop_cm(DeviceEntry& d) {
  if (!d.cm) return;
  d.run([&](sched::Picos) { d.cm->stop(); });
  d.cm.reset();
  registry_.erase(&d, CmAgent::kQpn);
}

void Control::pause_cm(DeviceEntry& d) {
  if (!d.cm) return;
  d.run([&](sched::Picos) { d.cm->stop(); });
  registry_.erase(&d, CmAgent::kQpn);
}

void Control::resume_cm(DeviceEntry& d) {
  if (!d.cm) return start_cm(d);
  std::string error;
  d.run([&](sched::Picos now) { error = d.cm->start(now); });
  if (!error.empty()) {
    d.run([&](sched::Picos) { d.cm->stop(); });
    log(LogLevel::kError, "{}: the CM agent (QP1) failed on the new engine: {}", d.name(), error);
    return;
  }
  registry_.set(&d, CmAgent::kQpn, QpInfo::daemons_own());
}

}  // namespace isoroce::ctrl
