// The fifo policy: a hardware RNIC's round robin at message granularity.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_link.h"
#include "sched/scheduler.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;

// Receive: QPs A and B each post one 1 MB message (256 packets of 4 KB), A first.
// Expect: all of A's message leaves before any of B's, back to back on the link.
TEST(Fifo, OneMessageLeavesWhole) {
  Config config{.link_bps = kLink, .max_qps = 2};
  auto sched = make_scheduler("fifo", config);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) {
    return i < 256 ? Packet{4'096, i == 255} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.start(1);
  link.run_until(kNever - 1);
  const auto& log = link.log();
  ASSERT_EQ(log.size(), 512u);
  for (std::size_t i = 0; i < 512; ++i) {
    EXPECT_EQ(log[i].qp, i < 256 ? 0u : 1u) << "packet " << i;
    EXPECT_EQ(log[i].departure, i * 327'680) << "packet " << i;  // never idle
  }
  EXPECT_EQ(sched->active_qps(), 0u);
}

// Receive: QPs A, B, C, each with messages of 3 packets. Expect: AAA BBB CCC AAA ...
TEST(Fifo, RoundRobinByMessage) {
  Config config{.link_bps = kLink, .max_qps = 3};
  auto sched = make_scheduler("fifo", config);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) {
    return i < 12 ? Packet{1'000, i % 3 == 2} : Packet{};
  });
  link.keep_log(true);
  for (QpId q = 0; q < 3; ++q) link.start(q);
  link.run_until(kNever - 1);
  std::string order;
  for (const Grant& g : link.log()) order += static_cast<char>('A' + g.qp);
  EXPECT_EQ(order, "AAABBBCCCAAABBBCCCAAABBBCCCAAABBBCCC");
}

// Receive: a rate limit of 1 Mb/s on a fifo QP. Expect: ignored, line rate.
TEST(Fifo, IgnoresRateLimits) {
  Config config{.link_bps = kLink, .max_qps = 1};
  auto sched = make_scheduler("fifo", config);
  sched->set_rate(0, 0, 1'000'000);
  EXPECT_EQ(sched->rate(0), 1'000'000u);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 1'000 ? Packet{1'000, true} : Packet{}; });
  link.start(0);
  link.run_until(kNever - 1);
  EXPECT_NEAR(link.record_of(0).rate_bps(), 1e11, 1e11 * 1e-6);
}

// Receive: a control packet while QP A is mid-message. Expect: it leaves next, then A
// resumes its message.
TEST(Fifo, ControlGoesFirst) {
  Config config{.link_bps = kLink, .max_qps = 2};
  auto sched = make_scheduler("fifo", config);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 10 ? Packet{1'000, i == 9} : Packet{}; });
  link.keep_log(true);
  link.start(0);
  link.run_until(200'000);  // three packets: at 0, 80, 160 ns
  ASSERT_TRUE(sched->enqueue_control(link.now(), 1, 64));
  link.run_until(kNever - 1);
  const auto& log = link.log();
  ASSERT_EQ(log.size(), 11u);
  EXPECT_EQ(log[3].kind, GrantKind::kControl);
  EXPECT_EQ(log[3].qp, 1u);
  EXPECT_EQ(log[3].departure, 240'000u);
  EXPECT_EQ(log[4].departure, 240'000u + 5'120);
}

// Receive: deactivate a QP mid-message. Expect: the next QP goes on.
TEST(Fifo, DeactivateMidMessage) {
  Config config{.link_bps = kLink, .max_qps = 2};
  auto sched = make_scheduler("fifo", config);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return i < 10 ? Packet{1'000, i == 9} : Packet{}; });
  link.keep_log(true);
  link.start(0);
  link.start(1);
  link.run_until(100'000);
  sched->deactivate(link.now(), 0);
  EXPECT_FALSE(sched->active(0));
  link.run_until(kNever - 1);
  const auto& log = link.log();
  ASSERT_EQ(log.size(), 12u);
  for (std::size_t i = 2; i < 12; ++i) EXPECT_EQ(log[i].qp, 1u);
}

// Receive: QP A alone with one-packet messages (the ring's only QP is its own next
// turn: the policy leaves the ring as it is), B joining after A's fourth (the
// dequeue's lookahead granted one more), B's 4 messages, A deactivated with one
// message left while C joins, then A activated again. Expect: AAAA, then A and B
// alternating, A alone again, then C, A (its last) and C's rest: the grants of the
// policy before the ring's one-QP case was skipped, message by message.
TEST(Fifo, ALoneQpsOneMessageTurnsThenOthersJoining) {
  Config config{.link_bps = kLink, .max_qps = 3};
  auto sched = make_scheduler("fifo", config);
  FakeLink link(*sched, config, [](QpId q, std::uint64_t i) {
    const std::uint64_t n = q == 0 ? 10 : q == 1 ? 4 : 6;
    return i < n ? Packet{1'000, true} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.run_until(200'000);  // three packets: at 0, 80, 160 ns
  link.start(1);
  link.run_until(1'000'000);  // A's 10 and B's 4
  sched->deactivate(link.now(), 0);
  link.start(2);
  link.run_until(link.now() + 1);
  std::string order;
  for (const Grant& g : link.log()) order += static_cast<char>('A' + g.qp);
  EXPECT_EQ(order, "AAAABABABABAA");
  EXPECT_FALSE(sched->active(0));
  link.start(0);  // A's last message
  EXPECT_TRUE(sched->active(0));
  link.run_until(kNever - 1);
  order.clear();
  for (const Grant& g : link.log()) order += static_cast<char>('A' + g.qp);
  EXPECT_EQ(order, "AAAABABABABAACACCCCC");
  EXPECT_EQ(sched->active_qps(), 0u);
}

}  // namespace
}  // namespace isoroce::sched
