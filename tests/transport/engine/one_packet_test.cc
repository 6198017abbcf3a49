// Messages of one packet and the first packets of longer ones, the ninth engine
// pass (docs/performance.md "The engine, ninth pass"): a WRITE's FIRST or ONLY
// packet without immediate, in order and passing every check, takes one function of
// the steps' passing forms (rx_write_first); anything else goes the steps' way to
// its NAK. Each test sends such a packet that fails one check (or follows one that
// did) and checks the answer, the bytes and the state are what the steps give. Its
// ICRC is checked before anything is stored (its RETH names the target): a
// corrupted copy stores nothing.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) { return pattern_bytes(n, seed, 11); }

// A WRITE packet of `opcode` at PSN psn with payload `data`, a RETH (FIRST, ONLY)
// naming `reth_len` bytes at offset `off` of the DUT's buffer.
wire::FrameSpec write_packet(Dut& d, uint8_t opcode, uint32_t psn, uint64_t off, uint32_t reth_len,
                             std::span<const uint8_t> data) {
  auto f = d.spec(opcode, psn);
  if (wire::opcode_info(opcode).has(wire::kHdrReth)) f.reth = wire::RethFields{d.s.iova + off, d.s.keys.rkey, reth_len};
  f.payload = data;
  return f;
}

bool is_nak(const wire::RocePacket& p, uint8_t syn, uint32_t psn) {
  return p.opcode == wire::op::kRcAck && syndrome(p) == syn && p.psn.value() == psn;
}

constexpr uint8_t kNakSeq = 0x60, kNakInvalid = 0x61, kNakAccess = 0x62;

// A WRITE ONLY at the expected PSN while a WRITE (then, on another QP, a SEND) is
// in progress: an Invalid Request NAK (9.7.5.1.3), nothing stored.
TEST(EngineOnePacket, WriteOnlyInsideAnotherMessageIsAnInvalidRequest) {
  const std::vector<uint8_t> data = pattern(kMtu, 3);
  for (const bool send : {false, true}) {
    SCOPED_TRACE(send ? "inside a SEND" : "inside a WRITE");
    Dut d;
    d.open_message(send, 500, data);
    const auto out = d.receive(write_packet(d, wire::op::kRcWriteOnly, 501, 0, kMtu, data));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], kNakInvalid, 501));
    EXPECT_TRUE(all_equal(std::span(d.s.buf).first(kMtu), 0)) << "stored";
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// A WRITE ONLY right behind one that earned a fatal NAK (an R_Key no region has),
// before that NAK left, at the same (still expected) PSN: not stored (nothing is
// taken once a fatal NAK is queued, 9.9.2). And one after the QP was moved to ERR:
// not stored either.
TEST(EngineOnePacket, WriteOnlyBehindAFatalNakOrInErrStoresNothing) {
  const std::vector<uint8_t> data = pattern(kMtu, 5);
  for (const bool err : {false, true}) {
    SCOPED_TRACE(err ? "in ERR" : "behind a fatal NAK");
    Dut d;
    if (err) {
      d.move_to_err();
    } else {
      auto bad = write_packet(d, wire::op::kRcWriteOnly, 500, 0, kMtu, data);
      bad.reth->rkey ^= 0x5a5a00;
      d.deliver(bad);
    }
    d.deliver(write_packet(d, wire::op::kRcWriteOnly, 500, 0, kMtu, data));
    const auto out = d.drain();
    EXPECT_TRUE(all_equal(std::span(d.s.buf).first(kMtu), 0)) << "stored";
    if (!err) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(is_nak(out[0], kNakAccess, 500));
    } else {
      EXPECT_TRUE(out.empty());
    }
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// Lengths (9.7.5.1.4): a WRITE ONLY of two MTUs whose RETH says two MTUs; a WRITE
// FIRST of half an MTU; a WRITE FIRST of one MTU whose RETH announces less. Each
// an Invalid Request NAK, nothing stored.
TEST(EngineOnePacket, WriteFirstOrOnlyOfTheWrongLengthIsAnInvalidRequest) {
  const std::vector<uint8_t> data = pattern(2 * kMtu, 7);
  const std::span<const uint8_t> all(data);
  struct Case {
    const char* what;
    uint8_t opcode;
    uint32_t payload, reth;
  } cases[] = {
      {"ONLY longer than the MTU", wire::op::kRcWriteOnly, 2 * kMtu, 2 * kMtu},
      {"FIRST shorter than the MTU", wire::op::kRcWriteFirst, kMtu / 2, 3 * kMtu},
      {"FIRST longer than its RETH", wire::op::kRcWriteFirst, kMtu, kMtu / 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Dut d;
    const auto out = d.receive(write_packet(d, c.opcode, 500, 0, c.reth, all.first(c.payload)));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], kNakInvalid, 500));
    EXPECT_EQ(d.net[1].counters().rx_bad_length, 1u);
    EXPECT_TRUE(all_equal(std::span(d.s.buf).first(2 * kMtu), 0)) << "stored";
  }
}

// The QP's remote access made read-only (RTS -> RTS): a WRITE ONLY into a region
// that grants remote writes is a Remote Access Error NAK (10.6.3), nothing stored.
TEST(EngineOnePacket, WriteOnlyToAQpWithoutRemoteWriteIsARemoteAccessError) {
  Dut d;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(d.net[1].modify_qp(d.s.qpn, a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), 0);
  const std::vector<uint8_t> data = pattern(kMtu, 9);
  const auto out = d.receive(write_packet(d, wire::op::kRcWriteOnly, 500, 0, kMtu, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_nak(out[0], kNakAccess, 500));
  EXPECT_TRUE(all_equal(std::span(d.s.buf).first(kMtu), 0)) << "stored";
}

// A gap (NAKed), the missing WRITE ONLY in order (taken: it ends the gap), then a
// second gap: NAKed as well (one NAK per gap, 9.7.5.1.2).
TEST(EngineOnePacket, EachGapBetweenWriteOnlysIsNakedOnce) {
  Dut d;
  const std::vector<uint8_t> data = pattern(kMtu, 11);
  auto out = d.receive(write_packet(d, wire::op::kRcWriteOnly, 501, kMtu, kMtu, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_nak(out[0], kNakSeq, 500));
  EXPECT_TRUE(d.receive(write_packet(d, wire::op::kRcWriteOnly, 502, kMtu, kMtu, data)).empty()) << "same gap";
  auto f = write_packet(d, wire::op::kRcWriteOnly, 500, 0, kMtu, data);
  f.ack_req = false;
  EXPECT_TRUE(d.receive(f).empty());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  out = d.receive(write_packet(d, wire::op::kRcWriteOnly, 503, kMtu, kMtu, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_nak(out[0], kNakSeq, 501));
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(kMtu, kMtu), 0)) << "stored out of order";
}

// A WRITE of three MTUs: a corrupted FIRST (dropped, nothing stored, nothing
// answered), then the intact FIRST, MIDDLE, LAST: every byte in place, one ACK; then
// a WRITE ONLY with a corrupted RETH (its ICRC fails: nothing stored anywhere).
TEST(EngineOnePacket, CorruptedFirstOrOnlyStoresNothing) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu, 13);
  const std::span<const uint8_t> all(data);
  auto first = write_packet(d, wire::op::kRcWriteFirst, 500, 0, 3 * kMtu, all.first(kMtu));
  first.ack_req = false;
  EXPECT_TRUE(d.receive_corrupt(first, 100, 0x10).empty());
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
  EXPECT_TRUE(all_equal(std::span(d.s.buf).first(3 * kMtu), 0)) << "a corrupted FIRST stored";
  EXPECT_TRUE(d.receive(first).empty());
  auto mid = write_packet(d, wire::op::kRcWriteMiddle, 501, 0, 0, all.subspan(kMtu, kMtu));
  mid.ack_req = false;
  EXPECT_TRUE(d.receive(mid).empty());
  const auto out = d.receive(write_packet(d, wire::op::kRcWriteLast, 502, 0, 0, all.subspan(2 * kMtu)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);
  EXPECT_EQ(out[0].psn.value(), 502u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  // The RETH's va is bytes 16..23 after the BTH: flip one of them (the frame's byte
  // `from_end` bytes before its end, counted from the payload and ICRC after it).
  auto only = write_packet(d, wire::op::kRcWriteOnly, 503, 4 * kMtu, kMtu, all.first(kMtu));
  const size_t reth_from_end = wire::kIcrcBytes + kMtu + 16 - 3;
  EXPECT_TRUE(d.receive_corrupt(only, reth_from_end, 0x01).empty());
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 2u);
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(3 * kMtu), 0)) << "a corrupted ONLY stored";
}

// A WRITE of two MTUs whose LAST carries immediate data: the FIRST (no immediate)
// takes the one-function path, the LAST the steps and a receive; the receive's
// completion counts the whole WRITE (byte_len: what the FIRST's RETH announced).
TEST(EngineOnePacket, WriteFirstThenLastWithImmediateCompletesWithTheWholeLength) {
  Dut d;
  const Sge sge{d.s.iova + 65536, 64, d.s.keys.lkey};
  RecvWr rwr;
  rwr.wr_id = 77;
  rwr.sg_list = std::span(&sge, 1);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, rwr), 0);
  const std::vector<uint8_t> data = pattern(2 * kMtu, 17);
  const std::span<const uint8_t> all(data);
  auto first = write_packet(d, wire::op::kRcWriteFirst, 500, 0, 2 * kMtu, all.first(kMtu));
  first.ack_req = false;
  EXPECT_TRUE(d.receive(first).empty());
  auto last = write_packet(d, wire::op::kRcWriteLastImm, 501, 0, 0, all.subspan(kMtu));
  last.imm = 0x01020304;
  const auto out = d.receive(last);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(d.net[1].poll_cq(d.s.rcq, wc), 1);
  EXPECT_EQ(wc[0].wr_id, 77u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc[0].byte_len, 2 * kMtu);
}

// A WRITE of three MTUs into a type 2 window (a key the MR table does not have):
// its FIRST takes the one-function path, which keeps no MR for a window's key; the
// DUT invalidates the window (LOCAL_INV) before the MIDDLE arrives: the MIDDLE is a
// Remote Access Error NAK and stores nothing (each packet of a window's WRITE finds
// the window again).
TEST(EngineOnePacket, WriteIntoAWindowInvalidatedAfterItsFirstStoresNoMore) {
  RcOptions o;
  o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
  Dut d(o);
  const uint32_t key = d.bind_type2_window(IBV_ACCESS_REMOTE_WRITE, 4 * kMtu);
  ASSERT_NE(key, 0u);
  std::vector<ibv_wc> wc(4);
  const std::vector<uint8_t> data = pattern(3 * kMtu, 19);
  const std::span<const uint8_t> all(data);
  auto first = write_packet(d, wire::op::kRcWriteFirst, 500, 0, 3 * kMtu, all.first(kMtu));
  first.reth->rkey = key;
  first.ack_req = false;
  EXPECT_TRUE(d.receive(first).empty());
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + kMtu, d.s.buf.begin()));
  SendWr inv;
  inv.wr_id = 2;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = key;
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, inv), 0);
  d.drain();
  ASSERT_EQ(d.net[1].poll_cq(d.s.scq, wc), 1);
  ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
  const auto out = d.receive(write_packet(d, wire::op::kRcWriteMiddle, 501, 0, 0, all.subspan(kMtu, kMtu)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_nak(out[0], kNakAccess, 501));
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(kMtu, 2 * kMtu), 0)) << "stored through an invalidated window";
}

// A send queue of one slot, so every WR reuses the slot (and the L_Key check) of the
// one before: a WR with the same SGE as its slot's last is not checked again only
// while that check holds. Each WR posted from region `r` (one SGE: offset, length,
// key), acknowledged by the test if it went out; its completion status.
struct OneSlot {
  OneSlot() : d(options()) {}
  static RcOptions options() {
    RcOptions o;
    o.max_send_wr = 1;
    return o;
  }
  ibv_wc_status post(ibv_wr_opcode op, uint64_t iova, uint32_t len, uint32_t lkey) {
    const Sge sge{iova, len, lkey};
    EXPECT_EQ(d.net[1].post_send(d.now, d.s.qpn, one_sge_wr(sge, op, 0x7000000, 0x5555, ++wr_id)), 0);
    const auto sent = d.drain();
    if (!sent.empty()) {
      // (A READ here is one packet long.)
      auto ack = d.spec(op == IBV_WR_RDMA_READ ? wire::op::kRcReadResponseOnly : wire::op::kRcAck,
                        sent.back().psn.value());
      ack.ack_req = false;
      ack.aeth = wire::AethFields{0x1f, 1};
      std::vector<uint8_t> bytes(op == IBV_WR_RDMA_READ ? len : 0, 0x3c);
      ack.payload = bytes;
      d.receive(ack);
    }
    std::vector<ibv_wc> wc(4);
    const int n = d.net[1].poll_cq(d.s.scq, wc);
    EXPECT_EQ(n, 1);
    return n == 1 ? wc[0].status : IBV_WC_GENERAL_ERR;
  }
  Dut d;
  uint64_t wr_id = 0;
};

// The same SGE as the slot's last WRITE, in a region without local write access: a
// WRITE again passes, a READ into it (which needs local write) fails its check
// (IBV_WC_LOC_PROT_ERR).
TEST(EngineOnePacket, SameSgeForAReadAfterAWriteIsCheckedForLocalWrite) {
  OneSlot t;
  std::vector<uint8_t> buf(4096, 1);
  const uint64_t iova = 0x50000000 + (reinterpret_cast<uint64_t>(buf.data()) & 0xfff);
  const auto ro = t.d.net[1].reg_mr(t.d.s.pd, buf.data(), buf.size(), iova, 0);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, iova, 1024, ro.value().lkey), IBV_WC_SUCCESS);
  EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, iova, 1024, ro.value().lkey), IBV_WC_SUCCESS);
  EXPECT_EQ(t.post(IBV_WR_RDMA_READ, iova, 1024, ro.value().lkey), IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(all_equal(buf, 1)) << "a READ stored into a region without local write";
}

// The same SGE as the slot's last WR after its region was deregistered (and after
// another region was): checked again, IBV_WC_LOC_PROT_ERR for the gone one.
TEST(EngineOnePacket, SameSgeAfterADeregIsCheckedAgain) {
  OneSlot t;
  std::vector<uint8_t> a(4096, 1), b(4096, 2);
  const uint64_t ia = 0x50000000 + (reinterpret_cast<uint64_t>(a.data()) & 0xfff);
  const uint64_t ib = 0x60000000 + (reinterpret_cast<uint64_t>(b.data()) & 0xfff);
  const auto ka = t.d.net[1].reg_mr(t.d.s.pd, a.data(), a.size(), ia, IBV_ACCESS_LOCAL_WRITE);
  const auto kb = t.d.net[1].reg_mr(t.d.s.pd, b.data(), b.size(), ib, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(ka.ok() && kb.ok());
  EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, ia, 1024, ka.value().lkey), IBV_WC_SUCCESS);
  ASSERT_EQ(t.d.net[1].dereg_mr(kb.value().lkey), 0);
  EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, ia, 1024, ka.value().lkey), IBV_WC_SUCCESS) << "another region's dereg";
  EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, ia, 1024, ka.value().lkey), IBV_WC_SUCCESS);
  ASSERT_EQ(t.d.net[1].dereg_mr(ka.value().lkey), 0);
  EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, ia, 1024, ka.value().lkey), IBV_WC_LOC_PROT_ERR);
}

// An SGE that differs from the slot's last (checked, passing) one in its length,
// its address or its key, each making it leave its region: checked, and failed.
TEST(EngineOnePacket, ADifferentSgeInTheSlotIsChecked) {
  std::vector<uint8_t> a(4096, 1), b(4096, 2);
  struct Case {
    const char* what;
    int64_t addr_delta;
    uint32_t len;
    bool other_key;
  } cases[] = {{"longer", 0, 4096 + 64, false}, {"later", 2048, 4096, false}, {"another key", 0, 4096, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OneSlot t;
    const uint64_t ia = 0x50000000 + (reinterpret_cast<uint64_t>(a.data()) & 0xfff);
    const uint64_t ib = 0x60000000 + (reinterpret_cast<uint64_t>(b.data()) & 0xfff);
    const auto ka = t.d.net[1].reg_mr(t.d.s.pd, a.data(), a.size(), ia, IBV_ACCESS_LOCAL_WRITE);
    const auto kb = t.d.net[1].reg_mr(t.d.s.pd, b.data(), 1024, ib, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(ka.ok() && kb.ok());
    EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, ia, 4096, ka.value().lkey), IBV_WC_SUCCESS);
    EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, ia + c.addr_delta, c.len, c.other_key ? kb.value().lkey : ka.value().lkey),
              IBV_WC_LOC_PROT_ERR);
  }
}

// A WR of two SGEs whose first is the slot's last (one-SGE) WR's: checked and taken
// whole, its packet carrying both SGEs' bytes in order.
TEST(EngineOnePacket, TwoSgesStartingWithTheSlotsLastAreBothSent) {
  OneSlot t;
  Dut& d = t.d;
  std::fill(d.s.buf.begin(), d.s.buf.begin() + 512, 0x11);
  std::fill(d.s.buf.begin() + 4096, d.s.buf.begin() + 4096 + 512, 0x22);
  EXPECT_EQ(t.post(IBV_WR_RDMA_WRITE, d.s.iova, 512, d.s.keys.lkey), IBV_WC_SUCCESS);
  const Sge sges[2] = {{d.s.iova, 512, d.s.keys.lkey}, {d.s.iova + 4096, 512, d.s.keys.lkey}};
  SendWr wr;
  wr.wr_id = 9;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = sges;
  wr.remote_addr = 0x7000000;
  wr.rkey = 0x5555;
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, wr), 0);
  Capture c;
  for (int i = 0; i < 20 && c.pkts.empty(); ++i) {
    d.net[1].advance(d.now);
    d.net[1].transmit(d.now, c, 64);
    d.now += 1'000'000;
  }
  ASSERT_EQ(c.pkts.size(), 1u);
  ASSERT_EQ(c.pkts[0].payload_len, 1024u);
  const auto payload = std::span(c.frames[0]).subspan(c.pkts[0].payload_offset, 1024);
  EXPECT_TRUE(all_equal(payload.first(512), 0x11));
  EXPECT_TRUE(all_equal(payload.subspan(512), 0x22));
}

// A WRITE posted while the QP drains (SQD) waits (10.3.1: WRs not started are not
// sent in SQD), at its post and at every later transmit.
TEST(EngineOnePacket, WritePostedInSqdIsNotSent) {
  Dut d;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_SQD;
  ASSERT_EQ(d.net[1].modify_qp(d.s.qpn, a, IBV_QP_STATE), 0);
  const Sge sge{d.s.iova, 64, d.s.keys.lkey};
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, one_sge_wr(sge, IBV_WR_RDMA_WRITE, 0x7000000, 0x5555, 1)), 0);
  EXPECT_TRUE(d.drain().empty()) << "sent in SQD";
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, one_sge_wr(sge, IBV_WR_SEND, 0, 0, 2)), 0);
  EXPECT_TRUE(d.drain().empty()) << "sent in SQD";
  std::vector<ibv_wc> wc(4);
  EXPECT_EQ(d.net[1].poll_cq(d.s.scq, wc), 0);
}

// ---- a SEND's first or only packet (rx_send_first) ---------------------------

void post_recv(Dut& d, uint64_t off, uint32_t len, uint64_t wr_id, uint32_t lkey = 0) {
  const Sge sge{d.s.iova + off, len, lkey ? lkey : d.s.keys.lkey};
  RecvWr rwr;
  rwr.wr_id = wr_id;
  rwr.sg_list = std::span(&sge, 1);
  ASSERT_EQ(d.net[1].post_recv(d.s.qpn, rwr), 0);
}

std::vector<ibv_wc> recv_completions(Dut& d) {
  std::vector<ibv_wc> wc(8);
  const int n = d.net[1].poll_cq(d.s.rcq, wc);
  wc.resize(n > 0 ? n : 0);
  return wc;
}

wire::FrameSpec send_packet(Dut& d, uint8_t opcode, uint32_t psn, std::span<const uint8_t> data) {
  auto f = d.spec(opcode, psn);
  f.payload = data;
  return f;
}

// SEND ONLYs one by one: a gap (NAKed once, no receive taken), a corrupted copy of
// the missing one (dropped: no receive taken, nothing answered), the intact one (its
// receive completes with its bytes), a duplicate of it (ACKed again, no receive
// taken), an ONLY with immediate (its receive completes with the immediate), then a
// second gap (NAKed: the in-order ONLYs ended the first).
TEST(EngineOnePacket, SendOnlysTakeTheirReceivesOnlyInOrderAndIntact) {
  Dut d;
  post_recv(d, 0, 4096, 1);
  post_recv(d, 8192, 4096, 2);
  post_recv(d, 16384, 4096, 3);
  const std::vector<uint8_t> data = pattern(kMtu, 21), other = pattern(kMtu, 99);
  auto out = d.receive(send_packet(d, wire::op::kRcSendOnly, 501, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_nak(out[0], kNakSeq, 500));
  EXPECT_TRUE(d.receive(send_packet(d, wire::op::kRcSendOnly, 502, data)).empty()) << "same gap";
  EXPECT_TRUE(d.receive_corrupt(send_packet(d, wire::op::kRcSendOnly, 500, other), 40, 0x04).empty());
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
  EXPECT_TRUE(recv_completions(d).empty());
  out = d.receive(send_packet(d, wire::op::kRcSendOnly, 500, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);
  EXPECT_EQ(out[0].aeth->msn, 1u);
  auto wc = recv_completions(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].byte_len, kMtu);
  EXPECT_EQ(wc[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  out = d.receive(send_packet(d, wire::op::kRcSendOnly, 500, other));  // a duplicate
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);
  EXPECT_TRUE(recv_completions(d).empty());
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(8192, kMtu), 0)) << "a duplicate took a receive";
  auto imm = send_packet(d, wire::op::kRcSendOnlyImm, 501, std::span(other).first(300));
  imm.imm = 0x0a0b0c0d;
  out = d.receive(imm);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].aeth->msn, 2u);
  wc = recv_completions(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].byte_len, 300u);
  EXPECT_NE(wc[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(wc[0].imm_data, htonl(0x0a0b0c0d));
  EXPECT_TRUE(std::equal(other.begin(), other.begin() + 300, d.s.buf.begin() + 8192));
  out = d.receive(send_packet(d, wire::op::kRcSendOnly, 503, data));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_nak(out[0], kNakSeq, 502));
  // To ERR: only the receive never taken is flushed (the completed ones are done).
  d.move_to_err();
  wc = recv_completions(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
}

// A SEND ONLY with invalidate of 1 KB (its ICRC checked at the copy) naming a type 2
// window this QP bound: the steps' way (the window is invalidated, 10.6.7.2.4), so
// the receive completes with IBV_WC_WITH_INV and the key, and a WRITE through the
// key afterwards is a Remote Access Error.
TEST(EngineOnePacket, SendOnlyWithInvalidateInvalidatesTheWindow) {
  RcOptions o;
  o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
  Dut d(o);
  const uint32_t key = d.bind_type2_window(IBV_ACCESS_REMOTE_WRITE, 4 * kMtu);
  ASSERT_NE(key, 0u);
  post_recv(d, 65536, 4096, 8);
  const std::vector<uint8_t> data = pattern(kMtu, 31);
  auto inv = send_packet(d, wire::op::kRcSendOnlyInv, 500, data);
  inv.ieth = key;
  const auto out = d.receive(inv);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(syndrome(out[0]), 0x1f);
  const auto rc = recv_completions(d);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_NE(rc[0].wc_flags & IBV_WC_WITH_INV, 0u);
  EXPECT_EQ(rc[0].invalidated_rkey, key);
  auto w = write_packet(d, wire::op::kRcWriteOnly, 501, 0, 64, std::span(data).first(64));
  w.reth->rkey = key;
  const auto nak = d.receive(w);
  ASSERT_EQ(nak.size(), 1u);
  EXPECT_TRUE(is_nak(nak[0], kNakAccess, 501));
}

// A SEND FIRST in order opens the message (its MIDDLE and LAST fill the same
// receive, which completes once with every byte); lengths: a FIRST of half an MTU
// and an ONLY of two MTUs are Invalid Requests and take no receive.
TEST(EngineOnePacket, SendFirstOpensTheMessageAndWrongLengthsAreInvalid) {
  const std::vector<uint8_t> data = pattern(3 * kMtu, 23);
  const std::span<const uint8_t> all(data);
  {
    Dut d;
    post_recv(d, 0, 4 * kMtu, 7);
    auto first = send_packet(d, wire::op::kRcSendFirst, 500, all.first(kMtu));
    first.ack_req = false;
    EXPECT_TRUE(d.receive(first).empty());
    EXPECT_TRUE(recv_completions(d).empty());
    auto mid = send_packet(d, wire::op::kRcSendMiddle, 501, all.subspan(kMtu, kMtu));
    mid.ack_req = false;
    EXPECT_TRUE(d.receive(mid).empty());
    EXPECT_EQ(d.receive(send_packet(d, wire::op::kRcSendLast, 502, all.subspan(2 * kMtu))).size(), 1u);
    const auto wc = recv_completions(d);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 7u);
    EXPECT_EQ(wc[0].byte_len, 3 * kMtu);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  }
  struct Case {
    const char* what;
    uint8_t opcode;
    uint32_t len;
  } cases[] = {{"FIRST of half an MTU", wire::op::kRcSendFirst, kMtu / 2},
               {"ONLY of two MTUs", wire::op::kRcSendOnly, 2 * kMtu}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Dut d;
    post_recv(d, 0, 4 * kMtu, 7);
    const auto out = d.receive(send_packet(d, c.opcode, 500, all.first(c.len)));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], kNakInvalid, 500));
    EXPECT_EQ(d.net[1].counters().rx_bad_length, 1u);
    EXPECT_TRUE(all_equal(std::span(d.s.buf).first(4 * kMtu), 0)) << "stored";
  }
}

// A SEND ONLY inside a WRITE in progress: an Invalid Request (9.7.5.1.3), the
// receive not taken. One behind a fatal NAK not yet sent, and one in ERR: not taken.
TEST(EngineOnePacket, SendOnlyOutOfSequenceBehindAFatalNakOrInErrIsNotTaken) {
  const std::vector<uint8_t> data = pattern(kMtu, 25);
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(k == 0 ? "inside a WRITE" : k == 1 ? "behind a fatal NAK" : "in ERR");
    Dut d;
    post_recv(d, 8192, 4096, 1);
    uint32_t psn = 500;
    if (k == 0) {
      auto first = write_packet(d, wire::op::kRcWriteFirst, 500, 0, 3 * kMtu, data);
      first.ack_req = false;
      EXPECT_TRUE(d.receive(first).empty());
      psn = 501;
    } else if (k == 1) {
      d.deliver(send_packet(d, wire::op::kRcSendFirst, 500, std::span(data).first(kMtu / 2)));  // too short
    } else {
      d.move_to_err();
    }
    d.deliver(send_packet(d, wire::op::kRcSendOnly, psn, data));
    const auto out = d.drain();
    EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(8192, kMtu), 0)) << "stored";
    const auto wc = recv_completions(d);
    if (k == 2) {
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    } else {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(is_nak(out[0], kNakInvalid, k == 0 ? 501 : 500));
    }
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// The receive a SEND ONLY would take: none (an RNR NAK, then the ONLY again once one
// is posted: taken), too small (IBV_WC_LOC_LEN_ERR, an Invalid Request NAK), or in a
// region deregistered since its post (IBV_WC_LOC_PROT_ERR, a Remote Operational
// Error NAK).
TEST(EngineOnePacket, SendOnlyWithoutAFittingReceive) {
  const std::vector<uint8_t> data = pattern(kMtu, 27);
  {
    Dut d;
    auto out = d.receive(send_packet(d, wire::op::kRcSendOnly, 500, data));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(syndrome(out[0]) >> 5, 1) << "an RNR NAK";
    post_recv(d, 0, 4096, 1);
    out = d.receive(send_packet(d, wire::op::kRcSendOnly, 500, data));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(syndrome(out[0]), 0x1f);
    ASSERT_EQ(recv_completions(d).size(), 1u);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin()));
  }
  {
    Dut d;
    post_recv(d, 0, kMtu - 1, 1);
    const auto out = d.receive(send_packet(d, wire::op::kRcSendOnly, 500, data));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], kNakInvalid, 500));
    const auto wc = recv_completions(d);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR);
    EXPECT_EQ(d.s.buf[kMtu - 1], 0) << "stored past the receive";
  }
  {
    Dut d;
    std::vector<uint8_t> dst(4096, 0);
    const uint64_t iova = 0x50000000 + (reinterpret_cast<uint64_t>(dst.data()) & 0xfff);
    const auto k = d.net[1].reg_mr(d.s.pd, dst.data(), dst.size(), iova, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(k.ok());
    const Sge sge{iova, 4096, k.value().lkey};
    RecvWr rwr;
    rwr.wr_id = 5;
    rwr.sg_list = std::span(&sge, 1);
    ASSERT_EQ(d.net[1].post_recv(d.s.qpn, rwr), 0);
    ASSERT_EQ(d.net[1].dereg_mr(k.value().lkey), 0);
    const auto out = d.receive(send_packet(d, wire::op::kRcSendOnly, 500, data));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], 0x63, 500)) << "a Remote Operational Error NAK";
    const auto wc = recv_completions(d);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
    EXPECT_TRUE(all_equal(dst, 0)) << "stored into a deregistered region";
  }
}

// An RC QP on an SRQ moved to ERR: its receives stay in the SRQ (ERR flushes the
// QP's own receive queue, not a shared one), and a SEND ONLY that arrives takes
// none of them and stores nothing (10.3.1: a QP in ERR takes no request).
TEST(EngineOnePacket, SendOnlyToAQpInErrTakesNoReceiveOfItsSrq) {
  Dut d;
  Side b;
  b.pd = d.s.pd;
  b.scq = d.net[1].create_cq(64).value();
  b.rcq = d.net[1].create_cq(64).value();
  ibv_srq_attr sa{};
  sa.max_wr = 16;
  sa.max_sge = 1;
  auto srq = d.net[1].create_srq(b.pd, sa);
  ASSERT_TRUE(srq.ok());
  QpCreate c;
  c.pd = b.pd;
  c.send_cq = b.scq;
  c.recv_cq = b.rcq;
  c.use_srq = true;
  c.srq = srq.value();
  c.init.cap.max_send_wr = 16;
  c.init.cap.max_send_sge = 1;
  b.qpn = d.net[1].create_qp(c).value();
  connect(d.net[1], b, d.peer, d.net[0].config().ip, d.opt, 9000, 500);
  const Sge sge{d.s.iova + 8192, 4096, d.s.keys.lkey};
  RecvWr rwr;
  rwr.wr_id = 3;
  rwr.sg_list = std::span(&sge, 1);
  ASSERT_EQ(d.net[1].post_srq_recv(srq.value(), rwr), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(d.net[1].modify_qp(b.qpn, a, IBV_QP_STATE), 0);
  const std::vector<uint8_t> data = pattern(kMtu, 29);
  auto f = send_packet(d, wire::op::kRcSendOnly, 500, data);
  f.dest_qp = b.qpn;
  d.deliver(f);
  d.drain();
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(8192, kMtu), 0)) << "stored in ERR";
  std::vector<ibv_wc> wc(4);
  EXPECT_EQ(d.net[1].poll_cq(b.rcq, wc), 0) << "a receive of the SRQ taken in ERR";
}

}  // namespace
}  // namespace isoroce::transport::testing
