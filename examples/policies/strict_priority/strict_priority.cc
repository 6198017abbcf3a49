// strict_priority: an isoroce transmit policy written only against the public
// plugin interface (sched/policy_api.h). Flow classes in strict priority: latency
// (and the reference probe) first, then throughput, then bandwidth; within a class,
// QPs take turns one whole message at a time, as a hardware RNIC serves them.
// Work-conserving; rate limits are not enforced (flags 0: isoroce refuses DCQCN
// with it). docs/policy-tutorial.md builds it step by step.
#include <sched/policy_api.h>

#include <array>
#include <cstdint>
#include <list>
#include <optional>
#include <vector>

namespace {

using isoroce::policy::Choice;
using isoroce::policy::Config;
using isoroce::policy::FlowClass;
using isoroce::policy::Picos;
using isoroce::policy::Slot;

class StrictPriority final : public isoroce::policy::Policy {
 public:
  explicit StrictPriority(const Config& c) : qps_(c.max_qps) {}

  void activate(Picos, std::uint32_t qp, std::uint32_t bytes, bool ends_message) override {
    Qp& q = qps_.at(qp);
    q.bytes = bytes;
    q.ends = ends_message;
    enqueue(qp);
  }

  void deactivate(Picos, std::uint32_t qp) override {
    dequeue(qp);
    qps_.at(qp).bytes = 0;
  }

  std::optional<Choice> pick(const Slot& slot) override {
    for (const std::list<std::uint32_t>& queue : queues_)  // the highest class with a packet
      if (!queue.empty()) return Choice{queue.front(), qps_[queue.front()].bytes, slot.earliest()};
    return std::nullopt;  // nothing ready: next_deadline() is kNever
  }

  void granted(Picos, std::uint32_t qp, std::uint32_t, Picos, std::uint32_t next_bytes,
               bool next_ends) override {
    Qp& q = qps_.at(qp);
    const bool message_done = q.ends;
    q.bytes = next_bytes;
    q.ends = next_ends;
    if (next_bytes == 0 || message_done) {
      dequeue(qp);                       // idle, or its message is out:
      if (next_bytes != 0) enqueue(qp);  // the next one waits for its turn
    }
  }

  Picos next_deadline() const override { return isoroce::policy::kNever; }

  void set_class(Picos, std::uint32_t qp, FlowClass cls, std::uint32_t, std::uint32_t) override {
    Qp& q = qps_.at(qp);
    const bool queued = q.queued;
    if (queued) dequeue(qp);
    q.level = level_of(cls);
    if (queued) enqueue(qp);
  }

 private:
  struct Qp {
    std::uint32_t bytes = 0;  // the ready packet (0: none)
    bool ends = true;         // it ends a message
    unsigned level = 2;       // 0 latency, 1 throughput, 2 bandwidth (the default class)
    bool queued = false;
    std::list<std::uint32_t>::iterator pos;
  };

  static unsigned level_of(FlowClass c) {
    switch (c) {
      case FlowClass::kLatency:
      case FlowClass::kReference: return 0;
      case FlowClass::kThroughput: return 1;
      case FlowClass::kBandwidth: return 2;
    }
    return 2;
  }
  void enqueue(std::uint32_t qp) {
    Qp& q = qps_[qp];
    if (q.queued) return;
    q.pos = queues_[q.level].insert(queues_[q.level].end(), qp);
    q.queued = true;
  }
  void dequeue(std::uint32_t qp) {
    Qp& q = qps_.at(qp);
    if (!q.queued) return;
    queues_[q.level].erase(q.pos);
    q.queued = false;
  }

  std::vector<Qp> qps_;
  std::array<std::list<std::uint32_t>, 3> queues_;  // ready QPs per level, in turn order
};

}  // namespace

ISOROCE_POLICY_EXPORT(StrictPriority, "strict_priority",
                      "flow classes in strict priority (latency, throughput, bandwidth), round robin by message "
                      "within a class",
                      1, 0)
