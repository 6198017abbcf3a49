// One DPDK Ethernet port as an emulated RNIC device: the ethdev (any PMD, found
// by name after EAL probed it, or one end of an in-process ring pair), its mbuf
// pool, one RX and one TX queue, and the TX burst the engine's frames are built
// into (the engine's TxSink). Setup returns an error string, never throws.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/engine/engine.h"
#include "transport/wire/packet.h"

namespace isoroce::dataplane {

struct PortCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_dropped = 0;      // the PMD refused them after retries (full ring)
  uint64_t rx_segmented = 0;    // multi-segment frames linearized
  uint64_t no_mbuf = 0;         // the pool was empty when a frame was to be built
};

class Port final : public transport::TxSink {
 public:
  static constexpr uint16_t kBurst = 32;

  // Sets up `port_id` with a pool sized for frames of `max_frame` bytes and
  // mbufs of at least `min_data_room` bytes (net_af_packet copies whole slots of
  // its framesz devarg). On failure returns nullptr and fills *error.
  static std::unique_ptr<Port> open(const std::string& name, uint16_t port_id, uint32_t max_frame,
                                    uint32_t min_data_room, std::string* error) {
    return open(name, port_id, max_frame, min_data_room, 0, error);
  }
  // The same; the kernel interface behind the port (af_packet, af_xdp, tap)
  // must carry IP packets of `kernel_ip_mtu` bytes (the largest RoCE packet;
  // 0: max_frame less the Ethernet header and a VLAN tag).
  static std::unique_ptr<Port> open(const std::string& name, uint16_t port_id, uint32_t max_frame,
                                    uint32_t min_data_room, uint32_t kernel_ip_mtu, std::string* error,
                                    uint16_t tx_queues = 1);
  // Creates two ring-backed ethdevs whose TX feeds the other's RX.
  static bool make_ring_pair(const std::string& a, const std::string& b, uint16_t* port_a,
                             uint16_t* port_b, std::string* error);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  const std::string& name() const { return name_; }
  uint16_t port_id() const { return port_id_; }
  const wire::MacAddr& mac() const { return mac_; }
  const std::string& driver() const { return driver_; }
  const PortCounters& counters() const { return counters_; }
  // Kernel sockets that poll() reports readable when a frame waits for
  // rx_burst (net_af_packet, net_af_xdp: dataplane/dpdk/kernel_fds.h); empty
  // for drivers without one. An idle worker blocks on them.
  const std::vector<int>& rx_wait_fds() const { return rx_wait_fds_; }
  // net_af_xdp: the kernel bound its socket in zero-copy mode (the NIC's driver
  // supports it); false in copy mode and for other drivers.
  bool zero_copy() const { return zero_copy_; }
  // The MTU of the kernel interface behind the port (net_af_packet,
  // net_af_xdp, net_tap) when it was opened; 0 if there is none.
  uint32_t kernel_mtu() const { return kernel_mtu_; }

  // net_af_packet on a kernel interface: the port takes an Ethernet address of
  // its own (own_port_mac of the interface's, port_mac.h) and adds it to the
  // interface's unicast filter through its AF_PACKET socket (PACKET_ADD_MEMBERSHIP,
  // PACKET_MR_UNICAST: the kernel puts an interface without unicast filtering
  // in promiscuous mode, and drops the address when the socket closes). Frames
  // to it are PACKET_OTHERHOST to the kernel, which its IP stack drops before
  // any route lookup. Call before the port's device is made (the engine and
  // the stack copy mac()). False and *error, the interface's address kept, if
  // the driver is another or the kernel refused.
  bool take_own_mac(std::string* error);
  // The kernel interface's address when take_own_mac() succeeded, else mac().
  const wire::MacAddr& interface_mac() const { return own_mac_ ? interface_mac_ : mac_; }
  bool own_mac() const { return own_mac_; }

  // Tx queues set up: the tx_queues asked of open() when the driver has that
  // many and is a NIC's (the vdevs' queues are separate sockets or rings the
  // peer must poll too: lanes hand their frames to queue 0 there), else 1.
  uint16_t tx_queues() const { return tx_queues_; }
  rte_mempool* pool() { return pool_; }

  uint16_t rx_burst(rte_mbuf** pkts, uint16_t n);
  // Queues a frame built elsewhere (another lane's) for queue 0; frees it if full.
  bool send_mbuf(rte_mbuf* m) { return queue(m); }
  // Queues a copy of `frame` for transmission (ARP/ICMP replies, solicitations).
  bool send_copy(std::span<const uint8_t> frame);
  // Hands the queued frames to the PMD; what it refuses stays queued for the
  // next flush, up to the queue's size. Returns how many left.
  uint16_t flush();
  bool tx_pending() const { return tx_count_ > 0; }

  // transport::TxSink
  std::span<uint8_t> tx_buffer(size_t len) override;
  void tx_commit(sched::Picos departure, size_t len) override;

 private:
  Port(std::string name, uint16_t port_id);
  bool setup(uint32_t max_frame, uint32_t min_data_room, uint32_t kernel_ip_mtu, uint16_t tx_queues,
             std::string* error);
  bool queue(rte_mbuf* m);

  std::string name_;
  uint16_t port_id_;
  std::string driver_;
  wire::MacAddr mac_{};
  rte_mempool* pool_ = nullptr;
  bool started_ = false;
  rte_mbuf* building_ = nullptr;  // buffer handed out by tx_buffer, not committed yet
  std::array<rte_mbuf*, 4 * kBurst> tx_{};
  uint16_t tx_count_ = 0;
  uint32_t flush_retries_ = 0;
  PortCounters counters_;
  std::vector<int> rx_wait_fds_;
  bool zero_copy_ = false;
  uint32_t kernel_mtu_ = 0;
  uint32_t if_index_ = 0;
  wire::MacAddr interface_mac_{};
  bool own_mac_ = false;
  uint16_t tx_queues_ = 1;
};

}  // namespace isoroce::dataplane
