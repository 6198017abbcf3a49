// Trace points of the lower layers: one event type and one sink, reached by sched/ and
// transport/ (docs/profiling.md).
//
// Sans-I/O like the rest of sched/: an event's timestamp is the caller's "now", never
// a clock; the sink decides what happens to a record (the simulator keeps them in
// memory and writes Perfetto JSON, a daemon worker pushes them into a bounded
// lock-free ring that the control thread drains). A component holds a Tracer, which
// is off (null sink, empty mask) until attached, so an event that is off costs one
// load and one predicted branch.
//
// Who emits what, and what the generic fields mean for each event, is the table of
// kEventInfo below; `a` and `b` are event-specific values. Records from the scheduler
// name a QP by its scheduler id (QpId); the engine attaches a sink to its scheduler
// that rewrites them to QPNs, so every record that leaves the engine names a QPN.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "sched/time.h"

namespace isoroce::trace {

using sched::Picos;

enum class Event : std::uint8_t {
  kPost,           // transport: a work request posted (bytes: message length; a: ibv_wr_opcode; psn: message id;
                   // b: ps it waited in the application's shared-memory ring, 0 unknown)
  kActivate,       // sched: a QP became ready with a packet (bytes: its size)
  kEligible,       // sched: tassel start/finish (a: S, b: F, virtual ps; psn: Phi in Q16.16) once eligible
  kTokenGrant,     // sched: justitia token granted to a paced flow (bytes: token bytes; a: tokens left)
  kTokenWithhold,  // sched: justitia had a paced packet ready but no token (bytes: packet)
  kGrant,          // sched: a packet granted (bytes; a: departure ps; b: 1 for control)
  kFrameTx,        // transport: a frame built (psn; bytes: frame length; a: BTH opcode)
  kFrameRx,        // transport: a frame accepted (psn; bytes; a: BTH opcode)
  kAck,            // transport: ACK received (psn: acked PSN; a: AETH syndrome)
  kNak,            // transport: NAK or RNR NAK received (psn; a: AETH syndrome)
  kCnp,            // transport: CNP received (a: 1) or sent (a: 0)
  kRetransmit,     // transport: go-back-N from psn (a: retry count left)
  kCompletion,     // transport: a completion written (psn: message id; a: ibv_wc_status; b: ibv_wc_opcode)
  kRate,           // sched: set_rate (a: bps, 0 = unlimited)
  kDcqcnCut,       // transport: DCQCN rate cut (a: new rate bps; b: alpha * 2^20)
  kDcqcnIncrease,  // transport: DCQCN rate increase (a: new rate bps; b: target rate bps)
  kSafeUtil,       // sched: justitia SafeUtil changed (a: bps; b: Current99 ps)
  kTokenIssue,     // sched: justitia token generator issued a token (a: tokens banked; b: tau ps)
  kChunkSplit,     // sched: justitia split a message into token-sized chunks (bytes: chunk)
  kDrop,           // transport/sim: a frame dropped (bytes; a: transport::DropReason or sim::FabricDrop)
  kCount
};

inline constexpr std::size_t kEventCount = static_cast<std::size_t>(Event::kCount);
using EventMask = std::uint32_t;  // bit i: Event i is recorded
static_assert(kEventCount <= 32, "EventMask has 32 bits");
inline constexpr EventMask kAllEvents = (EventMask{1} << kEventCount) - 1;
// The qp of records about the whole port (safe_util, token_issue).
inline constexpr std::uint32_t kNoQp = 0xffff'ffff;
inline constexpr EventMask bit(Event e) { return EventMask{1} << static_cast<unsigned>(e); }

// kEligible carries Tassel's Phi (the sum of the active QPs' rate limits over the link
// rate) in its psn field as an unsigned Q16.16 fixed-point number, saturated at
// 0xffffffff (Phi < 65536): psn is unused by eligibility, so the record stays 40 bytes.
inline constexpr unsigned kPhiFracBits = 16;
inline constexpr std::uint32_t phi_q16(std::uint64_t active_bps, std::uint64_t link_bps) {
  if (link_bps == 0) return 0xffff'ffff;
  const unsigned __int128 q = (static_cast<unsigned __int128>(active_bps) << kPhiFracBits) / link_bps;
  return q > 0xffff'ffff ? 0xffff'ffff : static_cast<std::uint32_t>(q);
}
inline constexpr double phi_of(std::uint32_t q16) { return static_cast<double>(q16) / (1u << kPhiFracBits); }

// Names used on command lines (--events) and in trace files.
inline constexpr std::array<std::string_view, kEventCount> kEventNames = {
    "post",  "activate", "eligible", "token_grant", "token_withhold", "grant",     "frame_tx",
    "frame_rx", "ack",   "nak",      "cnp",         "retransmit",     "completion", "rate",
    "dcqcn_cut", "dcqcn_increase", "safe_util", "token_issue", "chunk_split", "drop",
};
inline constexpr std::string_view name(Event e) { return kEventNames[static_cast<std::size_t>(e)]; }

// Parses a comma-separated list of event names ("all" for every event). On an
// unknown name returns false and sets *error to a message naming it and the valid names.
bool parse_events(std::string_view list, EventMask* mask, std::string* error);

// One event. 40 bytes, trivially copyable: rings and files carry it as is.
struct Record {
  Picos time = 0;        // the emitter's "now"
  std::uint64_t a = 0;   // event-specific (see Event)
  std::uint64_t b = 0;   // event-specific (see Event)
  std::uint32_t qp = 0;  // QPN (scheduler QpId inside sched/, rewritten by the engine)
  std::uint32_t psn = 0; // PSN or message id (see Event)
  std::uint32_t bytes = 0;
  std::uint16_t port = 0;  // the emitter's port (device index in the daemon, host in the simulator)
  Event event = Event::kPost;
  std::uint8_t cls = 0;  // sched::FlowClass of the QP (kBandwidth when undeclared)
};
static_assert(sizeof(Record) == 40);

class Sink {
 public:
  virtual void record(const Record& r) = 0;

 protected:
  ~Sink() = default;
};

// Built with -DISOROCE_TRACE=OFF (CMake), every event is off at compile time.
#ifdef ISOROCE_NO_TRACE
inline constexpr bool kCompiledIn = false;
#else
inline constexpr bool kCompiledIn = true;
#endif

// What a component holds. Off until attach(); emit() of an event not in the mask
// does nothing and builds nothing.
class Tracer {
 public:
  void attach(Sink* sink, EventMask mask, std::uint16_t port) {
    sink_ = sink;
    mask_ = sink ? mask : 0;
    port_ = port;
  }
  void detach() { attach(nullptr, 0, 0); }

  bool on(Event e) const { return kCompiledIn && (mask_ & bit(e)) != 0; }
  EventMask mask() const { return kCompiledIn ? mask_ : 0; }
  Sink* sink() const { return sink_; }
  std::uint16_t port() const { return port_; }

  void emit(Picos now, Event e, std::uint32_t qp, std::uint32_t psn, std::uint32_t bytes,
            std::uint8_t cls = 0, std::uint64_t a = 0, std::uint64_t b = 0) const {
    if (!on(e)) [[likely]] return;
    sink_->record(Record{now, a, b, qp, psn, bytes, port_, e, cls});
  }

 private:
  Sink* sink_ = nullptr;
  EventMask mask_ = 0;
  std::uint16_t port_ = 0;
};

}  // namespace isoroce::trace
