// The extended CQ (ibv_create_cq_ex through verbs_context::create_cq_ex):
// the same Cq and ring as ibv_create_cq (ibv_cq is the head of ibv_cq_ex, so
// ibv_cq_ex_to_cq gives a CQ that ibv_poll_cq, ibv_req_notify_cq, channels
// and ibv_destroy_cq take), read with start_poll / next_poll / end_poll and
// the read_* accessors instead of ibv_wc arrays (as rdma-core's rxe does it).
//
// start_poll takes the CQ's lock and copies the completion at the consumer
// index; next_poll publishes the consumer index up to the current one (the
// daemon never writes the slot it names) and copies the next; end_poll
// publishes past the current one and unlocks. ENOENT from start_poll (nothing
// there) releases the lock itself; from next_poll the batch stays open until
// end_poll. Polling is loads and stores, no system call.
#include <cerrno>
#include <cstring>

#include "verbs_compat/internal.h"

namespace isoroce::vc {
namespace {

// What the CQE ring carries (ib_uverbs_wc). No completion timestamps: the
// daemon does not stamp completions, and a read_completion_ts that is not
// the completion's time would be a lie.
constexpr uint64_t kSupportedWcFlags = IBV_WC_STANDARD_FLAGS;

Cq& of(ibv_cq_ex* c) { return *outer_of(c, &Cq::cq_ex); }

void load_current(Cq& cq, uint32_t index) {
  std::memcpy(&cq.ex_wc, cq.ring.at(index), sizeof cq.ex_wc);
  cq.cq_ex.status = static_cast<ibv_wc_status>(cq.ex_wc.status);
  cq.cq_ex.wr_id = cq.ex_wc.wr_id;
}

int start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  Cq& cq = of(c);
  cq.mu.lock();
  Ring& ring = cq.ring;
  const uint32_t cons = shm::consumer(ring.base).load(std::memory_order_relaxed) & ring.mask;
  // Pairs with the daemon's release store after it wrote the completions.
  const uint32_t prod = shm::producer(ring.base).load(std::memory_order_acquire) & ring.mask;
  if (cons == prod) {
    const Backoff b = note_empty_poll(cq);
    cq.mu.unlock();
    back_off(b);
    return ENOENT;
  }
  cq.empty_polls = 0;
  load_current(cq, cons);
  cq.ex_next = (cons + 1) & ring.mask;
  return 0;
}

int next_poll(ibv_cq_ex* c) {
  Cq& cq = of(c);
  Ring& ring = cq.ring;
  const uint32_t prod = shm::producer(ring.base).load(std::memory_order_acquire) & ring.mask;
  if (cq.ex_next == prod) return ENOENT;
  const uint32_t cur = cq.ex_next;
  // The completions before this one are read: their slots go back to the
  // daemon (pairs with its acquire load when it checks for room).
  shm::consumer(ring.base).store(cur, std::memory_order_release);
  load_current(cq, cur);
  cq.ex_next = (cur + 1) & ring.mask;
  return 0;
}

void end_poll(ibv_cq_ex* c) {
  Cq& cq = of(c);
  shm::consumer(cq.ring.base).store(cq.ex_next, std::memory_order_release);
  cq.mu.unlock();
}

ibv_wc_opcode read_opcode(ibv_cq_ex* c) { return static_cast<ibv_wc_opcode>(of(c).ex_wc.opcode); }
uint32_t read_vendor_err(ibv_cq_ex* c) { return of(c).ex_wc.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* c) { return of(c).ex_wc.byte_len; }
__be32 read_imm_data(ibv_cq_ex* c) { return of(c).ex_wc.ex.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* c) { return of(c).ex_wc.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* c) { return of(c).ex_wc.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* c) { return of(c).ex_wc.wc_flags; }
uint32_t read_slid(ibv_cq_ex* c) { return of(c).ex_wc.slid; }
uint8_t read_sl(ibv_cq_ex* c) { return of(c).ex_wc.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* c) { return of(c).ex_wc.dlid_path_bits; }

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (attr == nullptr) return errno = EINVAL, nullptr;
  if (attr->comp_mask & ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
    log("create_cq_ex: unknown comp_mask bits %#x", attr->comp_mask);
    return errno = EINVAL, nullptr;
  }
  if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
    log("create_cq_ex: parent domains (IBV_CQ_INIT_ATTR_MASK_PD) are not supported");
    return errno = EOPNOTSUPP, nullptr;
  }
  // One thread or many: the CQ locks either way.
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) {
    log("create_cq_ex: flags %#x are not supported (IBV_CREATE_CQ_ATTR_SINGLE_THREADED is)", attr->flags);
    return errno = EOPNOTSUPP, nullptr;
  }
  if (attr->wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)) {
    log("create_cq_ex: completion timestamps are not supported (the daemon does not stamp completions; "
        "ibv_query_device_ex reports completion_timestamp_mask 0)");
    return errno = EOPNOTSUPP, nullptr;
  }
  if (attr->wc_flags & ~kSupportedWcFlags) {
    log("create_cq_ex: wc_flags %#llx are not supported (byte_len, imm, qp_num, src_qp, slid, sl, dlid_path_bits are)",
        static_cast<unsigned long long>(attr->wc_flags & ~kSupportedWcFlags));
    return errno = EOPNOTSUPP, nullptr;
  }
  if (attr->cqe > static_cast<uint32_t>(INT32_MAX)) {
    log("create_cq_ex: cqe %u", attr->cqe);
    return errno = EINVAL, nullptr;
  }
  Cq* cq = create_cq(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                     static_cast<int>(attr->comp_vector));
  if (cq == nullptr) return nullptr;
  ibv_cq_ex& x = cq->cq_ex;
  x.comp_mask = 0;
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_wc_flags = read_wc_flags;
  // As rxe: only the accessors the application asked for.
  if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN) x.read_byte_len = read_byte_len;
  if (attr->wc_flags & IBV_WC_EX_WITH_IMM) x.read_imm_data = read_imm_data;
  if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM) x.read_qp_num = read_qp_num;
  if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP) x.read_src_qp = read_src_qp;
  if (attr->wc_flags & IBV_WC_EX_WITH_SLID) x.read_slid = read_slid;
  if (attr->wc_flags & IBV_WC_EX_WITH_SL) x.read_sl = read_sl;
  if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) x.read_dlid_path_bits = read_dlid_path_bits;
  return &x;
}

}  // namespace isoroce::vc
