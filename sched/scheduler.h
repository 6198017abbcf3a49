// The per-port transmit scheduler: which QP sends next, and when.
//
// The scheduler holds QP ids, never packets. A QP that has a packet ready is
// activated with that packet's size; when the scheduler grants it, it asks the QP's
// owner (a PacketSource) for the size of the QP's following packet, so one dequeue
// can grant a QP several packets as its rate allows. The owner builds each packet
// after the grant. Control packets (ACK, NAK, CNP) are queued apart, bypass rate
// limits and go first, but occupy the link like any packet.
//
// The scheduler models the link: a packet's departure is max(link free, now), and it
// never grants a packet that would depart after now + Config::lookahead (with
// Config::catch_up, a late call's packets may depart before now). With
// lookahead 0 a caller that steps its clock to next_deadline() gets exactly the
// departures of a link of Config::link_bps; a poll loop sets lookahead to its polling
// period and gets the next period's packets as one batch.
//
// sched/ never reads a clock: every call takes "now" (picoseconds, non-decreasing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "sched/justitia_params.h"
#include "sched/rnic_params.h"
#include "sched/time.h"
#include "sched/trace.h"

namespace isoroce::sched {

using QpId = std::uint32_t;  // dense index, 0 .. Config::max_qps - 1

// A QP's next packet: its size on the link, and whether it ends a message (WQE).
struct Packet {
  std::uint32_t bytes = 0;  // 0: the QP has nothing more to send
  bool ends_message = true;
};

enum class GrantKind : std::uint8_t { kData, kControl };

// One packet the caller may now build and send.
struct Grant {
  QpId qp = 0;
  std::uint32_t bytes = 0;
  Picos departure = 0;  // when it starts on the link model
  GrantKind kind = GrantKind::kData;
};

// The owner of the QPs. on_grant is told that `qp`'s packet of `bytes` was granted
// and returns the QP's following packet, or bytes 0 if it has none ready (the QP is
// then idle until activated again).
class PacketSource {
 public:
  virtual Packet on_grant(QpId qp, std::uint32_t bytes) = 0;

 protected:
  ~PacketSource() = default;
};

struct Config {
  std::uint64_t link_bps = 100'000'000'000;
  std::uint32_t max_qps = 1024;
  Picos lookahead = 0;                   // grant packets departing up to now + lookahead
  // A dequeue called late (after the deadline the previous one left) starts the
  // packets that were due at that deadline, at most this far before now, instead of
  // at now: a polling thread that wakes late loses no link time (the built-in
  // policies; a plugin's picks start at now). 0: every packet starts at now or later.
  Picos catch_up = 0;
  std::uint32_t control_capacity = 4096;  // control packets queued at once
  // The NIC's message processor: at most this many messages start per second (a
  // packet that starts a message waits for it); 0 = no limit. fifo and justitia
  // model it; tassel does not.
  std::uint64_t max_msgs_per_sec = 0;
  JustitiaParams justitia{};  // policy "justitia" only
  RnicParams rnic{};          // policy "rnic" only
};

// Empty if `config` is usable, else what is wrong with it.
std::string_view validate(const Config& config);

inline constexpr std::uint64_t kUnlimited = 0;  // a rate of 0 means no limit
// set_class's application for a QP that is an application of its own (the default).
inline constexpr std::uint32_t kOwnApp = 0xffff'ffff;
// set_tenant's tenant for a QP in no tenant (the default).
inline constexpr std::uint32_t kNoTenant = 0;

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // The policy's registered name (policy_registry.h): "fifo", "tassel", ...
  virtual std::string_view name() const = 0;

  // `qp`, idle in the scheduler, has `pkt` ready. Ignored if qp is out of range,
  // already active or pkt.bytes is 0.
  virtual void activate(Picos now, QpId qp, Packet pkt) = 0;

  // Queues a control packet for `qp`; false if the control queue is full.
  virtual bool enqueue_control(Picos now, QpId qp, std::uint32_t bytes) = 0;

  // Sets `qp`'s rate limit in bits per second (kUnlimited: none). Takes effect from
  // the QP's next packet to be released; a higher limit also shortens the wait
  // still ahead of the QP (tassel). fifo records it and ignores it.
  virtual void set_rate(Picos now, QpId qp, std::uint64_t bps) = 0;
  virtual std::uint64_t rate(QpId qp) const = 0;

  // The link's rate from now on, in bits per second (0 is ignored): packets
  // granted after the call occupy the link model for their size at `bps`. A
  // port's lanes share its link so (dataplane/dpdk/lane_share.h).
  virtual void set_link_bps(Picos now, std::uint64_t bps) = 0;
  virtual std::uint64_t link_bps() const = 0;  // the rate the link model has now

  // Forgets `qp`'s ready packet (the QP is being reset or destroyed). Its control
  // packets already queued still leave.
  virtual void deactivate(Picos now, QpId qp) = 0;

  // Grants up to out.size() packets that depart by now + lookahead, in departure
  // order; returns how many. Calls src.on_grant for each data grant.
  virtual std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) = 0;

  // The earliest time at which dequeue could grant something (may be in the past:
  // "now"); kNever if nothing is queued.
  virtual Picos next_deadline() const = 0;

  virtual bool active(QpId qp) const = 0;
  virtual std::size_t active_qps() const = 0;

  // Scheduler memory: bytes of state per QP, and bytes independent of the QP count.
  virtual std::size_t bytes_per_qp() const = 0;
  virtual std::size_t fixed_bytes() const = 0;

  // ---- events for policies that use them (the built-in ones ignore a completion) ----
  // A send WQE of `bytes` on `qp` completed (successfully or not).
  virtual void on_completion(Picos /*now*/, QpId /*qp*/, std::uint64_t /*bytes*/) {}
  // Why the policy was disabled and replaced by fifo (a plugin that failed,
  // policy_plugin.h); empty while it runs.
  virtual std::string_view fault() const { return {}; }

  // ---- isolation (policy "justitia"; the other built-in policies ignore these) ----
  // `qp`'s flow class and application: QPs of one application and class form one
  // logical flow (kOwnApp: the QP alone, as before any call); weight (>= 1) is the
  // application's share of the tokens.
  virtual void set_class(Picos /*now*/, QpId /*qp*/, FlowClass /*cls*/, std::uint32_t /*app*/,
                         std::uint32_t /*weight*/) {}
  // `qp`'s tenant (kNoTenant: none) and the tenant's weight (>= 1; the last call
  // for a tenant sets it): tenants share above applications, which share above their
  // QPs (docs/sched.md, "Tenants"). justitia splits its tokens so; the others ignore it.
  virtual void set_tenant(Picos /*now*/, QpId /*qp*/, std::uint32_t /*tenant*/, std::uint32_t /*weight*/) {}
  // One latency of the policy's reference flow (post to completion).
  virtual void on_reference_latency(Picos /*now*/, Picos /*latency*/) {}
  // One passive round trip measured by the transport on `qp` (no probe, no help from
  // the peer): from when a single-packet request became ready on an idle QP to the
  // ACK or response that covered it (docs/sched.md, "Latency signal").
  virtual void on_latency_sample(Picos /*now*/, QpId /*qp*/, Picos /*rtt*/) {}
  // SafeUtil, tau, Current99, tokens; nullptr for the other policies.
  virtual const JustitiaStats* justitia_stats() const { return nullptr; }

  // ---- tracing (sched/trace.h, docs/profiling.md) ----
  // Records the events of `mask` the scheduler emits (activate, eligible, token_grant,
  // token_withhold, grant, rate, safe_util, token_issue, chunk_split) into `sink`,
  // stamped with `port` and naming QPs by QpId; a null sink turns tracing off. Off,
  // an event costs one load and a predicted branch.
  virtual void attach_trace(trace::Sink* sink, trace::EventMask mask, std::uint16_t port) {
    trace_.attach(sink, mask, port);
  }
  const trace::Tracer& tracer() const { return trace_; }

 protected:
  // A grant the policy just made (kGrant: a = departure, b = 1 for control). The
  // check is inline; the record is built out of line, in cold code, so the hot
  // path keeps only a load and a branch per trace point (docs/performance.md).
  void trace_grant(Picos now, const Grant& g) const {
    if (trace_.on(trace::Event::kGrant)) [[unlikely]] trace_grant_record(now, g);
  }
  void trace_activate(Picos now, QpId qp, std::uint32_t bytes) const {
    if (trace_.on(trace::Event::kActivate)) [[unlikely]] trace_.emit(now, trace::Event::kActivate, qp, 0, bytes);
  }
  void trace_rate(Picos now, QpId qp, std::uint64_t bps) const {
    trace_.emit(now, trace::Event::kRate, qp, 0, 0, 0, bps);
  }
  [[gnu::cold, gnu::noinline]] void trace_grant_record(Picos now, const Grant& g) const {
    trace_.emit(now, trace::Event::kGrant, g.qp, 0, g.bytes, 0, g.departure, g.kind == GrantKind::kControl ? 1 : 0);
  }

  trace::Tracer trace_;
};

// A scheduler of the registered policy called `name` (policy_registry.h: built-in
// "fifo", "tassel", "justitia", and plugins); nullptr if there is no such policy or
// it refuses `config` (validate(config) not empty, for one).
std::unique_ptr<Scheduler> make_scheduler(std::string_view name, const Config& config);

}  // namespace isoroce::sched
