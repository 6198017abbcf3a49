// The DPDK DeviceDriver of isoroced (ctrl/device_entry.h): a port's device
// polled by a worker lcore, engine calls over the worker's ring. With lanes
// (dataplane/dpdk/lanes.h) the port has one Device per lane, each on its own
// worker, and a call stops all of those workers (Worker::call_stopped) and
// runs with every lane's engine quiescent.
#pragma once

#include <rte_ethdev.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ctrl/device_entry.h"
#include "ctrl/doorbell.h"
#include "dataplane/dpdk/clock.h"
#include "dataplane/dpdk/device.h"
#include "dataplane/dpdk/lanes.h"
#include "dataplane/dpdk/worker.h"

namespace isoroce::ctrl {

// Lane k's configuration of a port whose lane 0 has config c (base: the
// port's first QPN; QPNs of lane k are base + k + j * lanes).
dataplane::DeviceConfig lane_config(const dataplane::DeviceConfig& c, uint32_t base, unsigned k);
std::string mac_text(const wire::MacAddr& m);

class DpdkDriver final : public DeviceDriver, public Executor {
 public:
  DpdkDriver(std::unique_ptr<dataplane::Device> dev, std::unique_ptr<dataplane::PortLanes> lanes,
             std::vector<std::unique_ptr<dataplane::Device>> extra, const dataplane::TscClock& clock)
      : dev_(std::move(dev)), lanes_(std::move(lanes)), extra_(std::move(extra)), clock_(clock) {
    lane_workers_.assign(1 + extra_.size(), nullptr);
    lane_worker_index_.assign(1 + extra_.size(), 0);
  }
  ~DpdkDriver() override {
    extra_.clear();  // before the rings they use and lane 0's port
    lanes_.reset();
  }
  dataplane::Device& lane_device(size_t k) { return k == 0 ? *dev_ : *extra_[k - 1]; }
  void set_worker(size_t lane, dataplane::Worker* w, unsigned index, DoorbellPage* bell) {
    lane_workers_[lane] = w;
    lane_worker_index_[lane] = index;
    if (lanes_) lanes_->set_worker(static_cast<unsigned>(lane), w);
    if (lane != 0) return;
    worker_ = w;
    worker_index_ = index;
    bell_ = bell;
  }
  // After every lane has its worker: the distinct workers, in index order.
  void settle_workers() {
    std::vector<std::pair<unsigned, dataplane::Worker*>> ws;
    for (size_t k = 0; k < lane_workers_.size(); ++k) ws.emplace_back(lane_worker_index_[k], lane_workers_[k]);
    std::sort(ws.begin(), ws.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    ws.erase(std::unique(ws.begin(), ws.end(), [](const auto& a, const auto& b) { return a.first == b.first; }), ws.end());
    stop_set_.clear();
    for (auto& [i, w] : ws) stop_set_.push_back(w);
  }
  unsigned worker_index() const override { return worker_index_; }

  void call(const std::function<void(sched::Picos)>& fn) override {
    if (extra_.empty()) return worker_->call(fn);
    dataplane::Worker::call_stopped(stop_set_, clock_, [&](sched::Picos now) {
      // Lane 0 learns the neighbours (ARP/ND); the other lanes' engines need them for RTR and AHs.
      for (auto& e : extra_)
        for (const auto& [ip, mac] : dev_->net().neighbors()) e->engine().set_neighbor(ip, mac);
      fn(now);
    });
  }
  size_t lanes() const override { return 1 + extra_.size(); }
  transport::Engine& lane_engine(size_t k) override { return lane_device(k).engine(); }
  size_t lane_of_qpn(uint32_t qpn) const override { return lanes_ ? lanes_->owner(qpn) : 0; }
  unsigned lane_worker_index(size_t k) const override { return lane_worker_index_[k]; }
  void add_lane_hook(size_t k, dataplane::DeviceHook* h) override { lane_device(k).add_hook(h); }
  void remove_lane_hook(size_t k, dataplane::DeviceHook* h) override { lane_device(k).remove_hook(h); }
  json lanes_json() override {
    json out = json::array();
    if (!lanes_) return out;
    for (size_t k = 0; k < lanes(); ++k) {
      const dataplane::LaneCounters& c = lanes_->counters(static_cast<unsigned>(k));
      auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
      out.push_back({{"lane", k}, {"worker", lane_worker_index_[k]},
                     {"qps", lane_device(k).engine().qp_numbers().size()},
                     {"mrs", lane_device(k).engine().mr_count()},
                     {"mws", lane_device(k).engine().mw_count()},  // the port's: one table for its lanes
                     {"tx_queue", lanes_->own_tx_queues() ? k : 0},
                     {"rx_frames", ld(c.rx_frames)}, {"steered", ld(c.steered)},
                     {"steer_dropped", ld(c.steer_dropped)}, {"tx_frames", ld(c.tx_frames)},
                     {"tx_no_room", ld(c.tx_no_room)}, {"looped_out", ld(c.looped_out)},
                     // Its share of the link now, and the backlogged QPs it last published (lane_share.h).
                     {"link_bps", lanes_->share().rate(static_cast<unsigned>(k))},
                     {"backlog", lanes_->share().demand(static_cast<unsigned>(k))}});
    }
    return out;
  }
  const dataplane::DeviceConfig& config() const override { return dev_->config(); }
  Executor& executor() override { return *this; }
  transport::Engine& engine() override { return dev_->engine(); }
  bool neighbor_known(const wire::IpAddr& ip, bool solicit) override {
    // The device's own address: the engine loops those frames back
    // (same-device loopback); the CM agent's MADs to itself need no ARP.
    if (ip == dev_->config().ip) return true;
    bool known = dev_->net().lookup(ip).has_value();
    if (known || solicit) known = dev_->resolve(ip);
    return known;
  }
  bool reconfigure(const dataplane::DeviceConfig& c, std::string* error) override {
    for (size_t k = 0; k < lanes(); ++k)
      if (!lane_device(k).engine().qp_numbers().empty()) {
        *error = "the device has QPs";
        return false;
      }
    if (!dev_->reconfigure(c, error)) return false;
    for (size_t k = 1; k < lanes(); ++k)
      if (!lane_device(k).reconfigure(lane_config(c, lanes_->qpn_base(), static_cast<unsigned>(k)), error)) return false;
    return true;
  }
  void add_hook(dataplane::DeviceHook* h) override { dev_->add_hook(h); }
  void remove_hook(dataplane::DeviceHook* h) override { dev_->remove_hook(h); }
  json port_json() override {
    rte_eth_link link{};
    rte_eth_link_get_nowait(dev_->port().port_id(), &link);
    return {{"port", dev_->port().port_id()},
            {"devargs", dev_->config().devargs},
            {"driver", dev_->port().driver()},
            {"mac", mac_text(dev_->port().mac())},
            {"interface_mac", mac_text(dev_->port().interface_mac())},
            {"link_up", link.link_status == RTE_ETH_LINK_UP},
            {"neighbors", dev_->net().neighbors().size()}};
  }
  json port_stats() override {
    const auto& p = dev_->port().counters();
    const auto& n = dev_->net().counters();
    return {{"port", {{"rx_packets", p.rx_packets}, {"rx_bytes", p.rx_bytes}, {"tx_packets", p.tx_packets},
                      {"tx_bytes", p.tx_bytes}, {"tx_dropped", p.tx_dropped}, {"no_mbuf", p.no_mbuf}}},
            {"net", {{"arp_requests_answered", n.arp_requests_answered},
                     {"arp_replies_received", n.arp_replies_received},
                     {"nd_solicits_answered", n.nd_solicits_answered},
                     {"nd_adverts_received", n.nd_adverts_received},
                     {"echo_answered", n.echo_answered}, {"solicits_sent", n.solicits_sent},
                     {"solicits_refused", n.solicits_refused}, {"resolutions_expired", n.resolutions_expired},
                     {"neighbors_refused", n.neighbors_refused}, {"pending", dev_->net().pending()},
                     {"neighbors", dev_->net().neighbors().size()}, {"dropped", n.dropped}}}};
  }
  dataplane::Device* dpdk() override { return dev_.get(); }
  // Lanes: a client's QPs may be on several workers, so the port has a page
  // of its own that all its lanes' workers share (Worker::add_shared_asleep:
  // its word is nonzero while any of them sleeps), and the client's eventfd
  // is in every one's wait set (added and removed with them all stopped).
  // Membarrier (the page's kBellMembarrier) when every lane's worker can
  // issue it: a client that relies on it is counted by all of them, and each
  // makes the call before a long sleep while it counts one.
  void set_lane_bell(std::unique_ptr<DoorbellPage> bell) { lane_bell_ = std::move(bell); }
  const std::vector<dataplane::Worker*>& lane_workers() const { return stop_set_; }
  int doorbell_page_fd() const override {
    if (!extra_.empty()) return lane_bell_ ? lane_bell_->client_fd() : -1;
    return bell_ ? bell_->client_fd() : -1;
  }
  void add_doorbell(int fd) override {
    if (extra_.empty()) return worker_->add_doorbell(fd);
    for (dataplane::Worker* w : stop_set_) w->add_doorbell(fd);
  }
  void remove_doorbell(int fd) override {
    if (extra_.empty()) return worker_->remove_doorbell(fd);
    for (dataplane::Worker* w : stop_set_) w->remove_doorbell(fd);
  }
  bool add_membarrier_user() override {
    if (!extra_.empty()) {
      if (!lane_bell_ || !lane_bell_->membarrier()) return false;
      for (dataplane::Worker* w : stop_set_) w->add_membarrier_user();
      return true;
    }
    if (!worker_->membarrier()) return false;
    worker_->add_membarrier_user();
    return true;
  }
  void remove_membarrier_user() override {
    if (!extra_.empty()) {
      for (dataplane::Worker* w : stop_set_) w->remove_membarrier_user();
      return;
    }
    worker_->remove_membarrier_user();
  }

 private:
  std::unique_ptr<dataplane::Device> dev_;          // lane 0 (owns the port)
  std::unique_ptr<dataplane::PortLanes> lanes_;     // null with one lane
  std::vector<std::unique_ptr<dataplane::Device>> extra_;  // lanes 1..
  const dataplane::TscClock& clock_;
  std::vector<dataplane::Worker*> lane_workers_, stop_set_;
  std::vector<unsigned> lane_worker_index_;
  dataplane::Worker* worker_ = nullptr;
  unsigned worker_index_ = 0;
  DoorbellPage* bell_ = nullptr;
  std::unique_ptr<DoorbellPage> lane_bell_;  // with lanes: the port's own page
};

}  // namespace isoroce::ctrl
