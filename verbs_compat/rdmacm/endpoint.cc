// rdma_getaddrinfo (over getaddrinfo(3): no IB service resolution, no route
// hints) and the endpoint calls built on it: rdma_create_ep, rdma_destroy_ep.
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "verbs_compat/rdmacm/internal.h"

using namespace isoroce::rcm;

namespace {

sockaddr* copy_addr(const sockaddr* sa, socklen_t len) {
  auto* out = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (out) std::memcpy(out, sa, len);
  return out;
}

// getaddrinfo's first answer for node:service (numeric if asked).
int lookup(const char* node, const char* service, int family, bool passive, bool numeric, sockaddr_storage* out,
           socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = (passive ? AI_PASSIVE : 0) | (numeric ? AI_NUMERICHOST : 0);
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(node, service, &hints, &res);
  if (rc != 0) return rc;
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

}  // namespace

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
  if (res == nullptr || (node == nullptr && service == nullptr && hints == nullptr)) return fail(EINVAL);
  auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (rai == nullptr) return fail(ENOMEM);
  const int flags = hints ? hints->ai_flags : 0;
  rai->ai_flags = flags;
  rai->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  rai->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type
                                               : (rai->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC);
  const int family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
  const bool numeric = flags & RAI_NUMERICHOST;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (flags & RAI_PASSIVE) {
    if (node || service) {
      if (int rc = lookup(node, service, family, true, numeric, &ss, &len)) {
        std::free(rai);
        errno = rc == EAI_SYSTEM ? errno : ENOENT;
        return rc;
      }
      rai->ai_src_addr = copy_addr(reinterpret_cast<sockaddr*>(&ss), len);
      rai->ai_src_len = len;
    } else if (hints && hints->ai_src_addr) {
      rai->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
      rai->ai_src_len = hints->ai_src_len;
    }
    rai->ai_family = rai->ai_src_addr ? rai->ai_src_addr->sa_family : family;
  } else {
    if (node || service) {
      if (int rc = lookup(node, service, family, false, numeric, &ss, &len)) {
        std::free(rai);
        errno = rc == EAI_SYSTEM ? errno : ENOENT;
        return rc;
      }
      rai->ai_dst_addr = copy_addr(reinterpret_cast<sockaddr*>(&ss), len);
      rai->ai_dst_len = len;
    } else if (hints && hints->ai_dst_addr) {
      rai->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
      rai->ai_dst_len = hints->ai_dst_len;
    }
    if (hints && hints->ai_src_addr) {
      rai->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
      rai->ai_src_len = hints->ai_src_len;
    }
    rai->ai_family = rai->ai_dst_addr ? rai->ai_dst_addr->sa_family : family;
  }
  if (node) rai->ai_dst_canonname = (flags & RAI_PASSIVE) ? nullptr : strdup(node);
  *res = rai;
  return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || res == nullptr) return fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  const rdma_port_space ps = static_cast<rdma_port_space>(res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP);
  if (rdma_create_id(nullptr, &cm_id, nullptr, ps) != 0) return -1;
  Id* i = id_of(cm_id);
  i->id.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type ? res->ai_qp_type : i->id.qp_type);
  int ret = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    ret = rdma_bind_addr(cm_id, res->ai_src_addr ? res->ai_src_addr : reinterpret_cast<sockaddr*>(&any));
    if (ret == 0) {
      if (pd) cm_id->pd = pd;
      if (qp_init_attr) {
        i->qp_init_attr = std::make_unique<ibv_qp_init_attr>(*qp_init_attr);
        i->qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      }
    }
  } else {
    ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (ret == 0) ret = rdma_resolve_route(cm_id, 2000);
    if (ret == 0 && qp_init_attr) {
      qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      ret = rdma_create_qp(cm_id, pd, qp_init_attr);
    }
    if (ret == 0 && res->ai_connect_len)
      i->connect_data.assign(static_cast<uint8_t*>(res->ai_connect),
                             static_cast<uint8_t*>(res->ai_connect) + res->ai_connect_len);
  }
  if (ret != 0) {
    const int err = errno;
    rdma_destroy_ep(cm_id);
    return fail(err);
  }
  *id = cm_id;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

}  // extern "C"
