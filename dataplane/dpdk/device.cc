#include "dataplane/dpdk/device.h"

#include <algorithm>
#include <cstring>

namespace isoroce::dataplane {

namespace {

transport::EngineConfig engine_config(const DeviceConfig& config, const wire::MacAddr& mac) {
  transport::EngineConfig ec;
  ec.mac = mac;
  ec.ip = config.ip;
  ec.key_seed = config.key_seed;
  ec.qpn_seed = config.qpn_seed;
  ec.first_qpn = config.first_qpn;
  ec.qpn_stride = config.qpn_stride;
  ec.policy = config.policy;
  ec.link_bps = config.link_bps;  // with lanes, each lane's scheduler then takes its share (Device::share_link)
  ec.sched_lookahead = config.lookahead;
  ec.sched_catch_up = config.catch_up;
  ec.max_qps = config.max_qps;
  ec.active_mtu = config.mtu;
  ec.dcqcn = config.dcqcn;
  ec.justitia = config.justitia;
  ec.rnic = config.rnic;
  return ec;
}

}  // namespace

std::unique_ptr<Device> Device::create(const DeviceConfig& config, std::unique_ptr<Port> port,
                                       std::string* error) {
  auto engine = transport::Engine::create(engine_config(config, port->mac()));
  if (!engine.ok()) {
    *error = config.name + ": the transport engine rejects the configuration: " +
             std::strerror(engine.err());
    return nullptr;
  }
  return std::unique_ptr<Device>(new Device(config, std::move(port), std::move(engine.value())));
}

Device::Device(const DeviceConfig& config, std::unique_ptr<Port> port,
               std::unique_ptr<transport::Engine> engine)
    : config_(config), port_(std::move(port)), port_ptr_(port_.get()), net_(port_ptr_->mac(), config.ip, config.prefix_len),
      engine_(std::move(engine)) {}

Device::Device(const DeviceConfig& config, Device& lane0, unsigned lane, std::unique_ptr<transport::Engine> engine)
    : config_(config), port_ptr_(&lane0.port()), net_(lane0.port().mac(), config.ip, config.prefix_len),
      lanes_(lane0.lanes()), lane_(lane), engine_(std::move(engine)) {
  lane_tx_ = std::make_unique<LaneTx>(port_ptr_->port_id(), port_ptr_->pool(), *lanes_, lane_);
  hook_engine();
}

std::unique_ptr<Device> Device::create_lane(const DeviceConfig& config, Device& lane0, unsigned lane,
                                            std::string* error) {
  auto engine = transport::Engine::create(engine_config(config, lane0.port().mac()));
  if (!engine.ok()) {
    *error = config.name + ": the transport engine rejects the configuration: " + std::strerror(engine.err());
    return nullptr;
  }
  // One table of memory windows for the port (transport/engine/windows.h).
  engine.value()->share_windows(lane0.engine());
  return std::unique_ptr<Device>(new Device(config, lane0, lane, std::move(engine.value())));
}

void Device::set_lanes(PortLanes* lanes) {
  lanes_ = lanes;
  hook_engine();
}

void Device::hook_engine() {
  if (lanes_ == nullptr) return;
  engine_->set_loop_out(&Device::loop_out, this);
  // A new engine models the whole link: the next pass gives it its share.
  if (rate_ == nullptr) rate_ = std::make_unique<LaneRate>(lanes_->share(), lane_, config_.link_bps);
  rate_->set_link_bps(config_.link_bps);
}

std::span<const int> Device::rx_wait_fds() const {
  if (lane_ != 0) return {};
  return port_ptr_->rx_wait_fds();
}

bool Device::input_pending() const {
  if (lanes_ == nullptr) return false;
  PortLanes& l = *lanes_;
  if (rte_ring_count(l.loop(lane_)) != 0) return true;
  if (lane_ != 0) return rte_ring_count(l.rx(lane_)) != 0;
  if (!l.own_tx_queues())
    for (unsigned k = 1; k < l.count(); ++k)
      if (rte_ring_count(l.tx(k)) != 0) return true;
  return false;
}

bool Device::loop_out(void* self, std::span<const uint8_t> frame) {
  auto& d = *static_cast<Device*>(self);
  const std::optional<uint32_t> qpn = roce_dest_qpn(frame);
  if (!qpn) return false;
  const unsigned owner = d.lanes_->owner(*qpn);
  if (owner == d.lane_) return false;
  // Copied into an mbuf for the owner's loop ring; lost (like a frame on a
  // full link) if there is no mbuf or room: the transport resends.
  rte_mbuf* m = rte_pktmbuf_alloc(d.port_ptr_->pool());
  if (m == nullptr) return true;
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
  if (p != nullptr) std::memcpy(p, frame.data(), frame.size());
  if (p == nullptr || rte_ring_mp_enqueue(d.lanes_->loop(owner), m) != 0) {
    rte_pktmbuf_free(m);
    return true;
  }
  d.lanes_->counters(d.lane_).looped_out.fetch_add(1, std::memory_order_relaxed);
  d.lanes_->wake(owner);
  return true;
}

unsigned Device::receive_ring(sched::Picos now, rte_ring* ring) {
  rte_mbuf* burst[Port::kBurst];
  const unsigned n = rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(burst), Port::kBurst, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    engine_->receive(now, std::span<uint8_t>(rte_pktmbuf_mtod(burst[i], uint8_t*), burst[i]->data_len));
    rte_pktmbuf_free(burst[i]);
  }
  if (n) lanes_->counters(lane_).rx_frames.fetch_add(n, std::memory_order_relaxed);
  return n;
}

unsigned Device::poll_lane(sched::Picos now) {
  now_ = now;
  unsigned work = 0;
  for (DeviceHook* h : hooks_) work += h->poll(now);
  work += receive_ring(now, lanes_->rx(lane_)) + receive_ring(now, lanes_->loop(lane_));
  engine_->advance(now);
  share_link(now);
  const size_t sent = engine_->transmit(now, *lane_tx_, Port::kBurst);
  const bool left = lane_tx_->flush();
  return work + static_cast<unsigned>(sent) + (left ? 1u : 0u);
}

unsigned Device::take_handed_over() {
  if (lanes_->own_tx_queues()) return 0;
  unsigned got = 0;
  rte_mbuf* burst[Port::kBurst];
  for (unsigned k = 1; k < lanes_->count(); ++k) {
    const unsigned n = rte_ring_sc_dequeue_burst(lanes_->tx(k), reinterpret_cast<void**>(burst), Port::kBurst, nullptr);
    for (unsigned i = 0; i < n; ++i) port_->send_mbuf(burst[i]);
    got += n;
  }
  return got;
}

bool Device::steer(rte_mbuf* m, std::span<const uint8_t> frame, uint32_t* woken) {
  const std::optional<uint32_t> qpn = roce_dest_qpn(frame);
  const unsigned owner = qpn ? lanes_->owner(*qpn) : 0;  // unparsable: lane 0's engine counts it
  if (owner == 0) return false;
  LaneCounters& c = lanes_->counters(0);
  if (rte_ring_sp_enqueue(lanes_->rx(owner), m) != 0) {
    rte_pktmbuf_free(m);
    c.steer_dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  c.steered.fetch_add(1, std::memory_order_relaxed);
  *woken |= 1u << owner;
  return true;
}

void Device::sync_neighbors() {
  for (const auto& [ip, mac] : net_.take_learned()) engine_->set_neighbor(ip, mac);
}

unsigned Device::poll(sched::Picos now) {
  if (lane_ != 0) return poll_lane(now);
  now_ = now;
  unsigned hook_work = 0;
  for (DeviceHook* h : hooks_) hook_work += h->poll(now);
  uint32_t woken = 0;  // lanes that got frames (bit k)
  unsigned own = 0;    // frames lane 0's engine received
  if (lanes_ != nullptr) hook_work += take_handed_over() + receive_ring(now, lanes_->loop(lane_));
  rte_mbuf* burst[Port::kBurst];
  const uint16_t n = port_->rx_burst(burst, Port::kBurst);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = burst[i];
    if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
      rte_pktmbuf_free(m);
      continue;
    }
    std::span<uint8_t> frame(rte_pktmbuf_mtod(m, uint8_t*), m->data_len);
    switch (net_.receive(frame, &reply_)) {
      case NetStack::Verdict::kRoce:
        if (lanes_ != nullptr && steer(m, frame, &woken)) continue;  // the mbuf is the lane's now
        engine_->receive(now, frame);
        ++own;
        break;
      case NetStack::Verdict::kConsumed:
        if (!reply_.empty()) port_->send_copy(reply_);
        break;
      case NetStack::Verdict::kDrop:
        break;
    }
    rte_pktmbuf_free(m);
  }
  if (n != 0) sync_neighbors();
  if (lanes_ != nullptr) {
    for (unsigned k = 1; k < lanes_->count(); ++k)
      if (woken & (1u << k)) lanes_->wake(k);
    if (own) lanes_->counters(0).rx_frames.fetch_add(own, std::memory_order_relaxed);
  }
  engine_->advance(now);
  share_link(now);
  const size_t sent = engine_->transmit(now, *port_, Port::kBurst);
  port_->flush();
  return hook_work + n + static_cast<unsigned>(sent) + (port_->tx_pending() ? 1u : 0u);
}

bool Device::set_policy(const std::string& policy, std::string* error) {
  DeviceConfig c = config_;
  c.policy = policy;
  return reconfigure(c, error);
}

bool Device::reconfigure(const DeviceConfig& c, std::string* error) {
  if (!engine_->qp_numbers().empty()) {
    *error = "the device has QPs";
    return false;
  }
  auto engine = transport::Engine::create(engine_config(c, port_ptr_->mac()));
  if (!engine.ok()) {
    *error = std::string("the engine rejects the configuration: ") + std::strerror(engine.err());
    return false;
  }
  engine_ = std::move(engine.value());
  config_ = c;
  hook_engine();
  for (const auto& [ip, mac] : net_.neighbors()) engine_->set_neighbor(ip, mac);
  return true;
}

sched::Picos Device::next_deadline() const {
  sched::Picos t = engine_->next_deadline();
  for (const DeviceHook* h : hooks_) t = std::min(t, h->next_deadline());
  return t;
}

bool Device::resolve(const wire::IpAddr& ip, sched::Picos now) {
  switch (net_.resolve(ip, now, &reply_)) {
    case NetStack::Resolution::kKnown:
      sync_neighbors();
      return true;
    case NetStack::Resolution::kSolicit:
      port_->send_copy(reply_);
      port_->flush();
      break;
    case NetStack::Resolution::kPending:
    case NetStack::Resolution::kRefused:
      break;
  }
  return false;
}

}  // namespace isoroce::dataplane
