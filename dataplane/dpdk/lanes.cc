#include "dataplane/dpdk/lanes.h"

#include <rte_errno.h>
#include <rte_ethdev.h>

#include <cstring>

#include "dataplane/dpdk/worker.h"

namespace isoroce::dataplane {
namespace {

constexpr unsigned kRingSize = 2048;  // a lane's backlog of steered frames (about 2 ms at 1 Mpps)

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

void free_ring(rte_ring* r) {
  if (r == nullptr) return;
  void* m;
  while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  rte_ring_free(r);
}

}  // namespace

std::optional<uint32_t> roce_dest_qpn(std::span<const uint8_t> f) {
  size_t l3 = 14;
  if (f.size() < l3) return std::nullopt;
  uint16_t type = be16(&f[12]);
  if (type == 0x8100) {  // one VLAN tag
    if (f.size() < 18) return std::nullopt;
    type = be16(&f[16]);
    l3 = 18;
  }
  size_t udp = 0;
  if (type == 0x0800) {
    if (f.size() < l3 + 20 || f[l3 + 9] != 17) return std::nullopt;
    udp = l3 + static_cast<size_t>(f[l3] & 0x0f) * 4;
  } else if (type == 0x86dd) {
    if (f.size() < l3 + 40 || f[l3 + 6] != 17) return std::nullopt;
    udp = l3 + 40;
  } else {
    return std::nullopt;
  }
  const size_t bth = udp + 8;
  if (f.size() < bth + 12 || be16(&f[udp + 2]) != 4791) return std::nullopt;
  return uint32_t{f[bth + 5]} << 16 | uint32_t{f[bth + 6]} << 8 | f[bth + 7];
}

std::unique_ptr<PortLanes> PortLanes::create(const std::string& name, unsigned n, uint32_t qpn_base,
                                             bool own_tx_queues, std::string* error) {
  if (n < 2 || n > kMaxLanes) {
    *error = "lanes: " + std::to_string(n) + " (2.." + std::to_string(kMaxLanes) + ")";
    return nullptr;
  }
  std::unique_ptr<PortLanes> l(new PortLanes());
  l->n_ = n;
  l->base_ = qpn_base;
  l->own_tx_ = own_tx_queues;
  l->rx_.assign(n, nullptr);
  l->tx_.assign(n, nullptr);
  l->loop_.assign(n, nullptr);
  l->workers_.assign(n, nullptr);
  l->counters_ = std::make_unique<LaneCounters[]>(n);
  l->share_ = std::make_unique<LaneShare>(n);
  for (unsigned k = 0; k < n; ++k) {
    const std::string tag = name + "_" + std::to_string(k);
    if (k != 0) {
      l->rx_[k] = rte_ring_create(("lrx_" + tag).c_str(), kRingSize, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (!own_tx_queues)
        l->tx_[k] = rte_ring_create(("ltx_" + tag).c_str(), kRingSize, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    }
    l->loop_[k] = rte_ring_create(("llo_" + tag).c_str(), 256, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if ((k != 0 && (l->rx_[k] == nullptr || (!own_tx_queues && l->tx_[k] == nullptr))) || l->loop_[k] == nullptr) {
      *error = std::string("lane rings of ") + name + ": " + rte_strerror(rte_errno);
      return nullptr;
    }
  }
  return l;
}

PortLanes::~PortLanes() {
  for (unsigned k = 0; k < n_; ++k) {
    free_ring(rx_[k]);
    free_ring(tx_[k]);
    free_ring(loop_[k]);
  }
}

void PortLanes::wake(unsigned k) {
  if (workers_[k] != nullptr) workers_[k]->wake();
}

LaneTx::~LaneTx() {
  if (building_ != nullptr) rte_pktmbuf_free(building_);
  rte_pktmbuf_free_bulk(staged_, count_);
}

std::span<uint8_t> LaneTx::tx_buffer(size_t len) {
  if (count_ == std::size(staged_)) flush();
  if (count_ == std::size(staged_)) {  // the queue or lane 0 is full: the grant is lost
    lanes_.counters(lane_).tx_no_room.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  if (building_ == nullptr && (building_ = rte_pktmbuf_alloc(pool_)) == nullptr) return {};
  if (len > rte_pktmbuf_tailroom(building_)) return {};
  return {rte_pktmbuf_mtod(building_, uint8_t*), len};
}

void LaneTx::tx_commit(sched::Picos /*departure*/, size_t len) {
  rte_mbuf* m = building_;
  building_ = nullptr;
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  staged_[count_++] = m;
}

bool LaneTx::flush() {
  if (count_ == 0) return false;
  unsigned sent;
  if (lanes_.own_tx_queues()) {
    sent = rte_eth_tx_burst(port_id_, static_cast<uint16_t>(lane_), staged_, count_);
  } else {
    sent = rte_ring_sp_enqueue_burst(lanes_.tx(lane_), reinterpret_cast<void**>(staged_), count_, nullptr);
    if (sent != 0) lanes_.wake(0);
  }
  lanes_.counters(lane_).tx_frames.fetch_add(sent, std::memory_order_relaxed);
  std::memmove(staged_, staged_ + sent, (count_ - sent) * sizeof(rte_mbuf*));
  count_ = static_cast<uint16_t>(count_ - sent);
  return count_ > 0;
}

}  // namespace isoroce::dataplane
