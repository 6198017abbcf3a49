// Memory windows in the engine (IBTA 10.6.7; the table and its rules:
// transport/verbs/mw_table.h; who shares it and the lock: windows.h).
#include <cerrno>

#include "transport/engine/engine_impl.h"

namespace isoroce::transport::detail {

void EngineImpl::share_windows(Engine& owner) {
  auto& o = static_cast<EngineImpl&>(owner);  // EngineImpl is Engine's one implementation
  o.windows_->shared = true;
  windows_ = o.windows_;
  window_hit_ = {};
}

size_t EngineImpl::mw_count() const {
  const auto lock = lock_windows();
  return windows_->table.size();
}

Result<uint32_t> EngineImpl::alloc_mw(PdHandle pd, int type) {
  const auto lock = lock_windows();
  return windows_->table.alloc(config_.device, pds_, pd, type, [this](uint32_t k) { return key_in_use(k); });
}

int EngineImpl::dealloc_mw(uint32_t rkey) {
  const auto lock = lock_windows();
  window_hit_.mr = nullptr;
  return windows_->table.dealloc(pds_, rkey);
}

int EngineImpl::bind_window(const QpCtx& q, const verbs::MwBind& b) {
  const auto lock = lock_windows();
  window_hit_.mr = nullptr;
  return windows_->table.bind(mrs_, q.pd, q.qp.qpn().value(), b, [this](uint32_t k) { return key_in_use(k); });
}

int EngineImpl::invalidate_window(PdHandle pd, uint32_t qpn, uint32_t rkey) {
  const auto lock = lock_windows();
  window_hit_.mr = nullptr;
  return windows_->table.invalidate(pd, qpn, rkey);
}

verbs::MrCheck EngineImpl::check_rkey_slow(const QpCtx& q, uint32_t rkey, uint64_t va, uint64_t len,
                                           uint32_t needed, const verbs::Mr** found) const {
  // One lookup when the key is an MR's (the common case); MR and window keys never
  // coincide (reg_mr), so a key no MR has is looked up among the windows.
  const verbs::Mr* mr = nullptr;
  const verbs::MrCheck c = mrs_.check_remote(q.pd, rkey, va, len, needed, &mr);
  if (c == verbs::MrCheck::kOk) [[likely]] {
    // An MR's key of the QP's PD: kept for check_rkey()'s next check of it.
    q.resp.rkey_hit = rkey;
    q.resp.rkey_hit_mr = mr;
    q.resp.rkey_hit_deregs = mrs_.deregs();
    if (found != nullptr) *found = mr;
    return c;
  }
  if (c != verbs::MrCheck::kInvalidKey) return c;
  if (mrs_.find_rkey(rkey) != nullptr) return c;  // an MR of another PD
  return check_window(q, rkey, va, len, needed);
}

verbs::MrCheck EngineImpl::check_window(const QpCtx& q, uint32_t rkey, uint64_t va, uint64_t len,
                                        uint32_t needed) const {
  window_hit_.mr = nullptr;
  const auto lock = lock_windows();
  const verbs::MwTable& mws = windows_->table;
  if (mws.size() == 0) return verbs::MrCheck::kInvalidKey;
  const verbs::Mw* w = mws.find(rkey);
  if (w == nullptr) return verbs::MrCheck::kInvalidKey;
  const verbs::Mr* mr = nullptr;
  const verbs::MrCheck c = mws.check(mrs_, *w, q.pd, q.qp.qpn().value(), va, len, needed, &mr);
  if (c == verbs::MrCheck::kOk) window_hit_ = {rkey, mr, mrs_.deregs()};
  return c;
}

const verbs::Mr* EngineImpl::rkey_mr(uint32_t rkey) const {
  if (const verbs::Mr* mr = mrs_.find_rkey(rkey)) return mr;
  // The access check_window() just let through: the MR it saw (window_hit_).
  if (window_hit_.mr != nullptr && window_hit_.rkey == rkey && window_hit_.deregs == mrs_.deregs()) {
    const verbs::Mr* mr = window_hit_.mr;
    window_hit_.mr = nullptr;
    return mr;
  }
  const auto lock = lock_windows();
  const verbs::Mw* w = windows_->table.find(rkey);
  if (w == nullptr || w->length == 0) return nullptr;
  const verbs::Mr* mr = mrs_.find_lkey(w->mr_lkey);
  return mr != nullptr && mr->id == w->mr_id ? mr : nullptr;
}

}  // namespace isoroce::transport::detail
