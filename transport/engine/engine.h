// The RoCEv2 transport engine of one port: PD, MR, CQ, SRQ, AH and QP objects,
// the RC requester, responder and completer, and UD, sans-I/O (DESIGN.md).
//
// The engine never reads a clock, sleeps or does I/O. Its driver (the DPDK poll
// loop in the daemon, or the simulator) hands it:
//   - received frames:           receive(now, frame)
//   - the time:                  advance(now) runs retransmission and RNR timers
//   - transmit opportunities:    transmit(now, sink) builds the frames the port's
//                                scheduler (sched/) grants, into the sink's buffers
// and asks next_deadline() when to call again. Applications post work requests
// and poll completions with the verbs below; their semantics and errnos are those
// of the libibverbs call of the same name.
//
// Memory: an MR's `addr` is where the registered bytes are in this process (the
// daemon maps the application's pages; the simulator allocates them); its iova is
// the address SGEs and RETHs name. The engine reads and writes registered memory
// in place.
//
// Time is picoseconds (sched::Picos), non-decreasing across calls.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "sched/trace.h"
#include "transport/dcqcn/params.h"
#include "transport/verbs/device.h"
#include "transport/verbs/mr_table.h"
#include "transport/verbs/mw_table.h"
#include "transport/verbs/pd_table.h"
#include "transport/verbs/qp.h"
#include "transport/verbs/result.h"
#include "transport/wire/packet.h"

namespace isoroce::transport {

using sched::Picos;
using verbs::PdHandle;
using verbs::Result;
using CqHandle = uint32_t;
using SrqHandle = uint32_t;
using AhHandle = uint32_t;

struct EngineConfig {
  verbs::Device device;
  wire::MacAddr mac{};
  wire::IpAddr ip{};             // the port's address; GID 0 is ip (IPv4-mapped for IPv4)
  uint64_t key_seed = 1;         // MR keys (verbs::MrKeyGen)
  uint32_t qpn_seed = 1;         // first QPN is derived from it; QPNs are never 0 or 1
  uint32_t first_qpn = 0;        // if not 0, the first QPN (a daemon keeps its devices' QPNs apart)
  // The step between the QPNs this engine gives out (1: consecutive). A port
  // split into N lanes (docs/design.md, "Lanes") gives lane k first_qpn + k
  // and stride N, so a QPN names its lane without a table.
  uint32_t qpn_stride = 1;
  std::string policy = "fifo";   // a registered policy (sched/policy_registry.h)
  uint64_t link_bps = 100'000'000'000;
  Picos sched_lookahead = 0;     // see sched::Config::lookahead
  Picos sched_catch_up = 0;      // see sched::Config::catch_up
  uint32_t max_qps = 4096;       // QPs alive at once (scheduler ids)
  // The port's MTU (the largest path_mtu a QP may use and every UD QP's MTU).
  // 1024 fits a 1500-byte Ethernet MTU, as rxe chooses; 4096 needs jumbo frames.
  ibv_mtu active_mtu = IBV_MTU_1024;
  uint8_t dscp = 26;             // RoCEv2 data DSCP (DCQCN deployments use 26 or 24)
  bool ecn_capable = true;       // send data with ECT(0) so switches can mark CE
  // Requester: ask for an ACK at least every this many packets of a message.
  uint32_t ack_req_every = 16;
  // DCQCN congestion control (docs/dcqcn.md). Enabled needs a policy that
  // enforces rate limits (sched::kCapEnforcesRates): create() refuses it with fifo (EINVAL).
  dcqcn::Params dcqcn;
  // The emulated NIC's message rate (sched::Config::max_msgs_per_sec; 0: no limit).
  uint64_t max_msgs_per_sec = 0;
  sched::JustitiaParams justitia;  // policy "justitia" only
  sched::RnicParams rnic;          // policy "rnic" only
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// ibv_send_wr without the linked list. imm_data is in network byte order, as
// in libibverbs. For UD, ah/remote_qpn/remote_qkey address the datagram.
struct SendWr {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint32_t send_flags = 0;  // ibv_send_flags
  std::span<const Sge> sg_list;
  uint32_t imm_data = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  AhHandle ah = 0;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  verbs::MwBind bind{};          // IBV_WR_BIND_MW
  uint32_t invalidate_rkey = 0;  // IBV_WR_LOCAL_INV, IBV_WR_SEND_WITH_INV
  // When the application published it in a shared-memory send ring, on the engine's
  // clock (0: unknown): the trace's post record carries now - app_post, the time the
  // WR waited in the application's ring (trace::Event::kPost's b).
  Picos app_post = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;
};

// Where an RC QP's peer or a UD datagram goes (the RoCEv2 part of ibv_ah_attr).
struct AhAttr {
  wire::IpAddr dgid{};  // IPv4-mapped for IPv4
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  uint32_t flow_label = 0;
  uint8_t sl = 0;
};

struct QpCreate {
  PdHandle pd = 0;
  CqHandle send_cq = 0;
  CqHandle recv_cq = 0;
  bool use_srq = false;
  SrqHandle srq = 0;
  verbs::QpInitAttr init;  // init.has_srq is set from use_srq
  // 0: the next free QPN; else exactly this one (2 .. 2^24-1; EEXIST if taken).
  // For the daemon's own well-known QPs (ctrl/reference_echo.h).
  uint32_t qpn = 0;
};

enum class AsyncEventType : uint8_t {
  kQpFatal,
  kCqError,
  kSrqLimitReached,
  // justitia soft admission: a latency-class QP was created (set_qp_class) while
  // Current99 is above Target99 (id: the QPN).
  kLatencyTargetMissed,
};
struct AsyncEvent {
  AsyncEventType type;
  uint32_t id;  // QPN, CQ or SRQ handle
};

// The frames transmit() builds go straight into the driver's buffers.
class TxSink {
 public:
  // A buffer of at least len bytes for the next frame, or an empty span when the
  // driver has none (the grant is then lost like a frame dropped at the NIC and
  // recovered by the transport). A buffer that is not committed is given out
  // again by the next call.
  virtual std::span<uint8_t> tx_buffer(size_t len) = 0;
  // The frame in the last buffer is len bytes and starts on the link at departure.
  virtual void tx_commit(Picos departure, size_t len) = 0;

 protected:
  ~TxSink() = default;
};

// What the engine did, for tools and tests.
struct EngineCounters {
  uint64_t rx_frames = 0;
  uint64_t rx_dropped = 0;      // any reason below
  uint64_t rx_parse_errors = 0; // malformed, bad ICRC
  uint64_t rx_unknown_qp = 0;
  uint64_t rx_bad_state = 0;    // QP not in a state that accepts the packet
  uint64_t rx_duplicates = 0;
  uint64_t rx_no_resource = 0;  // READ/atomic dropped: every responder resource busy
  uint64_t rx_out_of_sequence = 0;
  uint64_t rx_ud_qkey_mismatch = 0;
  uint64_t rx_ud_no_receive = 0;
  // Input refused, by reason (the wire is untrusted: docs/engine.md "Input
  // that is dropped"). Each frame is counted under one reason at most.
  uint64_t rx_bad_icrc = 0;             // also in rx_parse_errors
  uint64_t rx_not_for_port = 0;         // another IP address or P_Key (dropped)
  uint64_t rx_wrong_source = 0;         // RC packet or CNP not from the QP's peer (dropped)
  uint64_t rx_wrong_transport = 0;      // UC, or RC/UD for a QP of the other type (dropped)
  uint64_t rx_psn_out_of_window = 0;    // an ACK/response for a PSN never sent (dropped)
  uint64_t rx_bad_opcode_sequence = 0;  // request out of its message's sequence (Invalid Request NAK)
  uint64_t rx_bad_length = 0;           // payload or RETH length (request: Invalid Request NAK;
                                        // READ response: dropped)
  uint64_t rx_bad_rkey = 0;             // R_Key, access or bounds (Remote Access Error NAK)
  uint64_t rx_invalid_request = 0;      // other Invalid Request NAKs (misaligned atomic, opcode)
  uint64_t tx_frames = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_no_buffer = 0;
  uint64_t tx_loopback = 0;     // frames to the port's own address, received instead of sent (in tx_frames)
  uint64_t retransmits = 0;     // requester packets sent again
  uint64_t timeouts = 0;        // retransmission timer expiries
  uint64_t naks_sent = 0;
  uint64_t naks_received = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t acks_sent = 0;
  // READ/atomic responses dropped from the send queue because a duplicate READ
  // asked for an earlier PSN (the requester discards them and asks again).
  uint64_t responses_cancelled = 0;
  uint64_t cq_overruns = 0;
  // DCQCN (zero unless EngineConfig::dcqcn.enabled).
  uint64_t ce_received = 0;      // data packets (requests, READ responses) marked CE
  uint64_t cnps_sent = 0;
  uint64_t cnps_suppressed = 0;  // CE packets answered by no CNP (min_time_between_cnps_us)
  uint64_t cnps_received = 0;
};

// trace::Event::kDrop's `a` for frames the engine refuses on receive: the
// EngineCounters field that counted it.
enum class DropReason : uint8_t {
  kParseError = 1,      // rx_parse_errors (not kBadIcrc)
  kBadIcrc = 2,         // rx_bad_icrc
  kNotForPort = 3,      // rx_not_for_port
  kUnknownQp = 4,       // rx_unknown_qp
  kWrongSource = 5,     // rx_wrong_source
  kWrongTransport = 6,  // rx_wrong_transport
};

// One QP's DCQCN state and counters (Engine::qp_dcqcn).
struct QpDcqcnState {
  bool limiting = false;      // the reaction point limits the QP's rate now
  uint64_t rate_bps = 0;      // DCQCN's rate (the line rate when not limiting)
  uint64_t target_bps = 0;
  double alpha = 0;
  uint64_t ce_received = 0;
  uint64_t cnps_sent = 0;
  uint64_t cnps_received = 0;
  uint64_t decreases = 0;
  uint64_t increases = 0;
};

// What one QP did (telemetry, isoroce-ctl qp).
struct QpCounters {
  uint64_t tx_packets = 0;   // every frame the QP sent: requests, responses, ACKs/NAKs
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;   // frames the QP accepted (from its peer; UD: with its Q_Key)
  uint64_t rx_bytes = 0;
  uint64_t retransmits = 0;
  uint64_t naks_sent = 0;
  uint64_t naks_received = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t errors = 0;       // error completions, flushes aside
  // Passive round trips (completer.cc, docs/sched.md "Latency signal"), each also
  // given to the scheduler (Scheduler::on_latency_sample).
  uint64_t rtt_samples = 0;
  Picos last_rtt = 0;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  virtual ~Engine() = default;

  // Neighbour table: the MAC address frames to an IP go to (ARP/ND is the
  // driver's job). ibv_modify_qp(RTR) and ibv_create_ah() need the entry,
  // except for the port's own address (config().ip): frames to it loop back
  // inside the engine after the scheduler grants them (docs/engine.md,
  // "Same-device loopback"), so a QP reaches any QP of its own port.
  virtual void set_neighbor(const wire::IpAddr& ip, const wire::MacAddr& mac) = 0;

  // ---- lanes (docs/design.md, "Lanes"): the engines of one port's lanes
  // hold the same PDs, MRs, CQs, SRQs and AHs under the same handles and
  // keys. The next alloc_pd() takes handle pd; the next create_cq(),
  // create_srq() or create_ah() takes handle h; the next reg_mr() takes these
  // keys (each once; EEXIST from that call if the handle or a key is taken).
  // The lane engines other than the first make none of their own.
  virtual void set_next_pd(PdHandle pd) = 0;
  virtual void set_next_handle(uint32_t h) = 0;
  virtual void set_next_mr_keys(verbs::MrKeys keys) = 0;
  // This engine uses owner's memory windows from now on: both are lanes of
  // one port, so a window bound, invalidated or deallocated through either is
  // so in both (type 1 windows are usable through every QP of their PD).
  // Call it before either engine runs and before any window exists here;
  // both then take a lock (transport/engine/windows.h) for each window
  // operation and each remote access whose R_Key is a window's.
  virtual void share_windows(Engine& owner) = 0;
  // Frames this engine sends to its own address (same-device loopback) go to
  // `out` first: it returns true if it took the frame (its QPN lives in
  // another lane's engine), false to receive it here. Null: all received here.
  using LoopOut = bool (*)(void* ctx, std::span<const uint8_t> frame);
  virtual void set_loop_out(LoopOut out, void* ctx) = 0;

  // ---- verbs -----------------------------------------------------------
  virtual Result<PdHandle> alloc_pd() = 0;
  virtual int dealloc_pd(PdHandle pd) = 0;
  virtual Result<verbs::MrKeys> reg_mr(PdHandle pd, void* addr, uint64_t length, uint64_t iova,
                                       uint32_t access) = 0;
  // EINVAL while a memory window is bound to the MR (as rxe).
  virtual int dereg_mr(uint32_t lkey) = 0;
  // MRs registered now (status views).
  virtual size_t mr_count() const = 0;
  // Memory windows allocated now, bound or not (status views; with lanes,
  // the port's: its lanes share one table, share_windows()).
  virtual size_t mw_count() const = 0;
  // Memory windows (IBTA 10.6.7, docs/engine.md): ibv_alloc_mw() gives the
  // window's R_Key (type 1 or 2); ibv_dealloc_mw(). A window is bound by an
  // IBV_WR_BIND_MW work request (SendWr::bind) and a type 2 one invalidated by
  // IBV_WR_LOCAL_INV or a peer's IBV_WR_SEND_WITH_INV (SendWr::invalidate_rkey).
  virtual Result<uint32_t> alloc_mw(PdHandle pd, int type) = 0;
  virtual int dealloc_mw(uint32_t rkey) = 0;
  virtual Result<CqHandle> create_cq(int cqe) = 0;
  virtual int destroy_cq(CqHandle cq) = 0;
  // Returns the number of completions written to out (ibv_poll_cq), or -EINVAL.
  virtual int poll_cq(CqHandle cq, std::span<ibv_wc> out) = 0;
  // Completions queued on any of this engine's CQs since it was made. A driver
  // that polls its CQs every pass skips poll_cq (a hash lookup per CQ) while
  // this has not moved and its last polls drained what they found.
  virtual uint64_t completions_queued() const = 0;
  // Completions on this CQ that poll_cq has not taken yet (0 if no such CQ).
  virtual uint32_t cq_queued(CqHandle cq) const = 0;
  // ibv_resize_cq(): the CQ holds up to cqe completions from now on; queued ones
  // stay, in order. `outside` counts completions already polled out of the
  // engine that the application has not consumed yet (a driver's own queue,
  // e.g. isoroced's shared-memory CQ ring): they count against cqe too, so a
  // cqe below the CQ's outstanding completions is EINVAL, as rxe_cq_chk_attr().
  virtual int resize_cq(CqHandle cq, int cqe, uint32_t outside) = 0;
  virtual Result<SrqHandle> create_srq(PdHandle pd, const ibv_srq_attr& attr) = 0;
  virtual int modify_srq(SrqHandle srq, const ibv_srq_attr& attr, uint32_t mask) = 0;
  virtual int destroy_srq(SrqHandle srq) = 0;
  virtual int post_srq_recv(SrqHandle srq, const RecvWr& wr) = 0;
  virtual Result<AhHandle> create_ah(PdHandle pd, const AhAttr& attr) = 0;
  virtual int destroy_ah(AhHandle ah) = 0;
  virtual Result<wire::Qpn> create_qp(const QpCreate& create) = 0;
  // attr.ah_attr.grh.dgid names the peer of an RC QP (IBV_QP_AV).
  virtual int modify_qp(wire::Qpn qpn, const ibv_qp_attr& attr, uint32_t mask) = 0;
  virtual const verbs::Qp* query_qp(wire::Qpn qpn) const = 0;
  // The QPs that exist, and one QP's counters and rate limit (nullptr / 0 if
  // there is no such QP).
  virtual std::vector<wire::Qpn> qp_numbers() const = 0;
  virtual const QpCounters* qp_counters(wire::Qpn qpn) const = 0;
  virtual uint64_t qp_rate(wire::Qpn qpn) const = 0;
  virtual int destroy_qp(wire::Qpn qpn) = 0;
  // 0 or EINVAL/ENOMEM (queue full)/EOPNOTSUPP, as ibv_post_send.
  virtual int post_send(Picos now, wire::Qpn qpn, const SendWr& wr) = 0;
  virtual int post_recv(wire::Qpn qpn, const RecvWr& wr) = 0;
  // A work request the driver could not decode (an application's shared ring
  // held garbage): it takes its place in the queue and completes with
  // IBV_WC_LOC_QP_OP_ERR (always, signaled or not), and the QP moves to ERR
  // (UD send: SQE) with IBV_EVENT_QP_FATAL, as an RNIC does for a malformed
  // WQE. A send completes when it reaches the head of the send queue; a
  // receive at once, after the receives posted before it are flushed.
  // 0, EINVAL (no such QP, RESET/INIT/RTR for a send, RESET for a receive,
  // an SRQ QP for a receive) or ENOMEM (queue full).
  virtual int post_malformed_send(Picos now, wire::Qpn qpn, uint64_t wr_id) = 0;
  virtual int post_malformed_recv(Picos now, wire::Qpn qpn, uint64_t wr_id) = 0;
  // Transmit rate limit of one QP in bits per second (0: none), sched::Scheduler.
  virtual int set_qp_rate(Picos now, wire::Qpn qpn, uint64_t bps) = 0;
  // Asynchronous events since the last call (ibv_get_async_event).
  virtual std::vector<AsyncEvent> take_async_events() = 0;

  // ---- isolation (policy "justitia"; fifo and tassel ignore it) ----
  // The QP's flow class and application (QPs of one application and class are one
  // logical flow) and the application's weight (>= 1). A latency-class QP set while
  // Current99 > Target99 raises kLatencyTargetMissed. 0 or EINVAL (unknown QP).
  virtual int set_qp_class(Picos now, wire::Qpn qpn, sched::FlowClass cls, uint32_t app, uint32_t weight) = 0;
  // The QP's tenant (sched::kNoTenant: none) and the tenant's weight (>= 1): tenants
  // share above applications (sched::Scheduler::set_tenant). 0 or EINVAL.
  virtual int set_qp_tenant(Picos now, wire::Qpn qpn, uint32_t tenant, uint32_t weight) = 0;
  // One latency of the policy's reference flow, measured by the driver.
  virtual void add_reference_latency(Picos now, Picos latency) = 0;
  // The port's scheduler (telemetry: sched::Scheduler::justitia_stats()).
  virtual const sched::Scheduler& scheduler() const = 0;
  // The port's link rate from now on (sched::Scheduler::set_link_bps; 0 is
  // ignored): a port's lanes share its link so (dataplane/dpdk/lane_share.h).
  // EngineConfig::link_bps stays the port's rate (DCQCN's line rate).
  virtual void set_link_bps(Picos now, uint64_t bps) = 0;

  // ---- data path ---------------------------------------------------------
  // One received Ethernet frame (mutable: the ICRC check masks fields in place;
  // unchanged on return). Anything malformed or unexpected is counted and dropped.
  virtual void receive(Picos now, std::span<uint8_t> frame) = 0;
  // Runs the timers due by now.
  virtual void advance(Picos now) = 0;
  // Builds up to max_frames frames the scheduler grants by now; returns how many.
  virtual size_t transmit(Picos now, TxSink& sink, size_t max_frames) = 0;
  // When transmit() or advance() has something to do next (kNever: nothing).
  virtual Picos next_deadline() const = 0;

  virtual const EngineCounters& counters() const = 0;
  virtual const EngineConfig& config() const = 0;
  // DCQCN state of one QP (all zero for an unknown QPN).
  virtual QpDcqcnState qp_dcqcn(wire::Qpn qpn) const = 0;

  // ---- tracing (sched/trace.h, docs/profiling.md) ----
  // Records the events of `mask` into `sink`, stamped with `port`: the engine's own
  // (post, frame_tx, frame_rx, ack, nak, cnp, retransmit, completion, dcqcn_cut,
  // dcqcn_increase, drop) and its scheduler's, which the engine rewrites to name the
  // QPN (scheduler QpIds never leave it) and the QP's flow class. A null sink or an
  // empty mask turns tracing off. `sink` must outlive the engine or the next call.
  // Attaching records a kRate for every QP that has a rate limit already.
  virtual void attach_trace(trace::Sink* sink, trace::EventMask mask, uint16_t port) = 0;
  // The events being recorded (0: tracing off).
  virtual trace::EventMask trace_mask() const = 0;
};

}  // namespace isoroce::transport
