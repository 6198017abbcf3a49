#include "dataplane/dpdk/xdp_pool.h"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memzone.h>

namespace isoroce::dataplane {

namespace {

// Objects back to back: no padding that spreads them over memory channels
// (it would make them longer than a page).
constexpr unsigned kFlags = RTE_MEMPOOL_F_NO_SPREAD;

uint32_t element_bytes() {
  rte_mempool_objsz sz{};
  (void)rte_mempool_calc_obj_size(0, kFlags, &sz);
  return kXdpObjectBytes - sz.header_size - sz.trailer_size;
}

void free_zone(rte_mempool_memhdr* /*chunk*/, void* zone) {
  (void)rte_memzone_free(static_cast<const rte_memzone*>(zone));
}

struct Span {
  uintptr_t start = 0, end = 0;  // the area the AF_XDP driver registers
  uint32_t header = 0, total = 0;
  std::string bad;               // the first object outside it, if any
};

}  // namespace

uint16_t xdp_pool_data_room() { return static_cast<uint16_t>(element_bytes() - sizeof(rte_mbuf)); }

bool xdp_pool_covers_objects(rte_mempool* pool, std::string* error) {
  const rte_mempool_memhdr* first = STAILQ_FIRST(&pool->mem_list);
  if (first == nullptr) {
    *error = "mbuf pool has no memory";
    return false;
  }
  Span s;
  s.header = pool->header_size;
  s.total = rte_mempool_calc_obj_size(pool->elt_size, pool->flags, nullptr);
  s.start = reinterpret_cast<uintptr_t>(first->addr);
  s.end = s.start + static_cast<uintptr_t>(pool->populated_size) * s.total;
  rte_mempool_obj_iter(
      pool,
      [](rte_mempool* /*mp*/, void* opaque, void* obj, unsigned i) {
        auto& sp = *static_cast<Span*>(opaque);
        const uintptr_t lo = reinterpret_cast<uintptr_t>(obj) - sp.header;
        if (!sp.bad.empty() || (lo >= sp.start && lo + sp.total <= sp.end && lo % kXdpObjectBytes == 0)) return;
        sp.bad = "mbuf " + std::to_string(i) + " lies outside the AF_XDP UMEM or across a page (object at offset " +
                 std::to_string(static_cast<long long>(lo - sp.start)) + " of " + std::to_string(sp.end - sp.start) +
                 " bytes)";
      },
      &s);
  if (s.bad.empty()) return true;
  *error = s.bad;
  return false;
}

rte_mempool* make_xdp_pool(const std::string& name, unsigned n, unsigned cache, int socket, std::string* error) {
  const uint32_t elt = element_bytes();
  if (rte_mempool_calc_obj_size(elt, kFlags, nullptr) != kXdpObjectBytes) {
    *error = "mbuf pool: an object does not come to one page";
    return nullptr;
  }
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = xdp_pool_data_room();
  priv.mbuf_priv_size = 0;
  rte_mempool* mp = rte_mempool_create_empty(name.c_str(), n, elt, cache, sizeof(priv), socket, kFlags);
  if (mp == nullptr) {
    *error = std::string("mbuf pool (is -m large enough?): ") + rte_strerror(rte_errno);
    return nullptr;
  }
  auto fail = [&](std::string why) {
    rte_mempool_free(mp);
    *error = std::move(why);
    return nullptr;
  };
  if (int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr); rc != 0)
    return fail(std::string("mbuf pool ops: ") + rte_strerror(-rc));
  rte_pktmbuf_pool_init(mp, &priv);
  // One page-aligned area of n pages: the first chunk's address is the UMEM's
  // start, and the objects tile it.
  const size_t bytes = static_cast<size_t>(n) * kXdpObjectBytes;
  const rte_memzone* zone = rte_memzone_reserve_aligned((name + "_umem").c_str(), bytes, socket, 0, kXdpObjectBytes);
  if (zone == nullptr) return fail(std::string("mbuf pool memory (is -m large enough?): ") + rte_strerror(rte_errno));
  const int added = rte_mempool_populate_virt(mp, static_cast<char*>(zone->addr), bytes, kXdpObjectBytes, free_zone,
                                              const_cast<rte_memzone*>(zone));
  if (added < 0) {
    // The pool frees the area with its first chunk, if that was added.
    if (const rte_memzone* left = rte_memzone_lookup((name + "_umem").c_str()); left != nullptr)
      (void)rte_memzone_free(left);
    return fail(std::string("mbuf pool populate: ") + rte_strerror(-added));
  }
  if (static_cast<unsigned>(added) != n)
    return fail("mbuf pool: " + std::to_string(added) + " of " + std::to_string(n) + " mbufs fit its memory");
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  std::string why;
  if (!xdp_pool_covers_objects(mp, &why)) return fail("mbuf pool: " + why);
  return mp;
}

}  // namespace isoroce::dataplane
