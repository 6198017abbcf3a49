// What the tassel policy keeps per QP on its hot path: 32 bytes, two QPs per cache
// line, no packets. (Each QP's rate in bits/s lives in a separate, cold array.)
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
  std::uint8_t unused_ = 0;
  // WF2Q+ virtual time: the start S of the ready packet while on the timeline, its
  // finish F once eligible (in the pool), the finish of the last packet when idle.
  Picos time_ = 0;
  ByteCost cost_ = 0;  // picoseconds per byte at the QP's rate; 0: unlimited
};

static_assert(sizeof(QpSlot) == 32, "hot scheduler state per QP: half a cache line");

}  // namespace isoroce::sched
