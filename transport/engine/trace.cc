// Tracing of the engine (sched/trace.h, docs/profiling.md): the sink attached,
// the scheduler's records translated to QPNs, frames read back for their BTH.
#include "transport/engine/engine_impl.h"
#include <cstring>

#include "transport/wire/headers.h"

namespace isoroce::transport::detail {

void EngineImpl::attach_trace(trace::Sink* sink, trace::EventMask mask, uint16_t port) {
  trace_.attach(sink, mask, port);
  sched_->attach_trace(trace_.mask() != 0 ? &sched_trace_ : nullptr, trace_.mask(), port);
  // The rate limits already in force, so a trace started late knows them (kRate).
  if (!trace_.on(trace::Event::kRate)) return;
  for (const auto& q : slots_)
    if (q && sched_->rate(q->slot) != sched::kUnlimited)
      trace(trace_now_, trace::Event::kRate, *q, 0, 0, sched_->rate(q->slot));
}

// Scheduler ids are the engine's slots: a record about a slot names its QP's QPN and
// class; one about the port (trace::kNoQp) or a slot already freed passes unchanged.
void EngineImpl::SchedTrace::record(const trace::Record& r) {
  trace::Record out = r;
  if (r.qp < engine_->slots_.size()) {
    if (const QpCtx* q = engine_->slots_[r.qp].get()) {
      out.qp = q->qp.qpn().value();
      out.cls = q->cls;
    }
  }
  engine_->trace_.sink()->record(out);
}

// The engine builds untagged frames of its own address family: the BTH follows
// Ethernet, IP and UDP at a fixed offset.
void EngineImpl::trace_frame_tx(Picos departure, const QpCtx& q, std::span<const uint8_t> frame) const {
  if (!trace_.on(trace::Event::kFrameTx)) return;
  const size_t bth = 14 + (wire::is_ipv4_mapped(config_.ip) ? 20 : 40) + 8;
  if (frame.size() < bth + sizeof(wire::Bth)) return;
  wire::Bth h;
  std::memcpy(&h, frame.data() + bth, sizeof(h));
  trace_.emit(departure, trace::Event::kFrameTx, q.qp.qpn().value(), h.psn_value().value(),
              static_cast<uint32_t>(frame.size()), q.cls, h.opcode);
}

}  // namespace isoroce::transport::detail
