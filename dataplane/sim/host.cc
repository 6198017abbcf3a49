// A host: one transport::Engine driven in virtual time, its NIC on the fabric,
// and the application CPU that posts work requests for the flows.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "dataplane/sim/reference_flow.h"
#include "dataplane/sim/sim_internal.h"
#include "transport/verbs/mtu.h"

namespace isoroce::sim::detail {

namespace {
constexpr size_t kTxBurst = 32;
constexpr size_t kPollBurst = 32;
constexpr int kMaxServiceRounds = 64;
constexpr Picos kStallStep = 1'000;  // 1 ns
}  // namespace

Host::Host(World& w, uint32_t index, const HostConfig& cfg) : w_(w), index_(index), cfg_(cfg) {}

std::optional<ScenarioError> Host::init() {
  transport::EngineConfig ec;
  ec.mac = host_mac(index_);
  ec.ip = cfg_.ip;
  ec.key_seed = component_seed(w_.scenario.seed, component::kEngine + index_);
  ec.qpn_seed = static_cast<uint32_t>(ec.key_seed >> 40) | 1;
  ec.policy = cfg_.policy;
  ec.link_bps = cfg_.link_bps;
  ec.active_mtu = verbs::mtu_from_bytes(cfg_.mtu).value_or(IBV_MTU_4096);  // validated by the scenario
  ec.max_qps = kMaxQpsPerHost + 96;
  ec.dcqcn = cfg_.dcqcn;
  ec.max_msgs_per_sec = cfg_.max_msgs_per_sec;
  ec.justitia = cfg_.justitia;
  ec.rnic = cfg_.rnic;  // its pipeline jitter follows the scenario's seed and [host.rnic] seed
  ec.rnic.seed = component_seed(w_.scenario.seed ^ cfg_.rnic.seed, component::kEngine + index_);
  const std::string key = "host[" + std::to_string(index_) + "]";
  auto engine = transport::Engine::create(ec);
  if (!engine.ok())
    return ScenarioError{key, "the engine refused its configuration: " +
                                  std::string(std::strerror(engine.err()))};
  engine_ = std::move(engine.value());
  verbs_ = std::make_unique<workload::EngineVerbs>(*engine_);
  auto pd = engine_->alloc_pd();
  if (!pd.ok()) return ScenarioError{key, "alloc_pd failed: " + std::string(std::strerror(pd.err()))};
  pd_ = pd.value();
  w_.fabric->attach(index_, this);
  return std::nullopt;
}

std::optional<ScenarioError> Host::alloc_region(uint64_t len, uint32_t access, Region* out) {
  const uint64_t size = (std::max<uint64_t>(len, 64) + 4095) / 4096 * 4096;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, size));
  if (!p) return ScenarioError{"host[" + std::to_string(index_) + "]", "out of memory"};
  std::memset(p, 0, size);
  out->mem = std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
  out->len = size;
  // Deterministic iovas (64 GiB apart), independent of where malloc put the bytes.
  out->iova = w_.next_region++ << 36;
  auto keys = engine_->reg_mr(pd_, p, size, out->iova, access);
  if (!keys.ok())
    return ScenarioError{"host[" + std::to_string(index_) + "]",
                         "reg_mr failed: " + std::string(std::strerror(keys.err()))};
  out->lkey = keys.value().lkey;
  out->rkey = keys.value().rkey;
  return std::nullopt;
}

void Host::bind_cq(transport::CqHandle cq, Flow* flow, int side) { cqs_.push_back({cq, flow, side}); }
void Host::bind_cq(transport::CqHandle cq, ReferenceFlow* ref) { cqs_.push_back({cq, nullptr, -1, ref}); }

void Host::collect_events() {
  for (const transport::AsyncEvent& e : engine_->take_async_events()) {
    if (e.type != transport::AsyncEventType::kLatencyTargetMissed) continue;
    ++admission_warnings_;
    const sched::JustitiaStats* js = engine_->scheduler().justitia_stats();
    log_.push_back("host " + cfg_.name + ": latency-class QP " + cfg_.name + "/" + std::to_string(e.id) +
                   " created while Current99 " + std::to_string(js ? js->current99 / 1'000'000.0 : 0.0) +
                   " us > Target99 " + std::to_string(js ? js->target99 / 1'000'000.0 : 0.0) + " us");
  }
}

void Host::on_frame(Picos now, std::span<uint8_t> frame) {
  if (w_.tap) w_.tap(TapFrame{now, index_, false, frame});
  engine_->receive(now, frame);
  request_service(now);
}

void Host::request_service(Picos t) {
  if (t >= wake_at_) return;
  wake_at_ = t;
  w_.events.push(t, EventKind::kHostService, index_, ++wake_gen_);
}

void Host::on_service_event(Picos now, uint64_t gen) {
  if (gen != wake_gen_) return;  // superseded by an earlier request
  wake_at_ = kNever;
  service(now);
}

void Host::service(Picos now) {
  in_service_ = true;
  now_ = now;
  engine_->advance(now);
  for (int round = 0; round < kMaxServiceRounds; ++round) {
    const size_t completions = poll_cqs(now);
    const size_t sent = transmit(now);
    if (completions == 0 && sent == 0) break;
  }
  in_service_ = false;
  Picos next = engine_->next_deadline();
  if (next == kNever) return;
  if (next <= now) {
    // Due now and yet nothing moved: step on rather than spin in place.
    ++stalls_;
    next = now + kStallStep;
  }
  request_service(next);
}

size_t Host::poll_cqs(Picos now) {
  size_t total = 0;
  ibv_wc wcs[kPollBurst];
  for (size_t i = 0; i < cqs_.size(); ++i) {
    for (;;) {
      const Binding b = cqs_[i];
      const int n = engine_->poll_cq(b.cq, std::span<ibv_wc>(wcs, kPollBurst));
      if (n <= 0) break;
      for (int k = 0; k < n; ++k) {
        if (b.ref) b.ref->on_completion(now, wcs[k]);
        else b.flow->on_completion(now, b.side, wcs[k]);
      }
      total += static_cast<size_t>(n);
      if (static_cast<size_t>(n) < kPollBurst) break;
    }
  }
  return total;
}

size_t Host::transmit(Picos now) {
  size_t total = 0;
  for (;;) {
    const size_t n = engine_->transmit(now, *this, kTxBurst);
    total += n;
    if (n < kTxBurst) break;
  }
  if (tx_pending_) {  // a buffer the engine asked for and did not use
    w_.fabric->pool().release(tx_frame_);
    tx_pending_ = false;
  }
  return total;
}

std::span<uint8_t> Host::tx_buffer(size_t len) {
  FramePool& pool = w_.fabric->pool();
  if (!tx_pending_) {
    tx_frame_ = pool.alloc(len);
    tx_pending_ = true;
  } else {
    pool.bytes(tx_frame_).resize(len);
  }
  return pool.span(tx_frame_);
}

void Host::tx_commit(Picos departure, size_t len) {
  FramePool& pool = w_.fabric->pool();
  if (!tx_pending_) return;
  auto& bytes = pool.bytes(tx_frame_);
  if (len < bytes.size()) bytes.resize(len);
  sniff(bytes);
  if (w_.tap) w_.tap(TapFrame{std::max(now_, departure), index_, true, bytes});
  tx_pending_ = false;
  w_.fabric->send(now_, index_, departure, tx_frame_);
}

void Host::sniff(std::span<const uint8_t> frame) {
  const auto bth = peek_bth(frame);
  if (!bth || bth->dst_mac_tail == 0) return;
  const uint32_t dst_host = bth->dst_mac_tail - 1u;
  const QpRef* ref = w_.find_qp(dst_host, bth->dest_qp);
  if (ref) {
    const workload::WireSeen seen{bth->opcode, bth->psn, bth->aeth_syndrome, bth->read_dma_len, frame.size()};
    w_.flows[ref->flow]->on_wire(*ref, seen);
  }
}

void Host::app_post(Picos now, Flow* flow, uint32_t q) {
  if (cfg_.msg_cost == 0) {
    flow->post(now, q);
    if (!in_service_) request_service(now);
    return;
  }
  cpu_free_ = std::max(cpu_free_, now) + cfg_.msg_cost;
  posts_.push_back({flow, q});
  w_.events.push(cpu_free_, EventKind::kAppPost, index_);
}

void Host::on_app_post_event(Picos now) {
  const PendingPost p = posts_.front();
  posts_.pop_front();
  p.flow->post(now, p.q);
  request_service(now);
}

HostReport Host::report() const {
  HostReport r;
  r.name = cfg_.name;
  r.engine = engine_->counters();
  r.stalls = stalls_;
  r.dcqcn = cfg_.dcqcn.enabled;
  if (r.dcqcn) {
    for (const auto& [key, ref] : w_.qps) {
      if (key >> 32 != index_) continue;
      QpDcqcnReport q;
      q.qpn = static_cast<uint32_t>(key);
      q.flow = w_.scenario.flows[ref.flow].name;
      q.requester = ref.requester;
      q.state = engine_->qp_dcqcn(wire::Qpn(q.qpn));
      r.dcqcn_qps.push_back(std::move(q));
    }
    std::sort(r.dcqcn_qps.begin(), r.dcqcn_qps.end(),
              [](const QpDcqcnReport& a, const QpDcqcnReport& b) { return a.qpn < b.qpn; });
  }
  if (const sched::JustitiaStats* js = engine_->scheduler().justitia_stats()) {
    r.has_justitia = true;
    r.justitia = *js;
  }
  if (ref_) {
    r.ref_probes = ref_->probes();
    r.ref_latency = ref_->latency();
  }
  r.admission_warnings = admission_warnings_;
  r.log = log_;
  return r;
}

}  // namespace isoroce::sim::detail
