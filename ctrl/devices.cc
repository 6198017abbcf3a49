#include "ctrl/devices.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pdump.h>

#include <dirent.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "ctrl/doorbell.h"
#include "ctrl/dpdk_driver.h"
#include "ctrl/log.h"
#include "dataplane/dpdk/kernel_fds.h"
#include "transport/verbs/mtu.h"

namespace isoroce::ctrl {
namespace {

int worker_main(void* arg) {
  static_cast<dataplane::Worker*>(arg)->run();
  return 0;
}

// DPDK 22.11 leaves its runtime directory (/var/run/dpdk/PREFIX) behind at
// exit: `config` and the `fbarray_*` memory maps (over 10 MB with --no-huge)
// beside its sockets, so every run of a daemon with a prefix of its own (each
// test's) would keep its share of the disk for good. As the primary process that is exiting, the
// daemon removes the files EAL makes there and then the directory if it is
// empty (anything else in it stays). `dir` must end in the daemon's prefix.
void remove_runtime_dir(const std::string& dir, const std::string& prefix) {
  const size_t slash = dir.rfind('/');
  if (prefix.empty() || prefix == "." || prefix == ".." || slash == std::string::npos ||
      dir.compare(slash + 1, std::string::npos, prefix) != 0)
    return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "config" || name == "hugepage_info" || name.starts_with("fbarray_") ||
        name.starts_with("mp_socket") || name.starts_with("dpdk_telemetry"))
      (void)unlink((dir + "/" + std::string(name)).c_str());
  }
  closedir(d);
  (void)rmdir(dir.c_str());
}

}  // namespace

DeviceSet::~DeviceSet() {
  stop_workers();
  workers_.clear();
  if (pdump_ready_) rte_pdump_uninit();
  if (eal_ready_) {
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    remove_runtime_dir(runtime_dir, config_.file_prefix);
  }
}

void DeviceSet::stop_workers() {
  if (!launched_) return;
  for (auto& w : workers_) w->stop();
  rte_eal_mp_wait_lcore();
  launched_ = false;
}

bool DeviceSet::init_eal(std::string* error) {
  std::vector<std::string> args = eal_arguments(config_);
  std::string joined;
  for (const auto& a : args) joined += " " + a;
  log(LogLevel::kInfo, "EAL arguments:{}", joined);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(args.size()), argv.data()) < 0) {
    *error = std::string("EAL initialisation failed: ") + rte_strerror(rte_errno);
    if (rte_errno == ENODEV && !config_.loopback) {
      *error += " (a port's devargs names no DPDK driver, see the EAL lines above:";
      for (size_t i = 0; i < config_.ports.size(); ++i)
        *error += " port[" + std::to_string(i) + "] = " + config_.ports[i].devargs;
      *error += ")";
    }
    *error += "; EAL arguments:" + joined;
    return false;
  }
  eal_ready_ = true;
  // DPDK's packet-capture server: dpdk-dumpcap (a secondary process with the
  // same --file-prefix) asks it to copy each port's rx/tx into its own ring
  // (docs/profiling.md). It needs the primary's memory to be shareable, which
  // --no-huge memory is not; a failure only loses live capture.
  if (rte_pdump_init() == 0) pdump_ready_ = true;
  else log(LogLevel::kWarning, "packet capture (dpdk-dumpcap) unavailable: rte_pdump_init: {}", rte_strerror(rte_errno));
  clock_ = std::make_unique<dataplane::TscClock>();
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) { worker_lcores_.push_back(lcore); }
  if (worker_lcores_.empty()) {
    *error = "lcores: '" + config_.lcores + "' gives no worker lcore (name at least two: the control thread and a worker)";
    return false;
  }
  return true;
}

bool DeviceSet::port_ids(std::vector<uint16_t>* ids, std::string* error) {
  if (config_.loopback) {
    uint16_t a, b;
    if (!dataplane::Port::make_ring_pair("isoroce0", "isoroce1", &a, &b, error)) return false;
    *ids = {a, b};
    return true;
  }
  for (size_t i = 0; i < config_.ports.size(); ++i) {
    const std::string& d = config_.ports[i].devargs;
    if (is_interface_port(d) || is_af_xdp(d)) {
      ids->push_back(RTE_MAX_ETHPORTS);  // plugged by start()
      continue;
    }
    const std::string name = d.substr(0, d.find(','));
    uint16_t pid;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0) {
      *error = "port[" + std::to_string(i) + "].devargs: no DPDK port '" + name +
               "' after EAL probing (see the EAL messages above: unknown driver, missing interface?)";
      return false;
    }
    ids->push_back(pid);
  }
  return true;
}

namespace {

// Plugs vdev `devargs` and opens it as a port; nullptr and *error on failure
// (the vdev unplugged again).
std::unique_ptr<dataplane::Port> plug(const std::string& port_name, const std::string& devargs, uint32_t mtu,
                                      uint16_t lanes, std::string* error) {
  const std::string name = devargs.substr(0, devargs.find(','));
  const std::string args = devargs.find(',') == std::string::npos ? "" : devargs.substr(devargs.find(',') + 1);
  if (int rc = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str()); rc != 0) {
    *error = devargs + ": " + rte_strerror(rc < 0 ? -rc : rc) + " (see the EAL lines above)";
    return nullptr;
  }
  uint16_t pid;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0) {
    *error = devargs + ": no ethdev after plugging it";
    (void)rte_eal_hotplug_remove("vdev", name.c_str());
    return nullptr;
  }
  // A second try (the fallback) makes its own pool.
  auto port = dataplane::Port::open(port_name + (devargs.rfind("net_af_xdp", 0) == 0 ? "x" : ""), pid,
                                    max_frame_bytes(mtu), af_packet_data_room(devargs, mtu), roce_ip_mtu(mtu), error,
                                    lanes);
  if (port == nullptr) {
    (void)rte_eth_dev_close(pid);
    (void)rte_eal_hotplug_remove("vdev", name.c_str());
  }
  return port;
}

}  // namespace

std::unique_ptr<dataplane::Port> DeviceSet::open_interface(const std::string& port_name, const PortConfig& pc,
                                                           std::string* devargs, std::string* error) {
  const std::string& iface = pc.devargs;
  const uint32_t if_index = if_nametoindex(iface.c_str());
  if (if_index == 0) {
    *error = "no network interface '" + iface + "' here (ip link shows the interfaces of this namespace)";
    return nullptr;
  }
  const uint32_t xdp_prog = dataplane::xdp_program_id(if_index);
  if (pc.mtu > kAfXdpMaxMtu) {
    log(LogLevel::kInfo, "{}: interface {} through AF_PACKET: mtu {} needs frames larger than DPDK's AF_XDP driver"
        " holds (mtu {} at most)", port_name, iface, pc.mtu, kAfXdpMaxMtu);
  } else if (xdp_prog != 0) {
    // DPDK's AF_XDP driver would detach that program when it gives up.
    log(LogLevel::kWarning, "{}: interface {} already has an XDP program (id {}: another AF_XDP user?); using AF_PACKET",
        port_name, iface, xdp_prog);
  } else {
    *devargs = interface_devargs(iface, pc.mtu, true);
    std::string why;
    if (auto port = plug(port_name, *devargs, pc.mtu, static_cast<uint16_t>(pc.lanes), &why)) {
      log(LogLevel::kInfo, "{}: interface {} through AF_XDP ({}; zero-copy where its driver has it, copy mode otherwise)",
          port_name, iface, *devargs);
      return port;
    }
    log(LogLevel::kWarning, "{}: interface {}: AF_XDP did not come up ({}: {}); using AF_PACKET instead", port_name,
        iface, *devargs, why);
  }
  *devargs = interface_devargs(iface, pc.mtu, false);
  auto port = plug(port_name, *devargs, pc.mtu, static_cast<uint16_t>(pc.lanes), error);
  if (port != nullptr) log(LogLevel::kInfo, "{}: interface {} through AF_PACKET ({})", port_name, iface, *devargs);
  return port;
}

namespace {

// A net_af_packet port's address of its own (docs/isoroced.md, "An address of
// its own"); the interface's, with a warning, where the interface delivers only
// its own address or the kernel refused.
void take_own_mac(const std::string& name, dataplane::Port& port) {
  auto text = [](const wire::MacAddr& m) {
    return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
  };
  std::string why;
  if (port.take_own_mac(&why)) {
    log(LogLevel::kInfo, "{}: Ethernet address {} of its own beside the interface's {}: the kernel's IP stack "
        "leaves the port's frames alone", name, text(port.mac()), text(port.interface_mac()));
  } else {
    log(LogLevel::kWarning, "{}: keeping the interface's Ethernet address {} ({}): the kernel's IP stack receives "
        "every RoCE frame too", name, text(port.mac()), why);
  }
}

}  // namespace

bool DeviceSet::start(std::vector<std::unique_ptr<DeviceEntry>>* out, std::string* error) {
  std::vector<uint16_t> ids;
  if (!init_eal(error) || !port_ids(&ids, error)) return false;
  for (size_t i = 0; i < config_.ports.size(); ++i) {
    const PortConfig& pc = config_.ports[i];
    dataplane::DeviceConfig dc;
    dc.name = "isoroce" + std::to_string(i);
    dc.devargs = pc.devargs;
    dc.ip = pc.ip;
    dc.prefix_len = pc.prefix_len;
    dc.link_bps = static_cast<uint64_t>(pc.link_gbps * 1e9);
    dc.policy = *pc.policy;
    dc.mtu = verbs::mtu_from_bytes(pc.mtu).value_or(IBV_MTU_1024);  // validated
    dc.dcqcn = config_.dcqcn;
    dc.justitia = config_.justitia;
    dc.rnic = config_.rnic;
    dc.key_seed = 0x15070ce000ull + i * 7919 + static_cast<uint64_t>(getpid());
    // QPNs unique across the daemon's devices (isoroce-ctl qp/set-rate name a QP
    // by number): device i starts at i * 2^20 + 16, a million QPNs apart.
    dc.first_qpn = static_cast<uint32_t>((i << 20) + 16);
    // Lanes (dataplane/dpdk/lanes.h): lane k gives out first_qpn + k + j * lanes.
    dc.lanes = pc.lanes;
    dc.qpn_stride = pc.lanes;
    std::unique_ptr<dataplane::Port> port;
    if (is_interface_port(pc.devargs)) {
      port = open_interface(dc.name, pc, &dc.devargs, error);
    } else if (is_af_xdp(pc.devargs)) {
      const std::string iface = devarg_text(pc.devargs, "iface");
      const uint32_t prog = dataplane::xdp_program_id(if_nametoindex(iface.c_str()));
      if (prog != 0) {
        *error = "interface " + iface + " already has an XDP program (id " + std::to_string(prog) +
                 "): another AF_XDP user holds it; stop that one, or use net_af_packet on it";
      } else {
        port = plug(dc.name, pc.devargs, pc.mtu, static_cast<uint16_t>(pc.lanes), error);
      }
    } else {
      port = dataplane::Port::open(dc.name, ids[i], max_frame_bytes(pc.mtu), af_packet_data_room(pc.devargs, pc.mtu),
                                   roce_ip_mtu(pc.mtu), error, static_cast<uint16_t>(pc.lanes));
    }
    if (port == nullptr) {
      *error = "port[" + std::to_string(i) + "] (" + pc.devargs + "): " + *error;
      return false;
    }
    if (port->driver() == "net_af_xdp")
      log(LogLevel::kInfo, "{}: AF_XDP socket bound in {} mode", dc.name, port->zero_copy() ? "zero-copy" : "copy");
    if (port->driver() == "net_af_packet" && pc.mac == "own") take_own_mac(dc.name, *port);
    kernel_path_hint(dc.name, pc, *port);
    const bool own_tx = port->tx_queues() >= pc.lanes;
    auto dev = dataplane::Device::create(dc, std::move(port), error);
    if (dev == nullptr) return false;
    std::unique_ptr<dataplane::PortLanes> lanes;
    std::vector<std::unique_ptr<dataplane::Device>> extra;
    if (pc.lanes > 1) {
      lanes = dataplane::PortLanes::create(dc.name, pc.lanes, dc.first_qpn, own_tx, error);
      if (lanes == nullptr) return false;
      dev->set_lanes(lanes.get());
      for (unsigned k = 1; k < pc.lanes; ++k) {
        auto lane = dataplane::Device::create_lane(lane_config(dc, dc.first_qpn, k), *dev, k, error);
        if (lane == nullptr) return false;
        extra.push_back(std::move(lane));
      }
      log(LogLevel::kInfo, "{}: {} lanes sharing {} Gb/s by their backlog; {}", dc.name, pc.lanes,
          static_cast<double>(dc.link_bps) / 1e9,
          own_tx ? "a Tx queue each" : "lanes 1.. hand their frames to lane 0's Tx queue (the driver has one)");
    }
    auto e = std::make_unique<DeviceEntry>();
    e->driver = std::make_unique<DpdkDriver>(std::move(dev), std::move(lanes), std::move(extra), *clock_);
    e->ip_text = pc.ip_text;
    e->ref_peer_ip = pc.ref_peer;
    e->pump = std::make_unique<ShmPump>(e->engine());
#if defined(__x86_64__)  // the library stamps posts with rdtsc, the TSC this clock counts
    e->pump->set_tsc(clock_->start_tsc(), clock_->hz());
#endif
    e->driver->add_hook(e->pump.get());
    for (size_t k = 1; k < e->lanes(); ++k) {
      auto pump = std::make_unique<ShmPump>(e->lane_engine(k));
#if defined(__x86_64__)
      pump->set_tsc(clock_->start_tsc(), clock_->hz());
#endif
      e->driver->add_lane_hook(k, pump.get());
      e->lane_pumps.push_back(std::move(pump));
    }
    out->push_back(std::move(e));
  }
  return launch_workers(*out, error);
}

void DeviceSet::kernel_path_hint(const std::string& name, const PortConfig& pc, const dataplane::Port& port) {
  // On the kernel I/O path every frame costs a system call, an skb and the
  // peer's receive path, whatever its size: a larger RoCE MTU is the cheapest
  // speed-up there is (docs/performance.md, "64 KB WRITEs against kernel TCP").
  // The daemon does not raise the MTU itself: the peers' interfaces must carry it too.
  if (port.driver() != "net_af_xdp" && port.driver() != "net_af_packet") return;
  const uint32_t best = port.driver() == "net_af_xdp" ? kAfXdpMaxMtu : 4096;
  uint32_t fits = pc.mtu;
  for (uint32_t m = best; m > pc.mtu; m /= 2) {
    if (port.kernel_mtu() >= roce_ip_mtu(m)) {
      fits = m;
      break;
    }
  }
  if (fits > pc.mtu)
    log(LogLevel::kInfo, "{}: interface MTU {} carries RoCE mtu {} ({} on this driver at most): on the kernel I/O path a"
        " larger mtu moves large messages faster (mtu 2048 carried 64 KB WRITEs 1.6x to 3x faster than 1024 across a"
        " veth); set --mtu {} if the peers' interfaces carry it too", name, port.kernel_mtu(), fits, best, fits);
}

bool DeviceSet::launch_workers(std::vector<std::unique_ptr<DeviceEntry>>& entries, std::string* error) {
  // Lanes of devices spread over the worker lcores round robin, in order
  // (device 0's lanes, then device 1's, ...): one device's lanes are on
  // different workers while there are as many, lane k of devices with as many
  // lanes as workers on worker k (a frame between two such ports of one
  // daemon, lane k to lane k, stays on its worker), and one lane each is
  // round robin over the devices as before lanes.
  size_t units = 0;
  std::vector<size_t> first_unit;
  for (const auto& e : entries) first_unit.push_back(units), units += e->lanes();
  const size_t nw = std::min(worker_lcores_.size(), units);
  auto worker_of = [&](size_t i, size_t k) { return (first_unit[i] + k) % nw; };
  std::vector<std::vector<dataplane::Device*>> groups(nw);
  for (size_t i = 0; i < entries.size(); ++i) {
    auto& drv = static_cast<DpdkDriver&>(*entries[i]->driver);
    if (entries[i]->lanes() > nw)
      log(LogLevel::kWarning, "{}: {} lanes but {} worker lcore(s): some lanes share a worker (--lcores)",
          entries[i]->name(), entries[i]->lanes(), nw);
    for (size_t k = 0; k < entries[i]->lanes(); ++k) groups[worker_of(i, k)].push_back(&drv.lane_device(k));
  }
  dataplane::IdleConfig idle;
  idle.max_sleep = sched::Picos{config_.idle_sleep_us} * 1'000'000;
  idle.spin_time = sched::Picos{config_.idle_spin_us} * 1'000'000;
  idle.adaptive_spin = config_.idle_spin_adaptive;
  idle.slice_us = config_.worker_slice_us;
  for (size_t w = 0; w < nw; ++w) {
    auto worker = std::make_unique<dataplane::Worker>(static_cast<unsigned>(w), groups[w], *clock_, idle);
    if (!worker->init(error)) return false;
    // Without a doorbell page (no /proc to reopen it read-only, a kernel
    // before 5.1's F_SEAL_FUTURE_WRITE) clients get none and the worker keeps
    // the quarter bound for their rings.
    std::string bell_error;
    auto bell = DoorbellPage::create(static_cast<uint32_t>(w), &bell_error);
    if (bell)
      worker->set_asleep_flag(bell->asleep(), bell->membarrier() ? bell->flags() : nullptr);
    else
      log(LogLevel::kWarning, "worker {}: no doorbell for clients ({}): their posts wait for its polling", w,
          bell_error);
    log(LogLevel::kInfo,
        "worker {} (lcore {}): idle, it blocks on {} port socket(s), its eventfd and its clients' doorbells, at most {} us",
        w, worker_lcores_[w], worker->wait_fds(), config_.idle_sleep_us);
    for (size_t i = 0; i < entries.size(); ++i)
      for (size_t k = 0; k < entries[i]->lanes(); ++k)
        if (worker_of(i, k) == w)
          static_cast<DpdkDriver&>(*entries[i]->driver).set_worker(k, worker.get(), static_cast<unsigned>(w), bell.get());
    doorbells_.push_back(std::move(bell));
    workers_.push_back(std::move(worker));
  }
  for (auto& e : entries) static_cast<DpdkDriver&>(*e->driver).settle_workers();
  // A port with lanes: a doorbell page its lanes' workers share, worker w
  // setting bit w (mod 32) while it sleeps (DpdkDriver::set_lane_bell).
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i]->lanes() < 2) continue;
    auto& drv = static_cast<DpdkDriver&>(*entries[i]->driver);
    std::string bell_error;
    auto bell = DoorbellPage::create(static_cast<uint32_t>(worker_of(i, 0)), &bell_error);
    if (!bell) {
      log(LogLevel::kWarning, "{}: no doorbell for clients ({}): their posts wait for the lanes' polling",
          entries[i]->name(), bell_error);
      continue;
    }
    // Membarrier for this page's clients only if every lane's worker can
    // issue it (each does, after setting its bit and before its last look).
    const std::vector<dataplane::Worker*>& ws = drv.lane_workers();
    const bool all_can = std::all_of(ws.begin(), ws.end(), [](const dataplane::Worker* w) { return w->membarrier(); });
    if (!all_can || !bell->membarrier()) bell->flags()->store(0, std::memory_order_relaxed);
    for (size_t w = 0; w < nw; ++w)
      if (std::find(ws.begin(), ws.end(), workers_[w].get()) != ws.end())
        workers_[w]->add_shared_asleep(bell->asleep(), 1u << (w % 32), ws, bell->membarrier() ? bell->flags() : nullptr);
    drv.set_lane_bell(std::move(bell));
  }
  for (size_t w = 0; w < nw; ++w) {
    if (rte_eal_remote_launch(worker_main, workers_[w].get(), worker_lcores_[w]) != 0) {
      *error = "cannot launch the worker on lcore " + std::to_string(worker_lcores_[w]);
      for (size_t k = 0; k < w; ++k) workers_[k]->stop();
      rte_eal_mp_wait_lcore();
      return false;
    }
    launched_ = true;
  }
  return true;
}

nlohmann::json DeviceSet::workers_view() const {
  json workers = json::array();
  for (size_t i = 0; i < workers_.size(); ++i) {
    const dataplane::WorkerStats st = workers_[i]->stats();
    json devs = json::array();
    for (const auto* d : workers_[i]->devices())
      devs.push_back(d->lane() == 0 ? d->config().name : d->config().name + "." + std::to_string(d->lane()));
    workers.push_back({{"lcore", worker_lcores_[i]}, {"devices", devs}, {"passes", st.passes},
                       {"busy_passes", st.busy_passes}, {"sleeps", st.sleeps}, {"commands", st.commands},
                       {"busy_ns", st.busy_ns},
                       {"wakeups", st.wakeups}, {"wait_fds", workers_[i]->wait_fds()},
                       {"doorbells", workers_[i]->doorbells()}, {"doorbell_wakeups", st.doorbell_wakeups},
                       {"signalled_sleeps", st.signalled_sleeps}, {"short_spins", st.short_spins},
                       {"membarrier", workers_[i]->membarrier()},
                       {"membarrier_users", workers_[i]->membarrier_users()}});
  }
  return workers;
}

}  // namespace isoroce::ctrl
