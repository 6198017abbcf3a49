#include "sched/plugin_scheduler.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "sched/fifo.h"

namespace isoroce::sched {

static_assert(ISOROCE_POLICY_ENFORCES_RATES == kCapEnforcesRates);
static_assert(ISOROCE_POLICY_REFERENCE_LATENCY == kCapReferenceLatency);
static_assert(ISOROCE_POLICY_MESSAGE_RATE == kCapMessageRate);
static_assert(ISOROCE_CLASS_LATENCY == static_cast<std::uint32_t>(FlowClass::kLatency));
static_assert(ISOROCE_CLASS_THROUGHPUT == static_cast<std::uint32_t>(FlowClass::kThroughput));
static_assert(ISOROCE_CLASS_BANDWIDTH == static_cast<std::uint32_t>(FlowClass::kBandwidth));
static_assert(ISOROCE_CLASS_REFERENCE == static_cast<std::uint32_t>(FlowClass::kReference));
static_assert(ISOROCE_OWN_APP == kOwnApp);
static_assert(ISOROCE_NEVER == kNever);

std::string check_policy_ops(const isoroce_policy_ops* ops) {
  if (ops == nullptr) return "the entry point returned no ops table";
  if (ops->abi_version != ISOROCE_POLICY_ABI_VERSION)
    return "policy ABI version " + std::to_string(ops->abi_version) + ", this isoroce speaks ABI version " +
           std::to_string(ISOROCE_POLICY_ABI_VERSION) + " (rebuild the plugin against its sched/policy_api.h)";
  if (ops->size < sizeof(isoroce_policy_ops))
    return "ops table of " + std::to_string(ops->size) + " bytes, ABI version " +
           std::to_string(ISOROCE_POLICY_ABI_VERSION) + " has " + std::to_string(sizeof(isoroce_policy_ops));
  if (ops->name == nullptr || !valid_policy_name(ops->name))
    return "the policy's name is not 1 to 32 letters, digits, '_', '.' or '-'";
  const std::pair<const char*, bool> required[] = {
      {"create", ops->create != nullptr},         {"destroy", ops->destroy != nullptr},
      {"activate", ops->activate != nullptr},     {"deactivate", ops->deactivate != nullptr},
      {"pick", ops->pick != nullptr},             {"granted", ops->granted != nullptr}};
  for (const auto& [what, present] : required)
    if (!present) return std::string("policy '") + ops->name + "' has no " + what + " callback";
  return {};
}

std::string register_policy_ops(const isoroce_policy_ops& ops, std::string origin, PolicyLog log) {
  if (std::string e = check_policy_ops(&ops); !e.empty()) return e;
  PolicyOps entry;
  entry.name = ops.name;
  entry.description = ops.description ? ops.description : "";
  entry.version = ops.version;
  entry.caps = ops.flags & (kCapEnforcesRates | kCapReferenceLatency | kCapMessageRate);
  entry.origin = std::move(origin);
  entry.create = [&ops, log = std::move(log)](const Config& c) { return PluginScheduler::create(ops, c, log); };
  return register_policy(std::move(entry));
}

std::unique_ptr<Scheduler> PluginScheduler::create(const isoroce_policy_ops& ops, const Config& config,
                                                   PolicyLog log) {
  if (!validate(config).empty()) return nullptr;
  const isoroce_policy_config pc{sizeof(isoroce_policy_config), config.max_qps, config.link_bps,
                                 config.max_msgs_per_sec, config.lookahead};
  void* state = nullptr;
  try {
    state = ops.create(&pc);
  } catch (...) {  // see the header: a plugin must not take the daemon down
    state = nullptr;
  }
  if (state == nullptr) return nullptr;
  return std::unique_ptr<Scheduler>(new PluginScheduler(ops, state, config, std::move(log)));
}

PluginScheduler::PluginScheduler(const isoroce_policy_ops& ops, void* state, const Config& config, PolicyLog log)
    : ops_(ops),
      state_(state),
      config_(config),
      log_(std::move(log)),
      ready_(config.max_qps),
      rates_(config.max_qps, kUnlimited),
      link_(config.link_bps),
      control_(config.control_capacity) {}

PluginScheduler::~PluginScheduler() {
  if (state_ == nullptr) return;
  try {
    ops_.destroy(state_);
  } catch (...) {
  }
}

template <class F>
bool PluginScheduler::call(const char* what, F&& f, int* rc) {
  wait_until_ = 0;  // any event may let the policy pick sooner than it said
  int r = -1;
  std::string why;
  try {
    r = f();
  } catch (const std::exception& e) {
    why = std::string(what) + " threw: " + e.what();
  } catch (...) {
    why = std::string(what) + " threw";
  }
  if (rc) *rc = r;
  if (r >= 0) return true;
  if (why.empty()) {
    why = std::string(what) + " failed (" + std::to_string(r) + ")";
    const char* e = nullptr;
    if (ops_.last_error) {
      try {
        e = ops_.last_error(state_);
      } catch (...) {
      }
    }
    if (e != nullptr && *e != '\0') why += ": " + std::string(e);
  }
  fail(std::move(why));
  return false;
}

void PluginScheduler::fail(std::string why) {
  if (!running()) return;
  void* state = std::exchange(state_, nullptr);
  try {
    ops_.destroy(state);
  } catch (...) {
  }
  fault_ = "policy " + std::string(ops_.name) + ": " + why + "; the port runs fifo from now on";
  if (log_) log_(fault_);
  fallback_ = make_scheduler("fifo", config_);
  fallback_from_ = link_.free_at();
  const Picos now = link_.free_at();
  while (!control_.empty()) {
    const ControlQueue::Entry c = control_.pop();
    fallback_->enqueue_control(now, c.qp, c.bytes);
  }
  for (QpId qp = 0; qp < ready_.size(); ++qp) {
    if (rates_[qp] != kUnlimited) fallback_->set_rate(now, qp, rates_[qp]);
    if (ready_[qp].bytes != 0) fallback_->activate(now, qp, {ready_[qp].bytes, ready_[qp].ends_message});
  }
}

void PluginScheduler::activate(Picos now, QpId qp, Packet pkt) {
  if (fallback_) return fallback_->activate(now, qp, pkt);
  if (qp >= ready_.size() || pkt.bytes == 0 || ready_[qp].bytes != 0) return;
  ready_[qp] = {pkt.bytes, pkt.ends_message};
  ++active_;
  call("activate", [&] { return ops_.activate(state_, now, qp, pkt.bytes, pkt.ends_message ? 1 : 0); });
}

bool PluginScheduler::enqueue_control(Picos now, QpId qp, std::uint32_t bytes) {
  if (fallback_) return fallback_->enqueue_control(now, qp, bytes);
  if (qp >= ready_.size() || bytes == 0) return false;
  return control_.push(qp, bytes);
}

// The plugin keeps the link rate it was configured with (isoroce_policy_config):
// the host's link model paces its grants.
void PluginScheduler::set_link_bps(Picos, std::uint64_t bps) {
  if (bps == 0) return;
  config_.link_bps = bps;
  link_.set_bps(bps);
}

void PluginScheduler::set_rate(Picos now, QpId qp, std::uint64_t bps) {
  if (qp >= rates_.size()) return;
  rates_[qp] = bps;
  if (fallback_) return fallback_->set_rate(now, qp, bps);
  if (ops_.set_rate) call("set_rate", [&] { return ops_.set_rate(state_, now, qp, bps); });
}

std::uint64_t PluginScheduler::rate(QpId qp) const { return qp < rates_.size() ? rates_[qp] : kUnlimited; }

void PluginScheduler::deactivate(Picos now, QpId qp) {
  if (fallback_) return fallback_->deactivate(now, qp);
  if (qp >= ready_.size() || ready_[qp].bytes == 0) return;
  ready_[qp] = {};
  --active_;
  call("deactivate", [&] { return ops_.deactivate(state_, now, qp); });
}

bool PluginScheduler::active(QpId qp) const {
  if (fallback_) return fallback_->active(qp);
  return qp < ready_.size() && ready_[qp].bytes != 0;
}

std::size_t PluginScheduler::active_qps() const { return fallback_ ? fallback_->active_qps() : active_; }

std::size_t PluginScheduler::fixed_bytes() const {
  return sizeof(*this) + control_.capacity() * sizeof(ControlQueue::Entry) + (fallback_ ? fallback_->fixed_bytes() : 0);
}

void PluginScheduler::set_class(Picos now, QpId qp, FlowClass cls, std::uint32_t app, std::uint32_t weight) {
  if (!running() || qp >= ready_.size() || !ops_.set_class) return;
  call("set_class",
       [&] { return ops_.set_class(state_, now, qp, static_cast<std::uint32_t>(cls), app, weight); });
}

void PluginScheduler::on_reference_latency(Picos now, Picos latency) {
  if (!running() || !ops_.reference_latency) return;
  call("reference_latency", [&] { return ops_.reference_latency(state_, now, latency); });
}

void PluginScheduler::on_completion(Picos now, QpId qp, std::uint64_t bytes) {
  if (!running() || qp >= ready_.size() || !ops_.completion) return;
  call("completion", [&] { return ops_.completion(state_, now, qp, bytes); });
}

bool PluginScheduler::pick(Picos now, Picos horizon, isoroce_policy_slot* s) {
  const Picos earliest = link_.start(now);
  *s = {now, link_.free_at(), horizon, 0, 0, 0};
  int rc = 0;
  if (!call("pick", [&] { return ops_.pick(state_, s); }, &rc)) return false;
  if (rc == 0) {  // nothing by the horizon: the policy's deadline must be later
    Picos at = 0;
    if (ops_.next_deadline && !call("next_deadline", [&] { return ops_.next_deadline(state_, &at); })) return false;
    if (at <= horizon)
      fail("pick chose nothing, yet next_deadline (" + std::to_string(at) + " ps) is not after the horizon (" +
           std::to_string(horizon) + " ps) with " + std::to_string(active_) + " QP(s) ready");
    else
      wait_until_ = at;  // until then, or until the next event
    return false;
  }
  const std::string where = "pick chose QP " + std::to_string(s->qp);
  if (rc != 1) {
    fail("pick returned " + std::to_string(rc));
  } else if (s->qp >= ready_.size()) {
    fail(where + ", out of range (max_qps " + std::to_string(ready_.size()) + ")");
  } else if (ready_[s->qp].bytes == 0) {
    fail(where + ", which has no packet ready");
  } else if (s->bytes != ready_[s->qp].bytes) {
    fail(where + " with " + std::to_string(s->bytes) + " bytes; its ready packet has " +
         std::to_string(ready_[s->qp].bytes));
  } else if (s->departure < earliest) {
    fail(where + " departing at " + std::to_string(s->departure) + " ps, in the past (the link is free at " +
         std::to_string(earliest) + " ps)");
  } else if (s->departure > horizon) {
    fail(where + " departing at " + std::to_string(s->departure) + " ps, after the horizon " +
         std::to_string(horizon) + " ps");
  }
  return running();
}

std::size_t PluginScheduler::dequeue(Picos now, std::span<Grant> out, PacketSource& src) {
  if (fallback_) return dequeue_fallback(now, out, src);
  const Picos horizon = now > kNever - config_.lookahead ? kNever : now + config_.lookahead;
  std::size_t n = 0;
  while (n < out.size()) {
    const Picos at = link_.start(now);
    if (at > horizon) break;  // the link is busy
    if (!control_.empty()) {
      const ControlQueue::Entry c = control_.pop();
      out[n++] = {c.qp, c.bytes, at, GrantKind::kControl};
      link_.occupy(at, c.bytes);
      continue;
    }
    if (active_ == 0) break;
    isoroce_policy_slot s{};
    if (!pick(now, horizon, &s)) break;
    out[n++] = {s.qp, s.bytes, s.departure, GrantKind::kData};
    link_.occupy(s.departure, s.bytes);
    const Packet next = src.on_grant(s.qp, s.bytes);
    ready_[s.qp] = {next.bytes, next.ends_message};
    if (next.bytes == 0) --active_;
    if (!call("granted", [&] {
          return ops_.granted(state_, now, s.qp, s.bytes, s.departure, next.bytes, next.ends_message ? 1 : 0);
        }))
      break;
  }
  if (fallback_) n += dequeue_fallback(now, out.subspan(n), src);
  return n;
}

std::size_t PluginScheduler::dequeue_fallback(Picos now, std::span<Grant> out, PacketSource& src) {
  if (now < fallback_from_) return 0;  // the policy's last packet is still on the link
  return fallback_->dequeue(now, out, src);
}

Picos PluginScheduler::next_deadline() const {
  if (fallback_) {
    const Picos t = fallback_->next_deadline();
    return t == kNever ? kNever : std::max(t, fallback_from_);
  }
  if (!control_.empty()) return link_.free_at();
  if (active_ == 0) return kNever;
  return std::max(wait_until_, link_.free_at());
}

}  // namespace isoroce::sched
