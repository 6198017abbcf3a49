// One device as the control side sees it (DeviceEntry), what drives it
// (DeviceDriver: the DPDK device on a worker lcore in isoroced, an engine in
// virtual time in tests/ctrl), and the daemon's registry of QP owners.
#pragma once

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ctrl/cm_agent.h"
#include "ctrl/executor.h"
#include "ctrl/reference_echo.h"
#include "ctrl/reference_flow.h"
#include "ctrl/shm_pump.h"
#include "dataplane/dpdk/device.h"

namespace isoroce::ctrl {

using nlohmann::json;

// What operations need of a device besides its engine. Everything but
// config(), executor() and dpdk() runs on the executor (inside call()).
class DeviceDriver {
 public:
  virtual ~DeviceDriver() = default;
  virtual const dataplane::DeviceConfig& config() const = 0;
  virtual Executor& executor() = 0;
  virtual transport::Engine& engine() = 0;
  // Whether ip's MAC address is known; with solicit, asks for it first.
  virtual bool neighbor_known(const wire::IpAddr& ip, bool solicit) = 0;
  // A new engine with config (only while it has no verbs objects).
  virtual bool reconfigure(const dataplane::DeviceConfig& config, std::string* error) = 0;
  virtual void add_hook(dataplane::DeviceHook* hook) = 0;
  virtual void remove_hook(dataplane::DeviceHook* hook) = 0;
  // The port in the devices view (port, devargs, driver, mac, link_up,
  // neighbors) and its counters in the stats view ("port", "net").
  virtual json port_json() = 0;
  virtual json port_stats() = 0;
  // The DPDK device, for the daemon's own reference flows (nullptr in tests).
  virtual dataplane::Device* dpdk() { return nullptr; }
  // The thread that runs the engine: devices with the same index are run by
  // one thread, in one order (a live trace gives them one ring). 0 in tests,
  // where the test's own thread runs every device.
  virtual unsigned worker_index() const { return 0; }
  // The doorbell of the worker that polls the device (ctrl/shm_abi.h): a
  // read-only descriptor of its page to dup for a client, -1 if there is none
  // (the tests' virtual-time drivers). add_doorbell / remove_doorbell put a
  // client's eventfd into / out of the worker's wait set; on the executor.
  virtual int doorbell_page_fd() const { return -1; }
  virtual void add_doorbell(int /*fd*/) {}
  virtual void remove_doorbell(int /*fd*/) {}
  // A client that posts without a fence, relying on the worker's membarrier
  // (ctrl/shm_abi.h, kBellMembarrier): true if the worker makes that call
  // and now counts the client; on the executor.
  virtual bool add_membarrier_user() { return false; }
  virtual void remove_membarrier_user() {}
  // Lanes (docs/design.md, "Lanes"): the port's engines, each run by its own
  // worker; lane 0's is engine(). A QPN names its lane. One lane in tests.
  // With several, executor() stops every lane's worker for each call, so a
  // call may touch every lane's engine.
  virtual size_t lanes() const { return 1; }
  virtual transport::Engine& lane_engine(size_t /*k*/) { return engine(); }
  virtual size_t lane_of_qpn(uint32_t /*qpn*/) const { return 0; }
  // The worker_index() of lane k's worker (lane 0: worker_index()).
  virtual unsigned lane_worker_index(size_t /*k*/) const { return worker_index(); }
  virtual void add_lane_hook(size_t /*k*/, dataplane::DeviceHook* h) { add_hook(h); }
  virtual void remove_lane_hook(size_t /*k*/, dataplane::DeviceHook* h) { remove_hook(h); }
  // Each lane's worker and counters (the stats view); empty with one lane.
  virtual json lanes_json() { return json::array(); }
};

// Where a CQ or SRQ of a port with lanes lives: the lane its QPs are on (-1:
// none yet; its shared-memory ring is pumped by nobody until then).
struct QueueLane {
  int lane = -1;
  uint32_t max_sge = 0;  // an SRQ's, for its ring
};

struct DeviceEntry {
  std::unique_ptr<DeviceDriver> driver;
  std::unique_ptr<ShmPump> pump;  // the clients' shared-memory queues (a hook of the device; lane 0's)
  std::vector<std::unique_ptr<ShmPump>> lane_pumps;  // lanes 1.. (lane k's at k - 1)
  // Lanes > 1: where each CQ and SRQ is (changed inside run()).
  std::map<uint32_t, QueueLane> cq_lanes, srq_lanes;
  std::string ip_text;            // as configured ("10.0.0.1/24")
  uint32_t sessions = 0;          // clients that opened it
  // Policy justitia: the reference flow from this device to ref_peer (a hook of
  // the device; its peer end lives in ref_peer's engine), or why there is none.
  std::unique_ptr<ReferenceFlow> ref;
  DeviceEntry* ref_peer = nullptr;
  std::string ref_note;
  // Every device answers other daemons' reference probes (UD QPN 15); with
  // justitia and a ref_peer address it probes that peer itself.
  std::unique_ptr<ReferenceEcho> echo;
  // The IB Communication Manager on QP1 (ctrl/cm_agent.h): every device has
  // one from start (Control::start_cm), the rdma_cm operations drive it.
  std::unique_ptr<CmAgent> cm;
  std::optional<wire::IpAddr> ref_peer_ip;
  // Asynchronous events drained from the engine (control thread; telemetry reads).
  std::atomic<uint64_t> async_events{0};
  std::atomic<uint64_t> latency_target_missed{0};

  const std::string& name() const { return driver->config().name; }
  const dataplane::DeviceConfig& config() const { return driver->config(); }
  transport::Engine& engine() { return driver->engine(); }
  size_t lanes() const { return driver->lanes(); }
  transport::Engine& lane_engine(size_t k) { return driver->lane_engine(k); }
  ShmPump& lane_pump(size_t k) { return k == 0 ? *pump : *lane_pumps[k - 1]; }
  size_t qp_lane(uint32_t qpn) const { return driver->lane_of_qpn(qpn); }
  transport::Engine& qp_engine(uint32_t qpn) { return lane_engine(qp_lane(qpn)); }
  ShmPump& qp_pump(uint32_t qpn) { return lane_pump(qp_lane(qpn)); }
  // The lane of a CQ / SRQ (lane 0 with one lane or while it has no QP).
  size_t cq_lane(uint32_t cq) const { return lane_or_0(cq_lanes, cq); }
  size_t srq_lane(uint32_t srq) const { return lane_or_0(srq_lanes, srq); }
  static size_t lane_or_0(const std::map<uint32_t, QueueLane>& m, uint32_t h) {
    auto it = m.find(h);
    return it == m.end() || it->second.lane < 0 ? 0 : static_cast<size_t>(it->second.lane);
  }
  // Runs fn on the device's executor.
  template <typename F>
  void run(F&& fn) {
    driver->executor().call([&](sched::Picos now) { fn(now); });
  }
};

// What the daemon knows of a QP beyond the engine: its owner and class.
struct QpInfo {
  uint64_t client = 0;
  int pid = 0;
  uint32_t uid = 0;
  std::string comm;
  std::string cls = "bandwidth";
  uint64_t app = 0;  // Justitia's application: the client connection (session id); 0: the daemon's own
  std::string tenant;  // "" none (ctrl/tenants.h)

  // A QP of the daemon itself (QP1, the reference echo and flow): owned by
  // this process, class "reference".
  static QpInfo daemons_own() {
    QpInfo info;
    info.pid = getpid();
    info.uid = geteuid();
    info.comm = "isoroced";
    info.cls = "reference";
    return info;
  }
};

// QP owners by device and QPN; telemetry reads it from its own thread.
class QpRegistry {
 public:
  void set(const DeviceEntry* d, uint32_t qpn, QpInfo info) {
    std::lock_guard lock(mu_);
    map_[{d, qpn}] = std::move(info);
  }
  void erase(const DeviceEntry* d, uint32_t qpn) {
    std::lock_guard lock(mu_);
    map_.erase({d, qpn});
  }
  std::optional<QpInfo> find(const DeviceEntry* d, uint32_t qpn) const {
    std::lock_guard lock(mu_);
    auto it = map_.find({d, qpn});
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  void set_class(const DeviceEntry* d, uint32_t qpn, const std::string& cls) {
    std::lock_guard lock(mu_);
    map_[{d, qpn}].cls = cls;
  }
  void set_tenant(const DeviceEntry* d, uint32_t qpn, const std::string& tenant) {
    std::lock_guard lock(mu_);
    map_[{d, qpn}].tenant = tenant;
  }
  // Device d's QPs with a tenant: (QPN, tenant).
  std::vector<std::pair<uint32_t, std::string>> tenants_of(const DeviceEntry* d) const {
    std::lock_guard lock(mu_);
    std::vector<std::pair<uint32_t, std::string>> out;
    for (const auto& [k, v] : map_)
      if (k.first == d && !v.tenant.empty()) out.emplace_back(k.second, v.tenant);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<const DeviceEntry*, uint32_t>, QpInfo> map_;
};

}  // namespace isoroce::ctrl
