#include "transport/verbs/mr_table.h"

#include <algorithm>
#include <cerrno>

#include "transport/verbs/access.h"

namespace isoroce::verbs {

const char* mr_check_name(MrCheck c) {
  switch (c) {
    case MrCheck::kOk: return "ok";
    case MrCheck::kInvalidKey: return "invalid key";
    case MrCheck::kAccessViolation: return "access violation";
    case MrCheck::kOutOfBounds: return "out of bounds";
    case MrCheck::kMisaligned: return "misaligned";
  }
  return "?";
}

uint32_t MrTable::fresh_key() {
  // The permutation cannot repeat before 2^32 keys, but a key of a region
  // registered 2^32 keys ago may still be live: skip it.
  uint32_t k;
  do k = keys_.next();
  while (by_lkey_.count(k) || lkey_by_rkey_.count(k));
  return k;
}

Result<MrKeys> MrTable::reg(const Device& dev, PdTable& pds, PdHandle pd, uint64_t addr,
                            uint64_t length, uint64_t iova, uint32_t access) {
  using R = Result<MrKeys>;
  const bool forced = forced_set_;  // set_next_keys applies to this call only, whatever it returns
  forced_set_ = false;
  if (int err = check_mr_access(access)) return R::error(err);
  if (!pds.exists(pd)) return R::error(EINVAL);
  if (length == 0 || length > dev.max_mr_size) return R::error(EINVAL);
  if (access & IBV_ACCESS_ZERO_BASED) {
    iova = 0;
  } else if ((addr ^ iova) & (kPageSize - 1)) {
    return R::error(EINVAL);
  }
  // Neither range may wrap past 2^64 (the last byte is start + length - 1).
  if (addr + (length - 1) < addr || iova + (length - 1) < iova) return R::error(EINVAL);
  if (by_lkey_.size() >= dev.max_mr) return R::error(ENOMEM);

  uint32_t lkey, rkey;
  if (forced) {
    lkey = forced_.lkey;
    rkey = forced_.rkey;
    if (lkey == rkey || by_lkey_.count(lkey) || by_lkey_.count(rkey) || lkey_by_rkey_.count(lkey) ||
        lkey_by_rkey_.count(rkey))
      return R::error(EEXIST);
  } else {
    lkey = fresh_key();
    do rkey = fresh_key();
    while (rkey == lkey);
  }
  uint64_t id = next_id_++;
  if (forced && forced_.id != 0) {
    id = forced_.id;
    next_id_ = std::max(next_id_, id + 1);
  }
  forget_lookups();
  by_lkey_.emplace(lkey, Mr{pd, addr, iova, length, access, lkey, rkey, id});
  lkey_by_rkey_.emplace(rkey, lkey);
  pds.get(pd);
  return MrKeys{lkey, rkey, id};
}

int MrTable::dereg(PdTable& pds, uint32_t lkey) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return EINVAL;
  forget_lookups();
  ++deregs_;
  pds.put(it->second.pd);
  lkey_by_rkey_.erase(it->second.rkey);
  by_lkey_.erase(it);
  return 0;
}

const Mr* MrTable::find_lkey_slow(uint32_t lkey) const {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return nullptr;
  last_lkey_ = lkey;
  last_by_lkey_ = &it->second;
  return last_by_lkey_;
}

const Mr* MrTable::find_rkey_slow(uint32_t rkey) const {
  auto it = lkey_by_rkey_.find(rkey);
  if (it == lkey_by_rkey_.end()) return nullptr;
  const Mr* mr = find_lkey(it->second);
  last_rkey_ = rkey;
  last_by_rkey_ = mr;
  return mr;
}

void MrTable::forget_lookups() {
  last_by_lkey_ = last_by_rkey_ = nullptr;
  last_lkey_ = last_rkey_ = 0;
}

MrCheck MrTable::check_atomic(PdHandle pd, uint32_t rkey, uint64_t va) const {
  MrCheck c = check_remote(pd, rkey, va, kAtomicSize, IBV_ACCESS_REMOTE_ATOMIC);
  if (c != MrCheck::kOk) return c;
  if (va & (kAtomicSize - 1)) return MrCheck::kMisaligned;
  return MrCheck::kOk;
}

}  // namespace isoroce::verbs
