// The Communication Manager of one device on the wire: a UD QP with QPN 1
// (the GSI, Q_Key 0x80010000, P_Key 0xffff) that carries IB CM MADs to and
// from a cm::Manager (transport/cm/manager.h), as a DeviceHook of the device.
//
// Threads: start(), stop(), every command and poll() run on the device's
// worker (ops reach them through DeviceEntry::run, i.e. Executor::call).
// Events leave through a mutex-protected queue that any thread drains with
// take_events(); event_fd() (an eventfd, non-blocking, close-on-exec) is
// readable while events are waiting, for the daemon's epoll.
//
// Received MADs: the sender's GID from the GRH, its QPN from the work
// completion (DETH), the 256 bytes after the GRH go to Manager::on_mad.
// MADs to send: a UD SEND to (dgid, QP 1) once dgid's neighbour entry is
// known (the device resolves it, bounded as ReferenceEcho's answers are); a
// MAD waits at most kResolveWait for that (looked at every kResolvePoll; at
// most kRecvs wait, each on its own), then is dropped (the Manager's retries
// send it again). Address handles: at most kMaxAhs, least recently
// made first out.
//
// MADs to the device's own GID (rdma_cm between two ids of one device) never
// touch the wire: they go back into the Manager on the next poll().
//
// Each id has an owner tag (the daemon's session id): events carry it, and
// destroy_owner() ends everything a client owned when it goes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ctrl/daemon_ud_qp.h"
#include "dataplane/dpdk/device.h"
#include "transport/cm/manager.h"

namespace isoroce::ctrl {

class DeviceDriver;

struct CmAgentStats {
  bool running = false;         // QP1 exists and is hooked
  uint64_t received = 0;        // receive completions handed to the Manager
  uint64_t short_received = 0;  // receives shorter than GRH + 256 bytes (dropped)
  uint64_t recv_errors = 0;     // receive completions in error (a SEND longer than GRH + 256 bytes)
  uint64_t sent = 0;            // MADs posted
  uint64_t looped = 0;          // MADs to the device's own GID, delivered without the wire
  uint64_t unresolved = 0;      // MADs dropped: neighbour not known in time
  uint64_t send_errors = 0;     // post or completion errors, AHs that could not be made
  uint64_t events = 0;          // events queued
  uint64_t events_dropped = 0;  // events lost: the queue was full (kMaxEvents)
  cm::ManagerStats manager;
};

class CmAgent final : public dataplane::DeviceHook {
 public:
  static constexpr uint32_t kQpn = cm::kGsiQpn;
  static constexpr uint32_t kQkey = cm::kGsiQkey;
  static constexpr sched::Picos kResolveWait = 1'000'000'000'000;  // 1 s
  static constexpr sched::Picos kResolvePoll = 1'000'000'000;      // 1 ms: how often it looks meanwhile
  static constexpr size_t kMaxAhs = 64;
  static constexpr size_t kMaxEvents = 65536;

  // The Manager's local GID is the device's address (config().ip). seed 0:
  // from std::random_device, so a restarted daemon never reuses the
  // communication IDs its peers may still hold in timewait.
  explicit CmAgent(DeviceDriver& driver, uint64_t seed = 0);
  ~CmAgent();
  CmAgent(const CmAgent&) = delete;
  CmAgent& operator=(const CmAgent&) = delete;

  // On the worker: PD, CQ, MR, QP1 in RTS with receives posted, and the hook.
  // "" or what failed (stop() cleans up either way). The Manager and its ids
  // survive stop()/start() (set_policy's new engine).
  std::string start(sched::Picos now);
  void stop();

  // Commands, on the worker: as cm::Manager's (0 or a positive errno); the
  // MADs they produce are sent before they return.
  int listen(uint64_t owner, uint64_t service_id, cm::Id* id);
  int connect(uint64_t owner, const cm::ConnectParams& p, sched::Picos now, cm::Id* id);
  int accept(cm::Id id, const cm::AcceptParams& p, sched::Picos now);
  int reject(cm::Id id, const cm::RejectParams& p, sched::Picos now);
  int send_mra(cm::Id id, uint8_t service_timeout, std::span<const uint8_t> private_data, sched::Picos now);
  int establish(cm::Id id, std::span<const uint8_t> private_data, sched::Picos now);
  int notify_established(cm::Id id, sched::Picos now);
  int disconnect(cm::Id id, std::span<const uint8_t> private_data, sched::Picos now);
  int sidr_resolve(uint64_t owner, const cm::SidrParams& p, sched::Picos now, cm::Id* id);
  int sidr_reply(cm::Id id, const cm::SidrReplyParams& p, sched::Picos now);
  int destroy(cm::Id id, sched::Picos now);
  size_t destroy_owner(uint64_t owner, sched::Picos now);
  // The Manager itself (on the worker), for queries; call flush(now) after
  // a command made through it.
  cm::Manager& manager() { return *mgr_; }
  void flush(sched::Picos now);

  // Any thread.
  int event_fd() const { return efd_; }
  // Every waiting event, oldest first; clears event_fd's readiness.
  std::vector<cm::Event> take_events();

  CmAgentStats stats() const;  // on the worker

  unsigned poll(sched::Picos now) override;
  sched::Picos next_deadline() const override;

 private:
  static constexpr uint32_t kRecvs = 64;
  static constexpr uint32_t kSends = 64;
  static constexpr uint32_t kGrh = 40;
  static constexpr uint32_t kSlot = kGrh + cm::kMadBytes;

  struct Waiting {
    cm::OutMad mad;
    sched::Picos since = 0;
  };

  void on_recv(sched::Picos now, uint32_t slot, uint32_t byte_len, uint32_t src_qp);
  // Sends what the Manager produced and queues its events.
  void pump(sched::Picos now);
  bool try_send(sched::Picos now, const cm::OutMad& m);  // false: neighbour not known yet
  uint32_t address(sched::Picos now, const cm::Gid& gid);
  void push_events();

  DeviceDriver& driver_;
  std::unique_ptr<cm::Manager> mgr_;
  DaemonUdQp qp_;  // QP1 and its resources (valid while running)
  bool hooked_ = false;
  uint32_t next_send_slot_ = 0;
  std::map<cm::Gid, uint32_t> ahs_;
  std::deque<cm::Gid> ah_order_;
  std::deque<Waiting> waiting_;  // MADs whose neighbour is being resolved
  sched::Picos resolve_poll_at_ = 0;
  std::deque<std::vector<uint8_t>> looped_;  // MADs to ourselves, for the next poll()
  CmAgentStats stats_;
  // Events to the control thread.
  int efd_ = -1;
  mutable std::mutex mu_;
  std::vector<cm::Event> events_;
};

}  // namespace isoroce::ctrl
