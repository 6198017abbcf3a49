// The justitia policy: Justitia's isolation (Zhang et al., "Justitia: Software
// Multi-Tenancy in Hardware Kernel-Bypass Networks", NSDI 2022) inside the scheduler,
// where every packet is already seen. docs/sched.md describes it; in short:
//
// - Every QP has a class (latency, throughput, bandwidth; bandwidth by default) and
//   an application. The QPs of one application and class form one logical flow: a
//   flow with four QPs gets what a flow with one gets.
// - Latency-class QPs are never paced: they are served round robin with the rest,
//   one message per turn, as a hardware RNIC serves QPs (the fifo policy).
// - Throughput and bandwidth flows send only with tokens. A generator issues one
//   token every tau = TokenBytes / SafeUtil (banking max_tokens at most; what a flow
//   leaves unspent when it runs out of packets goes back to the bank), handed round
//   robin (weighted: a flow of weight w takes w tokens per round) to the flows waiting
//   for one, one flow holding a token at a time (the bank, not a queue of chunks,
//   absorbs what the link could not carry yet). A token is worth TokenBytes bytes and
//   TokenOps messages; the flow holding one is served like a QP with a message of that
//   size (the "chunk") while its credit covers its next packet (deficit round robin:
//   less than a packet stays with the flow for its next token), and goes back to
//   wait when a bandwidth flow has spent the bytes or a throughput flow the messages.
//   TokenBytes is split_bytes (5 KB) while a latency flow is active, token_bytes
//   (1 MB) otherwise, so a latency message waits for at most one small chunk. Since
//   the scheduler grants packets, splitting a message into chunks is just granting its
//   packets as tokens arrive; the completion comes after the last packet's ACK.
// - SafeUtil follows the paper's Pseudocode 1 on every reference latency
//   (on_reference_latency, fed by the driver's probe) or passive round trip of a
//   latency-class QP (on_latency_sample, fed by the engine), as params.signal says:
//   MaxRate with no latency flow;
//   on Current99 > Target99 halve it, never below (B+T)/(L+B+T) x MaxRate; otherwise
//   add increase_step. Current99 is the exact 99th percentile of the last `window`
//   probes (SlidingQuantile). After Current99 has missed Target99 for
//   unattainable_after, the target is given up (SafeUtil = MaxRate) until another
//   latency flow arrives.
// - Per-QP rate limits (set_rate: DCQCN, the operator) apply to every class, latency
//   QPs included: a QP's packets start at least bytes x 8 / rate apart (tassel's
//   semantics). A QP waiting on its rate leaves its flow's list (or the ring) for a
//   min-heap of release times, so it blocks no one; a flow whose QPs all wait keeps
//   its token's credit without holding the ring, and on release goes to the front of
//   the ring (of the waiting list if its credit is short, taking a banked token if
//   there is one).
// - Tenants (set_tenant): tokens go round robin over tenants first (a tenant of
//   weight W takes W tokens per round), then over the waiting flows of the tenant
//   (an application's flow of weight w takes w of its tenant's tokens per round), so a
//   tenant's share does not grow with its applications or QPs. QPs with no tenant are
//   in tenant 0, weight 1 (with no tenant set anywhere: the flat round robin above).
//   Latency-class QPs are unpaced and take no tokens: tenants share the paced classes.
// - Classification (params.classify auto / verify): QPs with no declared class
//   (kAuto), or every QP, get their class from what they send (FlowClassifier),
//   applied at the end of the dequeue that decided it.
// - Control packets go first.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/flow_classifier.h"
#include "sched/index_list.h"
#include "sched/link.h"
#include "sched/scheduler.h"
#include "sched/sliding_quantile.h"

namespace isoroce::sched {

class JustitiaScheduler final : public Scheduler {
 public:
  explicit JustitiaScheduler(const Config& config);

  std::string_view name() const override { return "justitia"; }
  void activate(Picos now, QpId qp, Packet pkt) override;
  bool enqueue_control(Picos now, QpId qp, std::uint32_t bytes) override;
  void set_rate(Picos now, QpId qp, std::uint64_t bps) override;
  void set_link_bps(Picos now, std::uint64_t bps) override;
  std::uint64_t link_bps() const override { return config_.link_bps; }
  std::uint64_t rate(QpId qp) const override;
  void deactivate(Picos now, QpId qp) override;
  std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) override;
  Picos next_deadline() const override;
  bool active(QpId qp) const override;
  std::size_t active_qps() const override { return active_; }
  std::size_t bytes_per_qp() const override {
    return sizeof(Qp) + 2 * sizeof(Unit) + sizeof(Flow) + sizeof(std::uint32_t) +  // + heap slot
           (classes_.empty() ? 0 : sizeof(ClassState));
  }
  std::size_t fixed_bytes() const override;

  void set_class(Picos now, QpId qp, FlowClass cls, std::uint32_t app, std::uint32_t weight) override;
  void set_tenant(Picos now, QpId qp, std::uint32_t tenant, std::uint32_t weight) override;
  void on_reference_latency(Picos now, Picos latency) override;
  void on_latency_sample(Picos now, QpId qp, Picos rtt) override;
  const JustitiaStats* justitia_stats() const override;

  // The class the QP is served as now (classification included).
  FlowClass flow_class(QpId qp) const;
  // The logical flow of a QP (the same for QPs of one application and class).
  std::uint32_t flow_of(QpId qp) const { return qp < qps_.size() ? qps_[qp].flow_ : kNil; }

 private:
  struct Qp {
    std::uint32_t next_ = kNil;  // the QP's flow's list of backlogged QPs
    std::uint32_t prev_ = kNil;
    std::uint32_t bytes_ = 0;    // ready packet
    std::uint32_t flow_ = kNil;
    std::uint64_t rate_ = 0;     // limit, bits/s (kUnlimited: none)
    ByteCost cost_ = 0;          // byte_cost(rate_); 0: no limit
    Picos next_ok_ = 0;          // limited QPs: the earliest start of the next packet
    std::uint32_t heap_pos_ = kNil;  // position in rate_heap_ while waiting on the rate
    bool ends_ = true;           // the ready packet ends a message
    bool starts_ = true;         // the ready packet starts one
    bool last_ended_ = true;     // the last packet granted ended a message
    bool active_ = false;
    std::uint16_t tenant_ = 0;   // index in tenants_ (0: none)
  };
  struct Unit {  // ring / waiting-list links: latency QPs by QP id, flows by max_qps + flow
    std::uint32_t next_ = kNil;
    std::uint32_t prev_ = kNil;
  };
  // kParked: backlogged, but every backlogged QP waits on its rate (in rate_heap_).
  enum class Place : std::uint8_t { kIdle, kReady, kWaiting, kParked };
  struct Flow {
    std::uint64_t key = 0;
    FlowClass cls = FlowClass::kBandwidth;
    Place place = Place::kIdle;
    std::uint32_t weight = 1;
    std::uint32_t round = 0;     // tokens taken in this round (weights)
    std::uint32_t refs = 0;      // QPs assigned
    std::uint32_t backlog = 0;   // QPs with a packet ready
    IndexList qps;               // backlogged QPs (paced classes), round robin by message
    std::int64_t bytes_credit = 0;
    std::int64_t ops_credit = 0;
    Picos last_active = 0;       // latency flows: last packet activity
    bool ever_active = false;
    std::uint32_t epoch = 0;     // split_epoch_ when parked
    std::uint32_t tenant = 0;    // index in tenants_
  };
  // A tenant: its waiting flows (links through units_), its place in tenant_ring_.
  struct Tenant {
    std::uint32_t id = kNoTenant;
    std::uint32_t weight = 1;
    std::uint32_t round = 0;     // tokens taken in this round
    bool queued = false;         // on tenant_ring_
    IndexList waiting;           // flow units with a backlog and no token
    std::uint32_t next_ = kNil;  // tenant_ring_ links
    std::uint32_t prev_ = kNil;
  };

  // Classification (params_.classify != kDeclared): what set_class gave each QP, and
  // its classifier (sched/flow_classifier.h).
  struct ClassState {
    std::uint32_t app = kOwnApp;
    std::uint32_t weight = 1;
    bool classified = true;    // the classifier decides this QP's class
    bool queued_next = false;  // the QP's next message waited behind its previous one
    FlowClassifier c;
  };

  static bool paced(FlowClass c) { return c == FlowClass::kThroughput || c == FlowClass::kBandwidth; }
  void place_in_flow(Picos now, QpId qp, FlowClass cls, std::uint32_t app, std::uint32_t weight);
  void add_latency(Picos now, Picos latency);
  void note_grant(QpId qp, std::uint32_t bytes, bool starts, bool ends, bool more);
  void apply_reclass(Picos now);
  void assign(QpId qp, std::uint64_t key, FlowClass cls, std::uint32_t weight);
  void release(QpId qp);
  void enqueue_qp(Picos now, QpId qp);
  void dequeue_qp(QpId qp);
  // Rate limits: `qp` (off its list) waits in rate_heap_ until next_ok_; make_eligible
  // puts it back on its list (front: at the head of the ring or waiting list).
  void park(QpId qp);
  void flow_park(std::uint32_t f);
  void make_eligible(Picos now, QpId qp, bool front);
  void release_due(Picos at);
  void give_token(Picos now, Flow& f);
  // A paced flow's packet of `qp` waits for a token.
  void trace_withhold(Picos now, QpId qp) const {
    if (trace_.on(trace::Event::kTokenWithhold)) [[unlikely]]
      trace_.emit(now, trace::Event::kTokenWithhold, qp, 0, qps_[qp].bytes_,
                  static_cast<std::uint8_t>(flows_[qps_[qp].flow_].cls));
  }
  bool covers(const Flow& f, const Qp& q) const {
    return f.bytes_credit >= static_cast<std::int64_t>(q.bytes_) && !(f.ops_credit <= 0 && q.starts_);
  }
  void heap_push(QpId qp);
  void heap_remove(QpId qp);
  void heap_up(std::uint32_t i);
  void heap_down(std::uint32_t i);
  bool heap_less(std::uint32_t a, std::uint32_t b) const {
    const Qp& x = qps_[rate_heap_[a]];
    const Qp& y = qps_[rate_heap_[b]];
    return x.next_ok_ != y.next_ok_ ? x.next_ok_ < y.next_ok_ : rate_heap_[a] < rate_heap_[b];
  }
  void heap_swap(std::uint32_t a, std::uint32_t b) {
    std::swap(rate_heap_[a], rate_heap_[b]);
    qps_[rate_heap_[a]].heap_pos_ = a;
    qps_[rate_heap_[b]].heap_pos_ = b;
  }
  void flow_idle(std::uint32_t f);
  void end_turn(Picos now, std::uint32_t f);
  void touch_latency(Picos now, Flow& f);
  std::uint32_t latency_active(Picos now);
  void update_mode(Picos now);
  void set_tau();
  void accrue(Picos now);
  void update_gen();
  void refund(Flow& f);
  // The bank holds max_tokens big tokens' bytes, whatever the token size now: with
  // many flows whose leftovers move in step, a bank of a few small tokens would
  // overflow while they send two packets a token and run dry while they send one.
  std::int64_t bank_cap() const { return static_cast<std::int64_t>(params_.max_tokens) * params_.token_bytes; }
  void refill(Picos now);
  bool wait_for_processor(Picos at, const Qp& q);
  // The waiting flows, by tenant: push (front: first of its tenant; the tenant, if
  // not queued, first when tenant_front or in the middle of its round, else last),
  // pop the next to get a token, remove, empty.
  void wait_push(std::uint32_t unit, bool front, bool tenant_front);
  std::uint32_t wait_pop();
  void wait_remove(std::uint32_t unit);
  bool wait_empty() const { return tenant_ring_.empty(); }
  void tenant_unqueue(Tenant& t, std::uint32_t idx);
  void push_ring_front(std::uint32_t unit);

  Config config_;
  JustitiaParams params_;
  std::uint32_t max_qps_;
  std::vector<Qp> qps_;
  std::vector<Unit> units_;  // max_qps_ QP units, then max_qps_ flow units
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_flows_;
  std::unordered_map<std::uint64_t, std::uint32_t> flow_by_key_;
  std::vector<std::uint32_t> latency_flows_;  // flow ids of latency class
  IndexList ring_;     // units with something to send now: latency QPs, flows holding a token
  std::vector<Tenant> tenants_;  // [0]: QPs with no tenant
  IndexList tenant_ring_;        // tenants with a waiting flow
  LinkModel link_;
  ControlQueue control_;
  std::size_t active_ = 0;
  std::vector<QpId> rate_heap_;     // QPs waiting on their rate, by next_ok_
  std::uint32_t split_epoch_ = 0;   // bumped when tokens shrink (parked credit re-split)

  // The emulated message processor (Config::max_msgs_per_sec).
  Picos msg_cost_ = 0;
  Picos proc_free_ = 0;

  // Tokens.
  std::uint64_t max_rate_;
  std::uint64_t safe_util_;
  std::uint64_t min_safe_util_;
  std::uint32_t full_token_ops_;  // TokenOps of a token_bytes token
  std::uint32_t chunk_bytes_;     // TokenBytes now
  std::uint32_t chunk_ops_;       // TokenOps now
  Picos tau_ = 1;
  // The token bank, in bytes: it fills at SafeUtil (one token's bytes every tau) up to
  // max_tokens tokens; a token handed out takes TokenBytes; what a flow leaves unspent
  // when it runs out of packets comes back.
  std::int64_t bank_ = 0;
  Picos bank_at_ = 0;             // accrued up to then
  std::uint64_t bank_frac_ = 0;   // bits x picoseconds short of the next byte
  Picos gen_at_ = 0;              // when the bank next holds a whole token
  std::uint32_t holders_ = 0;     // flows in the ring holding a token (at most one)
  std::uint64_t tokens_issued_ = 0;
  std::uint32_t backlogged_[2] = {0, 0};  // throughput, bandwidth flows with a backlog

  // Latency flows' activity.
  std::uint32_t lat_active_ = 0;
  Picos lat_expiry_ = kNever;
  bool lat_dirty_ = false;

  // SafeUtil control.
  SlidingQuantile window_;
  Picos current99_ = 0;
  std::uint64_t samples_ = 0;
  std::uint64_t halvings_ = 0;
  Picos miss_since_ = kNever;
  bool unattainable_ = false;
  std::uint32_t lat_at_give_up_ = 0;
  std::uint64_t passive_samples_ = 0;

  // Classification.
  std::vector<ClassState> classes_;  // per QP; empty under classify = declared
  std::vector<QpId> reclass_;        // QPs whose class changed in this dequeue
  std::uint64_t reclassified_ = 0;
  mutable JustitiaStats stats_;
};

}  // namespace isoroce::sched
