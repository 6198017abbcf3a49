// The shared-memory queues between libisoroce-verbs and isoroced: the data
// path of the verbs library (DESIGN.md: rxe uapi layouts; posting and polling
// are loads and stores, never system calls).
//
// Every queue is one memfd that the daemon creates and passes, with its
// geometry, in the reply to create_qp / create_srq / create_cq when the
// request says "shm": true (docs/control-protocol.md). Both sides map the
// whole file. Layout:
//
//   offset 0:                  struct rxe_queue_buf (<rdma/rdma_user_rxe.h>):
//                              log2_elem_size, index_mask, then producer_index
//                              and consumer_index on cache lines of their own
//   offset kQueueHeaderBytes:  (index_mask + 1) elements of 2^log2_elem_size bytes
//   then, for a CQ only:       one CqNotify block (64 bytes)
//
// Elements:
//   SQ        struct rxe_send_wqe as C lays it out (208 bytes), then its
//             dma.sge[] (num_sge entries) or, with IBV_SEND_INLINE,
//             dma.length bytes of dma.inline_data: both at offset 208
//   RQ, SRQ   struct rxe_recv_wqe as C lays it out (40 bytes), then its
//             dma.sge[num_sge]
//   C++ cannot use the uapi's structs for these (ctrl/rxe_layout.h says why:
//   sizeof(rxe_send_wqe) is 216 there); SendWqe and RecvWqe below are the C
//   layout, checked against the numbers ctrl/rxe_layout.c gets from a C
//   compiler, so the rings are the kernel's and rdma-core's rxe layouts.
//   CQ        struct ib_uverbs_wc (<rdma/ib_user_verbs.h>)
// In a send WQE: wr.opcode is the ibv_wr_opcode, wr.send_flags the
// ibv_send_flags, wr.ex.imm_data network order, SGE addresses are the
// addresses the application registered (iova), the AH handle is the one
// from create_ah (wr.wr.ud.ah_num; remote_qpn/remote_qkey there too), as in ibv_send_wr. dma.num_sge and
// dma.length (total bytes) are set by the library.
//
// Indices: the producer writes the element, then publishes producer_index
// (release); the consumer reads producer_index (acquire), reads the element,
// then publishes consumer_index (release). Indices are kept in
// [0, index_mask] and advance by one modulo index_mask + 1; a queue is full
// when (producer + 1) & mask == consumer, so it holds at most index_mask
// elements, as rxe's do. SQ, RQ and SRQ: the library produces, the daemon
// consumes. CQ: the daemon produces, the library consumes. A QP's RQ is the
// exception to "consume when read": the daemon moves its consumer_index when
// a receive completes (or is dropped without a completion), so the ring holds
// the outstanding receives and the library refuses the (max_recv_wr + 1)th
// with ENOMEM, as rxe (ShmPump::retire_recv).
//
// The daemon never trusts what the application can write: it keeps its own
// copy of each queue's geometry, masks every index it reads, copies a WQE out
// of shared memory before checking it, and checks every field (opcode, SGE
// count, lengths, handles) before anything reaches the engine.
//
// The ring stage of a trace (docs/profiling.md): while the daemon records post
// events for the device, it sets kStampPostTsc in an SQ's trace_flags (the first
// spare word of rxe_queue_buf, pad_1[0]); the library, when it publishes WQEs and
// finds the flag set, stores the TSC (rdtsc, the machine's clock that the daemon's
// clock counts too) in each WQE's iova, which nothing else in a send WQE uses.
// The daemon turns it into its own time and the engine's post record carries how
// long the WR waited in the ring. With the flag clear (tracing off) a post costs
// one load of a line the library already reads.
//
// Completion events: create_cq with "events": true returns, after the queue
// memfd, an eventfd the daemon made (EFD_NONBLOCK: a client's own eventfd could
// block the daemon's write). The library arms a CQ (ibv_req_notify_cq) by
// storing CqNotify::solicited_only and then armed = 1 (release). When the
// daemon writes a completion to an armed CQ (any completion, or with
// solicited_only one with immediate data or an error), it clears armed and
// writes 1 to that eventfd; the library's completion channel waits on it
// (e.g. an epoll fd over its CQs' eventfds) and reads it (ibv_get_cq_event).
//
// The doorbell (shared-memory ABI 2): "open" with "doorbell": true returns,
// after the async eventfd, two more descriptors: a read-only memfd of
// kDoorbellPageBytes holding the DoorbellPage of the worker that polls the
// device (on a port with lanes, the port's page, whose asleep word is
// nonzero while any of its lanes' workers sleeps; the daemon writes it; the file is sealed against writable mappings
// and passed opened O_RDONLY), and an eventfd of this client's own
// (EFD_NONBLOCK) that the worker adds to the set it blocks on. The worker
// stores asleep = 1, issues a seq_cst fence, looks at every ring once more,
// and only then blocks; it stores 0 when it wakes. The library, after it
// published producer_index of an SQ, RQ or SRQ, issues a seq_cst fence and
// loads asleep: 1, and it writes 1 to its eventfd. One of the two then sees
// the other (store, fence, load on both sides): either the worker's last look
// finds the WQE or the library finds the worker asleep. While the worker is
// awake a post costs the fence and one load, no system call. The client's
// writes can only end the worker's sleeps (counted: doorbell_wakeups in the
// status view); docs/security.md.
//
// The fence without a fence (kBellMembarrier in DoorbellPage::flags): where the
// kernel has membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) the worker issues it
// between its store of asleep and its last look, and sets the flag. A library
// whose process registered for it (MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED)
// then needs only a compiler barrier between its producer_index store and its
// load of asleep: the worker's system call makes every CPU running the
// library's threads pass a full barrier, which orders that store and load as
// the library's own fence would (the asymmetric fence of membarrier(2)); the
// library relies on it only once "open" with "membarrier": true was answered
// "membarrier": true, and the worker makes the call only while such a client
// is open (a system call per sleep for nobody otherwise; ABI 3). The
// fence the library drops was most of a post's cost (it waits until the
// stores to the WQE's lines and the producer line, cross-core misses, are
// done); the worker pays one system call per sleep instead, and only before
// a sleep longer than 50 us (the call IPIs every CPU running a registered
// process: about 50 us on a paravirtualised VM): a post that races a shorter
// sleep is found when that sleep ends, at most 50 us late. A library that is
// not registered, or that finds the flag clear, keeps its fence; a daemon
// that cannot issue the call leaves the flag clear (and clears it, then
// polls on, if the call ever fails).
//
// Versions: "open" carries "shm_abi" (kShmAbiVersion); a daemon that speaks
// another version refuses the open with EPROTO and says which versions meet.
// A library without the field (ABI 1: the same queues, no doorbell) is served
// without a doorbell.
#pragma once

// glibc first: <rdma/rdma_user_rxe.h> pulls in <linux/in.h>, which defers to
// glibc's definitions only when <netinet/in.h> came before it.
#include <netinet/in.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ctrl/rxe_layout.h"

namespace isoroce::shm {

// struct rxe_dma_info without its trailing flexible arrays: sge[] and
// inline_data[] start right after it, at offset 24 as in C.
struct DmaInfo {
  uint32_t length;
  uint32_t resid;
  uint32_t cur_sge;
  uint32_t num_sge;
  uint32_t sge_offset;
  uint32_t reserved;
};

// struct rxe_send_wqe, C layout; dma.sge[] / dma.inline_data at send_sges() /
// send_inline(), i.e. at sizeof(SendWqe).
struct SendWqe {
  rxe_send_wr wr;  // no flexible arrays: the same in C and C++
  uint32_t status;
  uint32_t state;
  alignas(8) uint64_t iova;
  uint32_t mask;
  uint32_t first_psn;
  uint32_t last_psn;
  uint32_t ack_length;
  uint32_t ssn;
  uint32_t has_rd_atomic;
  DmaInfo dma;
};

// struct rxe_recv_wqe, C layout; dma.sge[] at recv_sges().
struct RecvWqe {
  alignas(8) uint64_t wr_id;
  uint32_t reserved;
  uint32_t padding;
  DmaInfo dma;
};

static_assert(sizeof(DmaInfo) == ISOROCE_RXE_DMA_INFO_BYTES);
static_assert(offsetof(DmaInfo, length) == ISOROCE_RXE_DMA_LENGTH);
static_assert(offsetof(DmaInfo, resid) == ISOROCE_RXE_DMA_RESID);
static_assert(offsetof(DmaInfo, cur_sge) == ISOROCE_RXE_DMA_CUR_SGE);
static_assert(offsetof(DmaInfo, num_sge) == ISOROCE_RXE_DMA_NUM_SGE);
static_assert(offsetof(DmaInfo, sge_offset) == ISOROCE_RXE_DMA_SGE_OFFSET);
static_assert(sizeof(DmaInfo) == ISOROCE_RXE_DMA_SGE && sizeof(DmaInfo) == ISOROCE_RXE_DMA_INLINE_DATA,
              "dma.sge and dma.inline_data follow the six words");
static_assert(sizeof(rxe_send_wr) == ISOROCE_RXE_SEND_WR_BYTES);
static_assert(offsetof(SendWqe, status) == ISOROCE_RXE_SEND_WQE_STATUS);
static_assert(offsetof(SendWqe, iova) == ISOROCE_RXE_SEND_WQE_IOVA);
static_assert(offsetof(SendWqe, mask) == ISOROCE_RXE_SEND_WQE_MASK);
static_assert(offsetof(SendWqe, ssn) == ISOROCE_RXE_SEND_WQE_SSN);
static_assert(offsetof(SendWqe, has_rd_atomic) == ISOROCE_RXE_SEND_WQE_HAS_RD_ATOMIC);
static_assert(offsetof(SendWqe, dma) == ISOROCE_RXE_SEND_WQE_DMA);
static_assert(sizeof(SendWqe) == ISOROCE_RXE_SEND_WQE_BYTES);
static_assert(offsetof(RecvWqe, dma) == ISOROCE_RXE_RECV_WQE_DMA);
static_assert(sizeof(RecvWqe) == ISOROCE_RXE_RECV_WQE_BYTES);
static_assert(sizeof(rxe_sge) == ISOROCE_RXE_SGE_BYTES);

inline rxe_sge* send_sges(SendWqe* w) { return reinterpret_cast<rxe_sge*>(w + 1); }
inline uint8_t* send_inline(SendWqe* w) { return reinterpret_cast<uint8_t*>(w + 1); }
inline rxe_sge* recv_sges(RecvWqe* w) { return reinterpret_cast<rxe_sge*>(w + 1); }

inline constexpr size_t kQueueHeaderBytes = sizeof(rxe_queue_buf);
static_assert(kQueueHeaderBytes == 384, "rxe_queue_buf: two words, then one index per 128-byte line");
static_assert(offsetof(rxe_queue_buf, producer_index) == 128);
static_assert(offsetof(rxe_queue_buf, consumer_index) == 256);

struct alignas(64) CqNotify {
  std::atomic<uint32_t> armed;
  uint32_t solicited_only;
  uint32_t reserved[14];
};
static_assert(sizeof(CqNotify) == 64);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline constexpr uint32_t kShmAbiVersion = 3;

// The worker's doorbell page (see above); the rest of the page is zero.
struct alignas(64) DoorbellPage {
  std::atomic<uint32_t> asleep;  // 1: the worker blocks (or is about to): ring the eventfd
  uint32_t abi;                  // kShmAbiVersion
  uint32_t worker;               // the worker's index (as in the status view)
  std::atomic<uint32_t> flags;   // kBellMembarrier
  uint32_t reserved[12];
};
// The worker issues membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) after it
// stores asleep (before sleeps longer than 50 us): a registered library may
// drop its fence (see above).
inline constexpr uint32_t kBellMembarrier = 1;
static_assert(sizeof(DoorbellPage) == 64);
inline constexpr size_t kDoorbellPageBytes = 4096;

// Element sizes (powers of two, at least 64 bytes).
inline uint32_t log2_ceil(size_t bytes) {
  uint32_t l = 6;
  while ((size_t{1} << l) < bytes) ++l;
  return l;
}
inline size_t send_wqe_bytes(uint32_t max_sge, uint32_t max_inline) {
  const size_t sges = max_sge * sizeof(rxe_sge);
  return sizeof(SendWqe) + (sges > max_inline ? sges : max_inline);
}
inline size_t recv_wqe_bytes(uint32_t max_sge) { return sizeof(RecvWqe) + max_sge * sizeof(rxe_sge); }

// Bytes of a queue file with 2^log2_entries elements.
inline size_t queue_bytes(uint32_t log2_entries, uint32_t log2_elem, bool cq) {
  return kQueueHeaderBytes + (size_t{1} << (log2_entries + log2_elem)) + (cq ? sizeof(CqNotify) : 0);
}

// Views of a mapped queue.
inline rxe_queue_buf* header(void* base) { return static_cast<rxe_queue_buf*>(base); }
inline std::atomic<uint32_t>& producer(void* base) {
  return *reinterpret_cast<std::atomic<uint32_t>*>(&header(base)->producer_index);
}
inline std::atomic<uint32_t>& consumer(void* base) {
  return *reinterpret_cast<std::atomic<uint32_t>*>(&header(base)->consumer_index);
}
inline uint8_t* element(void* base, uint32_t index, uint32_t log2_elem) {
  return static_cast<uint8_t*>(base) + kQueueHeaderBytes + (size_t{index} << log2_elem);
}
inline constexpr uint32_t kStampPostTsc = 1;
inline std::atomic<uint32_t>& trace_flags(void* base) {
  return *reinterpret_cast<std::atomic<uint32_t>*>(&header(base)->pad_1[0]);
}
inline CqNotify* cq_notify(void* base, uint32_t log2_entries, uint32_t log2_elem) {
  return reinterpret_cast<CqNotify*>(static_cast<uint8_t*>(base) + kQueueHeaderBytes +
                                     (size_t{1} << (log2_entries + log2_elem)));
}

}  // namespace isoroce::shm
