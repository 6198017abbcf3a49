// Memory regions: ibv_reg_mr* prepares the range (memreg.h: private pages
// onto memfds, shared mappings as their files) and registers it with the
// daemon ("reg_mr" with its pieces); ibv_rereg_mr is a
// registration of the new range/PD/access followed by the deregistration of
// the old one, so the ibv_mr keeps its address and gets new keys (as rxe's
// may).
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "verbs_compat/internal.h"
#include "verbs_compat/memreg.h"

namespace isoroce::vc {
namespace {

// The access bits that mean something here; optional and ordering hints
// (relaxed ordering, the optional range) mean nothing and are dropped.
constexpr uint32_t kMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;

struct Keys {
  uint32_t lkey = 0, rkey = 0;
  MrPages pages;  // the private pages the registration holds on the memfds
};

// Registers [addr, +length) with the daemon: 0 and *out, or a positive errno.
// *prepare_failed tells a failure to prepare the range (memreg.h: private
// pages onto memfds, shared mappings as their files) from a refusal by the
// daemon.
int register_range(ibv_pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access, Keys* out,
                   bool* prepare_failed) {
  MrMemory m;
  if (int rc = prepare_mr_memory(addr, length, access, &m)) {
    *prepare_failed = true;
    return rc;
  }
  *prepare_failed = false;
  json req = {{"op", "reg_mr"}, {"pd", pd->handle}, {"length", length}, {"iova", iova}, {"access", access}};
  req.update(m.fields);
  json r = context_of(pd->context)->call(req, m.fds);
  if (!r.value("ok", false)) return reply_errno(r);  // m's destructor gives its pages back
  out->lkey = r["lkey"].get<uint32_t>();
  out->rkey = r["rkey"].get<uint32_t>();
  out->pages = std::move(m.pages);
  return 0;
}

int deregister(ibv_context* context, uint32_t lkey) {
  json r = context_of(context)->call({{"op", "dereg_mr"}, {"lkey", lkey}});
  return r.value("ok", false) ? 0 : reply_errno(r);
}

int rereg_input_error(const char* what) {
  log("ibv_rereg_mr: %s", what);
  errno = EINVAL;
  return IBV_REREG_MR_ERR_INPUT;
}

}  // namespace
}  // namespace isoroce::vc

using namespace isoroce::vc;

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

extern "C" {

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (length == 0 || addr == nullptr) {
    log("reg_mr: empty range");
    return errno = EINVAL, nullptr;
  }
  if (access & IBV_ACCESS_ON_DEMAND) {
    log("reg_mr: on-demand paging is not supported (ibv_query_device_ex reports no ODP)");
    return errno = EOPNOTSUPP, nullptr;
  }
  const uint32_t acc = access & kMrAccess;
  Keys k;
  bool prepare_failed = false;
  if (int rc = register_range(pd, addr, length, iova, acc, &k, &prepare_failed)) return errno = rc, nullptr;
  auto* mr = new Mr;
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.lkey = k.lkey;
  mr->mr.rkey = k.rkey;
  mr->mr.handle = k.lkey;
  mr->pages = std::move(k.pages);
  mr->iova = iova;
  mr->access = acc;
  return &mr->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  log("ibv_reg_dmabuf_mr: not supported");
  return errno = EOPNOTSUPP, nullptr;
}

// ibv_rereg_mr(3): 0, or an IBV_REREG_MR_ERR_* code with errno set.
//   ERR_INPUT          the arguments are wrong; the old registration stands
//   ERR_DONT_FORK_NEW  the new range could not be prepared (moved onto a
//                      memfd, our "don't fork"); the old registration stands
//   ERR_CMD            the daemon refused; the MR must not be used (it still
//                      names the old registration, which ibv_dereg_mr releases)
// The new registration is made before the old one is released, so a failure
// never leaves the ibv_mr without one.
int ibv_rereg_mr(ibv_mr* ibmr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (ibmr == nullptr) return rereg_input_error("no MR");
  Mr* mr = outer_of(ibmr, &Mr::mr);
  if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) return rereg_input_error("unknown flags");
  if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (addr == nullptr || length == 0))
    return rereg_input_error("CHANGE_TRANSLATION needs an address and a length");
  if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) return rereg_input_error("access flags without CHANGE_ACCESS");
  if ((flags & IBV_REREG_MR_CHANGE_PD) && (pd == nullptr || pd->context != ibmr->context))
    return rereg_input_error("CHANGE_PD needs a PD of the MR's context");
  if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && (access & IBV_ACCESS_ON_DEMAND)) {
    log("ibv_rereg_mr: on-demand paging is not supported");
    errno = EOPNOTSUPP;
    return IBV_REREG_MR_ERR_INPUT;
  }
  const uint32_t acc = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? static_cast<uint32_t>(access) & kMrAccess : mr->access;
  // ib_check_mr_access(): remote write and atomic access need local write.
  if ((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(acc & IBV_ACCESS_LOCAL_WRITE))
    return rereg_input_error("remote write or atomic access without local write");
  if ((flags & IBV_REREG_MR_FLAGS_SUPPORTED) == 0) return 0;  // nothing to change

  ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : ibmr->pd;
  const bool move = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
  void* new_addr = move ? addr : ibmr->addr;
  const size_t new_len = move ? length : ibmr->length;
  const uint64_t new_iova = move ? reinterpret_cast<uintptr_t>(addr) : mr->iova;
  Keys k;
  bool prepare_failed = false;
  if (int rc = register_range(new_pd, new_addr, new_len, new_iova, acc, &k, &prepare_failed)) {
    errno = rc;
    if (prepare_failed) return IBV_REREG_MR_ERR_DONT_FORK_NEW;
    log("ibv_rereg_mr: the daemon refused the new registration (%s); the MR must be deregistered",
        std::strerror(rc));
    return IBV_REREG_MR_ERR_CMD;
  }
  if (int rc = deregister(ibmr->context, ibmr->lkey)) {
    deregister(ibmr->context, k.lkey);
    release_mr_pages(k.pages);
    log("ibv_rereg_mr: releasing the old registration failed (%s); the MR must be deregistered", std::strerror(rc));
    errno = rc;
    return IBV_REREG_MR_ERR_CMD;
  }
  ibmr->pd = new_pd;
  ibmr->addr = new_addr;
  ibmr->length = new_len;
  ibmr->lkey = k.lkey;
  ibmr->rkey = k.rkey;
  ibmr->handle = k.lkey;
  // The daemon no longer maps the old range: its pages no other MR holds go private.
  release_mr_pages(mr->pages);
  mr->pages = std::move(k.pages);
  mr->iova = new_iova;
  mr->access = acc;
  debug("rereg_mr: flags %#x: lkey %#x rkey %#x", flags, k.lkey, k.rkey);
  return 0;
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (int rc = deregister(mr->context, mr->lkey)) return rc;
  // The daemon has unmapped them: pages no other MR holds go back to private memory.
  Mr* m = outer_of(mr, &Mr::mr);
  release_mr_pages(m->pages);
  delete m;
  return 0;
}

}  // extern "C"
