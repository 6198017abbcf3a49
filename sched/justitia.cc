// Over the project's ~600 lines, and dequeue() over 80: Justitia's tokens,
// flows, the eligible heap and dequeue()'s round share one set of members that
// every function here updates together; dequeue() is the per-grant hot loop,
// kept in one piece so its cases read in order.
#include "sched/justitia.h"

#include <algorithm>

namespace isoroce::sched {

namespace {

using u128 = unsigned __int128;

constexpr std::uint64_t kDefaultAppBit = std::uint64_t{1} << 40;
constexpr int kTenantShift = 49;  // a flow's key: tenant index << 49 | app << 8 | class (app < 2^41)

std::uint64_t flow_key(std::uint64_t app, FlowClass cls) { return app << 8 | static_cast<std::uint64_t>(cls); }

}  // namespace

JustitiaScheduler::JustitiaScheduler(const Config& config)
    : config_(config),
      params_(config.justitia),
      max_qps_(config.max_qps),
      qps_(config.max_qps),
      units_(2 * static_cast<std::size_t>(config.max_qps)),
      link_(config.link_bps, config.catch_up),
      control_(config.control_capacity),
      window_(config.justitia.window) {
  flows_.reserve(config.max_qps);
  if (params_.classify != Classify::kDeclared) classes_.resize(config.max_qps);
  rate_heap_.reserve(config.max_qps);
  flow_by_key_.reserve(config.max_qps);
  if (config.max_msgs_per_sec != 0) {
    msg_cost_ = std::max<Picos>(1, (kPicosPerSecond + config.max_msgs_per_sec / 2) / config.max_msgs_per_sec);
  }
  max_rate_ = params_.max_rate_bps != 0 ? params_.max_rate_bps : config.link_bps;
  safe_util_ = min_safe_util_ = max_rate_;
  // TokenOps of a full token: what the message processor does while the link carries
  // token_bytes at MaxRate; without a processor limit, token_bytes in 64-byte frames.
  if (params_.token_ops != 0) {
    full_token_ops_ = params_.token_ops;
  } else if (config.max_msgs_per_sec != 0) {
    const u128 ops = static_cast<u128>(params_.token_bytes) * 8 * config.max_msgs_per_sec / max_rate_;
    full_token_ops_ = static_cast<std::uint32_t>(std::max<u128>(1, std::min<u128>(ops, 0xffff'ffffu)));
  } else {
    full_token_ops_ = std::max<std::uint32_t>(1, params_.token_bytes / 64);
  }
  chunk_bytes_ = params_.token_bytes;
  chunk_ops_ = full_token_ops_;
  tenants_.resize(1);
  bank_ = static_cast<std::int64_t>(params_.max_tokens) * chunk_bytes_;
  set_tau();
}

std::size_t JustitiaScheduler::fixed_bytes() const {
  return sizeof(*this) + control_.capacity() * sizeof(ControlQueue::Entry) + 2 * window_.window() * sizeof(Picos);
}

FlowClass JustitiaScheduler::flow_class(QpId qp) const {
  if (qp >= qps_.size() || qps_[qp].flow_ == kNil) return FlowClass::kBandwidth;
  return flows_[qps_[qp].flow_].cls;
}

// ---- flows ---------------------------------------------------------------

void JustitiaScheduler::assign(QpId qp, std::uint64_t key, FlowClass cls, std::uint32_t weight) {
  release(qp);
  std::uint32_t f;
  auto it = flow_by_key_.find(key);
  if (it != flow_by_key_.end()) {
    f = it->second;
  } else {
    if (!free_flows_.empty()) {
      f = free_flows_.back();
      free_flows_.pop_back();
      flows_[f] = Flow{};
    } else {
      f = static_cast<std::uint32_t>(flows_.size());
      flows_.emplace_back();
    }
    flows_[f].key = key;
    flows_[f].cls = cls;
    flows_[f].tenant = static_cast<std::uint32_t>(key >> kTenantShift);
    flow_by_key_.emplace(key, f);
    if (cls == FlowClass::kLatency) latency_flows_.push_back(f);
  }
  Flow& fl = flows_[f];
  fl.weight = std::max<std::uint32_t>(1, weight);
  ++fl.refs;
  qps_[qp].flow_ = f;
}

// `qp` (idle) leaves its flow; a flow without QPs is forgotten.
void JustitiaScheduler::release(QpId qp) {
  const std::uint32_t f = qps_[qp].flow_;
  if (f == kNil) return;
  qps_[qp].flow_ = kNil;
  Flow& fl = flows_[f];
  if (--fl.refs != 0) return;
  flow_by_key_.erase(fl.key);
  if (fl.cls == FlowClass::kLatency) {
    latency_flows_.erase(std::find(latency_flows_.begin(), latency_flows_.end(), f));
    lat_dirty_ = true;
  }
  free_flows_.push_back(f);
}

void JustitiaScheduler::set_class(Picos now, QpId qp, FlowClass cls, std::uint32_t app, std::uint32_t weight) {
  if (qp >= qps_.size()) return;
  const FlowClass served = cls == FlowClass::kAuto ? FlowClass::kBandwidth : cls;  // undeclared: bandwidth
  if (!classes_.empty()) {
    ClassState& c = classes_[qp];
    c.app = app;
    c.weight = weight;
    c.classified = cls == FlowClass::kAuto ||
                   (params_.classify == Classify::kVerify && cls != FlowClass::kReference);
    c.queued_next = false;
    c.c.reset(served);
  }
  place_in_flow(now, qp, served, app, weight);
}

// `qp` joins the logical flow of (app, cls), keeping its ready packet.
void JustitiaScheduler::place_in_flow(Picos now, QpId qp, FlowClass cls, std::uint32_t app, std::uint32_t weight) {
  Qp& q = qps_[qp];
  const bool was_active = q.active_;
  const Packet pkt{q.bytes_, q.ends_};
  if (was_active) deactivate(now, qp);
  const std::uint64_t a = app == kOwnApp ? kDefaultAppBit | qp : app;
  assign(qp, flow_key(a, cls) | std::uint64_t{q.tenant_} << kTenantShift, cls, weight);
  if (was_active) activate(now, qp, pkt);
}

// `qp`'s tenant: its flow moves to the same application and class in that tenant.
void JustitiaScheduler::set_tenant(Picos now, QpId qp, std::uint32_t tenant, std::uint32_t weight) {
  if (qp >= qps_.size()) return;
  std::uint32_t idx = 0;
  if (tenant != kNoTenant) {
    while (idx < tenants_.size() && tenants_[idx].id != tenant) ++idx;
    if (idx == tenants_.size()) {
      if (idx > 0x7fff) return;  // 32767 tenants per scheduler at most
      tenants_.emplace_back();
      tenants_[idx].id = tenant;
    }
  }
  tenants_[idx].weight = std::max<std::uint32_t>(1, weight);
  Qp& q = qps_[qp];
  if (q.tenant_ == idx) return;
  q.tenant_ = static_cast<std::uint16_t>(idx);
  if (q.flow_ == kNil) return;
  const Flow& f = flows_[q.flow_];
  const std::uint64_t key = (f.key & ((std::uint64_t{1} << kTenantShift) - 1)) | std::uint64_t{idx} << kTenantShift;
  const FlowClass cls = f.cls;
  const std::uint32_t w = f.weight;
  const bool was_active = q.active_;
  const Packet pkt{q.bytes_, q.ends_};
  if (was_active) deactivate(now, qp);
  assign(qp, key, cls, w);
  if (was_active) activate(now, qp, pkt);
}

// ---- the waiting flows, by tenant --------------------------------------------

void JustitiaScheduler::wait_push(std::uint32_t unit, bool front, bool tenant_front) {
  const std::uint32_t ti = flows_[unit - max_qps_].tenant;
  Tenant& t = tenants_[ti];
  if (front) {
    Unit* u = units_.data();
    u[unit].prev_ = kNil;
    u[unit].next_ = t.waiting.head;
    if (t.waiting.head == kNil) t.waiting.tail = unit;
    else u[t.waiting.head].prev_ = unit;
    t.waiting.head = unit;
  } else {
    t.waiting.push_back(units_.data(), unit);
  }
  if (t.queued) return;
  t.queued = true;
  if (tenant_front || t.round != 0) {  // in the middle of its round: it goes on
    t.prev_ = kNil;
    t.next_ = tenant_ring_.head;
    if (tenant_ring_.head == kNil) tenant_ring_.tail = ti;
    else tenants_[tenant_ring_.head].prev_ = ti;
    tenant_ring_.head = ti;
  } else {
    tenant_ring_.push_back(tenants_.data(), ti);
  }
}

std::uint32_t JustitiaScheduler::wait_pop() {
  const std::uint32_t ti = tenant_ring_.head;
  Tenant& t = tenants_[ti];
  const std::uint32_t unit = t.waiting.pop_front(units_.data());
  if (t.waiting.empty()) tenant_unqueue(t, ti);
  return unit;
}

void JustitiaScheduler::wait_remove(std::uint32_t unit) {
  const std::uint32_t ti = flows_[unit - max_qps_].tenant;
  Tenant& t = tenants_[ti];
  t.waiting.remove(units_.data(), unit);
  if (!t.waiting.empty()) return;
  tenant_unqueue(t, ti);
  t.round = 0;  // idle: a new round when it comes back
}

void JustitiaScheduler::tenant_unqueue(Tenant& t, std::uint32_t idx) {
  if (!t.queued) return;
  tenant_ring_.remove(tenants_.data(), idx);
  t.queued = false;
}

// ---- latency activity, SafeUtil, tokens -------------------------------------

void JustitiaScheduler::touch_latency(Picos now, Flow& f) {
  const bool was = f.ever_active && now < f.last_active + params_.latency_idle;
  f.last_active = now;
  f.ever_active = true;
  if (!was) lat_dirty_ = true;
}

std::uint32_t JustitiaScheduler::latency_active(Picos now) {
  if (!lat_dirty_ && now < lat_expiry_) return lat_active_;
  lat_dirty_ = false;
  lat_active_ = 0;
  lat_expiry_ = kNever;
  for (std::uint32_t f : latency_flows_) {
    const Flow& fl = flows_[f];
    if (!fl.ever_active) continue;
    const Picos until = fl.last_active + params_.latency_idle;
    if (now < until) {
      ++lat_active_;
      lat_expiry_ = std::min(lat_expiry_, until);
    }
  }
  return lat_active_;
}

// Token size and SafeUtil follow whether latency flows are active.
void JustitiaScheduler::update_mode(Picos now) {
  const std::uint32_t l = latency_active(now);
  const std::uint32_t bytes = l != 0 ? params_.split_bytes : params_.token_bytes;
  if ((l != 0 || safe_util_ == max_rate_) && bytes == chunk_bytes_) return;
  accrue(now);  // at the old rate
  if (l == 0) {
    if (safe_util_ != max_rate_) trace_.emit(now, trace::Event::kSafeUtil, trace::kNoQp, 0, 0, 0, max_rate_, current99_);
    safe_util_ = max_rate_;
    unattainable_ = false;
    miss_since_ = kNever;
  }
  if (bytes != chunk_bytes_) {
    if (bytes < chunk_bytes_) {
      // Probes taken behind big tokens say nothing about the small ones: Current99
      // starts afresh when latency flows appear.
      window_.clear();
      current99_ = 0;
      ++split_epoch_;  // parked flows' credit is re-split when they come back
      // What is left of a big token is re-split (packets not granted yet are not on
      // the NIC, unlike in the paper's user-space pacer).
      for (std::uint32_t u = ring_.head; u != kNil; u = units_[u].next_)
        if (u >= max_qps_) {
          Flow& f = flows_[u - max_qps_];
          f.bytes_credit = std::min<std::int64_t>(f.bytes_credit, bytes);
        }
    }
    // Only small tokens are banked when latency flows appear (the bank refills to
    // bank_cap() while they are idle or the bandwidth flows are not backlogged).
    if (bytes < chunk_bytes_) bank_ = std::min<std::int64_t>(bank_, static_cast<std::int64_t>(params_.max_tokens) * bytes);
    chunk_bytes_ = bytes;
    const std::uint64_t ops = static_cast<std::uint64_t>(full_token_ops_) * bytes / params_.token_bytes;
    chunk_ops_ = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, ops));
  }
  set_tau();
}

// SafeUtil or the token size changed (the bank has been accrued up to now).
void JustitiaScheduler::set_tau() {
  const u128 t = (static_cast<u128>(chunk_bytes_) * 8 * kPicosPerSecond + safe_util_ - 1) / safe_util_;
  tau_ = static_cast<Picos>(std::max<u128>(1, t));
  update_gen();
}

void JustitiaScheduler::accrue(Picos now) {
  if (now <= bank_at_) return;
  constexpr u128 kBitPicosPerByte = 8 * static_cast<u128>(kPicosPerSecond);
  const u128 x = static_cast<u128>(now - bank_at_) * safe_util_ + bank_frac_;
  bank_at_ = now;
  const std::int64_t cap = bank_cap();
  const u128 bytes = x / kBitPicosPerByte;
  const std::int64_t before = bank_;
  if (bytes >= static_cast<u128>(cap) || bank_ + static_cast<std::int64_t>(bytes) >= cap) {
    bank_ = cap;
    bank_frac_ = 0;
  } else {
    bank_ += static_cast<std::int64_t>(bytes);
    bank_frac_ = static_cast<std::uint64_t>(x % kBitPicosPerByte);
  }
  // The generator issued a token when the bank passed a whole token's bytes.
  if (trace_.on(trace::Event::kTokenIssue) && bank_ / chunk_bytes_ > before / chunk_bytes_)
    trace_.emit(now, trace::Event::kTokenIssue, trace::kNoQp, 0, chunk_bytes_, 0,
                static_cast<std::uint64_t>(bank_ / chunk_bytes_), tau_);
}

// When the bank next holds a whole token.
void JustitiaScheduler::update_gen() {
  if (bank_ >= static_cast<std::int64_t>(chunk_bytes_)) {
    gen_at_ = bank_at_;
    return;
  }
  const u128 need = static_cast<u128>(chunk_bytes_ - bank_) * 8 * kPicosPerSecond - bank_frac_;
  gen_at_ = bank_at_ + static_cast<Picos>((need + safe_util_ - 1) / safe_util_);
}

// A flow stops holding a token: unspent bytes go back to the bank.
void JustitiaScheduler::refund(Flow& f) {
  if (f.bytes_credit > 0) {
    const std::int64_t cap = bank_cap();
    bank_ = std::min(cap, bank_ + f.bytes_credit);
    update_gen();
  }
  f.bytes_credit = 0;
  f.ops_credit = 0;
}

void JustitiaScheduler::refill(Picos now) {
  update_mode(now);
  accrue(now);
  // One flow holds a token at a time: the bank, not the ring, absorbs what the link
  // could not carry yet, so a latency message waits for one chunk at most.
  const std::int64_t chunk = chunk_bytes_;
  while (bank_ >= chunk && !wait_empty() && holders_ == 0) {
    const std::uint32_t unit = wait_pop();
    Flow& f = flows_[unit - max_qps_];
    give_token(now, f);
    if (f.bytes_credit >= qps_[f.qps.head].bytes_) {
      f.place = Place::kReady;
      ++holders_;
      ring_.push_back(units_.data(), unit);
    } else {  // a token smaller than its next packet: it takes the next one too
      wait_push(unit, true, true);
    }
  }
  update_gen();
}

void JustitiaScheduler::give_token(Picos now, Flow& f) {
  bank_ -= chunk_bytes_;
  ++tokens_issued_;
  f.bytes_credit += chunk_bytes_;
  f.ops_credit += chunk_ops_;
  ++f.round;
  // The tenant's round: after `weight` tokens the next tenant's turn.
  Tenant& t = tenants_[f.tenant];
  if (++t.round >= t.weight) {
    t.round = 0;
    if (t.queued && tenant_ring_.tail != f.tenant) {
      tenant_ring_.remove(tenants_.data(), f.tenant);
      tenant_ring_.push_back(tenants_.data(), f.tenant);
    }
  }
  trace_.emit(now, trace::Event::kTokenGrant, f.qps.head, 0, chunk_bytes_, static_cast<std::uint8_t>(f.cls),
              static_cast<std::uint64_t>(bank_ / chunk_bytes_));
}

void JustitiaScheduler::on_reference_latency(Picos now, Picos latency) {
  if (params_.signal == LatencySignal::kPassive) return;
  add_latency(now, latency);
}

// Only latency-class QPs' round trips count: they are the latencies Target99 is
// about, and without an active latency flow SafeUtil is MaxRate whatever they say.
void JustitiaScheduler::on_latency_sample(Picos now, QpId qp, Picos rtt) {
  if (params_.signal == LatencySignal::kProbe || qp >= qps_.size()) return;
  if (flow_class(qp) != FlowClass::kLatency) return;
  ++passive_samples_;
  add_latency(now, rtt);
}

// One latency into Current99, then Pseudocode 1.
void JustitiaScheduler::add_latency(Picos now, Picos latency) {
  update_mode(now);
  const std::uint64_t safe_util_before = safe_util_;
  const Picos current99_before = current99_;
  accrue(now);
  window_.add(latency);
  ++samples_;
  current99_ = window_.quantile(0.99);
  const std::uint32_t l = latency_active(now);
  const std::uint32_t bt = std::max<std::uint32_t>(1, backlogged_[0] + backlogged_[1]);
  if (unattainable_ && l > lat_at_give_up_) {  // a new latency flow: try again
    unattainable_ = false;
    miss_since_ = kNever;
  }
  if (l == 0) {
    safe_util_ = max_rate_;
  } else if (unattainable_) {
    safe_util_ = max_rate_;
  } else if (current99_ > params_.target99) {
    const std::uint64_t floor =
        static_cast<std::uint64_t>(static_cast<u128>(max_rate_) * bt / (static_cast<u128>(l) + bt));
    safe_util_ = std::max(safe_util_ / 2, floor);
    ++halvings_;
    if (miss_since_ == kNever) miss_since_ = now;
    if (params_.unattainable_after != 0 && now - miss_since_ >= params_.unattainable_after) {
      unattainable_ = true;  // left as the paper describes: give the bandwidth back
      lat_at_give_up_ = l;
      safe_util_ = max_rate_;
    }
  } else {
    miss_since_ = kNever;
    safe_util_ = std::min(max_rate_, safe_util_ + params_.increase_step_bps);
  }
  min_safe_util_ = std::min(min_safe_util_, safe_util_);
  set_tau();
  if (safe_util_ != safe_util_before || current99_ != current99_before)
    trace_.emit(now, trace::Event::kSafeUtil, trace::kNoQp, 0, 0, 0, safe_util_, current99_);
}

const JustitiaStats* JustitiaScheduler::justitia_stats() const {
  JustitiaStats& s = stats_;
  s.safe_util_bps = safe_util_;
  s.min_safe_util_bps = min_safe_util_;
  s.max_rate_bps = max_rate_;
  s.tau = tau_;
  s.current99 = current99_;
  s.target99 = params_.target99;
  s.token_bytes = chunk_bytes_;
  s.token_ops = chunk_ops_;
  s.tokens = static_cast<std::uint32_t>(bank_ / chunk_bytes_);
  s.tokens_issued = tokens_issued_;
  s.latency_flows = lat_active_;
  s.throughput_flows = backlogged_[0];
  s.bandwidth_flows = backlogged_[1];
  s.samples = samples_;
  s.passive_samples = passive_samples_;
  s.reclassified = reclassified_;
  s.halvings = halvings_;
  s.unattainable = unattainable_;
  return &s;
}

// ---- QPs -------------------------------------------------------------------

// `qp` has just become active: it joins its flow's backlog, and its list or the heap.
void JustitiaScheduler::enqueue_qp(Picos now, QpId qp) {
  Qp& q = qps_[qp];
  Flow& f = flows_[q.flow_];
  if (f.cls == FlowClass::kLatency) touch_latency(now, f);
  if (paced(f.cls) && f.backlog++ == 0) {
    ++backlogged_[f.cls == FlowClass::kThroughput ? 0 : 1];
    f.place = Place::kParked;  // no QP on its list yet
    f.round = 0;
    f.epoch = split_epoch_;
  }
  if (q.cost_ != 0 && q.next_ok_ > now) {
    park(qp);
    return;
  }
  make_eligible(now, qp, false);
}

// `qp` (active, on no list) may send now. A flow that had no QP to send comes back:
// at the back of the waiting list when new (front == false), else at the front of the
// ring if its credit covers the packet (or a banked token makes it), of the waiting
// list if not.
void JustitiaScheduler::make_eligible(Picos now, QpId qp, bool front) {
  Qp& q = qps_[qp];
  const std::uint32_t fid = q.flow_;
  Flow& f = flows_[fid];
  if (!paced(f.cls)) {
    if (front) push_ring_front(qp);
    else ring_.push_back(units_.data(), qp);
    return;
  }
  f.qps.push_back(qps_.data(), qp);
  if (f.place != Place::kParked) return;
  const std::uint32_t unit = max_qps_ + fid;
  if (!front) {
    f.place = Place::kWaiting;
    wait_push(unit, false, false);
    trace_withhold(now, qp);
    return;
  }
  if (f.epoch != split_epoch_) f.bytes_credit = std::min<std::int64_t>(f.bytes_credit, chunk_bytes_);
  if (!covers(f, q)) {
    accrue(now);
    if (bank_ >= static_cast<std::int64_t>(chunk_bytes_)) {
      give_token(now, f);
      update_gen();
    }
  }
  if (covers(f, q)) {
    f.place = Place::kReady;
    ++holders_;
    push_ring_front(unit);
  } else {
    f.place = Place::kWaiting;
    wait_push(unit, true, true);
    trace_withhold(now, qp);
  }
}

// `qp` (off its list) waits on its rate; its flow parks if it has no QP left to send.
void JustitiaScheduler::park(QpId qp) {
  heap_push(qp);
  const std::uint32_t fid = qps_[qp].flow_;
  Flow& f = flows_[fid];
  if (paced(f.cls) && f.qps.empty() && f.place != Place::kParked) flow_park(fid);
}

// Every backlogged QP of the flow waits on its rate: it leaves the ring (and lets
// another flow take a token) or the waiting list, keeping its credit.
void JustitiaScheduler::flow_park(std::uint32_t fid) {
  Flow& f = flows_[fid];
  const std::uint32_t unit = max_qps_ + fid;
  if (f.place == Place::kReady) {
    ring_.remove(units_.data(), unit);
    --holders_;
  } else if (f.place == Place::kWaiting) {
    wait_remove(unit);
  }
  f.place = Place::kParked;
  f.epoch = split_epoch_;
}

void JustitiaScheduler::release_due(Picos at) {
  while (!rate_heap_.empty() && qps_[rate_heap_.front()].next_ok_ <= at) {
    const QpId qp = rate_heap_.front();
    heap_remove(qp);
    make_eligible(at, qp, true);
  }
}

void JustitiaScheduler::heap_push(QpId qp) {
  const auto i = static_cast<std::uint32_t>(rate_heap_.size());
  rate_heap_.push_back(qp);
  qps_[qp].heap_pos_ = i;
  heap_up(i);
}

void JustitiaScheduler::heap_remove(QpId qp) {
  const std::uint32_t i = qps_[qp].heap_pos_;
  const auto last = static_cast<std::uint32_t>(rate_heap_.size() - 1);
  if (i != last) heap_swap(i, last);
  rate_heap_.pop_back();
  qps_[qp].heap_pos_ = kNil;
  if (i != last) {
    heap_up(i);
    heap_down(i);
  }
}

void JustitiaScheduler::heap_up(std::uint32_t i) {
  while (i != 0) {
    const std::uint32_t p = (i - 1) / 2;
    if (!heap_less(i, p)) break;
    heap_swap(i, p);
    i = p;
  }
}

void JustitiaScheduler::heap_down(std::uint32_t i) {
  const auto n = static_cast<std::uint32_t>(rate_heap_.size());
  while (true) {
    const std::uint32_t l = 2 * i + 1;
    if (l >= n) break;
    std::uint32_t m = l;
    if (l + 1 < n && heap_less(l + 1, l)) m = l + 1;
    if (!heap_less(m, i)) break;
    heap_swap(i, m);
    i = m;
  }
}

// A flow's last backlogged QP left: it forgets a partly used token, keeps a debt.
void JustitiaScheduler::flow_idle(std::uint32_t fid) {
  Flow& f = flows_[fid];
  const std::uint32_t unit = max_qps_ + fid;
  if (f.place == Place::kReady) {
    ring_.remove(units_.data(), unit);
    --holders_;
  } else if (f.place == Place::kWaiting) {
    wait_remove(unit);
  }
  f.place = Place::kIdle;
  refund(f);
  --backlogged_[f.cls == FlowClass::kThroughput ? 0 : 1];
}

void JustitiaScheduler::dequeue_qp(QpId qp) {
  Qp& q = qps_[qp];
  Flow& f = flows_[q.flow_];
  if (q.heap_pos_ != kNil) {
    heap_remove(qp);
  } else if (!paced(f.cls)) {
    ring_.remove(units_.data(), qp);
  } else {
    f.qps.remove(qps_.data(), qp);
  }
  if (!paced(f.cls)) return;
  if (--f.backlog == 0) {
    flow_idle(q.flow_);
  } else if (f.qps.empty() && f.place != Place::kParked) {
    flow_park(q.flow_);
  }
}

void JustitiaScheduler::activate(Picos now, QpId qp, Packet pkt) {
  if (qp >= qps_.size() || pkt.bytes == 0 || qps_[qp].active_) return;
  trace_activate(now, qp, pkt.bytes);
  Qp& q = qps_[qp];
  if (q.flow_ == kNil) assign(qp, flow_key(kDefaultAppBit | qp, FlowClass::kBandwidth), FlowClass::kBandwidth, 1);
  q.bytes_ = pkt.bytes;
  q.ends_ = pkt.ends_message;
  q.starts_ = q.last_ended_;
  if (!classes_.empty() && q.starts_) classes_[qp].queued_next = false;  // it found the QP idle
  q.active_ = true;
  ++active_;
  if (q.cost_ != 0) q.next_ok_ = std::max(q.next_ok_, now);  // no credit for idle time
  enqueue_qp(now, qp);
  update_mode(now);
}

bool JustitiaScheduler::enqueue_control(Picos, QpId qp, std::uint32_t bytes) {
  if (qp >= qps_.size() || bytes == 0) return false;
  return control_.push(qp, bytes);
}

// The token rate (max_rate_) stays as configured: the link model paces below it.
void JustitiaScheduler::set_link_bps(Picos, std::uint64_t bps) {
  if (bps == 0) return;
  config_.link_bps = bps;
  link_.set_bps(bps);
}

// As tassel: the limit applies from the QP's next packet; a faster one also shortens
// the wait still ahead (scaled by new / old packet time); none releases a waiting QP.
void JustitiaScheduler::set_rate(Picos now, QpId qp, std::uint64_t bps) {
  if (qp >= qps_.size()) return;
  trace_rate(now, qp, bps);
  Qp& q = qps_[qp];
  const ByteCost old_cost = q.cost_;
  q.rate_ = bps;
  q.cost_ = bps == kUnlimited ? 0 : byte_cost(bps);
  if (q.cost_ == 0) {
    if (q.heap_pos_ != kNil) {
      heap_remove(qp);
      make_eligible(now, qp, true);
    }
    return;
  }
  if (old_cost == 0) {
    q.next_ok_ = std::max(q.next_ok_, now);
    return;
  }
  if (q.cost_ < old_cost && q.next_ok_ > now) {
    q.next_ok_ = now + static_cast<Picos>(static_cast<u128>(q.next_ok_ - now) * q.cost_ / old_cost);
    if (q.heap_pos_ != kNil) heap_up(q.heap_pos_);
  }
}

std::uint64_t JustitiaScheduler::rate(QpId qp) const { return qp < qps_.size() ? qps_[qp].rate_ : kUnlimited; }

void JustitiaScheduler::deactivate(Picos, QpId qp) {
  if (qp >= qps_.size() || !qps_[qp].active_) return;
  dequeue_qp(qp);
  Qp& q = qps_[qp];
  q.active_ = false;
  q.last_ended_ = q.starts_;  // the dropped packet was not sent
  q.bytes_ = 0;
  --active_;
  if (link_.catches_up()) link_.set_due(next_deadline());  // nothing of its own is due any more
}

bool JustitiaScheduler::active(QpId qp) const { return qp < qps_.size() && qps_[qp].active_; }

// ---- dequeue -----------------------------------------------------------------

// A packet that starts a message needs the message processor: false, with the link
// held until the processor is free, if it is busy at `at`.
bool JustitiaScheduler::wait_for_processor(Picos at, const Qp& q) {
  if (msg_cost_ == 0 || !q.starts_) return false;
  if (proc_free_ > at) {
    link_.idle_until(proc_free_);
    return true;
  }
  proc_free_ = at + msg_cost_;
  return false;
}

void JustitiaScheduler::push_ring_front(std::uint32_t unit) {
  Unit* u = units_.data();
  u[unit].prev_ = kNil;
  u[unit].next_ = ring_.head;
  if (ring_.head == kNil) ring_.tail = unit;
  else u[ring_.head].prev_ = unit;
  ring_.head = unit;
}


// The flow at the head of the ring has spent its token (or the flow is idle).
void JustitiaScheduler::end_turn(Picos now, std::uint32_t fid) {
  Flow& f = flows_[fid];
  if (f.qps.head != kNil && trace_.mask() != 0) [[unlikely]] {
    // Its next packet waits for another token; in the middle of a message, the token
    // just spent ended one of the message's chunks.
    if (!qps_[f.qps.head].starts_)
      trace_.emit(now, trace::Event::kChunkSplit, f.qps.head, 0, chunk_bytes_, static_cast<std::uint8_t>(f.cls));
    trace_withhold(now, f.qps.head);
  }
  const std::uint32_t unit = max_qps_ + fid;
  ring_.remove(units_.data(), unit);
  --holders_;
  f.ops_credit = 0;  // what is left of the bytes (less than its next packet) stays with it
  f.place = Place::kWaiting;
  if (f.round < f.weight) {
    wait_push(unit, true, false);  // the rest of its weight: the next of its tenant's tokens
  } else {
    f.round = 0;
    wait_push(unit, false, false);
  }
}

std::size_t JustitiaScheduler::dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
  const Picos limit = now > kNever - config_.lookahead ? kNever : now + config_.lookahead;
  const Picos from = link_.from(now);
  std::size_t n = 0;
  while (n < out.size()) {
    const Picos at = link_.start(from);
    if (at > limit) break;  // the link is busy
    if (!control_.empty()) {
      const ControlQueue::Entry c = control_.pop();
      out[n] = {c.qp, c.bytes, at, GrantKind::kControl};
      trace_grant(now, out[n++]);
      link_.occupy(at, c.bytes);
      continue;
    }
    refill(at);
    release_due(at);
    const std::uint32_t unit = ring_.head;
    if (unit == kNil) {
      // Nothing may send before the next token or the next rate-limited QP's time.
      Picos t = wait_empty() ? kNever : gen_at_;
      if (!rate_heap_.empty()) t = std::min(t, qps_[rate_heap_.front()].next_ok_);
      if (t == kNever || t > limit) break;
      link_.idle_until(t);
      continue;
    }
    const bool is_flow = unit >= max_qps_;
    const std::uint32_t fid = is_flow ? unit - max_qps_ : kNil;
    const QpId qp = is_flow ? flows_[fid].qps.head : unit;
    Qp& q = qps_[qp];
    if (is_flow && (flows_[fid].bytes_credit < static_cast<std::int64_t>(q.bytes_) ||
                    (flows_[fid].ops_credit <= 0 && q.starts_))) {
      end_turn(at, fid);
      continue;
    }
    if (wait_for_processor(at, q)) continue;
    const std::uint32_t bytes = q.bytes_;
    out[n] = {qp, bytes, at, GrantKind::kData};
    trace_grant(now, out[n++]);
    link_.occupy(at, bytes);
    const bool ended = q.ends_;
    Flow& f = flows_[q.flow_];
    if (is_flow) {
      f.bytes_credit -= bytes;
      if (q.starts_) --f.ops_credit;
    } else if (f.cls == FlowClass::kLatency) {
      touch_latency(at, f);
    }
    const Packet next = src.on_grant(qp, bytes);
    if (!classes_.empty()) note_grant(qp, bytes, q.starts_, ended, next.bytes != 0);
    q.last_ended_ = ended;
    if (q.cost_ != 0) {
      // The next start: a packet time at the rate after this one's due start; a
      // packet the link or the tokens delayed lets the next catch up by one packet
      // time at most (the QP banks no more than one packet).
      const Picos gap = duration(bytes, q.cost_);
      q.next_ok_ = std::max(q.next_ok_, at > gap ? at - gap : 0) + gap;
    }
    if (next.bytes == 0) {
      q.active_ = false;
      q.bytes_ = 0;
      --active_;
      if (is_flow) {
        f.qps.pop_front(qps_.data());
        if (--f.backlog == 0) {
          flow_idle(fid);
          continue;
        }
        if (f.qps.empty()) {  // the others wait on their rate
          flow_park(fid);
          continue;
        }
      } else {
        ring_.pop_front(units_.data());
        continue;
      }
    } else {
      q.bytes_ = next.bytes;
      q.starts_ = ended;
      q.ends_ = next.ends_message;
      if (q.cost_ != 0 && q.next_ok_ > link_.start(from)) {  // it waits on its rate
        if (is_flow) f.qps.pop_front(qps_.data());
        else ring_.pop_front(units_.data());
        park(qp);
        if (!is_flow || f.qps.empty()) continue;
      } else if (ended) {  // its next message waits for the others' turn
        if (is_flow) {
          f.qps.pop_front(qps_.data());
          f.qps.push_back(qps_.data(), qp);
        } else {
          ring_.pop_front(units_.data());
          ring_.push_back(units_.data(), qp);
        }
      }
    }
    if (is_flow) {
      const Qp& h = qps_[f.qps.head];
      if (f.bytes_credit < static_cast<std::int64_t>(h.bytes_) || (f.ops_credit <= 0 && h.starts_)) end_turn(at, fid);
    }
  }
  if (!reclass_.empty()) apply_reclass(now);
  if (link_.catches_up()) link_.set_due(next_deadline());
  return n;
}

// ---- classification ----------------------------------------------------------

void JustitiaScheduler::note_grant(QpId qp, std::uint32_t bytes, bool starts, bool ends, bool more) {
  ClassState& c = classes_[qp];
  if (!c.classified) return;
  const bool queued = c.queued_next;
  if (ends) c.queued_next = more;  // the QP's next message is already waiting behind this one
  if (c.c.on_packet(bytes, starts, ends, queued, params_)) reclass_.push_back(qp);
}

// Moves the QPs whose class changed in this dequeue to their new logical flow.
void JustitiaScheduler::apply_reclass(Picos now) {
  for (QpId qp : reclass_) {
    ClassState& c = classes_[qp];
    if (!c.classified || flow_class(qp) == c.c.cls()) continue;
    const bool queued = c.queued_next;
    place_in_flow(now, qp, c.c.cls(), c.app, c.weight);
    c.queued_next = queued;
    ++reclassified_;
  }
  reclass_.clear();
}

Picos JustitiaScheduler::next_deadline() const {
  if (!control_.empty() || !ring_.empty()) return link_.free_at();
  Picos t = kNever;
  if (!wait_empty()) t = std::max(link_.free_at(), holders_ == 0 ? gen_at_ : link_.free_at());
  if (!rate_heap_.empty()) t = std::min(t, std::max(link_.free_at(), qps_[rate_heap_.front()].next_ok_));
  return t;
}

}  // namespace isoroce::sched
