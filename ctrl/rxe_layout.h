/* The rxe uapi queue-element layouts as a C compiler lays them out
 * (<rdma/rdma_user_rxe.h>: rxe_send_wqe, rxe_recv_wqe, rxe_dma_info,
 * rxe_sge). C and C++: ctrl/rxe_layout.c checks every number here against
 * the kernel header compiled as C (_Static_assert), and ctrl/shm_abi.h checks
 * the C++ structs the library and the daemon use against the same numbers
 * (static_assert), so both sides of the rings agree with the kernel's uapi.
 *
 * Why C++ cannot use the uapi structs as they are: rxe_dma_info ends in a
 * union of two __DECLARE_FLEX_ARRAY()s, each an anonymous struct holding an
 * empty struct and the flexible array. An empty struct has size 0 in GNU C
 * and 1 in C++, so in C++ dma.sge sits 8 bytes later (offset 32 of
 * rxe_dma_info, not 24), dma.inline_data 1 byte into the union, and
 * sizeof(rxe_send_wqe) is 216 where C (the kernel, rdma-core) says 208. */
#ifndef ISOROCE_CTRL_RXE_LAYOUT_H
#define ISOROCE_CTRL_RXE_LAYOUT_H

enum {
  /* struct rxe_dma_info: six __u32, then sge[] / inline_data[] */
  ISOROCE_RXE_DMA_INFO_BYTES = 24,
  ISOROCE_RXE_DMA_LENGTH = 0,
  ISOROCE_RXE_DMA_RESID = 4,
  ISOROCE_RXE_DMA_CUR_SGE = 8,
  ISOROCE_RXE_DMA_NUM_SGE = 12,
  ISOROCE_RXE_DMA_SGE_OFFSET = 16,
  ISOROCE_RXE_DMA_SGE = 24,         /* offsetof(rxe_dma_info, sge) */
  ISOROCE_RXE_DMA_INLINE_DATA = 24, /* offsetof(rxe_dma_info, inline_data) */
  /* struct rxe_send_wqe */
  ISOROCE_RXE_SEND_WR_BYTES = 144, /* struct rxe_send_wr: the same in C and C++ */
  ISOROCE_RXE_SEND_WQE_STATUS = 144,
  ISOROCE_RXE_SEND_WQE_IOVA = 152,
  ISOROCE_RXE_SEND_WQE_MASK = 160,
  ISOROCE_RXE_SEND_WQE_SSN = 176,
  ISOROCE_RXE_SEND_WQE_HAS_RD_ATOMIC = 180,
  ISOROCE_RXE_SEND_WQE_DMA = 184,
  ISOROCE_RXE_SEND_WQE_BYTES = 208,
  /* struct rxe_recv_wqe */
  ISOROCE_RXE_RECV_WQE_DMA = 16,
  ISOROCE_RXE_RECV_WQE_BYTES = 40,
  /* struct rxe_sge */
  ISOROCE_RXE_SGE_BYTES = 16
};

#ifdef __cplusplus
extern "C" {
#endif
/* The same numbers as ctrl/rxe_layout.c's C compiler computed them, in the
 * order of the enum above, for tests that compare them at run time. */
extern const unsigned isoroce_rxe_layout_c[];
extern const unsigned isoroce_rxe_layout_c_count;
#ifdef __cplusplus
}
#endif

#endif
