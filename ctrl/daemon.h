// isoroced: EAL, the devices (one per port), the worker lcores that poll them,
// the control socket and DPDK telemetry. The control thread (the EAL main
// lcore) serves clients; every engine call runs on the device's worker through
// Worker::call. Every resource a client creates is recorded in its Session and
// destroyed when the connection closes, however the client went away.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ctrl/config.h"
#include "ctrl/reference_echo.h"
#include "ctrl/reference_flow.h"
#include "ctrl/shm_pump.h"
#include "dataplane/dpdk/clock.h"
#include "dataplane/dpdk/device.h"
#include "dataplane/dpdk/worker.h"

namespace isoroce::ctrl {

using nlohmann::json;

inline constexpr const char* kVersion = "0.1.0";

struct DeviceEntry {
  std::unique_ptr<dataplane::Device> dev;
  std::unique_ptr<ShmPump> pump;  // the clients' shared-memory queues (a hook of dev)
  dataplane::Worker* worker = nullptr;
  uint32_t sessions = 0;  // clients that opened it
  // Policy justitia: the reference flow from this device to ref_peer (a hook of
  // dev; its peer end lives in ref_peer's engine), or why there is none.
  std::unique_ptr<ReferenceFlow> ref;
  DeviceEntry* ref_peer = nullptr;
  std::string ref_note;
  // Every device answers other daemons' reference probes (UD QPN 15); with
  // justitia and a ref_peer address it probes that peer itself.
  std::unique_ptr<ReferenceEcho> echo;
  std::optional<wire::IpAddr> ref_peer_ip;
  // Asynchronous events drained from the engine (control thread; telemetry reads).
  std::atomic<uint64_t> async_events{0};
  std::atomic<uint64_t> latency_target_missed{0};
};

// Registered memory mapped from a client's memfd, or from its pieces (memfds
// and the client's own files, back to back; docs/control-protocol.md).
struct Mapping {
  void* base = nullptr;   // the mmap of the pages
  size_t len = 0;
  uint8_t* addr = nullptr;  // the registered bytes in the daemon
  uint64_t iova = 0;        // what the client's SGEs call them
  uint64_t length = 0;
  std::vector<int> guards;  // fault_guard slots of its file pieces
};

struct Session {
  uint64_t id = 0;
  int fd = -1;
  int pid = 0;
  std::string comm;
  DeviceEntry* dev = nullptr;  // after "open"
  std::set<uint32_t> pds, cqs, srqs, ahs, qps;
  std::map<uint32_t, Mapping> mrs;  // lkey -> mapping
  // Shared-memory queues (ctrl/shm_abi.h) of this client's objects.
  std::map<uint32_t, std::unique_ptr<ShmQueue>> cq_rings, srq_rings;
  std::map<uint32_t, std::pair<std::unique_ptr<ShmQueue>, std::unique_ptr<ShmQueue>>> qp_rings;  // SQ, RQ
  std::map<uint32_t, int> cq_eventfds;
  std::vector<int> reply_fds;  // sent with the reply to the current request, then closed
  // Asynchronous events of this client's objects not yet taken (get_async_events).
  std::deque<json> async_events;
  int async_eventfd = -1;  // "open" with async_events: written when one is queued
};

// What the daemon knows of a QP beyond the engine: its owner and class.
struct QpInfo {
  uint64_t client = 0;
  int pid = 0;
  std::string comm;
  std::string cls = "bandwidth";
  uint64_t app = 0;  // Justitia's application: the client connection (session id); 0: the daemon's own
};

class Daemon {
 public:
  explicit Daemon(DaemonConfig config);
  ~Daemon();

  // EAL, ports, workers, the socket, telemetry. On failure: *error, and
  // nothing left half-started that the destructor cannot undo.
  bool start(int argc0_ignored, std::string* error);
  // Serves clients until SIGTERM/SIGINT; returns the exit status.
  int run();

  // Views shared by the socket and telemetry (take the registry lock).
  json status_view();
  json devices_view();
  json qps_view();
  std::optional<json> qp_view(uint32_t qpn);
  json stats_view();
  json sched_view();

  // One request from a client; the reply.
  json handle(Session& s, const json& req, std::vector<int>& fds);

 private:
  bool open_socket(std::string* error);
  bool publish_socket(std::string* error);  // listen, then rename onto the path
  void accept_client();
  void serve(Session& s);
  void close_session(uint64_t id);
  void reclaim(Session& s);
  void shutdown_qps();
  DeviceEntry* find_device(const std::string& name);
  // The device and QPN of a QP the daemon knows (first match over devices).
  DeviceEntry* find_qp(uint32_t qpn);
  json qp_json(DeviceEntry& d, uint32_t qpn, sched::Picos now);
  bool resolve_neighbor(DeviceEntry& d, const wire::IpAddr& ip);
  // Policy justitia: starts d's reference flow (its peer: the other port with
  // --loopback), or notes and logs why it cannot. Workers must be running.
  void start_reference_flow(DeviceEntry& d);
  // Stops every reference flow with an end on d; returns their sources.
  std::vector<DeviceEntry*> stop_reference_flows(DeviceEntry& d);
  void stop_reference_flow(DeviceEntry& d);
  // Takes every engine's asynchronous events: logs, counts, queues them for
  // their clients (periodically from run(), and before get_async_events).
  void drain_async_events();
  json justitia_json(DeviceEntry& d);

  // verbs_ops.cc
  json verbs_op(Session& s, const std::string& op, const json& req, std::vector<int>& fds);
  json admin_op(Session& s, const std::string& op, const json& req);
  json reconfigure_op(const std::string& op, const json& req);

  DaemonConfig config_;
  dataplane::TscClock* clock_ = nullptr;
  std::unique_ptr<dataplane::TscClock> clock_owner_;
  std::vector<std::unique_ptr<DeviceEntry>> devices_;
  std::vector<std::unique_ptr<dataplane::Worker>> workers_;
  std::vector<unsigned> worker_lcores_;
  bool eal_ready_ = false;
  bool launched_ = false;
  int listen_fd_ = -1;
  std::string socket_tmp_;  // the bound name until publish_socket renames it
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  uint64_t next_session_ = 1;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;
  std::map<int, uint64_t> session_by_fd_;
  std::mutex registry_mu_;  // qp_info_ (telemetry reads it from its own thread)
  std::map<std::pair<const DeviceEntry*, uint32_t>, QpInfo> qp_info_;
  sched::Picos started_at_ = 0;
  std::atomic<size_t> client_count_{0};  // sessions_.size(), for telemetry
};

}  // namespace isoroce::ctrl
