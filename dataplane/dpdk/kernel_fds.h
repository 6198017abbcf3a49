// The kernel sockets behind a port whose PMD reads a socket (net_af_packet's
// PACKET_RX_RING socket, net_af_xdp's XDP socket): DPDK does not hand them out
// and these PMDs have no RX interrupt (rte_eth_dev_rx_intr_enable), but poll()
// on them wakes when a frame waits, which is what an idle worker needs. Found
// through /proc/self/fd and the kernel's socket calls (getsockname,
// getsockopt(SOL_XDP)), never through a PMD's private state.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace isoroce::dataplane {

// The descriptors of this process that are sockets.
std::set<int> socket_fds();
// The AF_PACKET sockets bound to interface `if_index`.
std::vector<int> af_packet_fds(uint32_t if_index);
// Of `fds`, the XDP sockets; *zero_copy true if all are bound in zero-copy mode.
std::vector<int> xdp_fds(const std::set<int>& fds, bool* zero_copy);

// The id of the XDP program attached to interface `if_index` (any mode), 0 if
// none. DPDK 22.11's net_af_xdp detaches whatever program the interface has
// when it closes, even after failing to set up, so a daemon must not try
// AF_XDP on an interface another AF_XDP user holds.
uint32_t xdp_program_id(uint32_t if_index);

}  // namespace isoroce::dataplane
