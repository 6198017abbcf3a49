// QPs and SRQs made through rdma_cm (on libisoroce-verbs' contexts), and the
// attributes of each state change (rdma_init_qp_attr), computed here from
// what the connection's REQ/REP carried, as the kernel's rdma_cm computes them.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "verbs_compat/rdmacm/internal.h"

namespace isoroce::rcm {

int init_qp_attr(Id& i, ibv_qp_attr* a, int* mask) {
  const ibv_qp_state want = a->qp_state;
  std::memset(a, 0, sizeof *a);
  a->qp_state = want;
  switch (want) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      if (i.id.qp_type == IBV_QPT_UD) {
        a->qkey = RDMA_UDP_QKEY;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      } else {
        a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      if (i.id.qp_type == IBV_QPT_UD) {
        *mask = IBV_QP_STATE;
        return 0;
      }
      if (!i.have_remote) return fail(EINVAL);
      a->path_mtu = i.mtu;
      a->dest_qp_num = i.remote_qpn;
      // Each side receives from the PSN it announced in its own REQ or REP and
      // sends from the one its peer announced: what Linux's rdma_cm and a
      // hardware RNIC do on the wire (linlinw5_rping.pcap: the active side's
      // first SEND carries the REP's starting PSN, the passive side's first
      // READ the REQ's).
      a->rq_psn = i.psn;
      a->max_dest_rd_atomic = i.responder_resources;
      a->min_rnr_timer = i.min_rnr_timer;
      a->ah_attr.is_global = 1;
      a->ah_attr.port_num = 1;
      a->ah_attr.grh.dgid = i.id.route.addr.addr.ibaddr.dgid;
      a->ah_attr.grh.sgid_index = 0;
      a->ah_attr.grh.hop_limit = 64;
      a->ah_attr.grh.traffic_class = i.tos;
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = i.id.qp_type == IBV_QPT_UD ? 0 : i.remote_psn;
      if (i.id.qp_type == IBV_QPT_UD) {
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        return 0;
      }
      a->timeout = i.ack_timeout;
      a->retry_cnt = i.retry_count;
      a->rnr_retry = i.rnr_retry_count;
      a->max_rd_atomic = i.initiator_depth;
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
              IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    case IBV_QPS_ERR:
    case IBV_QPS_RESET:
    case IBV_QPS_SQD:
      *mask = IBV_QP_STATE;
      return 0;
    default:
      return fail(EINVAL);
  }
}

int modify_qp_rtr(Id& i, uint8_t resp_res) {
  if (!i.id.qp) return 0;
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = IBV_QPS_INIT;
  if (init_qp_attr(i, &a, &mask) != 0) return -1;
  if (int rc = ibv_modify_qp(i.id.qp, &a, mask)) return fail(rc);
  a.qp_state = IBV_QPS_RTR;
  if (init_qp_attr(i, &a, &mask) != 0) return -1;
  if (resp_res != RDMA_MAX_RESP_RES) a.max_dest_rd_atomic = resp_res;
  if (int rc = ibv_modify_qp(i.id.qp, &a, mask)) return fail(rc);
  return 0;
}

int modify_qp_rts(Id& i, uint8_t init_depth) {
  if (!i.id.qp) return 0;
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = IBV_QPS_RTS;
  if (init_qp_attr(i, &a, &mask) != 0) return -1;
  if (init_depth != RDMA_MAX_INIT_DEPTH) a.max_rd_atomic = init_depth;
  if (int rc = ibv_modify_qp(i.id.qp, &a, mask)) return fail(rc);
  return 0;
}

int modify_qp_err(Id& i) {
  if (!i.id.qp) return 0;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(i.id.qp, &a, IBV_QP_STATE)) return fail(rc);
  return 0;
}

namespace {

void destroy_cqs(rdma_cm_id* id) {
  if (id->recv_cq) {
    ibv_destroy_cq(id->recv_cq);
    if (id->send_cq && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
    id->send_cq = nullptr;
    id->recv_cq = nullptr;
  }
  if (id->recv_cq_channel) {
    ibv_destroy_comp_channel(id->recv_cq_channel);
    if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
      ibv_destroy_comp_channel(id->send_cq_channel);
    id->send_cq_channel = nullptr;
    id->recv_cq_channel = nullptr;
  }
}

int create_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel) goto err;
    id->recv_cq = ibv_create_cq(id->verbs, static_cast<int>(recv_size), id, id->recv_cq_channel, 0);
    if (!id->recv_cq) goto err;
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel) goto err;
    id->send_cq = ibv_create_cq(id->verbs, static_cast<int>(send_size), id, id->send_cq_channel, 0);
    if (!id->send_cq) goto err;
  }
  return 0;
err:
  destroy_cqs(id);
  return -1;
}

}  // namespace

}  // namespace isoroce::rcm

using namespace isoroce::rcm;

extern "C" {

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (id == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr) return fail(EINVAL);
  return init_qp_attr(*id_of(id), qp_attr, qp_attr_mask);
}

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr || id->qp) return fail(EINVAL);
  if (id->verbs == nullptr) {
    log("rdma_create_qp: the id has no device yet (bind or resolve an address first)");
    return fail(EINVAL);
  }
  Id* i = id_of(id);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd;
  } else if (id->verbs != attr->pd->context) {
    return fail(EINVAL);
  }
  if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
      (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
    return fail(EINVAL);
  if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UD) {
    log("rdma_create_qp: QP type %d is not supported (RC and UD are)", attr->qp_type);
    return fail(EOPNOTSUPP);
  }
  if (create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
                 attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr) != 0)
    return -1;
  if (!attr->send_cq) attr->send_cq = id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = id->recv_cq;
  if (id->srq && !attr->srq) attr->srq = id->srq;
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (qp == nullptr) {
    destroy_cqs(id);
    return -1;
  }
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = IBV_QPS_INIT;
  int ret = init_qp_attr(*i, &a, &mask);
  if (ret == 0) ret = ibv_modify_qp(qp, &a, mask);
  if (ret == 0 && id->qp_type == IBV_QPT_UD) {
    a.qp_state = IBV_QPS_RTR;
    ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
    if (ret == 0) {
      a.qp_state = IBV_QPS_RTS;
      a.sq_psn = 0;
      ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
  }
  if (ret != 0) {
    const int err = ret > 0 ? ret : errno;
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    return fail(err);
  }
  id->pd = qp->pd;
  id->qp = qp;
  return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || qp_init_attr == nullptr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, qp_init_attr, sizeof *qp_init_attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd ? pd : id->pd;
  const int ret = rdma_create_qp_ex(id, &ex);
  std::memcpy(qp_init_attr, &ex, sizeof *qp_init_attr);
  return ret;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp) ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  destroy_cqs(id);
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return fail(EINVAL);
  if (attr->srq_type != IBV_SRQT_BASIC) {
    log("rdma_create_srq_ex: only basic SRQs are supported (no XRC)");
    return fail(EOPNOTSUPP);
  }
  ibv_pd* pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : id->pd;
  if (pd == nullptr) return fail(EINVAL);
  ibv_srq_init_attr plain{};
  plain.srq_context = attr->srq_context;
  plain.attr = attr->attr;
  ibv_srq* srq = ibv_create_srq(pd, &plain);
  if (srq == nullptr) return -1;
  attr->attr = plain.attr;
  attr->pd = pd;
  attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  if (!id->pd) id->pd = pd;
  id->srq = srq;
  return 0;
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (id == nullptr || attr == nullptr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof *attr);
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd;
  const int ret = rdma_create_srq_ex(id, &ex);
  std::memcpy(attr, &ex, sizeof *attr);
  return ret;
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->srq) ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  destroy_cqs(id);
}

}  // extern "C"
