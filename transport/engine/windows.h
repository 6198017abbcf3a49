// The memory windows an engine uses (transport/verbs/mw_table.h). An engine
// alone on its port has a table of its own and takes no lock. The engines of
// one port's lanes (docs/design.md, "Lanes") share lane 0's
// (Engine::share_windows, before their workers start), since a window bound
// by a QP of one lane must be usable through a QP of any other (type 1) and
// invalidated from any lane: each then takes `mu` for a window operation
// (alloc, dealloc, bind, invalidate) and for a remote access whose R_Key is no
// MR's, and only then. An MR-keyed access never touches it.
#pragma once

#include <cstdint>
#include <mutex>

#include "transport/verbs/mw_table.h"

namespace isoroce::transport::detail {

struct Windows {
  explicit Windows(uint64_t key_seed) : table(key_seed) {}
  std::mutex mu;
  verbs::MwTable table;
  bool shared = false;  // set by share_windows() before the engines run; read-only after
};

}  // namespace isoroce::transport::detail
