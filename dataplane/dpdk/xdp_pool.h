// The mbuf pool of a net_af_xdp port: its objects are the AF_XDP UMEM.
//
// DPDK 22.11's AF_XDP driver registers as UMEM the pool's first memory chunk,
// `populated_size` objects of `rte_mempool_calc_obj_size` bytes long, and
// hands the kernel each mbuf's address within it. An ordinary
// rte_pktmbuf_pool_create pool under --no-huge (4 KiB pages) keeps each
// object within a page and leaves the rest of the page empty, so its objects
// span up to 1.7x that length: the mbufs past the end are outside the UMEM,
// and the kernel drops a frame sent from one, or a receive buffer given in
// one, without a word (an XDP socket's `tx_invalid_descs`). With one worker
// the pool's per-lcore cache kept reusing the first mbufs; mbufs crossing
// between lcores (lanes) cycled the whole pool and lost most frames.
//
// make_xdp_pool makes every object exactly one page (header, mbuf and data
// room), page-aligned and back to back, so the objects fill the UMEM's length
// exactly and none crosses a page (zero-copy drivers need that too), and
// checks it.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>

namespace isoroce::dataplane {

// The size of one object of such a pool: a page.
inline constexpr uint32_t kXdpObjectBytes = 4096;

// A pool of `n` page-sized mbufs (data room: what is left of the page), on
// NUMA `socket`; nullptr and *error if it cannot be made or does not lie
// back to back in one area.
rte_mempool* make_xdp_pool(const std::string& name, unsigned n, unsigned cache, int socket, std::string* error);

// The data room of each of its mbufs.
uint16_t xdp_pool_data_room();

// Whether every object of `pool` lies within the area DPDK 22.11's AF_XDP
// driver registers as UMEM (the first chunk's start, populated_size objects
// long); *error says which does not.
bool xdp_pool_covers_objects(rte_mempool* pool, std::string* error);

}  // namespace isoroce::dataplane
