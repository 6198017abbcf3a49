// The checks of a work request against its queue that need no other state:
// opcode for the QP type, SGE count, inline rules, atomic size and alignment,
// message and datagram sizes (rxe: validate_send_wr() in rxe_verbs.c). One
// function for everyone who validates a WR, so they cannot drift: the engine
// (Engine::post_send/post_recv, which adds the checks that need its tables:
// the QP's state, the AH and the AH's PD), and libisoroce-verbs at post time
// for its synchronous errno.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace isoroce::verbs {

// The largest message (ibv_device_attr::max_msg_sz, 2^31 as rxe).
inline constexpr uint64_t kMaxMsgSize = 1ull << 31;

// What the checks need of a send queue.
struct SendQueueLimits {
  ibv_qp_type qp_type = IBV_QPT_RC;
  uint32_t max_send_sge = 0;
  uint32_t max_inline_data = 0;
  uint32_t mtu = 0;  // bytes: the largest UD datagram
};

// What the checks need of a send WR (ibv_send_wr without the pointers).
struct SendWrShape {
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint32_t send_flags = 0;  // ibv_send_flags
  size_t num_sge = 0;
  uint64_t length = 0;       // the sum of the SGE lengths
  uint64_t remote_addr = 0;  // atomics: the 8 bytes' address
};

inline bool is_atomic(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

// 0 or EINVAL: an opcode this device does not have or the QP type does not
// allow (UD: SEND and SEND_WITH_IMM; RC: those, RDMA WRITE/READ and atomics;
// no memory windows, SEND_WITH_INV, LOCAL_INV or TSO), more SGEs than
// max_send_sge, inline READ/atomic or inline beyond max_inline_data, an atomic
// not of 8 bytes (IBTA 9.4.5) or not 8-byte aligned, a message above
// kMaxMsgSize, a UD datagram above the MTU (one packet, 9.8).
// Inline: the engine checks every WR it is posted with this (a call per post
// was 30 instructions of the per-packet path).
inline int check_send_wr(const SendQueueLimits& q, const SendWrShape& wr) {
  const bool ud = q.qp_type == IBV_QPT_UD;
  switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_SEND_WITH_INV:
      if (ud) return EINVAL;
      break;
    case IBV_WR_BIND_MW:
    case IBV_WR_LOCAL_INV:
      // Local operations (10.6.7, 10.7.2.3): RC only, no data.
      if (ud || wr.num_sge != 0 || (wr.send_flags & IBV_SEND_INLINE)) return EINVAL;
      return 0;
    default:
      return EINVAL;
  }
  if (wr.num_sge > q.max_send_sge) return EINVAL;
  if (wr.length > kMaxMsgSize) return EINVAL;
  const bool atomic = is_atomic(wr.opcode);
  if (wr.send_flags & IBV_SEND_INLINE) {
    if (atomic || wr.opcode == IBV_WR_RDMA_READ) return EINVAL;
    if (wr.length > q.max_inline_data) return EINVAL;
  }
  if (atomic && (wr.length != 8 || (wr.remote_addr & 7))) return EINVAL;
  if (ud && wr.length > q.mtu) return EINVAL;
  return 0;
}

// 0 or EINVAL: more SGEs than the receive queue (or SRQ) takes.
int check_recv_wr(uint32_t max_recv_sge, size_t num_sge);

}  // namespace isoroce::verbs
