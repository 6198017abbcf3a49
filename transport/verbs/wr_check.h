// The checks of a work request against its queue that need no other state:
// opcode for the QP type, SGE count, inline rules, atomic size and alignment,
// message and datagram sizes (rxe: validate_send_wr() in rxe_verbs.c). One
// function for everyone who validates a WR, so they cannot drift: the engine
// (Engine::post_send/post_recv, which adds the checks that need its tables:
// the QP's state, the AH and the AH's PD), and libisoroce-verbs at post time
// for its synchronous errno.
#pragma once

#include <infiniband/verbs.h>

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
int check_send_wr(const SendQueueLimits& q, const SendWrShape& wr);

// 0 or EINVAL: more SGEs than the receive queue (or SRQ) takes.
int check_recv_wr(uint32_t max_recv_sge, size_t num_sge);

}  // namespace isoroce::verbs
