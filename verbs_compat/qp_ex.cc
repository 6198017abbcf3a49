// The extended QP (ibv_create_qp_ex through verbs_context::create_qp_ex) and
// its post-send API (ibv_qp_to_qp_ex, ibv_wr_*):
//
//   wr_start          takes the SQ lock, notes the producer index
//   wr_<op>           starts a work request (wr_id and wr_flags from the
//                     ibv_qp_ex), staged in the QP's SendBatch
//   wr_set_*          fill in the staged request (SGEs, inline bytes, UD address)
//   wr_complete       publishes the producer index once, unlocks
//   wr_abort          unlocks: the WQEs written past the producer index are
//                     never seen by the daemon
//
// A staged request goes into the ring when the next one starts or the batch
// completes, through post_one_send — ibv_post_send's own validation, room
// check and WQE builder. The first error of a batch (a bad request, a full
// queue, too many SGEs or inline bytes, a setter with no request) sticks:
// every later call of the batch is ignored and wr_complete returns the error
// without posting anything, as rxe does. Inline data is copied when it is set,
// so its buffer may be reused at once; inline data comes only through
// wr_set_inline_data(_list) (IBV_SEND_INLINE in wr_flags is ignored).
#include <cerrno>
#include <cstring>

#include "verbs_compat/internal.h"

namespace isoroce::vc {
namespace {

constexpr uint64_t kRcSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                                IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                                IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;
constexpr uint64_t kUdSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr uint32_t kCompMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;

Qp& of(ibv_qp_ex* x) { return *outer_of(x, &Qp::qp_ex); }

// The staged request into the ring; errors stick to the batch.
void flush(Qp& q) {
  SendBatch& b = q.batch;
  if (!b.pending) return;
  b.pending = false;
  if (b.err) return;
  b.err = post_one_send(q, b.wr, &b.prod, &b.cons);
}

// Starts a request of `op`: the previous one goes into the ring first.
ibv_send_wr* begin(ibv_qp_ex* x, ibv_wr_opcode op) {
  Qp& q = of(x);
  SendBatch& b = q.batch;
  flush(q);
  if (b.err) return nullptr;
  b.wr = {};
  b.wr.wr_id = x->wr_id;
  b.wr.opcode = op;
  b.wr.send_flags = x->wr_flags & ~static_cast<unsigned>(IBV_SEND_INLINE);
  b.wr.sg_list = b.sges.data();
  b.wr.num_sge = 0;
  b.pending = true;
  return &b.wr;
}

// The request a setter fills in, or nullptr (the batch failed, or no request
// was started: that fails the batch).
ibv_send_wr* current(ibv_qp_ex* x) {
  SendBatch& b = of(x).batch;
  if (b.err) return nullptr;
  if (!b.pending) {
    log("qp_ex %u: a wr_set_* call with no work request started", x->qp_base.qp_num);
    b.err = EINVAL;
    return nullptr;
  }
  return &b.wr;
}

void fail_batch(ibv_qp_ex* x, const char* what) {
  log("qp_ex %u: %s", x->qp_base.qp_num, what);
  of(x).batch.err = EINVAL;
}

void wr_send(ibv_qp_ex* x) { begin(x, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* x, __be32 imm) {
  if (ibv_send_wr* w = begin(x, IBV_WR_SEND_WITH_IMM)) w->imm_data = imm;
}

void wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr) {
  if (ibv_send_wr* w = begin(x, IBV_WR_RDMA_WRITE)) w->wr.rdma = {remote_addr, rkey};
}

void wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  if (ibv_send_wr* w = begin(x, IBV_WR_RDMA_WRITE_WITH_IMM)) {
    w->wr.rdma = {remote_addr, rkey};
    w->imm_data = imm;
  }
}

void wr_rdma_read(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr) {
  if (ibv_send_wr* w = begin(x, IBV_WR_RDMA_READ)) w->wr.rdma = {remote_addr, rkey};
}

void wr_atomic_cmp_swp(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, uint64_t compare, uint64_t swap) {
  if (ibv_send_wr* w = begin(x, IBV_WR_ATOMIC_CMP_AND_SWP)) w->wr.atomic = {remote_addr, compare, swap, rkey};
}

void wr_atomic_fetch_add(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  if (ibv_send_wr* w = begin(x, IBV_WR_ATOMIC_FETCH_AND_ADD)) w->wr.atomic = {remote_addr, add, 0, rkey};
}

// Memory windows (IBTA 10.6.7; the engine checks the rules): a type 2
// window bound to `rkey` over bind_info, an rkey invalidated locally, a SEND
// that invalidates an rkey at the responder.
void wr_bind_mw(ibv_qp_ex* x, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  if (ibv_send_wr* w = begin(x, IBV_WR_BIND_MW)) {
    if (mw == nullptr || info == nullptr) return fail_batch(x, "wr_bind_mw: no window or no bind_info");
    w->bind_mw.mw = mw;
    w->bind_mw.rkey = rkey;
    w->bind_mw.bind_info = *info;
  }
}

void wr_local_inv(ibv_qp_ex* x, uint32_t invalidate_rkey) {
  if (ibv_send_wr* w = begin(x, IBV_WR_LOCAL_INV)) w->invalidate_rkey = invalidate_rkey;
}

void wr_send_inv(ibv_qp_ex* x, uint32_t invalidate_rkey) {
  if (ibv_send_wr* w = begin(x, IBV_WR_SEND_WITH_INV)) w->invalidate_rkey = invalidate_rkey;
}

void wr_set_ud_addr(ibv_qp_ex* x, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (ibv_send_wr* w = current(x)) w->wr.ud = {ah, remote_qpn, remote_qkey};
}

void wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_send_wr* w = current(x);
  if (w == nullptr) return;
  SendBatch& b = of(x).batch;
  b.sges[0] = {addr, length, lkey};
  w->sg_list = b.sges.data();
  w->num_sge = 1;
  w->send_flags &= ~static_cast<unsigned>(IBV_SEND_INLINE);
}

void wr_set_sge_list(ibv_qp_ex* x, size_t num_sge, const ibv_sge* sg_list) {
  ibv_send_wr* w = current(x);
  if (w == nullptr) return;
  SendBatch& b = of(x).batch;
  if (num_sge > b.sges.size()) return fail_batch(x, "wr_set_sge_list: more SGEs than max_send_sge");
  if (num_sge && sg_list == nullptr) return fail_batch(x, "wr_set_sge_list: no list");
  if (num_sge) std::memcpy(b.sges.data(), sg_list, num_sge * sizeof(ibv_sge));
  w->sg_list = b.sges.data();
  w->num_sge = static_cast<int>(num_sge);
  w->send_flags &= ~static_cast<unsigned>(IBV_SEND_INLINE);
}

void set_inline(ibv_qp_ex* x, size_t num_buf, const ibv_data_buf* bufs) {
  ibv_send_wr* w = current(x);
  if (w == nullptr) return;
  SendBatch& b = of(x).batch;
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) {
    if (bufs[i].length > b.inline_data.size() - total)
      return fail_batch(x, "wr_set_inline_data: more bytes than max_inline_data");
    if (bufs[i].length) std::memcpy(b.inline_data.data() + total, bufs[i].addr, bufs[i].length);
    total += bufs[i].length;
  }
  b.inline_sge = {reinterpret_cast<uintptr_t>(b.inline_data.data()), static_cast<uint32_t>(total), 0};
  w->sg_list = &b.inline_sge;
  w->num_sge = total ? 1 : 0;
  w->send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length) {
  const ibv_data_buf one{addr, length};
  set_inline(x, 1, &one);
}

void wr_set_inline_data_list(ibv_qp_ex* x, size_t num_buf, const ibv_data_buf* buf_list) {
  if (num_buf && buf_list == nullptr) {
    if (current(x)) fail_batch(x, "wr_set_inline_data_list: no list");
    return;
  }
  set_inline(x, num_buf, buf_list);
}

void wr_start(ibv_qp_ex* x) {
  Qp& q = of(x);
  q.sq_mu.lock();
  SendBatch& b = q.batch;
  Ring& ring = q.sq;
  // Own index relaxed; the daemon's acquire (pairs with its release after it consumed).
  b.prod = b.start = shm::producer(ring.base).load(std::memory_order_relaxed) & ring.mask;
  b.cons = shm::consumer(ring.base).load(std::memory_order_acquire) & ring.mask;
  b.err = 0;
  b.pending = false;
}

int wr_complete(ibv_qp_ex* x) {
  Qp& q = of(x);
  SendBatch& b = q.batch;
  flush(q);
  const int err = b.err;
  // One publish for the whole batch; pairs with the daemon's acquire load of
  // producer_index (ShmPump::pump_send). Nothing when the batch failed.
  if (err == 0 && b.prod != b.start) {
    stamp_posts(q.sq, b.start, b.prod);
    shm::producer(q.sq.base).store(b.prod, std::memory_order_release);
    ring_doorbell(*context_of(x->qp_base.context));
    prefetch_next_wqe(q.sq, b.prod);
  }
  if (err) debug("qp_ex %u: wr_complete: %s, nothing posted", x->qp_base.qp_num, std::strerror(err));
  b.err = 0;
  q.sq_mu.unlock();
  return err;
}

void wr_abort(ibv_qp_ex* x) {
  Qp& q = of(x);
  q.batch.pending = false;
  q.batch.err = 0;
  q.sq_mu.unlock();
}

}  // namespace

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (attr == nullptr) return errno = EINVAL, nullptr;
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr || attr->pd->context != context) {
    log("create_qp_ex: a PD of this context is required (IBV_QP_INIT_ATTR_PD)");
    return errno = EINVAL, nullptr;
  }
  if (attr->comp_mask & ~kCompMask) {
    log("create_qp_ex: comp_mask bits %#x are not supported (XRC, TSO, RSS)", attr->comp_mask & ~kCompMask);
    return errno = EOPNOTSUPP, nullptr;
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) {
    log("create_qp_ex: create_flags %#x are not supported", attr->create_flags);
    return errno = EOPNOTSUPP, nullptr;
  }
  const bool ops = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
  if (ops) {
    const uint64_t supported =
        attr->qp_type == IBV_QPT_RC ? kRcSendOps : (attr->qp_type == IBV_QPT_UD ? kUdSendOps : 0);
    if (attr->send_ops_flags & ~supported) {
      log("create_qp_ex: send_ops_flags %#llx are not supported on this QP type (tso, flush and "
          "atomic_write are not; UD has send and send_imm)",
          static_cast<unsigned long long>(attr->send_ops_flags & ~supported));
      return errno = EOPNOTSUPP, nullptr;
    }
  }
  // The head of ibv_qp_init_attr_ex is ibv_qp_init_attr.
  ibv_qp_init_attr init{};
  init.qp_context = attr->qp_context;
  init.send_cq = attr->send_cq;
  init.recv_cq = attr->recv_cq;
  init.srq = attr->srq;
  init.cap = attr->cap;
  init.qp_type = attr->qp_type;
  init.sq_sig_all = attr->sq_sig_all;
  Qp* q = create_qp(attr->pd, &init);
  if (q == nullptr) return nullptr;
  attr->cap = init.cap;
  q->ex = true;
  q->batch.sges.assign(q->cap.max_send_sge, ibv_sge{});
  q->batch.inline_data.assign(q->cap.max_inline_data, 0);
  ibv_qp_ex& x = q->qp_ex;
  x.comp_mask = 0;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  // As rxe: only the builders the application asked for.
  const uint64_t f = ops ? attr->send_ops_flags : 0;
  if (f & IBV_QP_EX_WITH_SEND) x.wr_send = wr_send;
  if (f & IBV_QP_EX_WITH_SEND_WITH_IMM) x.wr_send_imm = wr_send_imm;
  if (f & IBV_QP_EX_WITH_RDMA_WRITE) x.wr_rdma_write = wr_rdma_write;
  if (f & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) x.wr_rdma_write_imm = wr_rdma_write_imm;
  if (f & IBV_QP_EX_WITH_RDMA_READ) x.wr_rdma_read = wr_rdma_read;
  if (f & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  if (f & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  if (f & IBV_QP_EX_WITH_BIND_MW) x.wr_bind_mw = wr_bind_mw;
  if (f & IBV_QP_EX_WITH_LOCAL_INV) x.wr_local_inv = wr_local_inv;
  if (f & IBV_QP_EX_WITH_SEND_WITH_INV) x.wr_send_inv = wr_send_inv;
  return &q->qp;
}

}  // namespace isoroce::vc

using namespace isoroce::vc;

extern "C" {

// rdma-core: the ibv_qp_ex of a QP made by ibv_create_qp_ex, NULL for one
// made by ibv_create_qp.
ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  Qp* q = qp_of(qp);
  if (!q->ex) {
    debug("ibv_qp_to_qp_ex: QP %u was made by ibv_create_qp, not ibv_create_qp_ex", qp->qp_num);
    return nullptr;
  }
  return &q->qp_ex;
}

}  // extern "C"
