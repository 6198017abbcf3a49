// What the tassel policy keeps per QP on its hot path: 32 bytes, two QPs per cache
// line, no packets. (Each QP's rate in bits/s and its cost per byte live in separate,
// cold arrays: the hot state keeps the duration of the ready packet at that cost.)
#pragma once

#include <cstdint>

#include "sched/index_list.h"
#include "sched/time.h"

namespace isoroce::sched {

// Where an active QP waits. A QP's state says kTimeline while it waits for its start
// time; which level of the timeline holds it follows from that time
// (Timeline::where), so moving down the wheel never writes to the QP.
enum class Where : std::uint8_t {
  kIdle,       // nothing ready
  kTimeline,   // waiting for its start time (stored in QpSlot::where_)
  kWheel0,     // timeline, fine level      (reported by Timeline::where)
  kWheel1,     // timeline, middle level
  kWheel2,     // timeline, coarse level
  kHeap,       // timeline, far future
  kPool,       // eligible, ordered by finish time
  kUnlimited,  // no rate limit: round robin
  kShared,     // may send, in the tenants' share tree (tassel with tenants: share_tree.h)
};

struct alignas(32) QpSlot {
  std::uint32_t next_ = kNil;  // links of the pool bucket or round robin holding the QP
  std::uint32_t prev_ = kNil;  // (doubly linked round robin only)
  std::uint32_t bytes_ = 0;    // size of the QP's ready packet
  std::uint16_t slot_ = 0;     // index of the pool bucket holding it
  Where where_ = Where::kIdle;
  bool limited_ = false;       // the QP has a rate limit (its cost per byte is not 0)
  // WF2Q+ virtual time: the start S of the ready packet while on the timeline, its
  // finish F once eligible (in the pool), the finish of the last packet when idle.
  Picos time_ = 0;
  // duration(bytes_, cost) at the QP's cost per byte (TasselScheduler::costs_), kept
  // current by every change of either: F = S + dur_ without a multiplication.
  Picos dur_ = 0;
};

static_assert(sizeof(QpSlot) == 32, "hot scheduler state per QP: half a cache line");

}  // namespace isoroce::sched
