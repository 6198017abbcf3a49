// Value checks on the attributes of ibv_modify_qp(), applied to the bits set
// in the mask once check_modify_qp_mask() has accepted the mask itself.
// Sources: the field widths of IBTA vol.1 (cited per check in the .cc) and
// Linux rxe_qp_chk_attr() (drivers/infiniband/sw/rxe/rxe_qp.c).
#pragma once

#include <cstdint>
#include <infiniband/verbs.h>

#include "transport/verbs/device.h"

namespace isoroce::verbs {

inline constexpr uint8_t kMaxAckTimeout = 31;   // 5 bits, IBTA 11.2.4.2 "Local ACK Timeout"
inline constexpr uint8_t kMaxRetryCnt = 7;      // 3 bits, IBTA 9.7.5.2.8
inline constexpr uint8_t kMaxRnrRetry = 7;      // 3 bits, 7 = retry forever (IBTA 9.7.5.2.8)
inline constexpr uint8_t kMaxMinRnrTimer = 31;  // 5-bit encoding, IBTA table 45

// The QP access flags a peer can be granted (IBTA 11.2.5.2 "Enable RDMA
// Read/Write/Atomic"); LOCAL_WRITE is accepted and has no effect on a QP.
inline constexpr uint32_t kQpAccessKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// 0 or EINVAL for the first value out of range among the attributes in mask.
int check_qp_attr_values(const Device& dev, const ibv_qp_attr& attr, uint32_t mask);

}  // namespace isoroce::verbs
