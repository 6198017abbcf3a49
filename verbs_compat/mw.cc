// Memory windows (IBTA 10.6.7): ibv_alloc_mw / ibv_dealloc_mw (daemon ops
// alloc_mw, dealloc_mw) and ibv_bind_mw for type 1, which posts a BIND_MW
// work request with the window's next key, as rdma-core's rxe provider does;
// type 2 windows are bound by IBV_WR_BIND_MW, invalidated by IBV_WR_LOCAL_INV
// or a peer's IBV_WR_SEND_WITH_INV (datapath.cc). The engine checks the rules.
#include <infiniband/verbs.h>

#include <cerrno>

#include "verbs_compat/internal.h"

namespace isoroce::vc {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  json r = context_of(pd->context)->call({{"op", "alloc_mw"}, {"pd", pd->handle}, {"type", static_cast<int>(type)}});
  if (!r.value("ok", false)) return errno = reply_errno(r), nullptr;
  auto* mw = new ibv_mw{};
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = r["rkey"].get<uint32_t>();
  mw->handle = mw->rkey >> 8;
  mw->type = type;
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  json r = context_of(mw->context)->call({{"op", "dealloc_mw"}, {"rkey", mw->rkey}});
  if (!r.value("ok", false)) return reply_errno(r);
  delete mw;
  return 0;
}

// ibv_bind_mw(3): a type 1 window, bound by a BIND_MW work request on qp; on
// success mw->rkey is the key the bind gives it (its completion says whether
// the bind itself was accepted).
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* b) {
  if (mw->type != IBV_MW_TYPE_1 || mw->context != qp->context) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = b->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = static_cast<unsigned int>(b->send_flags);
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = b->bind_info;
  ibv_send_wr* bad = nullptr;
  const int rc = post_send(qp, &wr, &bad);
  if (rc == 0) mw->rkey = wr.bind_mw.rkey;
  return rc;
}

void fill_mw_ops(ibv_context& c) {
  c.ops.alloc_mw = alloc_mw;
  c.ops.dealloc_mw = dealloc_mw;
  c.ops.bind_mw = bind_mw;
}

}  // namespace isoroce::vc
