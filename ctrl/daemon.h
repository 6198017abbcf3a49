// isoroced: a Control (ctrl/control.h) whose devices are DPDK ports polled by
// worker lcores (DeviceSet), served on a Unix socket (SessionServer), with
// justitia's reference flows and DPDK telemetry. The control thread (the EAL
// main lcore) serves clients; every engine call runs on the device's worker.
#pragma once

#include <string>
#include <vector>

#include "ctrl/config.h"
#include "ctrl/control.h"
#include "ctrl/devices.h"
#include "ctrl/session_server.h"

namespace isoroce::ctrl {

class Daemon final : public Control {
 public:
  explicit Daemon(DaemonConfig config);
  ~Daemon() override;

  // EAL, ports, workers, the socket, telemetry. On failure: *error, and
  // nothing left half-started that the destructor cannot undo.
  bool start(std::string* error);
  // Serves clients until SIGTERM/SIGINT; returns the exit status.
  int run();

  json status_view() override;
  // A device's CM agent started: its event fd joins the socket's epoll.
  void watch_cm_fd(int fd) override;

  // Policy justitia: starts d's reference flow (its peer: the other port with
  // --loopback), or notes and logs why it cannot. Workers must be running.
  void start_reference_flow(DeviceEntry& d) override;
  // Stops every reference flow with an end on d; returns their sources.
  std::vector<DeviceEntry*> stop_reference_flows(DeviceEntry& d) override;

 private:
  void stop_reference_flow(DeviceEntry& d);
  void start_echo(DeviceEntry& d);
  void shutdown_qps();
  // SIGHUP: the config file's scheduler settings (policy, [dcqcn], [justitia])
  // on every device that no client has open; the others keep theirs (logged).
  void reload();
  void log_devices();

  DaemonConfig config_;
  DeviceSet set_;
  SessionServer server_;
  int signal_fd_ = -1;
  std::vector<int> cm_fds_;  // the CM agents' event fds (drain_cm_events when ready)
  sched::Picos started_at_ = 0;
};

}  // namespace isoroce::ctrl
