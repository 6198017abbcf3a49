// The IB Communication Manager of one device, sans-I/O (IBTA vol. 1 ch. 12,
// RoCEv2 addressing of annex A17): no clock, no threads, no sockets. Like
// transport/engine, it takes commands, received MADs and "now" (picoseconds)
// and produces MADs to send (pop_mad), events for its consumer (pop_event)
// and its next deadline. docs/cm.md describes the protocol and the states.
//
// Driving it (ctrl/cm_agent.h does this on a device's worker):
//   - every MAD that arrives on QP1: on_mad(source GID, source QPN, bytes, now);
//   - at next_deadline() (sched::kNever style: UINT64_MAX when none): on_timer(now);
//   - after any call: send every pop_mad() as a UD SEND to (dgid, QP 1) with
//     Q_Key 0x80010000, and hand every pop_event() to the consumer.
//
// Identifiers: listen(), connect() and sidr_resolve() create one; a REQ or
// SIDR_REQ that reaches a listener creates one (event kReqReceived /
// kSidrReqReceived). Each carries an opaque owner tag (the daemon's session)
// that its events repeat; destroy_owner() ends them all. destroy() may be
// called in any state: the CM does on the wire what the state needs (REJ
// for a handshake under way, DREQ for an established connection, nothing
// for a listener) and forgets the id after timewait without further events.
//
// Every MAD from the wire is untrusted: malformed, unknown, duplicate or
// stale MADs are counted (stats()) and dropped or answered per the spec;
// nothing a peer sends can make a call fail or touch another connection.
// No exceptions: commands return 0 or a positive errno.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "transport/cm/event.h"
#include "transport/cm/params.h"

namespace isoroce::cm {

using Picos = uint64_t;  // as sched::Picos
inline constexpr Picos kNoDeadline = UINT64_MAX;

struct ManagerConfig {
  Gid local_gid{};                 // the device's GID (source of every MAD)
  uint64_t ca_guid = 0;            // Local CA GUID of REQ and REP (the device's node GUID)
  uint16_t pkey = kDefaultPkey;
  uint64_t seed = 1;               // communication IDs and transaction IDs
  // How long a closed connection stays in timewait (its IDs are not reused
  // and duplicates of its last messages are answered meanwhile).
  Picos timewait = 1'000'000'000'000ull / 10;  // 100 ms
  // An answer to a duplicate REQ while the consumer has not yet answered: MRA
  // with this service timeout (4.096 us * 2^t) so the active side waits.
  uint8_t mra_service_timeout = 23;
  uint32_t max_ids = 65536;        // live identifiers (REQs beyond: REJ kNoResources)
  uint32_t max_pending_reqs = 1024;  // REQs received not yet answered, all listeners
};

struct ManagerStats {
  uint64_t mads_received = 0, mads_sent = 0, retransmits = 0;
  uint64_t malformed = 0;          // too short, bad base/class version, bad fields
  uint64_t wrong_class = 0;        // not the CM class (dropped)
  uint64_t unknown_attribute = 0;  // LAP/APR and anything else (dropped)
  uint64_t unmatched = 0;          // REP/RTU/REJ/MRA/DREP for no known connection
  uint64_t duplicates = 0;         // duplicate REQ/REP/DREQ/SIDR_REQ (answered again)
  uint64_t stale = 0;              // REQs rejected as stale connections
  uint64_t no_listener = 0;        // REQs/SIDR_REQs for a service nobody listens on
  uint64_t overload = 0;           // REQs refused for max_ids / max_pending_reqs
  uint64_t timeouts = 0;           // handshakes or DREQs given up
  uint64_t established = 0, rejected_sent = 0, rejected_received = 0;
};

// Where an id is (IBTA 12.9.7 state names).
enum class State : uint8_t {
  kIdle,
  kListen,
  kReqSent,
  kReqRcvd,
  kMraReqSent,   // we sent MRA for the peer's REQ
  kMraReqRcvd,   // the peer sent MRA for our REQ
  kRepSent,
  kRepRcvd,
  kMraRepSent,
  kMraRepRcvd,
  kEstablished,
  kDreqSent,
  kDreqRcvd,
  kTimewait,
  kSidrReqSent,
  kSidrReqRcvd,
};
const char* state_name(State s);

class Manager {
 public:
  explicit Manager(const ManagerConfig& config);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  const ManagerConfig& config() const;

  // Commands. Each returns 0 or a positive errno: EINVAL (bad parameters,
  // private data too long), ENOENT (no such id), EBUSY (service ID already
  // listened on), EPROTO (not allowed in the id's state), ENOMEM (max_ids).
  // Listen for REQs and SIDR_REQs to service_id (exact match).
  int listen(uint64_t owner, uint64_t service_id, Id* id);
  // Send a REQ; *id is in kReqSent. Events: kRepReceived, kRejected, kUnreachable, kMraReceived.
  int connect(uint64_t owner, const ConnectParams& p, Picos now, Id* id);
  // Passive side, after kReqReceived: send the REP (kRepSent). Events:
  // kEstablished (RTU), kRejected, kUnreachable.
  int accept(Id id, const AcceptParams& p, Picos now);
  // After kReqReceived (REJ for the REQ) or kRepReceived (REJ for the REP).
  int reject(Id id, const RejectParams& p, Picos now);
  // Passive side, after kReqReceived: ask the active side for more time (MRA).
  int send_mra(Id id, uint8_t service_timeout, std::span<const uint8_t> private_data, Picos now);
  // Active side, after kRepReceived and the QP in RTS: send the RTU; the id is
  // established (no event).
  int establish(Id id, std::span<const uint8_t> private_data, Picos now);
  // Passive side: the connection is established before the RTU (the QP saw
  // the first packet from the peer: IB_EVENT_COMM_EST); kEstablished follows.
  int notify_established(Id id, Picos now);
  // rdma_disconnect: established → DREQ (kDreqSent, then kDisconnected when the
  // DREP arrives or the retries run out); after kDreqReceived → DREP (kTimewait,
  // kDisconnected at once). EPROTO in other states.
  int disconnect(Id id, std::span<const uint8_t> private_data, Picos now);
  // UD service resolution: send a SIDR_REQ (kSidrReqSent). Events:
  // kSidrRepReceived, kUnreachable.
  int sidr_resolve(uint64_t owner, const SidrParams& p, Picos now, Id* id);
  // After kSidrReqReceived: the SIDR_REP; the id is gone afterwards (its
  // answer is repeated to a duplicate SIDR_REQ during timewait).
  int sidr_reply(Id id, const SidrReplyParams& p, Picos now);
  // Forget id (see above). No events for it afterwards.
  int destroy(Id id, Picos now);
  // destroy() every id of owner; how many.
  size_t destroy_owner(uint64_t owner, Picos now);

  // Inputs.
  // A MAD received on QP1 (the UD payload after GRH, 256 bytes) from
  // (src_gid, src_qpn). Never fails: bad input is counted.
  void on_mad(const Gid& src_gid, uint32_t src_qpn, std::span<const uint8_t> mad, Picos now);
  // Retransmissions and timeouts due at now.
  void on_timer(Picos now);
  Picos next_deadline() const;

  // Outputs (FIFO). false when empty.
  bool pop_mad(OutMad* out);
  bool pop_event(Event* out);
  bool has_events() const;

  // Observation.
  const ManagerStats& stats() const;
  // The state of id (false: no such id, or destroyed).
  bool state(Id id, State* s) const;
  // The peer of id as far as known (false: no such id).
  bool peer(Id id, PeerParams* p) const;
  size_t live_ids() const;  // including destroyed ones still in timewait

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace isoroce::cm
