// Automatic flow classification (sched/flow_classifier.h) and the justitia policy's
// classify = declared | auto | verify, and its latency signal choice (signal =
// probe | passive | both). A fake clock steps a 100 Gb/s link.
#include <gtest/gtest.h>

#include "fake_link.h"
#include "sched/flow_classifier.h"
#include "sched/justitia.h"
#include "sched/scheduler.h"

namespace isoroce::sched {
namespace {

using testing::FakeLink;

constexpr std::uint64_t kLink = 100'000'000'000;
constexpr Picos kUs = 1'000'000;
constexpr std::uint32_t kPkt = 4'096;
constexpr std::uint32_t kBigPkts = 256;  // 1 MB messages of 4 KB packets

Config config_with(std::uint32_t max_qps, Classify classify) {
  Config c{.link_bps = kLink, .max_qps = max_qps};
  c.justitia.classify = classify;
  return c;
}

JustitiaScheduler& justitia(std::unique_ptr<Scheduler>& s) { return static_cast<JustitiaScheduler&>(*s); }

TEST(ClassifyParams, SetByName) {
  JustitiaParams p;
  EXPECT_EQ(p.signal, LatencySignal::kProbe);
  EXPECT_EQ(p.classify, Classify::kDeclared);
  EXPECT_TRUE(set(p, "signal=passive"));
  EXPECT_EQ(p.signal, LatencySignal::kPassive);
  EXPECT_TRUE(set(p, "signal", "both"));
  EXPECT_EQ(p.signal, LatencySignal::kBoth);
  EXPECT_TRUE(set(p, "classify=verify"));
  EXPECT_EQ(p.classify, Classify::kVerify);
  EXPECT_FALSE(set(p, "signal=echo"));
  EXPECT_FALSE(set(p, "classify=guess"));
  EXPECT_EQ(p.classify, Classify::kVerify);  // unchanged by the failure
  EXPECT_TRUE(set(p, "classify_messages=5"));
  EXPECT_EQ(p.classify_messages, 5u);
  EXPECT_FALSE(set(p, "classify_messages=0") && validate(p).empty());
  p.classify_messages = 0;
  EXPECT_NE(validate(p), "");
  FlowClass c;
  ASSERT_TRUE(parse_flow_class("auto", &c));
  EXPECT_EQ(c, FlowClass::kAuto);
  EXPECT_EQ(to_string(LatencySignal::kPassive), "passive");
  EXPECT_EQ(to_string(Classify::kAuto), "auto");
}

// Receive: 16 B messages that each find the QP idle, then 1 MB messages. Expect:
// latency after exactly classify_messages (3) small messages; bandwidth at the
// packet that carries the third big message past classify_bytes (64 KB: its 16th
// 4 KB packet); every vote in between for the present class changes nothing.
TEST(FlowClassifier, SmallIdleMessagesAreLatencyBigOnesBandwidth) {
  JustitiaParams p;
  FlowClassifier c;
  c.reset(FlowClass::kBandwidth);
  EXPECT_FALSE(c.on_packet(80, true, true, false, p));
  EXPECT_FALSE(c.on_packet(80, true, true, false, p));
  EXPECT_TRUE(c.on_packet(80, true, true, false, p));
  EXPECT_EQ(c.cls(), FlowClass::kLatency);
  for (int k = 0; k < 10; ++k) EXPECT_FALSE(c.on_packet(80, true, true, false, p));
  std::uint32_t changed_at = 0;
  for (std::uint32_t i = 0; i < 4 * kBigPkts && changed_at == 0; ++i)
    if (c.on_packet(kPkt, i % kBigPkts == 0, i % kBigPkts == kBigPkts - 1, true, p)) changed_at = i + 1;
  EXPECT_EQ(changed_at, 2 * kBigPkts + 65'536 / kPkt);
  EXPECT_EQ(c.cls(), FlowClass::kBandwidth);
}

// Receive: small messages queued behind the QP's own previous ones (a batch).
// Expect: throughput. Then alternating big and small messages: no class is voted
// for 3 times in a row, so the class stays (hysteresis).
TEST(FlowClassifier, QueuedSmallMessagesAreThroughputAndAlternationDoesNotFlap) {
  JustitiaParams p;
  FlowClassifier c;
  c.reset(FlowClass::kBandwidth);
  for (int k = 0; k < 3; ++k) c.on_packet(80, true, true, true, p);
  EXPECT_EQ(c.cls(), FlowClass::kThroughput);
  for (int k = 0; k < 50; ++k) {
    EXPECT_FALSE(c.on_packet(70'000, true, true, true, p));  // big
    EXPECT_FALSE(c.on_packet(80, true, true, false, p));     // small, idle
  }
  EXPECT_EQ(c.cls(), FlowClass::kThroughput);
}

// Receive (classify = auto): an undeclared QP that posts a 16 B message every 10 us
// beside a declared bandwidth QP, then switches to back-to-back 1 MB messages.
// Expect: latency within 3 messages, bandwidth again within 3 big messages (at the
// 16th packet of the third), two reclassifications; the declared QP never changes.
TEST(JustitiaClassify, AQpThatSwitchesFrom16BTo1MBIsReclassified) {
  Config config = config_with(2, Classify::kAuto);
  auto sched = make_scheduler("justitia", config);
  JustitiaScheduler& j = justitia(sched);
  sched->set_class(0, 0, FlowClass::kBandwidth, 1, 1);
  sched->set_class(0, 1, FlowClass::kAuto, 2, 1);
  bool posting = false, big = false;
  std::uint64_t qp1_packets = 0;
  FakeLink link(*sched, config, [&](QpId qp, std::uint64_t i) {
    if (qp == 0) return Packet{kPkt, i % kBigPkts == kBigPkts - 1};
    if (big) return Packet{kPkt, (i - qp1_packets) % kBigPkts == kBigPkts - 1};
    const bool now = posting;
    posting = false;
    return now ? Packet{80, true} : Packet{};
  });
  link.start(0);
  EXPECT_EQ(j.flow_class(1), FlowClass::kBandwidth);  // undeclared: bandwidth until classified
  int latency_after = 0;
  for (int k = 1; k <= 10 && latency_after == 0; ++k) {
    const std::uint64_t before = link.record_of(1).packets;
    posting = true;
    link.start(1);
    for (int t = 0; t < 400 && link.record_of(1).packets == before; ++t) link.run_until(link.now() + kUs);
    ASSERT_EQ(link.record_of(1).packets, before + 1);  // sent (as a paced flow it waits for a token)
    link.run_until(link.now() + 10 * kUs);
    if (j.flow_class(1) == FlowClass::kLatency) latency_after = k;
  }
  EXPECT_EQ(latency_after, 3);
  qp1_packets = link.record_of(1).packets;
  big = true;
  link.start(1);
  std::uint64_t big_packets = 0;
  for (int step = 0; step < 20'000 && big_packets == 0; ++step) {
    link.run_until(link.now() + kUs / 10);
    if (j.flow_class(1) == FlowClass::kBandwidth) big_packets = link.record_of(1).packets - qp1_packets;
  }
  EXPECT_GE(big_packets, 2 * kBigPkts + 16u);
  EXPECT_LE(big_packets, 2 * kBigPkts + 16u + 2u);  // the reclass is applied at the end of that dequeue
  EXPECT_EQ(j.flow_class(0), FlowClass::kBandwidth);
  EXPECT_EQ(sched->justitia_stats()->reclassified, 2u);
}

// Receive: a bandwidth application (QP 0) and a liar (QP 1) that declares itself
// latency-sensitive and sends back-to-back 1 MB messages, for 5 ms. Expect: under
// declared and auto (the declaration wins) the liar stays latency, unpaced, and
// takes over 90% of the link; under verify it is a bandwidth flow after 3 messages
// and the two split the last 4 ms evenly (each 50% +- 5%).
double liar_share(Classify mode, FlowClass* final_class) {
  Config config = config_with(2, mode);
  auto sched = make_scheduler("justitia", config);
  sched->set_class(0, 0, FlowClass::kBandwidth, 1, 1);
  sched->set_class(0, 1, FlowClass::kLatency, 2, 1);
  FakeLink link(*sched, config, [](QpId, std::uint64_t i) { return Packet{kPkt, i % kBigPkts == kBigPkts - 1}; });
  link.start(0);
  link.start(1);
  link.run_until(1'000 * kUs);
  link.open_window(link.now());
  link.run_until(5'000 * kUs);
  link.close_window(link.now());
  *final_class = justitia(sched).flow_class(1);
  const double a = static_cast<double>(link.record_of(0).window_bytes);
  const double b = static_cast<double>(link.record_of(1).window_bytes);
  return b / (a + b);
}

TEST(JustitiaClassify, ALiarIsCaughtUnderVerifyOnly) {
  FlowClass c;
  EXPECT_GT(liar_share(Classify::kDeclared, &c), 0.9);
  EXPECT_EQ(c, FlowClass::kLatency);
  EXPECT_GT(liar_share(Classify::kAuto, &c), 0.9);
  EXPECT_EQ(c, FlowClass::kLatency);
  EXPECT_NEAR(liar_share(Classify::kVerify, &c), 0.5, 0.05);
  EXPECT_EQ(c, FlowClass::kBandwidth);
}

// Receive: latency-class and bandwidth-class round trips (on_latency_sample) and
// reference probes (on_reference_latency) under each signal. Expect: probe takes
// only the probes, passive only the latency QP's round trips, both takes both; a
// bandwidth QP's round trips never count.
TEST(JustitiaSignal, EachSignalTakesItsOwnSamples) {
  for (LatencySignal sig : {LatencySignal::kProbe, LatencySignal::kPassive, LatencySignal::kBoth}) {
    Config config{.link_bps = kLink, .max_qps = 2};
    config.justitia.signal = sig;
    auto sched = make_scheduler("justitia", config);
    sched->set_class(0, 0, FlowClass::kLatency, 1, 1);
    sched->set_class(0, 1, FlowClass::kBandwidth, 2, 1);
    for (int k = 0; k < 4; ++k) sched->on_reference_latency(k * kUs, 3 * kUs);
    for (int k = 0; k < 5; ++k) sched->on_latency_sample(k * kUs, 0, 7 * kUs);
    for (int k = 0; k < 6; ++k) sched->on_latency_sample(k * kUs, 1, 9 * kUs);
    const JustitiaStats& s = *sched->justitia_stats();
    const std::uint64_t probes = sig == LatencySignal::kPassive ? 0 : 4;
    const std::uint64_t passive = sig == LatencySignal::kProbe ? 0 : 5;
    EXPECT_EQ(s.passive_samples, passive) << to_string(sig);
    EXPECT_EQ(s.samples, probes + passive) << to_string(sig);
    EXPECT_EQ(s.current99, sig == LatencySignal::kProbe ? 3 * kUs : 7 * kUs) << to_string(sig);
  }
}

// Receive: a latency QP active beside a backlogged bandwidth flow, Target99 2 us, and
// only passive round trips of 10 us. Expect: SafeUtil halves to its floor
// B/(L+B) = 1/2 of MaxRate, exactly as with the same latencies from the probe.
TEST(JustitiaSignal, PassiveSamplesDriveSafeUtilAsProbesDo) {
  for (bool passive : {false, true}) {
    Config config{.link_bps = kLink, .max_qps = 2};
    config.justitia.signal = passive ? LatencySignal::kPassive : LatencySignal::kProbe;
    auto sched = make_scheduler("justitia", config);
    sched->set_class(0, 0, FlowClass::kBandwidth, 1, 1);
    sched->set_class(0, 1, FlowClass::kLatency, 2, 1);
    FakeLink link(*sched, config, [](QpId qp, std::uint64_t i) {
      return qp == 0 ? Packet{kPkt, i % kBigPkts == kBigPkts - 1} : (i == 0 ? Packet{80, true} : Packet{});
    });
    link.start(0);
    link.start(1);
    link.run_until(10 * kUs);
    for (int k = 0; k < 10; ++k) {
      if (passive) sched->on_latency_sample(link.now(), 1, 10 * kUs);
      else sched->on_reference_latency(link.now(), 10 * kUs);
    }
    const JustitiaStats& s = *sched->justitia_stats();
    EXPECT_EQ(s.safe_util_bps, kLink / 2) << passive;
    EXPECT_EQ(s.samples, 10u);
  }
}

}  // namespace
}  // namespace isoroce::sched
