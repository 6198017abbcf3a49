// Fresh one-packet messages, the twelfth engine pass (docs/performance.md "The
// engine, twelfth pass"):
// - the responder checks a RETH's R_Key against the QP's last passing MR key
//   (check_rkey, ResponderState::rkey_hit) while no MR was deregistered: the
//   access and the bounds are checked every time, anything else goes the long way
//   (the key looked up, a window's key among the windows). Each test lets a key
//   pass first, so it is the kept one, then sends what must fail or land elsewhere;
// - the requester builds every packet of a SEND or WRITE of one SGE checked at post
//   (ONLY, FIRST, LAST as well as MIDDLE) from the header template, and peeks a
//   one-packet message's ONLY packet without counting packets: each frame's opcode,
//   PSN, AckReq, SE, RETH, immediate and payload are the long way's.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;
constexpr uint8_t kNakAccess = 0x62;

bool is_ack(const wire::RocePacket& p, uint32_t psn) {
  return p.opcode == wire::op::kRcAck && (syndrome(p) >> 5) == 0 && p.psn.value() == psn;
}
bool is_access_nak(const wire::RocePacket& p, uint32_t psn) {
  return p.opcode == wire::op::kRcAck && syndrome(p) == kNakAccess && p.psn.value() == psn;
}

// A registered buffer besides the DUT's own.
struct Region {
  std::vector<uint8_t> buf;
  uint64_t iova = 0;
  verbs::MrKeys keys{};
};

Region reg(Engine& e, PdHandle pd, size_t len, uint32_t access, uint64_t iova_base) {
  Region r;
  r.buf.assign(len, 0);
  r.iova = iova_base + (reinterpret_cast<uint64_t>(r.buf.data()) & 0xfff);
  auto mr = e.reg_mr(pd, r.buf.data(), len, r.iova, access);
  EXPECT_TRUE(mr.ok()) << mr.err();
  if (mr.ok()) r.keys = mr.value();
  return r;
}

wire::FrameSpec write_only(Dut& d, uint32_t psn, uint64_t va, uint32_t rkey, std::span<const uint8_t> data) {
  auto f = d.spec(wire::op::kRcWriteOnly, psn);
  f.reth = wire::RethFields{va, rkey, static_cast<uint32_t>(data.size())};
  f.payload = data;
  return f;
}

wire::FrameSpec read_request(Dut& d, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len) {
  auto f = d.spec(wire::op::kRcReadRequest, psn);
  f.reth = wire::RethFields{va, rkey, len};
  return f;
}

// ---- the kept R_Key ----------------------------------------------------------

// The bounds with the key kept: a WRITE ONLY that ends at the region's last byte is
// taken; one that ends one byte past it, and one that starts one byte before it, are
// Remote Access Errors (9.7.5.1.4), nothing stored.
TEST(EngineFreshMessage, KeptRkeyStillChecksTheBoundsOfEveryMessage) {
  const std::vector<uint8_t> data = pattern_bytes(64, 3, 7);
  const uint32_t len = static_cast<uint32_t>(data.size());
  struct Case {
    const char* what;
    int64_t start;  // from the region's start; negative: from its end
    bool taken;
  } cases[] = {{"ends at the last byte", -static_cast<int64_t>(len), true},
               {"ends one byte past it", -static_cast<int64_t>(len) + 1, false},
               {"starts one byte before the region", -static_cast<int64_t>(1u << 30), false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Dut d;
    Region b = reg(d.net[1], d.s.pd, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0x20000000);
    auto out = d.receive(write_only(d, 500, b.iova, b.keys.rkey, data));  // the key kept
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(is_ack(out[0], 500));
    std::fill(b.buf.begin(), b.buf.end(), 0);
    const uint64_t va = c.start == -static_cast<int64_t>(1u << 30) ? b.iova - 1
                                                                   : b.iova + b.buf.size() + c.start;
    out = d.receive(write_only(d, 501, va, b.keys.rkey, data));
    ASSERT_EQ(out.size(), 1u);
    if (c.taken) {
      EXPECT_TRUE(is_ack(out[0], 501));
      EXPECT_TRUE(std::equal(data.begin(), data.end(), b.buf.end() - len));
    } else {
      EXPECT_TRUE(is_access_nak(out[0], 501));
      EXPECT_TRUE(all_equal(b.buf, 0)) << "stored";
      EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
    }
  }
}

// The access with the key kept: a region that grants remote writes only, a WRITE
// ONLY taken, then a READ of the same bytes with the same key is a Remote Access
// Error; a region that grants remote reads only, a READ answered, then a WRITE is.
TEST(EngineFreshMessage, KeptRkeyStillChecksTheAccessOfEveryMessage) {
  const std::vector<uint8_t> data = pattern_bytes(128, 5, 3);
  for (const bool write_first : {true, false}) {
    SCOPED_TRACE(write_first ? "write-only region, then a READ" : "read-only region, then a WRITE");
    Dut d;
    Region b = reg(d.net[1], d.s.pd, 8192,
                   IBV_ACCESS_LOCAL_WRITE | (write_first ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ),
                   0x20000000);
    auto out = d.receive(write_first ? write_only(d, 500, b.iova, b.keys.rkey, data)
                                     : read_request(d, 500, b.iova, b.keys.rkey, 128));
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].opcode, write_first ? wire::op::kRcAck : wire::op::kRcReadResponseOnly);
    ASSERT_EQ(syndrome(out[0]) >> 5, 0);
    std::fill(b.buf.begin(), b.buf.end(), 0);
    out = d.receive(write_first ? read_request(d, 501, b.iova, b.keys.rkey, 128)
                                : write_only(d, 501, b.iova, b.keys.rkey, data));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_access_nak(out[0], 501));
    EXPECT_TRUE(all_equal(b.buf, 0)) << "stored";
  }
}

// The kept key's region deregistered: the key is no key (a Remote Access Error,
// nothing stored); registered again under the same key values with no remote
// access, at another buffer: still refused, and neither buffer written. Registered
// again with remote writes at another buffer: the bytes land there, not in the old.
TEST(EngineFreshMessage, KeptRkeyIsLookedUpAgainAfterADeregOrAReRegistration) {
  const std::vector<uint8_t> data = pattern_bytes(256, 9, 5);
  const uint32_t rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  struct Case {
    const char* what;
    bool again;       // registered again under the same keys
    uint32_t access;  // of the new registration
  } cases[] = {{"deregistered", false, 0},
               {"re-registered without remote access", true, IBV_ACCESS_LOCAL_WRITE},
               {"re-registered with remote writes", true, rw}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Dut d;
    Region b = reg(d.net[1], d.s.pd, 8192, rw, 0x20000000);
    auto out = d.receive(write_only(d, 500, b.iova, b.keys.rkey, data));
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(is_ack(out[0], 500));
    std::fill(b.buf.begin(), b.buf.end(), 0);
    ASSERT_EQ(d.net[1].dereg_mr(b.keys.lkey), 0);
    Region n;
    if (c.again) {
      d.net[1].set_next_mr_keys(verbs::MrKeys{b.keys.lkey, b.keys.rkey});
      n = reg(d.net[1], d.s.pd, 8192, c.access, b.iova - (reinterpret_cast<uint64_t>(b.buf.data()) & 0xfff));
      ASSERT_EQ(n.keys.rkey, b.keys.rkey);
    }
    // Into the new region's first bytes: inside the old one's range too (the iovas
    // differ by less than a page).
    out = d.receive(write_only(d, 501, c.again ? n.iova : b.iova, b.keys.rkey, data));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(all_equal(b.buf, 0)) << "stored into the deregistered region";
    if (c.again && (c.access & IBV_ACCESS_REMOTE_WRITE)) {
      EXPECT_TRUE(is_ack(out[0], 501));
      EXPECT_TRUE(std::equal(data.begin(), data.end(), n.buf.begin()));
    } else {
      EXPECT_TRUE(is_access_nak(out[0], 501));
      if (c.again) {
        EXPECT_TRUE(all_equal(n.buf, 0)) << "stored without remote access";
      }
    }
  }
}

// A key another QP of the engine keeps, of another PD: refused for this QP (an
// R_Key of another PD is no key, 10.6.3.2), nothing stored, that QP unharmed.
TEST(EngineFreshMessage, AKeyAnotherQpKeepsIsRefusedForAQpOfAnotherPd) {
  Dut d;
  Side other = make_side(d.net[1], d.opt);  // its own PD, MR and QP
  Side other_peer;
  other_peer.qpn = wire::Qpn(0x78);
  connect(d.net[1], other, other_peer, d.net[0].config().ip, d.opt, 7000, 800);
  const std::vector<uint8_t> data = pattern_bytes(100, 1, 1);
  auto f = write_only(d, 800, other.iova, other.keys.rkey, data);
  f.dest_qp = other.qpn;
  auto out = d.receive(f);  // `other` keeps its key
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(is_ack(out[0], 800));
  std::fill(other.buf.begin(), other.buf.end(), 0);
  // The DUT's QP (its own PD) names the other QP's key.
  out = d.receive(write_only(d, 500, other.iova, other.keys.rkey, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_access_nak(out[0], 500));
  EXPECT_TRUE(all_equal(other.buf, 0)) << "stored through another PD's key";
  // The other QP still takes its own key.
  f.psn = wire::Psn(801);
  out = d.receive(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], 801));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), other.buf.begin()));
}

// The kept key, then the QP's remote access made read-only (RTS -> RTS): a WRITE
// ONLY with that key is a Remote Access Error (the QP's access is checked apart from
// the key, every time).
TEST(EngineFreshMessage, KeptRkeyDoesNotOutliveTheQpsRemoteWriteAccess) {
  Dut d;
  const std::vector<uint8_t> data = pattern_bytes(64, 2, 9);
  auto out = d.receive(d.write_only(500, 0, data));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(is_ack(out[0], 500));
  std::fill(d.s.buf.begin(), d.s.buf.begin() + 4096, 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(d.net[1].modify_qp(d.s.qpn, a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), 0);
  out = d.receive(d.write_only(501, 0, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_access_nak(out[0], 501));
  EXPECT_TRUE(all_equal(std::span(d.s.buf).first(4096), 0)) << "stored";
}

// A window's key is never the kept one: a WRITE ONLY through a type 2 window
// (bound by the DUT's QP over the region's first 4 KB) is taken, through the
// region's own key too; after the window's LOCAL_INV its key is refused, and a
// window over other bytes bound after a WRITE that kept the region's key grants
// only its own range.
TEST(EngineFreshMessage, AWindowsKeyIsCheckedAsAWindowEveryTime) {
  RcOptions o;
  o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
  Dut d(o);
  const std::vector<uint8_t> data = pattern_bytes(64, 4, 13);
  const uint32_t win = d.bind_type2_window(IBV_ACCESS_REMOTE_WRITE, 4096);
  ASSERT_NE(win, 0u);
  auto out = d.receive(write_only(d, 500, d.s.iova, win, data));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(is_ack(out[0], 500));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  out = d.receive(d.write_only(501, 8192, data));  // the MR's key, kept now
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(is_ack(out[0], 501));
  // Past the window's range (inside the MR's): refused through the window's key.
  out = d.receive(write_only(d, 502, d.s.iova + 4096, win, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_access_nak(out[0], 502));
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(4096, 64), 0)) << "stored past the window";

  Dut e(o);
  const uint32_t win2 = e.bind_type2_window(IBV_ACCESS_REMOTE_WRITE, 4096);
  ASSERT_NE(win2, 0u);
  out = e.receive(write_only(e, 500, e.s.iova, win2, data));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(is_ack(out[0], 500));
  SendWr inv;
  inv.wr_id = 2;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = win2;
  ASSERT_EQ(e.net[1].post_send(e.now, e.s.qpn, inv), 0);
  e.drain();
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(e.net[1].poll_cq(e.s.scq, wc), 1);
  ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
  std::fill(e.s.buf.begin(), e.s.buf.begin() + 4096, 0);
  out = e.receive(write_only(e, 501, e.s.iova, win2, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_access_nak(out[0], 501));
  EXPECT_TRUE(all_equal(std::span(e.s.buf).first(4096), 0)) << "stored through an invalidated window";
}

// SEND ONLYs of 256 bytes and more (their receive taken in place at the copy that
// checks the ICRC, rx_send_first) into an RC QP's SRQ: each takes the SRQ's next
// receive in order (wr_id, bytes at its buffer), the limit event fires once when the
// count falls below the limit, and the SRQ's count of posted receives falls with
// each (a full SRQ takes exactly as many new receives as were consumed). Then a
// SEND FIRST + LAST takes the next receive, not one an ONLY consumed.
TEST(EngineFreshMessage, SendOnlysTakeTheirSrqsReceivesInPlace) {
  Pair net;
  RcOptions o;
  Side a = make_side(net[0], o);
  SrqHandle srq_h = 0;
  Side b = make_srq_side(net[1], 6, &srq_h);
  ASSERT_FALSE(::testing::Test::HasFailure());
  ibv_srq_attr sa{};
  connect(net[0], a, b, net[1].config().ip, o, 1, 2);
  connect(net[1], b, a, net[0].config().ip, o, 2, 1);
  auto post_srq = [&](uint64_t i) {
    const Sge sge{b.iova + (i % 8) * 4096, 4096, b.keys.lkey};
    return net[1].post_srq_recv(srq_h, RecvWr{i, std::span(&sge, 1)});
  };
  for (uint64_t i = 0; i < 6; ++i) ASSERT_EQ(post_srq(i), 0);
  EXPECT_EQ(post_srq(99), ENOMEM) << "the SRQ is full";
  sa.srq_limit = 3;
  ASSERT_EQ(net[1].modify_srq(srq_h, sa, IBV_SRQ_LIMIT), 0);
  for (size_t i = 0; i < a.buf.size() && i < 8192; ++i) a.buf[i] = static_cast<uint8_t>(i * 5 + 3);
  auto send = [&](uint64_t off, uint32_t len) {
    const Sge sge{a.iova + off, len, a.keys.lkey};
    SendWr wr;
    wr.sg_list = std::span(&sge, 1);
    return net[0].post_send(net.now(), a.qpn, wr);
  };
  for (int i = 0; i < 4; ++i) ASSERT_EQ(send(static_cast<uint64_t>(i) * 256, 300 + i), 0);
  ASSERT_TRUE(net.run());
  std::vector<ibv_wc> wc(8);
  ASSERT_EQ(net[1].poll_cq(b.rcq, wc), 4);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(wc[i].byte_len, 300u + i);
    EXPECT_TRUE(std::equal(a.buf.begin() + i * 256, a.buf.begin() + i * 256 + 300 + i, b.buf.begin() + i * 4096));
  }
  auto ev = net[1].take_async_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::kSrqLimitReached);
  // Four consumed: four new receives fit, a fifth does not.
  for (uint64_t i = 6; i < 10; ++i) EXPECT_EQ(post_srq(i), 0) << i;
  EXPECT_EQ(post_srq(98), ENOMEM) << "the SRQ's count did not fall with the ONLYs";
  // A SEND of two MTUs takes receive 4, the next one.
  ASSERT_EQ(send(0, 2 * 1024), 0);
  ASSERT_TRUE(net.run());
  ASSERT_EQ(net[1].poll_cq(b.rcq, wc), 1);
  EXPECT_EQ(wc[0].wr_id, 4u);
  EXPECT_EQ(wc[0].byte_len, 2048u);
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + 2048, b.buf.begin() + 4 * 4096));
}

// Receive slots reused with another SGE count (a ring of two slots): a receive of one
// SGE after one of one is written in place, one of one after one of two and one of
// two after one of one are the vector's own assign. Each SEND ONLY lands in its
// receive's SGEs only: one longer than its receive's one SGE of 256 bytes completes
// that receive with IBV_WC_LOC_LEN_ERR whether the slot's previous receive was one
// SGE of 512 bytes or two of 256 (either would have held it), and a receive of two
// SGEs of 256 in a slot that had one takes 300 bytes across both.
TEST(EngineFreshMessage, ReceiveSlotsReusedWithOtherSgeCountsHoldOnlyTheirOwnSges) {
  enum class Case { kOneAfterOne, kOneAfterTwo, kTwoAfterOne };
  for (const Case c : {Case::kOneAfterOne, Case::kOneAfterTwo, Case::kTwoAfterOne}) {
    SCOPED_TRACE(static_cast<int>(c));
    RcOptions o;
    o.max_recv_wr = 2;
    RcPair p(o);
    auto post2 = [&](uint64_t off1, uint64_t off2, uint32_t len, uint64_t wr_id) {
      const Sge sges[2] = {{p.s[1].iova + off1, len, p.s[1].keys.lkey},
                           {p.s[1].iova + off2, len, p.s[1].keys.lkey}};
      RecvWr wr{wr_id, std::span(sges, 2)};
      return p.net[1].post_recv(p.s[1].qpn, wr);
    };
    p.fill(0, 0, 4096, 77);
    ASSERT_EQ(p.post_recv(1, 0, 512, 1), 0);
    ASSERT_EQ(post2(4096, 8192, 256, 2), 0);
    ASSERT_EQ(p.post(0, IBV_WR_SEND, 0, 300, 0, 11), 0);
    ASSERT_EQ(p.post(0, IBV_WR_SEND, 1000, 300, 0, 12), 0);
    ASSERT_TRUE(p.net.run());
    auto rc = p.poll(1, true);
    ASSERT_EQ(rc.size(), 2u);
    EXPECT_EQ(rc[0].wr_id, 1u);
    EXPECT_EQ(rc[1].wr_id, 2u);
    EXPECT_TRUE(p.same(0, 0, 1, 0, 300));
    EXPECT_TRUE(p.same(0, 1000, 1, 4096, 256));
    EXPECT_TRUE(p.same(0, 1256, 1, 8192, 44));
    std::fill(p.s[1].buf.begin(), p.s[1].buf.begin() + 512, 0);
    std::fill(p.s[1].buf.begin() + 8192, p.s[1].buf.begin() + 8192 + 512, 0);
    // The slots again: receive 3 in the first slot (it had one SGE of 512), receive 4
    // in the second (it had two of 256).
    if (c == Case::kTwoAfterOne) {
      ASSERT_EQ(post2(12288, 20480, 256, 3), 0);
    } else {
      ASSERT_EQ(p.post_recv(1, 12288, 256, 3), 0);
    }
    ASSERT_EQ(p.post_recv(1, 16384, 256, 4), 0);
    if (c == Case::kOneAfterTwo) {
      ASSERT_EQ(p.post(0, IBV_WR_SEND, 2000, 200, 0, 13), 0);
    }
    ASSERT_EQ(p.post(0, IBV_WR_SEND, 3000, 300, 0, 14), 0);
    ASSERT_TRUE(p.net.run());
    rc = p.poll(1, true);
    switch (c) {
      case Case::kOneAfterOne:
        ASSERT_GE(rc.size(), 1u);
        EXPECT_EQ(rc[0].wr_id, 3u);
        EXPECT_EQ(rc[0].status, IBV_WC_LOC_LEN_ERR) << "the slot's previous receive's length was used";
        break;
      case Case::kOneAfterTwo:
        ASSERT_GE(rc.size(), 2u);
        EXPECT_EQ(rc[0].wr_id, 3u);
        EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
        EXPECT_TRUE(p.same(0, 2000, 1, 12288, 200));
        EXPECT_EQ(rc[1].wr_id, 4u);
        EXPECT_EQ(rc[1].status, IBV_WC_LOC_LEN_ERR) << "the slot's previous second SGE was used";
        break;
      case Case::kTwoAfterOne:
        ASSERT_GE(rc.size(), 1u);
        EXPECT_EQ(rc[0].wr_id, 3u);
        EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS) << "the receive's second SGE was lost";
        EXPECT_EQ(rc[0].byte_len, 300u);
        EXPECT_TRUE(p.same(0, 3000, 1, 12288, 256));
        EXPECT_TRUE(p.same(0, 3256, 1, 20480, 44));
        break;
    }
    EXPECT_TRUE(all_equal(std::span(p.s[1].buf).first(512), 0)) << "written through a stale SGE";
    EXPECT_TRUE(all_equal(std::span(p.s[1].buf).subspan(8192, 512), 0)) << "written through a stale SGE";
  }
}

// ---- the requester's frames ---------------------------------------------------

// What the DUT sends for the WRs posted so far, frames and the grants' sizes.
Capture send_all(Dut& d) {
  Capture c;
  // 300 us in steps of 1 us: inside the retransmission timeout (about 1 ms).
  for (int i = 0; i < 300; ++i) {
    d.net[1].advance(d.now);
    d.net[1].transmit(d.now, c, 64);
    d.now += 1'000'000;
  }
  return c;
}

struct Posted {
  ibv_wr_opcode opcode;
  uint32_t length;  // bytes of the one SGE (or of the two: `sges`)
  uint32_t flags = 0;
  int sges = 1;     // 0: none (an empty message), 2: the length in two SGEs
};

// Each frame of each WR, checked field by field against what the WR says: the
// opcode sequence (ONLY for at most one MTU), consecutive PSNs, AckReq on the last
// packet (and every packet of this QP's ACK interval), SE on a solicited message's
// last packet only, the RETH on a WRITE's first packet (the whole length), the
// immediate on the last packet of a WR with one, the IETH on a SEND with
// invalidate's, the payload's bytes, and the grant's size that of the frame.
// `between` runs after the posts, before the frames are built.
void expect_frames(Dut& d, const std::vector<Posted>& wrs, uint64_t remote_va, uint32_t rkey,
                   const std::function<void()>& between = {}) {
  std::vector<Sge> sge_store(2 * wrs.size());
  uint64_t off = 0;
  for (size_t i = 0; i < wrs.size(); ++i) {
    const Posted& p = wrs[i];
    SendWr wr;
    wr.wr_id = i;
    wr.opcode = p.opcode;
    wr.send_flags = p.flags;
    if (p.sges == 2) {
      sge_store[2 * i] = Sge{d.s.iova + off, p.length / 2, d.s.keys.lkey};
      sge_store[2 * i + 1] = Sge{d.s.iova + off + p.length / 2 + 64, p.length - p.length / 2, d.s.keys.lkey};
      wr.sg_list = std::span(&sge_store[2 * i], 2);
    } else if (p.flags & IBV_SEND_INLINE) {
      // Inline data is read from the application's address at post (no key).
      sge_store[2 * i] = Sge{reinterpret_cast<uint64_t>(d.s.buf.data() + off), p.length, 0};
      wr.sg_list = std::span(&sge_store[2 * i], p.sges);
    } else {
      sge_store[2 * i] = Sge{d.s.iova + off, p.length, d.s.keys.lkey};
      wr.sg_list = std::span(&sge_store[2 * i], p.sges);
    }
    wr.remote_addr = remote_va + i * 0x10000;
    wr.rkey = rkey;
    wr.imm_data = htonl(0x1000 + static_cast<uint32_t>(i));
    wr.invalidate_rkey = 0xabc00 + static_cast<uint32_t>(i);
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, wr), 0) << i;
    off += p.length + 4096;
  }
  if (between) between();
  const Capture c = send_all(d);
  size_t k = 0;
  uint32_t psn = 9000;  // the DUT's first PSN (Dut connects with 9000)
  off = 0;
  for (size_t i = 0; i < wrs.size(); ++i) {
    SCOPED_TRACE(i);
    const Posted& p = wrs[i];
    const bool write = p.opcode == IBV_WR_RDMA_WRITE || p.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    const bool imm = p.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || p.opcode == IBV_WR_SEND_WITH_IMM;
    const bool inv = p.opcode == IBV_WR_SEND_WITH_INV;
    const uint32_t n = std::max<uint32_t>(1, (p.length + kMtu - 1) / kMtu);
    // The message's bytes as the WR's SGEs hold them.
    std::vector<uint8_t> msg;
    if (p.sges == 2) {
      const uint8_t* b = d.s.buf.data() + off;
      msg.insert(msg.end(), b, b + p.length / 2);
      msg.insert(msg.end(), b + p.length / 2 + 64, b + p.length + 64);
    } else {
      msg.assign(d.s.buf.begin() + off, d.s.buf.begin() + off + p.length);
    }
    for (uint32_t j = 0; j < n; ++j, ++k, ++psn) {
      SCOPED_TRACE(j);
      ASSERT_LT(k, c.pkts.size());
      const wire::RocePacket& f = c.pkts[k];
      const bool first = j == 0, last = j + 1 == n;
      uint8_t want;
      if (write) {
        want = first && last ? (imm ? wire::op::kRcWriteOnlyImm : wire::op::kRcWriteOnly)
               : first      ? wire::op::kRcWriteFirst
               : last       ? (imm ? wire::op::kRcWriteLastImm : wire::op::kRcWriteLast)
                            : wire::op::kRcWriteMiddle;
      } else {
        want = first && last ? (inv ? wire::op::kRcSendOnlyInv : imm ? wire::op::kRcSendOnlyImm : wire::op::kRcSendOnly)
               : first      ? wire::op::kRcSendFirst
               : last       ? (inv ? wire::op::kRcSendLastInv : imm ? wire::op::kRcSendLastImm : wire::op::kRcSendLast)
                            : wire::op::kRcSendMiddle;
      }
      EXPECT_EQ(f.opcode, want);
      EXPECT_EQ(f.psn.value(), psn);
      EXPECT_EQ(f.dest_qp, d.peer.qpn);
      EXPECT_EQ(f.ack_req, last);  // the default ACK interval is longer than these WRs
      EXPECT_EQ(f.solicited, last && (p.flags & IBV_SEND_SOLICITED) != 0);
      ASSERT_EQ(f.reth.has_value(), write && first);
      if (f.reth) {
        EXPECT_EQ(f.reth->va, remote_va + i * 0x10000);
        EXPECT_EQ(f.reth->rkey, rkey);
        EXPECT_EQ(f.reth->dma_len, p.length);
      }
      ASSERT_EQ(f.imm.has_value(), imm && last);
      if (f.imm) {
        EXPECT_EQ(*f.imm, 0x1000 + i);
      }
      ASSERT_EQ(f.ieth.has_value(), inv && last);
      if (f.ieth) {
        EXPECT_EQ(*f.ieth, 0xabc00 + i);
      }
      const size_t len = std::min<size_t>(kMtu, p.length - j * kMtu);
      ASSERT_EQ(f.payload_len, len);
      EXPECT_TRUE(std::equal(msg.begin() + j * kMtu, msg.begin() + j * kMtu + len,
                             c.frames[k].begin() + f.payload_offset));
      EXPECT_EQ(c.hints[k], c.frames[k].size()) << "the grant's size is not the frame's";
    }
    off += p.length + 4096;
  }
  EXPECT_EQ(k, c.pkts.size()) << "more frames than packets";
}

// One-packet WRITEs and SENDs of every kind the template builds (and the lengths at
// the one-packet boundary: 0, 1, MTU - 1, MTU, MTU + 1), solicited or not, between
// WRs the long way builds (no SGE, two SGEs, inline, SEND with invalidate).
TEST(EngineFreshMessage, EachFrameOfOnePacketMessagesIsTheLongWays) {
  Dut d;
  for (size_t i = 0; i < 64 * 1024; ++i) d.s.buf[i] = static_cast<uint8_t>(i * 7 + i / 251);
  const std::vector<Posted> wrs = {
      {IBV_WR_RDMA_WRITE, 100},
      {IBV_WR_RDMA_WRITE, 1},
      {IBV_WR_RDMA_WRITE, kMtu - 1, IBV_SEND_SOLICITED},
      {IBV_WR_RDMA_WRITE, kMtu},
      {IBV_WR_RDMA_WRITE, kMtu + 1},
      {IBV_WR_RDMA_WRITE, 0, 0, 1},  // an empty message of one SGE
      {IBV_WR_RDMA_WRITE, 0, 0, 0},  // and of none
      {IBV_WR_RDMA_WRITE_WITH_IMM, 300, IBV_SEND_SOLICITED},
      {IBV_WR_RDMA_WRITE_WITH_IMM, 2 * kMtu + 5},
      {IBV_WR_SEND, 200},
      {IBV_WR_SEND, kMtu, IBV_SEND_SOLICITED},
      {IBV_WR_SEND, kMtu + 1, IBV_SEND_SOLICITED},
      {IBV_WR_SEND_WITH_IMM, 17},
      {IBV_WR_SEND_WITH_IMM, 3 * kMtu, IBV_SEND_SOLICITED},
      {IBV_WR_SEND_WITH_INV, 50},
      {IBV_WR_SEND_WITH_INV, kMtu + 50},
      {IBV_WR_RDMA_WRITE, 700, 0, 2},
      {IBV_WR_SEND, 2 * kMtu, 0, 2},
      {IBV_WR_RDMA_WRITE, 64, IBV_SEND_INLINE},
      {IBV_WR_SEND, 0, IBV_SEND_SOLICITED, 1},
  };
  expect_frames(d, wrs, 0x7f0000001000, 0x5151);
}

// READ requests from the template: one for 0 bytes (no SGE), one of 100 bytes
// (solicited: the SE bit as the long way sets it), one of 3 MTUs + 5 bytes, each a
// RETH of the WR's address, key and length, no payload, no AckReq, each taking the
// PSNs of its responses.
TEST(EngineFreshMessage, ReadRequestsCarryTheirRethAndTakeTheirResponsesPsns) {
  Dut d;
  struct Read {
    uint32_t length;
    uint32_t flags;
  } reads[] = {{0, 0}, {100, IBV_SEND_SOLICITED}, {3 * kMtu + 5, 0}};
  uint64_t off = 0;
  std::vector<Sge> sges(3);
  for (size_t i = 0; i < 3; ++i) {
    sges[i] = Sge{d.s.iova + off, reads[i].length, d.s.keys.lkey};
    SendWr wr = one_sge_wr(sges[i], IBV_WR_RDMA_READ, 0x7f0000004000 + i * 0x10000, 0x4242, i);
    wr.sg_list = std::span(&sges[i], reads[i].length ? 1 : 0);
    wr.send_flags = reads[i].flags;
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, wr), 0);
    off += reads[i].length + 4096;
  }
  const Capture c = send_all(d);
  ASSERT_EQ(c.pkts.size(), 3u);
  uint32_t psn = 9000;
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const wire::RocePacket& f = c.pkts[i];
    EXPECT_EQ(f.opcode, wire::op::kRcReadRequest);
    EXPECT_EQ(f.psn.value(), psn);
    EXPECT_FALSE(f.ack_req);
    EXPECT_EQ(f.solicited, (reads[i].flags & IBV_SEND_SOLICITED) != 0 &&
                               wire::opcode_info(wire::op::kRcReadRequest).is_last());
    ASSERT_TRUE(f.reth.has_value());
    EXPECT_EQ(f.reth->va, 0x7f0000004000 + i * 0x10000);
    EXPECT_EQ(f.reth->rkey, 0x4242u);
    EXPECT_EQ(f.reth->dma_len, reads[i].length);
    EXPECT_EQ(f.payload_len, 0u);
    EXPECT_EQ(c.hints[i], c.frames[i].size());
    psn += std::max<uint32_t>(1, (reads[i].length + kMtu - 1) / kMtu);
  }
}

// Another region deregistered after the posts, before the frames are built: every
// packet's SGE is checked again (the long way), the same frames as a QP with no
// dereg gets from the template.
TEST(EngineFreshMessage, FramesAfterADeregOfAnotherRegionAreTheSame) {
  RcOptions o;
  o.max_send_wr = 4;
  Dut d(o);
  for (size_t i = 0; i < 16 * 1024; ++i) d.s.buf[i] = static_cast<uint8_t>(i * 3 + 1);
  const std::vector<Posted> wrs = {{IBV_WR_RDMA_WRITE, 500}, {IBV_WR_SEND_WITH_IMM, 900, IBV_SEND_SOLICITED},
                                   {IBV_WR_RDMA_WRITE, 2 * kMtu}};
  Region other = reg(d.net[1], d.s.pd, 4096, IBV_ACCESS_LOCAL_WRITE, 0x30000000);
  expect_frames(d, wrs, 0x7f0000001000, 0x77, [&] { ASSERT_EQ(d.net[1].dereg_mr(other.keys.lkey), 0); });
  Dut e(o);
  for (size_t i = 0; i < 16 * 1024; ++i) e.s.buf[i] = static_cast<uint8_t>(i * 3 + 1);
  expect_frames(e, wrs, 0x7f0000001000, 0x77);
}

// Atomics, a bind and LOCAL_INV carry their own fields from the post (copied for
// those opcodes only): a compare-and-swap's and a fetch-and-add's AtomicETH.
TEST(EngineFreshMessage, AtomicsCarryTheirOperandsAfterOtherWrsInTheSameSlots) {
  RcOptions o;
  o.max_send_wr = 4;  // slots reused often
  Dut d(o);
  const Sge sge{d.s.iova, 8, d.s.keys.lkey};
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    SendWr w = one_sge_wr(sge, IBV_WR_RDMA_WRITE, 0x7f0000001000, 0x99, 1);
    w.compare_add = 0xdead;  // not an atomic: not copied, not sent
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, w), 0);
    SendWr cas = one_sge_wr(sge, IBV_WR_ATOMIC_CMP_AND_SWP, 0x7f0000002000, 0x99, 2);
    cas.compare_add = 0x1111 + round;
    cas.swap = 0x2222 + round;
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, cas), 0);
    SendWr fa = one_sge_wr(sge, IBV_WR_ATOMIC_FETCH_AND_ADD, 0x7f0000003000, 0x99, 3);
    fa.compare_add = 0x3333 + round;
    fa.swap = 0x4444;  // not read for a fetch-and-add
    ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, fa), 0);
    const Capture c = send_all(d);
    ASSERT_EQ(c.pkts.size(), 3u);
    EXPECT_EQ(c.pkts[0].opcode, wire::op::kRcWriteOnly);
    ASSERT_TRUE(c.pkts[1].atomic.has_value());
    EXPECT_EQ(c.pkts[1].atomic->swap_add, 0x2222u + round);
    EXPECT_EQ(c.pkts[1].atomic->compare, 0x1111u + round);
    ASSERT_TRUE(c.pkts[2].atomic.has_value());
    EXPECT_EQ(c.pkts[2].atomic->swap_add, 0x3333u + round);
    EXPECT_EQ(c.pkts[2].atomic->compare, 0u);
    // Answer all three so the slots free up: an ACK of the WRITE, the atomics' ACKs.
    const uint32_t psn = c.pkts[0].psn.value();
    auto ack = d.spec(wire::op::kRcAck, psn);
    ack.aeth = wire::AethFields{0x1f, static_cast<uint32_t>(1 + 3 * round)};
    d.deliver(ack);
    for (int k = 1; k <= 2; ++k) {
      auto aa = d.spec(wire::op::kRcAtomicAck, psn + k);
      aa.aeth = wire::AethFields{0x1f, static_cast<uint32_t>(1 + 3 * round + k)};
      aa.atomic_ack = 5;
      d.deliver(aa);
    }
    d.drain();
    std::vector<ibv_wc> wc(8);
    ASSERT_EQ(d.net[1].poll_cq(d.s.scq, wc), 3);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(wc[k].status, IBV_WC_SUCCESS);
  }
}

}  // namespace
}  // namespace isoroce::transport::testing
