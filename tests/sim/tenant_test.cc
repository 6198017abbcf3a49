// Hierarchical sharing in the simulator (issue 19): bench/scenarios/justitia/
// tenants.toml, tenant "big" with four applications of 4 QPs each (16 QPs), tenant
// "small" with one QP, 1 MB WRITEs, 10 ms of virtual time. Shares are of the sum of
// the flows' goodput; one 1 MB token is about 1.3% of the run.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "sim_util.h"

namespace isoroce::sim {
namespace {

using testing::flow;
using testing::run_scenario;

Scenario load() {
  auto p = tools::load_scenario(std::string(ISOROCE_JUSTITIA_SCENARIOS) + "/tenants.toml");
  EXPECT_TRUE(p.ok()) << (p.error ? p.error->to_string() : "");
  return p.scenario;
}

struct Shares {
  double big[4] = {};
  double big_total = 0;
  double small = 0;
};

Shares shares_of(const Scenario& s) {
  const SimReport r = run_scenario(s);
  Shares out;
  double total = flow(r, "small").goodput_gbps;
  for (int i = 0; i < 4; ++i) total += flow(r, "big" + std::to_string(i + 1)).goodput_gbps;
  EXPECT_GT(total, 90.0);  // the link (100 Gb/s) stays busy
  for (int i = 0; i < 4; ++i) {
    const FlowReport& f = flow(r, "big" + std::to_string(i + 1));
    EXPECT_EQ(f.errors, 0u);
    out.big[i] = f.goodput_gbps / total;
    out.big_total += out.big[i];
  }
  out.small = flow(r, "small").goodput_gbps / total;
  return out;
}

// Receive: tenants.toml as it is (tenant weights 1:1). Expect: small 50% +- 3%, big
// 50% +- 3%, each of big's applications 12.5% +- 2%. Under fifo (no tenants in the
// hardware baseline) small gets about 1/17 (below 10%).
TEST(TenantShares, SixteenQpsGetNoMoreThanOne) {
  const Scenario s = load();
  const Shares sh = shares_of(s);
  EXPECT_NEAR(sh.small, 0.5, 0.03);
  EXPECT_NEAR(sh.big_total, 0.5, 0.03);
  for (double b : sh.big) EXPECT_NEAR(b, 0.125, 0.02);
  Scenario fifo = s;
  for (auto& h : fifo.hosts) h.policy = "fifo";
  EXPECT_LT(shares_of(fifo).small, 0.1);
  // fifo says it ignores the tenants, once per host and tenant, as the daemon does.
  const SimReport r = run_scenario(fifo);
  ASSERT_EQ(r.hosts[0].log.size(), 2u);
  EXPECT_EQ(r.hosts[0].log[0], "host a: tenant 'big' (flow big1): policy fifo models a hardware RNIC, which "
                               "arbitrates per QP and has no tenants: recorded, not enforced");
  EXPECT_TRUE(run_scenario(s).hosts[0].log.empty());  // justitia applies them
}

// Receive: big's tenant_weight 2, then small's 2. Expect: 2/3 : 1/3 and 1/3 : 2/3
// (+- 3%).
TEST(TenantShares, WeightsTwoToOne) {
  Scenario s = load();
  for (auto& f : s.flows)
    if (f.tenant == "big") f.tenant_weight = 2;
  Shares sh = shares_of(s);
  EXPECT_NEAR(sh.big_total, 2.0 / 3, 0.03);
  EXPECT_NEAR(sh.small, 1.0 / 3, 0.03);
  s = load();
  for (auto& f : s.flows)
    if (f.tenant == "small") f.tenant_weight = 2;
  sh = shares_of(s);
  EXPECT_NEAR(sh.big_total, 1.0 / 3, 0.03);
  EXPECT_NEAR(sh.small, 2.0 / 3, 0.03);
}

// Receive: big1's application weight 3 (the others 1). Expect: the tenants still
// split 50/50; within big, big1 takes 3/6 of its half (25% +- 2%), the other three
// 1/6 each (8.3% +- 2%).
TEST(TenantShares, ATenantsShareSplitsBetweenItsApplicationsByWeight) {
  Scenario s = load();
  for (auto& f : s.flows)
    if (f.name == "big1") f.weight = 3;
  const Shares sh = shares_of(s);
  EXPECT_NEAR(sh.small, 0.5, 0.03);
  EXPECT_NEAR(sh.big[0], 0.25, 0.02);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(sh.big[i], 0.5 / 6, 0.02);
}

// ---- tassel (bench/scenarios/justitia/tenants_tassel.toml) ----------------------
// The same tenants under tassel with per-QP limits that oversubscribe the link: big's
// 16 QPs at 10 Gb/s each, small's one at 80 Gb/s. Shares of the flows' bytes on the
// wire (headers and unfinished messages included: 1 MB messages at a few Gb/s per QP
// complete too rarely in 10 ms for goodput to resolve a share).
struct WireShares {
  double big = 0, small = 0, total_gbps = 0;
  double big_flow[4] = {};
};

WireShares tassel_shares(const Scenario& s) {
  const SimReport r = run_scenario(s);
  WireShares out;
  for (int i = 0; i < 4; ++i) {
    const FlowReport& f = flow(r, "big" + std::to_string(i + 1));
    EXPECT_EQ(f.errors, 0u);
    out.big_flow[i] = f.wire_gbps;
    out.big += f.wire_gbps;
  }
  out.small = flow(r, "small").wire_gbps;
  out.total_gbps = out.big + out.small;
  for (double& b : out.big_flow) b /= out.total_gbps;
  out.big /= out.total_gbps;
  out.small /= out.total_gbps;
  return out;
}

Scenario load_tassel() {
  auto p = tools::load_scenario(std::string(ISOROCE_JUSTITIA_SCENARIOS) + "/tenants_tassel.toml");
  EXPECT_TRUE(p.ok()) << (p.error ? p.error->to_string() : "");
  return p.scenario;
}

// Receive: tenants_tassel.toml as it is. Expect: small 50% +- 1%, big 50% +- 1% split
// evenly over its 4 applications (12.5% +- 0.5%), the link full (99 Gb/s and up).
// Without tenants (the same limits): tassel's split by limits, small 1/3 +- 1%.
TEST(TenantShares, TasselSixteenLimitedQpsGetNoMoreThanOne) {
  Scenario s = load_tassel();
  WireShares sh = tassel_shares(s);
  EXPECT_NEAR(sh.small, 0.5, 0.01);
  EXPECT_NEAR(sh.big, 0.5, 0.01);
  for (double b : sh.big_flow) EXPECT_NEAR(b, 0.125, 0.005);
  EXPECT_GT(sh.total_gbps, 99.0);
  for (auto& f : s.flows) f.tenant.clear();
  sh = tassel_shares(s);
  EXPECT_NEAR(sh.small, 1.0 / 3, 0.01);
}

// Receive: small's limit lowered to 20 Gb/s (below its half), then big's tenant
// weight 2 with small's limit back at 80. Expect: small at its limit (20 Gb/s +- 1%)
// and big the rest of the link; with weights 2:1, 2/3 : 1/3 +- 1%.
TEST(TenantShares, TasselLimitsHoldAndWeightsSplit) {
  Scenario s = load_tassel();
  for (auto& f : s.flows)
    if (f.name == "small") f.rate_bps = 20'000'000'000;
  WireShares sh = tassel_shares(s);
  EXPECT_NEAR(sh.small * sh.total_gbps, 20.0, 0.2);
  EXPECT_GT(sh.total_gbps, 99.0);
  s = load_tassel();
  for (auto& f : s.flows)
    if (f.tenant == "big") f.tenant_weight = 2;
  sh = tassel_shares(s);
  EXPECT_NEAR(sh.big, 2.0 / 3, 0.01);
  EXPECT_NEAR(sh.small, 1.0 / 3, 0.01);
}

// Receive: tenants_tassel.toml with its [[tenant]] table for "big" at weight 2, a
// [[tenant]] that contradicts a flow's tenant_weight, one that names no flow's tenant.
// Expect: every flow of "big" weighs 2 and big gets 2/3 +- 1%; the other two refused,
// naming the key and what is wrong.
TEST(TenantShares, ScenarioTenantTablesWeighTheirFlows) {
  std::ifstream in(std::string(ISOROCE_JUSTITIA_SCENARIOS) + "/tenants_tassel.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string big = "name = \"big\"\nweight = 1";
  ASSERT_NE(text.find(big), std::string::npos);
  std::string two = text;
  two.replace(two.find(big), big.size(), "name = \"big\"\nweight = 2");
  auto p = tools::parse_scenario(two, "t.toml");
  ASSERT_TRUE(p.ok()) << p.error->to_string();
  for (const auto& f : p.scenario.flows) EXPECT_EQ(f.tenant_weight, f.tenant == "big" ? 2u : 1u) << f.name;
  EXPECT_NEAR(tassel_shares(p.scenario).big, 2.0 / 3, 0.01);
  std::string clash = two;
  clash.replace(clash.find("tenant = \"big\"\n"), 15, "tenant = \"big\"\ntenant_weight = 3\n");
  p = tools::parse_scenario(clash, "t.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error->to_string().find("tenant[0].weight: flow \"big1\" says tenant_weight = 3"), std::string::npos)
      << p.error->to_string();
  std::string stray = text + "\n[[tenant]]\nname = \"nobody\"\n";
  p = tools::parse_scenario(stray, "t.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error->to_string().find("tenant[2].name: no flow has tenant = \"nobody\""), std::string::npos)
      << p.error->to_string();
}

// Scenario checks: a tenant's weight must agree across its flows, an application
// stays in one tenant.
TEST(TenantShares, ScenarioRefusesDisagreeingTenants) {
  Scenario s = load();
  s.flows[0].tenant_weight = 3;
  auto e = validate(s);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->to_string().find("tenant_weight"), std::string::npos) << e->to_string();
  s = load();
  s.flows[1].app = s.flows[4].app;  // big2 claims small's application
  e = validate(s);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->to_string().find("tenant"), std::string::npos) << e->to_string();
}

}  // namespace
}  // namespace isoroce::sim
