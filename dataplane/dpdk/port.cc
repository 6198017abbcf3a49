#include "dataplane/dpdk/port.h"

#include "dataplane/dpdk/xdp_pool.h"

#include <rte_eth_ring.h>
#include <rte_ring.h>

#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "dataplane/dpdk/kernel_fds.h"
#include "dataplane/dpdk/link_kind.h"
#include "dataplane/dpdk/port_mac.h"

namespace isoroce::dataplane {
namespace {

constexpr uint16_t kRxDesc = 1024;
constexpr uint16_t kTxDesc = 1024;
constexpr unsigned kPoolCache = 256;
constexpr unsigned kRingSize = 1024;

std::string dpdk_error(const char* what, int rc) {
  return std::string(what) + ": " + rte_strerror(rc < 0 ? -rc : rc);
}

// The MTU of the kernel interface behind a port (net_af_packet, net_af_xdp,
// net_tap); 0 if there is none or it cannot be read.
uint32_t interface_mtu(uint32_t if_index, std::string* ifname) {
  char name[IF_NAMESIZE] = {};
  if (if_index == 0 || if_indextoname(if_index, name) == nullptr) return 0;
  *ifname = name;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name, std::min(sizeof ifr.ifr_name - 1, std::strlen(name)));
  const int rc = ioctl(fd, SIOCGIFMTU, &ifr);
  close(fd);
  return rc == 0 && ifr.ifr_mtu > 0 ? static_cast<uint32_t>(ifr.ifr_mtu) : 0;
}

// The XDP program's headroom in front of every frame an AF_XDP socket
// receives (XDP_PACKET_HEADROOM): net_af_xdp's mbufs are its UMEM chunks, so an
// mbuf must hold this much besides the frame.
constexpr uint32_t kXdpHeadroom = 256;

// Whether the driver takes frames of `max_frame` bytes; if not, its limit and
// what to use instead.
bool driver_fits(const rte_eth_dev_info& info, const std::string& driver, uint32_t max_frame,
                 std::string* error) {
  // net_af_packet reports 1518 whatever its slots hold; its slots are its
  // framesz devarg, which ctrl sizes from the MTU (or checks when given).
  if (driver == "net_af_packet" || info.max_rx_pktlen == 0 || max_frame <= info.max_rx_pktlen) return true;
  const std::string need = "this RoCE MTU needs frames of " + std::to_string(max_frame) +
                           " bytes, and " + driver + " takes at most " + std::to_string(info.max_rx_pktlen);
  if (driver == "net_af_xdp") {
    // DPDK 22.11: every frame in one UMEM chunk (an mbuf) within a page, no
    // multi-buffer, no devarg that changes it.
    *error = need + " (DPDK's AF_XDP driver holds a frame in one page-sized UMEM chunk, with " +
             std::to_string(kXdpHeadroom) + " bytes of XDP headroom, and has no multi-buffer): choose mtu 2048 or less,"
             " or use net_af_packet (--port IFACE picks it for mtu 4096)";
  } else if (driver == "net_tap") {
    *error = need + " (DPDK's tap driver caps the MTU at 1500, no devarg changes it): choose mtu 1024 or less,"
             " or use net_af_xdp/net_af_packet on a veth";
  } else if (driver == "net_memif") {
    *error = need + " (DPDK's memif driver reports the standard 1518-byte frame whatever its pkt_buffer_size"
             " devarg): choose mtu 1024 or less";
  } else {
    *error = need + ": choose a smaller mtu";
  }
  return false;
}

// Whether the device carries frames of `max_frame` bytes (IP packets of
// `ip_mtu`); if not, why, and what to change.
bool frame_fits(const rte_eth_dev_info& info, const std::string& driver, uint32_t max_frame,
                uint32_t ip_mtu, uint32_t* kernel_mtu_out, std::string* error) {
  // The driver's own limit first: raising the interface's MTU would not help.
  if (!driver_fits(info, driver, max_frame, error)) return false;
  std::string ifname;
  const uint32_t kernel_mtu = interface_mtu(info.if_index, &ifname);
  *kernel_mtu_out = kernel_mtu;
  if (kernel_mtu != 0 && kernel_mtu < ip_mtu) {
    *error = "interface " + ifname + " has MTU " + std::to_string(kernel_mtu) + ", and this RoCE MTU needs " +
             std::to_string(ip_mtu) + ": raise it (ip link set " + ifname + " mtu " + std::to_string(ip_mtu) +
             ") or choose a smaller mtu";
    return false;
  }
  return true;
}

}  // namespace

Port::Port(std::string name, uint16_t port_id) : name_(std::move(name)), port_id_(port_id) {}

std::unique_ptr<Port> Port::open(const std::string& name, uint16_t port_id, uint32_t max_frame,
                                 uint32_t min_data_room, uint32_t kernel_ip_mtu, std::string* error,
                                 uint16_t tx_queues) {
  std::unique_ptr<Port> p(new Port(name, port_id));
  if (!p->setup(max_frame, min_data_room, kernel_ip_mtu, tx_queues, error)) return nullptr;
  return p;
}

bool Port::setup(uint32_t max_frame, uint32_t min_data_room, uint32_t kernel_ip_mtu, uint16_t tx_queues,
                 std::string* error) {
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port_id_, &info); rc != 0) {
    *error = dpdk_error("rte_eth_dev_info_get", rc);
    return false;
  }
  driver_ = info.driver_name ? info.driver_name : "";
  // Enough mbufs for the RX and TX rings, the TX queue and the per-lcore caches.
  // (and lanes: their Tx queues, their rings, their lcores' caches).
  const unsigned lanes = std::max<uint16_t>(tx_queues, 1);
  const unsigned n_mbufs = 2 * (kRxDesc + kTxDesc) + 2 * kPoolCache + 1023 +
                           (lanes - 1) * (2 * kTxDesc + 2 * kPoolCache + 4096 + 256);
  // net_af_xdp receives into the mbufs themselves, behind the XDP headroom.
  if (driver_ == "net_af_xdp") min_data_room = std::max(min_data_room, max_frame + kXdpHeadroom);
  const uint32_t room = RTE_PKTMBUF_HEADROOM + std::max({max_frame, min_data_room, 2048u});
  if (room > UINT16_MAX) {
    *error = "frame size " + std::to_string(max_frame) + " does not fit an mbuf";
    return false;
  }
  const uint32_t mtu = max_frame > 18 ? max_frame - 18 : RTE_ETHER_MTU;  // Ethernet header + VLAN
  if (!frame_fits(info, driver_, max_frame, kernel_ip_mtu != 0 ? kernel_ip_mtu : mtu, &kernel_mtu_, error)) return false;
  if (driver_ == "net_af_xdp") {
    // Its mbufs are the UMEM: page-sized, back to back (xdp_pool.h says why).
    if (room > xdp_pool_data_room()) {
      *error = "frame size " + std::to_string(max_frame) + " does not fit an AF_XDP UMEM chunk";
      return false;
    }
    pool_ = make_xdp_pool(name_ + "_pool", n_mbufs, kPoolCache, rte_eth_dev_socket_id(port_id_), error);
    if (pool_ == nullptr) return false;
  } else {
    pool_ = rte_pktmbuf_pool_create((name_ + "_pool").c_str(), n_mbufs, kPoolCache, 0,
                                    static_cast<uint16_t>(room), rte_eth_dev_socket_id(port_id_));
    if (pool_ == nullptr) {
      *error = dpdk_error("mbuf pool (is -m large enough?)", rte_errno);
      return false;
    }
  }
  rte_eth_conf conf{};
  // net_af_packet reports 1518-byte frames whatever its slots hold; its frame
  // size is its framesz devarg (ctrl sizes it from the MTU).
  if (mtu > RTE_ETHER_MTU && mtu <= info.max_mtu && driver_ != "net_af_packet") conf.rxmode.mtu = mtu;
  // Several Tx queues only on a NIC's driver: a vdev's extra queues are
  // sockets (af_packet's fanout, af_xdp's NIC queues) or rings a peer must
  // poll too (ring, memif).
  static const std::set<std::string> kOneQueue = {"net_ring", "net_memif", "net_af_packet", "net_af_xdp",
                                                  "net_tap", "net_pcap", "net_vhost", "net_virtio_user"};
  tx_queues_ = tx_queues > 1 && !kOneQueue.count(driver_) && info.max_tx_queues >= tx_queues ? tx_queues : 1;
  if (int rc = rte_eth_dev_configure(port_id_, 1, tx_queues_, &conf); rc != 0) {
    *error = dpdk_error("rte_eth_dev_configure", rc);
    return false;
  }
  uint16_t rxd = kRxDesc, txd = kTxDesc;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rxd, &txd); rc != 0) {
    *error = dpdk_error("rte_eth_dev_adjust_nb_rx_tx_desc", rc);
    return false;
  }
  const int socket = rte_eth_dev_socket_id(port_id_);
  // net_af_xdp makes its XDP socket in rx_queue_setup: the sockets that
  // appear now are this port's.
  const std::set<int> sockets_before = driver_ == "net_af_xdp" ? socket_fds() : std::set<int>{};
  if (int rc = rte_eth_rx_queue_setup(port_id_, 0, rxd, socket, nullptr, pool_); rc != 0) {
    *error = dpdk_error("rte_eth_rx_queue_setup", rc);
    if (driver_ == "net_af_xdp")
      *error += " (no AF_XDP socket: the libxdp/libbpf lines above say why; a veth takes an XDP program only"
                " while its peer's MTU fits a page, about 3500)";
    return false;
  }
  for (uint16_t q = 0; q < tx_queues_; ++q) {
    if (int rc = rte_eth_tx_queue_setup(port_id_, q, txd, socket, nullptr); rc != 0) {
      *error = dpdk_error("rte_eth_tx_queue_setup", rc);
      return false;
    }
  }
  if (int rc = rte_eth_dev_start(port_id_); rc != 0) {
    *error = dpdk_error("rte_eth_dev_start", rc);
    return false;
  }
  started_ = true;
  if_index_ = info.if_index;
  if (driver_ == "net_af_packet") {
    rx_wait_fds_ = af_packet_fds(info.if_index);
  } else if (driver_ == "net_af_xdp") {
    std::set<int> fresh;
    for (int fd : socket_fds())
      if (!sockets_before.count(fd)) fresh.insert(fd);
    rx_wait_fds_ = xdp_fds(fresh, &zero_copy_);
  }
  // IPv6 neighbour discovery arrives on multicast addresses; best effort.
  (void)rte_eth_allmulticast_enable(port_id_);
  rte_ether_addr mac{};
  if (int rc = rte_eth_macaddr_get(port_id_, &mac); rc != 0) {
    *error = dpdk_error("rte_eth_macaddr_get", rc);
    return false;
  }
  if (rte_is_zero_ether_addr(&mac)) {
    // Ring ports have no address: make a locally administered, unicast one
    // from the port id, so two ports of a loopback pair differ.
    const rte_ether_addr own = {{0x02, 0x15, 0x0c, 0x00, static_cast<uint8_t>(port_id_ >> 8),
                                 static_cast<uint8_t>(port_id_ + 1)}};
    (void)rte_eth_dev_default_mac_addr_set(port_id_, const_cast<rte_ether_addr*>(&own));
    mac = own;
  }
  std::memcpy(mac_.data(), mac.addr_bytes, 6);
  return true;
}

bool Port::take_own_mac(std::string* error) {
  if (own_mac_) return true;
  if (driver_ != "net_af_packet" || if_index_ == 0 || rx_wait_fds_.empty()) {
    *error = "only a net_af_packet port on a kernel interface takes an address of its own";
    return false;
  }
  if (std::string why; !delivers_other_addresses(if_index_, &why)) {
    *error = why + " (--port-mac interface says so without this message)";
    return false;
  }
  const wire::MacAddr own = own_port_mac(mac_);
  packet_mreq mreq{};
  mreq.mr_ifindex = static_cast<int>(if_index_);
  mreq.mr_type = PACKET_MR_UNICAST;
  mreq.mr_alen = 6;
  std::memcpy(mreq.mr_address, own.data(), 6);
  // One socket holds the membership; the kernel drops it when the PMD closes it.
  if (setsockopt(rx_wait_fds_.front(), SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq, sizeof mreq) != 0) {
    *error = std::string("adding the address to the interface's unicast filter (PACKET_ADD_MEMBERSHIP): ") +
             std::strerror(errno);
    return false;
  }
  interface_mac_ = mac_;
  mac_ = own;
  own_mac_ = true;
  return true;
}

bool Port::make_ring_pair(const std::string& a, const std::string& b, uint16_t* port_a,
                          uint16_t* port_b, std::string* error) {
  const int socket = static_cast<int>(rte_socket_id());
  rte_ring* ab = rte_ring_create((a + "_to_" + b).c_str(), kRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
  rte_ring* ba = rte_ring_create((b + "_to_" + a).c_str(), kRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (ab == nullptr || ba == nullptr) {
    *error = dpdk_error("rte_ring_create", rte_errno);
    return false;
  }
  // Each port receives what the other sends.
  const int pa = rte_eth_from_rings(("net_ring_" + a).c_str(), &ba, 1, &ab, 1, socket);
  const int pb = rte_eth_from_rings(("net_ring_" + b).c_str(), &ab, 1, &ba, 1, socket);
  if (pa < 0 || pb < 0) {
    *error = dpdk_error("rte_eth_from_rings", rte_errno);
    return false;
  }
  *port_a = static_cast<uint16_t>(pa);
  *port_b = static_cast<uint16_t>(pb);
  return true;
}

Port::~Port() {
  if (building_ != nullptr) rte_pktmbuf_free(building_);
  rte_pktmbuf_free_bulk(tx_.data(), tx_count_);
  if (started_) {
    (void)rte_eth_dev_stop(port_id_);
    (void)rte_eth_dev_close(port_id_);
  }
  // The pool stays: a peer port's ring may still hold our mbufs until it closes.
}

uint16_t Port::rx_burst(rte_mbuf** pkts, uint16_t n) {
  const uint16_t got = rte_eth_rx_burst(port_id_, 0, pkts, n);
  counters_.rx_packets += got;
  for (uint16_t i = 0; i < got; ++i) counters_.rx_bytes += pkts[i]->pkt_len;
  return got;
}

bool Port::queue(rte_mbuf* m) {
  if (tx_count_ == tx_.size()) flush();
  if (tx_count_ == tx_.size()) {
    rte_pktmbuf_free(m);
    ++counters_.tx_dropped;
    return false;
  }
  tx_[tx_count_++] = m;
  return true;
}

bool Port::send_copy(std::span<const uint8_t> frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) {
    ++counters_.no_mbuf;
    return false;
  }
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
  if (p == nullptr || frame.size() > UINT16_MAX) {
    rte_pktmbuf_free(m);
    return false;
  }
  std::memcpy(p, frame.data(), frame.size());
  return queue(m);
}

uint16_t Port::flush() {
  if (tx_count_ == 0) return 0;
  const uint16_t sent = rte_eth_tx_burst(port_id_, 0, tx_.data(), tx_count_);
  for (uint16_t i = 0; i < sent; ++i) {
    ++counters_.tx_packets;
    counters_.tx_bytes += tx_[i]->pkt_len;
  }
  std::copy(tx_.begin() + sent, tx_.begin() + tx_count_, tx_.begin());
  tx_count_ = static_cast<uint16_t>(tx_count_ - sent);
  return sent;
}

std::span<uint8_t> Port::tx_buffer(size_t len) {
  if (tx_count_ == tx_.size() && flush() == 0) return {};  // the PMD is full: lose the grant
  if (building_ == nullptr) {
    building_ = rte_pktmbuf_alloc(pool_);
    if (building_ == nullptr) {
      ++counters_.no_mbuf;
      return {};
    }
  }
  if (len > rte_pktmbuf_tailroom(building_)) return {};
  return {rte_pktmbuf_mtod(building_, uint8_t*), len};
}

void Port::tx_commit(sched::Picos /*departure*/, size_t len) {
  rte_mbuf* m = building_;
  building_ = nullptr;
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  queue(m);
}

}  // namespace isoroce::dataplane
