/* Queue elements written by C code with the kernel's own uapi structs
 * (<rdma/rdma_user_rxe.h> compiled as C, as rdma-core's rxe provider does):
 * what an rxe-layout producer puts in the rings. C and C++. */
#ifndef ISOROCE_TESTS_DAEMON_RXE_WQE_C_H
#define ISOROCE_TESTS_DAEMON_RXE_WQE_C_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/* A signaled send WQE with one SGE in dma.sge[0]. */
void isoroce_c_send_wqe(void* element, uint64_t wr_id, uint32_t opcode, uint64_t remote_addr, uint32_t rkey,
                        uint64_t addr, uint32_t length, uint32_t lkey);
/* A signaled IBV_WR_SEND with IBV_SEND_INLINE: length bytes in dma.inline_data. */
void isoroce_c_send_inline_wqe(void* element, uint64_t wr_id, const void* data, uint32_t length);
/* A receive WQE with one SGE in dma.sge[0]. */
void isoroce_c_recv_wqe(void* element, uint64_t wr_id, uint64_t addr, uint32_t length, uint32_t lkey);
/* sizeof(struct rxe_send_wqe) and sizeof(struct rxe_recv_wqe) in C. */
unsigned isoroce_c_send_wqe_bytes(void);
unsigned isoroce_c_recv_wqe_bytes(void);
#ifdef __cplusplus
}
#endif
#endif
