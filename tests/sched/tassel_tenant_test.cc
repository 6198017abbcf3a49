// Tenants in the tassel policy (Scheduler::set_tenant, sched/share_tree.h): QPs that
// may send are shared tenant by weight, then application by weight, then QP by
// turn, while each QP's rate limit still holds. A fake clock steps a 100 Gb/s link;
// every QP is backlogged with 1 MB messages of 4 KB packets.
#include <gtest/gtest.h>

#include <vector>

#include "fake_link.h"
#include "sched/scheduler.h"
#include "sched/tassel.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr std::uint64_t kGbps = 1'000'000'000;
constexpr Picos kUs = 1'000'000;
constexpr std::uint32_t kPkt = 4'096;

struct QpSpec {
  std::uint32_t tenant;  // kNoTenant: none
  std::uint32_t tenant_weight = 1;
  std::uint64_t rate = kUnlimited;
  std::uint32_t app = kOwnApp;
  std::uint32_t app_weight = 1;
};

struct Result {
  std::vector<double> share;  // of what left in the window
  std::vector<double> gbps;   // each QP's rate over the window
  double total_gbps = 0;
};

// Runs the QPs for 2 ms, then measures [2 ms, 10 ms).
Result run(const std::vector<QpSpec>& qps) {
  Config config{.link_bps = kLink, .max_qps = static_cast<std::uint32_t>(qps.size())};
  auto sched = make_scheduler("tassel", config);
  for (QpId q = 0; q < qps.size(); ++q) {
    if (qps[q].rate != kUnlimited) sched->set_rate(0, q, qps[q].rate);
    sched->set_class(0, q, FlowClass::kBandwidth, qps[q].app, qps[q].app_weight);
    if (qps[q].tenant != kNoTenant) sched->set_tenant(0, q, qps[q].tenant, qps[q].tenant_weight);
  }
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return Packet{kPkt, i % 256 == 255}; });
  for (QpId q = 0; q < qps.size(); ++q) link.start(q);
  link.run_until(2'000 * kUs);
  link.open_window(link.now());
  link.run_until(10'000 * kUs);
  link.close_window(link.now());
  Result r;
  const double total = static_cast<double>(link.window_total_bytes());
  for (QpId q = 0; q < qps.size(); ++q) {
    r.share.push_back(static_cast<double>(link.record_of(q).window_bytes) / total);
    r.gbps.push_back(static_cast<double>(link.record_of(q).window_bytes) * 8 / 8e-3 / 1e9);
  }
  r.total_gbps = total * 8 / 8e-3 / 1e9;
  return r;
}

double sum(const std::vector<double>& s, std::size_t from, std::size_t to) {
  double t = 0;
  for (std::size_t i = from; i < to; ++i) t += s[i];
  return t;
}

// Receive: tenant 1 with 16 unlimited QPs (16 applications), tenant 2 with one,
// equal weights. Expect: 50% +- 1% each, 1/32 +- 0.5% per QP of tenant 1, the link
// full; without tenants, round robin per QP (tenant 1: 16/17).
TEST(TasselTenants, SixteenUnlimitedQpsGetNoMoreThanOne) {
  std::vector<QpSpec> qps(16, QpSpec{1});
  qps.push_back({2});
  Result r = run(qps);
  EXPECT_NEAR(sum(r.share, 0, 16), 0.5, 0.01);
  EXPECT_NEAR(r.share[16], 0.5, 0.01);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_NEAR(r.share[i], 0.5 / 16, 0.005) << "qp " << i;
  EXPECT_GT(r.total_gbps, 99.0);
  for (QpSpec& q : qps) q.tenant = kNoTenant;
  r = run(qps);
  EXPECT_NEAR(sum(r.share, 0, 16), 16.0 / 17, 0.01);
}

// Receive: oversubscribed with limits: tenant 1's 16 QPs limited to 10 Gb/s each
// (160 in all), tenant 2's one QP to 80 Gb/s, on 100 Gb/s. Without tenants tassel
// shares in proportion to the limits (tenant 1: 160/240 = 2/3). Expect with tenants:
// 50% +- 1% each, no QP above its limit (+0.5%), the link full.
TEST(TasselTenants, OversubscribedLimitsShareByTenantNotByLimit) {
  std::vector<QpSpec> qps(16, QpSpec{1, 1, 10 * kGbps});
  qps.push_back({2, 1, 80 * kGbps});
  Result r = run(qps);
  EXPECT_NEAR(sum(r.share, 0, 16), 0.5, 0.01);
  EXPECT_NEAR(r.share[16], 0.5, 0.01);
  for (std::size_t i = 0; i < 17; ++i) EXPECT_LE(r.gbps[i], qps[i].rate / 1e9 * 1.005) << "qp " << i;
  EXPECT_GT(r.total_gbps, 99.0);
  for (QpSpec& q : qps) q.tenant = kNoTenant;
  r = run(qps);
  EXPECT_NEAR(sum(r.share, 0, 16), 2.0 / 3, 0.01);
}

// Receive: tenant 2's one QP limited to 20 Gb/s (below its half), tenant 1's 16 QPs
// unlimited. Expect: the limit holds (20 Gb/s +- 1%), tenant 1 takes the rest
// (work-conserving): the link full.
TEST(TasselTenants, ALimitBelowTheShareHoldsAndTheRestIsUsed) {
  std::vector<QpSpec> qps(16, QpSpec{1});
  qps.push_back({2, 1, 20 * kGbps});
  const Result r = run(qps);
  EXPECT_NEAR(r.gbps[16], 20.0, 0.2);
  EXPECT_NEAR(sum(r.gbps, 0, 16), r.total_gbps - r.gbps[16], 1e-9);
  EXPECT_GT(r.total_gbps, 99.0);
}

// Receive: limits that fit the link (Phi < 1), with tenants. Expect: every QP gets its
// limit, as without tenants (+- 1%): sharing changes nothing when nothing competes.
TEST(TasselTenants, LimitsThatFitAreExact) {
  std::vector<QpSpec> qps;
  for (int i = 0; i < 8; ++i) qps.push_back({1, 1, 5 * kGbps});
  qps.push_back({2, 3, 37 * kGbps});
  const Result r = run(qps);
  for (std::size_t i = 0; i < qps.size(); ++i) EXPECT_NEAR(r.gbps[i], qps[i].rate / 1e9, qps[i].rate / 1e11) << i;
}

// Receive: tenant weights 2:1, both ways. Expect: 2/3 and 1/3 +- 1%.
TEST(TasselTenants, WeightsTwoToOne) {
  std::vector<QpSpec> qps(16, QpSpec{1, 2});
  qps.push_back({2, 1});
  Result r = run(qps);
  EXPECT_NEAR(sum(r.share, 0, 16), 2.0 / 3, 0.01);
  EXPECT_NEAR(r.share[16], 1.0 / 3, 0.01);
  for (std::size_t i = 0; i < 16; ++i) qps[i].tenant_weight = 1;
  qps[16].tenant_weight = 2;
  r = run(qps);
  EXPECT_NEAR(sum(r.share, 0, 16), 1.0 / 3, 0.01);
  EXPECT_NEAR(r.share[16], 2.0 / 3, 0.01);
}

// Receive: tenant 1 holds application 10 (weight 3, 4 QPs) and application 11
// (weight 1, 1 QP); tenant 2 one QP. Expect: tenant 2 50%; tenant 1's half 3:1 between
// its applications (37.5%, 12.5% +- 1%), application 10's evenly over its 4 QPs.
TEST(TasselTenants, ATenantsShareSplitsBetweenItsApplications) {
  std::vector<QpSpec> qps = {{1, 1, kUnlimited, 10, 3}, {1, 1, kUnlimited, 10, 3}, {1, 1, kUnlimited, 10, 3},
                             {1, 1, kUnlimited, 10, 3}, {1, 1, kUnlimited, 11, 1}, {2, 1, kUnlimited, 20, 1}};
  const Result r = run(qps);
  EXPECT_NEAR(r.share[5], 0.5, 0.01);
  EXPECT_NEAR(sum(r.share, 0, 4), 0.375, 0.01);
  EXPECT_NEAR(r.share[4], 0.125, 0.01);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(r.share[i], 0.375 / 4, 0.005) << "qp " << i;
}

// Receive: a limit met after waiting in the tree. QP 0 (tenant 1, limit 60 Gb/s)
// shares with QP 1 (tenant 2, unlimited) for 2 ms, getting 50; then QP 1 stops.
// Expect: QP 0 at its 60 Gb/s from then on (+- 1%) with no burst: no 100 us window
// above 60 Gb/s + one packet.
TEST(TasselTenants, AQpThatWaitedDoesNotBurstPastItsLimit) {
  Config config{.link_bps = kLink, .max_qps = 2};
  auto sched = make_scheduler("tassel", config);
  sched->set_rate(0, 0, 60 * kGbps);
  sched->set_tenant(0, 0, 1, 1);
  sched->set_tenant(0, 1, 2, 1);
  FakeLink link(*sched, config, [](QpId q, std::uint64_t i) {
    if (q == 1 && i >= 3'052) return Packet{0, true};  // 2 ms at 50 Gb/s
    return Packet{kPkt, i % 256 == 255};
  });
  link.keep_log(true);
  link.start(0);
  link.start(1);
  link.run_until(6'000 * kUs);
  // QP 0's bytes per 100 us window after QP 1 is done (its last packet + 100 us).
  Picos one_done = 0;
  for (const Grant& g : link.log())
    if (g.qp == 1) one_done = g.departure;
  ASSERT_GT(one_done, 1'500 * kUs);
  ASSERT_LT(one_done, 2'500 * kUs);
  std::vector<std::uint64_t> per_window(60, 0);
  for (const Grant& g : link.log())
    if (g.qp == 0 && g.departure >= one_done) per_window[(g.departure - one_done) / (100 * kUs)] += g.bytes;
  const double max_bytes = 60e9 / 8 * 100e-6 + kPkt;
  for (std::size_t w = 0; w + 1 < 39; ++w) {
    EXPECT_LE(per_window[w], max_bytes) << "window " << w;
    EXPECT_GE(per_window[w], 60e9 / 8 * 100e-6 * 0.99 - kPkt) << "window " << w;
  }
}

// Receive: a QP moved to the other tenant while backlogged; a tenant's QP that goes
// idle. Expect: the move keeps its packet (it still sends), the split follows the
// move, and QP 2 alone takes the whole link once the others stop.
TEST(TasselTenants, MovingAQpAndAnIdleTenant) {
  Config config{.link_bps = kLink, .max_qps = 3};
  auto sched = make_scheduler("tassel", config);
  sched->set_tenant(0, 0, 1, 1);
  sched->set_tenant(0, 1, 1, 1);
  sched->set_tenant(0, 2, 2, 1);
  const std::uint64_t stop_after = 64 * 256;
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
  EXPECT_NEAR(link.record_of(0).window_bytes / total, 0.5, 0.01);
  EXPECT_NEAR(link.record_of(1).window_bytes / total, 0.25, 0.01);
  EXPECT_NEAR(link.record_of(2).window_bytes / total, 0.25, 0.01);
  link.run_until(20'000 * kUs);
  link.open_window(link.now());
  link.close_window(21'000 * kUs);
  link.run_until(21'000 * kUs);
  EXPECT_EQ(link.record_of(0).window_bytes, 0u);
  EXPECT_GT(link.record_of(2).window_bytes * 8.0 / 1e-3, 0.99 * kLink);
}

// Receive: deactivate and set_rate (limited <-> unlimited) on QPs in the share tree,
// and the first tenant arriving while QPs wait in the calendar and the round robin.
// Expect: nothing lost or duplicated: every QP still sends, active() is right.
TEST(TasselTenants, QpsMoveBetweenTheTreeAndTheTimeline) {
  Config config{.link_bps = kLink, .max_qps = 4};
  auto sched = make_scheduler("tassel", config);
  auto* t = dynamic_cast<TasselScheduler*>(sched.get());
  ASSERT_NE(t, nullptr);
  sched->set_rate(0, 0, 30 * kGbps);
  sched->set_rate(0, 1, 90 * kGbps);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return Packet{kPkt, i % 256 == 255}; });
  for (QpId q = 0; q < 4; ++q) link.start(q);
  link.run_until(100 * kUs);
  EXPECT_FALSE(t->sharing());
  sched->set_tenant(link.now(), 3, 7, 1);  // the first tenant: everyone moves over
  EXPECT_TRUE(t->sharing());
  link.run_until(200 * kUs);
  sched->set_rate(link.now(), 2, 10 * kGbps);  // unlimited -> limited
  sched->set_rate(link.now(), 0, kUnlimited);  // limited -> unlimited
  sched->deactivate(link.now(), 1);
  EXPECT_FALSE(sched->active(1));
  link.open_window(link.now());
  link.run_until(2'200 * kUs);
  link.close_window(link.now());
  EXPECT_EQ(link.record_of(1).window_bytes, 0u);
  EXPECT_NEAR(link.record_of(2).window_bytes * 8.0 / 2e-3 / 1e9, 10.0, 0.1);
  // Tenant 0 (QPs 0 and 2) and tenant 7 (QP 3) split the link evenly: QP 2 at its
  // 10 Gb/s, QP 0 the rest of its tenant's half.
  EXPECT_NEAR(link.record_of(0).window_bytes * 8.0 / 2e-3 / 1e9, 40.0, 0.5);
  EXPECT_NEAR(link.record_of(3).window_bytes * 8.0 / 2e-3 / 1e9, 50.0, 0.5);
  EXPECT_EQ(sched->active_qps(), 3u);
}

}  // namespace
}  // namespace isoroce::sched
