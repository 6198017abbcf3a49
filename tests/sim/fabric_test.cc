// The fabric alone, with hand-built RoCEv2 frames: exact timing in virtual
// time, switch queueing, tail drop, ECN marking, every fault, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "dataplane/sim/event_queue.h"
#include "dataplane/sim/frame_edit.h"
#include "dataplane/sim/rng.h"
#include "tests/sim/fabric_util.h"
#include "transport/wire/bytes.h"

namespace isoroce::sim {
namespace {

using testing::Net;
using testing::fabric_of;
using testing::frame_id;
using testing::make_frame;

constexpr Picos kUs = 1'000'000;

// Wire time of a frame at 100 Gb/s: 80 ps per byte, 24 bytes of overhead.
Picos wire_time_100g(size_t len) { return (len + 24) * 80; }

bool parses_clean(std::vector<uint8_t> f) { return wire::parse_frame(f).ok(); }

TEST(EventQueue, OrdersByTimeThenInsertion) {
  EventQueue q;
  Rng rng(5);
  for (uint32_t i = 0; i < 5000; ++i) q.push(rng.below(50), EventKind::kFirstUser, i);
  Picos last_t = 0;
  uint64_t last_seq = 0;
  bool first = true;
  size_t n = 0;
  while (!q.empty()) {
    const Event e = q.pop();
    if (!first) {
      ASSERT_TRUE(e.time > last_t || (e.time == last_t && e.seq > last_seq));
    }
    first = false;
    last_t = e.time;
    last_seq = e.seq;
    EXPECT_EQ(e.a, e.seq);  // a was the insertion index
    ++n;
  }
  EXPECT_EQ(n, 5000u);
}

TEST(Rng, SeededStreamsAndDistributions) {
  Rng a(component_seed(1, 7)), b(component_seed(1, 7)), c(component_seed(1, 8));
  EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(a.next(), c.next());
  // The stream of mt19937_64 is fixed by the standard (10000th output of the default seed).
  std::mt19937_64 std_gen;
  std_gen.discard(9999);
  EXPECT_EQ(std_gen(), 9981545732273789042ull);
  Rng r(3);
  std::vector<int> hist(10, 0);
  for (int i = 0; i < 100000; ++i) ++hist[r.below(10)];
  for (int h : hist) EXPECT_NEAR(h, 10000, 500);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const uint64_t v = r.between(5, 9);
    ASSERT_GE(v, 5u);
    ASSERT_LE(v, 9u);
  }
  // A probability of 0 or 1 draws nothing: the stream is unchanged.
  Rng x(9), y(9);
  EXPECT_FALSE(x.chance(0.0));
  EXPECT_TRUE(x.chance(1.0));
  EXPECT_EQ(x.next(), y.next());
}

TEST(Fabric, LinkDelayAndSerializationAreExact) {
  // Receive: one 1000-byte-payload frame from host 0 to host 1 at t = 3 us.
  // Expect: it arrives at 3 us + 2 * (wire time + 1 us), to the picosecond.
  Net net(fabric_of(2));
  const auto f = make_frame(0, 1, 1, 1000);
  net.send(0, 3 * kUs, f);
  net.run();
  ASSERT_EQ(net.rec[1].got.size(), 1u);
  EXPECT_EQ(net.rec[1].got[0].time, 3 * kUs + 2 * (wire_time_100g(f.size()) + kUs));
  EXPECT_EQ(net.rec[1].got[0].bytes, f);
  EXPECT_TRUE(net.rec[0].got.empty());
}

TEST(Fabric, PortRatesDifferPerHost) {
  // Host 0 at 100 Gb/s sends to host 1 at 25 Gb/s: the downlink serializes at 25 Gb/s.
  FabricConfig c = fabric_of(2);
  c.ports[1].rate_bps = 25'000'000'000;
  Net net(c);
  const auto f = make_frame(0, 1, 1, 4096);
  net.send(0, 0, f);
  net.run();
  ASSERT_EQ(net.rec[1].got.size(), 1u);
  EXPECT_EQ(net.rec[1].got[0].time, (f.size() + 24) * 80 + (f.size() + 24) * 320 + 2 * kUs);
}

TEST(Fabric, BackToBackFramesLeaveOneWireTimeApart) {
  // Two frames handed to the uplink for the same instant: the second starts
  // when the first has left (and that is counted as a late departure).
  Net net(fabric_of(2));
  const auto f1 = make_frame(0, 1, 1, 512), f2 = make_frame(0, 1, 2, 512);
  net.send(0, 0, f1);
  net.send(0, 0, f2);
  net.run();
  ASSERT_EQ(net.rec[1].got.size(), 2u);
  EXPECT_EQ(net.rec[1].got[1].time - net.rec[1].got[0].time, wire_time_100g(f1.size()));
  EXPECT_EQ(frame_id(net.rec[1].got[0].bytes), 1u);
  EXPECT_EQ(net.fabric.stats().uplinks[0].late_departures, 1u);
}

TEST(Fabric, SwitchQueuesIncastAtTheOutputPort) {
  // Hosts 0, 1, 2 each send one frame to host 3 at t = 0: they reach the switch
  // together and leave port 3 one wire time apart, in arrival (event) order.
  Net net(fabric_of(4));
  std::vector<std::vector<uint8_t>> fs;
  for (uint32_t h = 0; h < 3; ++h) fs.push_back(make_frame(h, 3, h + 10, 2000));
  for (uint32_t h = 0; h < 3; ++h) net.send(h, 0, fs[h]);
  net.run();
  const auto& got = net.rec[3].got;
  ASSERT_EQ(got.size(), 3u);
  const Picos w = wire_time_100g(fs[0].size());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].time, w + kUs + (i + 1) * w + kUs) << i;
    EXPECT_EQ(frame_id(got[i].bytes), 10 + i);
  }
  EXPECT_EQ(net.fabric.stats().ports[3].max_queue_bytes, 3 * fs[0].size());
  EXPECT_EQ(net.fabric.queued_bytes(3), 0u);
}

TEST(Fabric, TailDropAtTheBufferLimit) {
  // Receive: three frames reach port 3 at once; the buffer holds two.
  // Expect: the third is dropped, the first two are delivered.
  FabricConfig c = fabric_of(4);
  const auto probe = make_frame(0, 3, 0, 1000);
  c.buffer_bytes = 2 * probe.size();
  Net net(c);
  for (uint32_t h = 0; h < 3; ++h) net.send(h, 0, make_frame(h, 3, h, 1000));
  net.run();
  EXPECT_EQ(net.rec[3].got.size(), 2u);
  EXPECT_EQ(net.fabric.stats().ports[3].drops, 1u);
  EXPECT_EQ(net.fabric.stats().ports[3].max_queue_bytes, 2 * probe.size());

  // Sustained 2:1 incast: every frame is either delivered or counted as a drop.
  FabricConfig c2 = fabric_of(3);
  c2.buffer_bytes = 10 * probe.size();
  Net net2(c2);
  for (uint32_t k = 0; k < 200; ++k)
    for (uint32_t h = 0; h < 2; ++h) net2.send(h, 0, make_frame(h, 2, k * 2 + h, 1000));
  net2.run();
  const auto& p = net2.fabric.stats().ports[2];
  EXPECT_GT(p.drops, 0u);
  EXPECT_EQ(net2.rec[2].got.size() + p.drops, 400u);
  EXPECT_LE(p.max_queue_bytes, c2.buffer_bytes);
  EXPECT_EQ(net2.fabric.in_flight(), 0u);
}

TEST(Ecn, RedProbabilityCurve) {
  EcnConfig e{true, 40 * 1024, 200 * 1024, 0.2};
  EXPECT_EQ(e.probability(0), 0.0);
  EXPECT_EQ(e.probability(40 * 1024 - 1), 0.0);
  EXPECT_DOUBLE_EQ(e.probability(40 * 1024), 0.0);
  EXPECT_DOUBLE_EQ(e.probability(120 * 1024), 0.1);
  EXPECT_DOUBLE_EQ(e.probability(200 * 1024), 0.2);
  EXPECT_EQ(e.probability(200 * 1024 + 1), 1.0);
  e.enabled = false;
  EXPECT_EQ(e.probability(1 << 30), 0.0);
}

TEST(Ecn, SetCeKeepsIpv4ChecksumAndIcrcValid) {
  for (bool ipv6 : {false, true}) {
    auto f = make_frame(0, 1, 7, 300, /*ecn=*/2, ipv6);
    EXPECT_EQ(ecn_of(f), kEcnEct0);
    ASSERT_TRUE(set_ce(f));
    EXPECT_EQ(ecn_of(f), kEcnCe);
    auto copy = f;
    const auto r = wire::parse_frame(copy);
    ASSERT_TRUE(r.ok()) << wire::parse_error_name(r.error) << " ipv6=" << ipv6;
    EXPECT_EQ(r.pkt.ecn(), kEcnCe);
    EXPECT_EQ(r.pkt.dscp(), 26);
  }
  // Incremental update keeps a wrong checksum wrong (RFC 1624): no laundering.
  auto bad = make_frame(0, 1, 8, 100);
  bad[14 + 8] ^= 0x01;  // TTL
  ASSERT_FALSE(parses_clean(bad));
  set_ce(bad);
  auto copy = bad;
  EXPECT_EQ(wire::parse_frame(copy).error, wire::ParseError::kBadIpChecksum);
}

// Marks per sender when host 0's frames find the port empty and host 1's find
// one of host 0's frames (L bytes) in service.
std::pair<uint64_t, uint64_t> marks_two_senders(EcnConfig ecn, uint8_t codepoint, uint32_t n, uint64_t seed) {
  FabricConfig c = fabric_of(3);
  c.ecn = ecn;
  c.seed = seed;
  Net net(c);
  const auto probe = make_frame(0, 2, 0, 1000);
  const Picos w = wire_time_100g(probe.size());
  for (uint32_t k = 0; k < n; ++k) {
    net.send(0, k * 4 * w, make_frame(0, 2, 2 * k, 1000, codepoint));
    net.send(1, k * 4 * w + w / 2, make_frame(1, 2, 2 * k + 1, 1000, codepoint));
  }
  net.run();
  uint64_t m0 = 0, m1 = 0;
  for (const auto& a : net.rec[2].got) {
    auto copy = a.bytes;
    const auto r = wire::parse_frame(copy);
    EXPECT_TRUE(r.ok()) << wire::parse_error_name(r.error);
    if (r.pkt.ecn() == kEcnCe && codepoint != kEcnCe) (r.pkt.psn.value() % 2 ? m1 : m0)++;
  }
  EXPECT_EQ(net.rec[2].got.size(), 2u * n);
  return {m0, m1};
}

TEST(Ecn, MarkingProbabilityFollowsTheQueue) {
  const uint32_t n = 4000;
  const size_t L = make_frame(0, 2, 0, 1000).size();
  // Between kmin and kmax: p = pmax * (L - kmin) / (kmax - kmin) = 0.3 * 1/2.
  EcnConfig ecn{true, 0, 2 * L, 0.3};
  auto [m0, m1] = marks_two_senders(ecn, kEcnEct0, n, 11);
  EXPECT_EQ(m0, 0u);  // empty queue, kmin = 0: probability 0
  const double p = 0.15, sd = std::sqrt(n * p * (1 - p));
  EXPECT_NEAR(static_cast<double>(m1), n * p, 5 * sd);
  // Above kmax: every ECT frame is marked; ECT(1) too.
  ecn.kmax_bytes = L / 2;
  std::tie(m0, m1) = marks_two_senders(ecn, kEcnEct1, 500, 12);
  EXPECT_EQ(m1, 500u);
  EXPECT_EQ(m0, 0u);
  // Not-ECT frames are never marked.
  std::tie(m0, m1) = marks_two_senders(ecn, kEcnNotEct, 500, 13);
  EXPECT_EQ(m0 + m1, 0u);
}

// n frames from host 0 to host 1, spaced so they never queue.
Net& run_stream(Net& net, uint32_t n, size_t payload = 200) {
  for (uint32_t k = 0; k < n; ++k) net.send(0, k * 100'000, make_frame(0, 1, k, payload));
  net.run();
  return net;
}

TEST(Faults, LossDropsAboutPOnEachLink) {
  FabricConfig c = fabric_of(2);
  c.faults.loss.p = 0.1;
  c.seed = 3;
  Net net(c);
  const uint32_t n = 10000;
  run_stream(net, n);
  const auto& s = net.fabric.stats();
  EXPECT_EQ(net.rec[1].got.size() + s.uplinks[0].lost + s.downlinks[1].lost, n);
  // Survives both links with probability 0.81.
  EXPECT_NEAR(static_cast<double>(net.rec[1].got.size()), 0.81 * n, 5 * std::sqrt(n * 0.81 * 0.19));
  EXPECT_NEAR(static_cast<double>(s.uplinks[0].lost), 0.1 * n, 5 * std::sqrt(n * 0.09));
  for (const auto& a : net.rec[1].got) EXPECT_TRUE(parses_clean(a.bytes));
  // In order: loss does not reorder.
  for (size_t i = 1; i < net.rec[1].got.size(); ++i)
    ASSERT_LT(frame_id(net.rec[1].got[i - 1].bytes), frame_id(net.rec[1].got[i].bytes));
}

TEST(Faults, LossBurstsComeInRunsOfTheBurstLength) {
  FabricConfig c = fabric_of(2);
  c.faults.loss = {0.01, 4};
  c.seed = 4;
  Net net(c);
  const uint32_t n = 20000;
  run_stream(net, n);
  std::vector<bool> arrived(n, false);
  for (const auto& a : net.rec[1].got) arrived[frame_id(a.bytes)] = true;
  // Each link loses in runs of 4; two links' runs may touch, so every maximal
  // run of lost ids is at least 4 long (except one cut by the end of the stream).
  size_t runs = 0;
  for (uint32_t i = 0; i < n;) {
    if (arrived[i]) {
      ++i;
      continue;
    }
    uint32_t j = i;
    while (j < n && !arrived[j]) ++j;
    if (j < n) {
      EXPECT_GE(j - i, 4u) << "run at " << i;
    }
    ++runs;
    i = j;
  }
  EXPECT_GT(runs, 50u);
  const auto& s = net.fabric.stats();
  EXPECT_EQ(s.uplinks[0].lost % 4, 0u);
}

TEST(Faults, CorruptionFlipsOneBitTheReceiverCanDetect) {
  FabricConfig c = fabric_of(2);
  c.faults.corrupt.p = 0.5;
  c.seed = 5;
  Net net(c);
  const uint32_t n = 4000;
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t k = 0; k < n; ++k) {
    sent.push_back(make_frame(0, 1, k, 200));
    net.send(0, k * 100'000, sent.back());
  }
  net.run();
  ASSERT_EQ(net.rec[1].got.size(), n);  // corruption never drops
  const auto& s = net.fabric.stats();
  EXPECT_NEAR(static_cast<double>(s.uplinks[0].corrupted), 0.5 * n, 5 * std::sqrt(n * 0.25));
  size_t changed = 0, detected = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const auto& got = net.rec[1].got[k].bytes;
    const auto& orig = sent[k];
    ASSERT_EQ(got.size(), orig.size());
    // The Ethernet header (the FCS's business) is never touched.
    EXPECT_TRUE(std::equal(orig.begin(), orig.begin() + 14, got.begin()));
    int bits = 0;
    size_t first_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const int d = __builtin_popcount(got[i] ^ orig[i]);
      if (d && !bits) first_diff = i;
      bits += d;
    }
    if (bits == 0) continue;
    ++changed;
    EXPECT_LE(bits, 2);
    if (!parses_clean(got)) {
      ++detected;
    } else {
      // Undetectable only in the fields the ICRC masks and nothing else covers:
      // the UDP checksum and the BTH byte with FECN/BECN.
      EXPECT_TRUE(first_diff == 14 + 20 + 6 || first_diff == 14 + 20 + 7 || first_diff == 14 + 20 + 8 + 4)
          << "undetected flip at byte " << first_diff;
    }
  }
  EXPECT_NEAR(static_cast<double>(changed), 0.75 * n, 5 * std::sqrt(n * 0.75 * 0.25));
  EXPECT_GT(detected, changed * 95 / 100);
}

TEST(Faults, DuplicationDeliversCopies) {
  FabricConfig c = fabric_of(2);
  c.faults.duplicate.p = 1.0;
  Net net(c);
  run_stream(net, 10);
  // Duplicated on the uplink and each copy again on the downlink: 4 copies each.
  ASSERT_EQ(net.rec[1].got.size(), 40u);
  std::map<uint32_t, int> copies;
  for (const auto& a : net.rec[1].got) {
    EXPECT_TRUE(parses_clean(a.bytes));
    ++copies[frame_id(a.bytes)];
  }
  for (const auto& [id, k] : copies) EXPECT_EQ(k, 4) << id;

  FabricConfig c2 = fabric_of(2);
  c2.faults.duplicate = {0.05, 3};
  c2.seed = 9;
  Net net2(c2);
  run_stream(net2, 2000);
  const auto& s = net2.fabric.stats();
  // Every uplink copy is offered to the downlink, which may duplicate it again.
  EXPECT_EQ(s.downlinks[1].frames, 2000u + s.uplinks[0].duplicated);
  EXPECT_EQ(net2.rec[1].got.size(), 2000u + s.uplinks[0].duplicated + s.downlinks[1].duplicated);
  EXPECT_EQ(s.uplinks[0].duplicated % 3, 0u);
}

TEST(Faults, ReorderHoldsFramesBack) {
  FabricConfig c = fabric_of(2);
  c.faults.reorder.p = 0.2;
  c.faults.reorder_delay = 2 * kUs;
  c.seed = 6;
  Net net(c);
  const uint32_t n = 2000;
  for (uint32_t k = 0; k < n; ++k) net.send(0, k * 50'000, make_frame(0, 1, k, 200));
  net.run();
  ASSERT_EQ(net.rec[1].got.size(), n);
  size_t inversions = 0;
  std::set<uint32_t> ids;
  for (size_t i = 0; i < n; ++i) {
    ids.insert(frame_id(net.rec[1].got[i].bytes));
    EXPECT_TRUE(parses_clean(net.rec[1].got[i].bytes));
    if (i && frame_id(net.rec[1].got[i].bytes) < frame_id(net.rec[1].got[i - 1].bytes)) ++inversions;
  }
  EXPECT_EQ(ids.size(), n);
  EXPECT_GT(inversions, n / 20);
  // No frame is held longer than the two links' reorder delays.
  for (const auto& a : net.rec[1].got) {
    const Picos base = frame_id(a.bytes) * 50'000ull + 2 * (wire_time_100g(a.bytes.size()) + kUs);
    EXPECT_GE(a.time, base);
    EXPECT_LE(a.time, base + 2 * c.faults.reorder_delay + wire_time_100g(a.bytes.size()) * 10);
  }
}

// Every arrival at every host, for comparing runs.
std::vector<std::tuple<size_t, Picos, std::vector<uint8_t>>> random_traffic(uint64_t seed) {
  FabricConfig c = fabric_of(4);
  c.seed = seed;
  c.buffer_bytes = 8 * 1024;
  c.ecn = {true, 1024, 6 * 1024, 0.5};
  c.faults.loss = {0.02, 2};
  c.faults.corrupt = {0.02, 1};
  c.faults.duplicate = {0.02, 1};
  c.faults.reorder = {0.05, 1};
  c.faults.reorder_delay = kUs;
  Net net(c);
  Rng traffic(77);  // the same offered traffic for every seed
  Picos t = 0;
  for (uint32_t k = 0; k < 3000; ++k) {
    t += traffic.below(200'000);
    const size_t from = traffic.below(4);
    size_t to = traffic.below(3);
    if (to >= from) ++to;
    net.send(from, t, make_frame(from, to, k, 64 + traffic.below(3000)));
  }
  net.run();
  std::vector<std::tuple<size_t, Picos, std::vector<uint8_t>>> out;
  for (size_t h = 0; h < 4; ++h)
    for (auto& a : net.rec[h].got) out.emplace_back(h, a.time, std::move(a.bytes));
  return out;
}

TEST(Fabric, SameSeedSameRunDifferentSeedDifferentRun) {
  const auto a = random_traffic(42), b = random_traffic(42), c = random_traffic(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(a.size(), 2000u);
}

TEST(Fabric, ValidateNamesTheProblem) {
  FabricConfig c = fabric_of(2);
  EXPECT_TRUE(validate(c).empty());
  c.ports[1].mac = c.ports[0].mac;
  EXPECT_NE(validate(c).find("MAC"), std::string_view::npos);
  c = fabric_of(2);
  c.faults.loss.p = 1.5;
  EXPECT_FALSE(validate(c).empty());
  c = fabric_of(2);
  c.ecn = {true, 10, 5, 0.1};
  EXPECT_NE(validate(c).find("kmin"), std::string_view::npos);
}

TEST(Fabric, UnknownDestinationIsCountedAndFreed) {
  Net net(fabric_of(2));
  auto f = make_frame(0, 1, 1, 100);
  f[5] = 0x77;  // a MAC no port has
  net.send(0, 0, f);
  net.run();
  EXPECT_EQ(net.fabric.stats().unknown_destination, 1u);
  EXPECT_EQ(net.fabric.in_flight(), 0u);
}

}  // namespace
}  // namespace isoroce::sim
