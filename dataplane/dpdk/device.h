// One emulated RNIC (isoroce0, isoroce1, ...): a DPDK port, the small IP stack
// that answers ARP/ND/ping for it, and the transport engine that owns its QPs.
// poll() is one pass of the poll loop over it, in DESIGN.md's fixed order:
// rx burst, timers, scheduler, tx flush. Not thread-safe: a device belongs to
// one worker lcore and everything else reaches it through Worker::call.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/dpdk/lanes.h"
#include "dataplane/dpdk/net_stack.h"
#include "dataplane/dpdk/port.h"
#include "transport/engine/engine.h"

namespace isoroce::dataplane {

struct DeviceConfig {
  std::string name;          // isoroce0
  std::string devargs;       // what the port was made from (for people)
  wire::IpAddr ip{};
  uint8_t prefix_len = 24;
  uint64_t link_bps = 10'000'000'000;
  std::string policy = "fifo";  // a registered policy (sched/policy_registry.h)
  ibv_mtu mtu = IBV_MTU_1024;
  sched::Picos lookahead = 20'000'000;  // grant this far ahead of now (one poll period)
  // A worker that wakes late sends what its scheduler had due while it slept, up
  // to this much of the link's time (sched::Config::catch_up): a paced link
  // (--link-gbps below the port's speed) keeps its rate on a loaded host.
  sched::Picos catch_up = 1'000'000'000;
  uint64_t key_seed = 1;
  uint32_t qpn_seed = 1;
  uint32_t first_qpn = 0;  // see transport::EngineConfig::first_qpn
  uint32_t qpn_stride = 1;  // see transport::EngineConfig::qpn_stride
  // The port's lanes (dataplane/dpdk/lanes.h): each lane's engine schedules
  // the share of link_bps its backlog earns (lane_share.h). 1: one engine for the port.
  uint32_t lanes = 1;
  uint32_t max_qps = 4096;
  dcqcn::Params dcqcn;
  sched::JustitiaParams justitia;  // policy justitia only
  sched::RnicParams rnic;          // policy rnic only
};

// Work a device's owner runs on the device's worker at the start of every
// pass (the applications' shared-memory queues, a reference flow): returns how
// much it did (0: nothing), and when it next needs a pass (kNever: only when
// the device has other work).
class DeviceHook {
 public:
  virtual unsigned poll(sched::Picos now) = 0;
  virtual sched::Picos next_deadline() const { return sched::kNever; }
  // false while the hook has work that nothing wakes the worker for (only
  // its polling finds it): the idle worker then keeps its short sleep bound.
  // ShmPump: a ring whose client rings no doorbell. Hooks whose work comes
  // from the port, the control ring or their deadlines are signalled.
  virtual bool signalled() const { return true; }

 protected:
  ~DeviceHook() = default;
};

class Device {
 public:
  // nullptr and *error if the engine rejects the configuration.
  static std::unique_ptr<Device> create(const DeviceConfig& config, std::unique_ptr<Port> port,
                                        std::string* error);
  // Lanes (dataplane/dpdk/lanes.h): lane 0 is a device made by create() and
  // then given the lanes (set_lanes); lane k >= 1 shares lane 0's port and
  // has no stack of its own (ARP/ND/ping stay with lane 0).
  void set_lanes(PortLanes* lanes);
  static std::unique_ptr<Device> create_lane(const DeviceConfig& config, Device& lane0, unsigned lane,
                                             std::string* error);
  unsigned lane() const { return lane_; }
  PortLanes* lanes() { return lanes_; }
  const PortLanes* lanes() const { return lanes_; }

  const DeviceConfig& config() const { return config_; }
  Port& port() { return *port_ptr_; }
  const Port& port() const { return *port_ptr_; }
  NetStack& net() { return net_; }
  const NetStack& net() const { return net_; }
  transport::Engine& engine() { return *engine_; }
  const transport::Engine& engine() const { return *engine_; }

  // One pass; returns how much it did (frames received and sent), 0 when idle.
  unsigned poll(sched::Picos now);
  // When the engine next needs a pass (sched::kNever: only when frames arrive).
  sched::Picos next_deadline() const;
  // What the idle worker blocks on for this device's frames: the port's
  // sockets (lane 0), none for lane k >= 1 (lane 0 wakes it).
  std::span<const int> rx_wait_fds() const;
  // Frames reach the idle worker by a wakeup: a port with sockets, or a lane >= 1.
  bool rx_signalled() const { return lane_ != 0 || !port_ptr_->rx_wait_fds().empty(); }
  // Frames wait in a lane ring for this device (checked before sleeping).
  bool input_pending() const;
  // Every hook is signalled() (the port's own fds are the worker's business).
  bool signalled() const {
    for (const DeviceHook* h : hooks_)
      if (!h->signalled()) return false;
    return true;
  }

  // Hooks run in the order added; add and remove them on the worker (or
  // before it starts).
  void add_hook(DeviceHook* hook) { hooks_.push_back(hook); }
  void remove_hook(DeviceHook* hook) { std::erase(hooks_, hook); }

  // Sends an ARP request / neighbour solicitation for ip unless it is known
  // (within NetStack's bounds: nothing for an off-link address, few for a
  // forged flood); true if it is known. Without `now`, the last pass's time.
  bool resolve(const wire::IpAddr& ip, sched::Picos now);
  bool resolve(const wire::IpAddr& ip) { return resolve(ip, now_); }

  // Replaces the engine by one with `policy`. Only while the device has no
  // verbs objects at all (false and *error otherwise); neighbours are kept.
  bool set_policy(const std::string& policy, std::string* error);
  // The same for any engine setting of the configuration (policy, DCQCN, ...).
  bool reconfigure(const DeviceConfig& config, std::string* error);

 private:
  Device(const DeviceConfig& config, std::unique_ptr<Port> port,
         std::unique_ptr<transport::Engine> engine);
  Device(const DeviceConfig& config, Device& lane0, unsigned lane, std::unique_ptr<transport::Engine> engine);
  void sync_neighbors();
  unsigned poll_lane(sched::Picos now);  // lane k >= 1
  // Lane 0 with lanes: the frames lanes handed over for the port, and
  // one received frame to its lane (false: it is lane 0's).
  unsigned take_handed_over();
  bool steer(rte_mbuf* m, std::span<const uint8_t> frame, uint32_t* woken);
  // A lane ring's frames (steered, or looped from another lane) into this engine.
  unsigned receive_ring(sched::Picos now, rte_ring* ring);
  // Engine::LoopOut: a same-device loopback frame for another lane's QP.
  static bool loop_out(void* self, std::span<const uint8_t> frame);
  void hook_engine();
  // With lanes: the lane's scheduler takes its share of the link (once per LaneRate::kPeriod).
  void share_link(sched::Picos now) {
    if (rate_ == nullptr) return;
    if (const uint64_t r = rate_->tick(now, static_cast<uint32_t>(engine_->scheduler().active_qps()))) [[unlikely]]
      engine_->set_link_bps(now, r);
  }

  DeviceConfig config_;
  std::unique_ptr<Port> port_;  // lane 0's; null in lane k >= 1
  Port* port_ptr_ = nullptr;    // the port (lane 0's)
  NetStack net_;
  PortLanes* lanes_ = nullptr;  // owned by the driver; null with one lane
  unsigned lane_ = 0;
  std::unique_ptr<LaneTx> lane_tx_;  // lane k >= 1
  std::unique_ptr<LaneRate> rate_;   // with lanes: this lane's share of the link
  std::unique_ptr<transport::Engine> engine_;
  std::vector<uint8_t> reply_;
  std::vector<DeviceHook*> hooks_;
  sched::Picos now_ = 0;  // of the last poll()
};

}  // namespace isoroce::dataplane
