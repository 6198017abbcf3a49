#include "ctrl/daemon.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ctrl/fault_guard.h"
#include "ctrl/log.h"
#include "ctrl/protocol.h"
#include "ctrl/telemetry.h"
#include "ctrl/wire_json.h"

namespace isoroce::ctrl {
namespace {

int worker_main(void* arg) {
  static_cast<dataplane::Worker*>(arg)->run();
  return 0;
}

uint32_t mtu_bytes(uint32_t mtu) { return mtu; }
ibv_mtu mtu_enum(uint32_t mtu) {
  switch (mtu) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return IBV_MTU_1024;
  }
}

// The largest frame a port sends or must receive: a full RoCE packet at the
// MTU (Ethernet + VLAN + IPv6 + UDP + BTH + RETH/AtomicETH + ICRC) or a full
// 1500-byte Ethernet frame (ping, ARP from peers).
uint32_t max_frame(uint32_t mtu) { return std::max<uint32_t>(mtu_bytes(mtu) + 18 + 40 + 8 + 12 + 28 + 4, 1518); }

}  // namespace

Daemon::Daemon(DaemonConfig config) : config_(std::move(config)) {}

Daemon::~Daemon() {
  for (auto& [id, s] : sessions_) {
    if (s->fd >= 0) close(s->fd);
  }
  if (launched_) {
    for (auto& w : workers_) w->stop();
    rte_eal_mp_wait_lcore();
  }
  devices_.clear();  // stops and closes the ports
  workers_.clear();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    // The real path only if this daemon published it (never another daemon's).
    unlink(socket_tmp_.empty() ? config_.socket.c_str() : socket_tmp_.c_str());
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (signal_fd_ >= 0) close(signal_fd_);
  if (eal_ready_) rte_eal_cleanup();
}

bool Daemon::start(int, std::string* error) {
  log_threshold() = parse_log_level(config_.log_level);
  // SIGTERM/SIGINT arrive on a signalfd; block them before EAL starts its
  // threads so every thread inherits the mask.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Clients' files mapped for reg_mr may shrink under us (ctrl/fault_guard.h).
  fault_guard::install();
  signal_fd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

  // Refuse early if another daemon serves the socket (before EAL takes the prefix).
  if (!open_socket(error)) return false;

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
  clock_owner_ = std::make_unique<dataplane::TscClock>();
  clock_ = clock_owner_.get();
  started_at_ = clock_->now();

  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) { worker_lcores_.push_back(lcore); }
  if (worker_lcores_.empty()) {
    *error = "lcores: '" + config_.lcores + "' gives no worker lcore (name at least two: the control thread and a worker)";
    return false;
  }

  // Ports.
  std::vector<uint16_t> port_ids;
  if (config_.loopback) {
    uint16_t a, b;
    if (!dataplane::Port::make_ring_pair("isoroce0", "isoroce1", &a, &b, error)) return false;
    port_ids = {a, b};
  } else {
    for (size_t i = 0; i < config_.ports.size(); ++i) {
      const std::string& d = config_.ports[i].devargs;
      const std::string name = d.substr(0, d.find(','));
      uint16_t pid;
      if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0) {
        *error = "port[" + std::to_string(i) + "].devargs: no DPDK port '" + name +
                 "' after EAL probing (see the EAL messages above: unknown driver, missing interface?)";
        return false;
      }
      port_ids.push_back(pid);
    }
  }
  for (size_t i = 0; i < config_.ports.size(); ++i) {
    const PortConfig& pc = config_.ports[i];
    dataplane::DeviceConfig dc;
    dc.name = "isoroce" + std::to_string(i);
    dc.devargs = pc.devargs;
    dc.ip = pc.ip;
    dc.prefix_len = pc.prefix_len;
    dc.link_bps = static_cast<uint64_t>(pc.link_gbps * 1e9);
    dc.policy = *pc.policy;
    dc.mtu = mtu_enum(pc.mtu);
    dc.dcqcn = config_.dcqcn;
    dc.justitia = config_.justitia;
    dc.key_seed = 0x15070ce000ull + i * 7919 + static_cast<uint64_t>(getpid());
    // QPNs unique across the daemon's devices (isoroce-ctl qp/set-rate name a QP
    // by number): device i starts at i * 2^20 + 16, a million QPNs apart.
    dc.first_qpn = static_cast<uint32_t>((i << 20) + 16);
    auto port = dataplane::Port::open(dc.name, port_ids[i], max_frame(pc.mtu), error);
    if (port == nullptr) {
      *error = "port[" + std::to_string(i) + "] (" + pc.devargs + "): " + *error;
      return false;
    }
    auto dev = dataplane::Device::create(dc, std::move(port), error);
    if (dev == nullptr) return false;
    auto e = std::make_unique<DeviceEntry>();
    e->dev = std::move(dev);
    e->ref_peer_ip = pc.ref_peer;
    e->pump = std::make_unique<ShmPump>(e->dev->engine());
    e->dev->add_hook(e->pump.get());
    devices_.push_back(std::move(e));
  }

  // Workers: devices spread round robin over the worker lcores.
  const size_t nw = std::min(worker_lcores_.size(), devices_.size());
  std::vector<std::vector<dataplane::Device*>> groups(nw);
  for (size_t i = 0; i < devices_.size(); ++i) groups[i % nw].push_back(devices_[i]->dev.get());
  dataplane::IdleConfig idle;
  idle.max_sleep = sched::Picos{config_.idle_sleep_us} * 1'000'000;
  for (size_t w = 0; w < nw; ++w) {
    auto worker = std::make_unique<dataplane::Worker>(static_cast<unsigned>(w), groups[w], *clock_, idle);
    if (!worker->init(error)) return false;
    for (size_t i = w; i < devices_.size(); i += nw) devices_[i]->worker = worker.get();
    workers_.push_back(std::move(worker));
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

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = signal_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev);

  // Justitia's reference flows (they need the workers: ARP, engine calls).
  for (auto& d : devices_) start_reference_flow(*d);

  if (!publish_socket(error)) return false;
  register_telemetry(this);
  for (size_t i = 0; i < devices_.size(); ++i) {
    const auto& c = devices_[i]->dev->config();
    const auto& m = devices_[i]->dev->port().mac();
    log(LogLevel::kInfo, "{}: {} ({}), MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {}, {} Gb/s, policy {}",
        c.name, c.devargs, devices_[i]->dev->port().driver(), m[0], m[1], m[2], m[3], m[4], m[5],
        config_.ports[i].ip_text, static_cast<double>(c.link_bps) / 1e9, sched::to_string(c.policy));
  }
  log(LogLevel::kInfo, "listening on {} ({} device(s), {} worker lcore(s))", config_.socket,
      devices_.size(), workers_.size());
  return true;
}

bool Daemon::open_socket(std::string* error) {
  // The socket is bound under a temporary name and renamed onto the real path
  // only once it listens (start()): a client that sees the path is never refused.
  const std::filesystem::path path(config_.socket);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  socket_tmp_ = config_.socket + "." + std::to_string(getpid()) + ".new";
  sockaddr_un addr{}, tmp{};
  addr.sun_family = tmp.sun_family = AF_UNIX;
  if (socket_tmp_.size() >= sizeof tmp.sun_path) {
    *error = "socket " + config_.socket + ": path too long";
    return false;
  }
  std::memcpy(addr.sun_path, config_.socket.c_str(), config_.socket.size());
  std::memcpy(tmp.sun_path, socket_tmp_.c_str(), socket_tmp_.size());
  // A live daemon on the path keeps it; a stale file is replaced by the rename.
  const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  const bool alive = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(probe);
  if (alive) {
    *error = "socket " + config_.socket + ": another isoroced is serving it (--socket picks another path)";
    socket_tmp_.clear();
    return false;
  }
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  unlink(socket_tmp_.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&tmp), sizeof tmp) != 0) {
    *error = "socket " + config_.socket + ": " + std::strerror(errno);
    close(listen_fd_), listen_fd_ = -1;
    socket_tmp_.clear();
    return false;
  }
  chmod(socket_tmp_.c_str(), 0666);  // applications need not run as root
  return true;  // listen() and rename once everything is up: clients never see a half-started daemon
}

bool Daemon::publish_socket(std::string* error) {
  if (listen(listen_fd_, 64) != 0) {
    *error = "listen " + config_.socket + ": " + std::strerror(errno);
    return false;
  }
  if (rename(socket_tmp_.c_str(), config_.socket.c_str()) != 0) {
    *error = "socket " + config_.socket + ": rename from " + socket_tmp_ + ": " + std::strerror(errno);
    return false;
  }
  socket_tmp_.clear();
  return true;
}

void Daemon::accept_client() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto s = std::make_unique<Session>();
    s->id = next_session_++;
    s->fd = fd;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      s->pid = cred.pid;
      std::ifstream comm("/proc/" + std::to_string(cred.pid) + "/comm");
      std::getline(comm, s->comm);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    log(LogLevel::kDebug, "client {} connected (pid {}, {})", s->id, s->pid, s->comm);
    session_by_fd_[fd] = s->id;
    sessions_[s->id] = std::move(s);
    client_count_ = sessions_.size();
  }
}

void Daemon::serve(Session& s) {
  std::string text;
  std::vector<int> fds;
  const RecvStatus st = recv_message(s.fd, &text, &fds);
  if (st != RecvStatus::kOk) {
    for (int f : fds) close(f);
    close_session(s.id);
    return;
  }
  json reply;
  json req = json::parse(text, nullptr, false);
  if (req.is_discarded() || !req.is_object() || !req.contains("op") || !req["op"].is_string()) {
    reply = {{"ok", false}, {"errno", EPROTO}, {"error", "a request is a JSON object with a string \"op\""}};
  } else {
    try {
      reply = handle(s, req, fds);
    } catch (const std::exception& e) {
      // A field of the wrong type (nlohmann::json::type_error) and the like:
      // the request is refused, the daemon carries on.
      reply = {{"ok", false}, {"errno", EINVAL}, {"error", std::string("malformed request: ") + e.what()}};
    }
    if (req.contains("id")) reply["id"] = req["id"];
  }
  for (int f : fds) close(f);  // handlers dup what they keep
  const bool sent = send_message(s.fd, reply.dump(-1, ' ', false, json::error_handler_t::replace), s.reply_fds);
  for (int f : s.reply_fds) close(f);
  s.reply_fds.clear();
  if (!sent) close_session(s.id);
}

void Daemon::close_session(uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  reclaim(s);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s.fd, nullptr);
  close(s.fd);
  session_by_fd_.erase(s.fd);
  log(LogLevel::kDebug, "client {} gone (pid {}): resources reclaimed", s.id, s.pid);
  sessions_.erase(it);
  client_count_ = sessions_.size();
}

void Daemon::shutdown_qps() {
  for (auto& d : devices_) {
    d->worker->call([&](sched::Picos) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      for (wire::Qpn q : d->dev->engine().qp_numbers()) d->dev->engine().modify_qp(q, a, IBV_QP_STATE);
    });
  }
}

int Daemon::run() {
  // Engines' asynchronous events are drained every 250 ms (and before a client
  // asks for them): cheap, and soon enough for a log line.
  constexpr auto kDrainEvery = std::chrono::milliseconds(250);
  auto last_drain = std::chrono::steady_clock::now();
  for (;;) {
    epoll_event evs[32];
    const int n = epoll_wait(epoll_fd_, evs, 32, 250);
    if (std::chrono::steady_clock::now() - last_drain >= kDrainEvery) {
      drain_async_events();
      last_drain = std::chrono::steady_clock::now();
    }
    bool stop = false;
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == listen_fd_) {
        accept_client();
      } else if (fd == signal_fd_) {
        signalfd_siginfo si{};
        if (read(signal_fd_, &si, sizeof si) == sizeof si) {
          log(LogLevel::kInfo, "{}: stopping", strsignal(static_cast<int>(si.ssi_signo)));
          stop = true;
        }
      } else if (auto it = session_by_fd_.find(fd); it != session_by_fd_.end()) {
        serve(*sessions_.at(it->second));
      }
    }
    if (stop) break;
  }
  // Stop accepting, move every QP to ERR so posted work completes with flush
  // errors, give clients a moment to poll them, then reclaim and exit.
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  close(listen_fd_);
  listen_fd_ = -1;
  unlink(config_.socket.c_str());
  shutdown_qps();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until && !sessions_.empty()) {
    epoll_event evs[32];
    const int n = epoll_wait(epoll_fd_, evs, 32, 20);
    for (int i = 0; i < n; ++i) {
      if (auto it = session_by_fd_.find(evs[i].data.fd); it != session_by_fd_.end())
        serve(*sessions_.at(it->second));
    }
  }
  while (!sessions_.empty()) close_session(sessions_.begin()->first);
  drain_async_events();
  for (auto& d : devices_) stop_reference_flow(*d);
  unregister_telemetry();
  for (auto& w : workers_) w->stop();
  rte_eal_mp_wait_lcore();
  launched_ = false;
  log(LogLevel::kInfo, "stopped");
  return 0;
}

DeviceEntry* Daemon::find_device(const std::string& name) {
  for (auto& d : devices_)
    if (d->dev->config().name == name) return d.get();
  return nullptr;
}

bool Daemon::resolve_neighbor(DeviceEntry& d, const wire::IpAddr& ip) {
  // ARP/ND on the worker; wait up to one second for the answer.
  for (int attempt = 0; attempt < 40; ++attempt) {
    bool known = false;
    // Solicit on the first try and every 250 ms; otherwise just look.
    d.worker->call([&](sched::Picos) {
      known = d.dev->net().lookup(ip).has_value();
      if (known || attempt % 10 == 0) known = d.dev->resolve(ip);
    });
    if (known) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

void Daemon::start_reference_flow(DeviceEntry& d) {
  const dataplane::DeviceConfig& c = d.dev->config();
  d.ref_note.clear();
  if (!d.echo) {
    // The echo every device runs (and, with a ref_peer, the probes).
    auto echo = std::make_unique<ReferenceEcho>(*d.dev);
    std::string error;
    d.worker->call([&](sched::Picos now) { error = echo->create(now); });
    if (error.empty()) {
      d.echo = std::move(echo);
      std::lock_guard lock(registry_mu_);
      QpInfo& info = qp_info_[{&d, ReferenceEcho::kQpn}];
      info.pid = getpid();
      info.comm = "isoroced";
      info.cls = "reference";
    } else {
      d.worker->call([&](sched::Picos) { echo->destroy(); });
      log(LogLevel::kError, "{}: the reference echo (UD QPN {}) failed: {}", c.name, ReferenceEcho::kQpn, error);
    }
  }
  if (c.policy != sched::Policy::kJustitia || d.ref) return;
  if (d.ref_peer_ip) {
    if (!d.echo) {
      d.ref_note = "no reference flow: the reference echo QP could not be made; SafeUtil stays at MaxRate";
      return;
    }
    const wire::IpAddr peer = *d.ref_peer_ip;
    d.worker->call([&](sched::Picos now) { d.echo->start_probing(now, peer, c.justitia.ref_period); });
    log(LogLevel::kInfo, "{}: policy justitia: reference flow to {} (UD QPN {} both ends, echoed), a {} B SEND every {} us, "
        "Target99 {} us", c.name, gid_text(peer), ReferenceEcho::kQpn, ReferenceEcho::kProbeBytes,
        static_cast<double>(c.justitia.ref_period) / 1e6, static_cast<double>(c.justitia.target99) / 1e6);
    return;
  }
  DeviceEntry* peer = nullptr;
  if (config_.loopback) {
    for (auto& o : devices_)
      if (o.get() != &d) peer = o.get();
  }
  if (peer == nullptr) {
    d.ref_note = "no reference flow: set ref_peer (--ref-peer ADDR) to a port of another isoroced, or use "
                 "--loopback; SafeUtil stays at MaxRate";
    log(LogLevel::kWarning, "{}: policy justitia: {}", c.name, d.ref_note);
    return;
  }
  auto flow = std::make_unique<ReferenceFlow>(*d.dev, *peer->dev, c.justitia.ref_period);
  std::string error;
  d.worker->call([&](sched::Picos) { error = flow->create_src(); });
  if (error.empty()) peer->worker->call([&](sched::Picos) { error = flow->create_dst(); });
  if (error.empty() && (!resolve_neighbor(d, peer->dev->config().ip) || !resolve_neighbor(*peer, c.ip)))
    error = "no ARP/ND answer between " + c.name + " and " + peer->dev->config().name;
  if (error.empty()) peer->worker->call([&](sched::Picos) { error = flow->connect_dst(); });
  if (error.empty()) d.worker->call([&](sched::Picos now) { error = flow->connect_src(now); });
  if (!error.empty()) {
    d.worker->call([&](sched::Picos) { flow->destroy_src(); });
    peer->worker->call([&](sched::Picos) { flow->destroy_dst(); });
    d.ref_note = "reference flow to " + peer->dev->config().name + " failed: " + error + "; SafeUtil stays at MaxRate";
    log(LogLevel::kError, "{}: policy justitia: {}", c.name, d.ref_note);
    return;
  }
  const ReferenceStats st = flow->stats();
  {
    std::lock_guard lock(registry_mu_);
    for (auto [entry, qpn] : {std::pair{&d, st.src_qpn}, std::pair{peer, st.dst_qpn}}) {
      QpInfo& info = qp_info_[{entry, qpn}];
      info.client = 0;
      info.pid = getpid();
      info.comm = "isoroced";
      info.cls = "reference";
      info.app = 0;
    }
  }
  d.ref = std::move(flow);
  d.ref_peer = peer;
  log(LogLevel::kInfo, "{}: policy justitia: reference flow to {} (QP {} -> {}), a {} B WRITE every {} us, Target99 {} us",
      c.name, peer->dev->config().name, st.src_qpn, st.dst_qpn, ReferenceFlow::kProbeBytes,
      static_cast<double>(c.justitia.ref_period) / 1e6, static_cast<double>(c.justitia.target99) / 1e6);
}

void Daemon::stop_reference_flow(DeviceEntry& d) {
  if (d.echo) {
    d.worker->call([&](sched::Picos) { d.echo->destroy(); });
    d.echo.reset();
    std::lock_guard lock(registry_mu_);
    qp_info_.erase({&d, ReferenceEcho::kQpn});
  }
  if (!d.ref) return;
  DeviceEntry* peer = d.ref_peer;
  ReferenceStats st;
  d.worker->call([&](sched::Picos) {
    st = d.ref->stats();
    d.ref->destroy_src();
  });
  peer->worker->call([&](sched::Picos) { d.ref->destroy_dst(); });
  {
    std::lock_guard lock(registry_mu_);
    qp_info_.erase({&d, st.src_qpn});
    qp_info_.erase({peer, st.dst_qpn});
  }
  d.ref.reset();
  d.ref_peer = nullptr;
  log(LogLevel::kDebug, "{}: reference flow stopped ({} probes)", d.dev->config().name, st.completed);
}

std::vector<DeviceEntry*> Daemon::stop_reference_flows(DeviceEntry& d) {
  std::vector<DeviceEntry*> stopped;
  for (auto& o : devices_) {
    if (o.get() == &d || (o->ref && o->ref_peer == &d)) {
      stop_reference_flow(*o);
      stopped.push_back(o.get());
    }
  }
  return stopped;
}

void Daemon::drain_async_events() {
  for (auto& d : devices_) {
    std::vector<transport::AsyncEvent> events;
    sched::JustitiaStats js;
    bool have_js = false;
    d->worker->call([&](sched::Picos) {
      events = d->dev->engine().take_async_events();
      if (const sched::JustitiaStats* s = d->dev->engine().scheduler().justitia_stats(); s && !events.empty()) {
        js = *s;
        have_js = true;
      }
    });
    const std::string& name = d->dev->config().name;
    for (const transport::AsyncEvent& ev : events) {
      ++d->async_events;
      const char* type = "";
      Session* owner = nullptr;
      auto by_handle = [&](auto member) {
        for (auto& [id, s] : sessions_)
          if (s->dev == d.get() && ((*s).*member).count(ev.id)) return s.get();
        return static_cast<Session*>(nullptr);
      };
      uint64_t client = 0;
      switch (ev.type) {
        case transport::AsyncEventType::kQpFatal: type = "qp_fatal"; owner = by_handle(&Session::qps); break;
        case transport::AsyncEventType::kCqError: type = "cq_error"; owner = by_handle(&Session::cqs); break;
        case transport::AsyncEventType::kSrqLimitReached: type = "srq_limit_reached"; owner = by_handle(&Session::srqs); break;
        case transport::AsyncEventType::kLatencyTargetMissed:
          type = "latency_target_missed";
          owner = by_handle(&Session::qps);
          ++d->latency_target_missed;
          break;
      }
      if (owner != nullptr) client = owner->id;
      if (ev.type == transport::AsyncEventType::kLatencyTargetMissed) {
        log(LogLevel::kWarning,
            "{}: latency-class QP {} (client {}{}) admitted while Current99 {} us > Target99 {} us "
            "(justitia soft admission; SafeUtil {} Gb/s)",
            name, ev.id, client, owner ? " pid " + std::to_string(owner->pid) + " " + owner->comm : std::string(),
            have_js ? static_cast<double>(js.current99) / 1e6 : 0.0, have_js ? static_cast<double>(js.target99) / 1e6 : 0.0,
            have_js ? static_cast<double>(js.safe_util_bps) / 1e9 : 0.0);
      } else {
        const bool ref = d->ref && ev.type == transport::AsyncEventType::kQpFatal && ev.id == d->ref->src_qpn();
        log(ref ? LogLevel::kWarning : LogLevel::kInfo, "{}: async event {} on {} (client {}){}", name, type, ev.id,
            client, ref ? ": the reference flow's QP" : "");
      }
      if (owner != nullptr) {
        owner->async_events.push_back({{"type", type}, {"device", name}, {"id", ev.id}});
        if (owner->async_events.size() > 1024) owner->async_events.pop_front();
        if (owner->async_eventfd >= 0) {
          const uint64_t one = 1;
          (void)!write(owner->async_eventfd, &one, sizeof one);
        }
      }
    }
  }
}

}  // namespace isoroce::ctrl
