// READ requests at the responder, the tenth engine pass (docs/performance.md "The
// engine, tenth pass"): a READ request in order, passing every check with a
// responder resource free, takes one function of the steps' passing forms
// (rx_read_request); anything else goes the steps' way to its NAK or drop. Each test
// sends a READ that fails one check (or follows one that did) and checks that the
// answer, the responses and the state are what the steps give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;
constexpr uint8_t kNakSeq = 0x60, kNakInvalid = 0x61, kNakAccess = 0x62;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) { return pattern_bytes(n, seed, 7); }

// A READ request for `len` bytes at offset `off` of the DUT's buffer (key: its MR's
// R_Key unless given).
wire::FrameSpec read_request(Dut& d, uint32_t psn, uint64_t off, uint32_t len, uint32_t rkey = 0) {
  auto f = d.spec(wire::op::kRcReadRequest, psn);
  f.ack_req = false;
  f.reth = wire::RethFields{d.s.iova + off, rkey != 0 ? rkey : d.s.keys.rkey, len};
  return f;
}

bool is_nak(const wire::RocePacket& p, uint8_t syn, uint32_t psn) {
  return p.opcode == wire::op::kRcAck && syndrome(p) == syn && p.psn.value() == psn;
}

// What the DUT sends in the next 1 ms (Dut::drain), frames too.
Capture drain(Dut& d) {
  Capture c;
  for (int i = 0; i < 100; ++i) {
    d.net[1].advance(d.now);
    d.net[1].transmit(d.now, c, 64);
    const Picos next = d.net[1].next_deadline();
    if (next == sched::kNever || next > d.now + 1'000'000'000) break;
    d.now = std::max(d.now, next);
  }
  return c;
}

Capture receive(Dut& d, const wire::FrameSpec& f) {
  d.deliver(f);
  return drain(d);
}

// The responses c holds from index `from` are those of a READ of `len` bytes at
// offset `off` of `src` (the DUT's buffer as the test filled it) starting at PSN
// `psn`: opcodes, PSNs, lengths, bytes, and the last one's MSN.
void expect_read(const Capture& c, size_t from, uint32_t psn, std::span<const uint8_t> src, uint64_t off,
                 uint32_t len, uint32_t msn) {
  expect_read_responses(c, from, psn, src.subspan(off, len), kMtu);
  const size_t n = std::max<size_t>(1, (len + kMtu - 1) / kMtu);
  ASSERT_GE(c.pkts.size(), from + n);
  const wire::RocePacket& last = c.pkts[from + n - 1];
  ASSERT_TRUE(last.aeth.has_value());
  EXPECT_EQ(last.aeth->msn, msn);
}

// Three READs in order (one MTU, three MTUs and 5 bytes, none), then a WRITE ONLY at
// the PSN after them: every response's opcode, PSN, length, bytes and MSN, and the
// WRITE acknowledged at its PSN (each READ moved the expected PSN by its responses).
TEST(EngineReadRequest, ReadsInOrderAreAnsweredAndMoveThePsnByTheirResponses) {
  Dut d;
  const std::vector<uint8_t> data = pattern(8 * kMtu, 3);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  Capture c = receive(d, read_request(d, 500, 100, kMtu));
  ASSERT_EQ(c.pkts.size(), 1u);
  expect_read(c, 0, 500, data, 100, kMtu, 1);
  c = receive(d, read_request(d, 501, 2 * kMtu + 1, 3 * kMtu + 5));
  ASSERT_EQ(c.pkts.size(), 4u);
  expect_read(c, 0, 501, data, 2 * kMtu + 1, 3 * kMtu + 5, 2);
  c = receive(d, read_request(d, 505, 0, 0));
  ASSERT_EQ(c.pkts.size(), 1u);
  expect_read(c, 0, 505, data, 0, 0, 3);
  const std::vector<uint8_t> w = pattern(64, 9);
  c = receive(d, d.write_only(506, 7 * kMtu, w));
  ASSERT_EQ(c.pkts.size(), 1u);
  EXPECT_EQ(c.pkts[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(syndrome(c.pkts[0]), 0x1f);
  EXPECT_EQ(c.pkts[0].psn.value(), 506u);
  EXPECT_EQ(c.pkts[0].aeth->msn, 4u);
  EXPECT_EQ(d.net[1].counters().rx_duplicates, 0u);
  EXPECT_EQ(d.net[1].counters().rx_out_of_sequence, 0u);
}

// A gap (NAKed once: the second READ past it is not), the missing READ in order
// (answered: it ends the gap), then a second gap: NAKed as well (one NAK per gap,
// 9.7.5.1.2); then a duplicate of the answered READ: answered again (9.7.5.1.1).
TEST(EngineReadRequest, EachGapBetweenReadsIsNakedOnceAndADuplicateIsAnsweredAgain) {
  Dut d;
  const std::vector<uint8_t> data = pattern(4 * kMtu, 5);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  Capture c = receive(d, read_request(d, 502, 0, kMtu));
  ASSERT_EQ(c.pkts.size(), 1u);
  EXPECT_TRUE(is_nak(c.pkts[0], kNakSeq, 500));
  EXPECT_TRUE(receive(d, read_request(d, 503, 0, kMtu)).pkts.empty()) << "same gap";
  c = receive(d, read_request(d, 500, kMtu, 2 * kMtu));
  ASSERT_EQ(c.pkts.size(), 2u);
  expect_read(c, 0, 500, data, kMtu, 2 * kMtu, 1);
  c = receive(d, read_request(d, 504, 0, kMtu));
  ASSERT_EQ(c.pkts.size(), 1u);
  EXPECT_TRUE(is_nak(c.pkts[0], kNakSeq, 502));
  c = receive(d, read_request(d, 500, kMtu, 2 * kMtu));
  ASSERT_EQ(c.pkts.size(), 2u);
  expect_read(c, 0, 500, data, kMtu, 2 * kMtu, 1);
  EXPECT_EQ(d.net[1].counters().rx_duplicates, 1u);
  // The expected PSN is still 502: a READ there is answered.
  c = receive(d, read_request(d, 502, 0, kMtu));
  ASSERT_EQ(c.pkts.size(), 1u);
  expect_read(c, 0, 502, data, 0, kMtu, 2);
}

// A READ at the expected PSN while a WRITE (then, on another QP, a SEND) is in
// progress: an Invalid Request NAK (9.7.5.1.3), no response, the QP in ERR.
TEST(EngineReadRequest, ReadInsideAnotherMessageIsAnInvalidRequest) {
  const std::vector<uint8_t> data = pattern(kMtu, 3);
  for (const bool send : {false, true}) {
    SCOPED_TRACE(send ? "inside a SEND" : "inside a WRITE");
    Dut d;
    d.open_message(send, 500, data);
    const auto out = d.receive(read_request(d, 501, 0, kMtu));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], kNakInvalid, 501));
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// A READ right behind one that earned a fatal NAK (an R_Key no region has), before
// that NAK left, at the same (still expected) PSN: not answered (nothing is taken
// once a fatal NAK is queued, 9.9.2). And one after the QP was moved to ERR.
TEST(EngineReadRequest, ReadBehindAFatalNakOrInErrIsNotAnswered) {
  for (const bool err : {false, true}) {
    SCOPED_TRACE(err ? "in ERR" : "behind a fatal NAK");
    Dut d;
    if (err) {
      d.move_to_err();
    } else {
      d.deliver(read_request(d, 500, 0, kMtu, d.s.keys.rkey ^ 0x5a5a00));
    }
    d.deliver(read_request(d, 500, 0, kMtu));
    const auto out = d.drain();
    if (!err) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(is_nak(out[0], kNakAccess, 500));
      EXPECT_EQ(out[0].aeth->msn, 0u) << "the READ behind the NAK was executed";
    } else {
      EXPECT_TRUE(out.empty());
    }
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// Lengths (9.7.5.1.4): a READ asking for 2^31 + 1 bytes of a region that claims 4 GB
// (nothing of it is read) is an Invalid Request, its R_Key good for the range; one
// for the last byte of a 16 KB region and one for the whole region are answered.
TEST(EngineReadRequest, ReadLongerThanAMessageIsAnInvalidRequest) {
  {
    Dut d;
    std::vector<uint8_t> page(4096, 0);
    auto mr = d.net[1].reg_mr(d.s.pd, page.data(), 1ull << 32, reinterpret_cast<uint64_t>(page.data()),
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_TRUE(mr.ok());
    auto f = d.spec(wire::op::kRcReadRequest, 500);
    f.reth = wire::RethFields{reinterpret_cast<uint64_t>(page.data()), mr.value().rkey, (1u << 31) + 1};
    const auto out = d.receive(f);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], kNakInvalid, 500));
    EXPECT_EQ(d.net[1].counters().rx_bad_length, 1u);
  }
  RcOptions o;
  o.buf_bytes = 16 * kMtu;
  Dut d(o);
  const uint32_t size = static_cast<uint32_t>(d.s.buf.size());
  const std::vector<uint8_t> data = pattern(size, 17);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  Capture c = receive(d, read_request(d, 500, size - 1, 1));
  ASSERT_EQ(c.pkts.size(), 1u);
  expect_read(c, 0, 500, data, size - 1, 1, 1);
  c = receive(d, read_request(d, 501, 0, size));
  ASSERT_EQ(c.pkts.size(), size / kMtu);
  expect_read(c, 0, 501, data, 0, size, 2);
}

// The R_Key's checks (9.7.5.1.5, 10.6.3): a QP without remote read access, a key no
// region has, a range one byte past the region's end: each a Remote Access Error
// NAK, no response, the QP in ERR.
TEST(EngineReadRequest, ReadWithoutAccessOrOutsideItsRegionIsARemoteAccessError) {
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(k == 0 ? "no remote read" : k == 1 ? "unknown key" : "past the end");
    Dut d;
    if (k == 0) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_RTS;
      a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
      ASSERT_EQ(d.net[1].modify_qp(d.s.qpn, a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), 0);
    }
    const uint64_t size = d.s.buf.size();
    const auto f = k == 0   ? read_request(d, 500, 0, kMtu)
                   : k == 1 ? read_request(d, 500, 0, kMtu, d.s.keys.rkey ^ 0x5a5a00)
                            : read_request(d, 500, size - kMtu + 1, kMtu);
    const auto out = d.receive(f);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(is_nak(out[0], kNakAccess, 500));
    EXPECT_EQ(d.net[1].counters().rx_bad_rkey, 1u);
    EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
  }
}

// With max_dest_rd_atomic 1 (two responder resources), three READs arrive before any
// response left: the third finds no resource and is dropped without a NAK or a
// change of the expected PSN (9.7.5.1.5); once the first two were answered it is
// taken when sent again. Then 9 more, each answered before the next: the resources
// are used round the ring.
TEST(EngineReadRequest, ReadWithoutAFreeResourceIsDroppedUntilOneIsFree) {
  RcOptions o;
  o.max_rd_atomic = 1;
  Dut d(o);
  const std::vector<uint8_t> data = pattern(16 * kMtu, 11);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  d.deliver(read_request(d, 500, 0, 2 * kMtu));
  d.deliver(read_request(d, 502, 2 * kMtu, kMtu));
  d.deliver(read_request(d, 503, 3 * kMtu, kMtu));
  EXPECT_EQ(d.net[1].counters().rx_no_resource, 1u);
  Capture c = drain(d);
  ASSERT_EQ(c.pkts.size(), 3u);
  expect_read(c, 0, 500, data, 0, 2 * kMtu, 2);
  expect_read(c, 2, 502, data, 2 * kMtu, kMtu, 2);
  c = receive(d, read_request(d, 503, 3 * kMtu, kMtu));
  ASSERT_EQ(c.pkts.size(), 1u);
  expect_read(c, 0, 503, data, 3 * kMtu, kMtu, 3);
  for (uint32_t i = 0; i < 9; ++i) {
    SCOPED_TRACE(i);
    c = receive(d, read_request(d, 504 + i, (4 + i) * kMtu, kMtu));
    ASSERT_EQ(c.pkts.size(), 1u);
    expect_read(c, 0, 504 + i, data, (4 + i) * kMtu, kMtu, 4 + i);
  }
  EXPECT_EQ(d.net[1].counters().rx_no_resource, 1u);
}

// With two responder resources: A (resource 0) answered; B of 8 MTUs (resource 1)
// with one response sent; C (resource 0) queued behind it; then a duplicate of B
// (9.7.5.1.1) cancels C's responses (its resource free again) and restarts B in
// place. The next READ, D, finds resource 1 (where the round robin stands) busy and
// takes resource 0 round the ring: B's responses from its start, then D's.
TEST(EngineReadRequest, ResourcesAreTakenRoundTheRing) {
  RcOptions o;
  o.max_rd_atomic = 1;
  Dut d(o);
  const std::vector<uint8_t> data = pattern(16 * kMtu, 21);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  Capture c = receive(d, read_request(d, 500, 0, kMtu));
  ASSERT_EQ(c.pkts.size(), 1u);
  d.deliver(read_request(d, 501, kMtu, 8 * kMtu));
  Capture one;
  d.net[1].advance(d.now);
  d.net[1].transmit(d.now, one, 1);
  ASSERT_EQ(one.pkts.size(), 1u);
  EXPECT_EQ(one.pkts[0].psn.value(), 501u);
  d.deliver(read_request(d, 509, 9 * kMtu, kMtu));
  d.deliver(read_request(d, 501, kMtu, 8 * kMtu));
  EXPECT_EQ(d.net[1].counters().responses_cancelled, 1u);
  d.deliver(read_request(d, 510, 10 * kMtu, kMtu));
  EXPECT_EQ(d.net[1].counters().rx_no_resource, 0u);
  c = drain(d);
  ASSERT_EQ(c.pkts.size(), 9u);
  expect_read(c, 0, 501, data, kMtu, 8 * kMtu, 4);
  expect_read(c, 8, 510, data, 10 * kMtu, kMtu, 4);
}

// A READ through a type 2 window (its key no MR's): answered with the window's bytes,
// and one past the window's range is a Remote Access Error.
TEST(EngineReadRequest, ReadThroughAWindowIsAnsweredWithinItsRange) {
  RcOptions o;
  o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
  Dut d(o);
  const std::vector<uint8_t> data = pattern(4 * kMtu, 13);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  const uint32_t key = d.bind_type2_window(IBV_ACCESS_REMOTE_READ, 2 * kMtu);
  ASSERT_NE(key, 0u);
  Capture c = receive(d, read_request(d, 500, 0, 2 * kMtu, key));
  ASSERT_EQ(c.pkts.size(), 2u);
  expect_read(c, 0, 500, data, 0, 2 * kMtu, 1);
  c = receive(d, read_request(d, 502, kMtu, kMtu + 1, key));
  ASSERT_EQ(c.pkts.size(), 1u);
  EXPECT_TRUE(is_nak(c.pkts[0], kNakAccess, 502));
}

}  // namespace
}  // namespace isoroce::transport::testing
