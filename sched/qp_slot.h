// What the tassel policy keeps per QP: 48 bytes, no packets.
#pragma once

#include <cstdint>

#include "sched/index_list.h"
#include "sched/time.h"

namespace isoroce::sched {

// Where an active QP waits.
enum class Where : std::uint8_t {
  kIdle,       // nothing ready
  kWheel0,     // timeline, fine level
  kWheel1,     // timeline, middle level
  kWheel2,     // timeline, coarse level
  kHeap,       // timeline, far future
  kPool,       // eligible, ordered by finish time
  kUnlimited,  // no rate limit: round robin
};

struct QpSlot {
  std::uint32_t next_ = kNil;  // links of whichever list holds the QP
  std::uint32_t prev_ = kNil;
  std::uint32_t bytes_ = 0;   // size of the QP's ready packet
  std::uint16_t slot_ = 0;    // index of the wheel slot or pool bucket holding it
  Where where_ = Where::kIdle;
  std::uint8_t unused_ = 0;
  Picos start_ = 0;   // WF2Q+ virtual start time S of the ready packet
  Picos finish_ = 0;  // virtual finish F: of the ready packet once eligible, else of the last one
  ByteCost cost_ = 0;           // picoseconds per byte at the QP's rate; 0: unlimited
  std::uint64_t rate_bps_ = 0;  // the rate itself (kUnlimited: 0)
};

static_assert(sizeof(QpSlot) == 48, "scheduler state per QP");

}  // namespace isoroce::sched
