#include "tests/ctrl/virtual_fabric.h"

#include <sys/mman.h>
#include <unistd.h>

namespace isoroce::ctrl::testing {

VirtualDevice::VirtualDevice(VirtualFabric& fabric, dataplane::DeviceConfig config, wire::MacAddr mac)
    : fabric_(fabric), config_(std::move(config)), mac_(mac) {
  std::string error;
  EXPECT_TRUE(make_engine(&error)) << error;
}

bool VirtualDevice::make_engine(std::string* error) {
  transport::EngineConfig ec;
  ec.mac = mac_;
  ec.ip = config_.ip;
  ec.key_seed = config_.key_seed;
  ec.first_qpn = config_.first_qpn;
  ec.policy = config_.policy;
  ec.link_bps = config_.link_bps;
  ec.sched_lookahead = config_.lookahead;
  ec.max_qps = config_.max_qps;
  ec.active_mtu = config_.mtu;
  ec.dcqcn = config_.dcqcn;
  ec.justitia = config_.justitia;
  auto e = transport::Engine::create(ec);
  if (!e.ok()) return *error = "engine: " + std::to_string(e.err()), false;
  engine_ = std::move(e.value());
  fabric_.learn_neighbors(*engine_);
  return true;
}

void VirtualDevice::call(const std::function<void(sched::Picos)>& fn) { fn(fabric_.now()); }

bool VirtualDevice::neighbor_known(const wire::IpAddr& ip, bool) { return fabric_.knows(ip); }

bool VirtualDevice::reconfigure(const dataplane::DeviceConfig& config, std::string* error) {
  if (!engine_->qp_numbers().empty()) return *error = "the device has QPs", false;
  config_ = config;
  return make_engine(error);
}

unsigned VirtualDevice::pass(sched::Picos now) {
  unsigned n = 0;
  for (dataplane::DeviceHook* h : hooks_) n += h->poll(now);
  engine_->advance(now);
  n += static_cast<unsigned>(engine_->transmit(now, *this, 64));
  return n;
}

std::span<uint8_t> VirtualDevice::tx_buffer(size_t len) {
  buf_.assign(len, 0);
  return buf_;
}

void VirtualDevice::tx_commit(sched::Picos departure, size_t len) {
  buf_.resize(len);
  fabric_.send(*this, departure, buf_);
}

VirtualFabric::VirtualFabric(size_t n, const std::string& policy, bool same_qpns) {
  for (size_t i = 0; i < n; ++i) {
    dataplane::DeviceConfig c;
    c.name = "isoroce" + std::to_string(i);
    c.ip = wire::ipv4_mapped(0x0a000001 + static_cast<uint32_t>(i));
    c.policy = policy;
    c.key_seed = 0x5eed + i;
    c.first_qpn = static_cast<uint32_t>((same_qpns ? 0 : i << 20) + 16);
    const wire::MacAddr mac = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)};
    auto e = std::make_unique<DeviceEntry>();
    e->ip_text = "10.0.0." + std::to_string(i + 1) + "/24";
    devs_.push_back(nullptr);  // known before the engine asks for its neighbours
    auto dev = std::make_unique<VirtualDevice>(*this, c, mac);
    devs_.back() = dev.get();
    e->driver = std::move(dev);
    e->pump = std::make_unique<ShmPump>(e->engine());
    e->driver->add_hook(e->pump.get());
    ctl_.devices().push_back(std::move(e));
  }
  for (VirtualDevice* d : devs_) learn_neighbors(d->engine());
  ctl_.set_cm_seed(0xc0ffee);
  for (auto& d : ctl_.devices()) ctl_.start_cm(*d);
}

void VirtualFabric::learn_neighbors(transport::Engine& e) const {
  for (const VirtualDevice* d : devs_)
    if (d != nullptr) e.set_neighbor(d->config().ip, d->mac());
}

bool VirtualFabric::knows(const wire::IpAddr& ip) const {
  for (const VirtualDevice* d : devs_)
    if (d->config().ip == ip) return true;
  return false;
}

void VirtualFabric::send(const VirtualDevice& from, sched::Picos departure, std::vector<uint8_t> frame) {
  // Ethernet destination: the device with that MAC.
  for (VirtualDevice* d : devs_) {
    if (d == &from || !std::equal(d->mac().begin(), d->mac().end(), frame.begin())) continue;
    inflight_.emplace(std::make_pair(std::max(departure, now_) + 1'000'000 /* 1 us */, seq_++),
                      std::make_pair(d, std::move(frame)));
    return;
  }
}

void VirtualFabric::run_for(sched::Picos for_picos) {
  const sched::Picos until = now_ + for_picos;
  for (size_t steps = 0;; ++steps) {
    if (steps == 10'000'000) {
      ADD_FAILURE() << "the devices never went idle";
      break;
    }
    unsigned work = 0;
    for (VirtualDevice* d : devs_) work += d->pass(now_);
    if (work != 0) continue;  // the pump or the engine may have more at this instant
    sched::Picos next = sched::kNever;
    for (VirtualDevice* d : devs_) next = std::min(next, d->next_deadline());
    if (!inflight_.empty()) next = std::min(next, inflight_.begin()->first.first);
    if (next == sched::kNever || next > until) break;
    now_ = std::max(now_, next);
    while (!inflight_.empty() && inflight_.begin()->first.first <= now_) {
      auto [dev, bytes] = std::move(inflight_.begin()->second);
      inflight_.erase(inflight_.begin());
      dev->receive(now_, bytes);
    }
  }
  now_ = until;
}

json TestClient::call(const json& req, std::vector<int> fds, std::vector<int>* received) {
  // Through text, as over the socket (1 is then an unsigned number, as the handlers expect).
  json reply = f_.control().handle(s_, json::parse(req.dump()), fds);
  for (int f : fds) close(f);
  for (int f : s_.reply_fds) {
    if (received != nullptr) received->push_back(f);
    else close(f);
  }
  s_.reply_fds.clear();
  return reply;
}

Memory::Memory(size_t bytes) : len(bytes) {
  fd = memfd_create("ctrl-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  data = static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
}

Memory::~Memory() {
  munmap(data, len);
  close(fd);
}

}  // namespace isoroce::ctrl::testing
