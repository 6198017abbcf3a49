/* The rxe uapi layouts as C lays them out (see rxe_layout.h): compiled as C
 * so that the empty structs of __DECLARE_FLEX_ARRAY() have size 0, as in the
 * kernel and in rdma-core's rxe provider. A build fails here if the kernel
 * header ever disagrees with the numbers the C++ side is checked against. */
#include "ctrl/rxe_layout.h"

#include <netinet/in.h> /* before the uapi: <linux/in.h> defers to glibc */
#include <rdma/rdma_user_rxe.h>
#include <stddef.h>

#define CHECK(expr, value) _Static_assert((expr) == (value), #expr " is not " #value)

CHECK(sizeof(struct rxe_dma_info), ISOROCE_RXE_DMA_INFO_BYTES);
CHECK(offsetof(struct rxe_dma_info, length), ISOROCE_RXE_DMA_LENGTH);
CHECK(offsetof(struct rxe_dma_info, resid), ISOROCE_RXE_DMA_RESID);
CHECK(offsetof(struct rxe_dma_info, cur_sge), ISOROCE_RXE_DMA_CUR_SGE);
CHECK(offsetof(struct rxe_dma_info, num_sge), ISOROCE_RXE_DMA_NUM_SGE);
CHECK(offsetof(struct rxe_dma_info, sge_offset), ISOROCE_RXE_DMA_SGE_OFFSET);
CHECK(offsetof(struct rxe_dma_info, sge), ISOROCE_RXE_DMA_SGE);
CHECK(offsetof(struct rxe_dma_info, inline_data), ISOROCE_RXE_DMA_INLINE_DATA);
CHECK(sizeof(struct rxe_send_wr), ISOROCE_RXE_SEND_WR_BYTES);
CHECK(offsetof(struct rxe_send_wqe, status), ISOROCE_RXE_SEND_WQE_STATUS);
CHECK(offsetof(struct rxe_send_wqe, iova), ISOROCE_RXE_SEND_WQE_IOVA);
CHECK(offsetof(struct rxe_send_wqe, mask), ISOROCE_RXE_SEND_WQE_MASK);
CHECK(offsetof(struct rxe_send_wqe, ssn), ISOROCE_RXE_SEND_WQE_SSN);
CHECK(offsetof(struct rxe_send_wqe, has_rd_atomic), ISOROCE_RXE_SEND_WQE_HAS_RD_ATOMIC);
CHECK(offsetof(struct rxe_send_wqe, dma), ISOROCE_RXE_SEND_WQE_DMA);
CHECK(sizeof(struct rxe_send_wqe), ISOROCE_RXE_SEND_WQE_BYTES);
CHECK(offsetof(struct rxe_recv_wqe, dma), ISOROCE_RXE_RECV_WQE_DMA);
CHECK(sizeof(struct rxe_recv_wqe), ISOROCE_RXE_RECV_WQE_BYTES);
CHECK(sizeof(struct rxe_sge), ISOROCE_RXE_SGE_BYTES);

const unsigned isoroce_rxe_layout_c[] = {
    sizeof(struct rxe_dma_info),
    offsetof(struct rxe_dma_info, length),
    offsetof(struct rxe_dma_info, resid),
    offsetof(struct rxe_dma_info, cur_sge),
    offsetof(struct rxe_dma_info, num_sge),
    offsetof(struct rxe_dma_info, sge_offset),
    offsetof(struct rxe_dma_info, sge),
    offsetof(struct rxe_dma_info, inline_data),
    sizeof(struct rxe_send_wr),
    offsetof(struct rxe_send_wqe, status),
    offsetof(struct rxe_send_wqe, iova),
    offsetof(struct rxe_send_wqe, mask),
    offsetof(struct rxe_send_wqe, ssn),
    offsetof(struct rxe_send_wqe, has_rd_atomic),
    offsetof(struct rxe_send_wqe, dma),
    sizeof(struct rxe_send_wqe),
    offsetof(struct rxe_recv_wqe, dma),
    sizeof(struct rxe_recv_wqe),
    sizeof(struct rxe_sge),
};
const unsigned isoroce_rxe_layout_c_count = sizeof isoroce_rxe_layout_c / sizeof isoroce_rxe_layout_c[0];
