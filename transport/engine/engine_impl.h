// EngineImpl: the one implementation of Engine. Its member functions are
// defined by topic:
//   engine.cc     objects and verbs (create/modify/destroy, poll, flush)
//   post.cc       posting work requests and their checks
//   requester.cc  which request packet a QP sends next, and building it
//   responder.cc  incoming requests, ACK/NAK and READ/atomic responses
//   completer.cc  incoming ACK/NAK/responses, retransmission and RNR timers
//   ud.cc         UD send and receive
//   datapath.cc   receive dispatch, transmit (scheduler grants), timers
#pragma once

#include <array>
#include <map>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include "transport/engine/internal.h"
#include "transport/engine/memory.h"
#include "transport/engine/windows.h"

namespace isoroce::transport::detail {

class EngineImpl final : public Engine, private sched::PacketSource {
 public:
  explicit EngineImpl(const EngineConfig& config, std::unique_ptr<sched::Scheduler> sched);

  void set_neighbor(const wire::IpAddr& ip, const wire::MacAddr& mac) override;
  void set_next_pd(PdHandle pd) override { pds_.set_next(pd); }
  void set_next_handle(uint32_t h) override { forced_handle_ = h; }
  void set_next_mr_keys(verbs::MrKeys keys) override { mrs_.set_next_keys(keys); }
  void share_windows(Engine& owner) override;
  void set_loop_out(LoopOut out, void* ctx) override {
    loop_out_ = out;
    loop_ctx_ = ctx;
  }
  Result<PdHandle> alloc_pd() override;
  int dealloc_pd(PdHandle pd) override;
  Result<verbs::MrKeys> reg_mr(PdHandle pd, void* addr, uint64_t length, uint64_t iova,
                               uint32_t access) override;
  int dereg_mr(uint32_t lkey) override;
  size_t mr_count() const override { return mrs_.size(); }
  size_t mw_count() const override;
  Result<uint32_t> alloc_mw(PdHandle pd, int type) override;
  int dealloc_mw(uint32_t rkey) override;
  Result<CqHandle> create_cq(int cqe) override;
  int destroy_cq(CqHandle cq) override;
  int poll_cq(CqHandle cq, std::span<ibv_wc> out) override;
  uint64_t completions_queued() const override { return completions_queued_; }
  uint32_t cq_queued(CqHandle cq) const override;
  int resize_cq(CqHandle cq, int cqe, uint32_t outside) override;
  Result<SrqHandle> create_srq(PdHandle pd, const ibv_srq_attr& attr) override;
  int modify_srq(SrqHandle srq, const ibv_srq_attr& attr, uint32_t mask) override;
  int destroy_srq(SrqHandle srq) override;
  int post_srq_recv(SrqHandle srq, const RecvWr& wr) override;
  Result<AhHandle> create_ah(PdHandle pd, const AhAttr& attr) override;
  int destroy_ah(AhHandle ah) override;
  Result<wire::Qpn> create_qp(const QpCreate& create) override;
  int modify_qp(wire::Qpn qpn, const ibv_qp_attr& attr, uint32_t mask) override;
  const verbs::Qp* query_qp(wire::Qpn qpn) const override;
  std::vector<wire::Qpn> qp_numbers() const override;
  const QpCounters* qp_counters(wire::Qpn qpn) const override;
  uint64_t qp_rate(wire::Qpn qpn) const override;
  int destroy_qp(wire::Qpn qpn) override;
  int post_send(Picos now, wire::Qpn qpn, const SendWr& wr) override;
  int post_recv(wire::Qpn qpn, const RecvWr& wr) override;
  int post_malformed_send(Picos now, wire::Qpn qpn, uint64_t wr_id) override;
  int post_malformed_recv(Picos now, wire::Qpn qpn, uint64_t wr_id) override;
  int set_qp_rate(Picos now, wire::Qpn qpn, uint64_t bps) override;
  std::vector<AsyncEvent> take_async_events() override;
  int set_qp_class(Picos now, wire::Qpn qpn, sched::FlowClass cls, uint32_t app, uint32_t weight) override;
  int set_qp_tenant(Picos now, wire::Qpn qpn, uint32_t tenant, uint32_t weight) override;
  void add_reference_latency(Picos now, Picos latency) override;
  const sched::Scheduler& scheduler() const override { return *sched_; }
  void set_link_bps(Picos now, uint64_t bps) override { sched_->set_link_bps(now, bps); }

  void receive(Picos now, std::span<uint8_t> frame) override;
  void advance(Picos now) override;
  size_t transmit(Picos now, TxSink& sink, size_t max_frames) override;
  Picos next_deadline() const override;

  const EngineCounters& counters() const override { return counters_; }
  const EngineConfig& config() const override { return config_; }
  QpDcqcnState qp_dcqcn(wire::Qpn qpn) const override;
  void attach_trace(trace::Sink* sink, trace::EventMask mask, uint16_t port) override;
  trace::EventMask trace_mask() const override { return trace_.mask(); }

 private:
  // The scheduler's records, QpId -> QPN and the QP's class, forwarded to the sink.
  class SchedTrace final : public trace::Sink {
   public:
    explicit SchedTrace(EngineImpl* engine) : engine_(engine) {}
    void record(const trace::Record& r) override;

   private:
    EngineImpl* engine_;
  };

  // An engine event about q (see trace::Event for psn/bytes/a/b).
  void trace(Picos now, trace::Event e, const QpCtx& q, uint32_t psn, uint32_t bytes, uint64_t a = 0,
             uint64_t b = 0) const {
    if (trace_.on(e)) [[unlikely]]
      trace_.emit(now, e, q.qp.qpn().value(), psn, bytes, q.cls, a, b);
  }
  // A received frame refused before it reached a QP's steps.
  void trace_drop(Picos now, uint32_t qpn, size_t bytes, DropReason why) const {
    if (trace_.on(trace::Event::kDrop)) [[unlikely]]
      trace_.emit(now, trace::Event::kDrop, qpn, 0, static_cast<uint32_t>(bytes), 0,
                  static_cast<uint64_t>(why));
  }
  // A frame just built into `frame` (BTH opcode and PSN read back from it).
  void trace_frame_tx(Picos departure, const QpCtx& q, std::span<const uint8_t> frame) const;

  // ---- engine.cc
  // The last answer is tried first, inline (a post and a received frame each look
  // their QP up, mostly the same one as the call before); find_qp_slow() otherwise.
  QpCtx* find_qp(wire::Qpn qpn) {
    if (qp_cache_slot_ < slots_.size()) [[likely]] {
      QpCtx* q = slots_[qp_cache_slot_].get();
      if (q != nullptr && q->qp.qpn() == qpn) [[likely]] return q;
    }
    return find_qp_slow(qpn);
  }
  QpCtx* find_qp_slow(wire::Qpn qpn) const;
  // nullptr: no such CQ. The last answer is tried first, inline (a QP's completions
  // go to one or two CQs again and again; destroy_cq() forgets the cached one).
  CqCtx* find_cq(CqHandle cq) {
    if (cq_cache_ != nullptr && cq_cache_handle_ == cq) [[likely]] return cq_cache_;
    return find_cq_slow(cq);
  }
  CqCtx* find_cq_slow(CqHandle cq);
  // The entry of cq's next completion, taken (nullptr: no such CQ, or it overran,
  // which complete() counts and reports). complete() and the completions written in
  // place (complete_send, rx_send_first) go through it.
  ibv_wc* cq_slot(CqHandle cq) {
    CqCtx* cp = find_cq(cq);
    if (cp == nullptr) [[unlikely]] return nullptr;
    if (!cp->cq.push()) [[unlikely]] {
      cq_overrun(cq, *cp);
      return nullptr;
    }
    ++completions_queued_;
    return &cp->entries.push();
  }
  void cq_overrun(CqHandle cq, const CqCtx& c);
  const QpCtx* find_qp(wire::Qpn qpn) const;
  // msg_id: the send's trace message id (QpCtx::posted at post), 0 for receives.
  void complete(CqHandle cq, const ibv_wc& wc, uint32_t msg_id = 0);
  void complete_send(QpCtx& q, const SendWqe& w, ibv_wc_status status);
  // The QP entered ERR: flush every outstanding WQE (IBTA 10.3.1, 11.4.2.1).
  void enter_error(Picos now, QpCtx& q);
  void flush(QpCtx& q);
  void reset_qp(QpCtx& q);
  void on_state_change(Picos now, QpCtx& q, ibv_qp_state from);
  bool resolve_peer(const AhAttr& ah, Peer* peer) const;
  // An R_Key of an MR or of a valid memory window, checked for q (PD, type 2
  // window's QP, access, bounds), and the MR its bytes are in (nullptr: none).
  // On kOk with an MR's key, *found (if given) is that MR (a window's leaves it unset).
  // Inline: the QP's last passing MR key (ResponderState::rkey_hit) answers kOk when
  // the access and the bounds pass against its MR, as check_remote() would answer;
  // anything else is check_rkey_slow(), which keeps a passing MR key there.
  verbs::MrCheck check_rkey(const QpCtx& q, uint32_t rkey, uint64_t va, uint64_t len, uint32_t needed,
                            const verbs::Mr** found = nullptr) const {
    const ResponderState& r = q.resp;
    if (r.rkey_hit == rkey && r.rkey_hit_deregs == mrs_.deregs()) [[likely]] {
      const verbs::Mr* mr = r.rkey_hit_mr;
      if (needed != 0 && !(needed & ~(mr->access & verbs::kAccessRemote)) &&
          verbs::MrTable::check_range(*mr, va, len) == verbs::MrCheck::kOk) [[likely]] {
        if (found != nullptr) *found = mr;
        return verbs::MrCheck::kOk;
      }
    }
    return check_rkey_slow(q, rkey, va, len, needed, found);
  }
  verbs::MrCheck check_rkey_slow(const QpCtx& q, uint32_t rkey, uint64_t va, uint64_t len, uint32_t needed,
                                 const verbs::Mr** found) const;
  const verbs::Mr* rkey_mr(uint32_t rkey) const;
  // ---- windows.cc: check_rkey() for a key no MR has; a QP's BIND_MW, an
  // invalidation (LOCAL_INV: qpn 0; SEND_WITH_INV: the receiving QP's). Each
  // holds the windows' lock (windows.h) while it runs.
  verbs::MrCheck check_window(const QpCtx& q, uint32_t rkey, uint64_t va, uint64_t len, uint32_t needed) const;
  int bind_window(const QpCtx& q, const verbs::MwBind& b);
  int invalidate_window(PdHandle pd, uint32_t qpn, uint32_t rkey);
  std::unique_lock<std::mutex> lock_windows() const {
    return windows_->shared ? std::unique_lock<std::mutex>(windows_->mu) : std::unique_lock<std::mutex>();
  }
  bool key_in_use(uint32_t key) const { return mrs_.find_rkey(key) || mrs_.find_lkey(key); }
  // BIND_MW and LOCAL_INV at the requester's cursor run now (requester.cc).
  void run_local_ops(Picos now, QpCtx& q);

  // ---- post.cc
  // verbs::check_send_wr() and the checks that need the engine's tables;
  // length is the sum of wr's SGE lengths (post_send sums them once).
  int check_send_wr(const QpCtx& q, const SendWr& wr, uint64_t length) const;
  // A UD WR's AH: it exists and is of the QP's PD (0 or EINVAL).
  int check_ud_ah(const QpCtx& q, const SendWr& wr) const;

  // ---- requester.cc
  // The next request packet of q, without consuming it (kind kNone: none now).
  void peek_request(Picos now, QpCtx& q, TxDesc& d);
  void take_request(QpCtx& q, const TxDesc& d);
  // peek_request()'s answer right after take_request(q, d) left the requester inside
  // d's WR (q.req.wqe == d.wqe: a WRITE's or SEND's next packet), derived from d: of
  // peek_request's checks only the window can change between d's peek and now (the
  // QP's state, its RNR pause, the WR's error and kind cannot change during a
  // scheduler dequeue), and the WR's packet count is w.npkts (set when it started).
  void next_request(const QpCtx& q, const TxDesc& d, TxDesc& n) const;
  // on_grant() of d, a WRITE's or SEND's middle packet (q.tx_next of this dequeue,
  // copied to d): take_request(q, d) and next_request(q, d, q.tx_next) in the form
  // they take for such a packet (the WR started and not done by it, no READ or
  // atomic), q.tx_next moved one packet on in place while the next is again a middle
  // one inside the window; next_request() otherwise. The QP's next descriptor
  // (nullptr: none). Inline, defined in datapath.cc before on_grant(), its caller.
  const TxDesc* take_middle_request(QpCtx& q, const TxDesc& d);
  // on_grant() of d, a READ's MIDDLE response (q.tx_next of this dequeue, copied to
  // d): take_response(q, d) and next_response(q, d, q.tx_next) in the form they take
  // for it (the resource stays at the queue's front), q.tx_next moved one packet on
  // in place while the next is again a MIDDLE; next_response() otherwise. Inline,
  // in datapath.cc.
  const TxDesc* take_middle_response(QpCtx& q, const TxDesc& d);
  // on_grant() of d, the only request packet of a WR not yet started (q.tx_next of
  // this dequeue, copied to d: a WRITE's or SEND's ONLY packet or a READ request,
  // kFreshOpcodes; its WR not started, so q.req.pkt == 0): take_request(q, d) in the
  // form it takes for such a packet, then the QP's next WR peeked as grant_other()
  // does. Answers q.tx_next (nullptr: none). Inline, defined in datapath.cc before
  // on_grant(), its caller.
  const TxDesc* take_fresh_request(QpCtx& q, const TxDesc& d);
  // on_grant() of d, a READ's only response (q.tx_next of this dequeue, copied to d):
  // take_response(q, d) for a resource's last packet, then the QP's next peeked as
  // grant_other() does. Answers q.tx_next (nullptr: none). Inline, likewise.
  const TxDesc* take_only_response(QpCtx& q, const TxDesc& d);
  // The opcodes take_fresh_request() takes (bit n: opcode n): SEND ONLY (with
  // immediate, with invalidate), WRITE ONLY (with immediate), READ request.
  static constexpr uint32_t kFreshOpcodes =
      1u << wire::op::kRcSendOnly | 1u << wire::op::kRcSendOnlyImm | 1u << wire::op::kRcSendOnlyInv |
      1u << wire::op::kRcWriteOnly | 1u << wire::op::kRcWriteOnlyImm | 1u << wire::op::kRcReadRequest;
  // take_middle_request()'s next packet the long way (the WR's last, or the window
  // full): next_request() into q.tx_next; nullptr (the QP kicked after the dequeue)
  // when there is none.
  const TxDesc* next_after_middle(QpCtx& q, const TxDesc& d);
  // on_grant() of any other packet: its descriptor peeked (or taken from q.tx_next),
  // taken, and the QP's next one peeked or derived; that one, or nullptr.
  const TxDesc* grant_other(sched::QpId slot, QpCtx* q);
  // Starts WQE processing checks (local keys); false if it completed in error.
  bool start_wqe(Picos now, QpCtx& q, SendWqe& w);
  // The frame of a request packet (inline in datapath.cc, in transmit()).
  size_t build_request(QpCtx& q, const TxDesc& d, std::span<uint8_t> out);
  // build_request()'s long way: any packet but a READ request's and a SEND's or
  // WRITE's (not with invalidate) of one SGE checked at post, from the template.
  [[gnu::noinline]] size_t build_request_other(QpCtx& q, const TxDesc& d, std::span<uint8_t> out);
  // The packet d could not be built: a local MR of its WR is gone.
  void lose_local_mr(QpCtx& q, const TxDesc& d);
  // w's SGEs as its post checked them, if no MR was deregistered since.
  CheckedSges checked_sges(const SendWqe& w) const {
    return CheckedSges{w.sge_bias.data(), w.mr_deregs == mrs_.deregs()};
  }
  // Go back to PSN psn and send everything from there again (go-back-N).
  void rewind_requester(QpCtx& q, wire::Psn psn);

  // ---- responder.cc
  // One request packet through the steps of RespStep (internal.h).
  void on_request(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame,
                  bool icrc_pending = false);
  // The QP of a frame whose ICRC is checked while its payload is copied (receive());
  // nullptr: check it now.
  QpCtx* icrc_deferrable(const wire::RocePacket& pkt);
  // A frame that turned out to fail its deferred ICRC: dropped, and no longer
  // counted as received by its QP.
  void drop_bad_icrc(Picos now, QpCtx& q, const wire::RocePacket& pkt, size_t frame_bytes);
  // The checks below for a middle or last packet of the SEND or WRITE in progress,
  // fused (most packets of a long message): true exactly when each would pass (r's
  // write_dst then found, nak_seq_sent cleared as resp_check_psn clears it); false
  // with nothing changed otherwise, and the steps run one by one.
  bool resp_continues(QpCtx& q, RespPacket& r);
  // A WRITE's (without immediate) middle or last packet whose ICRC receive() left
  // to the copy, in order in the WRITE in progress: resp_continues' checks for a
  // WRITE, then resp_execute_write's copy that checks the ICRC and
  // resp_acknowledge, in one function without a RespPacket (true: done, the frame
  // stored and acknowledged or dropped for its ICRC). False with nothing changed
  // when any check would not pass: on_request then runs the steps.
  bool rx_write_continues(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame);
  // The same for a SEND's middle packet (a last one completes its receive: the
  // steps' way): resp_continues' checks for a SEND, resp_execute_send's copy into
  // the receive in progress that checks the ICRC, resp_acknowledge. False with
  // nothing changed (but bytes of the receive in progress, which the steps then
  // write again) when a check would not pass or the receive cannot take the bytes.
  bool rx_send_continues(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame);
  // A WRITE's (without immediate) FIRST or ONLY packet whose ICRC receive() already
  // checked (its RETH names the target, so it is never stored before the check):
  // resp_check_state .. resp_check_resource in their passing forms (the QP takes
  // requests, the expected PSN, no message in progress, the lengths of
  // resp_check_length, the QP's remote-write access and check_rkey's answer), then
  // resp_execute_write's copy and state and resp_acknowledge, in one function
  // without a RespPacket (receive() calls it). True: done. False with nothing changed
  // when any check would not pass: on_request then runs the steps.
  bool rx_write_first(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame);
  // A SEND's FIRST or ONLY packet (not with invalidate) whose ICRC receive() left to
  // the copy: resp_check_state .. resp_check_resource in their passing forms (the QP
  // takes requests, the expected PSN, no message in progress, one MTU (FIRST) or at
  // most one (ONLY), a receive queued), then resp_execute_send's copy into that
  // receive's buffer that checks the ICRC, the receive taken (and for an ONLY
  // completed) and resp_acknowledge, in one function without a RespPacket. True:
  // done (also when the frame failed its ICRC and was dropped). False with nothing
  // changed (but bytes of the receive's buffer, which the steps then write again)
  // when a check would not pass or the receive cannot take the bytes.
  bool rx_send_first(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame);
  // A READ request (its ICRC checked by receive(): it has no payload to defer it
  // to): resp_check_state .. resp_check_resource in their passing forms (the QP
  // takes requests, the expected PSN, no message in progress, a DMA length a message
  // may hold, the QP's remote-read access and check_rkey's answer, a free responder
  // resource), then resp_execute_read's state and the resource queued, in one
  // function without a RespPacket (receive() calls it). True: done. False with
  // nothing changed when any check would not pass: on_request then runs the steps.
  bool rx_read_request(Picos now, QpCtx& q, const wire::RocePacket& pkt);
  RespStep resp_check_state(const QpCtx& q);
  RespStep resp_check_psn(QpCtx& q, const RespPacket& r);
  RespStep resp_nak_sequence(Picos now, QpCtx& q);
  RespStep resp_check_op_seq(const QpCtx& q, const RespPacket& r);
  RespStep resp_check_length(const QpCtx& q, const RespPacket& r);
  RespStep resp_check_rkey(const QpCtx& q, RespPacket& r);
  RespStep resp_check_resource(QpCtx& q, RespPacket& r);
  RespStep resp_execute(Picos now, QpCtx& q, RespPacket& r);
  RespStep resp_execute_send(Picos now, QpCtx& q, RespPacket& r);
  RespStep resp_execute_write(Picos now, QpCtx& q, RespPacket& r);
  RespStep resp_execute_read(Picos now, QpCtx& q, RespPacket& r);
  RespStep resp_execute_atomic(Picos now, QpCtx& q, RespPacket& r);
  RespStep resp_acknowledge(Picos now, QpCtx& q, const RespPacket& r);
  void queue_ack(Picos now, QpCtx& q);
  void queue_nak(Picos now, QpCtx& q, uint8_t syndrome, wire::Psn psn, bool then_error);
  void on_duplicate(Picos now, QpCtx& q, const wire::RocePacket& pkt);
  RespResource* alloc_resource(QpCtx& q);
  void queue_resource(Picos now, QpCtx& q, uint32_t index);
  void drop_queued_after(QpCtx& q, wire::Psn psn, uint32_t keep);
  void rnr_nak(Picos now, QpCtx& q, wire::Psn psn);
  void fatal_nak(Picos now, QpCtx& q, wire::NakCode code, wire::Psn psn);
  // The receive being filled completes with status (the NAK is the caller's step).
  void fail_recv(QpCtx& q, ibv_wc_status status);
  uint32_t ack_frame_bytes() const;  // an ACK/NAK on the link, overhead included
  void peek_response(QpCtx& q, TxDesc& d);
  // peek_response()'s answer right after take_response(q, d) left d's resource at the
  // front of the queue with packets to send (RespResource::queued still set): the
  // READ's next response, derived from d (PSN and offset one packet on, middle or last
  // opcode from the resource's npkts, the frame length reused when opcode and length
  // repeat). Valid for the rest of the scheduler dequeue (QpCtx::tx_next): a duplicate
  // READ that restarts the resource, or a new one queued, arrive by receive(), never
  // during a dequeue.
  void next_response(const QpCtx& q, const TxDesc& d, TxDesc& n) const;
  void take_response(QpCtx& q, const TxDesc& d);
  size_t build_response(QpCtx& q, const TxDesc& d, std::span<uint8_t> out);
  // ACK/NAK from the responder's state, or 0 if nothing is due.
  size_t build_control(Picos now, QpCtx& q, std::span<uint8_t> out);
  bool take_recv_wqe(QpCtx& q, RecvWqe* out);
  // The receive take_recv_wqe() would take, taken off its queue without a copy (a
  // SEND ONLY's, completed at once).
  void pop_recv_wqe(QpCtx& q);
  // The receive take_recv_wqe() would take, left in place (nullptr: none).
  const RecvWqe* peek_recv_wqe(const QpCtx& q) const;
  // The next byte of q's RDMA WRITE in progress, or nullptr if its MR was
  // deregistered (or its key now names another registration).
  uint8_t* write_target(const QpCtx& q) const;

  // ---- completer.cc
  // One response packet through the steps of CompStep (internal.h).
  void on_response(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame,
                   bool icrc_pending = false);
  // A READ response whose ICRC is unchecked (receive()): copied into the oldest WR's
  // buffer while checked when it is the response that WR expects, else checked
  // alone. False: it failed and was dropped. *copied: the payload is in place.
  bool read_response_copy_and_check(Picos now, QpCtx& q, const wire::RocePacket& pkt,
                                    std::span<uint8_t> frame, bool* copied);
  CompStep comp_check_state(const QpCtx& q);
  CompStep comp_check_psn(const QpCtx& q, const wire::RocePacket& pkt);
  CompStep comp_ack(Picos now, QpCtx& q, wire::Psn psn);
  CompStep comp_rnr_nak(Picos now, QpCtx& q, wire::Psn psn, uint8_t syndrome);
  CompStep comp_nak(Picos now, QpCtx& q, wire::Psn psn, uint8_t syndrome);
  CompStep comp_atomic_ack(Picos now, QpCtx& q, const wire::RocePacket& pkt);
  CompStep comp_read_response(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame,
                              bool copied);
  void retire_acked(Picos now, QpCtx& q, wire::Psn through);
  void retry(Picos now, QpCtx& q, wire::Psn from);
  void fail_request(Picos now, QpCtx& q, ibv_wc_status status);
  void arm_ack_timer(Picos now, QpCtx& q);
  void on_timer(Picos now, QpCtx& q);
  void complete_done_wqes(Picos now, QpCtx& q);
  // Passive round trips: time a request packet as it leaves; sample it when a
  // response covers it.
  void time_request(QpCtx& q, const TxDesc& d);
  void rtt_sample(Picos now, QpCtx& q, const wire::RocePacket& pkt);

  // ---- ud.cc
  // The datagram's address, destination QP and Q_Key, at post time.
  void address_ud(const QpCtx& q, const SendWr& wr, SendWqe& w) const;
  void peek_ud(QpCtx& q, TxDesc& d);
  size_t build_ud(QpCtx& q, const TxDesc& d, std::span<uint8_t> out);
  // Builds and completes the datagram d (0: nothing to send).
  size_t send_ud(QpCtx& q, const TxDesc& d, std::span<uint8_t> out);
  // The UD send queue failed: SQE, the rest of the sends flushed.
  void ud_send_queue_error(Picos now, QpCtx& q);
  void on_ud(Picos now, QpCtx& q, const wire::RocePacket& pkt, std::span<uint8_t> frame);

  // ---- datapath.cc
  static void count_rx(QpCtx& q, size_t bytes) {
    ++q.stats.rx_packets;
    q.stats.rx_bytes += bytes;
  }
  // The next packet of q into d (written in place: a TxDesc returned by value and
  // copied was read back wider than it was written, a store-forwarding stall per
  // grant).
  void peek(Picos now, QpCtx& q, TxDesc& d);
  void kick(Picos now, QpCtx& q);
  // kick()'s checks for a local operation or a failed WR at the requester's
  // cursor or the head (only while QpCtx::sq_unusual): true if it completed one
  // in error and kick() has nothing more to do.
  bool kick_unusual(Picos now, QpCtx& q);
  void schedule_timer(QpCtx& q, Picos when);
  sched::Packet on_grant(sched::QpId qp, uint32_t bytes) override;
  // Ethernet frame bytes (no VLAN): the opcode's headers from a table made once,
  // the payload and its pad (inline: twice per packet, at each peek).
  uint32_t frame_len(uint8_t opcode, uint32_t payload) const {
    const uint32_t h = frame_header_bytes_[opcode];
    if (h == 0) return 0;  // not an opcode
    return h + payload + (wire::opcode_info(opcode).has_payload() ? wire::pad_for(payload) : 0);
  }
  // Where the frame of grant d (a CNP if cnp) goes.
  const Peer& tx_peer(const QpCtx& q, const TxDesc& d, bool cnp) const;
  // Same-device loopback: a buffer for the next frame to the port itself, and
  // the receive of the frames built into them by this transmit().
  std::span<uint8_t> loop_buffer(size_t len);
  void deliver_looped(Picos now);
  void send_parting_ack(QpCtx& q);
  size_t transmit_parting(Picos now, TxSink& sink);
  // The spec of q's next frame to peer, in tx_spec_ (valid until the next call).
  // tx_spec_'s per-frame fields only (traffic class, opcode, PSN, BTH flags, no
  // extension header): the path's fields come from a HeaderTemplate. Inline, as
  // rc_spec() and build_rc(): once or twice per frame, from requester.cc,
  // responder.cc and ud.cc.
  wire::FrameSpec& frame_fields(const Peer& peer, uint8_t opcode, wire::Psn psn, bool data) {
    // One FrameSpec per engine, every per-frame field set again here: a fresh
    // one per frame was zeroed with `rep stos` (224 bytes), most of this
    // function's time (perf, docs/performance.md "The engine's own cost per packet").
    wire::FrameSpec& s = tx_spec_;
    s.clear_extensions();
    const uint8_t tc = peer.traffic_class ? peer.traffic_class & 0xfc : static_cast<uint8_t>(config_.dscp << 2);
    // Data is ECN-capable (ECT(0)) so the fabric can mark it; ACKs/NAKs are not.
    s.traffic_class = static_cast<uint8_t>(tc | (data && config_.ecn_capable ? 0x2 : 0));
    s.opcode = opcode;
    s.solicited = false;
    s.mig_req = false;
    s.fecn = false;
    s.becn = false;
    s.ack_req = false;
    s.psn = psn;
    return s;
  }
  // frame_fields() when the QP's template is built, else frame_spec() (RC).
  wire::FrameSpec& rc_spec(const QpCtx& q, uint8_t opcode, wire::Psn psn, bool data) {
    if (q.tx_tmpl.valid()) [[likely]] return frame_fields(q.peer, opcode, psn, data);
    return frame_spec(q, q.peer, opcode, psn, q.qp.dest_qpn().value(), data);
  }
  // Builds an RC frame from its QP's template (or from the whole spec without one).
  wire::BuildResult build_rc(const QpCtx& q, const wire::FrameSpec& spec,
                             std::span<const std::span<const uint8_t>> payload, std::span<uint8_t> out) {
    if (q.tx_tmpl.valid()) [[likely]] return wire::build_frame_templated(q.tx_tmpl, spec, payload, out);
    return wire::build_frame_gather(spec, payload, out);
  }
  // Builds the header template of frames from q to peer's dest_qpn with sport.
  void make_template(const QpCtx& q, const Peer& peer, uint32_t dest_qpn, uint16_t sport,
                     wire::HeaderTemplate* t);
  wire::FrameSpec& frame_spec(const QpCtx& q, const Peer& peer, uint8_t opcode, wire::Psn psn,
                              uint32_t dest_qpn, bool data);

  // ---- dcqcn.cc
  // A received frame is marked CE: the notification point's rules (which
  // packets of which QP answer with a CNP).
  void np_check_ce(Picos now, QpCtx& q, const wire::RocePacket& pkt);
  // A data packet of q arrived with CE: queue a CNP to its sender (NP): the
  // RC peer, or for UD the datagram's source (ud_peer, ud_qpn).
  void np_on_ce(Picos now, QpCtx& q, const Peer* ud_peer = nullptr, uint32_t ud_qpn = 0);
  uint32_t cnp_frame_bytes() const;  // a CNP on the link, overhead included
  size_t build_cnp(QpCtx& q, std::span<uint8_t> out);
  void on_cnp(Picos now, QpCtx& q);
  // Runs q's reaction point timers due by now and re-arms its timer.
  void dcqcn_timer(Picos now, QpCtx& q);
  // q sent a data frame of len bytes (the byte counter).
  void dcqcn_sent(Picos now, QpCtx& q, size_t len) {
    if (q.rp.on_sent(now, len)) [[unlikely]] apply_rate(now, q);
  }
  // Gives the scheduler min(user limit, DCQCN rate) if it changed.
  void apply_rate(Picos now, QpCtx& q);

  EngineConfig config_;
  std::array<uint16_t, 256> frame_header_bytes_{};  // frame_len() of each opcode with no payload
  std::unique_ptr<sched::Scheduler> sched_;
  EngineCounters counters_;
  uint64_t completions_queued_ = 0;  // completions_queued()
  verbs::PdTable pds_;
  verbs::MrTable mrs_;
  // Memory windows (windows.h): this engine's, or lane 0's shared by the port's lanes.
  std::shared_ptr<Windows> windows_;
  // The MR behind the window whose check last passed here (check_window),
  // handed once to the rkey_mr() that translates that access: a window that
  // another lane rebinds or invalidates between the check and the copy
  // cannot send the bytes elsewhere or nowhere. Cleared by this engine's own
  // window operations; valid only while no MR was deregistered (deregs). A
  // passing check that no translation follows (a READ request: its responses
  // check again) leaves it to the next translation of that R_Key here (a
  // WRITE's middle packet), which then uses the MR that check saw: still
  // registered, and different from the table's answer only if another lane
  // changed the window in between.
  struct WindowHit {
    uint32_t rkey = 0;
    const verbs::Mr* mr = nullptr;
    uint64_t deregs = 0;
  };
  mutable WindowHit window_hit_;
  std::map<wire::IpAddr, wire::MacAddr> neighbors_;
  std::unordered_map<CqHandle, std::unique_ptr<CqCtx>> cqs_;
  CqHandle cq_cache_handle_ = 0;  // find_cq's last answer
  CqCtx* cq_cache_ = nullptr;
  std::unordered_map<SrqHandle, std::unique_ptr<SrqCtx>> srqs_;
  std::unordered_map<AhHandle, AhCtx> ahs_;
  std::unordered_map<uint32_t, uint32_t> slot_by_qpn_;
  mutable uint32_t qp_cache_slot_ = UINT32_MAX;  // find_qp's last answer (checked before use)
  std::vector<std::unique_ptr<QpCtx>> slots_;  // index = scheduler QpId
  std::vector<uint32_t> free_slots_;
  std::vector<uint32_t> gen_;  // per slot; bumps at create/destroy/reset/error, invalidates timers
  std::unordered_map<CqHandle, uint32_t> cq_users_;
  std::unordered_map<SrqHandle, uint32_t> srq_users_;
  std::vector<AsyncEvent> events_;
  uint32_t next_qpn_;
  uint32_t next_handle_ = 1;
  uint32_t forced_handle_ = 0;  // set_next_handle (0: none)
  // The next CQ/SRQ/AH handle: forced_handle_ once, else next_handle_; 0 if
  // the forced one is taken.
  uint32_t take_handle();
  LoopOut loop_out_ = nullptr;
  void* loop_ctx_ = nullptr;
  uint16_t ip_id_ = 0;

  // Timers: (deadline, slot, generation), lazily deleted.
  struct Timer {
    Picos when;
    uint32_t slot;
    uint32_t generation;
    bool operator>(const Timer& o) const { return when > o.when; }
  };
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;

  // transmit(): descriptors taken during the scheduler's dequeue, built after it.
  Picos tx_now_ = 0;
  // granted_[0, granted_n_): this dequeue's; granted_ holds kGrantBurst from the
  // start and grows only if a dequeue grants more (never with grants_ of that many),
  // so a grant writes in place.
  std::vector<TxDesc> granted_;
  size_t granted_n_ = 0;
  // The grants of one dequeue: a member, not a local array value-initialised (768
  // bytes zeroed) by every transmit() call.
  static constexpr size_t kGrantBurst = 32;
  std::array<sched::Grant, kGrantBurst> grants_;
  std::vector<uint32_t> after_grant_;  // slots to kick once the dequeue returned
  std::vector<std::span<const uint8_t>> payload_scratch_;
  wire::FrameSpec tx_spec_;  // frame_spec()'s result, reused for every frame
  // Bumped before each scheduler dequeue: a QP's tx_next with this value is the
  // descriptor its last grant of the same dequeue peeked (on_grant).
  uint64_t grant_epoch_ = 0;

  // Tracing: the engine's tracer, the scheduler's translating sink, and the latest
  // "now" any call brought (completions are written by calls that take no time).
  trace::Tracer trace_;
  SchedTrace sched_trace_{this};
  Picos trace_now_ = 0;
  // Frames to the port's own address built by this transmit() (loop_buffer).
  std::vector<std::vector<uint8_t>> loop_frames_;
  std::vector<size_t> loop_lens_;
  // ACKs of destroyed QPs to other addresses, sent first by the next transmit()
  // (send_parting_ack); at most kMaxParting wait.
  static constexpr size_t kMaxParting = 1024;
  std::vector<std::vector<uint8_t>> parting_frames_;
  std::vector<size_t> parting_lens_;
};

}  // namespace isoroce::transport::detail
