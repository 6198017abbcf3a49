// What isoroce's rdma_cm does not offer, failing cleanly with a log line:
// multicast (no multicast groups on isoroce devices), ECE, and rsockets
// (rsocket() fails with ENOSYS, so no rsocket exists and every other
// r* call on a descriptor is EBADF; rpoll/rselect pass ordinary descriptors
// to poll/select).
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <cerrno>
#include <cstdarg>

#include "verbs_compat/rdmacm/internal.h"

using namespace isoroce::rcm;

namespace {
int unsupported(const char* what, int err) {
  log("%s: not supported (%s)", what, err == ENOSYS ? "ENOSYS" : err == EBADF ? "EBADF" : "EOPNOTSUPP");
  return fail(err);
}
}  // namespace

extern "C" {

int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return unsupported("rdma_join_multicast", EOPNOTSUPP); }
int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return unsupported("rdma_join_multicast_ex", EOPNOTSUPP);
}
int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return fail(EADDRNOTAVAIL); }  // never joined
int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { return unsupported("rdma_set_local_ece", EOPNOTSUPP); }
int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { return unsupported("rdma_get_remote_ece", EOPNOTSUPP); }

int rsocket(int, int, int) { return unsupported("rsocket (rsockets)", ENOSYS); }
int rbind(int, const sockaddr*, socklen_t) { return unsupported("rbind (rsockets)", EBADF); }
int rlisten(int, int) { return unsupported("rlisten (rsockets)", EBADF); }
int raccept(int, sockaddr*, socklen_t*) { return unsupported("raccept (rsockets)", EBADF); }
int rconnect(int, const sockaddr*, socklen_t) { return unsupported("rconnect (rsockets)", EBADF); }
int rshutdown(int, int) { return unsupported("rshutdown (rsockets)", EBADF); }
int rclose(int) { return unsupported("rclose (rsockets)", EBADF); }
ssize_t rrecv(int, void*, size_t, int) { return unsupported("rrecv (rsockets)", EBADF); }
ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) { return unsupported("rrecvfrom (rsockets)", EBADF); }
ssize_t rrecvmsg(int, msghdr*, int) { return unsupported("rrecvmsg (rsockets)", EBADF); }
ssize_t rsend(int, const void*, size_t, int) { return unsupported("rsend (rsockets)", EBADF); }
ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return unsupported("rsendto (rsockets)", EBADF);
}
ssize_t rsendmsg(int, const msghdr*, int) { return unsupported("rsendmsg (rsockets)", EBADF); }
ssize_t rread(int, void*, size_t) { return unsupported("rread (rsockets)", EBADF); }
ssize_t rreadv(int, const iovec*, int) { return unsupported("rreadv (rsockets)", EBADF); }
ssize_t rwrite(int, const void*, size_t) { return unsupported("rwrite (rsockets)", EBADF); }
ssize_t rwritev(int, const iovec*, int) { return unsupported("rwritev (rsockets)", EBADF); }
int rpoll(pollfd* fds, nfds_t nfds, int timeout) { return poll(fds, nfds, timeout); }
int rselect(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* t) { return select(nfds, r, w, e, t); }
int rgetpeername(int, sockaddr*, socklen_t*) { return unsupported("rgetpeername (rsockets)", EBADF); }
int rgetsockname(int, sockaddr*, socklen_t*) { return unsupported("rgetsockname (rsockets)", EBADF); }
int rsetsockopt(int, int, int, const void*, socklen_t) { return unsupported("rsetsockopt (rsockets)", EBADF); }
int rgetsockopt(int, int, int, void*, socklen_t*) { return unsupported("rgetsockopt (rsockets)", EBADF); }
int rfcntl(int, int, ...) { return unsupported("rfcntl (rsockets)", EBADF); }
off_t riomap(int, void*, size_t, int, int, off_t) { return unsupported("riomap (rsockets)", EBADF); }
int riounmap(int, void*, size_t) { return unsupported("riounmap (rsockets)", EBADF); }
size_t riowrite(int, const void*, size_t, off_t, int) {
  unsupported("riowrite (rsockets)", EBADF);
  return 0;
}

}  // extern "C"
