// The RPerf method (../shared/papers/rperf.md, docs/profiling.md "Latency
// breakdown") over trace records: a QP's round trip as RPerf measures it, and
// where each message's time went.
//
// RPerf posts an RC SEND over the wire and, right after it, a SEND on a
// loopback QP of the same device; the loopback's completion stands for every
// host-side cost, so the network round trip of pair k is
//   RTT_k = T_W,k - T_L,k
// with T_W the wire SEND's completion and T_L the loopback's (Eq. 1). Here both
// come from the trace: the k-th completion of the wire QP and the k-th of the
// loopback QP, each matched to its post by message id.
//
// The breakdown follows a wire message through the trace:
//   scheduler  post -> departure of its first grant (the scheduler's queue)
//   wire       first frame departs -> the responder accepts the last one
//   responder  the responder accepts it -> its ACK departs (needs the
//              responder's port traced; else 0 and counted in "return")
//   return     the ACK departs -> the requester takes it
//   completion the ACK taken -> the completion written
// and, before them,
//   ring       the application's post (libisoroce-verbs publishing the WQE in the
//              shared-memory send ring) -> the daemon's pump taking it (the
//              engine's post): the post record's b, present when the library
//              stamped the WQE (ctrl/shm_abi.h, kStampPostTsc)
// so that "total" runs from the application's post when the ring is known.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sched/trace.h"

namespace isoroce::tools::rperf {

using sched::Picos;

struct QpRef {
  uint16_t port = 0;
  uint32_t qp = 0;
};

// One message's instants; a stage missing from the trace is nullopt.
struct Message {
  uint32_t id = 0;
  Picos post = 0;
  Picos ring = 0;  // waited in the application's ring before post (0: unknown)
  std::optional<Picos> grant, tx, resp_rx, resp_ack_tx, ack, completion;
};

// The wire QP's messages in post order. peer: the responder's QP, whose
// frame_rx and frame_tx (its ACK) give the responder stage.
std::vector<Message> messages(std::span<const trace::Record> records, QpRef wire, std::optional<QpRef> peer);

struct Percentiles {
  std::size_t n = 0;
  double p50_ns = 0, p99_ns = 0, p999_ns = 0, mean_ns = 0, max_ns = 0;
};
// Nearest-rank percentiles of durations in picoseconds.
Percentiles percentiles(std::vector<Picos> v);

// RTT_k = T_W,k - T_L,k over the pairs both QPs completed (in post order).
std::vector<Picos> rperf_rtts(std::span<const trace::Record> records, QpRef wire, QpRef loopback);

struct Stage {
  std::string name;
  Percentiles p;
};
// ring (when any post carries it), scheduler, wire, responder, return,
// completion, and total (the application's post -> completion), over the
// messages that have every instant the stage needs.
std::vector<Stage> breakdown(const std::vector<Message>& msgs);

}  // namespace isoroce::tools::rperf
