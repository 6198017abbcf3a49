// A policy behind the C ops table of sched/policy_api.h, as a Scheduler: the host
// side of the plugin interface. It keeps the link model, the control queue, each
// QP's ready packet and rate, asks the policy which ready packet departs next and
// checks every answer. A policy that breaks the contract (policy_api.h: a QP out of
// range or not ready, a wrong size, a departure outside [max(now, link free),
// horizon], a failing callback, an exception) is destroyed and the port carries on
// with fifo: the fault is logged once, fault() says why, no QP is harmed.
//
// No exceptions are thrown here; a C++ plugin that lets one escape its C table
// (ISOROCE_POLICY_EXPORT never does) is caught at the call, the one place sched/
// catches, because a plugin must not take the daemon down.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sched/link.h"
#include "sched/policy_api.h"
#include "sched/policy_registry.h"
#include "sched/scheduler.h"

namespace isoroce::sched {

// Where a policy's fault is reported (the daemon's log, the simulator's stderr).
using PolicyLog = std::function<void(std::string_view message)>;

// Empty if `ops` is a usable table of this ABI, else what is wrong with it.
std::string check_policy_ops(const isoroce_policy_ops* ops);

// Registers the policy of `ops` (checked by check_policy_ops; it must outlive the
// process, as a plugin's static table does); `origin` names it in messages (the
// plugin's path). Empty, or what is wrong.
std::string register_policy_ops(const isoroce_policy_ops& ops, std::string origin, PolicyLog log);

class PluginScheduler final : public Scheduler {
 public:
  // nullptr if the policy's create refuses `config`.
  static std::unique_ptr<Scheduler> create(const isoroce_policy_ops& ops, const Config& config, PolicyLog log);
  ~PluginScheduler() override;

  std::string_view name() const override { return ops_.name; }
  void activate(Picos now, QpId qp, Packet pkt) override;
  bool enqueue_control(Picos now, QpId qp, std::uint32_t bytes) override;
  void set_rate(Picos now, QpId qp, std::uint64_t bps) override;
  void set_link_bps(Picos now, std::uint64_t bps) override;
  std::uint64_t link_bps() const override { return config_.link_bps; }
  std::uint64_t rate(QpId qp) const override;
  void deactivate(Picos now, QpId qp) override;
  std::size_t dequeue(Picos now, std::span<Grant> out, PacketSource& src) override;
  Picos next_deadline() const override;
  bool active(QpId qp) const override;
  std::size_t active_qps() const override;
  std::size_t bytes_per_qp() const override { return sizeof(Ready) + sizeof(std::uint64_t); }
  std::size_t fixed_bytes() const override;
  void set_class(Picos now, QpId qp, FlowClass cls, std::uint32_t app, std::uint32_t weight) override;
  void on_reference_latency(Picos now, Picos latency) override;
  void on_completion(Picos now, QpId qp, std::uint64_t bytes) override;
  std::string_view fault() const override { return fault_; }

 private:
  struct Ready {
    std::uint32_t bytes = 0;  // 0: the QP has nothing ready
    bool ends_message = true;
  };

  PluginScheduler(const isoroce_policy_ops& ops, void* state, const Config& config, PolicyLog log);
  // Runs one callback; false (and the policy disabled) if it failed or threw.
  template <class F>
  bool call(const char* what, F&& f, int* rc = nullptr);
  // Disables the policy: logs `why`, destroys it, hands every QP to fifo.
  void fail(std::string why);
  bool running() const { return state_ != nullptr; }
  // The policy's pick for one packet; false when it has none by `horizon` (or failed).
  bool pick(Picos now, Picos horizon, isoroce_policy_slot* slot);
  std::size_t dequeue_fallback(Picos now, std::span<Grant> out, PacketSource& src);

  const isoroce_policy_ops& ops_;
  void* state_;  // the policy's; nullptr once disabled
  Config config_;
  PolicyLog log_;
  std::vector<Ready> ready_;
  std::vector<std::uint64_t> rates_;
  LinkModel link_;
  ControlQueue control_;
  std::size_t active_ = 0;
  Picos wait_until_ = 0;  // the policy declined to pick until then (its next_deadline)
  std::string fault_;
  std::unique_ptr<Scheduler> fallback_;  // fifo, once the policy is disabled
  Picos fallback_from_ = 0;              // the policy's last packet has left by then
};

}  // namespace isoroce::sched
