// Constants both ends of the control protocol use (docs/control-protocol.md):
// isoroced (ctrl/) and libisoroce-verbs (verbs_compat/) include this one
// header, so they cannot drift apart.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace isoroce::protocol {

// reg_mr: at most this many "pieces" (descriptors and ranges mapped back to back).
inline constexpr size_t kMaxPieces = 64;
// reg_mr access bits that need the pages mapped writable in the daemon (a
// client's file piece is mapped read-only without them).
inline constexpr uint32_t kMrWriteAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
// post_send / post_recv over the socket: at most this many SGEs in "sg".
inline constexpr size_t kMaxJsonSges = 64;
// Nesting of a request's JSON (objects and arrays) beyond which it is refused
// before it is parsed into a tree; requests need 4 ("pieces", "attr").
inline constexpr size_t kMaxJsonDepth = 16;

}  // namespace isoroce::protocol
