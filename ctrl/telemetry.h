// DPDK telemetry commands (read them with dpdk-telemetry.py -f FILE_PREFIX):
//   /isoroce/devices   /isoroce/qps   /isoroce/qp,<qpn>   /isoroce/sched
//   /isoroce/stats     /isoroce/status
// Each answers from the same views as the control socket (Daemon::*_view).
#pragma once

namespace isoroce::ctrl {

class Daemon;

void register_telemetry(Daemon* daemon);
// Later calls answer "stopping" instead of touching the daemon.
void unregister_telemetry();

}  // namespace isoroce::ctrl
