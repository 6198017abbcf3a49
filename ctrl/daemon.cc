#include "ctrl/daemon.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>

#include "ctrl/fault_guard.h"
#include "ctrl/log.h"
#include "ctrl/telemetry.h"
#include "ctrl/wire_json.h"

namespace isoroce::ctrl {

Daemon::Daemon(DaemonConfig config)
    : config_(std::move(config)), set_(config_), server_(*this, config_.socket, config_.admin_gid) {
  set_limits(config_.limits);
  tenants().set_rules(config_.tenants);
  server_.set_access(config_.socket_gid ? std::optional<gid_t>(*config_.socket_gid) : std::nullopt,
                     config_.socket_mode);
  if (!config_.socket_gid)
    log(LogLevel::kWarning, "socket group '{}' does not exist: only root and the daemon's group may connect "
        "(addgroup --system {}, or socket_group / --socket-group)", config_.socket_group, config_.socket_group);
}

namespace {

// What apply_engine_settings changes, as text, to tell whether a reload changes anything.
std::string engine_settings(const dataplane::DeviceConfig& c) {
  std::string t = c.policy;
  for (const auto& p : dcqcn::param_table()) t += " " + std::string(p.name) + "=" + dcqcn::get_param(c.dcqcn, p.name);
  for (const auto& [k, v] : justitia_param_values(c.justitia)) t += " " + k + "=" + std::to_string(v);
  for (const auto& [k, v] : justitia_param_words(c.justitia)) t += " " + k + "=" + v;
  t += " rnic=" + std::to_string(c.rnic.batch_packets) + "/" + std::to_string(c.rnic.pipeline_packets) + "/" +
       std::to_string(c.rnic.pipeline_jitter_packets) + "/" + std::to_string(c.rnic.message_burst_bytes) + "/" +
       std::to_string(c.rnic.max_msgs_per_sec) + "/" + std::to_string(c.rnic.seed);
  return t;
}

}  // namespace

void Daemon::reload() {
  if (config_.config_file.empty()) {
    log(LogLevel::kWarning, "SIGHUP: no --config file to reload");
    return;
  }
  DaemonConfig fresh;
  std::optional<ConfigError> e = load_config_file(config_.config_file, &fresh);
  if (!e) e = validate(&fresh);
  if (e) {
    log(LogLevel::kError, "SIGHUP: {} kept the running settings: {}", config_.config_file, e->text());
    return;
  }
  tenants().set_rules(fresh.tenants);  // for QPs created from now on
  for (size_t i = 0; i < devices_.size(); ++i) {
    DeviceEntry& d = *devices_[i];
    dataplane::DeviceConfig cfg = d.config();
    cfg.policy = i < fresh.ports.size() && fresh.ports[i].policy ? *fresh.ports[i].policy : fresh.policy;
    cfg.dcqcn = fresh.dcqcn;
    cfg.justitia = fresh.justitia;
    cfg.rnic = fresh.rnic;
    if (engine_settings(cfg) == engine_settings(d.config())) continue;
    if (d.sessions != 0) {
      // A new engine would drop the clients' QPs: they keep what they have.
      log(LogLevel::kWarning, "SIGHUP: {}: {} client(s) have it open, its scheduler settings stay until it is "
          "unused (then: isoroce-ctl set-policy, or SIGHUP again)", cfg.name, d.sessions);
      continue;
    }
    const json r = apply_engine_settings(*this, d, cfg, "SIGHUP");
    if (!r.value("ok", false)) log(LogLevel::kError, "SIGHUP: {}", r.value("error", ""));
  }
}

Daemon::~Daemon() {
  set_.stop_workers();
  devices_.clear();  // stops and closes the ports, before EAL goes (set_)
  if (signal_fd_ >= 0) close(signal_fd_);
}

bool Daemon::start(std::string* error) {
  log_threshold() = parse_log_level(config_.log_level);
  // SIGTERM/SIGINT arrive on a signalfd; block them before EAL starts its
  // threads so every thread inherits the mask.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);  // reload the scheduler settings (reload())
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Clients' files mapped for reg_mr may shrink under us (ctrl/fault_guard.h).
  fault_guard::install();
  signal_fd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

  // Refuse early if another daemon serves the socket (before EAL takes the prefix).
  if (!server_.open(error)) return false;
  if (!set_.start(&devices_, error)) return false;
  started_at_ = set_.clock().now();
  server_.watch(signal_fd_);
  // Every device's CM on QP1, then Justitia's reference flows (they need the
  // workers: ARP, engine calls).
  for (auto& d : devices_) start_cm(*d);
  for (auto& d : devices_) start_reference_flow(*d);
  // listen() once everything is up: clients never see a half-started daemon.
  if (!server_.listen(error)) return false;
  register_telemetry(this);
  log_devices();
  return true;
}

void Daemon::log_devices() {
  for (auto& d : devices_) {
    const auto& c = d->config();
    const dataplane::Device& dev = *d->driver->dpdk();
    const auto& m = dev.port().mac();
    log(LogLevel::kInfo, "{}: {} ({}), MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {}, {} Gb/s, policy {}",
        c.name, c.devargs, dev.port().driver(), m[0], m[1], m[2], m[3], m[4], m[5], d->ip_text,
        static_cast<double>(c.link_bps) / 1e9, c.policy);
  }
  log(LogLevel::kInfo, "listening on {} ({} device(s), {} worker lcore(s))", config_.socket, devices_.size(),
      set_.workers_view().size());
}

json Daemon::status_view() {
  return {{"pid", getpid()},
          {"version", kVersion},
          {"socket", config_.socket},
          {"file_prefix", config_.file_prefix},
          {"uptime_s", static_cast<double>(set_.clock().now() - started_at_) / 1e12},
          {"devices", devices_.size()},
          {"clients", server_.sessions()},
          {"workers", set_.workers_view()}};
}

void Daemon::shutdown_qps() {
  for (auto& d : devices_) {
    d->run([&](sched::Picos) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      // Not QP1: the clients' connections are closed on the wire (DREQ) as they go.
      for (size_t k = 0; k < d->lanes(); ++k)
        for (wire::Qpn q : d->lane_engine(k).qp_numbers())
          if (q.value() != CmAgent::kQpn) d->lane_engine(k).modify_qp(q, a, IBV_QP_STATE);
    });
  }
}

int Daemon::run() {
  // The CM agents' event fds join the epoll (cm_ids().agent watches each once).
  for (auto& d : devices_) {
    std::string cm_error;
    if (cm_ids().agent(*d, &cm_error) == nullptr) log(LogLevel::kWarning, "{}", cm_error);
  }
  // Engines' asynchronous events are drained every 250 ms (and before a client
  // asks for them): cheap, and soon enough for a log line.
  constexpr auto kDrainEvery = std::chrono::milliseconds(250);
  auto last_drain = std::chrono::steady_clock::now();
  // A running trace is drained every 5 ms (a ring of 65536 records then
  // overflows only above 13 million events per second and device).
  bool tracing = false;
  for (bool stop = false; !stop;) {
    // rdma_resolve_addr's pending neighbour resolutions are looked at every 25 ms.
    const std::vector<int> ready = server_.poll(tracing ? 5 : cm_ids().resolving() ? 25 : 250);
    tracing = trace_tick(std::chrono::steady_clock::now());
    if (cm_ids().resolving()) cm_ids().poll_resolutions();
    if (std::chrono::steady_clock::now() - last_drain >= kDrainEvery) {
      drain_async_events();
      drain_cm_events();
      last_drain = std::chrono::steady_clock::now();
    }
    for (int fd : ready) {
      if (std::find(cm_fds_.begin(), cm_fds_.end(), fd) != cm_fds_.end()) {
        drain_cm_events();  // IB CM events for the clients' rdma_cm ids
        continue;
      }
      signalfd_siginfo si{};
      if (fd == signal_fd_ && read(signal_fd_, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGHUP) {
          reload();
          continue;
        }
        log(LogLevel::kInfo, "{}: stopping", strsignal(static_cast<int>(si.ssi_signo)));
        stop = true;
      }
    }
  }
  // Stop accepting, move every QP to ERR so posted work completes with flush
  // errors, give clients a moment to poll them, then reclaim and exit.
  server_.stop_listening();
  shutdown_qps();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until && server_.sessions() != 0) server_.poll(20);
  server_.close_all();
  drain_async_events();
  for (auto& d : devices_) stop_reference_flow(*d);
  for (auto& d : devices_) stop_cm(*d);
  unregister_telemetry();
  set_.stop_workers();
  log(LogLevel::kInfo, "stopped");
  return 0;
}

void Daemon::watch_cm_fd(int fd) {
  server_.watch(fd);
  cm_fds_.push_back(fd);
}

}  // namespace isoroce::ctrl
