// Accuracy of the tassel policy on a 100 Gb/s link (issue 4): one QP at each rate,
// thousands of QPs under and over the link, mixed packet sizes. The link is
// FakeLink: a fake clock stepped to each deadline; every rate is measured from the
// departures it records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "fake_link.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr Picos kMs = 1'000'000'000;

double rel_error(double got, double want) { return std::fabs(got - want) / want; }

// ---------------------------------------------------------------------------
// One QP alone at each rate from 100 Kb/s to line rate.

struct SingleCase {
  std::uint64_t bps;
  std::uint32_t bytes;
};

class SingleQpRate : public ::testing::TestWithParam<SingleCase> {};

// Receive: one QP limited to `bps`, 2000 packets of `bytes` ready back to back.
// Expect: measured rate within 0.5% of the limit; every gap between departures
// within two fine slots (128 ps) of bytes * 8 / bps.
TEST_P(SingleQpRate, WithinHalfPercent) {
  const SingleCase c = GetParam();
  constexpr std::uint64_t kPackets = 2'000;
  Config config{.link_bps = kLink, .max_qps = 1};
  auto sched = make_scheduler("tassel", config);
  ASSERT_NE(sched, nullptr);
  sched->set_rate(0, 0, c.bps);
  FakeLink link(*sched, config, [&](QpId, std::uint64_t i) {
    return i < kPackets ? Packet{c.bytes, true} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.run_until(kNever - 1);
  const auto& log = link.log();
  ASSERT_EQ(log.size(), kPackets);
  const double rate = link.record_of(0).rate_bps();
  const double want = std::min<double>(c.bps, kLink);
  const double gap = c.bytes * 8e12 / want;  // ps
  double max_gap_err = 0, sum_gap_err = 0;
  for (std::size_t k = 1; k < log.size(); ++k) {
    const double e = std::fabs(static_cast<double>(log[k].departure - log[k - 1].departure) - gap);
    max_gap_err = std::max(max_gap_err, e);
    sum_gap_err += e;
  }
  const double mean_gap_err = sum_gap_err / static_cast<double>(log.size() - 1);
  RecordProperty("rate_error_ppm", std::to_string(rel_error(rate, want) * 1e6));
  RecordProperty("max_gap_error_ps", std::to_string(max_gap_err));
  RecordProperty("mean_gap_error_ps", std::to_string(mean_gap_err));
  std::printf("  %14llu bps x %4u B: rate error %.4f%%, gap %.0f ps, gap error max %.1f ps (%.4f%%) mean %.2f ps\n",
              static_cast<unsigned long long>(c.bps), c.bytes, rel_error(rate, want) * 100, gap,
              max_gap_err, max_gap_err / gap * 100, mean_gap_err);
  EXPECT_LT(rel_error(rate, want), 0.005);
  EXPECT_LE(max_gap_err, 2.0 * 64 + 1);
}

std::vector<SingleCase> single_cases() {
  std::vector<SingleCase> out;
  for (std::uint64_t bps : {100'000ull, 1'000'000ull, 10'000'000ull, 100'000'000ull, 1'000'000'000ull,
                            10'000'000'000ull, 40'000'000'000ull, 100'000'000'000ull}) {
    for (std::uint32_t bytes : {64u, 1'500u, 4'096u}) out.push_back({bps, bytes});
  }
  // Rates that are not round numbers of picoseconds per byte.
  out.push_back({3'333'333'333, 64});
  out.push_back({77'777'777, 1'000});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Rates, SingleQpRate, ::testing::ValuesIn(single_cases()),
                         [](const ::testing::TestParamInfo<SingleCase>& info) {
                           return std::to_string(info.param.bps) + "bps_" + std::to_string(info.param.bytes) + "B";
                         });

// ---------------------------------------------------------------------------
// Many QPs with random limits.

struct QpSet {
  std::vector<std::uint64_t> bps;
  std::vector<std::uint32_t> bytes;
  std::uint64_t sum = 0;
};

// `n` limits drawn log-uniformly from 100 Kb/s to 10 Gb/s, each draw capped so the
// sum stays at most `budget`; packet sizes chosen so each QP sends ~50 packets in
// `duration` (64 B to 4 KB).
QpSet random_set(std::uint32_t n, std::uint64_t budget, Picos duration, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr double kMin = 100e3, kMax = 10e9;
  QpSet set;
  std::uint64_t left = budget;
  for (std::uint32_t i = 0; i < n; ++i) {
    const double reserve = kMin * (n - i - 1);
    const double cap = std::min(kMax, static_cast<double>(left) - reserve);
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    double r = kMin * std::pow(kMax / kMin, u);
    if (r > cap) r = kMin * std::pow(cap / kMin, std::uniform_real_distribution<double>(0, 1)(rng));
    const std::uint64_t bps = static_cast<std::uint64_t>(r);
    set.bps.push_back(bps);
    left -= bps;
    set.sum += bps;
    const double b = static_cast<double>(bps) * (static_cast<double>(duration) / 1e12) / (8 * 50);
    set.bytes.push_back(static_cast<std::uint32_t>(std::clamp(b, 64.0, 4096.0)));
  }
  std::shuffle(set.bps.begin(), set.bps.end(), rng);  // big draws came first
  for (std::uint32_t i = 0; i < n; ++i) {
    const double b = static_cast<double>(set.bps[i]) * (static_cast<double>(duration) / 1e12) / (8 * 50);
    set.bytes[i] = static_cast<std::uint32_t>(std::clamp(b, 64.0, 4096.0));
  }
  return set;
}

struct ManyResult {
  double max_error = 0;
  double mean_error = 0;
  std::uint32_t worst_qp = 0;
  double utilization = 0;
  std::uint64_t packets = 0;
};

// Runs `set` (limits multiplied by `scale`) for `duration`, QPs starting at random
// instants of the first millisecond; measures from 2 ms on. `want(i)` is QP i's
// expected rate.
template <class Want>
ManyResult run_many(const QpSet& set, double scale, Picos duration, Want want, std::uint64_t seed) {
  const std::uint32_t n = static_cast<std::uint32_t>(set.bps.size());
  Config config{.link_bps = kLink, .max_qps = n};
  auto sched = make_scheduler("tassel", config);
  for (std::uint32_t i = 0; i < n; ++i) {
    sched->set_rate(0, i, static_cast<std::uint64_t>(static_cast<double>(set.bps[i]) * scale));
  }
  FakeLink link(*sched, config, [&](QpId qp, std::uint64_t) { return Packet{set.bytes[qp], true}; });
  std::mt19937_64 rng(seed);
  std::vector<std::pair<Picos, QpId>> starts;
  for (std::uint32_t i = 0; i < n; ++i) starts.push_back({rng() % kMs, i});
  std::sort(starts.begin(), starts.end());
  for (auto [t, qp] : starts) {
    link.run_until(t);
    link.start(qp);
  }
  const Picos window_start = 2 * kMs;
  link.open_window(window_start);
  link.close_window(duration);
  link.run_until(duration);
  ManyResult res;
  double sum = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto& r = link.record_of(i);
    EXPECT_GE(r.window_packets, 3u) << "qp " << i;
    const double e = rel_error(r.rate_bps(), want(i));
    sum += e;
    if (e > res.max_error) {
      res.max_error = e;
      res.worst_qp = i;
    }
    res.packets += r.packets;
  }
  res.mean_error = sum / n;
  res.utilization = static_cast<double>(link.window_total_bytes()) * 8e12 /
                    (static_cast<double>(kLink) * static_cast<double>(duration - window_start));
  return res;
}

struct ManyCase {
  std::uint32_t qps;
  bool oversubscribed;  // limits scaled so that Phi = 2
};

class ManyQps : public ::testing::TestWithParam<ManyCase> {};

// Receive: n QPs with random limits (100 Kb/s .. 10 Gb/s) summing to under 95% of the
// link, or the same limits scaled to sum to twice the link (Phi = 2).
// Expect: every QP within 1% of its limit (Phi = 2: of half its limit), and with
// Phi = 2 the link fully used.
TEST_P(ManyQps, EveryQpWithinOnePercent) {
  const ManyCase c = GetParam();
  constexpr Picos kDuration = 400 * kMs;
  const QpSet set = random_set(c.qps, kLink * 95 / 100, kDuration, 100 + c.qps);
  const double scale = c.oversubscribed ? 2.0 * kLink / static_cast<double>(set.sum) : 1.0;
  const double share = c.oversubscribed ? 0.5 : 1.0;
  const ManyResult res = run_many(
      set, scale, kDuration,
      [&](std::uint32_t i) {
        return static_cast<double>(static_cast<std::uint64_t>(static_cast<double>(set.bps[i]) * scale)) * share;
      },
      200 + c.qps);
  RecordProperty("max_rate_error_ppm", std::to_string(res.max_error * 1e6));
  RecordProperty("mean_rate_error_ppm", std::to_string(res.mean_error * 1e6));
  RecordProperty("utilization", std::to_string(res.utilization));
  std::printf("  %u QPs, sum of limits %.2f Gb/s x %.3f: max error %.4f%% (qp %u at %llu bps), mean %.5f%%, "
              "link %.3f%% used, %llu packets\n",
              c.qps, set.sum / 1e9, scale, res.max_error * 100, res.worst_qp,
              static_cast<unsigned long long>(set.bps[res.worst_qp] * scale), res.mean_error * 100,
              res.utilization * 100, static_cast<unsigned long long>(res.packets));
  EXPECT_LT(res.max_error, 0.01);
  if (c.oversubscribed) {
    EXPECT_GT(res.utilization, 0.995);
  } else {
    EXPECT_NEAR(res.utilization, static_cast<double>(set.sum) / kLink, 0.01);
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, ManyQps,
                         ::testing::Values(ManyCase{1'000, false}, ManyCase{10'000, false},
                                           ManyCase{1'000, true}, ManyCase{10'000, true}),
                         [](const ::testing::TestParamInfo<ManyCase>& info) {
                           return std::to_string(info.param.qps) + (info.param.oversubscribed ? "_phi2" : "_under");
                         });

// ---------------------------------------------------------------------------
// Mixed packet sizes.

// Receive: four QPs at 300 Mb/s, 1, 5 and 20 Gb/s, each packet of a random size
// from 64 B to 4 KB. Expect: each within 0.5% of its limit, and every packet k of a QP
// departs within 1 us of the sum of the durations of packets 0..k-1 at its rate.
TEST(TasselAccuracy, MixedPacketSizes) {
  const std::vector<std::uint64_t> rates = {300'000'000, 1'000'000'000, 5'000'000'000, 20'000'000'000};
  Config config{.link_bps = kLink, .max_qps = 4};
  auto sched = make_scheduler("tassel", config);
  std::vector<std::vector<std::uint32_t>> sizes(4);
  std::mt19937_64 rng(5);
  for (auto& s : sizes) {
    for (int k = 0; k < 20'000; ++k) s.push_back(64 + rng() % (4096 - 64 + 1));
  }
  for (QpId q = 0; q < 4; ++q) sched->set_rate(0, q, rates[q]);
  FakeLink link(*sched, config, [&](QpId qp, std::uint64_t i) {
    return i < sizes[qp].size() ? Packet{sizes[qp][i], i % 8 == 7} : Packet{};
  });
  link.keep_log(true);
  for (QpId q = 0; q < 4; ++q) link.start(q);
  link.run_until(kNever - 1);
  std::vector<double> ideal(4, 0);
  std::vector<std::size_t> index(4, 0);
  double max_lag = 0;
  for (const Grant& g : link.log()) {
    const double lag = static_cast<double>(g.departure) - ideal[g.qp];
    max_lag = std::max(max_lag, std::fabs(lag));
    ideal[g.qp] += g.bytes * 8e12 / static_cast<double>(rates[g.qp]);
    ++index[g.qp];
  }
  for (QpId q = 0; q < 4; ++q) {
    const double rate = link.record_of(q).rate_bps();
    std::printf("  qp %u at %llu bps: %.5f%% off\n", q, static_cast<unsigned long long>(rates[q]),
                rel_error(rate, rates[q]) * 100);
    EXPECT_LT(rel_error(rate, rates[q]), 0.005) << "qp " << q;
    EXPECT_EQ(index[q], sizes[q].size());
  }
  std::printf("  largest departure off its ideal time: %.1f ns\n", max_lag / 1000);
  RecordProperty("max_departure_lag_ps", std::to_string(max_lag));
  EXPECT_LT(max_lag, 1e6);
}

}  // namespace
}  // namespace isoroce::sched
