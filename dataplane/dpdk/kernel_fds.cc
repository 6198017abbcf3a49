#include "dataplane/dpdk/kernel_fds.h"

#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

namespace isoroce::dataplane {

std::set<int> socket_fds() {
  std::set<int> fds;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  const int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) == 0 && S_ISSOCK(st.st_mode)) fds.insert(static_cast<int>(fd));
  }
  closedir(d);
  return fds;
}

std::vector<int> af_packet_fds(uint32_t if_index) {
  std::vector<int> out;
  if (if_index == 0) return out;
  for (int fd : socket_fds()) {
    sockaddr_ll sll{};
    socklen_t len = sizeof sll;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&sll), &len) == 0 && sll.sll_family == AF_PACKET &&
        static_cast<uint32_t>(sll.sll_ifindex) == if_index)
      out.push_back(fd);
  }
  return out;
}

std::vector<int> xdp_fds(const std::set<int>& fds, bool* zero_copy) {
  std::vector<int> out;
  bool all_zc = true;
  for (int fd : fds) {
    xdp_options opts{};
    socklen_t len = sizeof opts;
    if (getsockopt(fd, SOL_XDP, XDP_OPTIONS, &opts, &len) != 0) continue;  // not an XDP socket
    out.push_back(fd);
    all_zc = all_zc && (opts.flags & XDP_OPTIONS_ZEROCOPY) != 0;
  }
  *zero_copy = !out.empty() && all_zc;
  return out;
}

uint32_t xdp_program_id(uint32_t if_index) {
  bpf_xdp_query_opts opts{};
  opts.sz = sizeof opts;
  if (if_index == 0 || bpf_xdp_query(static_cast<int>(if_index), 0, &opts) != 0) return 0;
  return opts.prog_id;
}

}  // namespace isoroce::dataplane
