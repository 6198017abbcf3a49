// Address handles and the address vector of a connected QP (IBV_QP_AV):
// the checks of ibv_create_ah() / ibv_modify_qp(IBV_QP_AV) on RoCEv2.
#pragma once

#include <infiniband/verbs.h>

#include "transport/verbs/device.h"

namespace isoroce::verbs {

inline constexpr uint32_t kMaxFlowLabel = 0xfffff;  // 20-bit GRH field, IBTA 8.3.1
inline constexpr uint8_t kMaxSl = 15;               // 4-bit SL, IBTA 7.6.5

// 0 or EINVAL. RoCE addresses are GIDs, so the GRH is mandatory (Linux
// rdma_check_ah_attr(): a RoCE port needs IB_AH_GRH); port_num names a port
// of the device (rxe_av_chk_attr()); sgid_index is inside the GID table;
// sl and flow_label fit their header fields.
int check_ah_attr(const Device& dev, const ibv_ah_attr& ah);

}  // namespace isoroce::verbs
