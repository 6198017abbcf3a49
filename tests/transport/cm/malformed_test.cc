// Bad input never crashes a Manager and never disturbs an established
// connection: truncated, wrong class/version/method, unknown attributes,
// wrong source QP, forged replies, and seeded random bytes; each is counted.
#include <gtest/gtest.h>

#include <random>

#include "tests/transport/cm/fabric.h"
#include "transport/cm/describe.h"
#include "transport/cm/rdma_cm_header.h"

namespace isoroce::cm::test {
namespace {

constexpr uint64_t kSid = 0x0000000001064853ull;

std::vector<uint8_t> good_mad(AttrId a) {
  auto m = make_msg<RtuMsg>(a, 1);
  const auto* p = reinterpret_cast<const uint8_t*>(&m);
  return std::vector<uint8_t>(p, p + kMadBytes);
}

struct Established {
  Fabric f;
  Id a = 0, b = 0;
  Established() {
    Id l = 0;
    EXPECT_EQ(f.b->m.listen(1, kSid, &l), 0);
    EXPECT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
    EXPECT_TRUE(f.wait(*f.b, EventType::kReqReceived));
    b = f.b->of(EventType::kReqReceived).at(0).id;
    EXPECT_EQ(f.b->m.accept(b, accept_params(), f.now), 0);
    EXPECT_TRUE(f.wait(*f.a, EventType::kRepReceived));
    EXPECT_EQ(f.a->m.establish(a, {}, f.now), 0);
    EXPECT_TRUE(f.wait(*f.b, EventType::kEstablished));
  }
  void expect_intact() {
    State s;
    ASSERT_TRUE(f.a->m.state(a, &s));
    EXPECT_EQ(s, State::kEstablished);
    ASSERT_TRUE(f.b->m.state(b, &s));
    EXPECT_EQ(s, State::kEstablished);
  }
};

TEST(CmMalformed, EachKindIsCountedAndDropped) {
  Established e;
  Manager& m = e.f.b->m;
  const Gid src = e.f.a->gid;
  auto feed = [&](std::vector<uint8_t> bytes, uint32_t qp = kGsiQpn) { m.on_mad(src, qp, bytes, e.f.now); };

  auto mad = good_mad(AttrId::kRtu);
  feed(std::vector<uint8_t>(mad.begin(), mad.begin() + 100));  // truncated
  feed({});
  EXPECT_EQ(m.stats().malformed, 2u);
  mad = good_mad(AttrId::kRtu);
  mad[0] = 2;  // base version
  feed(mad);
  mad = good_mad(AttrId::kRtu);
  mad[2] = 1;  // class version
  feed(mad);
  mad = good_mad(AttrId::kRtu);
  mad[3] = 0x81;  // GetResp
  feed(mad);
  EXPECT_EQ(m.stats().malformed, 5u);
  mad = good_mad(AttrId::kRtu);
  mad[1] = 0x04;  // performance management
  feed(mad);
  EXPECT_EQ(m.stats().wrong_class, 1u);
  feed(good_mad(AttrId::kLap));
  feed(good_mad(AttrId::kApr));
  feed(good_mad(AttrId::kClassPortInfo));
  EXPECT_EQ(m.stats().unknown_attribute, 3u);
  feed(good_mad(AttrId::kRtu), 7);  // not from a GSI
  EXPECT_EQ(m.stats().malformed, 6u);
  // Replies for nothing we know: counted, no answer, no event.
  for (AttrId a : {AttrId::kRep, AttrId::kRtu, AttrId::kRej, AttrId::kMra, AttrId::kDrep, AttrId::kSidrRep}) feed(good_mad(a));
  EXPECT_EQ(m.stats().unmatched, 6u);
  OutMad out;
  EXPECT_FALSE(m.pop_mad(&out));
  Event ev;
  EXPECT_FALSE(m.pop_event(&ev));
  e.expect_intact();
}

TEST(CmMalformed, ForgedRepliesForALiveConnectionFromElsewhereAreIgnored) {
  Established e;
  // A REJ and a DREQ naming B's connection, from another GID.
  auto rej = make_msg<RejMsg>(AttrId::kRej, 1);
  rej.set_remote_comm_id(e.b);
  rej.set_local_comm_id(e.a);
  rej.set_reason(28);
  e.f.inject(*e.f.b, v4_gid(10, 0, 0, 66), std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&rej),
                                                                 reinterpret_cast<uint8_t*>(&rej) + kMadBytes));
  auto dreq = make_msg<DreqMsg>(AttrId::kDreq, 1);
  dreq.set_remote_comm_id(e.b);
  dreq.set_local_comm_id(e.a);
  e.f.inject(*e.f.b, v4_gid(10, 0, 0, 66), std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&dreq),
                                                                  reinterpret_cast<uint8_t*>(&dreq) + kMadBytes));
  EXPECT_EQ(e.f.b->count(EventType::kRejected) + e.f.b->count(EventType::kDreqReceived), 0u);
  e.expect_intact();
}

TEST(CmMalformed, SeededRandomMadsNeverCrash) {
  Established e;
  std::mt19937_64 rng(20261126);
  size_t described = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> mad(rng() % 300);
    for (auto& b : mad) b = static_cast<uint8_t>(rng());
    if (mad.size() >= 24 && rng() % 4 != 0) {
      // Mostly valid headers so the attribute handlers see the garbage.
      mad[0] = 1, mad[1] = 7, mad[2] = 2, mad[3] = 3;
      mad[16] = 0;
      mad[17] = static_cast<uint8_t>(0x10 + rng() % 10);
      // Sometimes aimed at the live connection.
      if (mad.size() >= 32 && rng() % 2) {
        wire::store_be32(mad.data() + 28, e.b);
        wire::store_be32(mad.data() + 24, rng() % 2 ? e.a : static_cast<uint32_t>(rng()));
      }
    }
    const Gid src = rng() % 2 ? e.f.a->gid : v4_gid(10, 0, 0, static_cast<uint8_t>(rng()));
    e.f.b->m.on_mad(src, rng() % 8 ? kGsiQpn : static_cast<uint32_t>(rng() % 100), mad, e.f.now);
    described += !describe_mad(mad).empty();
    e.f.now += kMicro;
    e.f.b->m.on_timer(e.f.now);
    OutMad out;
    while (e.f.b->m.pop_mad(&out)) EXPECT_EQ(out.bytes.size(), kMadBytes);
    Event ev;
    while (e.f.b->m.pop_event(&ev)) {
      // A random REQ may reach the listener; nothing else may touch the connection.
      EXPECT_TRUE(ev.id != e.b || ev.type == EventType::kDreqReceived || ev.type == EventType::kRejected)
          << event_name(ev.type);
      if (ev.id != e.b) e.f.b->m.destroy(ev.id, e.f.now);
    }
  }
  EXPECT_EQ(described, 20000u);
  const auto& s = e.f.b->m.stats();
  EXPECT_EQ(s.mads_received, 20000u + 2);  // and the handshake's (REQ, RTU)
  EXPECT_GT(s.malformed + s.unmatched + s.duplicates + s.no_listener, 10000u);
}

TEST(CmRdmaCmHeader, BuildsAndParsesBothFamilies) {
  RdmaCmHeader h;
  h.src_port = 0xccf7;
  h.src = RdmaCmAddr::v4(0x0a01103e);
  h.dst = RdmaCmAddr::v4(0x0a01103d);
  const uint8_t app[] = {1, 2, 3};
  auto pd = build_rdma_cm_private_data(h, app, kReqPrivateData);
  ASSERT_EQ(pd.size(), kRdmaCmHeaderBytes + 3);
  EXPECT_EQ(pd[1], 0x40);
  EXPECT_EQ(pd[2], 0xcc);
  EXPECT_EQ(pd[19], 0x3e);
  auto back = parse_rdma_cm_header(pd);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->src.text(), "10.1.16.62");
  EXPECT_EQ(back->dst.text(), "10.1.16.61");
  EXPECT_EQ(back->src.to_gid(), v4_gid(10, 1, 16, 62));
  EXPECT_EQ(RdmaCmAddr::from_gid(v4_gid(10, 1, 16, 62)), back->src);
  EXPECT_EQ(pd[kRdmaCmHeaderBytes + 2], 3);
  h.src.ipv6 = h.dst.ipv6 = true;
  h.src.addr = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  pd = build_rdma_cm_private_data(h, {}, kReqPrivateData);
  back = parse_rdma_cm_header(pd);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->src.ipv6);
  EXPECT_EQ(back->src.text(), "fe80::1");
  // Limits and bad headers.
  std::vector<uint8_t> big(kReqPrivateData - kRdmaCmHeaderBytes + 1);
  EXPECT_TRUE(build_rdma_cm_private_data(h, big, kReqPrivateData).empty());
  std::string err;
  EXPECT_FALSE(parse_rdma_cm_header(std::vector<uint8_t>(35), &err));
  EXPECT_NE(err.find("shorter"), std::string::npos);
  pd[1] = 0x50;
  EXPECT_FALSE(parse_rdma_cm_header(pd, &err));
  EXPECT_EQ(rdma_cm_service_id(kPsTcp, 18515), 0x0000000001064853ull);
  EXPECT_EQ(rdma_cm_service_id(kPsUdp, 7), 0x0000000001110007ull);
  EXPECT_TRUE(is_rdma_cm_service_id(0x0000000001064853ull));
  EXPECT_FALSE(is_rdma_cm_service_id(0x0200000000000001ull));
  EXPECT_EQ(rdma_cm_port(0x0000000001064853ull), 18515);
}

}  // namespace
}  // namespace isoroce::cm::test
