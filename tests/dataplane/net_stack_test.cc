// NetStack with hand-built frames: ARP, ICMP echo, IPv6 neighbour discovery
// and echo, learning, and what it refuses.
#include "dataplane/dpdk/net_stack.h"

#include <gtest/gtest.h>
#include <rte_ip.h>

#include <cstring>

#include "transport/wire/bytes.h"

namespace isoroce::dataplane {
namespace {

using wire::load_be16;
using wire::store_be16;

const MacAddr kOurMac = {0x02, 0x15, 0x0c, 0, 0, 1};
const MacAddr kPeerMac = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
const IpAddr kOurIp = wire::ipv4_mapped(0x0a000001);   // 10.0.0.1
const IpAddr kPeerIp = wire::ipv4_mapped(0x0a000002);  // 10.0.0.2
const IpAddr kOur6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const IpAddr kPeer6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

std::vector<uint8_t> eth(const MacAddr& dst, const MacAddr& src, uint16_t type) {
  std::vector<uint8_t> f(14);
  std::memcpy(f.data(), dst.data(), 6);
  std::memcpy(f.data() + 6, src.data(), 6);
  store_be16(f.data() + 12, type);
  return f;
}

std::vector<uint8_t> arp(uint16_t op, const MacAddr& sha, const IpAddr& sip, const IpAddr& tip) {
  auto f = eth({0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, sha, 0x0806);
  f.resize(14 + 28);
  uint8_t* a = f.data() + 14;
  store_be16(a, 1);
  store_be16(a + 2, 0x0800);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, op);
  std::memcpy(a + 8, sha.data(), 6);
  std::memcpy(a + 14, &sip[12], 4);
  std::memcpy(a + 24, &tip[12], 4);
  return f;
}

void put_sum(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

uint16_t csum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  sum += rte_raw_cksum(p, n);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

std::vector<uint8_t> ping4(const IpAddr& dst, size_t data_len) {
  auto f = eth(kOurMac, kPeerMac, 0x0800);
  f.resize(14 + 20 + 8 + data_len);
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  store_be16(ip + 2, static_cast<uint16_t>(28 + data_len));
  ip[8] = 64;
  ip[9] = 1;
  std::memcpy(ip + 12, &kPeerIp[12], 4);
  std::memcpy(ip + 16, &dst[12], 4);
  wire::ipv4_set_checksum(ip);
  uint8_t* icmp = ip + 20;
  icmp[0] = 8;
  store_be16(icmp + 4, 0x1234);
  store_be16(icmp + 6, 7);
  for (size_t i = 0; i < data_len; ++i) icmp[8 + i] = static_cast<uint8_t>(i);
  put_sum(icmp + 2, csum(icmp, 8 + data_len));
  return f;
}

uint16_t icmp6_sum(const uint8_t* ip6, const uint8_t* m, size_t len) {
  uint8_t ph[40] = {};
  std::memcpy(ph, ip6 + 8, 32);
  wire::store_be32(ph + 32, static_cast<uint32_t>(len));
  ph[39] = 58;
  return csum(m, len, rte_raw_cksum(ph, 40));
}

std::vector<uint8_t> icmp6(const IpAddr& src, const IpAddr& dst, std::vector<uint8_t> msg, uint8_t hops = 255) {
  auto f = eth(kOurMac, kPeerMac, 0x86dd);
  f.resize(14 + 40);
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x60;
  store_be16(ip + 4, static_cast<uint16_t>(msg.size()));
  ip[6] = 58;
  ip[7] = hops;
  std::memcpy(ip + 8, src.data(), 16);
  std::memcpy(ip + 24, dst.data(), 16);
  store_be16(msg.data() + 2, 0);
  put_sum(msg.data() + 2, icmp6_sum(ip, msg.data(), msg.size()));
  f.insert(f.end(), msg.begin(), msg.end());
  return f;
}

std::vector<uint8_t> neighbor_solicit(const IpAddr& target, bool with_ll) {
  std::vector<uint8_t> m(24);
  m[0] = 135;
  std::memcpy(m.data() + 8, target.data(), 16);
  if (with_ll) {
    m.insert(m.end(), {1, 1});
    m.insert(m.end(), kPeerMac.begin(), kPeerMac.end());
  }
  return m;
}

TEST(NetStack, AnswersArpForItsAddressAndLearnsTheAsker) {
  NetStack s(kOurMac, kOurIp);
  std::vector<uint8_t> reply;
  // Receive: who-has 10.0.0.1 from 10.0.0.2. Expect: is-at our MAC, to the asker.
  EXPECT_EQ(s.receive(arp(1, kPeerMac, kPeerIp, kOurIp), &reply), NetStack::Verdict::kConsumed);
  ASSERT_GE(reply.size(), 42u);
  EXPECT_EQ(0, std::memcmp(reply.data(), kPeerMac.data(), 6));
  EXPECT_EQ(0, std::memcmp(reply.data() + 6, kOurMac.data(), 6));
  EXPECT_EQ(load_be16(reply.data() + 12), 0x0806);
  EXPECT_EQ(load_be16(reply.data() + 20), 2);                          // reply
  EXPECT_EQ(0, std::memcmp(reply.data() + 22, kOurMac.data(), 6));     // sender MAC
  EXPECT_EQ(0, std::memcmp(reply.data() + 28, &kOurIp[12], 4));        // sender IP
  EXPECT_EQ(0, std::memcmp(reply.data() + 32, kPeerMac.data(), 6));    // target MAC
  EXPECT_EQ(reply.size(), 60u);                                        // padded to the minimum frame
  ASSERT_TRUE(s.lookup(kPeerIp));
  EXPECT_EQ(*s.lookup(kPeerIp), kPeerMac);
  auto learned = s.take_learned();
  ASSERT_EQ(learned.size(), 1u);
  EXPECT_TRUE(s.take_learned().empty());
  // A request for another address is not ours and teaches nothing new.
  EXPECT_EQ(s.receive(arp(1, {2, 9, 9, 9, 9, 9}, wire::ipv4_mapped(0x0a000009), wire::ipv4_mapped(0x0a000003)), &reply),
            NetStack::Verdict::kDrop);
  EXPECT_TRUE(reply.empty());
  EXPECT_FALSE(s.lookup(wire::ipv4_mapped(0x0a000009)));
  EXPECT_EQ(s.counters().arp_requests_answered, 1u);
}

TEST(NetStack, SolicitsAndLearnsFromTheReply) {
  NetStack s(kOurMac, kOurIp);
  auto req = s.solicit(kPeerIp);
  ASSERT_EQ(req.size(), 60u);
  EXPECT_EQ(load_be16(req.data() + 20), 1);
  EXPECT_EQ(0, std::memcmp(req.data() + 38, &kPeerIp[12], 4));
  std::vector<uint8_t> reply;
  EXPECT_EQ(s.receive(arp(2, kPeerMac, kPeerIp, kOurIp), &reply), NetStack::Verdict::kConsumed);
  EXPECT_TRUE(reply.empty());
  ASSERT_TRUE(s.lookup(kPeerIp));
  EXPECT_EQ(s.counters().arp_replies_received, 1u);
}

TEST(NetStack, AnswersPingWithAValidEchoReply) {
  NetStack s(kOurMac, kOurIp);
  std::vector<uint8_t> reply;
  auto req = ping4(kOurIp, 56);
  EXPECT_EQ(s.receive(req, &reply), NetStack::Verdict::kConsumed);
  ASSERT_EQ(reply.size(), req.size());
  const uint8_t* ip = reply.data() + 14;
  EXPECT_EQ(0, std::memcmp(ip + 16, &kPeerIp[12], 4));
  EXPECT_EQ(0, std::memcmp(ip + 12, &kOurIp[12], 4));
  EXPECT_EQ(csum(ip, 20), 0) << "IPv4 header checksum";
  EXPECT_EQ(ip[20], 0);  // echo reply
  EXPECT_EQ(csum(ip + 20, 64), 0) << "ICMP checksum";
  EXPECT_EQ(0, std::memcmp(ip + 24, req.data() + 14 + 24, 60)) << "identifier, sequence and data echoed";
  // A corrupted checksum, another address, or a fragment: no answer.
  auto bad = req;
  bad[14 + 20 + 10] ^= 1;
  EXPECT_EQ(s.receive(bad, &reply), NetStack::Verdict::kDrop);
  EXPECT_EQ(s.receive(ping4(kPeerIp, 8), &reply), NetStack::Verdict::kDrop);
  EXPECT_EQ(s.counters().echo_answered, 1u);
}

TEST(NetStack, HandsRoceToTheEngineAndDropsTheRest) {
  NetStack s(kOurMac, kOurIp);
  std::vector<uint8_t> reply;
  auto f = ping4(kOurIp, 20);
  uint8_t* ip = f.data() + 14;
  ip[9] = 17;  // UDP
  store_be16(ip + 22, 4791);
  EXPECT_EQ(s.receive(f, &reply), NetStack::Verdict::kRoce);
  store_be16(ip + 22, 53);
  EXPECT_EQ(s.receive(f, &reply), NetStack::Verdict::kDrop);
  // Truncated frames of every length: never read past the end.
  auto full = ping4(kOurIp, 56);
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    EXPECT_NE(s.receive(cut, &reply), NetStack::Verdict::kConsumed) << n;
  }
}

TEST(NetStack, Ipv6NeighbourSolicitationGetsAnAdvertisement) {
  NetStack s(kOurMac, kOur6);
  std::vector<uint8_t> reply;
  EXPECT_EQ(s.receive(icmp6(kPeer6, kOur6, neighbor_solicit(kOur6, true)), &reply), NetStack::Verdict::kConsumed);
  ASSERT_EQ(reply.size(), 14u + 40 + 32);
  const uint8_t* ip = reply.data() + 14;
  EXPECT_EQ(ip[7], 255);
  EXPECT_EQ(0, std::memcmp(ip + 24, kPeer6.data(), 16));
  const uint8_t* na = ip + 40;
  EXPECT_EQ(na[0], 136);
  EXPECT_EQ(na[4], 0x60);  // solicited, override
  EXPECT_EQ(0, std::memcmp(na + 8, kOur6.data(), 16));
  EXPECT_EQ(0, std::memcmp(na + 26, kOurMac.data(), 6));
  EXPECT_EQ(icmp6_sum(ip, na, 32), 0);
  ASSERT_TRUE(s.lookup(kPeer6));
  EXPECT_EQ(*s.lookup(kPeer6), kPeerMac);
  // Hop limit not 255 (RFC 4861 7.1.1): ignored.
  EXPECT_EQ(s.receive(icmp6(kPeer6, kOur6, neighbor_solicit(kOur6, true), 64), &reply), NetStack::Verdict::kDrop);
  // For another target: ignored.
  EXPECT_EQ(s.receive(icmp6(kPeer6, kOur6, neighbor_solicit(kPeer6, true)), &reply), NetStack::Verdict::kDrop);
}

TEST(NetStack, Ipv6SolicitAdvertAndEcho) {
  NetStack s(kOurMac, kOur6);
  auto ns = s.solicit(kPeer6);
  const uint8_t* ip = ns.data() + 14;
  EXPECT_EQ(ns[0], 0x33);  // solicited-node multicast MAC
  EXPECT_EQ(ip[24], 0xff);
  EXPECT_EQ(icmp6_sum(ip, ip + 40, 32), 0);
  // The peer's advertisement with its link-layer address teaches us its MAC.
  std::vector<uint8_t> adv(24);
  adv[0] = 136;
  adv[4] = 0x60;
  std::memcpy(adv.data() + 8, kPeer6.data(), 16);
  adv.insert(adv.end(), {2, 1});
  adv.insert(adv.end(), kPeerMac.begin(), kPeerMac.end());
  std::vector<uint8_t> reply;
  EXPECT_EQ(s.receive(icmp6(kPeer6, kOur6, adv), &reply), NetStack::Verdict::kConsumed);
  ASSERT_TRUE(s.lookup(kPeer6));
  // Echo request -> echo reply with a valid checksum.
  std::vector<uint8_t> echo = {128, 0, 0, 0, 0x12, 0x34, 0, 1, 'h', 'i'};
  EXPECT_EQ(s.receive(icmp6(kPeer6, kOur6, echo, 64), &reply), NetStack::Verdict::kConsumed);
  ASSERT_EQ(reply.size(), 14u + 40 + echo.size());
  EXPECT_EQ(reply[14 + 40], 129);
  EXPECT_EQ(icmp6_sum(reply.data() + 14, reply.data() + 54, echo.size()), 0);
}

// ---- Bounded resolution (issue 16 item 8): what forged traffic can cost ----

constexpr sched::Picos kMs = 1'000'000'000;

IpAddr v4(uint32_t a) { return wire::ipv4_mapped(a); }

TEST(NetStackResolve, SolicitsRetriesThenForgetsAndAsksAgain) {
  NetStack s(kOurMac, kOurIp, 24);
  std::vector<uint8_t> f;
  sched::Picos now = 5 * kMs;
  EXPECT_EQ(s.resolve(kPeerIp, now, &f), NetStack::Resolution::kSolicit);
  EXPECT_EQ(load_be16(f.data() + 20), 1) << "an ARP request";
  EXPECT_EQ(s.resolve(kPeerIp, now + 100 * kMs, &f), NetStack::Resolution::kPending);
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(s.resolve(kPeerIp, now + 250 * kMs, &f), NetStack::Resolution::kSolicit);
  EXPECT_EQ(s.resolve(kPeerIp, now + 500 * kMs, &f), NetStack::Resolution::kSolicit);
  EXPECT_EQ(s.resolve(kPeerIp, now + 750 * kMs, &f), NetStack::Resolution::kPending) << "kMaxSolicits is 3";
  EXPECT_EQ(s.pending(), 1u);
  // Unanswered for kResolveTimeout: forgotten; a later resolve starts again.
  EXPECT_EQ(s.resolve(kPeerIp, now + 1000 * kMs, &f), NetStack::Resolution::kSolicit);
  EXPECT_EQ(s.counters().resolutions_expired, 1u);
  EXPECT_EQ(s.counters().solicits_sent, 4u);
  // The answer ends the resolution.
  std::vector<uint8_t> reply;
  EXPECT_EQ(s.receive(arp(2, kPeerMac, kPeerIp, kOurIp), &reply), NetStack::Verdict::kConsumed);
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.resolve(kPeerIp, now + 1001 * kMs, &f), NetStack::Resolution::kKnown);
}

TEST(NetStackResolve, OffLinkAddressesAreNeverResolved) {
  NetStack s(kOurMac, kOurIp, 24);  // 10.0.0.1/24
  std::vector<uint8_t> f;
  EXPECT_FALSE(s.on_link(v4(0x0a000102)));
  EXPECT_TRUE(s.on_link(v4(0x0a0000fe)));
  EXPECT_EQ(s.resolve(v4(0x0a000102), 0, &f), NetStack::Resolution::kRefused);  // 10.0.1.2
  EXPECT_EQ(s.resolve(v4(0xc0a80001), 0, &f), NetStack::Resolution::kRefused);  // 192.168.0.1
  EXPECT_EQ(s.resolve(kOurIp, 0, &f), NetStack::Resolution::kRefused) << "ourselves";
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(s.counters().solicits_sent, 0u);
  EXPECT_EQ(s.pending(), 0u);
  // /20 and IPv6 /64.
  NetStack t(kOurMac, v4(0x0a000001), 20);
  EXPECT_TRUE(t.on_link(v4(0x0a000f01)));
  EXPECT_FALSE(t.on_link(v4(0x0a001001)));
  NetStack u(kOurMac, kOur6, 64);
  IpAddr far6 = kPeer6;
  far6[7] = 1;
  EXPECT_TRUE(u.on_link(kPeer6));
  EXPECT_FALSE(u.on_link(far6));
  EXPECT_FALSE(u.on_link(kPeerIp)) << "the other family";
}

// 300,000 forged sources (the figure), on-link and off-link, over 30 s
// of virtual time: the solicitations stay within the bucket, the pending set
// within kMaxPending, and everything pending is gone a second after the flood.
TEST(NetStackResolve, AFloodOfForgedAddressesCostsABoundedAmount) {
  NetStack s(kOurMac, v4(0x0a000001), 8);  // 10/8: 16 M on-link addresses
  std::vector<uint8_t> f;
  uint64_t frames = 0;
  size_t max_pending = 0;
  const sched::Picos start = 1000 * kMs;
  sched::Picos now = start;
  for (uint32_t i = 0; i < 300'000; ++i) {
    now = start + static_cast<sched::Picos>(i) * (30'000 * kMs / 300'000);  // 30 s in all
    const IpAddr src = (i % 3 == 0) ? v4(0xc0000000u + i) : v4(0x0a000002u + i);  // a third off-link
    if (s.resolve(src, now, &f) == NetStack::Resolution::kSolicit) ++frames;
    max_pending = std::max(max_pending, s.pending());
  }
  const double seconds = 30.0;
  EXPECT_LE(frames, NetStack::kSolicitBurst + seconds * NetStack::kSolicitsPerSecond + 1);
  EXPECT_GE(frames, seconds * NetStack::kSolicitsPerSecond / 2) << "resolution still works, rate-limited";
  EXPECT_LE(max_pending, NetStack::kMaxPending);
  EXPECT_EQ(s.counters().solicits_sent, frames);
  s.resolve(kPeerIp, now + NetStack::kResolveTimeout, &f);
  EXPECT_LE(s.pending(), 1u) << "what the flood left is forgotten";
}

// Forged ARP requests for our address from many senders: each is answered (it
// costs no state) but the table learns on-link senders only, and at most
// kMaxNeighbors of them; a resolution we started is always learnt.
TEST(NetStackResolve, UnsolicitedLearningIsBounded) {
  NetStack s(kOurMac, kOurIp, 16);  // 10.0/16
  std::vector<uint8_t> reply;
  for (uint32_t i = 0; i < 5000; ++i) {
    MacAddr m = {2, 0, 0, 0, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)};
    EXPECT_EQ(s.receive(arp(1, m, v4(0x0a000100u + i), kOurIp), &reply), NetStack::Verdict::kConsumed);
    s.receive(arp(1, m, v4(0xac100000u + i), kOurIp), &reply);  // 172.16/12: off-link
  }
  EXPECT_EQ(s.neighbors().size(), NetStack::kMaxNeighbors);
  EXPECT_EQ(s.counters().arp_requests_answered, 10000u);
  EXPECT_EQ(s.counters().neighbors_refused, 10000u - NetStack::kMaxNeighbors);
  std::vector<uint8_t> f;
  const IpAddr wanted = v4(0x0a00fffe);
  EXPECT_EQ(s.resolve(wanted, 0, &f), NetStack::Resolution::kSolicit);
  EXPECT_EQ(s.receive(arp(2, kPeerMac, wanted, kOurIp), &reply), NetStack::Verdict::kConsumed);
  EXPECT_TRUE(s.lookup(wanted)) << "asked for: learnt even with the table full";
  // An unsolicited neighbour advertisement for an off-link target teaches nothing.
  NetStack t(kOurMac, kOur6, 64);
  IpAddr far6 = kPeer6;
  far6[7] = 1;
  std::vector<uint8_t> adv(24);
  adv[0] = 136;
  adv[4] = 0x20;
  std::memcpy(adv.data() + 8, far6.data(), 16);
  adv.insert(adv.end(), {2, 1});
  adv.insert(adv.end(), kPeerMac.begin(), kPeerMac.end());
  EXPECT_EQ(t.receive(icmp6(kPeer6, kOur6, adv), &reply), NetStack::Verdict::kConsumed);
  EXPECT_FALSE(t.lookup(far6));
  EXPECT_EQ(t.counters().neighbors_refused, 1u);
}

}  // namespace
}  // namespace isoroce::dataplane
