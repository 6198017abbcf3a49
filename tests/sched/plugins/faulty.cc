// A plugin whose pick throws after a few packets (ISOROCE_POLICY_EXPORT catches it
// at the C boundary): the port must carry on with fifo, the fault logged.
#include <optional>
#include <stdexcept>
#include <vector>

#include "sched/policy_api.h"

namespace {

using namespace isoroce::policy;

class Faulty final : public Policy {
 public:
  explicit Faulty(const Config& c) : ready_(c.max_qps) {}
  void activate(Picos, std::uint32_t qp, std::uint32_t bytes, bool) override { ready_.at(qp) = bytes; }
  void deactivate(Picos, std::uint32_t qp) override { ready_.at(qp) = 0; }
  std::optional<Choice> pick(const Slot& s) override {
    if (++picks_ > 3) throw std::runtime_error("faulty: out of ideas");
    for (std::uint32_t q = 0; q < ready_.size(); ++q)
      if (ready_[q] != 0) return Choice{q, ready_[q], s.earliest()};
    return std::nullopt;
  }
  void granted(Picos, std::uint32_t qp, std::uint32_t, Picos, std::uint32_t next, bool) override { ready_[qp] = next; }
  Picos next_deadline() const override { return kNever; }

 private:
  std::vector<std::uint32_t> ready_;
  int picks_ = 0;
};

}  // namespace

ISOROCE_POLICY_EXPORT(Faulty, "faulty", "throws from pick after three packets (tests)", 1, 0)
