// Memory windows (IBTA vol.1 10.6.7): type 1 (bound by ibv_bind_mw(), which
// the verbs library turns into a BIND_MW work request, as rdma-core does for
// rxe) and type 2B (bound by IBV_WR_BIND_MW, invalidated by IBV_WR_LOCAL_INV
// or a peer's SEND_WITH_INVALIDATE). A valid window names a range of one MR
// with its own R_Key and access; the responder checks a window's R_Key as it
// checks an MR's (find() then check()). rxe's rxe_mw.c was read for the
// behaviour; the rules cite IBTA.
//
// R_Keys: a window's key is (index << 8) | key. The index is fixed at
// allocation; each bind sets the low 8 bits from the bind's new R_Key (the
// consumer's ibv_inc_rkey()). No MW key equals a live MR key (the engine
// checks both tables: MrTable keys are refused here, and MrTable skips ours).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "transport/verbs/mr_table.h"
#include "transport/verbs/pd_table.h"
#include "transport/verbs/result.h"

namespace isoroce::verbs {

struct Mw {
  PdHandle pd = 0;
  uint8_t type = 0;     // IBV_MW_TYPE_1 or IBV_MW_TYPE_2
  uint32_t rkey = 0;    // the current R_Key
  bool valid = false;   // bound to an MR range (type 2: not free)
  uint32_t mr_lkey = 0; // the MR it is bound to, and that registration's id
  uint64_t mr_id = 0;
  uint64_t va = 0;      // the window: [va, va+length) in the MR's iova space
  uint64_t length = 0;
  uint32_t access = 0;  // remote access it grants (REMOTE_READ/WRITE/ATOMIC)
  uint32_t qpn = 0;     // type 2: the QP that bound it (10.6.7.2.2: only it may use it)
};

// A bind work request (ibv_mw_bind_info plus the window's keys).
struct MwBind {
  uint32_t mw_rkey = 0;   // the window as the consumer knows it now
  uint32_t new_rkey = 0;  // its R_Key after the bind (same index, new low 8 bits)
  uint32_t mr_lkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
};

class MwTable {
 public:
  explicit MwTable(uint64_t key_seed) : keys_(key_seed ^ 0x6d77u) {}

  // ibv_alloc_mw(): type 1 starts valid with no range (length 0, useless
  // until bound), type 2 free. in_use(key) says whether an MR holds a key.
  // EINVAL (no PD, bad type), ENOMEM beyond max_mw.
  Result<uint32_t> alloc(const Device& dev, PdTable& pds, PdHandle pd, int type,
                         const std::function<bool(uint32_t)>& in_use);
  // ibv_dealloc_mw(): the window with rkey's index (whatever its low 8 bits
  // are now: the consumer may not know the last bind's); 0 or EINVAL.
  int dealloc(PdTable& pds, uint32_t rkey);
  // A BIND_MW work request of QP qpn (PD qp_pd) over the MRs in mrs: 0, or
  // EINVAL for every rule broken (the WR completes with IBV_WC_MW_BIND_ERR).
  // key_in_use refuses a new R_Key an MR holds.
  int bind(const MrTable& mrs, PdHandle qp_pd, uint32_t qpn, const MwBind& b,
           const std::function<bool(uint32_t)>& key_in_use);
  // Invalidation (10.6.7.2.4 / 9.4.1.1 Send with Invalidate): rkey must name a
  // valid type 2 window of PD pd (remote: bound by QP qpn; local: any QP of
  // the PD, qpn 0). 0 or EINVAL.
  int invalidate(PdHandle pd, uint32_t qpn, uint32_t rkey);

  // The valid window rkey names, or nullptr.
  const Mw* find(uint32_t rkey) const;
  // A RETH or AtomicETH through window w, by QP qpn of PD pd: the window's
  // range, access, PD and QP (type 2), and the MR still the one it was
  // bound to (mrs). For atomics the caller checks the alignment. On kOk,
  // *found (if given) is that MR.
  MrCheck check(const MrTable& mrs, const Mw& w, PdHandle pd, uint32_t qpn, uint64_t va, uint64_t len,
                uint32_t needed, const Mr** found = nullptr) const;
  // Windows bound to the MR with this lkey (an MR with windows cannot be
  // deregistered: ibv_dereg_mr() gives EINVAL, as rxe).
  bool mr_has_windows(uint32_t lkey) const;
  bool has_key(uint32_t rkey) const { return find_any(rkey) != nullptr; }
  size_t size() const { return by_index_.size(); }

 private:
  Mw* find_any(uint32_t rkey);
  const Mw* find_any(uint32_t rkey) const;

  MrKeyGen keys_;
  std::unordered_map<uint32_t, Mw> by_index_;  // rkey >> 8
};

}  // namespace isoroce::verbs
