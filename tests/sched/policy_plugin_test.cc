// Loading policy plugins (sched/policy_plugin.h): the example strict_priority
// plugin (examples/policies/), and the clear refusals: no file, not a shared
// object, no entry symbol, another ABI version, a name already taken. The plugins
// are built by tests/sched/CMakeLists.txt; their paths come as definitions.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "fake_link.h"
#include "sched/policy_plugin.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

std::string error_of(const std::string& path) { return load_policy_plugin(path).error; }

TEST(PolicyPlugin, LoadsTheExampleAndServesLatencyFirst) {
  const PluginLoad load = load_policy_plugin(ISOROCE_TEST_STRICT_PRIORITY_SO);
  ASSERT_EQ(load.error, "");
  EXPECT_EQ(load.name, "strict_priority");
  EXPECT_EQ(load_policy_plugin(ISOROCE_TEST_STRICT_PRIORITY_SO).name, "strict_priority");  // again: no-op
  const PolicyOps* ops = find_policy("strict_priority");
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->caps, 0u);
  EXPECT_NE(ops->origin.find("strict_priority"), std::string::npos);

  // Receive: QP 0 (bandwidth) starts a 100-packet message; QP 1 (latency) then
  // posts one-packet messages. Expect: each of QP 1's packets leaves next.
  Config config{.link_bps = 100'000'000'000, .max_qps = 2};
  auto sched = make_scheduler("strict_priority", config);
  ASSERT_NE(sched, nullptr);
  sched->set_class(0, 1, FlowClass::kLatency, kOwnApp, 1);
  FakeLink link(*sched, config, [](QpId q, std::uint64_t i) {
    if (q == 0) return i < 100 ? Packet{4'000, i == 99} : Packet{};
    return i < 3 ? Packet{100, true} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.run_until(1'000'000);  // 1 us: three of QP 0's packets
  link.start(1);
  link.run_until(kNever - 1);
  std::string order;
  for (const Grant& g : link.log()) order += static_cast<char>('A' + g.qp);
  EXPECT_EQ(order.substr(0, 7), "AAAABBB");
  EXPECT_EQ(link.record_of(0).packets, 100u);
  EXPECT_TRUE(sched->fault().empty());
}

TEST(PolicyPlugin, ClearErrors) {
  EXPECT_EQ(error_of("/nonexistent/plugin.so"), "policy plugin /nonexistent/plugin.so: No such file or directory");
  const std::string text = ::testing::TempDir() + "not_a_plugin.so";
  std::ofstream(text) << "hello\n";
  EXPECT_EQ(error_of(text), "policy plugin " + text + ": not a shared object (no ELF header)");
  EXPECT_EQ(error_of("/tmp"), "policy plugin /tmp: not a regular file");
  EXPECT_EQ(error_of(ISOROCE_TEST_NO_SYMBOL_SO),
            std::string("policy plugin ") + ISOROCE_TEST_NO_SYMBOL_SO +
                ": no isoroce_policy_entry symbol: not an isoroce policy plugin (ISOROCE_POLICY_EXPORT in "
                "sched/policy_api.h defines it)");
  EXPECT_EQ(error_of(ISOROCE_TEST_WRONG_ABI_SO),
            std::string("policy plugin ") + ISOROCE_TEST_WRONG_ABI_SO +
                ": policy ABI version 2, this isoroce speaks ABI version 1 (rebuild the plugin against its "
                "sched/policy_api.h)");
  EXPECT_EQ(find_policy("from_the_future"), nullptr);
  ASSERT_EQ(load_policy_plugin(ISOROCE_TEST_STRICT_PRIORITY_SO).error, "");
  const std::string dup = error_of(ISOROCE_TEST_STRICT_PRIORITY_COPY_SO);
  EXPECT_NE(dup.find("policy 'strict_priority' is already registered ("), std::string::npos) << dup;
}

// Receive: a plugin whose pick throws after three packets. Expect: the fault is
// logged through the loader's log, fifo sends every packet.
TEST(PolicyPlugin, ThrowingPluginIsContained) {
  std::vector<std::string> logged;
  const PluginLoad load = load_policy_plugin(ISOROCE_TEST_FAULTY_SO, [&](std::string_view m) { logged.emplace_back(m); });
  ASSERT_EQ(load.error, "");
  Config config{.link_bps = 100'000'000'000, .max_qps = 2};
  auto sched = make_scheduler("faulty", config);
  ASSERT_NE(sched, nullptr);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 10 ? Packet{1'000, true} : Packet{}; });
  link.start(0);
  link.start(1);
  link.run_until(kNever - 1);
  EXPECT_EQ(link.record_of(0).packets + link.record_of(1).packets, 20u);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_EQ(logged[0], "policy faulty: pick failed (-1): faulty: out of ideas; the port runs fifo from now on");
}

}  // namespace
}  // namespace isoroce::sched
