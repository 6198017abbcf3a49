// One port's lanes (docs/design.md, "Lanes"): N engines of one DPDK port, each
// run by its own worker lcore, so one port's QPs are not bounded by one core.
// Lane k's engine gives out the QPNs base + k + j*N (EngineConfig::qpn_stride),
// so a frame's BTH destination QPN names its lane with no table (owner()).
//
// Receive: lane 0 polls the port's one Rx queue and steers each RoCE frame
// to the lane of its destination QPN over an SP/SC rte_ring per lane (rx());
// QP1, the daemon's QPs below base and frames it cannot parse stay on lane 0,
// whose engine counts what is bad, as with one lane.
// Transmit: on a PMD that gives a Tx queue per lane (own_tx_queues()) lane k
// sends on queue k; otherwise it hands its frames to lane 0 over an SP/SC ring
// (tx()) and lane 0 sends them on queue 0 with its own.
// Same-device loopback to a QP of another lane: the frame goes to that lane's
// loop ring (MP/SC: any lane may produce).
// Every producer wakes the consumer's worker after a burst (Worker::wake).
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/dpdk/lane_share.h"
#include "transport/engine/engine.h"

namespace isoroce::dataplane {

class Worker;

// Each written by its lane's worker only; read by telemetry (relaxed).
struct LaneCounters {
  std::atomic<uint64_t> steered{0};        // lane 0: frames handed to another lane's rx ring
  std::atomic<uint64_t> steer_dropped{0};  // lane 0: ... whose ring was full (freed)
  std::atomic<uint64_t> rx_frames{0};      // frames this lane's engine received (port, ring or loop)
  std::atomic<uint64_t> tx_frames{0};      // frames this lane sent (own queue) or handed to lane 0
  std::atomic<uint64_t> tx_no_room{0};     // grants lost: its queue or lane 0's hand-off ring was full
  std::atomic<uint64_t> looped_out{0};     // same-device loopback frames sent to another lane
};

// The BTH destination QPN of a RoCEv2 frame (Ethernet, optional VLAN tag,
// IPv4 or IPv6, UDP to 4791, BTH); nullopt if the frame is too short or not one.
std::optional<uint32_t> roce_dest_qpn(std::span<const uint8_t> frame);

class PortLanes {
 public:
  static constexpr unsigned kMaxLanes = 16;
  // n lanes (2..kMaxLanes) of the port named `name`, whose lanes' QPNs start at
  // qpn_base; own_tx_queues: the port has a Tx queue per lane.
  static std::unique_ptr<PortLanes> create(const std::string& name, unsigned n, uint32_t qpn_base,
                                           bool own_tx_queues, std::string* error);
  ~PortLanes();  // frees the mbufs still in the rings
  PortLanes(const PortLanes&) = delete;
  PortLanes& operator=(const PortLanes&) = delete;

  unsigned count() const { return n_; }
  uint32_t qpn_base() const { return base_; }
  unsigned owner(uint32_t qpn) const { return qpn < base_ ? 0 : (qpn - base_) % n_; }
  bool own_tx_queues() const { return own_tx_; }
  rte_ring* rx(unsigned k) { return rx_[k]; }      // lane 0 -> lane k (k >= 1)
  rte_ring* tx(unsigned k) { return tx_[k]; }      // lane k -> lane 0 (k >= 1; null with own queues)
  rte_ring* loop(unsigned k) { return loop_[k]; }  // any lane -> lane k
  LaneCounters& counters(unsigned k) { return counters_[k]; }
  // The lanes' demands and rates: how they share the link (lane_share.h).
  LaneShare& share() { return *share_; }
  const LaneShare& share() const { return *share_; }
  const LaneCounters& counters(unsigned k) const { return counters_[k]; }

  // The worker of each lane (before the workers start).
  void set_worker(unsigned k, Worker* w) { workers_[k] = w; }
  void wake(unsigned k);

 private:
  PortLanes() = default;
  unsigned n_ = 0;
  uint32_t base_ = 0;
  bool own_tx_ = false;
  std::vector<rte_ring*> rx_, tx_, loop_;
  std::vector<Worker*> workers_;
  std::unique_ptr<LaneCounters[]> counters_;
  std::unique_ptr<LaneShare> share_;
};

// Lane k's transmit side (k >= 1): the engine builds frames into mbufs of the
// port's pool; flush() sends them on Tx queue k or hands them to lane 0.
class LaneTx final : public transport::TxSink {
 public:
  LaneTx(uint16_t port_id, rte_mempool* pool, PortLanes& lanes, unsigned lane)
      : port_id_(port_id), pool_(pool), lanes_(lanes), lane_(lane) {}
  ~LaneTx();
  std::span<uint8_t> tx_buffer(size_t len) override;
  void tx_commit(sched::Picos departure, size_t len) override;
  // Frames out (or handed over); true if any are still waiting.
  bool flush();
  bool pending() const { return count_ > 0; }

 private:
  uint16_t port_id_;
  rte_mempool* pool_;
  PortLanes& lanes_;
  unsigned lane_;
  rte_mbuf* building_ = nullptr;
  rte_mbuf* staged_[128] = {};
  uint16_t count_ = 0;
};

}  // namespace isoroce::dataplane
