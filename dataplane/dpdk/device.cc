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
  ec.policy = config.policy;
  ec.link_bps = config.link_bps;
  ec.sched_lookahead = config.lookahead;
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
    : config_(config), port_(std::move(port)), net_(port_->mac(), config.ip, config.prefix_len), engine_(std::move(engine)) {}

void Device::sync_neighbors() {
  for (const auto& [ip, mac] : net_.take_learned()) engine_->set_neighbor(ip, mac);
}

unsigned Device::poll(sched::Picos now) {
  now_ = now;
  unsigned hook_work = 0;
  for (DeviceHook* h : hooks_) hook_work += h->poll(now);
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
        engine_->receive(now, frame);
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
  engine_->advance(now);
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
  auto engine = transport::Engine::create(engine_config(c, port_->mac()));
  if (!engine.ok()) {
    *error = std::string("the engine rejects the configuration: ") + std::strerror(engine.err());
    return false;
  }
  engine_ = std::move(engine.value());
  config_ = c;
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
