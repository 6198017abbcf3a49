// The daemon's devices and workers: EAL, one DPDK port and engine per
// configured port, the worker lcores that poll them (round robin), and the
// driver through which the control side reaches each (ctrl/device_entry.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ctrl/config.h"
#include "ctrl/device_entry.h"
#include "ctrl/doorbell.h"
#include "dataplane/dpdk/clock.h"
#include "dataplane/dpdk/worker.h"

namespace isoroce::ctrl {

class DeviceSet {
 public:
  explicit DeviceSet(const DaemonConfig& config) : config_(config) {}
  // Stops the workers and cleans EAL up; the entries start() made must be
  // gone by then (they close the ports).
  ~DeviceSet();
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  // EAL, ports, devices (appended to *out, with their pumps), workers
  // launched. false and *error on failure; the destructor undoes the rest.
  bool start(std::vector<std::unique_ptr<DeviceEntry>>* out, std::string* error);
  // Stops the workers and waits for their lcores (idempotent).
  void stop_workers();
  const dataplane::TscClock& clock() const { return *clock_; }
  // The workers in the status view.
  nlohmann::json workers_view() const;

 private:
  bool init_eal(std::string* error);
  bool port_ids(std::vector<uint16_t>* ids, std::string* error);
  // A port given as an interface name (config.h is_interface_port): AF_XDP,
  // else AF_PACKET, each plugged now; *devargs says which.
  std::unique_ptr<dataplane::Port> open_interface(const std::string& port_name, const PortConfig& pc,
                                                  std::string* devargs, std::string* error);
  bool launch_workers(std::vector<std::unique_ptr<DeviceEntry>>& entries, std::string* error);
  // Logs the larger RoCE MTU a kernel port's interface carries, if any.
  void kernel_path_hint(const std::string& name, const PortConfig& pc, const dataplane::Port& port);

  const DaemonConfig& config_;
  std::unique_ptr<dataplane::TscClock> clock_;
  // One per worker (ctrl/doorbell.h); declared first: outlives the workers.
  std::vector<std::unique_ptr<DoorbellPage>> doorbells_;
  std::vector<std::unique_ptr<dataplane::Worker>> workers_;
  std::vector<unsigned> worker_lcores_;
  bool eal_ready_ = false;
  bool pdump_ready_ = false;  // dpdk-dumpcap may attach
  bool launched_ = false;
};

}  // namespace isoroce::ctrl
