// One engine under test whose RC peer is the test itself: the test builds
// request and response frames by hand ("Receive X / Expect Y") and sees every
// frame the engine answers with (Capture).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "tests/transport/engine/pair.h"
#include "transport/wire/build.h"

namespace isoroce::transport::testing {

// Captures what the engine sends.
class Capture : public TxSink {
 public:
  std::span<uint8_t> tx_buffer(size_t len) override {
    hints.push_back(len);
    buf_.assign(len, 0);
    return buf_;
  }
  void tx_commit(Picos, size_t len) override {
    buf_.resize(len);
    auto r = wire::parse_frame(buf_);
    EXPECT_TRUE(r.ok());
    pkts.push_back(r.pkt);
    frames.push_back(buf_);
  }
  std::vector<wire::RocePacket> pkts;
  std::vector<std::vector<uint8_t>> frames;
  // The length each tx_buffer() asked for (the engine's frame length of the grant).
  std::vector<size_t> hints;

 private:
  std::vector<uint8_t> buf_;
};

// Engine 1 of a Pair is the device under test; the test plays engine 0's QP.
struct Dut {
  Dut() : Dut(RcOptions{}) {}
  explicit Dut(const RcOptions& o, EngineConfig base = {}) : net(base), opt(o) {
    s = make_side(net[1], opt);
    peer.qpn = wire::Qpn(0x77);
    connect(net[1], s, peer, net[0].config().ip, opt, 9000, 500);
  }

  wire::FrameSpec spec(uint8_t opcode, uint32_t psn) {
    wire::FrameSpec f;
    f.src_mac = net[0].config().mac;
    f.dst_mac = net[1].config().mac;
    f.src_ip = net[0].config().ip;
    f.dst_ip = net[1].config().ip;
    f.opcode = opcode;
    f.dest_qp = s.qpn;
    f.psn = wire::Psn(psn);
    f.ack_req = true;
    return f;
  }
  // An ACK or NAK (AETH syndrome and MSN) of the DUT's requests up to psn, AckReq clear.
  wire::FrameSpec ack(uint32_t psn, uint8_t syndrome, uint32_t msn) {
    wire::FrameSpec f = spec(wire::op::kRcAck, psn);
    f.ack_req = false;
    f.aeth = wire::AethFields{syndrome, msn};
    return f;
  }
  // Receive the frame, then collect everything the engine sends in the next 1 ms.
  std::vector<wire::RocePacket> receive(const wire::FrameSpec& f) { return receive_corrupt(f, 0, 0); }
  // The same with the frame's byte `from_end` bytes before its end XORed with
  // `flip` (0: intact).
  std::vector<wire::RocePacket> receive_corrupt(const wire::FrameSpec& f, size_t from_end, uint8_t flip) {
    std::vector<uint8_t> frame(wire::frame_size(f));
    EXPECT_TRUE(wire::build_frame(f, frame).ok());
    if (flip != 0) frame[frame.size() - from_end] ^= flip;
    now += 1'000'000;
    net[1].receive(now, frame);
    return drain();
  }
  // The DUT's QP moved to ERR by its consumer (ibv_modify_qp), checked.
  void move_to_err() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(net[1].modify_qp(s.qpn, a, IBV_QP_STATE), 0);
  }
  // The frame of f delivered, nothing transmitted (drain() sends what it caused).
  void deliver(const wire::FrameSpec& f) {
    std::vector<uint8_t> v(wire::frame_size(f));
    ASSERT_TRUE(wire::build_frame(f, v).ok());
    now += 1'000'000;
    net[1].receive(now, v);
  }
  std::vector<wire::RocePacket> drain() {
    Capture c;
    for (int i = 0; i < 100; ++i) {
      net[1].advance(now);
      net[1].transmit(now, c, 64);
      const Picos next = net[1].next_deadline();
      if (next == sched::kNever || next > now + 1'000'000'000) break;
      now = std::max(now, next);
    }
    return c.pkts;
  }
  wire::FrameSpec write_only(uint32_t psn, uint64_t off, std::span<const uint8_t> data) {
    auto f = spec(wire::op::kRcWriteOnly, psn);
    f.reth = wire::RethFields{s.iova + off, s.keys.rkey, static_cast<uint32_t>(data.size())};
    f.payload = data;
    return f;
  }

  // A type 2 window over the first `len` bytes of the DUT's MR, bound by the
  // DUT's QP with `access`, its bind completed and checked: the window's R_Key
  // (0 after a failed expectation).
  uint32_t bind_type2_window(uint32_t access, uint64_t len) {
    const auto mw = net[1].alloc_mw(s.pd, IBV_MW_TYPE_2);
    EXPECT_TRUE(mw.ok());
    if (!mw.ok()) return 0;
    const uint32_t key = (mw.value() & 0xffffff00u) | ((mw.value() + 1) & 0xff);
    SendWr bind;
    bind.wr_id = 1;
    bind.opcode = IBV_WR_BIND_MW;
    bind.send_flags = IBV_SEND_SIGNALED;
    bind.bind = verbs::MwBind{mw.value(), key, s.keys.lkey, s.iova, len, access};
    EXPECT_EQ(net[1].post_send(now, s.qpn, bind), 0);
    drain();
    std::vector<ibv_wc> wc(4);
    EXPECT_EQ(net[1].poll_cq(s.scq, wc), 1);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    return wc[0].status == IBV_WC_SUCCESS ? key : 0;
  }

  // Opens a message at `psn` without AckReq, its first packet carrying `mtu_bytes`
  // (one MTU): a SEND FIRST into a receive posted at s.iova + 8192, or a WRITE FIRST
  // of three MTUs there. Nothing is answered. What a request that must not land
  // inside another message is then sent into.
  void open_message(bool send, uint32_t psn, std::span<const uint8_t> mtu_bytes) {
    const auto mtu = static_cast<uint32_t>(mtu_bytes.size());
    auto first = spec(send ? wire::op::kRcSendFirst : wire::op::kRcWriteFirst, psn);
    if (send) {
      const Sge sge{s.iova + 8192, 4 * mtu, s.keys.lkey};
      RecvWr rwr;
      rwr.sg_list = std::span(&sge, 1);
      ASSERT_EQ(net[1].post_recv(s.qpn, rwr), 0);
    } else {
      first.reth = wire::RethFields{s.iova + 8192, s.keys.rkey, 3 * mtu};
    }
    first.ack_req = false;
    first.payload = mtu_bytes;
    EXPECT_TRUE(receive(first).empty());
  }

  Pair net;
  RcOptions opt;
  Side s, peer;
  Picos now = 0;
};

inline uint8_t syndrome(const wire::RocePacket& p) { return p.aeth ? p.aeth->syndrome : 0xff; }

// n bytes i * step + seed: a payload whose every byte says where it belongs.
inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed, uint8_t step) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * step + seed);
  return v;
}

inline bool all_equal(std::span<const uint8_t> b, uint8_t v) {
  return std::all_of(b.begin(), b.end(), [v](uint8_t x) { return x == v; });
}

// The responses c holds from index `from`, checked against a READ of src.size()
// bytes from `src` that starts at PSN `psn`, in packets of `mtu`: one per MTU,
// FIRST/MIDDLE/LAST (or ONLY), consecutive PSNs, each MTU long but the last, the
// bytes of src in order, and each grant's frame length (the length the engine
// asked the sink for) that of the frame built. `count` responses only (0: all),
// when c holds the start of a longer run.
inline void expect_read_responses(const Capture& c, size_t from, uint32_t psn, std::span<const uint8_t> src,
                                  uint32_t mtu, size_t count = 0) {
  const size_t n = std::max<size_t>(1, (src.size() + mtu - 1) / mtu);
  ASSERT_GE(c.pkts.size(), from + (count ? count : n));
  for (size_t i = 0; i < (count ? count : n); ++i) {
    SCOPED_TRACE(i);
    const wire::RocePacket& p = c.pkts[from + i];
    const uint8_t want = n == 1       ? wire::op::kRcReadResponseOnly
                         : i == 0     ? wire::op::kRcReadResponseFirst
                         : i + 1 == n ? wire::op::kRcReadResponseLast
                                      : wire::op::kRcReadResponseMiddle;
    EXPECT_EQ(p.opcode, want);
    EXPECT_EQ(p.psn.value(), psn + i);
    const size_t len = std::min<size_t>(mtu, src.size() - i * mtu);
    ASSERT_EQ(p.payload_len, len);
    EXPECT_TRUE(std::equal(src.begin() + i * mtu, src.begin() + i * mtu + len,
                           c.frames[from + i].begin() + p.payload_offset));
    EXPECT_EQ(c.hints[from + i], c.frames[from + i].size()) << "the grant's size is not the frame's";
  }
}

}  // namespace isoroce::transport::testing
