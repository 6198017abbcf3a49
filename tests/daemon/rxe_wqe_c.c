/* See rxe_wqe_c.h: C, so the uapi's flexible arrays are where the kernel has
 * them (dma.sge and dma.inline_data at offset 24 of rxe_dma_info). */
#include "tests/daemon/rxe_wqe_c.h"

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_user_rxe.h>
#include <string.h>

void isoroce_c_send_wqe(void* element, uint64_t wr_id, uint32_t opcode, uint64_t remote_addr, uint32_t rkey,
                        uint64_t addr, uint32_t length, uint32_t lkey) {
  struct rxe_send_wqe* w = element;
  memset(w, 0, sizeof *w);
  w->wr.wr_id = wr_id;
  w->wr.opcode = opcode;
  w->wr.send_flags = IBV_SEND_SIGNALED;
  w->wr.wr.rdma.remote_addr = remote_addr;
  w->wr.wr.rdma.rkey = rkey;
  w->dma.length = length;
  w->dma.resid = length;
  w->dma.num_sge = 1;
  w->dma.sge[0].addr = addr;
  w->dma.sge[0].length = length;
  w->dma.sge[0].lkey = lkey;
}

void isoroce_c_send_inline_wqe(void* element, uint64_t wr_id, const void* data, uint32_t length) {
  struct rxe_send_wqe* w = element;
  memset(w, 0, sizeof *w);
  w->wr.wr_id = wr_id;
  w->wr.opcode = IBV_WR_SEND;
  w->wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  w->dma.length = length;
  w->dma.resid = length;
  memcpy(w->dma.inline_data, data, length);
}

void isoroce_c_recv_wqe(void* element, uint64_t wr_id, uint64_t addr, uint32_t length, uint32_t lkey) {
  struct rxe_recv_wqe* w = element;
  memset(w, 0, sizeof *w);
  w->wr_id = wr_id;
  w->dma.length = length;
  w->dma.resid = length;
  w->dma.num_sge = 1;
  w->dma.sge[0].addr = addr;
  w->dma.sge[0].length = length;
  w->dma.sge[0].lkey = lkey;
}

unsigned isoroce_c_send_wqe_bytes(void) { return sizeof(struct rxe_send_wqe); }
unsigned isoroce_c_recv_wqe_bytes(void) { return sizeof(struct rxe_recv_wqe); }
