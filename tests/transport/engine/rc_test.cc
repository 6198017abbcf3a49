// RC end to end between two engines in virtual time: every verb, gather
// lists, inline, MTUs, PSN wrap, loss and duplication, RNR, retry exhaustion,
// remote errors and flush.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <optional>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

TEST(EngineRc, SendSmallAndLargeWithImmediate) {
  RcPair p;
  p.fill(0, 0, 10000, 1);
  ASSERT_EQ(p.post_recv(1, 0, 64, 11), 0);
  ASSERT_EQ(p.post_recv(1, 4096, 20000, 12), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 16, 0, 1), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND_WITH_IMM, 100, 10000, 0, 2), 0);
  ASSERT_TRUE(p.net.run());
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 11u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rc[0].byte_len, 16u);
  EXPECT_EQ(rc[0].src_qp, p.s[0].qpn.value());
  EXPECT_EQ(rc[0].qp_num, p.s[1].qpn.value());
  EXPECT_FALSE(rc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(rc[1].byte_len, 10000u);
  EXPECT_TRUE(rc[1].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(rc[1].imm_data, htonl(0x1234abcd));
  EXPECT_TRUE(p.same(0, 0, 1, 0, 16));
  EXPECT_TRUE(p.same(0, 100, 1, 4096, 10000));
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 1u);
  EXPECT_EQ(sc[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(sc[1].wr_id, 2u);
  EXPECT_EQ(sc[1].status, IBV_WC_SUCCESS);
  // 10000 bytes at MTU 1024 are 10 packets: FIRST, 8 MIDDLE, LAST_WITH_IMMEDIATE.
  int data = 0;
  for (const auto& pkt : p.net.sent(0)) data += pkt.op->kind == wire::OpKind::kSend;
  EXPECT_EQ(data, 11);
}

TEST(EngineRc, WriteReadAndImmediateConsumesAReceive) {
  RcPair p;
  p.fill(0, 0, 300000, 2);
  p.fill(1, 500000, 70000, 3);
  ASSERT_EQ(p.post_recv(1, 0, 0, 77), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 200000, 100000, 1), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE_WITH_IMM, 200000, 5, 400000, 2), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 600000, 70000, 500000, 3), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_TRUE(p.same(0, 0, 1, 100000, 200000));
  EXPECT_TRUE(p.same(0, 200000, 1, 400000, 5));
  EXPECT_TRUE(p.same(0, 600000, 1, 500000, 70000));
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(sc[1].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(sc[2].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(sc[2].byte_len, 70000u);
  for (auto& wc : sc) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 1u);  // the plain WRITE consumes nothing
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(rc[0].byte_len, 5u);
  EXPECT_EQ(rc[0].imm_data, htonl(0x1234abcd));
}

TEST(EngineRc, AtomicsReturnOriginalAndModifyTarget) {
  RcPair p;
  uint64_t v = 40;
  std::memcpy(p.s[1].buf.data() + 64, &v, 8);
  Sge sge{p.s[0].iova + 0, 8, p.s[0].keys.lkey};
  SendWr wr;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = p.s[1].iova + 64;
  wr.rkey = p.s[1].keys.rkey;
  wr.compare_add = 2;
  ASSERT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), 0);
  Sge sge2{p.s[0].iova + 8, 8, p.s[0].keys.lkey};
  wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  wr.sg_list = std::span(&sge2, 1);
  wr.compare_add = 42;
  wr.swap = 1000;
  ASSERT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), 0);
  Sge sge3{p.s[0].iova + 16, 8, p.s[0].keys.lkey};
  wr.sg_list = std::span(&sge3, 1);
  wr.compare_add = 42;  // fails now: the value is 1000
  wr.swap = 7;
  ASSERT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), 0);
  ASSERT_TRUE(p.net.run());
  uint64_t r[3], target;
  std::memcpy(r, p.s[0].buf.data(), 24);
  std::memcpy(&target, p.s[1].buf.data() + 64, 8);
  EXPECT_EQ(r[0], 40u);
  EXPECT_EQ(r[1], 42u);
  EXPECT_EQ(r[2], 1000u);
  EXPECT_EQ(target, 1000u);
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(sc[1].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(sc[0].byte_len, 8u);
}

TEST(EngineRc, GatherListsAndInline) {
  RcPair p;
  p.fill(0, 0, 8192, 4);
  ASSERT_EQ(p.post_recv(1, 0, 8192, 1), 0);
  ASSERT_EQ(p.post_recv(1, 10000, 100, 2), 0);
  Sge sges[3] = {{p.s[0].iova + 0, 1000, p.s[0].keys.lkey},
                 {p.s[0].iova + 5000, 1500, p.s[0].keys.lkey},
                 {p.s[0].iova + 3000, 7, p.s[0].keys.lkey}};
  SendWr wr;
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = sges;
  ASSERT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), 0);
  uint8_t inline_bytes[50];
  for (int i = 0; i < 50; ++i) inline_bytes[i] = static_cast<uint8_t>(i * 3);
  Sge in{reinterpret_cast<uint64_t>(inline_bytes), 50, 0};  // unregistered: fine inline
  wr.sg_list = std::span(&in, 1);
  wr.send_flags = IBV_SEND_INLINE;
  ASSERT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), 0);
  std::memset(inline_bytes, 0, sizeof inline_bytes);  // the data was taken at post time
  ASSERT_TRUE(p.net.run());
  EXPECT_TRUE(p.same(0, 0, 1, 0, 1000));
  EXPECT_TRUE(p.same(0, 5000, 1, 1000, 1500));
  EXPECT_TRUE(p.same(0, 3000, 1, 2500, 7));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p.s[1].buf[10000 + i], static_cast<uint8_t>(i * 3));
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].byte_len, 2507u);
  EXPECT_EQ(rc[1].byte_len, 50u);
}

TEST(EngineRc, EveryPathMtu) {
  for (ibv_mtu mtu : {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096}) {
    RcOptions o;
    o.mtu = mtu;
    EngineConfig c;
    c.active_mtu = IBV_MTU_4096;
    RcPair p(o, c);
    const uint32_t mtu_bytes = 128u << mtu;
    p.fill(0, 0, 20000, mtu);
    p.fill(1, 100000, 20000, mtu + 10);
    ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 20000, 40000), 0);
    ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 200000, 20000, 100000), 0);
    ASSERT_TRUE(p.net.run());
    EXPECT_TRUE(p.same(0, 0, 1, 40000, 20000)) << mtu_bytes;
    EXPECT_TRUE(p.same(0, 200000, 1, 100000, 20000)) << mtu_bytes;
    size_t max_payload = 0;
    for (const auto& pkt : p.net.sent(0)) max_payload = std::max(max_payload, pkt.payload_len);
    EXPECT_EQ(max_payload, mtu_bytes);
  }
}

TEST(EngineRc, PathMtuAboveThePortIsRejected) {
  RcOptions o;
  o.mtu = IBV_MTU_4096;  // the default port MTU is 1024
  Pair net;
  Side a = make_side(net[0], o);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  ASSERT_EQ(net[0].modify_qp(a.qpn, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.ah_attr.is_global = 1;
  attr.ah_attr.port_num = 1;
  const auto ip = net[1].config().ip;
  std::memcpy(attr.ah_attr.grh.dgid.raw, ip.data(), 16);
  attr.path_mtu = IBV_MTU_4096;
  attr.dest_qp_num = 99;
  EXPECT_EQ(net[0].modify_qp(a.qpn, attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            EINVAL);
  EXPECT_EQ(net[0].query_qp(a.qpn)->state(), IBV_QPS_INIT);
}

TEST(EngineRc, PsnWrapsAcross24Bits) {
  RcOptions o;
  o.psn0 = 0xfffff0;
  o.psn1 = 0xfffffe;
  RcPair p(o);
  p.fill(0, 0, 100000, 5);
  p.fill(1, 300000, 50000, 6);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 100000, 0), 0);  // 98 packets: wraps
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 200000, 50000, 300000), 0);
  ASSERT_EQ(p.post_recv(0, 500000, 4096), 0);
  p.fill(1, 400000, 4000, 66);
  ASSERT_EQ(p.post(1, IBV_WR_SEND, 400000, 4000, 0), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_TRUE(p.same(0, 0, 1, 0, 100000));
  EXPECT_TRUE(p.same(0, 200000, 1, 300000, 50000));
  EXPECT_TRUE(p.same(1, 400000, 0, 500000, 4000));
  EXPECT_EQ(p.poll(0, false).size(), 2u);
  bool wrapped = false;
  for (const auto& pkt : p.net.sent(0)) wrapped |= pkt.psn.value() < 100;
  EXPECT_TRUE(wrapped);
}

// A grant takes the packet the QP's previous grant of the same dequeue peeked as its
// next (EngineImpl::on_grant); one QP sending READ responses and WRITE packets in
// the same transmits, with a go-back-N in between, still sends each request PSN in
// order, restarts exactly at the NAKed one, and answers the READ contiguously.
TEST(EngineRc, GrantsOfOneTransmitTakeEachPacketOnceInOrder) {
  RcOptions o;
  RcPair p(o);
  p.fill(0, 0, 60000, 31);
  p.fill(0, 200000, 40000, 32);
  const uint32_t dropped = o.psn0 + 5;  // the 6th WRITE packet, first transmission only
  bool dropped_once = false;
  p.net.set_hook([&](int from, std::vector<uint8_t>& f) {
    auto r = wire::parse_frame(f);
    if (from == 0 && !dropped_once && r.ok() && r.pkt.op->kind == wire::OpKind::kWrite &&
        r.pkt.psn.value() == dropped) {
      dropped_once = true;
      return Fate::kDrop;
    }
    return Fate::kDeliver;
  });
  ASSERT_EQ(p.post_recv(1, 500000, 8000, 9), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 60000, 100000, 1), 0);   // 59 packets
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 100000, 8000, 0, 2), 0);          // 8 packets
  ASSERT_EQ(p.post(1, IBV_WR_RDMA_READ, 300000, 40000, 200000, 3), 0);  // 40 responses from side 0
  ASSERT_TRUE(p.net.run());
  ASSERT_TRUE(dropped_once);
  EXPECT_TRUE(p.same(0, 0, 1, 100000, 60000));
  EXPECT_TRUE(p.same(0, 100000, 1, 500000, 8000));
  EXPECT_TRUE(p.same(0, 200000, 1, 300000, 40000));
  for (const auto& wc : p.poll(0, false)) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  for (const auto& wc : p.poll(1, false)) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  int restarts = 0, requests = 0, responses = 0;
  std::optional<uint32_t> prev_req, prev_resp;
  for (const auto& pkt : p.net.sent(0)) {
    const wire::OpKind k = pkt.op->kind;
    if (k == wire::OpKind::kWrite || k == wire::OpKind::kSend) {
      ++requests;
      if (prev_req && pkt.psn.value() != ((*prev_req + 1) & 0xffffff)) {
        EXPECT_EQ(pkt.psn.value(), dropped) << "a request out of order after PSN " << *prev_req;
        ++restarts;
      }
      prev_req = pkt.psn.value();
    } else if (k == wire::OpKind::kReadResponse) {
      ++responses;
      if (prev_resp) {
        EXPECT_EQ(pkt.psn.value(), (*prev_resp + 1) & 0xffffff);
      }
      prev_resp = pkt.psn.value();
    }
  }
  EXPECT_EQ(restarts, 1);
  EXPECT_GT(requests, 67);  // 67 packets, then again from the dropped one
  EXPECT_EQ(responses, 40);
  EXPECT_EQ(p.net[0].counters().retransmits, static_cast<uint64_t>(requests - 67));
}

// A READ response (256 B and up) is copied into the READ's buffer while its ICRC is
// checked (EngineImpl::read_response_copy_and_check): a corrupted one is dropped
// before it changes anything, the gap it leaves re-issues the READ from there, and
// the buffer ends up intact; the WRITE posted before the READ completes first.
TEST(EngineRc, ACorruptReadResponseIsDroppedAndTheReadReissued) {
  RcOptions o;
  RcPair p(o);
  p.fill(1, 100000, 8000, 41);
  p.fill(0, 50000, 3000, 42);
  const uint32_t corrupt_psn = o.psn0 + 1 + 3;  // the READ's 4th response (the WRITE has psn0)
  int corrupted = 0;
  p.net.set_hook([&](int from, std::vector<uint8_t>& f) {
    auto r = wire::parse_frame(f);
    if (from == 1 && corrupted == 0 && r.ok() && r.pkt.op->kind == wire::OpKind::kReadResponse &&
        r.pkt.psn.value() == corrupt_psn) {
      f[r.pkt.payload_offset + 100] ^= 0x40;
      ++corrupted;
    }
    return Fate::kDeliver;
  });
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 50000, 3000, 300000, 1), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 0, 8000, 100000, 2), 0);
  ASSERT_TRUE(p.net.run());
  ASSERT_EQ(corrupted, 1);
  EXPECT_EQ(p.net[0].counters().rx_bad_icrc, 1u);
  EXPECT_GE(p.net[0].counters().retransmits, 1u) << "the READ was not re-issued";
  EXPECT_TRUE(p.same(0, 0, 1, 100000, 8000));
  EXPECT_TRUE(p.same(0, 50000, 1, 300000, 3000));
  const auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 1u);
  EXPECT_EQ(sc[1].wr_id, 2u);
  for (const auto& wc : sc) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// Seeded loss, duplication, corruption and reordering on both directions.
Pair::Hook faults(uint64_t seed, double loss, double dup, double corrupt) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [=](int, std::vector<uint8_t>& f) {
    auto u = [&] { return static_cast<double>((*rng)() >> 11) / 9007199254740992.0; };
    if (u() < loss) return Fate::kDrop;
    if (u() < corrupt) f[(*rng)() % f.size()] ^= static_cast<uint8_t>(1u << ((*rng)() % 8));
    if (u() < dup) return Fate::kDuplicate;
    if (u() < dup) return Fate::kDelay;
    return Fate::kDeliver;
  };
}

class EngineRcFaults : public ::testing::TestWithParam<double> {};

TEST_P(EngineRcFaults, EveryVerbArrivesOnceInOrderIntact) {
  const double rate = GetParam();
  RcOptions o;
  o.timeout = 6;  // 262 us
  RcPair p(o);
  p.net.set_hook(faults(42, rate, rate, rate));
  p.fill(0, 0, 200000, 7);
  p.fill(1, 600000, 200000, 8);
  uint64_t counter = 0;
  std::memcpy(p.s[1].buf.data() + 900000, &counter, 8);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(p.post_recv(1, 300000 + i * 10000, 10000, 500 + i), 0);
  int id = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(p.post(0, IBV_WR_SEND, i * 5000, 3000 + i * 300, 0, id++), 0);
    ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 100000 + i * 4000, 4000, 100000 + i * 4000, id++), 0);
    ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 400000 + i * 5000, 5000, 600000 + i * 5000, id++), 0);
    Sge sge{p.s[0].iova + 950000 + i * 8, 8, p.s[0].keys.lkey};
    SendWr wr;
    wr.wr_id = static_cast<uint64_t>(id++);
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = p.s[1].iova + 900000;
    wr.rkey = p.s[1].keys.rkey;
    wr.compare_add = 1;
    ASSERT_EQ(p.net[0].post_send(p.net.now(), p.s[0].qpn, wr), 0);
  }
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 80u);
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sc[i].status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(sc[i].wr_id, i);  // in order
  }
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(rc[i].wr_id, 500u + i);
    EXPECT_EQ(rc[i].byte_len, 3000u + i * 300);
    EXPECT_TRUE(p.same(0, i * 5000, 1, 300000 + i * 10000, 3000 + i * 300)) << i;
    EXPECT_TRUE(p.same(0, 100000 + i * 4000, 1, 100000 + i * 4000, 4000)) << i;
    EXPECT_TRUE(p.same(0, 400000 + i * 5000, 1, 600000 + i * 5000, 5000)) << i;
    uint64_t orig;
    std::memcpy(&orig, p.s[0].buf.data() + 950000 + i * 8, 8);
    EXPECT_EQ(orig, static_cast<uint64_t>(i)) << "atomics run exactly once, in order";
  }
  std::memcpy(&counter, p.s[1].buf.data() + 900000, 8);
  EXPECT_EQ(counter, 20u);
  if (rate > 0) {
    EXPECT_GT(p.net[0].counters().retransmits + p.net[1].counters().rx_duplicates, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Rates, EngineRcFaults, ::testing::Values(0.0, 0.01, 0.1));

TEST(EngineRc, RetryExhaustionFailsTheRequestAndFlushesTheRest) {
  RcOptions o;
  o.timeout = 4;
  o.retry_cnt = 2;
  RcPair p(o);
  p.net.set_hook([](int from, std::vector<uint8_t>&) { return from == 0 ? Fate::kDrop : Fate::kDeliver; });
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 100, 0, 1), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 100, 0, 2), 0);
  ASSERT_EQ(p.post_recv(0, 0, 100, 3), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(sc[1].status, IBV_WC_WR_FLUSH_ERR);
  auto rc = p.poll(0, true);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(p.net[0].query_qp(p.s[0].qpn)->state(), IBV_QPS_ERR);
  EXPECT_EQ(p.net[0].counters().timeouts, 3u);  // the first try and retry_cnt retries
  // Posting in ERR completes at once with a flush error.
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 1, 0, 9), 0);
  sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 9u);
  EXPECT_EQ(sc[0].status, IBV_WC_WR_FLUSH_ERR);
}

// An application destroys its QP as soon as it has polled the receive of the peer's
// last message (ibv_rc_pingpong does): the ACK the responder owed still leaves, so
// the peer's SEND completes instead of retrying into a QP that is gone.
TEST(EngineRc, AQpDestroyedRightAfterItsLastReceiveStillAcknowledgesIt) {
  RcPair p;
  p.fill(0, 0, 3000, 5);
  ASSERT_EQ(p.post_recv(1, 0, 4096, 7), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 3000, 0, 1), 0);  // 3 packets, the last asks for the ACK
  std::vector<ibv_wc> got;
  p.net.set_after_receive([&](int to) {
    if (to != 1 || !got.empty()) return;
    got = p.poll(1, true);
    if (!got.empty()) {
      ASSERT_EQ(p.net[1].destroy_qp(p.s[1].qpn), 0);
    }
  });
  ASSERT_TRUE(p.net.run());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(p.same(0, 0, 1, 0, 3000));
  const auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(p.net[0].counters().retransmits, 0u);
  EXPECT_EQ(p.net[1].counters().acks_sent, 1u);
}

// Destroyed with nothing owed (the ACK already left): no frame at all.
TEST(EngineRc, AQpDestroyedWithNothingOwedSendsNothing) {
  RcPair p;
  ASSERT_EQ(p.post_recv(1, 0, 4096, 7), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 3000, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  ASSERT_EQ(p.poll(0, false).size(), 1u);
  const size_t before = p.net.sent(1).size();
  ASSERT_EQ(p.net[1].destroy_qp(p.s[1].qpn), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(p.net.sent(1).size(), before);
}

TEST(EngineRc, RnrWaitsUntilAReceiveIsPosted) {
  RcOptions o;
  o.rnr_retry = 7;  // forever
  RcPair p(o);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 100, 0, 1), 0);
  p.net.run_until(2'000'000'000);  // 2 ms of RNR NAKs
  EXPECT_TRUE(p.poll(0, false).empty());
  EXPECT_GT(p.net[0].counters().rnr_naks_received, 3u);
  ASSERT_EQ(p.post_recv(1, 0, 100, 5), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  ASSERT_EQ(p.poll(1, true).size(), 1u);
}

TEST(EngineRc, RnrRetryExhaustion) {
  RcOptions o;
  o.rnr_retry = 2;
  RcPair p(o);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 100, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(p.net[0].counters().rnr_naks_received, 3u);
}

TEST(EngineRc, BadRkeyAndOutOfBoundsAreRemoteAccessErrors) {
  {
    RcPair p;
    Sge sge{p.s[0].iova, 16, p.s[0].keys.lkey};
    SendWr wr;
    wr.wr_id = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = p.s[1].iova;
    wr.rkey = p.s[1].keys.rkey ^ 0x5a5a;
    ASSERT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), 0);
    ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 1, 0, 2), 0);
    ASSERT_TRUE(p.net.run());
    auto sc = p.poll(0, false);
    ASSERT_EQ(sc.size(), 2u);
    EXPECT_EQ(sc[0].status, IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(sc[1].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(p.net[1].query_qp(p.s[1].qpn)->state(), IBV_QPS_ERR);
  }
  {
    RcPair p;
    ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 0, 100, p.s[1].buf.size() - 50, 1), 0);
    ASSERT_TRUE(p.net.run());
    auto sc = p.poll(0, false);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, IBV_WC_REM_ACCESS_ERR);
  }
}

TEST(EngineRc, LocalKeyErrorCompletesWithLocalProtectionError) {
  RcPair p;
  Sge sge{p.s[0].iova, 16, p.s[0].keys.lkey + 1};
  SendWr wr;
  wr.wr_id = 4;
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = std::span(&sge, 1);
  ASSERT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), 0);  // the post itself succeeds
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(p.net[0].query_qp(p.s[0].qpn)->state(), IBV_QPS_ERR);
}

TEST(EngineRc, ReceiveTooSmallIsALocalLengthError) {
  RcPair p;
  ASSERT_EQ(p.post_recv(1, 0, 10, 1), 0);
  ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 100, 0, 2), 0);
  ASSERT_TRUE(p.net.run());
  auto rc = p.poll(1, true);
  ASSERT_GE(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_LOC_LEN_ERR);
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_REM_INV_REQ_ERR);
}

TEST(EngineRc, UnsignaledCompletionsAreNotReported) {
  RcOptions o;
  o.sq_sig_all = false;
  RcPair p(o);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 10, 0, 1), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 10, 0, 2, IBV_SEND_SIGNALED), 0);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 10, 0, 3), 0);
  ASSERT_TRUE(p.net.run());
  auto sc = p.poll(0, false);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 2u);
}

TEST(EngineRc, MaxRdAtomicBoundsOutstandingReads) {
  RcOptions o;
  o.max_rd_atomic = 2;
  RcPair p(o);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, i * 10000, 5000, i * 10000, i), 0);
  // Count READ requests sent before the first response arrived back.
  ASSERT_TRUE(p.net.run(1'500'000));  // less than one round trip (2 us)
  int reads = 0;
  for (const auto& pkt : p.net.sent(0)) reads += pkt.op->kind == wire::OpKind::kReadRequest;
  EXPECT_EQ(reads, 2);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(p.poll(0, false).size(), 8u);
}

TEST(EngineRc, FenceWaitsForEarlierReads) {
  RcPair p;
  p.fill(1, 0, 5000, 9);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 0, 5000, 0, 1), 0);
  // The fenced WRITE sends what the READ brought.
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 5000, 100000, 2, IBV_SEND_FENCE), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_TRUE(p.same(1, 0, 1, 100000, 5000));
}

TEST(EngineRc, ModifyToErrorFlushesEverything) {
  RcPair p;
  ASSERT_EQ(p.post_recv(1, 0, 100, 1), 0);
  ASSERT_EQ(p.post_recv(1, 0, 100, 2), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(p.net[1].modify_qp(p.s[1].qpn, a, IBV_QP_STATE), 0);
  auto rc = p.poll(1, true);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(rc[1].wr_id, 2u);
}

TEST(EngineRc, InvalidWorkRequestsAreRejectedAtPost) {
  RcPair p;
  Sge sge{p.s[0].iova, 4, p.s[0].keys.lkey};
  SendWr wr;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;  // atomics need exactly 8 bytes
  wr.sg_list = std::span(&sge, 1);
  EXPECT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), EINVAL);
  sge.length = 8;
  wr.remote_addr = p.s[1].iova + 4;  // misaligned
  EXPECT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), EINVAL);
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_INLINE;
  EXPECT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), EINVAL);
  wr.opcode = IBV_WR_TSO;  // not an RC opcode
  wr.send_flags = 0;
  EXPECT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), EINVAL);
  wr.opcode = IBV_WR_BIND_MW;  // a local operation carries no data
  EXPECT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), EINVAL);
  wr.opcode = IBV_WR_SEND;
  EXPECT_EQ(p.net[0].post_send(0, wire::Qpn(0xabcdef), wr), EINVAL);
  Sge many[5] = {sge, sge, sge, sge, sge};  // max_send_sge is 4
  wr.sg_list = many;
  EXPECT_EQ(p.net[0].post_send(0, p.s[0].qpn, wr), EINVAL);
}

TEST(EngineRc, SendQueueFullIsEnomem) {
  RcOptions o;
  o.max_send_wr = 4;
  RcPair p(o);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 8), 0);
  EXPECT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 8), ENOMEM);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(p.poll(0, false).size(), 4u);
  EXPECT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 8), 0);
}

TEST(EngineRc, ResizeCqKeepsCompletionsInOrderAndMovesTheBound) {
  RcPair p;
  const CqHandle cq = p.s[0].scq;  // 4096 entries, every WR signalled
  for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 8, 0, i), 0);
  ASSERT_TRUE(p.net.run());
  // Expect: 10 queued, so 9 is EINVAL, 10 fits; entries held elsewhere count too.
  EXPECT_EQ(p.net[0].resize_cq(cq, 9, 0), EINVAL);
  EXPECT_EQ(p.net[0].resize_cq(cq, 12, 3), EINVAL);
  EXPECT_EQ(p.net[0].resize_cq(cq, 0, 0), EINVAL);
  EXPECT_EQ(p.net[0].resize_cq(cq, 1 << 20, 0), EINVAL);
  EXPECT_EQ(p.net[0].resize_cq(0xdead, 16, 0), EINVAL);
  ASSERT_EQ(p.net[0].resize_cq(cq, 10, 0), 0);
  // The bound moved: 5 more overrun the CQ (lost, counted) ...
  const uint64_t overruns = p.net[0].counters().cq_overruns;
  for (uint64_t i = 10; i < 15; ++i) ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 8, 0, i), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(p.net[0].counters().cq_overruns, overruns + 5);
  auto wc = p.poll(0, false);
  ASSERT_EQ(wc.size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(wc[i].wr_id, i);
  // ... and growing it holds 40.
  ASSERT_EQ(p.net[0].resize_cq(cq, 40, 0), 0);
  for (uint64_t i = 0; i < 40; ++i) ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, 8, 0, 100 + i), 0);
  ASSERT_TRUE(p.net.run());
  EXPECT_EQ(p.net[0].counters().cq_overruns, overruns + 5);
  wc = p.poll(0, false);
  ASSERT_EQ(wc.size(), 40u);
  for (uint64_t i = 0; i < 40; ++i) EXPECT_EQ(wc[i].wr_id, 100 + i);
}

}  // namespace
}  // namespace isoroce::transport::testing
