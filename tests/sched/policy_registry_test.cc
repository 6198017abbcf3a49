// The policy registry and the host side of the plugin interface (PluginScheduler):
// built-in policies by name, registration errors, the ABI checks, a policy written
// against sched/policy_api.h driven on a fake link, and every kind of garbage a
// policy can answer contained (the port carries on with fifo, nothing lost).
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_link.h"
#include "sched/plugin_scheduler.h"
#include "sched/policy_registry.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;

TEST(PolicyRegistry, BuiltInsByNameWithTheirCapabilities) {
  for (const char* name : {"fifo", "tassel", "justitia"}) {
    const PolicyOps* ops = find_policy(name);
    ASSERT_NE(ops, nullptr) << name;
    EXPECT_EQ(ops->origin, "built-in");
    EXPECT_FALSE(ops->description.empty());
    auto s = make_scheduler(name, Config{});
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->name(), name);
    EXPECT_TRUE(s->fault().empty());
  }
  EXPECT_FALSE(find_policy("fifo")->has(kCapEnforcesRates));
  EXPECT_TRUE(find_policy("tassel")->has(kCapEnforcesRates));
  EXPECT_FALSE(find_policy("tassel")->has(kCapMessageRate));
  EXPECT_TRUE(find_policy("justitia")->has(kCapReferenceLatency));
  EXPECT_EQ(find_policy("justice"), nullptr);
  EXPECT_EQ(make_scheduler("justice", Config{}), nullptr);
  for (const char* name : {"fifo", "justitia", "tassel"}) EXPECT_NE(policy_names().find(name), std::string::npos);
}

TEST(PolicyRegistry, RefusesDuplicatesBadNamesAndNoFactory) {
  auto factory = [](const Config& c) { return make_scheduler("fifo", c); };
  EXPECT_EQ(register_policy({"fifo", "again", 1, 0, "test", factory}),
            "policy 'fifo' is already registered (built-in)");
  EXPECT_NE(register_policy({"has space", "", 1, 0, "test", factory}), "");
  EXPECT_NE(register_policy({"", "", 1, 0, "test", factory}), "");
  EXPECT_NE(register_policy({std::string(33, 'a'), "", 1, 0, "test", factory}), "");
  EXPECT_NE(register_policy({"no_factory", "", 1, 0, "test", nullptr}), "");
  EXPECT_EQ(register_policy({"fifo_alias", "fifo under another name", 1, 0, "test", factory}), "");
  EXPECT_EQ(make_scheduler("fifo_alias", Config{})->name(), "fifo");
}

// A small policy on the public interface: packet round robin over ready QPs.
class RoundRobin : public policy::Policy {
 public:
  explicit RoundRobin(const policy::Config& c) : ready_(c.max_qps) {}
  void activate(policy::Picos, std::uint32_t qp, std::uint32_t bytes, bool) override { ready_.at(qp) = bytes; }
  void deactivate(policy::Picos, std::uint32_t qp) override { ready_.at(qp) = 0; }
  std::optional<policy::Choice> pick(const policy::Slot& s) override {
    for (std::size_t i = 0; i < ready_.size(); ++i) {
      const std::uint32_t q = static_cast<std::uint32_t>((next_ + i) % ready_.size());
      if (ready_[q] != 0) {
        next_ = q + 1;
        return policy::Choice{q, ready_[q], s.earliest()};
      }
    }
    return std::nullopt;
  }
  void granted(policy::Picos, std::uint32_t qp, std::uint32_t, policy::Picos, std::uint32_t next, bool) override {
    ready_[qp] = next;
  }
  policy::Picos next_deadline() const override { return policy::kNever; }
  void completion(policy::Picos, std::uint32_t, std::uint64_t bytes) override { completed_ += bytes; }
  void reference_latency(policy::Picos, policy::Picos) override {}

  static inline std::uint64_t completed_ = 0;

 protected:
  std::vector<std::uint32_t> ready_;
  std::size_t next_ = 0;
  int picks_ = 0;
};

const isoroce_policy_ops& rr_ops() {
  static const isoroce_policy_ops ops = policy::detail::make_ops<RoundRobin>("rr_test", "packet round robin", 3, 0);
  return ops;
}

TEST(PolicyOps, AbiChecks) {
  EXPECT_EQ(check_policy_ops(&rr_ops()), "");
  EXPECT_EQ(check_policy_ops(nullptr), "the entry point returned no ops table");
  isoroce_policy_ops o = rr_ops();
  o.abi_version = 2;
  EXPECT_EQ(check_policy_ops(&o),
            "policy ABI version 2, this isoroce speaks ABI version 1 (rebuild the plugin against its "
            "sched/policy_api.h)");
  o = rr_ops();
  o.size = 16;
  EXPECT_NE(check_policy_ops(&o).find("ops table of 16 bytes"), std::string::npos);
  o = rr_ops();
  o.pick = nullptr;
  EXPECT_EQ(check_policy_ops(&o), "policy 'rr_test' has no pick callback");
  o = rr_ops();
  o.name = "a/b";
  EXPECT_NE(check_policy_ops(&o), "");
}

// Receive: three QPs of 1000-byte one-packet messages under a plugin policy, one
// control packet queued. Expect: the control packet first, then packet round robin,
// back to back, every packet delivered; completions reach the policy.
TEST(PluginScheduler, DrivesAPolicyOnTheFakeLink) {
  static const bool registered = register_policy_ops(rr_ops(), "test", {}).empty();
  ASSERT_TRUE(registered);
  EXPECT_EQ(find_policy("rr_test")->version, 3u);
  Config config{.link_bps = kLink, .max_qps = 3};
  auto sched = make_scheduler("rr_test", config);
  ASSERT_NE(sched, nullptr);
  EXPECT_EQ(sched->name(), "rr_test");
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 4 ? Packet{1'000, true} : Packet{}; });
  link.keep_log(true);
  for (QpId q = 0; q < 3; ++q) link.start(q);
  EXPECT_EQ(sched->active_qps(), 3u);
  ASSERT_TRUE(sched->enqueue_control(0, 2, 64));
  sched->set_rate(0, 1, 5'000'000'000);
  EXPECT_EQ(sched->rate(1), 5'000'000'000u);
  link.run_until(kNever - 1);
  std::string order;
  for (const Grant& g : link.log()) order += g.kind == GrantKind::kControl ? 'c' : static_cast<char>('A' + g.qp);
  EXPECT_EQ(order, "cABCABCABCABC");
  EXPECT_EQ(link.log()[1].departure, duration(64, byte_cost(kLink)));
  EXPECT_EQ(sched->active_qps(), 0u);
  EXPECT_TRUE(sched->fault().empty());
  RoundRobin::completed_ = 0;
  sched->on_completion(0, 1, 4'000);
  EXPECT_EQ(RoundRobin::completed_, 4'000u);
}

// The ways a policy can misbehave after a few good packets.
enum class Garbage { kQpOutOfRange, kQpNotReady, kZeroBytes, kWrongBytes, kPast, kBeyondHorizon, kThrows, kFails, kStall };

template <Garbage G>
class BadPolicy final : public RoundRobin {
 public:
  using RoundRobin::RoundRobin;
  std::optional<policy::Choice> pick(const policy::Slot& s) override {
    std::optional<policy::Choice> c = RoundRobin::pick(s);
    if (++picks_ <= 5 || !c) return c;
    switch (G) {
      case Garbage::kQpOutOfRange: c->qp = 1'000; break;
      case Garbage::kQpNotReady: c->qp = 3; break;  // QP 3 never has a packet
      case Garbage::kZeroBytes: c->bytes = 0; break;
      case Garbage::kWrongBytes: c->bytes += 1; break;
      case Garbage::kPast: c->departure = s.earliest() - 1; break;
      case Garbage::kBeyondHorizon: c->departure = s.horizon + 1; break;
      case Garbage::kThrows: throw std::runtime_error("out of ideas");
      case Garbage::kFails: break;
      case Garbage::kStall: return std::nullopt;
    }
    return c;
  }
  void granted(policy::Picos now, std::uint32_t qp, std::uint32_t b, policy::Picos d, std::uint32_t next,
               bool e) override {
    RoundRobin::granted(now, qp, b, d, next, e);
    if (G == Garbage::kFails && picks_ > 5) throw std::logic_error("granted gave up");
  }
  policy::Picos next_deadline() const override { return G == Garbage::kStall ? 0 : policy::kNever; }
};

template <Garbage G>
void expect_contained(const char* name, const std::string& why) {
  static const isoroce_policy_ops ops = policy::detail::make_ops<BadPolicy<G>>(name, "misbehaves", 1, 0);
  std::vector<std::string> logged;
  ASSERT_EQ(register_policy_ops(ops, "test", [&](std::string_view m) { logged.emplace_back(m); }), "");
  Config config{.link_bps = kLink, .max_qps = 4, .lookahead = 20'000'000};
  auto sched = make_scheduler(name, config);
  ASSERT_NE(sched, nullptr);
  // 1 KB packets, messages of 4, 40 packets per QP on QPs 0..2.
  FakeLink link(*sched, config, [](QpId q, std::uint64_t i) {
    return q < 3 && i < 40 ? Packet{1'000, i % 4 == 3} : Packet{};
  });
  for (QpId q = 0; q < 3; ++q) link.start(q);
  sched->set_rate(0, 2, 1'000'000'000);
  link.run_until(kNever - 1);  // FakeLink checks: no overlap, nothing before now or past the lookahead
  for (QpId q = 0; q < 3; ++q) EXPECT_EQ(link.record_of(q).packets, 40u) << name << " qp " << q;
  EXPECT_EQ(sched->active_qps(), 0u);
  EXPECT_EQ(sched->name(), name);
  EXPECT_EQ(sched->rate(2), 1'000'000'000u);  // fifo got the limit (and ignores it)
  ASSERT_EQ(logged.size(), 1u) << name;
  EXPECT_EQ(logged[0], sched->fault());
  EXPECT_NE(sched->fault().find(why), std::string_view::npos) << sched->fault();
  EXPECT_NE(sched->fault().find("fifo from now on"), std::string_view::npos);
  // Later events go to fifo; the policy is gone.
  sched->set_class(0, 0, FlowClass::kLatency, kOwnApp, 1);
  sched->on_reference_latency(0, 1);
  sched->on_completion(0, 0, 1);
  EXPECT_EQ(logged.size(), 1u);
}

// Receive: a policy that, after five good packets, answers each kind of garbage.
// Expect: the fault is logged once with what was wrong, fifo carries every
// remaining packet, the link model is never violated.
TEST(PluginScheduler, GarbageIsContained) {
  expect_contained<Garbage::kQpOutOfRange>("bad_range", "pick chose QP 1000, out of range (max_qps 4)");
  expect_contained<Garbage::kQpNotReady>("bad_ready", "pick chose QP 3, which has no packet ready");
  expect_contained<Garbage::kZeroBytes>("bad_zero", "with 0 bytes; its ready packet has 1000");
  expect_contained<Garbage::kWrongBytes>("bad_size", "with 1001 bytes; its ready packet has 1000");
  expect_contained<Garbage::kPast>("bad_past", "in the past");
  expect_contained<Garbage::kBeyondHorizon>("bad_horizon", "after the horizon");
  expect_contained<Garbage::kThrows>("bad_throw", "pick failed (-1): out of ideas");
  expect_contained<Garbage::kFails>("bad_granted", "granted failed (-1): granted gave up");
  expect_contained<Garbage::kStall>("bad_stall", "pick chose nothing, yet next_deadline");
}

// Receive: a policy whose create refuses. Expect: no scheduler (the engine says EINVAL).
TEST(PluginScheduler, CreateRefusedIsNoScheduler) {
  static isoroce_policy_ops ops = rr_ops();
  ops.name = "refuses";
  ops.create = [](const isoroce_policy_config*) -> void* { return nullptr; };
  ASSERT_EQ(register_policy_ops(ops, "test", {}), "");
  EXPECT_EQ(make_scheduler("refuses", Config{}), nullptr);
}

}  // namespace
}  // namespace isoroce::sched
