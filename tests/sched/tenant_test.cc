// Tenants in the justitia policy (Scheduler::set_tenant): tokens split by tenant
// weight, then by application weight within a tenant, whatever the QP counts. A
// fake clock steps a 100 Gb/s link; every QP is a backlogged bandwidth flow of 1 MB
// messages in 4 KB packets.
#include <gtest/gtest.h>

#include <vector>

#include "fake_link.h"
#include "sched/justitia.h"
#include "sched/scheduler.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr Picos kUs = 1'000'000;
constexpr std::uint32_t kPkt = 4'096;

struct QpSpec {
  std::uint32_t app;
  std::uint32_t tenant;  // kNoTenant: none
  std::uint32_t tenant_weight = 1;
  std::uint32_t app_weight = 1;
};

// Each QP's share of what left in [2 ms, 10 ms).
std::vector<double> shares(const std::vector<QpSpec>& qps, std::uint64_t* tokens = nullptr) {
  Config config{.link_bps = kLink, .max_qps = static_cast<std::uint32_t>(qps.size())};
  auto sched = make_scheduler("justitia", config);
  for (QpId q = 0; q < qps.size(); ++q) {
    sched->set_class(0, q, FlowClass::kBandwidth, qps[q].app, qps[q].app_weight);
    if (qps[q].tenant != kNoTenant) sched->set_tenant(0, q, qps[q].tenant, qps[q].tenant_weight);
  }
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return Packet{kPkt, i % 256 == 255}; });
  for (QpId q = 0; q < qps.size(); ++q) link.start(q);
  link.run_until(2'000 * kUs);
  link.open_window(link.now());
  link.run_until(10'000 * kUs);
  link.close_window(link.now());
  std::vector<double> out;
  for (QpId q = 0; q < qps.size(); ++q)
    out.push_back(static_cast<double>(link.record_of(q).window_bytes) / static_cast<double>(link.window_total_bytes()));
  if (tokens) *tokens = sched->justitia_stats()->tokens_issued;
  EXPECT_GT(link.window_total_bytes() * 8.0 / 8e-3, 0.95 * kLink);  // work-conserving
  return out;
}

double sum(const std::vector<double>& s, std::size_t from, std::size_t to) {
  double t = 0;
  for (std::size_t i = from; i < to; ++i) t += s[i];
  return t;
}

// Receive: tenant 1 with 16 QPs, each an application of its own, tenant 2 with one
// QP, equal weights. Expect: 50% +- 2% each (one 1 MB token is 1.25% of 8 ms).
// Without tenants, the 17 applications split per application: tenant 1's QPs 16/17.
TEST(JustitiaTenants, SixteenQpsGetNoMoreThanOne) {
  std::vector<QpSpec> qps;
  for (std::uint32_t i = 0; i < 16; ++i) qps.push_back({100 + i, 1});
  qps.push_back({200, 2});
  std::vector<double> s = shares(qps);
  EXPECT_NEAR(sum(s, 0, 16), 0.5, 0.02);
  EXPECT_NEAR(s[16], 0.5, 0.02);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_NEAR(s[i], 0.5 / 16, 0.01) << "qp " << i;
  for (QpSpec& q : qps) q.tenant = kNoTenant;
  s = shares(qps);
  EXPECT_NEAR(sum(s, 0, 16), 16.0 / 17, 0.02);
}

// Receive: the same with tenant weights 2:1. Expect: 2/3 and 1/3 (+- 2%).
TEST(JustitiaTenants, WeightsTwoToOne) {
  std::vector<QpSpec> qps;
  for (std::uint32_t i = 0; i < 16; ++i) qps.push_back({100 + i, 1, 2});
  qps.push_back({200, 2, 1});
  std::vector<double> s = shares(qps);
  EXPECT_NEAR(sum(s, 0, 16), 2.0 / 3, 0.02);
  EXPECT_NEAR(s[16], 1.0 / 3, 0.02);
  // Reversed: the tenant of one QP weighs 2.
  for (QpSpec& q : qps) q.tenant_weight = q.tenant == 1 ? 1 : 2;
  s = shares(qps);
  EXPECT_NEAR(sum(s, 0, 16), 1.0 / 3, 0.02);
  EXPECT_NEAR(s[16], 2.0 / 3, 0.02);
}

// Receive: tenant 1 holds application 10 (weight 3, 4 QPs) and application 11
// (weight 1, 1 QP); tenant 2 one application of one QP; equal tenant weights.
// Expect: tenant 2 50%; tenant 1's half split 3:1 between its applications (37.5%,
// 12.5% +- 2%), application 10's evenly over its 4 QPs (one flow: round robin).
TEST(JustitiaTenants, ATenantsShareSplitsBetweenItsApplications) {
  std::vector<QpSpec> qps = {{10, 1, 1, 3}, {10, 1, 1, 3}, {10, 1, 1, 3}, {10, 1, 1, 3}, {11, 1, 1, 1}, {20, 2, 1, 1}};
  const std::vector<double> s = shares(qps);
  EXPECT_NEAR(s[5], 0.5, 0.02);
  EXPECT_NEAR(sum(s, 0, 4), 0.375, 0.02);
  EXPECT_NEAR(s[4], 0.125, 0.02);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(s[i], 0.375 / 4, 0.01) << "qp " << i;
}

// Receive: a QP moved to another tenant while backlogged, and a tenant whose QPs go
// idle. Expect: the move keeps its ready packet (it still sends), and the remaining
// tenant takes the whole link once the other stops.
TEST(JustitiaTenants, MovingAQpAndAnIdleTenant) {
  Config config{.link_bps = kLink, .max_qps = 3};
  auto sched = make_scheduler("justitia", config);
  for (QpId q = 0; q < 3; ++q) sched->set_class(0, q, FlowClass::kBandwidth, 10 + q, 1);
  sched->set_tenant(0, 0, 1, 1);
  sched->set_tenant(0, 1, 1, 1);
  sched->set_tenant(0, 2, 2, 1);
  // QPs 0 and 1 stop after 64 MB each (about 10 ms at their share).
  std::uint64_t stop_after = 64 * 256;
  FakeLink link(*sched, config, [&](QpId q, std::uint64_t i) {
    if (q < 2 && i >= stop_after) return Packet{0, true};
    return Packet{kPkt, i % 256 == 255};
  });
  for (QpId q = 0; q < 3; ++q) link.start(q);
  link.run_until(1'000 * kUs);
  sched->set_tenant(link.now(), 1, 2, 1);  // QP 1 joins tenant 2: now 1 QP against 2
  link.open_window(link.now());
  link.run_until(2'000 * kUs);
  link.close_window(link.now());
  const double total = static_cast<double>(link.window_total_bytes());
  EXPECT_NEAR(link.record_of(0).window_bytes / total, 0.5, 0.03);
  EXPECT_NEAR((link.record_of(1).window_bytes + link.record_of(2).window_bytes) / total, 0.5, 0.03);
  EXPECT_GT(link.record_of(1).window_bytes, 0u);
  // Later QPs 0 and 1 have sent everything: QP 2 alone takes the link.
  link.run_until(20'000 * kUs);
  link.open_window(link.now());
  link.close_window(21'000 * kUs);  // (open_window keeps the last window's end)
  link.run_until(21'000 * kUs);
  EXPECT_EQ(link.record_of(0).window_bytes, 0u);
  EXPECT_GT(link.record_of(2).window_bytes * 8.0 / 1e-3, 0.95 * kLink);
}

}  // namespace
}  // namespace isoroce::sched
