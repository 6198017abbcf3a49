// The engine's private state: queues, per-QP requester/responder/completer
// contexts and the transmit descriptors the scheduler's grants turn into
// frames. Shared by engine.cc (objects, verbs), requester.cc, responder.cc,
// completer.cc, ud.cc and datapath.cc; nothing outside transport/engine/
// includes it.
#pragma once

#include <bit>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "transport/engine/engine.h"
#include "transport/dcqcn/reaction_point.h"
#include "transport/engine/ring.h"
#include "transport/verbs/cq.h"
#include "transport/verbs/mtu.h"
#include "transport/verbs/srq.h"
#include "transport/verbs/wr_check.h"
#include "transport/wire/build.h"

namespace isoroce::transport::detail {

// Preamble, start delimiter, FCS and inter-frame gap: what a frame occupies on
// the link beyond its bytes. Scheduler sizes include it.
inline constexpr uint32_t kEthWireOverhead = 24;

// 4.096 us * 2^exp (IBTA 9.7.6.1.3, the local ACK timeout); 0 means infinite.
// Inline: every READ response restarts the timer with it.
inline Picos ack_timeout_picos(uint8_t exp) {
  if (exp == 0) return sched::kNever;
  return 4'096'000ull << (exp < 31 ? exp : 31);  // 4.096 us * 2^exp
}
// The RNR NAK timer encoding (IBTA 9.7.5.2.8, table 45) in picoseconds
// (completer.cc).
Picos rnr_timer_picos(uint8_t code);
// The largest message (ibv_device_attr::max_msg_sz, as rxe: 2^31 bytes). A
// RETH asking for more is an Invalid Request (9.7.5.1.4, rxe check_length()).
using verbs::kMaxMsgSize;
// PSNs a message of len bytes uses: max(1, ceil(len / mtu)) (9.7.4.1).
inline uint32_t packets_for(uint64_t len, uint32_t mtu) {
  if (len == 0) return 1;
  // Path MTUs are powers of two (256..4096): a shift, not a 64-bit division (the
  // requester sizes every packet with this).
  if (std::has_single_bit(mtu)) [[likely]] return static_cast<uint32_t>((len + mtu - 1) >> std::countr_zero(mtu));
  return static_cast<uint32_t>((len + mtu - 1) / mtu);
}

// Unacknowledged PSNs at most in flight from one QP: far inside the 2^23 window of
// 9.7.2 (the requester's window, requester.cc).
inline constexpr int32_t kMaxOutstanding = 1 << 16;

// Packet i (from 0) of a message asks for an ACK every `every` packets (a mask, not
// a division, for the usual power of two).
inline bool ack_due(uint32_t i, uint32_t every) {
  return std::has_single_bit(every) ? ((i + 1) & (every - 1)) == 0 : (i + 1) % every == 0;
}

// The packet of a message that starts at byte `bytes` (a multiple of mtu): bytes /
// mtu, a shift for the power-of-two path MTUs (a READ's progress, per response).
inline uint32_t packet_index(uint64_t bytes, uint32_t mtu) {
  if (std::has_single_bit(mtu)) [[likely]] return static_cast<uint32_t>(bytes >> std::countr_zero(mtu));
  return static_cast<uint32_t>(bytes / mtu);
}

struct Peer {
  wire::IpAddr ip{};
  wire::MacAddr mac{};
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  uint32_t flow_label = 0;
};

// Two addresses compared as two words: std::array's == became a call to memcmp
// per frame (perf: about 1.5% of a 64-byte WRITE's frame, docs/performance.md).
inline bool same_ip(const wire::IpAddr& a, const wire::IpAddr& b) {
  uint64_t x[2], y[2];
  std::memcpy(x, a.data(), sizeof x);
  std::memcpy(y, b.data(), sizeof y);
  return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
}

inline bool same_peer(const Peer& a, const Peer& b) {
  return a.ip == b.ip && a.mac == b.mac && a.traffic_class == b.traffic_class &&
         a.hop_limit == b.hop_limit && a.flow_label == b.flow_label;
}

enum class WqeState : uint8_t { kQueued, kStarted };

struct SendWqe {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint32_t send_flags = 0;
  uint32_t imm_data = 0;  // network order
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  std::vector<Sge> sges;
  // The L_Key check made once, at post: for each SGE where its MR's iova 0 is
  // in this process, valid while MrTable::deregs() equals mr_deregs (no MR
  // deregistered since; UINT64_MAX: not checked, or a check failed). After a
  // dereg every packet checks its SGEs again (memory.h, CheckedSges).
  std::vector<uint64_t> sge_bias;
  uint64_t mr_deregs = UINT64_MAX;
  std::vector<uint8_t> inline_data;  // IBV_SEND_INLINE: copied at post time
  uint64_t length = 0;
  uint32_t msg_id = 0;        // the QP's post count at post time (trace message id)
  bool signaled = false;
  bool is_inline = false;
  verbs::MwBind bind;           // IBV_WR_BIND_MW
  uint32_t invalidate_rkey = 0; // IBV_WR_LOCAL_INV, IBV_WR_SEND_WITH_INV
  // UD addressing.
  Peer ud_peer;
  uint32_t ud_qpn = 0;
  uint32_t ud_qkey = 0;
  // Requester progress (RC).
  WqeState state = WqeState::kQueued;
  wire::Psn first_psn;
  uint32_t npkts = 0;         // PSNs the message uses (READ: response packets)
  uint64_t read_done = 0;     // READ bytes received in order
  bool completed_ok = false;  // READ/atomic data arrived; completes when at the head
  // Not IBV_WC_SUCCESS: the WR completes with this status when it reaches the
  // head (an SGE failed its L_Key check at post time, or the driver could not
  // decode it), and the QP moves to ERR.
  ibv_wc_status local_error = IBV_WC_SUCCESS;

  bool is_read_or_atomic() const {
    return opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
           opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
  }
  wire::Psn last_psn() const { return first_psn + (npkts - 1); }
  // Runs on the requester without a packet (10.6.7, 10.7.2.3).
  bool is_local_op() const { return opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV; }
};

struct RecvWqe {
  uint64_t wr_id = 0;
  std::vector<Sge> sges;
  uint64_t length = 0;
  ibv_wc_status local_error = IBV_WC_SUCCESS;  // a WR the driver could not decode (post_malformed_recv)
};

// A READ or atomic the responder executed, kept for replay of duplicates
// (IBTA 9.7.5.1.5 "responder resources") and as the source of its response.
struct RespResource {
  enum class Kind : uint8_t { kNone, kRead, kAtomic } kind = Kind::kNone;
  wire::Psn first_psn;  // the request's PSN
  uint32_t npkts = 0;   // response PSNs
  uint64_t va = 0;      // READ: where the (re-)executed read starts
  uint32_t length = 0;
  uint32_t rkey = 0;
  uint64_t atomic_orig = 0;
  // Transmission of the response: next packet index, or npkts when sent.
  uint32_t sent = 0;
  bool queued = false;
  // READ of an MR's key: that MR, once the request's check (resp_check_rkey) or
  // build_response checked the whole [va, va + length) against it; valid while
  // MrTable::deregs() equals mr_deregs (an MR's PD,
  // access and range never change while it is registered), so the later packets
  // need no lookup. UINT64_MAX: not checked (every packet checks its own range).
  const verbs::Mr* mr = nullptr;
  uint64_t mr_deregs = UINT64_MAX;
};

enum class TxKind : uint8_t { kNone, kRequest, kResponse, kUdSend };

// One packet a grant turns into a frame (datapath.cc builds it).
struct TxDesc {
  TxKind kind = TxKind::kNone;
  uint32_t qp_slot = 0;
  uint8_t opcode = 0;
  wire::Psn psn;
  uint32_t wqe = 0;       // send queue index (request, UD)
  uint64_t offset = 0;    // byte offset into the message
  uint32_t length = 0;    // payload bytes
  bool ack_req = false;
  bool retransmit = false;
  uint32_t resource = 0;  // responder resource (response)
  uint32_t frame_len = 0;
};

// The requester's state (requester.cc, IBTA 9.7.1-9.7.4; rxe_req.c): the
// next packet to send.
struct RequesterState {
  uint64_t wqe = 0;       // absolute index of the WQE being sent (sq index space)
  uint32_t pkt = 0;       // packet index within it
  wire::Psn psn;          // PSN of the next packet
  uint32_t rd_atomic_inflight = 0;
  wire::Psn max_psn;      // highest PSN ever sent, plus one
  // Passive round trips: the request packet kick() last activated the QP with, if it
  // starts a message and waits behind none of the QP's own packets, and since when.
  bool ready_fresh = false;
  wire::Psn ready_psn;
  Picos ready_at = 0;
};

// The completer's state (completer.cc, 9.7.5.2, 9.7.6; rxe_comp.c).
struct CompleterState {
  wire::Psn psn;          // oldest unacknowledged PSN
  uint8_t retry_left = 7;
  uint8_t rnr_retry_left = 7;
  Picos ack_deadline = sched::kNever;  // retransmission timer
  Picos rnr_until = 0;                 // requester paused by an RNR NAK until then
  bool read_retry_pending = false;     // a go-back for a READ response gap is under way
  // The one request being timed for a passive round trip (Karn: never a
  // retransmitted PSN; a rewind over it drops it).
  bool timed = false;
  wire::Psn timed_psn;
  Picos timed_start = 0;
};

// The responder's state (responder.cc, 9.7.5; rxe_resp.c).
struct ResponderState {
  wire::Psn psn;               // expected PSN
  uint32_t msn = 0;
  bool nak_seq_sent = false;   // one sequence-error NAK per gap (IBTA 9.7.5.1.2)
  // The message in progress: its kind (the opcode sequence check, 9.7.5.1.3).
  enum class InMsg : uint8_t { kNone, kSend, kWrite } in_msg = InMsg::kNone;
  bool have_recv = false;      // a receive WQE is being filled
  RecvWqe cur_recv;
  uint64_t recv_offset = 0;
  // cur_recv's SGEs checked whole (check_sges, local write) by the message's first
  // middle packet (rx_send_continues): when recv_checked_deregs is MrTable::deregs(),
  // recv_checked_ok says whether every SGE lay in a live MR of the QP's PD with
  // local write, and recv_bias holds their translations. take_recv_wqe() into
  // cur_recv resets it (UINT64_MAX: not checked).
  std::vector<uint64_t> recv_bias;
  uint64_t recv_checked_deregs = UINT64_MAX;
  bool recv_checked_ok = false;
  // The RDMA WRITE in progress: where its next byte goes, as the R_Key and the
  // registration it named at FIRST (verbs::Mr::id), never as a pointer into the
  // region: every packet finds the MR again (or uses write_mr below only while no
  // MR was deregistered since), so a region deregistered mid-message is never
  // touched (the rest of the message is NAKed).
  uint32_t write_rkey = 0;
  uint64_t write_mr_id = 0;
  // The MR of an MR's key (not a window's) as FIRST found it, valid while
  // MrTable::deregs() equals write_mr_deregs: no region deregistered since, so the key
  // still names that registration and write_target() needs no lookup. Never used
  // otherwise (UINT64_MAX: every packet looks the key up).
  const verbs::Mr* write_mr = nullptr;
  uint64_t write_mr_deregs = UINT64_MAX;
  // check_rkey()'s last passing check of an MR's R_Key for this QP (a fresh
  // message's RETH: one-packet WRITEs and READs name the same key again and again):
  // the key and the MR it named, of the QP's PD, valid while MrTable::deregs()
  // equals rkey_hit_deregs (no region deregistered since, so the key still names
  // that registration, whose PD, access and range never change). Access and bounds
  // are checked against it every time; a window's key is never kept (UINT64_MAX:
  // nothing kept).
  mutable uint32_t rkey_hit = 0;
  mutable const verbs::Mr* rkey_hit_mr = nullptr;
  mutable uint64_t rkey_hit_deregs = UINT64_MAX;
  uint64_t write_va = 0;
  uint64_t write_left = 0;
  uint64_t write_total = 0;
  // Pending control packet: the ACK (coalesced) or a NAK.
  bool ctrl_queued = false;
  bool ack_pending = false;
  std::optional<uint8_t> nak_syndrome;  // NAK to send (AETH syndrome)
  wire::Psn nak_psn;
  // A fatal NAK is queued (9.9.2-9.9.3): further requests are dropped and the
  // QP goes to ERR once the NAK left.
  bool failed = false;
  std::vector<RespResource> resources;
  uint32_t res_next = 0;        // next resource to allocate (round robin)
  std::queue<uint32_t> queue;   // resources with responses to send, in PSN order
  // Everything before this PSN has been answered by a response already sent, so
  // a plain ACK may cover it (an ACK must never overtake a READ/atomic response).
  wire::Psn acked_psn;          // last PSN an ACK reported
};

// The responder's steps for one request packet (responder.cc on_request), in
// the order of IBTA 9.7.5.1 and rxe_resp.c; every NAK is a step of its own.
enum class RespStep : uint8_t {
  kCheckState,     // 10.3.1: the QP takes requests
  kCheckPsn,       // 9.7.5.1.1-2: in order, a duplicate, or a gap
  kCheckOpSeq,     // 9.7.5.1.3: FIRST/MIDDLE/LAST order, an opcode RC executes
  kCheckLength,    // 9.7.5.1.4: payload and RETH lengths
  kCheckRkey,      // 9.7.5.1.5, 10.6.3: R_Key, access, bounds, alignment
  kCheckResource,  // a receive WQE (9.7.5.2.8) or a responder resource
  kExecute,        // SEND, WRITE, READ, atomic (9.4)
  kAcknowledge,    // 9.7.5.2.1: coalesced ACK
  kDuplicate,      // 9.7.5.1.1
  kNakSequence,    // PSN sequence error, once per gap
  kNakRnr,         // 9.7.5.2.8
  kNakInvalidRequest,    // 9.9.3, then ERR
  kNakRemoteAccess,      // 9.9.3, then ERR
  kNakRemoteOperational, // 9.9.3, then ERR
  kDone,
};

// The completer's steps for one response packet (completer.cc on_response),
// in the order of IBTA 9.7.5.2 and rxe_comp.c.
enum class CompStep : uint8_t {
  kCheckState,    // RTS or SQD
  kCheckPsn,      // 9.7.5.2.1: outstanding, not stale, not from the future
  kAck,           // 9.7.5.2.1-2: cumulative ACK, implied NAK of a lost READ/atomic response
  kRnrNak,        // 9.7.5.2.8
  kNak,           // 9.7.5.2, 9.9.3: sequence error, or the request failed
  kAtomicAck,     // 9.7.5.2.2, 9.4.5
  kReadResponse,  // 9.7.5.2.2, 9.4.4
  kDone,
};

// One request packet going through the steps.
struct RespPacket {
  const wire::RocePacket& pkt;
  std::span<const uint8_t> payload;
  std::span<const uint8_t> frame;
  // The ICRC is not checked yet: a WRITE without immediate checks it while copying
  // its payload into the MR (EngineImpl::receive, resp_execute_write); any other
  // way out of the checks verifies it first (on_request).
  bool icrc_pending = false;
  RecvWqe recv;                  // WRITE with immediate: the receive it consumes
  RespResource* res = nullptr;   // READ/atomic: the responder resource it got
  uint8_t* write_dst = nullptr;  // WRITE middle/last: the next byte, found by resp_check_rkey
  const verbs::Mr* write_mr = nullptr;  // WRITE first/only: the MR its R_Key named (resp_check_rkey; a window's: null)
  const verbs::Mr* read_mr = nullptr;   // READ: the MR its R_Key named for the whole READ (a window's: null)
};

struct CqCtx {
  verbs::Cq cq;
  Ring<ibv_wc> entries;
};

struct SrqCtx {
  verbs::Srq srq;
  PdHandle pd;
  Ring<RecvWqe> queue;
};

struct QpCtx {
  explicit QpCtx(verbs::Qp q) : qp(std::move(q)) {}

  verbs::Qp qp;
  uint32_t slot = 0;
  PdHandle pd = 0;
  CqHandle send_cq = 0;
  CqHandle recv_cq = 0;
  bool use_srq = false;
  SrqHandle srq = 0;
  Peer peer;           // RC: from the AV at RTR
  uint16_t udp_sport = 0xc000;
  uint32_t mtu = 1024;
  // RC: the headers of every frame to the peer (Ethernet, IP, UDP, BTH P_Key and
  // dest QP), built at each modify_qp (on_state_change) from peer, udp_sport and the
  // dest QPN, then copied and patched per frame (wire::build_frame_templated).
  wire::HeaderTemplate tx_tmpl;
  // UD: the template of the last destination sent to (AH peer and dest QPN); a
  // send to another destination rebuilds it.
  wire::HeaderTemplate ud_tmpl;
  Peer ud_tmpl_peer;
  uint32_t ud_tmpl_qpn = 0;

  Ring<SendWqe> sq;    // [head, tail): posted and not yet completed
  Ring<RecvWqe> rq;

  RequesterState req;
  CompleterState comp;
  ResponderState resp;

  Picos timer_at = sched::kNever;  // earliest timer queued for this QP
  // The packet after this QP's last grant, peeked in that grant; valid while
  // tx_next_epoch is the engine's grant_epoch_ (the same scheduler dequeue).
  TxDesc tx_next;
  uint64_t tx_next_epoch = 0;
  bool ud_send_failed = false;     // UD: a send lost its MR; SQE after this transmit
  // A WR in the send queue may be a local operation (BIND_MW, LOCAL_INV) or carry
  // a local error (an SGE failed its check at post, a malformed WR, an MR lost
  // mid-message): set whenever such a WR is posted or a WR gets such an error,
  // cleared by kick() once the send queue is empty. While it is false kick() skips
  // its checks for them (nothing in the queue could match) and goes straight to
  // the scheduler's `active`.
  bool sq_unusual = false;

  QpCounters stats;
  // Rate limit and DCQCN (dcqcn.cc).
  uint64_t user_rate_bps = 0;      // set_qp_rate (0: none)
  uint64_t applied_rate_bps = 0;   // what the scheduler has: min(user, DCQCN)
  dcqcn::ReactionPoint rp;         // configured at the QP's first CNP
  bool cnp_queued = false;         // a CNP waits in the scheduler's control queue
  Picos last_cnp = sched::kNever;  // when this QP last queued a CNP
  Peer cnp_peer;                   // UD: where the queued CNP goes
  uint32_t cnp_qpn = 0;            // UD: its dest QP (the sender's QPN)
  uint64_t ce_received = 0, cnps_sent = 0, cnps_received = 0;
  // Tracing: the class set_qp_class gave (sched::FlowClass), work requests posted,
  // and the reaction point's cuts and increases already traced.
  uint8_t cls = static_cast<uint8_t>(sched::FlowClass::kBandwidth);
  uint32_t posted = 0;
  uint64_t traced_cuts = 0, traced_increases = 0;
};

struct AhCtx {
  PdHandle pd;
  Peer peer;
};

}  // namespace isoroce::transport::detail
