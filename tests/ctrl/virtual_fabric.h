// Devices for ctrl::Control without EAL, ports or threads: each is a real
// transport::Engine driven in virtual time, its executor runs a function
// inline at the fabric's clock, and its hooks (the shared-memory pump) run
// on every pass, as the worker's poll loop does. Two or more devices share
// one lossless link with a fixed delay.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ctrl/control.h"

namespace isoroce::ctrl::testing {

class VirtualFabric;

class VirtualDevice final : public DeviceDriver, public Executor, private transport::TxSink {
 public:
  VirtualDevice(VirtualFabric& fabric, dataplane::DeviceConfig config, wire::MacAddr mac);

  void call(const std::function<void(sched::Picos)>& fn) override;
  const dataplane::DeviceConfig& config() const override { return config_; }
  Executor& executor() override { return *this; }
  transport::Engine& engine() override { return *engine_; }
  bool neighbor_known(const wire::IpAddr& ip, bool solicit) override;
  bool reconfigure(const dataplane::DeviceConfig& config, std::string* error) override;
  void add_hook(dataplane::DeviceHook* h) override { hooks_.push_back(h); }
  void remove_hook(dataplane::DeviceHook* h) override { std::erase(hooks_, h); }
  json port_json() override { return {{"port", 0}, {"devargs", "virtual"}, {"driver", "virtual"}, {"link_up", true}}; }
  json port_stats() override { return json::object(); }

  // One pass at now (hooks, timers, transmit); how much it did.
  unsigned pass(sched::Picos now);
  void receive(sched::Picos now, std::span<uint8_t> frame) { engine_->receive(now, frame); }
  // The engine's and the hooks' (the CM agent's timers), as dataplane::Device.
  sched::Picos next_deadline() const {
    sched::Picos t = engine_->next_deadline();
    for (const dataplane::DeviceHook* h : hooks_) t = std::min(t, h->next_deadline());
    return t;
  }
  const wire::MacAddr& mac() const { return mac_; }

 private:
  bool make_engine(std::string* error);
  std::span<uint8_t> tx_buffer(size_t len) override;
  void tx_commit(sched::Picos departure, size_t len) override;

  VirtualFabric& fabric_;
  dataplane::DeviceConfig config_;
  wire::MacAddr mac_;
  std::unique_ptr<transport::Engine> engine_;
  std::vector<dataplane::DeviceHook*> hooks_;
  std::vector<uint8_t> buf_;
};

// A Control over n virtual devices (isoroce0 10.0.0.1, isoroce1 10.0.0.2, ...).
class VirtualFabric {
 public:
  // same_qpns: every device numbers its QPs from 16, as separate daemons do.
  explicit VirtualFabric(size_t n = 2, const std::string& policy = "fifo", bool same_qpns = false);
  Control& control() { return ctl_; }
  DeviceEntry& device(size_t i) { return *ctl_.devices()[i]; }
  sched::Picos now() const { return now_; }
  // Runs the devices until nothing is due before now + for, then sets the clock there.
  void run_for(sched::Picos for_picos);

  // Called by the devices.
  void send(const VirtualDevice& from, sched::Picos departure, std::vector<uint8_t> frame);
  void learn_neighbors(transport::Engine& e) const;
  bool knows(const wire::IpAddr& ip) const;

 private:
  std::vector<VirtualDevice*> devs_;
  Control ctl_;
  sched::Picos now_ = 0;
  uint64_t seq_ = 0;
  std::map<std::pair<sched::Picos, uint64_t>, std::pair<VirtualDevice*, std::vector<uint8_t>>> inflight_;
};

// One client connection of a test: a Session and its requests.
class TestClient {
 public:
  // uid 0 (privileged) unless given.
  TestClient(VirtualFabric& f, uint64_t id, uint32_t uid = 0) : f_(f) {
    s_.id = id;
    s_.pid = 1000 + static_cast<int>(id);
    s_.uid = uid;
    s_.privileged = uid == 0;
  }
  ~TestClient() { f_.control().reclaim(s_); }
  // The reply; descriptors the reply carries go to *received (else closed).
  json call(const json& req, std::vector<int> fds = {}, std::vector<int>* received = nullptr);
  Session& session() { return s_; }

 private:
  VirtualFabric& f_;
  Session s_;
};

// A memfd of len bytes mapped here (the client's registered memory).
struct Memory {
  int fd = -1;
  uint8_t* data = nullptr;
  size_t len = 0;
  explicit Memory(size_t bytes);
  ~Memory();
};

}  // namespace isoroce::ctrl::testing
