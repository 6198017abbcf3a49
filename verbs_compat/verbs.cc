// The control verbs for PDs, CQs, completion channels, SRQs and QPs: each is
// one request on the context's connection (docs/control-protocol.md); CQs,
// QPs and SRQs ask for their queues as shared memory ("shm": true) and map
// them. MRs are in mr.cc, AHs in ah.cc, the extended CQ and QP in cq_ex.cc
// and qp_ex.cc.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include "ctrl/wire_json.h"
#include "transport/verbs/mtu.h"
#include "verbs_compat/internal.h"

namespace isoroce::vc {

bool map_ring(int fd, const json& geo, bool cq, Ring* r) {
  if (!geo.is_object() || !geo.contains("log2_entries") || !geo.contains("log2_elem")) {
    close(fd);
    return false;
  }
  r->log2_entries = geo["log2_entries"].get<uint32_t>();
  r->log2_elem = geo["log2_elem"].get<uint32_t>();
  if (r->log2_entries > 24 || r->log2_elem < 6 || r->log2_elem > 16) {
    close(fd);
    return false;
  }
  r->mask = (1u << r->log2_entries) - 1;
  r->bytes = shm::queue_bytes(r->log2_entries, r->log2_elem, cq);
  void* p = mmap(nullptr, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    log("mapping a queue of %zu bytes: %s", r->bytes, std::strerror(errno));
    return false;
  }
  r->base = p;
  return true;
}

void unmap_ring(Ring* r) {
  if (r->base) munmap(r->base, r->bytes);
  r->base = nullptr;
}

namespace {

void close_all(std::vector<int>& fds) {
  for (int fd : fds) close(fd);
  fds.clear();
}

// The QP attributes the mask names, as the protocol spells them.
bool qp_attr_json(const ibv_qp_attr& a, int mask, json* out) {
  const json all = ctrl::qp_attr_to_json(a);
  struct Key {
    int bit;
    const char* key;
  };
  static constexpr Key kKeys[] = {
      {IBV_QP_STATE, "qp_state"},          {IBV_QP_ACCESS_FLAGS, "qp_access_flags"},
      {IBV_QP_PKEY_INDEX, "pkey_index"},   {IBV_QP_PORT, "port_num"},
      {IBV_QP_QKEY, "qkey"},               {IBV_QP_AV, "ah_attr"},
      {IBV_QP_PATH_MTU, "path_mtu"},       {IBV_QP_TIMEOUT, "timeout"},
      {IBV_QP_RETRY_CNT, "retry_cnt"},     {IBV_QP_RNR_RETRY, "rnr_retry"},
      {IBV_QP_RQ_PSN, "rq_psn"},           {IBV_QP_MAX_QP_RD_ATOMIC, "max_rd_atomic"},
      {IBV_QP_MIN_RNR_TIMER, "min_rnr_timer"}, {IBV_QP_SQ_PSN, "sq_psn"},
      {IBV_QP_MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic"}, {IBV_QP_DEST_QPN, "dest_qp_num"},
  };
  int known = IBV_QP_CUR_STATE;
  *out = json::object();
  for (const Key& k : kKeys) {
    known |= k.bit;
    if (mask & k.bit) (*out)[k.key] = all[k.key];
  }
  if (mask & IBV_QP_CUR_STATE) (*out)["cur_qp_state"] = ctrl::state_name(a.cur_qp_state);
  if (mask & ~known) {
    log("modify_qp: attribute mask bits %#x are not supported", mask & ~known);
    return false;
  }
  return true;
}

}  // namespace

Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > kMaxCqe || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    log("create_cq: cqe %d (1..%u), comp_vector %d", cqe, kMaxCqe, comp_vector);
    return errno = EINVAL, nullptr;
  }
  Context* ctx = context_of(context);
  std::vector<int> fds;
  json r = ctx->call({{"op", "create_cq"}, {"cqe", cqe}, {"shm", true}, {"events", channel != nullptr}}, {}, &fds);
  if (!r.value("ok", false)) return close_all(fds), errno = reply_errno(r), nullptr;
  const uint32_t handle = r["cq"].get<uint32_t>();
  auto fail = [&](int err, const char* what) -> Cq* {
    log("create_cq: %s", what);
    close_all(fds);
    ctx->call({{"op", "destroy_cq"}, {"cq", handle}});
    return errno = err, nullptr;
  };
  if (fds.size() != (channel ? 2u : 1u)) return fail(EPROTO, "the daemon sent no queue (or no eventfd)");
  auto* cq = new Cq;
  const int ring_fd = fds[0];
  cq->evfd = channel ? fds[1] : -1;
  fds.clear();
  if (!map_ring(ring_fd, r, true, &cq->ring)) {
    if (cq->evfd >= 0) close(cq->evfd);
    delete cq;
    return fail(ENOMEM, "mapping the CQ ring");
  }
  cq->notify = shm::cq_notify(cq->ring.base, cq->ring.log2_entries, cq->ring.log2_elem);
  if (channel) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = cq;
    if (epoll_ctl(channel->fd, EPOLL_CTL_ADD, cq->evfd, &ev) != 0) {
      close(cq->evfd);
      unmap_ring(&cq->ring);
      delete cq;
      return fail(errno, "adding the CQ to its channel");
    }
    ++channel->refcnt;
    Channel* ch = outer_of(channel, &Channel::ch);
    std::lock_guard lock(ch->mu);
    ch->cqs.push_back(cq);
  }
  ibv_cq& c = cq->cq;
  c.context = context;
  c.channel = channel;
  c.cq_context = cq_context;
  c.handle = handle;
  c.cqe = static_cast<int>(cq->ring.mask);
  pthread_mutex_init(&c.mutex, nullptr);
  pthread_cond_init(&c.cond, nullptr);
  c.comp_events_completed = 0;
  c.async_events_completed = 0;
  track(*context_of(context), cq);
  return cq;
}

Qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UD) {
    log("create_qp: QP type %d is not supported (RC and UD are)", init->qp_type);
    return errno = EOPNOTSUPP, nullptr;
  }
  ibv_qp_cap cap = init->cap;
  if (!init->send_cq || !init->recv_cq || cap.max_send_wr > kMaxQpWr || cap.max_send_sge > kMaxSge ||
      cap.max_recv_sge > kMaxSge || cap.max_inline_data > kMaxInline ||
      (!init->srq && cap.max_recv_wr > kMaxQpWr)) {
    log("create_qp: CQs missing or capabilities beyond the device's (wr %u, sge %u, inline %u)", kMaxQpWr, kMaxSge,
        kMaxInline);
    return errno = EINVAL, nullptr;
  }
  cap.max_send_wr = std::max(cap.max_send_wr, 1u);
  cap.max_send_sge = std::max(cap.max_send_sge, 1u);
  if (init->srq) cap.max_recv_wr = 0, cap.max_recv_sge = 0;
  else cap.max_recv_wr = std::max(cap.max_recv_wr, 1u), cap.max_recv_sge = std::max(cap.max_recv_sge, 1u);
  // As rxe: inline data may use the whole element the SGEs need anyway.
  const size_t elem = size_t{1} << shm::log2_ceil(shm::send_wqe_bytes(cap.max_send_sge, cap.max_inline_data));
  cap.max_inline_data = std::max<uint32_t>(cap.max_inline_data,
                                           std::min<size_t>(elem - sizeof(shm::SendWqe), kMaxInline));
  Context* ctx = context_of(pd->context);
  json req = {{"op", "create_qp"},
              {"pd", pd->handle},
              {"send_cq", init->send_cq->handle},
              {"recv_cq", init->recv_cq->handle},
              {"type", init->qp_type == IBV_QPT_RC ? "rc" : "ud"},
              {"max_send_wr", cap.max_send_wr},
              {"max_recv_wr", cap.max_recv_wr},
              {"max_send_sge", cap.max_send_sge},
              {"max_recv_sge", cap.max_recv_sge},
              {"max_inline_data", cap.max_inline_data},
              {"sq_sig_all", init->sq_sig_all != 0},
              {"shm", true}};
  if (init->srq) req["srq"] = init->srq->handle;
  if (const char* cls = std::getenv("ISOROCE_FLOW_CLASS"); cls && *cls) req["class"] = cls;
  if (const char* tenant = std::getenv("ISOROCE_TENANT"); tenant && *tenant) req["tenant"] = tenant;
  std::vector<int> fds;
  json r = ctx->call(req, {}, &fds);
  if (!r.value("ok", false)) return close_all(fds), errno = reply_errno(r), nullptr;
  const uint32_t qpn = r["qpn"].get<uint32_t>();
  auto* q = new Qp;
  q->has_rq = init->srq == nullptr;
  bool ok = fds.size() == (q->has_rq ? 2u : 1u);
  if (!ok) close_all(fds);
  if (ok) ok = map_ring(fds[0], r.value("sq", json()), false, &q->sq);
  else fds.clear();
  if (ok && q->has_rq) ok = map_ring(fds[1], r.value("rq", json()), false, &q->rq);
  else if (q->has_rq && fds.size() == 2) close(fds[1]);
  if (!ok) {
    unmap_ring(&q->sq);
    unmap_ring(&q->rq);
    delete q;
    log("create_qp: no usable queues from the daemon");
    ctx->call({{"op", "destroy_qp"}, {"qpn", qpn}});
    return errno = EPROTO, nullptr;
  }
  q->cap = cap;
  q->sq_sig_all = init->sq_sig_all != 0;
  q->mtu_bytes = verbs::mtu_bytes(ctx->dev->active_mtu);
  ibv_qp& qp = q->qp;
  qp.context = pd->context;
  qp.qp_context = init->qp_context;
  qp.pd = pd;
  qp.send_cq = init->send_cq;
  qp.recv_cq = init->recv_cq;
  qp.srq = init->srq;
  qp.handle = qpn;
  qp.qp_num = qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = init->qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  qp.events_completed = 0;
  init->cap = cap;
  track(*ctx, q);
  debug("create_qp %u: sq 2^%u x %u B, rq 2^%u, inline %u", qpn, q->sq.log2_entries, 1u << q->sq.log2_elem,
        q->rq.log2_entries, cap.max_inline_data);
  return q;
}

}  // namespace isoroce::vc

using namespace isoroce;
using namespace isoroce::vc;

extern "C" {

// ---- PD -------------------------------------------------------------------

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  json r = context_of(context)->call({{"op", "alloc_pd"}});
  if (!r.value("ok", false)) return errno = reply_errno(r), nullptr;
  auto* p = new Pd;
  p->pd.context = context;
  p->pd.handle = r["pd"].get<uint32_t>();
  return &p->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  json r = context_of(pd->context)->call({{"op", "dealloc_pd"}, {"pd", pd->handle}});
  if (!r.value("ok", false)) return reply_errno(r);
  delete pd_of(pd);
  return 0;
}

// ---- completion channels and CQs --------------------------------------------

// The channel's fd is an epoll fd over its CQs' eventfds: poll/epoll on it
// works, and ibv_get_cq_event reads the CQ that woke.
ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return nullptr;
  auto* ch = new Channel;
  ch->ch.context = context;
  ch->ch.fd = ep;
  ch->ch.refcnt = 0;
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel->refcnt) return EBUSY;
  close(channel->fd);
  Channel* ch = outer_of(channel, &Channel::ch);
  if (ch->recovered) debug("channel: %" PRIu64 " wakeup(s) found by polling", ch->recovered);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  Cq* cq = isoroce::vc::create_cq(context, cqe, cq_context, channel, comp_vector);
  return cq ? &cq->cq : nullptr;
}

// As rdma-core's rxe provider: under the CQ's lock (no poll meanwhile), the
// daemon moves the unconsumed completions into a new ring and swaps it into its
// pump; then the new ring replaces the old mapping here.
int ibv_resize_cq(ibv_cq* ibcq, int cqe) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > kMaxCqe) {
    log("resize_cq: cqe %d (1..%u)", cqe, kMaxCqe);
    return EINVAL;
  }
  Cq* cq = cq_of(ibcq);
  Context* ctx = context_of(ibcq->context);
  std::lock_guard lock(cq->mu);
  std::vector<int> fds;
  json r = ctx->call({{"op", "resize_cq"}, {"cq", ibcq->handle}, {"cqe", cqe}}, {}, &fds);
  if (!r.value("ok", false)) return close_all(fds), reply_errno(r);
  // From here the daemon writes the new ring only: without it the CQ is lost.
  Ring ring;
  if (fds.size() != 1) {
    close_all(fds);
    log("resize_cq: CQ %u: the daemon sent no queue; the CQ is unusable", ibcq->handle);
    return EPROTO;
  }
  if (!map_ring(fds[0], r, true, &ring)) {
    log("resize_cq: CQ %u: mapping its new queue failed; the CQ is unusable", ibcq->handle);
    return ENOMEM;
  }
  unmap_ring(&cq->ring);
  cq->ring = ring;
  cq->notify = shm::cq_notify(ring.base, ring.log2_entries, ring.log2_elem);
  cq->empty_polls = 0;
  ibcq->cqe = static_cast<int>(ring.mask);
  debug("resize_cq %u: %d -> 2^%u ring", ibcq->handle, cqe, ring.log2_entries);
  return 0;
}

int ibv_destroy_cq(ibv_cq* ibcq) {
  Cq* cq = cq_of(ibcq);
  json r = context_of(ibcq->context)->call({{"op", "destroy_cq"}, {"cq", ibcq->handle}});
  if (!r.value("ok", false)) return reply_errno(r);
  untrack(*context_of(ibcq->context), cq);
  if (ibcq->channel) {
    epoll_ctl(ibcq->channel->fd, EPOLL_CTL_DEL, cq->evfd, nullptr);
    --ibcq->channel->refcnt;
    Channel* ch = outer_of(ibcq->channel, &Channel::ch);
    std::lock_guard lock(ch->mu);
    std::erase(ch->cqs, cq);
  }
  if (cq->evfd >= 0) close(cq->evfd);
  unmap_ring(&cq->ring);
  pthread_mutex_destroy(&ibcq->mutex);
  pthread_cond_destroy(&ibcq->cond);
  delete cq;
  return 0;
}

// Safety net: blocked, the channel also looks every 10 ms for an armed CQ
// whose ring holds completions — a wakeup the daemon missed (its publish of
// producer_index and its look at CqNotify::armed need a full fence between
// them, which release/acquire is not) then costs 10 ms instead of a hang.
int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  Channel* ch = outer_of(channel, &Channel::ch);
  const bool nonblock = (fcntl(channel->fd, F_GETFL) & O_NONBLOCK) != 0;
  for (;;) {
    epoll_event ev{};
    const int n = epoll_wait(channel->fd, &ev, 1, nonblock ? 0 : 10);
    if (n < 0) return -1;
    if (n == 0) {
      Cq* found = nullptr;
      {
        std::lock_guard lock(ch->mu);
        for (Cq* c : ch->cqs) {
          // The ring may be being replaced (ibv_resize_cq holds mu): next round.
          std::unique_lock cq_lock(c->mu, std::try_to_lock);
          if (!cq_lock.owns_lock()) continue;
          const uint32_t prod = shm::producer(c->ring.base).load(std::memory_order_acquire) & c->ring.mask;
          const uint32_t cons = shm::consumer(c->ring.base).load(std::memory_order_acquire) & c->ring.mask;
          if (prod != cons && c->notify->armed.load(std::memory_order_acquire) &&
              c->notify->armed.exchange(0, std::memory_order_acq_rel)) {
            found = c;
            ++ch->recovered;
            break;
          }
        }
      }
      if (found) {
        debug("get_cq_event: CQ %u had completions but no wakeup", found->cq.handle);
        *cq = &found->cq;
        *cq_context = found->cq.cq_context;
        return 0;
      }
      if (nonblock) return errno = EAGAIN, -1;
      continue;
    }
    Cq* c = static_cast<Cq*>(ev.data.ptr);
    uint64_t v = 0;
    if (read(c->evfd, &v, sizeof v) != sizeof v) {
      if (errno == EAGAIN || errno == EINTR) continue;  // another thread took it
      return -1;
    }
    *cq = &c->cq;
    *cq_context = c->cq.cq_context;
    return 0;
  }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

// ---- SRQ ------------------------------------------------------------------

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  const ibv_srq_attr& a = init->attr;
  if (a.max_wr < 1 || a.max_wr > kMaxQpWr || a.max_sge < 1 || a.max_sge > kMaxSrqSge) {
    log("create_srq: max_wr %u (1..%u), max_sge %u (1..%u)", a.max_wr, kMaxQpWr, a.max_sge, kMaxSrqSge);
    return errno = EINVAL, nullptr;
  }
  Context* ctx = context_of(pd->context);
  std::vector<int> fds;
  json r = ctx->call({{"op", "create_srq"}, {"pd", pd->handle}, {"max_wr", a.max_wr}, {"max_sge", a.max_sge},
                      {"srq_limit", a.srq_limit}, {"shm", true}},
                     {}, &fds);
  if (!r.value("ok", false)) return close_all(fds), errno = reply_errno(r), nullptr;
  const uint32_t handle = r["srq"].get<uint32_t>();
  auto* s = new Srq;
  if (fds.size() != 1 || !map_ring(fds[0], r.value("rq", json()), false, &s->ring)) {
    if (fds.size() != 1) close_all(fds);
    delete s;
    log("create_srq: no usable queue from the daemon");
    ctx->call({{"op", "destroy_srq"}, {"srq", handle}});
    return errno = EPROTO, nullptr;
  }
  s->attr = a;
  ibv_srq& q = s->srq;
  q.context = pd->context;
  q.srq_context = init->srq_context;
  q.pd = pd;
  q.handle = handle;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  q.events_completed = 0;
  track(*context_of(pd->context), s);
  return &q;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  json req = {{"op", "modify_srq"}, {"srq", srq->handle}};
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) {
    // The ring was sized at creation: growing it would need a new queue.
    if (attr->max_wr > srq_of(srq)->ring.mask) {
      log("modify_srq: max_wr %u beyond the queue's %u", attr->max_wr, srq_of(srq)->ring.mask);
      return EINVAL;
    }
    req["max_wr"] = attr->max_wr;
  }
  if (mask & IBV_SRQ_LIMIT) req["srq_limit"] = attr->srq_limit;
  json r = context_of(srq->context)->call(req);
  if (!r.value("ok", false)) return reply_errno(r);
  if (mask & IBV_SRQ_MAX_WR) srq_of(srq)->attr.max_wr = attr->max_wr;
  if (mask & IBV_SRQ_LIMIT) srq_of(srq)->attr.srq_limit = attr->srq_limit;
  return 0;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  *attr = srq_of(srq)->attr;
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  json r = context_of(srq->context)->call({{"op", "destroy_srq"}, {"srq", srq->handle}});
  if (!r.value("ok", false)) return reply_errno(r);
  Srq* s = srq_of(srq);
  untrack(*context_of(srq->context), s);
  unmap_ring(&s->ring);
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}

// ---- QP -------------------------------------------------------------------

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  Qp* q = isoroce::vc::create_qp(pd, init);
  return q ? &q->qp : nullptr;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (mask & IBV_QP_AV) {
    if (!attr->ah_attr.is_global) {
      log("modify_qp: RoCE needs a GRH in the address vector (ah_attr.is_global, dgid)");
      return EINVAL;
    }
    if (attr->ah_attr.grh.sgid_index != 0) {
      log("modify_qp: sgid_index %u (the port has GID 0 only)", attr->ah_attr.grh.sgid_index);
      return EINVAL;
    }
  }
  if ((mask & IBV_QP_PORT) && attr->port_num != 1) return EINVAL;
  ibv_qp_attr clamped = *attr;
  const ibv_mtu active = context_of(qp->context)->dev->active_mtu;
  if ((mask & IBV_QP_PATH_MTU) && clamped.path_mtu > active) {
    // As rxe: the path MTU is at most the port's active MTU.
    debug("modify_qp %u: path MTU %d clamped to the port's %d", qp->qp_num, 128 << clamped.path_mtu, 128 << active);
    clamped.path_mtu = active;
  }
  json a;
  if (!qp_attr_json(clamped, mask, &a)) return EINVAL;
  json r = context_of(qp->context)->call({{"op", "modify_qp"}, {"qpn", qp->qp_num}, {"attr", a}});
  if (!r.value("ok", false)) return reply_errno(r);
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init) {
  (void)attr_mask;  // everything is filled
  json r = context_of(qp->context)->call({{"op", "query_qp"}, {"qpn", qp->qp_num}});
  if (!r.value("ok", false)) return reply_errno(r);
  json a = r.value("attr", json::object());
  if (!a.is_object()) return EIO;
  a.erase("cap");
  if (a.contains("ah_attr") && a["ah_attr"].value("dgid", std::string()) == "::") a.erase("ah_attr");
  if (a.contains("path_mtu") && a["path_mtu"] == 0) a.erase("path_mtu");
  std::memset(attr, 0, sizeof *attr);
  uint32_t mask = 0;
  std::string err;
  if (!ctrl::qp_attr_from_json(a, attr, &mask, &err)) {
    log("query_qp: %s", err.c_str());
    return EIO;
  }
  Qp* q = qp_of(qp);
  attr->cur_qp_state = attr->qp_state;
  attr->cap = q->cap;
  attr->port_num = 1;
  attr->ah_attr.port_num = 1;
  qp->state = attr->qp_state;
  if (init) {
    std::memset(init, 0, sizeof *init);
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->srq = qp->srq;
    init->cap = q->cap;
    init->qp_type = qp->qp_type;
    init->sq_sig_all = q->sq_sig_all;
  }
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  json r = context_of(qp->context)->call({{"op", "destroy_qp"}, {"qpn", qp->qp_num}});
  if (!r.value("ok", false)) return reply_errno(r);
  Qp* q = qp_of(qp);
  untrack(*context_of(qp->context), q);
  unmap_ring(&q->sq);
  unmap_ring(&q->rq);
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

// Whether the bytes of one message land in memory in order, so that a reader
// may poll the last byte instead of the CQ (ibv_query_qp_data_in_order(3)).
// isoroce's responder places packets in PSN order, but each with memcpy(),
// which may store a packet's bytes in any order: not guaranteed, 0 (rxe,
// without the provider hook, answers 0 too). flags must be 0.
int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode, uint32_t flags) {
  if (qp == nullptr || flags != 0) return 0;
  return 0;
}

int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
  log("ibv_attach_mcast: multicast is not supported");
  return EOPNOTSUPP;
}
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }

}  // extern "C"
