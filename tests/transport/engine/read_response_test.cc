// READ responses on both sides, the ninth engine pass (docs/performance.md "The
// engine, ninth pass"): the responder derives a READ's next response from the one
// just granted within a scheduler dequeue (next_response), and the requester takes
// an in-order response copied straight into the READ's buffer without the
// completer's steps, the last one too (on_response), restarting the ACK timer inline
// on each one. Each test checks what the long way gives: opcodes, PSNs, lengths and
// bytes of the responses; completions, what is stored, NAKs, retransmissions and the
// timer (it measures time without progress, IBTA 9.7.6.1.3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tests/transport/engine/dut.h"

namespace isoroce::transport::testing {
namespace {

constexpr uint32_t kMtu = 1024;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) { return pattern_bytes(n, seed, 13); }

// A scheduler lookahead of 10 us: one dequeue grants several packets of a QP, each
// after the first derived from the grant before (with none, every packet of a
// dequeue of one is peeked afresh).
EngineConfig bursts() {
  EngineConfig c;
  c.sched_lookahead = 10'000'000;
  return c;
}

// The frame of f delivered to the DUT at `when` (nothing transmitted); `flip`
// XORed into the byte 50 bytes before its end (0: intact).
void deliver(Dut& d, const wire::FrameSpec& f, Picos when, uint8_t flip = 0) {
  std::vector<uint8_t> v(wire::frame_size(f));
  ASSERT_TRUE(wire::build_frame(f, v).ok());
  if (flip != 0) v[v.size() - 50] ^= flip;
  d.now = std::max(d.now, when);
  d.net[1].receive(d.now, v);
}

// One transmit of at most `max` frames at the DUT's time (timers due run first).
void transmit(Dut& d, Capture& c, size_t max) {
  d.net[1].advance(d.now);
  d.net[1].transmit(d.now, c, max);
}

// Transmits until `n` frames were sent or 200 steps from deadline to deadline, none
// further than 1 ms away (an ACK timer's is not reached).
void transmit_until(Dut& d, Capture& c, size_t n) {
  for (int i = 0; i < 200 && c.pkts.size() < n; ++i) {
    transmit(d, c, 64);
    const Picos next = d.net[1].next_deadline();
    if (next == sched::kNever || next > d.now + 1'000'000'000) break;
    d.now = std::max(d.now, next);
  }
}

std::vector<ibv_wc> poll(Dut& d) {
  std::vector<ibv_wc> wc(16);
  const int n = d.net[1].poll_cq(d.s.scq, wc);
  wc.resize(n > 0 ? n : 0);
  return wc;
}

// A READ request from the test for `len` bytes of the DUT's memory at iova `va`.
wire::FrameSpec read_request(Dut& d, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len) {
  auto f = d.spec(wire::op::kRcReadRequest, psn);
  f.reth = wire::RethFields{va, rkey, len};
  return f;
}

// expect_read_responses (dut.h) in this file's MTU.
void expect_responses(const Capture& c, size_t from, uint32_t psn, std::span<const uint8_t> src,
                      size_t count = 0) {
  expect_read_responses(c, from, psn, src, kMtu, count);
}

// ---- the responder: responses derived within a dequeue ----------------------

// Three READs of 10 MTUs and 100 bytes, of two MTUs and of one MTU, answered with
// a scheduler that grants bursts: every response's opcode, PSN, length and bytes,
// and each grant the size of its frame.
TEST(EngineReadResponse, ResponsesOfABurstCarryTheirOpcodePsnLengthAndBytes) {
  Dut d({}, bursts());
  const std::vector<uint8_t> data = pattern(16 * kMtu, 5);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  const std::span<const uint8_t> all(data);
  const uint32_t lens[3] = {10 * kMtu + 100, 2 * kMtu, kMtu};
  const uint64_t at[3] = {0, 11 * kMtu, 13 * kMtu};
  uint32_t psn = 500;
  for (int k = 0; k < 3; ++k) {
    deliver(d, read_request(d, psn, d.s.iova + at[k], d.s.keys.rkey, lens[k]), d.now + 1'000'000);
    psn += std::max<uint32_t>(1, (lens[k] + kMtu - 1) / kMtu);
  }
  Capture c;
  transmit_until(d, c, 14);
  ASSERT_EQ(c.pkts.size(), 14u);
  expect_responses(c, 0, 500, all.subspan(at[0], lens[0]));
  expect_responses(c, 11, 511, all.subspan(at[1], lens[1]));
  expect_responses(c, 13, 513, all.subspan(at[2], lens[2]));
  // The last response of each READ carries the AETH (the MSN as of its sending: all
  // three READs were in by then).
  for (const size_t i : {10, 12, 13}) {
    ASSERT_TRUE(c.pkts[i].aeth.has_value()) << i;
    EXPECT_EQ(c.pkts[i].aeth->msn, 3u);
  }
  EXPECT_EQ(d.net[1].counters().rx_duplicates, 0u);
}

// A READ of 8 MTUs, three responses sent in one dequeue, then the requester asks
// again from PSN 503 (a duplicate READ for the rest: the resource restarts in
// place): the next dequeue sends 503-507 from the asked range as FIRST, MIDDLE x3,
// LAST, never a response of the old run past 502.
TEST(EngineReadResponse, DuplicateReadMidResponseRestartsFromTheAskedPsn) {
  Dut d({}, bursts());
  const std::vector<uint8_t> data = pattern(8 * kMtu, 9);
  std::copy(data.begin(), data.end(), d.s.buf.begin());
  deliver(d, read_request(d, 500, d.s.iova, d.s.keys.rkey, 8 * kMtu), 1'000'000);
  Capture c;
  transmit(d, c, 3);
  ASSERT_EQ(c.pkts.size(), 3u);
  expect_responses(c, 0, 500, data, 3);
  deliver(d, read_request(d, 503, d.s.iova + 3 * kMtu, d.s.keys.rkey, 5 * kMtu), d.now + 1'000'000);
  Capture again;
  transmit_until(d, again, 5);
  ASSERT_EQ(again.pkts.size(), 5u);
  expect_responses(again, 0, 503, std::span(data).subspan(3 * kMtu));
  EXPECT_EQ(d.net[1].counters().rx_duplicates, 1u);
  // Nothing more: the restarted run ended the READ.
  Capture rest;
  transmit_until(d, rest, 1);
  EXPECT_TRUE(rest.pkts.empty());
}

// The region a READ names deregistered after three responses of a burst: the rest
// of the READ is a Remote Access Error NAK (9.9.3), the QP goes to ERR, and no
// response carries the bytes written after the dereg.
TEST(EngineReadResponse, RegionDeregisteredMidBurstIsARemoteAccessError) {
  Dut d({}, bursts());
  std::vector<uint8_t> src(8 * kMtu, 0x66);
  const uint64_t iova = 0x30000000 + (reinterpret_cast<uint64_t>(src.data()) & 0xfff);
  const auto keys = d.net[1].reg_mr(d.s.pd, src.data(), src.size(), iova,
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_TRUE(keys.ok());
  deliver(d, read_request(d, 500, iova, keys.value().rkey, 8 * kMtu), 1'000'000);
  Capture c;
  transmit(d, c, 3);
  ASSERT_EQ(c.pkts.size(), 3u);
  ASSERT_EQ(d.net[1].dereg_mr(keys.value().lkey), 0);
  std::fill(src.begin(), src.end(), 0xee);
  transmit_until(d, c, 8);
  ASSERT_EQ(c.pkts.size(), 4u);
  EXPECT_EQ(c.pkts[3].opcode, wire::op::kRcAck);
  EXPECT_EQ(syndrome(c.pkts[3]), 0x62) << "a NAK, Remote Access Error";
  EXPECT_EQ(c.pkts[3].psn.value(), 503u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(all_equal(std::span(c.frames[i]).subspan(c.pkts[i].payload_offset, kMtu), 0x66));
  }
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
}

// A READ of one MTU (its response one packet) whose region is deregistered after the
// request was taken and before the response is built: a Remote Access Error NAK, no
// response with the region's bytes (the request's R_Key check is kept for the
// response only while no MR is deregistered). Then a READ of the DUT's own region
// after that dereg: answered (checked again).
TEST(EngineReadResponse, OnePacketReadWhoseRegionGoesBeforeItsResponseIsNaked) {
  Dut d;
  std::vector<uint8_t> src(kMtu, 0x66);
  const uint64_t iova = 0x30000000 + (reinterpret_cast<uint64_t>(src.data()) & 0xfff);
  const auto keys = d.net[1].reg_mr(d.s.pd, src.data(), src.size(), iova,
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_TRUE(keys.ok());
  deliver(d, read_request(d, 500, iova, keys.value().rkey, kMtu), 1'000'000);
  ASSERT_EQ(d.net[1].dereg_mr(keys.value().lkey), 0);
  Capture c;
  transmit_until(d, c, 1);
  ASSERT_EQ(c.pkts.size(), 1u);
  EXPECT_EQ(c.pkts[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(syndrome(c.pkts[0]), 0x62) << "a NAK, Remote Access Error";
  EXPECT_EQ(c.pkts[0].psn.value(), 500u);

  Dut e;
  std::fill(e.s.buf.begin(), e.s.buf.begin() + kMtu, 0x44);
  std::vector<uint8_t> other(kMtu, 0);
  const auto ko = e.net[1].reg_mr(e.s.pd, other.data(), other.size(),
                                  0x40000000 + (reinterpret_cast<uint64_t>(other.data()) & 0xfff),
                                  IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(ko.ok());
  deliver(e, read_request(e, 500, e.s.iova, e.s.keys.rkey, kMtu), 1'000'000);
  ASSERT_EQ(e.net[1].dereg_mr(ko.value().lkey), 0);  // another region
  Capture r;
  transmit_until(e, r, 1);
  ASSERT_EQ(r.pkts.size(), 1u);
  EXPECT_EQ(r.pkts[0].opcode, wire::op::kRcReadResponseOnly);
  EXPECT_TRUE(all_equal(std::span(r.frames[0]).subspan(r.pkts[0].payload_offset, kMtu), 0x44));
}

// A READ of one MTU through a type 2 window, the window invalidated by the DUT
// (LOCAL_INV) after the request was taken and before the response is built: a
// Remote Access Error NAK (a window's key is checked again at every response).
TEST(EngineReadResponse, ReadThroughAWindowInvalidatedBeforeItsResponseIsNaked) {
  RcOptions o;
  o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
  Dut d(o);
  const uint32_t key = d.bind_type2_window(IBV_ACCESS_REMOTE_READ, 4 * kMtu);
  ASSERT_NE(key, 0u);
  std::fill(d.s.buf.begin(), d.s.buf.begin() + kMtu, 0x55);
  deliver(d, read_request(d, 500, d.s.iova, key, kMtu), d.now + 1'000'000);
  SendWr inv;
  inv.wr_id = 2;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = key;
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, inv), 0);
  Capture c;
  transmit_until(d, c, 1);
  ASSERT_EQ(c.pkts.size(), 1u);
  EXPECT_EQ(c.pkts[0].opcode, wire::op::kRcAck);
  EXPECT_EQ(syndrome(c.pkts[0]), 0x62) << "a NAK, Remote Access Error";
}

// ---- the requester: responses straight into the READ ------------------------

// The DUT's READ of n MTUs (n * kMtu bytes, or `len`) into its buffer at `local`:
// posted and its request sent; the request's PSN.
uint32_t post_read(Dut& d, uint64_t local, uint32_t len, uint64_t wr_id, uint32_t lkey = 0, uint64_t base = 0) {
  const Sge sge{(base ? base : d.s.iova) + local, len, lkey ? lkey : d.s.keys.lkey};
  EXPECT_EQ(d.net[1].post_send(d.now, d.s.qpn, one_sge_wr(sge, IBV_WR_RDMA_READ, 0x5000000, 0x1234, wr_id)), 0);
  Capture c;
  transmit_until(d, c, 1);
  EXPECT_EQ(c.pkts.size(), 1u);
  EXPECT_TRUE(!c.pkts.empty() && c.pkts[0].opcode == wire::op::kRcReadRequest)
      << (c.pkts.empty() ? -1 : c.pkts[0].opcode);
  return c.pkts.empty() ? 0 : c.pkts[0].psn.value();
}

wire::FrameSpec response(Dut& d, uint8_t opcode, uint32_t psn, std::span<const uint8_t> payload) {
  auto f = d.spec(opcode, psn);
  f.ack_req = false;
  if (wire::opcode_info(opcode).has(wire::kHdrAeth)) f.aeth = wire::AethFields{0x1f, 1};
  f.payload = payload;
  return f;
}

// A READ of one MTU answered with a corrupted ONLY response (dropped), then the
// intact one (the READ completes, every byte), then that response again (a
// duplicate: nothing more completes, nothing stored again). Then a WRITE not yet
// acknowledged and a READ of one MTU: the READ's ONLY response acknowledges the
// WRITE, and both complete in order.
TEST(EngineReadResponse, OnlyResponseCompletesTheReadAndWhatItAcknowledges) {
  Dut d;
  const std::vector<uint8_t> data = pattern(kMtu, 31);
  const uint32_t p = post_read(d, 4096, kMtu, 1);
  deliver(d, response(d, wire::op::kRcReadResponseOnly, p, data), d.now + 1'000'000, 0x08);
  EXPECT_EQ(d.net[1].counters().rx_bad_icrc, 1u);
  EXPECT_TRUE(poll(d).empty());
  deliver(d, response(d, wire::op::kRcReadResponseOnly, p, data), d.now + 1'000'000);
  auto wc = poll(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].byte_len, kMtu);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + 4096));
  const std::vector<uint8_t> other = pattern(kMtu, 99);
  deliver(d, response(d, wire::op::kRcReadResponseOnly, p, other), d.now + 1'000'000);
  EXPECT_TRUE(poll(d).empty());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + 4096)) << "a duplicate stored";

  const Sge wsge{d.s.iova, 64, d.s.keys.lkey};
  ASSERT_EQ(d.net[1].post_send(d.now, d.s.qpn, one_sge_wr(wsge, IBV_WR_RDMA_WRITE, 0x6000000, 0x4321, 2)), 0);
  Capture w;
  transmit_until(d, w, 1);
  ASSERT_EQ(w.pkts.size(), 1u);
  const uint32_t p2 = post_read(d, 8192, kMtu, 3);
  EXPECT_EQ(p2, w.pkts[0].psn.value() + 1);
  deliver(d, response(d, wire::op::kRcReadResponseOnly, p2, data), d.now + 1'000'000);
  wc = poll(d);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[1].wr_id, 3u);
  EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + 8192));
  EXPECT_EQ(d.net[1].counters().retransmits, 0u);
}

// A READ of two MTUs: after its FIRST response, a LAST response one byte short
// (dropped as a bad length, nothing stored, no completion), one a PSN past the
// READ (out of the window), then the right one (the READ completes once).
TEST(EngineReadResponse, LastResponseShortOrPastTheReadIsNotTaken) {
  Dut d;
  const std::vector<uint8_t> data = pattern(2 * kMtu, 41);
  const std::span<const uint8_t> all(data);
  const uint32_t p = post_read(d, 4096, 2 * kMtu, 1);
  deliver(d, response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu)), d.now + 1'000'000);
  deliver(d, response(d, wire::op::kRcReadResponseLast, p + 1, all.subspan(kMtu, kMtu - 1)), d.now + 1'000'000);
  EXPECT_EQ(d.net[1].counters().rx_bad_length, 1u);
  EXPECT_TRUE(poll(d).empty());
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(4096 + kMtu, kMtu), 0)) << "a short last response stored";
  deliver(d, response(d, wire::op::kRcReadResponseLast, p + 2, all.subspan(kMtu)), d.now + 1'000'000);
  EXPECT_EQ(d.net[1].counters().rx_psn_out_of_window, 1u);
  EXPECT_TRUE(poll(d).empty());
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(4096 + kMtu, kMtu), 0)) << "a response past the READ stored";
  deliver(d, response(d, wire::op::kRcReadResponseLast, p + 1, all.subspan(kMtu)), d.now + 1'000'000);
  const auto wc = poll(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + 4096));
}

// A READ of three MTUs whose FIRST response arrived, then the QP moved to ERR: the
// later responses store nothing, and the READ completes flushed, once.
TEST(EngineReadResponse, ResponsesAfterTheQpWentToErrStoreNothing) {
  Dut d;
  const std::vector<uint8_t> data = pattern(3 * kMtu, 43);
  const std::span<const uint8_t> all(data);
  const uint32_t p = post_read(d, 4096, 3 * kMtu, 1);
  deliver(d, response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu)), d.now + 1'000'000);
  d.move_to_err();
  deliver(d, response(d, wire::op::kRcReadResponseMiddle, p + 1, all.subspan(kMtu, kMtu)), d.now + 1'000'000);
  deliver(d, response(d, wire::op::kRcReadResponseLast, p + 2, all.subspan(2 * kMtu)), d.now + 1'000'000);
  EXPECT_TRUE(all_equal(std::span(d.s.buf).subspan(4096 + kMtu, 2 * kMtu), 0)) << "stored in ERR";
  const auto wc = poll(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
}

// A READ of two MTUs into a region of its own, deregistered after the FIRST
// response: the LAST response is not stored, and the READ completes with
// IBV_WC_LOC_PROT_ERR (the QP in ERR).
TEST(EngineReadResponse, LastResponseIntoADeregisteredRegionFailsTheRead) {
  Dut d;
  std::vector<uint8_t> dst(2 * kMtu, 0);
  const uint64_t iova = 0x40000000 + (reinterpret_cast<uint64_t>(dst.data()) & 0xfff);
  const auto keys = d.net[1].reg_mr(d.s.pd, dst.data(), dst.size(), iova, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(keys.ok());
  const std::vector<uint8_t> data = pattern(2 * kMtu, 47);
  const std::span<const uint8_t> all(data);
  const uint32_t p = post_read(d, 0, 2 * kMtu, 1, keys.value().lkey, iova);
  deliver(d, response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu)), d.now + 1'000'000);
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + kMtu, dst.begin()));
  ASSERT_EQ(d.net[1].dereg_mr(keys.value().lkey), 0);
  deliver(d, response(d, wire::op::kRcReadResponseLast, p + 1, all.subspan(kMtu)), d.now + 1'000'000);
  EXPECT_TRUE(all_equal(std::span(dst).subspan(kMtu), 0)) << "stored into a deregistered region";
  const auto wc = poll(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(d.net[1].query_qp(d.s.qpn)->state(), IBV_QPS_ERR);
}

// The ACK timer measures time without progress (9.7.6.1.3): with a timeout of
// 4.19 ms (exponent 10), a READ of four MTUs whose responses come 3 ms apart (12
// ms in all) is never asked again and completes; a READ whose FIRST response came
// and then nothing is asked again from the missing byte 4.19 ms after that
// response, not before.
TEST(EngineReadResponse, TimerRestartsOnEachResponseAndFiresWithoutProgress) {
  RcOptions o;
  o.timeout = 10;
  Dut d(o);
  const Picos kTimeout = 4'096'000ull << 10;
  const std::vector<uint8_t> data = pattern(4 * kMtu, 53);
  const std::span<const uint8_t> all(data);
  const uint32_t p = post_read(d, 4096, 4 * kMtu, 1);
  const uint8_t ops[4] = {wire::op::kRcReadResponseFirst, wire::op::kRcReadResponseMiddle,
                          wire::op::kRcReadResponseMiddle, wire::op::kRcReadResponseLast};
  for (uint32_t i = 0; i < 4; ++i) {
    const Picos at = d.now + 3'000'000'000;
    Capture quiet;
    d.now = at - 1;
    transmit(d, quiet, 64);
    EXPECT_TRUE(quiet.pkts.empty()) << "sent before response " << i;
    deliver(d, response(d, ops[i], p + i, all.subspan(i * kMtu, kMtu)), at);
  }
  auto wc = poll(d);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), d.s.buf.begin() + 4096));
  EXPECT_EQ(d.net[1].counters().timeouts, 0u);
  EXPECT_EQ(d.net[1].counters().retransmits, 0u);
  // Nothing outstanding once the READ completed: no timer fires, nothing is sent.
  Capture idle;
  d.now += 3 * kTimeout;
  transmit(d, idle, 64);
  EXPECT_TRUE(idle.pkts.empty());
  EXPECT_EQ(d.net[1].counters().timeouts, 0u);

  const uint32_t q = post_read(d, 4096, 3 * kMtu, 2);
  const Picos first = d.now + 3'000'000'000;
  deliver(d, response(d, wire::op::kRcReadResponseFirst, q, all.first(kMtu)), first);
  Capture before;
  d.now = first + kTimeout - 1'000'000;
  transmit(d, before, 64);
  EXPECT_TRUE(before.pkts.empty()) << "asked again before the timeout";
  Capture after;
  d.now = first + kTimeout;
  transmit(d, after, 64);
  ASSERT_EQ(after.pkts.size(), 1u);
  EXPECT_EQ(after.pkts[0].opcode, wire::op::kRcReadRequest);
  EXPECT_EQ(after.pkts[0].psn.value(), q + 1);
  ASSERT_TRUE(after.pkts[0].reth.has_value());
  EXPECT_EQ(after.pkts[0].reth->va, 0x5000000u + kMtu);
  EXPECT_EQ(after.pkts[0].reth->dma_len, 2 * kMtu);
  EXPECT_EQ(d.net[1].counters().timeouts, 1u);
  EXPECT_TRUE(poll(d).empty());
}

// An RNR NAK for the PSN a READ's next response has (a peer's odd answer, but the
// completer takes it: 9.7.5.2.8), then that response during the RNR wait (655 ms,
// timer code 0): it lands, and the ACK timer stays off until the wait ends (an RNR
// wait re-arms it then), so no timeout fires during the wait although the ACK
// timeout (4.19 ms) passes many times.
TEST(EngineReadResponse, ResponseDuringAnRnrWaitLeavesTheTimerToTheWait) {
  RcOptions o;
  o.timeout = 10;
  Dut d(o);
  const std::vector<uint8_t> data = pattern(3 * kMtu, 61);
  const std::span<const uint8_t> all(data);
  const uint32_t p = post_read(d, 4096, 3 * kMtu, 1);
  deliver(d, response(d, wire::op::kRcReadResponseFirst, p, all.first(kMtu)), d.now + 1'000'000);
  auto rnr = d.spec(wire::op::kRcAck, p + 1);
  rnr.ack_req = false;
  rnr.aeth = wire::AethFields{0x20, 1};  // RNR NAK, timer code 0: 655.36 ms
  deliver(d, rnr, d.now + 1'000'000);
  deliver(d, response(d, wire::op::kRcReadResponseMiddle, p + 1, all.subspan(kMtu, kMtu)), d.now + 1'000'000);
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 2 * kMtu, d.s.buf.begin() + 4096));
  Capture during;
  for (int i = 0; i < 20; ++i) {
    d.now += 20'000'000'000;  // 20 ms steps, 400 ms in all
    transmit(d, during, 64);
  }
  EXPECT_TRUE(during.pkts.empty());
  EXPECT_EQ(d.net[1].counters().timeouts, 0u);
}

// The tenth pass's last in-order response (docs/performance.md "The engine, tenth
// pass") retires through its PSN as retire_acked does, restoring the retry count:
// with retry_cnt 1, a READ whose response is lost once (one retry spent) completes
// when answered again; then a WRITE whose packet is lost once is sent again (the
// count was restored) and completes, instead of failing with RETRY_EXC_ERR.
TEST(EngineReadResponse, LastResponseRestoresTheRetryCount) {
  RcOptions o;
  o.retry_cnt = 1;
  RcPair p(o);
  int dropped_response = 0, dropped_write = 0;
  p.net.set_hook([&](int from, std::vector<uint8_t>& f) {
    const auto r = wire::parse_frame(f);
    if (!r.ok()) return Fate::kDeliver;
    if (from == 1 && r.pkt.opcode == wire::op::kRcReadResponseOnly && dropped_response++ == 0) return Fate::kDrop;
    if (from == 0 && r.pkt.opcode == wire::op::kRcWriteOnly && dropped_write++ == 0) return Fate::kDrop;
    return Fate::kDeliver;
  });
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_READ, 0, kMtu, 0, 1), 0);
  ASSERT_TRUE(p.net.run());
  auto wc = p.poll(0, false);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(dropped_response, 2);
  ASSERT_EQ(p.post(0, IBV_WR_RDMA_WRITE, 0, kMtu, 8192, 2), 0);
  ASSERT_TRUE(p.net.run());
  wc = p.poll(0, false);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << "the WRITE's retry was not restored";
  EXPECT_EQ(dropped_write, 2);
}

}  // namespace
}  // namespace isoroce::transport::testing
