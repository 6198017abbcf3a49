// Random scenarios (seeded): odd sizes, every MTU, deep and shallow queues,
// several QPs, small max_rd_atomic, SRQ, PSNs near the wrap, faults up to 3%
// in both directions. Whatever happens, every byte must be right, every flow
// must finish, and the only error allowed is "retries exhausted".
// ISOROCE_SIM_PROPERTY_RUNS=N runs N scenarios instead of the default.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "dataplane/sim/rng.h"
#include "tests/sim/sim_util.h"

namespace isoroce::sim {
namespace {

Scenario random_scenario(uint64_t seed) {
  Rng r(component_seed(seed, 1999));
  Scenario s;
  s.seed = seed;
  s.duration = 5'000'000'000'000;  // 5 s: let everything finish
  s.link_delay = r.between(100, 5000) * 1000;
  const double fault = r.chance(0.25) ? 0.0 : (r.chance(0.8) ? 0.03 : 0.1) * r.unit();
  s.faults.loss.p = r.chance(0.7) ? fault : 0;
  s.faults.loss.burst = static_cast<uint32_t>(r.chance(0.8) ? r.between(1, 3) : r.between(4, 16));
  s.faults.reorder.p = r.chance(0.5) ? fault : 0;
  s.faults.reorder_delay = r.between(100, r.chance(0.8) ? 10000 : 100000) * 1000;
  s.faults.duplicate.burst = static_cast<uint32_t>(r.between(1, 3));
  if (r.chance(0.3)) s.ecn = EcnConfig{true, r.between(1, 50) * 1024, r.between(50, 200) * 1024, r.unit()};
  s.faults.duplicate.p = r.chance(0.5) ? fault : 0;
  s.faults.corrupt.p = r.chance(0.5) ? fault : 0;
  if (r.chance(0.3)) s.buffer_bytes = r.between(32, 512) * 1024;
  const size_t nhosts = r.between(2, 4);
  for (size_t i = 0; i < nhosts; ++i) {
    HostConfig h;
    h.name = "h" + std::to_string(i);
    h.ip_text = "10.0.0." + std::to_string(i + 1);
    h.ip = wire::ipv4_mapped(0x0a000001u + static_cast<uint32_t>(i));
    const uint64_t rates[] = {10, 25, 40, 100};
    h.link_bps = rates[r.below(4)] * 1'000'000'000ull;
    h.policy = r.chance(0.5) ? "fifo" : "tassel";
    if (r.chance(0.2)) h.msg_cost = r.between(0, 2000) * 1000;
    s.hosts.push_back(h);
  }
  const size_t nflows = r.between(1, 4);
  for (size_t i = 0; i < nflows; ++i) {
    FlowConfig f;
    f.name = "f" + std::to_string(i);
    const size_t src = r.below(nhosts);
    size_t dst = r.below(nhosts - 1);
    if (dst >= src) ++dst;
    f.src = s.hosts[src].name;
    f.dst = {s.hosts[dst].name};
    if (r.chance(0.15)) {
      f.transport = Transport::kUd;
      f.verb = r.chance(0.5) ? Verb::kSend : Verb::kSendImm;
      f.size = r.between(8, 4096);
      for (size_t h = 0; h < nhosts; ++h)
        if (h != src && h != dst && r.chance(0.5)) f.dst.push_back(s.hosts[h].name);
      if (r.chance(0.3)) f.use_srq = true;
    } else {
      f.verb = static_cast<Verb>(r.below(7));
      const uint64_t sizes[] = {1, 7, 8, 63, 255, 1000, 4096, 4097, 12345, 65536, 200000};
      f.size = is_atomic(f.verb) ? 8 : sizes[r.below(11)];
      const uint32_t mtus[] = {256, 512, 1024, 2048, 4096};
      f.mtu = mtus[r.below(5)];
      f.max_rd_atomic = static_cast<uint32_t>(r.between(1, 16));
      if (uses_receives(f.verb) && r.chance(0.3)) f.use_srq = true;
      if (r.chance(0.3)) f.start_psn = static_cast<uint32_t>(0xffffff - r.below(300));
      if (r.chance(0.2)) f.post_recv_delay = r.between(1, 50) * 1'000'000;
      if (r.chance(0.2)) f.recv_depth = static_cast<uint32_t>(r.between(1, 4));
      if (f.size <= kMaxInline && !is_atomic(f.verb) && f.verb != Verb::kRead && r.chance(0.5)) f.inline_data = true;
    }
    f.count = r.between(5, f.size > 50000 ? 30 : 120);
    f.depth = static_cast<uint32_t>(r.between(1, 16));
    f.qps = static_cast<uint32_t>(r.between(1, 4));
    f.start = r.below(20) * 1'000'000;
    f.timeout = static_cast<uint8_t>(r.between(5, 9));
    if (r.chance(0.2) && s.hosts[src].policy == "tassel")
      f.rate_bps = r.between(1, 20) * 1'000'000'000ull;
    s.flows.push_back(f);
  }
  return s;
}

TEST(SimProperty, RandomScenariosKeepEveryByteRight) {
  int runs = 60;
  if (const char* e = std::getenv("ISOROCE_SIM_PROPERTY_RUNS")) runs = std::atoi(e);
  uint64_t first = 1;
  if (const char* e = std::getenv("ISOROCE_SIM_PROPERTY_FIRST")) first = std::strtoull(e, nullptr, 10);
  for (uint64_t seed = first; seed < first + static_cast<uint64_t>(runs); ++seed) {
    const Scenario s = random_scenario(seed);
    ASSERT_FALSE(validate(s)) << validate(s)->to_string();
    const SimReport r = testing::run_scenario(s);
    SCOPED_TRACE("property seed " + std::to_string(seed) + ", scenario:\n" + tools::scenario_to_toml(s));
    EXPECT_TRUE(r.all_finished);
    for (const auto& f : r.flows) {
      SCOPED_TRACE(testing::describe(f));
      EXPECT_TRUE(f.integrity_ok);
      EXPECT_TRUE(f.finished);
      for (const auto& [k, n] : f.error_statuses) {
        EXPECT_TRUE(k == "IBV_WC_RETRY_EXC_ERR" || k == "IBV_WC_WR_FLUSH_ERR") << k;
      }
      if (f.errors == 0 && f.transport == Transport::kRc) {
        const FlowConfig* cfg = nullptr;
        for (const auto& c : s.flows)
          if (c.name == f.name) cfg = &c;
        EXPECT_EQ(f.messages, *cfg->count);
        if (uses_receives(cfg->verb)) {
          EXPECT_EQ(f.delivered, *cfg->count);
        }
      }
    }
    for (const auto& h : r.hosts) {
      EXPECT_EQ(h.engine.cq_overruns, 0u) << h.name;
      EXPECT_EQ(h.stalls, 0u) << h.name;
    }
  }
}

}  // namespace
}  // namespace isoroce::sim
