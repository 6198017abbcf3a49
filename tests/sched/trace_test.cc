// Scheduler trace points (sched/trace.h) against a known schedule: one QP at a
// rate limit on tassel, a paced flow on justitia, fifo's grants; off by default.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "sched/tassel.h"
#include "sched/timeline.h"
#include "tests/sched/fake_link.h"

namespace isoroce::sched::testing {
namespace {

using trace::Event;

struct Recorder final : trace::Sink {
  void record(const trace::Record& r) override { records.push_back(r); }
  std::vector<trace::Record> records;
  std::vector<trace::Record> of(Event e) const {
    std::vector<trace::Record> out;
    for (const auto& r : records)
      if (r.event == e) out.push_back(r);
    return out;
  }
};

// 1000-byte packets at 10 Gb/s on a 100 Gb/s link: a packet every 800 ns, each
// eligible (S) when the previous one's finish (F) comes, granted at once.
TEST(SchedTrace, TasselOneQpAtAKnownRate) {
  Config c;
  c.link_bps = 100'000'000'000;
  c.max_qps = 4;
  auto s = make_scheduler("tassel", c);
  Recorder rec;
  s->attach_trace(&rec, trace::kAllEvents, 7);
  FakeLink link(*s, c, [](QpId, std::uint64_t i) { return Packet{i < 4 ? 1000u : 0u, true}; });
  s->set_rate(0, 2, 10'000'000'000);
  link.start(2);
  link.run_until(10'000'000);
  std::string names;
  for (const auto& r : rec.records) names += std::string(trace::name(r.event)) + " ";
  EXPECT_EQ(names,
            "rate activate eligible grant eligible grant eligible grant eligible grant ");
  constexpr Picos kPacket = 800'000;  // 1000 B at 10 Gb/s
  const auto eligible = rec.of(Event::kEligible);
  const auto grants = rec.of(Event::kGrant);
  ASSERT_EQ(eligible.size(), 4u);
  ASSERT_EQ(grants.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(eligible[k].time, k * kPacket) << k;
    EXPECT_EQ(eligible[k].a, k * kPacket) << k;        // S
    EXPECT_EQ(eligible[k].b, (k + 1) * kPacket) << k;  // F
    EXPECT_EQ(grants[k].time, k * kPacket) << k;
    EXPECT_EQ(grants[k].a, k * kPacket) << k;          // departure
    EXPECT_EQ(grants[k].bytes, 1000u);
    EXPECT_EQ(grants[k].b, 0u);
  }
  for (const auto& r : rec.records) {
    EXPECT_EQ(r.qp, 2u);
    EXPECT_EQ(r.port, 7u);
  }
  EXPECT_EQ(rec.records[0].a, 10'000'000'000u);
  EXPECT_EQ(rec.records[1].bytes, 1000u);
}

// Tassel's Phi (sum of the active limits over the link rate) in every eligible record
// (psn, Q16.16), checked against the scheduler's own state as each record arrives:
// QP 1 at 60 Gb/s alone (Phi 0.6), QP 2 at 60 Gb/s joins (1.2), QP 3 at 30 Gb/s
// (1.5), then QP 2's last packet leaves (0.9).
TEST(SchedTrace, TasselPhiMatchesTheScheduler) {
  Config c;
  c.link_bps = 100'000'000'000;
  c.max_qps = 4;
  TasselScheduler s(c);
  struct Checker final : trace::Sink {
    const TasselScheduler* s = nullptr;
    std::vector<trace::Record> eligible;
    void record(const trace::Record& r) override {
      if (r.event != Event::kEligible) return;
      eligible.push_back(r);
      EXPECT_EQ(r.psn, s->phi_q16()) << r.time;
      EXPECT_EQ(r.psn, trace::phi_q16(s->active_limited_bps(), 100'000'000'000));
      // Eligible: S <= V, to the timeline's slot (a packet whose S falls in V's
      // 64 ps slot is released with it).
      EXPECT_LE(r.a, s->system_time() + Timeline::kSlotPicos - 1) << r.time;
      EXPECT_GT(r.b, r.a);                        // F = S + L / r
    }
  } rec;
  rec.s = &s;
  s.attach_trace(&rec, trace::bit(Event::kEligible), 0);
  // QP 2 sends 200 packets (done at about 45 us); the others never run out.
  FakeLink link(s, c, [](QpId q, std::uint64_t i) { return Packet{q == 2 && i >= 200 ? 0u : 1000u, true}; });
  s.set_rate(0, 1, 60'000'000'000);
  s.set_rate(0, 2, 60'000'000'000);
  s.set_rate(0, 3, 30'000'000'000);
  link.start(1);
  link.run_until(5'000'000);
  link.start(2);
  link.run_until(10'000'000);
  link.start(3);
  link.run_until(200'000'000);
  auto phi_at = [&](QpId qp, Picos t) {  // the Phi of qp's last eligible record at or before t
    uint32_t phi = 0;
    for (const auto& r : rec.eligible)
      if (r.qp == qp && r.time <= t) phi = r.psn;
    return trace::phi_of(phi);
  };
  EXPECT_DOUBLE_EQ(phi_at(1, 4'000'000), 39321.0 / 65536);  // 0.6 in Q16.16, rounded down
  EXPECT_DOUBLE_EQ(phi_at(1, 9'000'000), 78643.0 / 65536);  // 1.2
  EXPECT_DOUBLE_EQ(phi_at(2, 12'000'000), 1.5);
  EXPECT_DOUBLE_EQ(phi_at(3, 200'000'000), 58982.0 / 65536);  // 0.9 once QP 2 is done
  EXPECT_EQ(trace::phi_q16(3, 0), 0xffffffffu);
  EXPECT_EQ(trace::phi_q16(uint64_t{1} << 62, 1), 0xffffffffu);  // saturates
}

TEST(SchedTrace, OffByDefaultAndMaskFilters) {
  Config c;
  c.max_qps = 4;
  auto s = make_scheduler("fifo", c);
  EXPECT_EQ(s->tracer().mask(), 0u);
  Recorder rec;
  s->attach_trace(&rec, trace::bit(Event::kGrant), 0);
  FakeLink link(*s, c, [](QpId, std::uint64_t i) { return Packet{i < 3 ? 500u : 0u, true}; });
  link.start(1);
  EXPECT_TRUE(s->enqueue_control(0, 3, 64));
  link.run_until(1'000'000);
  const auto grants = rec.of(Event::kGrant);
  ASSERT_EQ(rec.records.size(), 4u);
  ASSERT_EQ(grants.size(), 4u);
  EXPECT_EQ(grants[0].qp, 3u);  // the control packet goes first
  EXPECT_EQ(grants[0].b, 1u);
  EXPECT_EQ(grants[1].a, 64u * 80);  // departs after it (80 ps a byte at 100 Gb/s)
  s->attach_trace(nullptr, trace::kAllEvents, 0);
  link.start(1);
  link.run_until(2'000'000);
  EXPECT_EQ(rec.records.size(), 4u);
}

// A bandwidth flow on justitia: tokens of token_bytes, granted when the bank holds
// one; a message larger than a token is split into token-sized chunks.
TEST(SchedTrace, JustitiaTokensAndChunks) {
  Config c;
  c.max_qps = 4;
  c.justitia.token_bytes = 4000;
  c.justitia.split_bytes = 4000;
  auto s = make_scheduler("justitia", c);
  Recorder rec;
  s->attach_trace(&rec, trace::kAllEvents, 0);
  // One 10-packet message of 1000 B.
  FakeLink link(*s, c, [](QpId, std::uint64_t i) { return Packet{i < 10 ? 1000u : 0u, i == 9}; });
  link.start(0);
  link.run_until(2'000'000'000);
  const auto grants = rec.of(Event::kGrant);
  const auto tokens = rec.of(Event::kTokenGrant);
  const auto splits = rec.of(Event::kChunkSplit);
  EXPECT_EQ(grants.size(), 10u);
  EXPECT_EQ(tokens.size(), 3u);   // 4000 + 4000 + 2000 of 4000
  EXPECT_EQ(splits.size(), 2u);   // after the first and the second token
  for (const auto& t : tokens) EXPECT_EQ(t.bytes, 4000u);
  for (const auto& sp : splits) EXPECT_EQ(sp.bytes, 4000u);
  EXPECT_FALSE(rec.of(Event::kTokenWithhold).empty());
  // Each grant is covered by a token granted before it.
  EXPECT_LE(tokens[1].time, grants[4].time);
  EXPECT_LE(tokens[2].time, grants[8].time);
}

}  // namespace
}  // namespace isoroce::sched::testing
