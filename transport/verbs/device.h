// Device and port limits the resource checks are made against: the subset of
// struct ibv_device_attr / ibv_port_attr the model needs. The defaults are those
// Linux rxe reports (drivers/infiniband/sw/rxe/rxe_param.h), so applications
// tuned for rxe see the same numbers here.
#pragma once

#include <cstdint>
#include <infiniband/verbs.h>

namespace isoroce::verbs {

struct Device {
  uint64_t max_mr_size = ~0ull;
  uint32_t max_qp = 0x100000;
  uint32_t max_qp_wr = 0x100000;
  uint32_t max_sge = 32;            // send and receive SGEs per WR
  uint32_t max_sge_rd = 32;
  uint32_t max_inline_data = 320;   // rxe: RXE_MAX_INLINE_DATA
  uint32_t max_cq = 0x100000;
  uint32_t max_cqe = (1u << 15) - 1;
  uint32_t max_mr = 0x80000 - 1;
  uint32_t max_pd = 0x100000;
  uint32_t max_ah = 0x4000 - 1;
  uint32_t max_mw = 0x40000 - 1;   // rxe: RXE_MAX_MW
  // Responder resources per QP (bounds max_dest_rd_atomic, IBTA 11.2.5.2).
  uint32_t max_qp_rd_atom = 128;
  // Initiator depth per QP (bounds max_rd_atomic).
  uint32_t max_qp_init_rd_atom = 128;
  uint32_t max_srq = 0xe0000 - 1;
  uint32_t max_srq_wr = 0x100000;
  uint32_t max_srq_sge = 27;
  // Port attributes (one port, numbered 1 as in every Linux RDMA device).
  uint8_t phys_port_cnt = 1;
  ibv_mtu max_mtu = IBV_MTU_4096;
  uint32_t gid_tbl_len = 1024;
  uint16_t pkey_tbl_len = 64;
};

inline constexpr uint32_t kMax24 = 0xffffff;

constexpr bool port_is_valid(const Device& dev, uint32_t port_num) {
  return port_num >= 1 && port_num <= dev.phys_port_cnt;
}

}  // namespace isoroce::verbs
