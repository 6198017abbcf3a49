#include "transport/verbs/mw_table.h"

#include <cerrno>

#include "transport/verbs/access.h"

namespace isoroce::verbs {

Result<uint32_t> MwTable::alloc(const Device& dev, PdTable& pds, PdHandle pd, int type,
                                const std::function<bool(uint32_t)>& in_use) {
  using R = Result<uint32_t>;
  if (!pds.exists(pd)) return R::error(EINVAL);
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return R::error(EINVAL);
  if (by_index_.size() >= dev.max_mw) return R::error(ENOMEM);
  // An index no window has and a key no MR holds (whatever the low 8 bits
  // become later, bind() refuses an MR's key).
  uint32_t k;
  do k = keys_.next();
  while (by_index_.count(k >> 8) || in_use(k) || (k >> 8) == 0);
  Mw w;
  w.pd = pd;
  w.type = static_cast<uint8_t>(type);
  w.rkey = k;
  w.valid = type == IBV_MW_TYPE_1;  // rxe: type 1 VALID with no range, type 2 FREE
  by_index_.emplace(k >> 8, w);
  pds.get(pd);
  return k;
}

int MwTable::dealloc(PdTable& pds, uint32_t rkey) {
  auto it = by_index_.find(rkey >> 8);  // any key of the window: binds change its low 8 bits
  if (it == by_index_.end()) return EINVAL;
  pds.put(it->second.pd);
  by_index_.erase(it);
  return 0;
}

int MwTable::bind(const MrTable& mrs, PdHandle qp_pd, uint32_t qpn, const MwBind& b,
                  const std::function<bool(uint32_t)>& key_in_use) {
  Mw* w = find_any(b.mw_rkey);
  if (w == nullptr) return EINVAL;
  if ((b.new_rkey >> 8) != (w->rkey >> 8)) return EINVAL;  // the index is the window's
  if (b.new_rkey != w->rkey && key_in_use(b.new_rkey)) return EINVAL;
  if (b.access & ~(kAccessRemote | IBV_ACCESS_ZERO_BASED)) return EINVAL;
  if (b.access & IBV_ACCESS_ZERO_BASED) return EINVAL;  // zero-based windows: not supported (10.6.7.2.1 makes them optional)
  // C10-72: the window, the QP and the MR are in one PD.
  if (w->pd != qp_pd) return EINVAL;
  if (w->type == IBV_MW_TYPE_2) {
    if (w->valid) return EINVAL;       // o10-37.2.30: only a free type 2 window is bound
    if (b.length == 0) return EINVAL;  // o10-37.2.40: no invalidation by binding
  }
  const Mr* mr = nullptr;
  if (b.length != 0) {
    mr = mrs.find_lkey(b.mr_lkey);
    if (mr == nullptr || mr->pd != qp_pd) return EINVAL;
    if (mr->access & IBV_ACCESS_ZERO_BASED) return EINVAL;
    if (!(mr->access & IBV_ACCESS_MW_BIND)) return EINVAL;  // C10-73
    // C10-74: a window that can be written remotely needs a locally writable MR.
    if ((b.access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(mr->access & IBV_ACCESS_LOCAL_WRITE))
      return EINVAL;
    // C10-75: inside the MR (no overflow: each difference only once it is >= 0).
    if (b.addr < mr->iova || b.length > mr->length || b.addr - mr->iova > mr->length - b.length)
      return EINVAL;
  }
  w->rkey = b.new_rkey;
  w->access = b.access;
  w->va = b.addr;
  w->length = b.length;
  w->mr_lkey = mr ? mr->lkey : 0;
  w->mr_id = mr ? mr->id : 0;
  w->valid = true;  // a type 1 window with length 0 is valid and grants nothing
  w->qpn = w->type == IBV_MW_TYPE_2 ? qpn : 0;
  return 0;
}

int MwTable::invalidate(PdHandle pd, uint32_t qpn, uint32_t rkey) {
  Mw* w = find_any(rkey);
  if (w == nullptr || !w->valid) return EINVAL;
  if (w->type != IBV_MW_TYPE_2) return EINVAL;  // o10-37.2.26: type 1 windows are not invalidated
  if (w->pd != pd) return EINVAL;
  if (qpn != 0 && w->qpn != qpn) return EINVAL;
  w->valid = false;
  w->access = 0;
  w->va = w->length = 0;
  w->mr_lkey = 0;
  w->mr_id = 0;
  w->qpn = 0;
  return 0;
}

Mw* MwTable::find_any(uint32_t rkey) {
  auto it = by_index_.find(rkey >> 8);
  return it == by_index_.end() || it->second.rkey != rkey ? nullptr : &it->second;
}

const Mw* MwTable::find_any(uint32_t rkey) const {
  auto it = by_index_.find(rkey >> 8);
  return it == by_index_.end() || it->second.rkey != rkey ? nullptr : &it->second;
}

const Mw* MwTable::find(uint32_t rkey) const {
  const Mw* w = find_any(rkey);
  return w && w->valid ? w : nullptr;
}

MrCheck MwTable::check(const MrTable& mrs, const Mw& w, PdHandle pd, uint32_t qpn, uint64_t va, uint64_t len,
                       uint32_t needed, const Mr** found) const {
  if (!w.valid || w.pd != pd) return MrCheck::kInvalidKey;
  if (w.type == IBV_MW_TYPE_2 && w.qpn != qpn) return MrCheck::kInvalidKey;
  if (w.length == 0) return MrCheck::kInvalidKey;
  const Mr* mr = mrs.find_lkey(w.mr_lkey);
  if (mr == nullptr || mr->id != w.mr_id) return MrCheck::kInvalidKey;
  if (needed == 0 || (needed & ~(w.access & kAccessRemote))) return MrCheck::kAccessViolation;
  if (va < w.va || len > w.length || va - w.va > w.length - len) return MrCheck::kOutOfBounds;
  if (found != nullptr) *found = mr;
  return MrCheck::kOk;
}

bool MwTable::mr_has_windows(uint32_t lkey) const {
  for (const auto& [index, w] : by_index_)
    if (w.valid && w.length != 0 && w.mr_lkey == lkey) return true;
  return false;
}

}  // namespace isoroce::verbs
