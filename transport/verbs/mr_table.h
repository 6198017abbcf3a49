// Memory regions: registration with the checks of ibv_reg_mr(), L_Key and
// R_Key lookup, and the access/bounds checks the requester (local SGEs) and
// the responder (RETH / AtomicETH) make before touching memory.
#pragma once

#include <cstdint>
#include <unordered_map>

#include <infiniband/verbs.h>

#include "transport/verbs/access.h"
#include "transport/verbs/device.h"
#include "transport/verbs/mr_key.h"
#include "transport/verbs/pd_table.h"
#include "transport/verbs/result.h"

namespace isoroce::verbs {

inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint64_t kAtomicSize = 8;  // IBTA 9.4.5: atomics act on 8 aligned bytes

// What a check found; the engine maps it to a completion status or a NAK
// (kInvalidKey/kAccessViolation/kOutOfBounds -> IBV_WC_LOC_PROT_ERR locally,
// Remote Access Error NAK remotely; kMisaligned -> Invalid Request NAK, as
// rxe_resp.c does for a misaligned atomic).
enum class MrCheck : uint8_t { kOk, kInvalidKey, kAccessViolation, kOutOfBounds, kMisaligned };

const char* mr_check_name(MrCheck c);

struct Mr {
  PdHandle pd;
  uint64_t addr;    // where the buffer is in the application
  uint64_t iova;    // the address SGEs and RETHs name (addr unless reg'd with an iova)
  uint64_t length;
  uint32_t access;  // ibv_access_flags
  uint32_t lkey;
  uint32_t rkey;
  // This registration's number, never reused by the table: an operation that
  // keeps using an MR across packets (the responder's RDMA WRITE) holds the
  // key and this id, and stops when the key names another registration or
  // none (a key value recycled after 2^32 registrations included).
  uint64_t id = 0;
};

struct MrKeys {
  uint32_t lkey;
  uint32_t rkey;
  // The registration's Mr::id (reg() fills it; set_next_keys() with a
  // nonzero id gives the next registration that id: a port's lanes register
  // each MR under the same keys and id, so a memory window bound in one lane
  // names its MR the same way in every lane).
  uint64_t id = 0;
};

class MrTable {
 public:
  explicit MrTable(uint64_t key_seed) : keys_(key_seed) {}
  MrTable(const MrTable&) = delete;  // the lookup cache points into its own nodes
  MrTable& operator=(const MrTable&) = delete;

  // ibv_reg_mr_iova2(). access is checked by check_mr_access(); the PD must
  // exist; length must be 1..max_mr_size with neither addr+length nor
  // iova+length wrapping; addr and iova must share their offset in the page
  // (ib_uverbs_reg_mr()). IBV_ACCESS_ZERO_BASED makes the iova 0. ENOMEM
  // beyond Device::max_mr. The lkey and rkey differ, so an lkey a peer
  // learns is useless to it.
  Result<MrKeys> reg(const Device& dev, PdTable& pds, PdHandle pd, uint64_t addr,
                     uint64_t length, uint64_t iova, uint32_t access);
  // The next reg() uses these keys (EEXIST if either is taken), and keys.id
  // if nonzero, once.
  void set_next_keys(MrKeys keys) { forced_ = keys; forced_set_ = true; }
  // ibv_dereg_mr(): 0 or EINVAL for an unknown lkey.
  int dereg(PdTable& pds, uint32_t lkey);

  // An SGE: [addr, addr+len) inside the MR named by lkey in the QP's PD;
  // needed is IBV_ACCESS_LOCAL_WRITE to write there, 0 to read (local read
  // is always allowed, IBTA 10.6.3).
  // (Inline, like check_remote() and the lookups' fast paths: each is on the
  // per-packet path of the engine, which lives in another library.)
  MrCheck check_local(PdHandle pd, uint32_t lkey, uint64_t addr, uint64_t len,
                      uint32_t needed) const {
    const Mr* found = nullptr;
    return check_local(pd, lkey, addr, len, needed, &found);
  }
  // check_local() that also hands back, on kOk, the MR it found (one lookup
  // where a check and a translation each made their own).
  MrCheck check_local(PdHandle pd, uint32_t lkey, uint64_t addr, uint64_t len, uint32_t needed,
                      const Mr** found) const {
    const Mr* mr = find_lkey(lkey);
    // A key from another PD is no key at all here (rxe lookup_mr()).
    if (!mr || mr->pd != pd) return MrCheck::kInvalidKey;
    if (needed & ~(mr->access & IBV_ACCESS_LOCAL_WRITE)) return MrCheck::kAccessViolation;
    const MrCheck c = check_range(*mr, addr, len);
    if (c == MrCheck::kOk) *found = mr;
    return c;
  }
  // A RETH: [va, va+len) inside the MR named by rkey in the QP's PD, which
  // grants every bit of needed (REMOTE_READ/REMOTE_WRITE/REMOTE_ATOMIC). On
  // kOk, *found (if given) is that MR.
  MrCheck check_remote(PdHandle pd, uint32_t rkey, uint64_t va, uint64_t len,
                       uint32_t needed, const Mr** found = nullptr) const {
    const Mr* mr = find_rkey(rkey);
    if (!mr || mr->pd != pd) return MrCheck::kInvalidKey;
    if (needed == 0 || (needed & ~(mr->access & kAccessRemote))) return MrCheck::kAccessViolation;
    const MrCheck c = check_range(*mr, va, len);
    if (c == MrCheck::kOk && found != nullptr) *found = mr;
    return c;
  }
  // An AtomicETH: 8 bytes, 8-byte aligned, REMOTE_ATOMIC.
  MrCheck check_atomic(PdHandle pd, uint32_t rkey, uint64_t va) const;

  const Mr* find_lkey(uint32_t lkey) const {
    if (last_by_lkey_ != nullptr && lkey == last_lkey_) return last_by_lkey_;
    return find_lkey_slow(lkey);
  }
  const Mr* find_rkey(uint32_t rkey) const {
    if (last_by_rkey_ != nullptr && rkey == last_rkey_) return last_by_rkey_;
    return find_rkey_slow(rkey);
  }
  size_t size() const { return by_lkey_.size(); }
  // How many regions were ever deregistered. An MR's PD, access and range never
  // change while it is registered, so a check_local() that passed still holds
  // as long as this count has not moved (the engine checks a work request's
  // L_Keys once, at post, and only again after a dereg).
  uint64_t deregs() const { return deregs_; }
  // [va, va+len) within [iova, iova+length), written so nothing can overflow:
  // va - iova and length - len are computed only once each is known >= 0 (public:
  // the engine checks the bounds of a key it found before against its MR).
  static MrCheck check_range(const Mr& mr, uint64_t va, uint64_t len) {
    if (va < mr.iova) return MrCheck::kOutOfBounds;
    if (len > mr.length) return MrCheck::kOutOfBounds;
    if (va - mr.iova > mr.length - len) return MrCheck::kOutOfBounds;
    return MrCheck::kOk;
  }

 private:
  uint32_t fresh_key();
  void forget_lookups();
  // The hash lookups behind find_lkey() / find_rkey() when the last answer is not it.
  const Mr* find_lkey_slow(uint32_t lkey) const;
  const Mr* find_rkey_slow(uint32_t rkey) const;

  MrKeyGen keys_;
  MrKeys forced_{};
  bool forced_set_ = false;
  uint64_t next_id_ = 1;
  uint64_t deregs_ = 0;
  std::unordered_map<uint32_t, Mr> by_lkey_;
  std::unordered_map<uint32_t, uint32_t> lkey_by_rkey_;
  // The last MR found by each key: a flow's packets name the same MR again
  // and again (a hash-chain walk was 8% of a 64-byte WRITE's cost). Node
  // pointers stay valid across rehashing; reg and dereg clear both.
  mutable uint32_t last_lkey_ = 0, last_rkey_ = 0;
  mutable const Mr* last_by_lkey_ = nullptr;
  mutable const Mr* last_by_rkey_ = nullptr;
};

}  // namespace isoroce::verbs
