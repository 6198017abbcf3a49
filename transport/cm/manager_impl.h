// Manager's insides, shared by manager.cc (commands, timers, outputs) and
// manager_receive.cc (one handler per received attribute).
#pragma once

#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "transport/cm/manager.h"
#include "transport/cm/messages.h"

namespace isoroce::cm {

// One identifier: a listener, a connection (either side) or a SIDR exchange.
struct Conn {
  Id id = 0;             // also the Local Communication ID / SIDR request ID
  uint64_t owner = 0;
  Id listen_id = 0;
  State state = State::kIdle;
  bool passive = false;
  bool destroyed = false;  // the consumer is gone: no events, erased after timewait
  uint64_t service_id = 0;
  uint64_t tid = 0;        // transaction of the exchange under way
  PeerParams peer;         // peer.comm_id: the Remote Communication ID (0: not yet)
  bool remote_key = false;       // registered in by_remote as remote_tuple
  std::tuple<Gid, uint32_t, bool> remote_tuple;
  bool remote_qpn_key = false;   // registered in by_remote_qpn_
  uint32_t local_qpn = 0;
  // Retransmission: the last message sent, how often it may go again, and
  // how long each try waits. deadline: kNoDeadline when nothing is timed.
  std::vector<uint8_t> last;
  Gid last_dgid{};
  int retries_left = 0;
  Picos period = 0;
  Picos deadline = kNoDeadline;
  // What a timed-out connection tells the peer: response timeouts of both
  // ends (5-bit exponents) and max CM retries, agreed in the REQ.
  uint8_t remote_timeout = 20;  // how long the peer may take to answer us
  uint8_t max_retries = 15;
};

struct Manager::Impl {
  explicit Impl(const ManagerConfig& c);

  ManagerConfig cfg;
  ManagerStats stats;
  std::map<Id, Conn> conns;
  std::map<uint64_t, Id> listeners;  // service ID -> listener
  // Passive ids by (peer GID, its comm ID or SIDR request ID, is SIDR).
  std::map<std::tuple<Gid, uint32_t, bool>, Id> by_remote;
  // Live connections by (peer GID, peer QPN): a REQ for a pair in use is stale.
  std::map<std::pair<Gid, uint32_t>, Id> by_remote_qpn;
  std::set<std::pair<Picos, Id>> timers;
  std::deque<OutMad> mads;
  std::deque<Event> events;
  uint64_t rng;
  uint32_t tid_hi;
  uint32_t tid_lo = 0;
  size_t pending_reqs = 0;  // passive ids in kReqRcvd / kMraReqSent

  uint64_t next_random();
  uint64_t new_tid() { return static_cast<uint64_t>(tid_hi) << 32 | ++tid_lo; }
  Conn* find(Id id);
  Conn* alloc(uint64_t owner, State s, int* err);
  void erase(Conn& c);
  void set_state(Conn& c, State s);
  void set_timer(Conn& c, Picos deadline);
  void register_remote(Conn& c, bool sidr);
  void register_remote_qpn(Conn& c);
  void unregister_remote_qpn(Conn& c);

  // Queues a message to dgid; with retries, remembers it for retransmission
  // (period between tries, retries after the first).
  void send(const Gid& dgid, const void* msg);
  void send_tracked(Conn& c, const void* msg, Picos now, Picos period, int retries);
  void resend_last(Conn& c);
  Event event(const Conn& c, EventType t) const;
  void emit(Conn& c, Event e);

  // Messages.
  void send_rej(Conn& c, RejReason reason, MsgKind kind, std::span<const uint8_t> ari,
                std::span<const uint8_t> pdata);
  // Active side: gives up its REQ (timed out, or the consumer destroyed the id).
  void withdraw_req(Conn& c);
  void issue_rej(const Gid& dgid, uint64_t tid, uint32_t remote_comm_id, RejReason reason, MsgKind kind);
  void send_dreq(Conn& c, std::span<const uint8_t> pdata, Picos now);
  void send_drep(Conn& c, std::span<const uint8_t> pdata);
  void enter_timewait(Conn& c, Picos now);
  // Ends an id that has nothing more to do on the wire (idle, or erased if destroyed).
  void to_idle(Conn& c);

  // Received messages (manager_receive.cc).
  void on_req(const Gid& src, const ReqMsg& m, Picos now);
  void on_mra(const Gid& src, const MraMsg& m, Picos now);
  void on_rej(const Gid& src, const RejMsg& m, Picos now);
  void on_rep(const Gid& src, const RepMsg& m, Picos now);
  void on_rtu(const Gid& src, const RtuMsg& m, Picos now);
  void on_dreq(const Gid& src, const DreqMsg& m, Picos now);
  void on_drep(const Gid& src, const DrepMsg& m, Picos now);
  void on_sidr_req(const Gid& src, const SidrReqMsg& m, Picos now);
  void on_sidr_rep(const Gid& src, const SidrRepMsg& m, Picos now);
  // The connection a reply names (its Remote Communication ID is ours) if it
  // comes from that connection's peer; nullptr and counted otherwise.
  Conn* match(const Gid& src, uint32_t our_id, uint32_t their_id);

  void on_timeout(Conn& c, Picos now);
};

}  // namespace isoroce::cm
