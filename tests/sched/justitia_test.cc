// The justitia policy: multi-resource tokens, latency QPs unpaced, applications as
// logical flows, SafeUtil by AIMD, Current99 over a sliding window; and the message
// processor (Config::max_msgs_per_sec) in fifo. A fake clock steps a 100 Gb/s link.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "fake_link.h"
#include "sched/justitia.h"
#include "sched/scheduler.h"
#include "sched/sliding_quantile.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr Picos kUs = 1'000'000;
constexpr Picos kMs = 1'000 * kUs;

// Every QP endlessly backlogged with messages of `pkts` packets of `bytes`.
FakeLink::SizeRule messages(std::uint32_t bytes, std::uint32_t pkts) {
  return [=](QpId, std::uint64_t i) { return Packet{bytes, i % pkts == pkts - 1}; };
}

Config justitia_config(std::uint32_t max_qps, JustitiaParams p = {}) {
  Config c{.link_bps = kLink, .max_qps = max_qps};
  c.justitia = p;
  return c;
}

double gbps(std::uint64_t bytes, Picos over) { return static_cast<double>(bytes) * 8.0 * 1e12 / over / 1e9; }

TEST(JustitiaParams, DefaultsAreValidAndSetByName) {
  JustitiaParams p;
  EXPECT_EQ(validate(p), "");
  EXPECT_EQ(p.token_bytes, 1'000'000u);
  EXPECT_EQ(p.split_bytes, 5'000u);
  EXPECT_EQ(p.ref_period, 500 * kUs);
  EXPECT_EQ(p.window, 10'000u);
  EXPECT_TRUE(set(p, "target99_us", "4.8"));
  EXPECT_EQ(p.target99, 4'800'000u);
  EXPECT_TRUE(set(p, "increase_step_gbps=0.5"));
  EXPECT_EQ(p.increase_step_bps, 500'000'000u);
  EXPECT_TRUE(set(p, "unattainable_after_s", "0.25"));
  EXPECT_EQ(p.unattainable_after, 250 * kMs);
  EXPECT_FALSE(set(p, "window", "1.5"));     // a count
  EXPECT_FALSE(set(p, "window", "-3"));
  EXPECT_FALSE(set(p, "no_such_key", "1"));
  EXPECT_FALSE(set(p, "token_bytes"));       // no '='
  EXPECT_EQ(p.window, 10'000u);              // unchanged by the failures
  p.split_bytes = p.token_bytes + 1;
  EXPECT_NE(validate(p), "");
  JustitiaParams bad;
  bad.window = 0;
  Config c = justitia_config(4, bad);
  EXPECT_EQ(make_scheduler("justitia", c), nullptr);
}

// Receive: 20,000 random latencies into a window of 1,000. Expect: after every sample
// the 99th and 50th percentiles equal those of the last 1,000 sorted.
TEST(SlidingQuantile, ExactOverTheWindow) {
  SlidingQuantile w(1'000);
  std::mt19937_64 rng(7);
  std::vector<Picos> all;
  for (int i = 0; i < 20'000; ++i) {
    const Picos s = rng() % 100'000;
    all.push_back(s);
    w.add(s);
    if (i % 997 != 0 && i < 19'990) continue;
    std::vector<Picos> last(all.end() - std::min<std::ptrdiff_t>(all.size(), 1'000), all.end());
    std::sort(last.begin(), last.end());
    for (double q : {0.5, 0.99}) {
      const std::size_t rank = static_cast<std::size_t>(std::ceil(q * last.size()));
      EXPECT_EQ(w.quantile(q), last[rank - 1]) << "sample " << i << " q " << q;
    }
  }
}

// Receive: no latency flow, MaxRate 40 Gb/s, one bandwidth QP endlessly backlogged.
// Expect: it gets 40 Gb/s (tokens of 1 MB every 200 us), within 1%.
TEST(Justitia, TokensPaceBandwidthToSafeUtil) {
  JustitiaParams p;
  p.max_rate_bps = 40'000'000'000;
  p.max_tokens = 1;
  Config config = justitia_config(2, p);
  auto sched = make_scheduler("justitia", config);
  FakeLink link(*sched, config, messages(4'000, 250));
  link.start(0);
  link.run_until(5 * kMs);
  link.open_window(link.now());
  link.run_until(25 * kMs);
  EXPECT_NEAR(gbps(link.window_total_bytes(), 20 * kMs), 40.0, 0.4);
  EXPECT_EQ(sched->justitia_stats()->tau, 200 * kUs);
}

// Receive: the same, SafeUtil tiny (1 Gb/s), plus a latency-class QP with 1,000
// messages of 1,000 B. Expect: the latency QP is never paced: its packets leave at
// line rate, back to back (each waiting for at most one bandwidth packet).
TEST(Justitia, LatencyQpsAreNeverPaced) {
  JustitiaParams p;
  p.max_rate_bps = 1'000'000'000;
  Config config = justitia_config(2, p);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 1, FlowClass::kLatency, 7, 1);
  FakeLink link(*sched, config, [](QpId qp, std::uint64_t i) {
    if (qp == 0) return Packet{4'000, i % 250 == 249};
    return i < 1'000 ? Packet{1'000, true} : Packet{};
  });
  link.start(0);
  link.start(1);
  link.run_until(2 * kMs);
  const auto& lat = link.record_of(1);
  ASSERT_EQ(lat.packets, 1'000u);
  // 1,000 x 80 ns of its own, plus at most a 4 KB packet of the other in between each.
  EXPECT_LE(lat.last - lat.first, 1'000 * (80'000 + 320'000));
  EXPECT_LE(gbps(link.record_of(0).bytes, 2 * kMs), 1.0 + 5'000.0 * 8 / 2e3 / 1e3 + 0.05);
}

// Receive: application A on 1 QP, application B on 4 QPs, all bandwidth class,
// endlessly backlogged with 1 MB messages. Expect: A and B each get half (within 1%),
// B's QPs a quarter of that each.
TEST(Justitia, ApplicationsAreOneFlowWhateverTheirQps) {
  Config config = justitia_config(5);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 0, FlowClass::kBandwidth, 1, 1);
  for (QpId q = 1; q < 5; ++q) sched->set_class(0, q, FlowClass::kBandwidth, 2, 1);
  auto* js = static_cast<JustitiaScheduler*>(sched.get());
  EXPECT_EQ(js->flow_of(1), js->flow_of(4));
  EXPECT_NE(js->flow_of(0), js->flow_of(1));
  sched->set_class(0, 4, FlowClass::kBandwidth, kOwnApp, 1);  // as the engine does when the QP goes
  EXPECT_NE(js->flow_of(4), js->flow_of(1));
  sched->set_class(0, 4, FlowClass::kBandwidth, 2, 1);
  FakeLink link(*sched, config, messages(4'096, 256));
  for (QpId q = 0; q < 5; ++q) link.start(q);
  link.run_until(2 * kMs);
  link.open_window(link.now());
  link.run_until(42 * kMs);
  const double a = static_cast<double>(link.record_of(0).window_bytes);
  double b = 0;
  for (QpId q = 1; q < 5; ++q) b += static_cast<double>(link.record_of(q).window_bytes);
  EXPECT_NEAR(a / (a + b), 0.5, 0.01);
  EXPECT_NEAR(gbps(static_cast<std::uint64_t>(a + b), 40 * kMs), 100.0, 1.0);  // the link stays full
  for (QpId q = 1; q < 5; ++q)
    EXPECT_NEAR(static_cast<double>(link.record_of(q).window_bytes) / b, 0.25, 0.02) << "qp " << q;
}

// Receive: applications of weight 2 and 1. Expect: 2/3 and 1/3 of the tokens (1%).
TEST(Justitia, WeightsShareTokens) {
  Config config = justitia_config(2);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 0, FlowClass::kBandwidth, 1, 2);
  sched->set_class(0, 1, FlowClass::kBandwidth, 2, 1);
  FakeLink link(*sched, config, messages(4'096, 256));
  link.start(0);
  link.start(1);
  link.run_until(2 * kMs);
  link.open_window(link.now());
  link.run_until(62 * kMs);
  const double a = static_cast<double>(link.record_of(0).window_bytes);
  const double b = static_cast<double>(link.record_of(1).window_bytes);
  EXPECT_NEAR(a / (a + b), 2.0 / 3.0, 0.01);
}

// Receive: a throughput flow of single-packet 100 B messages and a bandwidth flow of
// 1 MB messages; token_bytes 1 MB, token_ops 1,000. Expect: they alternate tokens, so
// the throughput flow sends 1,000 messages per two tokens and the bandwidth flow 1 MB.
TEST(Justitia, ThroughputFlowsSpendMessages) {
  JustitiaParams p;
  p.token_ops = 1'000;
  p.max_tokens = 1;
  Config config = justitia_config(2, p);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 0, FlowClass::kThroughput, 1, 1);
  sched->set_class(0, 1, FlowClass::kBandwidth, 2, 1);
  FakeLink link(*sched, config, [](QpId qp, std::uint64_t i) {
    return qp == 0 ? Packet{100, true} : Packet{4'000, i % 250 == 249};
  });
  link.start(0);
  link.start(1);
  link.run_until(100 * kMs);
  const std::uint64_t tokens = sched->justitia_stats()->tokens_issued;
  const double msgs = static_cast<double>(link.record_of(0).packets);
  const double bw_bytes = static_cast<double>(link.record_of(1).bytes);
  EXPECT_NEAR(msgs / (tokens / 2.0), 1'000.0, 20.0);
  EXPECT_NEAR(bw_bytes / (tokens / 2.0), 1'000'000.0, 10'000.0);
  EXPECT_GT(tokens, 100u);
}

// Receive: a bandwidth QP (4 KB packets) and a latency QP whose single-packet
// messages come every 10 us. Expect: while the latency flow is active tokens are 5 KB
// (two packets at most in a row), so each latency packet waits for at most the packet
// on the link and two more (not a 1 MB token, not even the first); once it has been idle for latency_idle, tokens are 1 MB again.
TEST(Justitia, TokensSplitWhileLatencyFlowsAreActive) {
  JustitiaParams p;
  p.latency_idle = 100 * kUs;
  Config config = justitia_config(2, p);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 1, FlowClass::kLatency, 9, 1);
  bool posting = false;  // the latency QP has one message each time the test posts
  FakeLink link(*sched, config, [&posting](QpId qp, std::uint64_t i) {
    if (qp == 0) return Packet{4'096, i % 256 == 255};
    const bool now = posting;
    posting = false;
    return now ? Packet{100, true} : Packet{};
  });
  link.keep_log(true);
  link.start(0);
  link.run_until(1 * kMs);  // a 1 MB token in progress
  std::vector<Picos> posted;
  for (int k = 0; k < 100; ++k) {
    link.run_until(1 * kMs + k * 10 * kUs);
    posted.push_back(link.now());
    posting = true;
    link.start(1);
  }
  EXPECT_EQ(sched->justitia_stats()->token_bytes, 5'000u);
  link.run_until(3 * kMs);
  EXPECT_EQ(sched->justitia_stats()->token_bytes, 1'000'000u);
  std::size_t k = 0;
  Picos worst = 0;
  for (const Grant& g : link.log())
    if (g.qp == 1 && k < posted.size()) worst = std::max(worst, g.departure - posted[k++]);
  EXPECT_EQ(k, 100u);
  // The rest of the packet on the link, then what is left of a 5 KB token: two packets.
  EXPECT_LE(worst, 3 * 330'000u);
}

// Receive: QP 0 (application 1) has one 64 KB message, QP 1 (application 2) is
// endlessly backlogged; the bank holds one 1 MB token. Expect: QP 0 takes the token,
// runs out of packets after 64 KB and its unspent bytes go back to the bank, so QP 1
// starts right after it instead of waiting for the next token (80 us later).
TEST(Justitia, UnspentTokenBytesGoBack) {
  JustitiaParams p;
  p.max_tokens = 1;
  Config config = justitia_config(2, p);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 0, FlowClass::kBandwidth, 1, 1);
  sched->set_class(0, 1, FlowClass::kBandwidth, 2, 1);
  FakeLink link(*sched, config, [](QpId qp, std::uint64_t i) {
    if (qp == 0) return i < 16 ? Packet{4'096, i == 15} : Packet{};
    return Packet{4'096, i % 256 == 255};
  });
  link.keep_log(true);
  link.start(0);
  link.start(1);
  link.run_until(100 * kUs);
  const auto& log = link.log();
  ASSERT_GE(log.size(), 17u);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(log[i].qp, 0u);
  EXPECT_EQ(log[16].qp, 1u);
  EXPECT_EQ(log[16].departure, 16 * 327'680u);  // back to back
}

// Pseudocode 1: Receive: probes above Target99 with one latency and one bandwidth
// flow active. Expect: SafeUtil halves to the floor (B+T)/(L+B+T) = 1/2 and no lower;
// a probe within Target99 adds increase_step; tau follows; with no latency flow
// active SafeUtil is MaxRate.
TEST(Justitia, SafeUtilAimd) {
  JustitiaParams p;
  p.target99 = 5 * kUs;
  p.window = 1;  // Current99 = the last probe
  p.increase_step_bps = 1'000'000'000;
  p.latency_idle = 1 * kMs;
  Config config = justitia_config(4, p);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 0, FlowClass::kBandwidth, 1, 1);
  sched->set_class(0, 1, FlowClass::kLatency, 2, 1);
  sched->activate(0, 0, {4'096, false});
  sched->activate(0, 1, {100, true});
  auto stats = [&] { return *sched->justitia_stats(); };
  sched->on_reference_latency(10 * kUs, 9 * kUs);
  EXPECT_EQ(stats().safe_util_bps, 50'000'000'000u);
  EXPECT_EQ(stats().tau, 800'000u);  // 5 KB at 50 Gb/s
  sched->on_reference_latency(20 * kUs, 9 * kUs);
  EXPECT_EQ(stats().safe_util_bps, 50'000'000'000u);  // the floor
  EXPECT_EQ(stats().halvings, 2u);
  sched->on_reference_latency(30 * kUs, 4 * kUs);
  EXPECT_EQ(stats().safe_util_bps, 51'000'000'000u);
  EXPECT_EQ(stats().current99, 4 * kUs);
  // Three bandwidth applications: the floor is 3/4.
  sched->set_class(30 * kUs, 2, FlowClass::kBandwidth, 3, 1);
  sched->set_class(30 * kUs, 3, FlowClass::kBandwidth, 4, 1);
  sched->activate(30 * kUs, 2, {4'096, false});
  sched->activate(30 * kUs, 3, {4'096, false});
  sched->on_reference_latency(40 * kUs, 9 * kUs);
  EXPECT_EQ(stats().safe_util_bps, 75'000'000'000u);
  // The latency flow idle for 1 ms: MaxRate and 1 MB tokens.
  sched->on_reference_latency(2 * kMs, 9 * kUs);
  EXPECT_EQ(stats().safe_util_bps, 100'000'000'000u);
  EXPECT_EQ(stats().latency_flows, 0u);
  EXPECT_EQ(stats().min_safe_util_bps, 50'000'000'000u);
}

// Receive: Target99 missed for longer than unattainable_after. Expect: the target is
// given up (SafeUtil = MaxRate) until another latency flow arrives, then AIMD again.
TEST(Justitia, UnattainableTargetGivesBandwidthBack) {
  JustitiaParams p;
  p.target99 = 5 * kUs;
  p.window = 1;
  p.unattainable_after = 1 * kMs;
  p.latency_idle = 100 * kMs;
  Config config = justitia_config(3, p);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 0, FlowClass::kBandwidth, 1, 1);
  sched->set_class(0, 1, FlowClass::kLatency, 2, 1);
  sched->set_class(0, 2, FlowClass::kLatency, 3, 1);
  sched->activate(0, 0, {4'096, false});
  sched->activate(0, 1, {100, true});
  Picos t = 0;
  for (; t < 1 * kMs; t += 100 * kUs) sched->on_reference_latency(t, 9 * kUs);
  EXPECT_FALSE(sched->justitia_stats()->unattainable);
  EXPECT_LT(sched->justitia_stats()->safe_util_bps, 100'000'000'000u);
  sched->on_reference_latency(t, 9 * kUs);
  EXPECT_TRUE(sched->justitia_stats()->unattainable);
  EXPECT_EQ(sched->justitia_stats()->safe_util_bps, 100'000'000'000u);
  sched->on_reference_latency(t + 100 * kUs, 9 * kUs);
  EXPECT_EQ(sched->justitia_stats()->safe_util_bps, 100'000'000'000u);
  sched->activate(t + 150 * kUs, 2, {100, true});  // a new latency flow
  sched->on_reference_latency(t + 200 * kUs, 9 * kUs);
  EXPECT_FALSE(sched->justitia_stats()->unattainable);
  EXPECT_LT(sched->justitia_stats()->safe_util_bps, 100'000'000'000u);
}

// Receive: a QP changes class while backlogged, then is deactivated. Expect: the
// scheduler's counts stay consistent and it goes on granting.
TEST(Justitia, ClassChangeAndDeactivateKeepState) {
  Config config = justitia_config(3);
  auto sched = make_scheduler("justitia", config);
  FakeLink link(*sched, config, messages(4'096, 4));
  link.start(0);
  link.start(1);
  link.run_until(100 * kUs);
  sched->set_class(link.now(), 1, FlowClass::kLatency, 5, 1);
  EXPECT_EQ(static_cast<JustitiaScheduler*>(sched.get())->flow_class(1), FlowClass::kLatency);
  EXPECT_EQ(sched->active_qps(), 2u);
  link.run_until(200 * kUs);
  sched->deactivate(link.now(), 0);
  EXPECT_EQ(sched->active_qps(), 1u);
  const std::uint64_t before = link.record_of(1).packets;
  link.run_until(300 * kUs);
  EXPECT_GT(link.record_of(1).packets, before + 100);
  EXPECT_EQ(sched->justitia_stats()->bandwidth_flows, 0u);
}

// The emulated message processor (Config::max_msgs_per_sec = 1M): single-packet
// 64 B messages leave at 1M/s under fifo and justitia, while 1 MB messages are not
// slowed (one message start per 1 MB).
// ---- per-QP rate limits (set_rate: DCQCN, the operator) ----

// Receive: bandwidth QP 0 limited to 10 Gb/s, bandwidth QP 1 unlimited, both endlessly
// backlogged with 1 MB messages of 4 KB packets. Expect: QP 0 sends at 10 Gb/s (within
// 1%) over 20 ms, QP 1 takes the rest of the link (the limited QP blocks no one); the
// same limit alone gives the same rate.
TEST(JustitiaRate, BandwidthQpSendsAtItsLimit) {
  for (bool alone : {true, false}) {
    Config config = justitia_config(2);
    auto sched = make_scheduler("justitia", config);
    sched->set_rate(0, 0, 10'000'000'000);
    EXPECT_EQ(sched->rate(0), 10'000'000'000u);
    FakeLink link(*sched, config, messages(4'096, 256));
    link.start(0);
    if (!alone) link.start(1);
    link.run_until(5 * kMs);
    link.open_window(link.now());
    link.run_until(25 * kMs);
    EXPECT_NEAR(link.record_of(0).rate_bps() / 1e9, 10.0, 0.1) << alone;
    if (!alone) {
      EXPECT_GT(gbps(link.window_total_bytes(), 20 * kMs), 99.0);
    }
  }
}

// Receive: bandwidth QP 0 limited to 1 Gb/s, two unlimited bandwidth QPs. Expect: the
// unlimited ones share the other 99 Gb/s evenly; QP 0 gets its 1 Gb/s.
TEST(JustitiaRate, LimitedQpDoesNotSlowUnlimitedOnes) {
  Config config = justitia_config(3);
  auto sched = make_scheduler("justitia", config);
  sched->set_rate(0, 0, 1'000'000'000);
  FakeLink link(*sched, config, messages(4'096, 256));
  for (QpId q = 0; q < 3; ++q) link.start(q);
  link.run_until(5 * kMs);
  link.open_window(link.now());
  link.run_until(45 * kMs);
  EXPECT_NEAR(link.record_of(0).rate_bps() / 1e9, 1.0, 0.01);
  EXPECT_NEAR(gbps(link.record_of(1).window_bytes, 40 * kMs), 49.5, 0.5);
  EXPECT_NEAR(gbps(link.record_of(2).window_bytes, 40 * kMs), 49.5, 0.5);
}

// Receive: a QP at 1 Mb/s sends a 4 KB packet at 0 (next start 32.8 ms later); at 1 us
// the limit goes to 10 Gb/s, later to none. Expect: the wait ahead shrinks 10,000-fold
// (as tassel); a slower limit keeps the start already due; with no limit the QP sends
// back to back at once.
TEST(JustitiaRate, RaisingAndRemovingTheLimitTakeEffect) {
  Config config = justitia_config(1);
  auto sched = make_scheduler("justitia", config);
  sched->set_rate(0, 0, 1'000'000);
  struct Endless : PacketSource {
    Packet on_grant(QpId, std::uint32_t) override { return {4'096, true}; }
  } src;
  sched->activate(0, 0, {4'096, true});
  Grant out[4];
  ASSERT_EQ(sched->dequeue(0, out, src), 1u);
  EXPECT_EQ(out[0].departure, 0u);
  EXPECT_EQ(sched->next_deadline(), 32'768'000'000u);
  EXPECT_EQ(sched->dequeue(10 * kMs, out, src), 0u);  // a waiting QP is not granted
  sched->set_rate(kUs, 0, 10'000'000'000);
  const Picos want = kUs + (32'768'000'000 - kUs) / 10'000;
  EXPECT_EQ(sched->next_deadline(), want);
  ASSERT_EQ(sched->dequeue(want, out, src), 1u);
  EXPECT_EQ(out[0].departure, want);
  const Picos next = sched->next_deadline();
  EXPECT_EQ(next, want + 3'276'800);
  sched->set_rate(want + 1, 0, 1'000'000);  // slower: from the packet after next
  EXPECT_EQ(sched->next_deadline(), next);
  ASSERT_EQ(sched->dequeue(next, out, src), 1u);
  EXPECT_EQ(sched->next_deadline(), next + 32'768'000'000);
  sched->set_rate(next + kUs, 0, kUnlimited);
  EXPECT_LE(sched->next_deadline(), next + kUs);  // now
  ASSERT_EQ(sched->dequeue(next + kUs, out, src), 1u);
  EXPECT_EQ(out[0].departure, next + kUs);
  EXPECT_EQ(sched->next_deadline(), next + kUs + 327'680);  // back to back at link rate
  ASSERT_EQ(sched->dequeue(next + kUs + 327'680, out, src), 1u);
}

// Receive: a latency-class QP limited to 5 Gb/s with 1 KB messages and an unlimited
// bandwidth QP. Expect: Justitia's tokens never pace the latency QP, but its rate limit
// does: 5 Gb/s within 1%; the bandwidth QP gets the other 95.
TEST(JustitiaRate, LimitedLatencyQpIsPaced) {
  Config config = justitia_config(2);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 1, FlowClass::kLatency, 7, 1);
  sched->set_rate(0, 1, 5'000'000'000);
  FakeLink link(*sched, config, [](QpId qp, std::uint64_t i) {
    if (qp == 0) return Packet{4'000, i % 250 == 249};
    return Packet{1'000, true};
  });
  link.start(0);
  link.start(1);
  link.run_until(2 * kMs);
  link.open_window(link.now());
  link.run_until(22 * kMs);
  EXPECT_NEAR(link.record_of(1).rate_bps() / 1e9, 5.0, 0.05);
  EXPECT_NEAR(gbps(link.record_of(0).window_bytes, 20 * kMs), 95.0, 1.0);
}

// Receive: DCQCN-like control of QP 0: a new limit (1 to 50 Gb/s, seeded) every 4 us
// for 20 ms, an unlimited QP beside it. Expect: QP 0 sends what its limits allow (the
// integral of the rate, within 1%), never more than its limit plus two packets in any
// interval, and the link stays full.
TEST(JustitiaRate, FrequentRateChanges) {
  Config config = justitia_config(2);
  auto sched = make_scheduler("justitia", config);
  FakeLink link(*sched, config, messages(1'024, 1'000));
  std::mt19937_64 rng(11);
  link.start(0);
  link.start(1);
  double allowed = 0;
  std::uint64_t before = 0;
  for (Picos t = 0; t < 20 * kMs; t += 4 * kUs) {
    const std::uint64_t bps = 1'000'000'000 + rng() % 49'000'000'000;
    sched->set_rate(t, 0, bps);
    link.run_until(t + 4 * kUs);
    const std::uint64_t sent = link.record_of(0).bytes - before;
    before = link.record_of(0).bytes;
    EXPECT_LE(static_cast<double>(sent), bps / 8.0 * 4e-6 + 2 * 1'024 + 1) << t;
    allowed += bps / 8.0 * 4e-6;
  }
  EXPECT_NEAR(static_cast<double>(link.record_of(0).bytes) / allowed, 1.0, 0.01);
  EXPECT_GT(gbps(link.total_bytes(), 20 * kMs), 99.5);
}

TEST(MessageRate, CapsMessageStarts) {
  for (const char* pol : {"fifo", "justitia"}) {
    Config config = justitia_config(1);
    config.max_msgs_per_sec = 1'000'000;
    auto sched = make_scheduler(pol, config);
    FakeLink small(*sched, config, messages(64, 1));
    small.start(0);
    small.run_until(10 * kMs);
    EXPECT_NEAR(static_cast<double>(small.record_of(0).packets), 10'000.0, 2.0) << pol;
    auto sched2 = make_scheduler(pol, config);
    FakeLink big(*sched2, config, messages(4'096, 256));
    big.start(0);
    big.run_until(10 * kMs);
    EXPECT_GT(gbps(big.record_of(0).bytes, 10 * kMs), 95.0) << pol;
  }
}

}  // namespace
}  // namespace isoroce::sched
