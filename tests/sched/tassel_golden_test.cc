// The tassel policy's grants, packet for packet, against the ones main made before the
// issue-20 speed work (e92de16): every optimization of sched/tassel.* and the
// timeline must keep the same schedule, not just the same rates. Each case folds
// every grant (QP, bytes, departure) of a seeded run into a hash; the expected hashes
// were computed by this same code built against e92de16's sched/. A change that
// alters the schedule on purpose must say why and update them.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sched/tassel.h"

namespace isoroce::sched {
namespace {

// A seeded workload's grants folded into a hash (FNV-1a over QP, bytes and departure of
// every grant, and the system time at the end).
struct GoldenSource final : PacketSource {
  std::mt19937_64 rng{7};
  bool vary = false;
  std::vector<int> left;
  Packet on_grant(QpId q, std::uint32_t) override {
    if (!vary) return {64, true};
    if (left[q]-- <= 0) {
      left[q] = static_cast<int>(rng() % 50);
      return {0, true};
    }
    return {static_cast<std::uint32_t>(64 + rng() % 4000), true};
  }
};

// `qps` QPs with limits of 0.5x to 1.5x of load_pct% of the link over qps; churn: every
// seventh QP unlimited, packets of 64 B to 4 KB, messages ending, and activations,
// deactivations, rate changes and control packets between dequeues.
std::uint64_t golden_hash(std::uint32_t qps, bool churn, std::uint64_t load_pct, std::uint64_t packets,
                          trace::Sink* sink = nullptr) {
  const Config c{.link_bps = 100'000'000'000, .max_qps = qps, .lookahead = 1'000'000};
  TasselScheduler s(c);
  if (sink) s.attach_trace(sink, trace::kAllEvents, 0);
  std::mt19937_64 rng(42);
  const std::uint64_t fair = 100'000'000'000 / 100 * load_pct / qps;
  auto spread = [&] { return fair * (50 + rng() % 101) / 100; };
  for (QpId q = 0; q < qps; ++q) s.set_rate(0, q, churn && q % 7 == 0 ? kUnlimited : spread());
  GoldenSource src;
  src.vary = churn;
  src.left.assign(qps, 10);
  for (QpId q = 0; q < qps; ++q) s.activate(rng() % 1'000'000, q, {64, true});
  Grant out[32];
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t x) { h = (h ^ x) * 1099511628211ull; };
  Picos now = 0;
  for (std::uint64_t n = 0; n < packets;) {
    const Picos d = s.next_deadline();
    now = d == kNever ? now + 1000 : std::max(now, d);
    const std::size_t k = s.dequeue(now, out, src);
    for (std::size_t i = 0; i < k; ++i) {
      mix(out[i].qp);
      mix(out[i].bytes);
      mix(out[i].departure);
    }
    n += k;
    if (!churn) continue;
    for (int j = 0; j < 4; ++j) {
      const QpId q = static_cast<QpId>(rng() % qps);
      switch (rng() % 5) {
        case 0: s.activate(now, q, {static_cast<std::uint32_t>(64 + rng() % 1000), true}); break;
        case 1: if (rng() % 8 == 0) s.deactivate(now, q); break;
        case 2: if (rng() % 4 == 0) s.set_rate(now, q, rng() % 3 == 0 ? kUnlimited : spread() * (1 + rng() % 20)); break;
        case 3: if (rng() % 16 == 0) s.enqueue_control(now, q, 64); break;
        default: s.activate(now, q, {64, true});
      }
    }
  }
  mix(s.system_time());
  return h;
}

struct GoldenCase {
  std::uint32_t qps;
  bool churn;
  std::uint64_t load_pct;
  std::uint64_t packets;
  std::uint64_t hash;
};

constexpr GoldenCase kCases[] = {
    {1, false, 95, 200000, 0xcf8b09588f8f3d21ull},
    {1024, false, 95, 500000, 0x567d1a7ac74432ecull},
    {16384, false, 95, 500000, 0x8c6144ee89d26a84ull},
    {16384, false, 160, 500000, 0x6fb550b7adbac239ull},
    {4096, true, 95, 300000, 0x0b6b4357fcadf1ecull},
    {4096, true, 200, 300000, 0x7922dd1199ddea68ull},
    {64, true, 120, 300000, 0xaae6b66f040c9693ull},
    {200000, false, 95, 600000, 0x7d00bd8dac7226a2ull},
};

TEST(TasselGolden, SameGrantsAsBeforeTheSpeedWork) {
  for (const GoldenCase& c : kCases) {
    EXPECT_EQ(golden_hash(c.qps, c.churn, c.load_pct, c.packets), c.hash)
        << c.qps << " QPs, churn " << c.churn << ", load " << c.load_pct << "%";
  }
}

// dequeue() has a loop without trace points for when nothing is traced: with every
// event traced, the grants are the same.
TEST(TasselGolden, TracedGrantsEqualUntraced) {
  struct Counting final : trace::Sink {
    void record(const trace::Record&) override { ++count; }
    std::uint64_t count = 0;
  } sink;
  for (const GoldenCase& c : {kCases[2], kCases[4]}) {
    EXPECT_EQ(golden_hash(c.qps, c.churn, c.load_pct, c.packets, &sink), c.hash) << c.qps << " QPs";
  }
  EXPECT_GT(sink.count, 1'000'000u);
}

}  // namespace
}  // namespace isoroce::sched
