// Completions written in place, the tenth engine pass (docs/performance.md "The
// engine, tenth pass"): a successful send completion (complete_send) and the
// receive completion of a one-packet SEND (rx_send_first) are written straight into
// the CQ's next entry. Each entry must carry its own fields and zeros elsewhere,
// whatever the entry held before: here one CQ of two entries serves a QP's sends
// and receives, so every entry is reused by the other kind.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cstring>
#include <vector>

#include "tests/transport/engine/pair.h"

namespace isoroce::transport::testing {
namespace {

using trace::Event;

struct Recorder final : trace::Sink {
  void record(const trace::Record& r) override {
    if (r.event == Event::kCompletion) records.push_back(r);
  }
  std::vector<trace::Record> records;
};

// Engine 0's QP sends and receives into one CQ of two entries; engine 1's is as
// make_side() makes it.
struct SharedCq {
  explicit SharedCq(ibv_mtu mtu = IBV_MTU_1024) {
    RcOptions o;
    o.mtu = mtu;
    Engine& e = net[0];
    a.pd = e.alloc_pd().value();
    a.scq = a.rcq = e.create_cq(2).value();
    a.buf.assign(o.buf_bytes, 0);
    a.iova = 0x10000000 + (reinterpret_cast<uint64_t>(a.buf.data()) & 0xfff);
    a.keys = e.reg_mr(a.pd, a.buf.data(), a.buf.size(), a.iova, o.access).value();
    QpCreate c;
    c.pd = a.pd;
    c.send_cq = a.scq;
    c.recv_cq = a.rcq;
    c.init.qp_type = IBV_QPT_RC;
    c.init.cap.max_send_wr = 64;
    c.init.cap.max_recv_wr = 64;
    c.init.cap.max_send_sge = 1;
    c.init.cap.max_recv_sge = 1;
    c.init.cap.max_inline_data = 320;  // the device's most: more than the smallest MTU
    c.init.sq_sig_all = 0;
    a.qpn = e.create_qp(c).value();
    b = make_side(net[1], o);
    connect(net[0], a, b, net[1].config().ip, o, 100, 5000);
    connect(net[1], b, a, net[0].config().ip, o, 5000, 100);
  }
  // Engine `from`'s QP posts op of len bytes at offset 64 KB of its buffer to the
  // start of the other's.
  void post(int from, ibv_wr_opcode op, uint32_t len, uint64_t wr_id, uint32_t flags = IBV_SEND_SIGNALED) {
    Side& s = from == 0 ? a : b;
    const Side& t = from == 0 ? b : a;
    const Sge sge{s.iova + 65536, len, s.keys.lkey};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = t.iova;
    wr.rkey = t.keys.rkey;
    wr.imm_data = htonl(0x1234abcd + static_cast<uint32_t>(wr_id));
    wr.compare_add = 1;
    ASSERT_EQ(net[from].post_send(net.now(), s.qpn, wr), 0);
  }
  void post_recv(uint64_t wr_id) {
    const Sge sge{a.iova + 131072, 4096, a.keys.lkey};
    RecvWr wr{wr_id, std::span(&sge, 1)};
    ASSERT_EQ(net[0].post_recv(a.qpn, wr), 0);
  }
  // Runs, then polls engine 0's CQ: its one completion.
  ibv_wc one() {
    EXPECT_TRUE(net.run());
    std::vector<ibv_wc> wc(4);
    EXPECT_EQ(net[0].poll_cq(a.scq, wc), 1);
    return wc[0];
  }

  Pair net;
  Side a, b;
};

void expect_send(const ibv_wc& wc, uint64_t wr_id, ibv_wc_opcode op, uint32_t len, uint32_t qpn) {
  EXPECT_EQ(wc.wr_id, wr_id);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, op);
  EXPECT_EQ(wc.byte_len, len);
  EXPECT_EQ(wc.qp_num, qpn);
  EXPECT_EQ(wc.wc_flags, 0u) << "a field of the entry's last completion";
  EXPECT_EQ(wc.imm_data, 0u);
  EXPECT_EQ(wc.src_qp, 0u);
  EXPECT_EQ(wc.vendor_err, 0u);
}

void expect_recv(const ibv_wc& wc, uint64_t wr_id, uint32_t len, const SharedCq& t, bool imm, uint32_t imm_host) {
  EXPECT_EQ(wc.wr_id, wr_id);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, len);
  EXPECT_EQ(wc.qp_num, t.a.qpn.value());
  EXPECT_EQ(wc.src_qp, t.b.qpn.value());
  EXPECT_EQ(wc.wc_flags, imm ? static_cast<unsigned>(IBV_WC_WITH_IMM) : 0u);
  EXPECT_EQ(wc.imm_data, imm ? htonl(imm_host) : 0u);
}

// Receives of one-packet SENDs (256 bytes and up: their ICRC checked at the copy, so
// rx_send_first writes their completion) with and without immediate, and signaled
// WRITE, READ, FETCH_ADD and SEND completions, alternating over the CQ's two entries
// so that a receive without immediate and a send land where a receive with
// immediate was; an unsignaled WRITE completes nothing. Then the completion trace
// and the count of completions queued.
TEST(EngineCompletion, EntriesWrittenInPlaceCarryTheirFieldsAndNothingOfTheLast) {
  SharedCq t;
  Recorder rec;
  t.net[0].attach_trace(&rec, trace::bit(Event::kCompletion), 0);
  const uint32_t qpn = t.a.qpn.value();
  const Sge rsge{t.b.iova + 8192, 4096, t.b.keys.lkey};
  RecvWr rwr{77, std::span(&rsge, 1)};
  ASSERT_EQ(t.net[1].post_recv(t.b.qpn, rwr), 0);  // for engine 0's SEND below
  // Entry 0: a receive with immediate; entry 1: a WRITE.
  t.post_recv(1);
  t.post(1, IBV_WR_SEND_WITH_IMM, 512, 10);
  expect_recv(t.one(), 1, 512, t, true, 0x1234abcd + 10);
  t.post(0, IBV_WR_RDMA_WRITE, 3000, 2);
  expect_send(t.one(), 2, IBV_WC_RDMA_WRITE, 3000, qpn);
  // Entry 0 (last: a receive with immediate): a receive without; entry 1: a receive
  // with immediate.
  t.post_recv(3);
  t.post(1, IBV_WR_SEND, 700, 11);
  expect_recv(t.one(), 3, 700, t, false, 0);
  t.post_recv(4);
  t.post(1, IBV_WR_SEND_WITH_IMM, 300, 12);
  expect_recv(t.one(), 4, 300, t, true, 0x1234abcd + 12);
  // Entry 0: a READ; entry 1 (last: a receive with immediate): a FETCH_ADD.
  t.post(0, IBV_WR_RDMA_READ, 2500, 5);
  expect_send(t.one(), 5, IBV_WC_RDMA_READ, 2500, qpn);
  t.post(0, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 6);
  expect_send(t.one(), 6, IBV_WC_FETCH_ADD, 8, qpn);
  // Entry 0: a receive with immediate; entry 1: a SEND over it.
  t.post_recv(7);
  t.post(1, IBV_WR_SEND_WITH_IMM, 300, 13);
  expect_recv(t.one(), 7, 300, t, true, 0x1234abcd + 13);
  t.post(0, IBV_WR_SEND, 1024, 8);
  expect_send(t.one(), 8, IBV_WC_SEND, 1024, qpn);
  // Unsignaled: nothing.
  t.post(0, IBV_WR_RDMA_WRITE, 100, 9, 0);
  ASSERT_TRUE(t.net.run());
  std::vector<ibv_wc> wc(4);
  EXPECT_EQ(t.net[0].poll_cq(t.a.scq, wc), 0);
  EXPECT_EQ(t.net[0].completions_queued(), 8u);
  // The trace: each completion once, with its QPN, message id (the post count for a
  // send, 0 for a receive), length, status and opcode.
  ASSERT_EQ(rec.records.size(), 8u);
  const trace::Record& r0 = rec.records[0];
  EXPECT_EQ(r0.qp, qpn);
  EXPECT_EQ(r0.psn, 0u);
  EXPECT_EQ(r0.bytes, 512u);
  EXPECT_EQ(r0.a, static_cast<uint64_t>(IBV_WC_SUCCESS));
  EXPECT_EQ(r0.b, static_cast<uint64_t>(IBV_WC_RECV));
  const trace::Record& r1 = rec.records[1];
  EXPECT_EQ(r1.qp, qpn);
  EXPECT_EQ(r1.psn, 0u);  // the QP's first post
  EXPECT_EQ(r1.bytes, 3000u);
  EXPECT_EQ(r1.a, static_cast<uint64_t>(IBV_WC_SUCCESS));
  EXPECT_EQ(r1.b, static_cast<uint64_t>(IBV_WC_RDMA_WRITE));
  const trace::Record& r4 = rec.records[4];
  EXPECT_EQ(r4.psn, 1u);
  EXPECT_EQ(r4.bytes, 2500u);
  EXPECT_EQ(r4.b, static_cast<uint64_t>(IBV_WC_RDMA_READ));
}

// Three signaled WRITEs complete into the CQ of two entries, none polled: two
// entries, one overrun counted, the CQ error reported once (IBTA 11.4.2.1).
TEST(EngineCompletion, ACompletionPastAFullCqIsAnOverrun) {
  SharedCq t;
  for (uint64_t k = 0; k < 3; ++k) t.post(0, IBV_WR_RDMA_WRITE, 100, k);
  ASSERT_TRUE(t.net.run());
  EXPECT_EQ(t.net[0].counters().cq_overruns, 1u);
  EXPECT_EQ(t.net[0].cq_queued(t.a.scq), 2u);
  EXPECT_EQ(t.net[0].completions_queued(), 2u) << "the lost one counted";
  const auto ev = t.net[0].take_async_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, AsyncEventType::kCqError);
  std::vector<ibv_wc> wc(4);
  ASSERT_EQ(t.net[0].poll_cq(t.a.scq, wc), 2);
  expect_send(wc[0], 0, IBV_WC_RDMA_WRITE, 100, t.a.qpn.value());
  expect_send(wc[1], 1, IBV_WC_RDMA_WRITE, 100, t.a.qpn.value());
}

// Not a completion, the same fixture: an inline WRITE of 300 bytes over a 256-byte
// path MTU (two packets, built from the WR's inline copy, one piece each without
// the gather): each packet carries the bytes of its own offset.
TEST(EngineCompletion, InlineDataLongerThanTheMtuIsSentFromEachPacketsOffset) {
  SharedCq t(IBV_MTU_256);
  std::vector<uint8_t> src(300);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1 + i / 256 * 100);
  const Sge sge{reinterpret_cast<uint64_t>(src.data()), 300, 0};
  SendWr wr;
  wr.wr_id = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = t.b.iova;
  wr.rkey = t.b.keys.rkey;
  ASSERT_EQ(t.net[0].post_send(t.net.now(), t.a.qpn, wr), 0);
  std::fill(src.begin(), src.end(), 0);  // read at post
  expect_send(t.one(), 1, IBV_WC_RDMA_WRITE, 300, t.a.qpn.value());
  for (size_t i = 0; i < 300; ++i) ASSERT_EQ(t.b.buf[i], static_cast<uint8_t>(i * 7 + 1 + i / 256 * 100)) << i;
  EXPECT_EQ(t.net.sent(0).size(), 2u);
}

}  // namespace
}  // namespace isoroce::transport::testing
