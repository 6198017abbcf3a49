// Over ~600 lines: one fixture (a daemon and a connected RC/UD pair through
// the library) serves every extended verb; the cases are grouped by verb.
// The extended verbs of libisoroce-verbs, called directly against a real
// isoroced --loopback (isoroce0 10.0.0.1 <-> isoroce1 10.0.0.2):
// ibv_query_device_ex, ibv_create_cq_ex and its polling API on the same ring
// as ibv_poll_cq, ibv_create_qp_ex with the ibv_wr_* post-send API (bytes,
// completions, batches that fail or are aborted, a full queue),
// ibv_init_ah_from_wc / ibv_create_ah_from_wc (a UD server answers with only
// the received completion), and ibv_rereg_mr for each flag (checked through
// RDMA WRITEs), with their error paths.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon/harness.h"
#include "tests/verbs_compat/verbs_fixture.h"

namespace isoroce::test {
namespace {

constexpr int kAll = kAllAccess;
constexpr uint32_t kQkey = 0x11111111;
constexpr uint64_t kRcOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                            IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                            IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
constexpr size_t kGrh = 40;

uint64_t addr_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void fill(std::vector<uint8_t>& v, uint8_t seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 13 + seed);
}

// One end: a context, PD, CQ (plain or extended), QP (plain or extended).
struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;       // ibv_cq_ex_to_cq(cqx) for an extended CQ
  ibv_cq_ex* cqx = nullptr;
  ibv_qp* qp = nullptr;
  ibv_qp_ex* qpx = nullptr;
  std::vector<ibv_mr*> mrs;   // deregistered first
  std::vector<ibv_ah*> ahs;
  ~Side() {
    for (ibv_mr* m : mrs) EXPECT_EQ(ibv_dereg_mr(m), 0);
    for (ibv_ah* a : ahs) EXPECT_EQ(ibv_destroy_ah(a), 0);
    if (qp) { EXPECT_EQ(ibv_destroy_qp(qp), 0); }
    if (cq) { EXPECT_EQ(ibv_destroy_cq(cq), 0); }
    if (ch) { EXPECT_EQ(ibv_destroy_comp_channel(ch), 0); }
    if (pd) { EXPECT_EQ(ibv_dealloc_pd(pd), 0); }
    if (ctx) ibv_close_device(ctx);
  }
  ibv_mr* reg(void* p, size_t len, int access = kAll) {
    ibv_mr* m = ibv_reg_mr(pd, p, len, access);
    if (m) mrs.push_back(m);
    return m;
  }
};

struct Opts {
  ibv_qp_type type = IBV_QPT_RC;
  uint32_t depth = 16;         // max_send_wr / max_recv_wr
  uint32_t cqe = 64;
  uint64_t send_ops = 0;       // non-zero: ibv_create_qp_ex with these ops
  bool cq_ex = false;
  uint64_t wc_flags = IBV_WC_STANDARD_FLAGS;
  bool channel = false;
  uint32_t send_sge = 2;
};

class Extended : public VerbsTest {
 protected:
  static void make(Side& s, const char* name, const Opts& o = {}) {
    s.ctx = open(name);
    ASSERT_NE(s.ctx, nullptr);
    s.pd = ibv_alloc_pd(s.ctx);
    ASSERT_NE(s.pd, nullptr);
    if (o.channel) { ASSERT_NE(s.ch = ibv_create_comp_channel(s.ctx), nullptr); }
    if (o.cq_ex) {
      ibv_cq_init_attr_ex ca{};
      ca.cqe = o.cqe;
      ca.channel = s.ch;
      ca.cq_context = &s;
      ca.wc_flags = o.wc_flags;
      s.cqx = ibv_create_cq_ex(s.ctx, &ca);
      ASSERT_NE(s.cqx, nullptr) << std::strerror(errno);
      s.cq = ibv_cq_ex_to_cq(s.cqx);
    } else {
      s.cq = ibv_create_cq(s.ctx, static_cast<int>(o.cqe), &s, s.ch, 0);
      ASSERT_NE(s.cq, nullptr);
    }
    ibv_qp_init_attr_ex ia{};
    ia.send_cq = ia.recv_cq = s.cq;
    ia.qp_type = o.type;
    ia.cap.max_send_wr = o.depth;
    ia.cap.max_recv_wr = o.depth;
    ia.cap.max_send_sge = o.send_sge;
    ia.cap.max_recv_sge = 2;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    ia.pd = s.pd;
    if (o.send_ops) {
      ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      ia.send_ops_flags = o.send_ops;
    }
    s.qp = ibv_create_qp_ex(s.ctx, &ia);
    ASSERT_NE(s.qp, nullptr) << std::strerror(errno);
    if (o.send_ops) {
      s.qpx = ibv_qp_to_qp_ex(s.qp);
      ASSERT_NE(s.qpx, nullptr);
    }
  }
  static void connect(Side& s, const char* dgid, uint32_t dqpn) { connect_qp(s.qp, dgid, dqpn); }
  static void pair_rc(Side& a, Side& b) {
    connect(a, "::ffff:10.0.0.2", b.qp->qp_num);
    connect(b, "::ffff:10.0.0.1", a.qp->qp_num);
  }
  static void ud_ready(Side& s) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kQkey;
    ASSERT_EQ(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(s.qp, &a, IBV_QP_STATE), 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 7;
    ASSERT_EQ(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  static ibv_ah* ah_to(Side& s, const char* dgid, uint8_t hop_limit = 64, uint8_t tclass = 0) {
    ibv_ah_attr a{};
    a.is_global = 1;
    a.port_num = 1;
    a.grh.hop_limit = hop_limit;
    a.grh.traffic_class = tclass;
    inet_pton(AF_INET6, dgid, a.grh.dgid.raw);
    ibv_ah* ah = ibv_create_ah(s.pd, &a);
    if (ah) s.ahs.push_back(ah);
    return ah;
  }
  // Nothing arrives for ms milliseconds.
  static bool quiet(ibv_cq* cq, int ms = 150) { return wait(cq, 1, ms).empty(); }
  static void post_recv(Side& s, uint64_t wr_id, void* buf, uint32_t len, uint32_t lkey) {
    ibv_sge sge{addr_of(buf), len, lkey};
    ibv_recv_wr r{};
    r.wr_id = wr_id, r.sg_list = &sge, r.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(s.qp, &r, &bad), 0);
  }
  // A signaled one-SGE RDMA WRITE or READ; the status of its completion.
  static ibv_wc_status rdma(Side& s, ibv_wr_opcode op, void* local, uint32_t len, uint32_t lkey, uint64_t raddr,
                            uint32_t rkey) {
    return VerbsTest::rdma(s.qp, s.cq, op, local, len, lkey, raddr, rkey);
  }
};

// ---- ibv_query_device_ex ------------------------------------------------------

TEST_F(Extended, QueryDeviceExReportsTheLegacyAttributesAndNoExtras) {
  Side s;
  s.ctx = open("isoroce0");
  ASSERT_NE(s.ctx, nullptr);
  ibv_device_attr legacy;
  ASSERT_EQ(ibv_query_device(s.ctx, &legacy), 0);
  ibv_device_attr_ex ex;
  std::memset(&ex, 0xa5, sizeof ex);
  ASSERT_EQ(ibv_query_device_ex(s.ctx, nullptr, &ex), 0);
  EXPECT_EQ(std::memcmp(&ex.orig_attr, &legacy, sizeof legacy), 0);
  EXPECT_EQ(ex.comp_mask, 0u);
  EXPECT_EQ(ex.odp_caps.general_caps & IBV_ODP_SUPPORT, 0u) << "no on-demand paging";
  EXPECT_EQ(ex.odp_caps.per_transport_caps.rc_odp_caps, 0u);
  EXPECT_EQ(ex.odp_caps.per_transport_caps.ud_odp_caps, 0u);
  EXPECT_EQ(ex.completion_timestamp_mask, 0u) << "no completion timestamps";
  EXPECT_EQ(ex.hca_core_clock, 0u);
  EXPECT_EQ(ex.device_cap_flags_ex, legacy.device_cap_flags);
  EXPECT_EQ(ex.tso_caps.max_tso, 0u);
  EXPECT_EQ(ex.rss_caps.max_rwq_indirection_tables, 0u);
  EXPECT_EQ(ex.packet_pacing_caps.qp_rate_limit_max, 0u);
  EXPECT_EQ(ex.tm_caps.max_num_tags, 0u);
  EXPECT_EQ(ex.cq_mod_caps.max_cq_count, 0u);
  EXPECT_EQ(ex.max_dm_size, 0u);
  EXPECT_EQ(ex.phys_port_cnt_ex, 1u);
  // And registration agrees: no ODP MRs.
  s.pd = ibv_alloc_pd(s.ctx);
  ASSERT_NE(s.pd, nullptr);
  static uint8_t page[4096];
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(s.pd, page, sizeof page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_query_device_ex_input in{};
  in.comp_mask = 1;
  EXPECT_EQ(ibv_query_device_ex(s.ctx, &in, &ex), EINVAL);
  // An older program's smaller struct: nothing is written past it.
  verbs_context* v = verbs_get_ctx_op(s.ctx, query_device_ex);
  ASSERT_NE(v, nullptr);
  std::vector<uint8_t> small(sizeof(ibv_device_attr) + 8 + 64, 0xee);
  ASSERT_EQ(v->query_device_ex(s.ctx, nullptr, reinterpret_cast<ibv_device_attr_ex*>(small.data()),
                               sizeof(ibv_device_attr) + 8),
            0);
  for (size_t i = sizeof(ibv_device_attr) + 8; i < small.size(); ++i) ASSERT_EQ(small[i], 0xee) << i;
  EXPECT_EQ(v->query_device_ex(s.ctx, nullptr, &ex, sizeof(ibv_device_attr) - 1), EINVAL);
}

// ---- ibv_create_cq_ex ----------------------------------------------------------

TEST_F(Extended, CqExPollsTheSameRingAsPollCqAndRecyclesIt) {
  // A CQ ring of 8 (7 usable) carries 40 completions: each end_poll must
  // give the slots back or the daemon stalls and the test times out.
  Side a, b;
  make(a, "isoroce0");
  Opts ob;
  ob.cq_ex = true;
  ob.cqe = 4;
  make(b, "isoroce1", ob);
  pair_rc(a, b);
  EXPECT_EQ(b.cq->cqe, 7);
  std::vector<uint8_t> src(64), dst(64 * 4);
  fill(src, 1);
  ibv_mr* smr = a.reg(src.data(), src.size());
  ibv_mr* dmr = b.reg(dst.data(), dst.size());
  ASSERT_TRUE(smr && dmr);
  uint64_t next_id = 1000;
  for (int round = 0; round < 10; ++round) {
    for (uint32_t i = 0; i < 4; ++i) post_recv(b, next_id + i, dst.data() + 64 * i, 64, dmr->lkey);
    for (uint32_t i = 0; i < 4; ++i) {
      ibv_sge sge{addr_of(src.data()), 10 + i + static_cast<uint32_t>(round), smr->lkey};
      ibv_send_wr w{};
      w.wr_id = i, w.sg_list = &sge, w.num_sge = 1, w.opcode = IBV_WR_SEND_WITH_IMM;
      w.send_flags = IBV_SEND_SIGNALED, w.imm_data = htonl(0x5000 + i);
      ibv_send_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
    }
    ASSERT_EQ(wait(a.cq, 4).size(), 4u) << "round " << round;
    // Two through the extended API, the rest through ibv_poll_cq.
    int rc = ENOENT;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ibv_poll_cq_attr pa{};
    while ((rc = ibv_start_poll(b.cqx, &pa)) == ENOENT && std::chrono::steady_clock::now() < until) {
    }
    ASSERT_EQ(rc, 0) << "round " << round;
    for (uint32_t i = 0; i < 2; ++i) {
      if (i == 1) {
        rc = ENOENT;
        while ((rc = ibv_next_poll(b.cqx)) == ENOENT && std::chrono::steady_clock::now() < until) {
        }
        ASSERT_EQ(rc, 0);
      }
      EXPECT_EQ(b.cqx->status, IBV_WC_SUCCESS);
      EXPECT_EQ(b.cqx->wr_id, next_id + i);
      EXPECT_EQ(ibv_wc_read_opcode(b.cqx), IBV_WC_RECV);
      EXPECT_EQ(ibv_wc_read_vendor_err(b.cqx), 0u);
      EXPECT_EQ(ibv_wc_read_byte_len(b.cqx), 10 + i + static_cast<uint32_t>(round));
      EXPECT_EQ(ntohl(ibv_wc_read_imm_data(b.cqx)), 0x5000 + i);
      EXPECT_EQ(ibv_wc_read_qp_num(b.cqx), b.qp->qp_num);
      EXPECT_TRUE(ibv_wc_read_wc_flags(b.cqx) & IBV_WC_WITH_IMM);
      EXPECT_EQ(ibv_wc_read_slid(b.cqx), 0u);
      EXPECT_EQ(ibv_wc_read_sl(b.cqx), 0u);
      EXPECT_EQ(ibv_wc_read_dlid_path_bits(b.cqx), 0u);
      (void)ibv_wc_read_src_qp(b.cqx);
    }
    ibv_end_poll(b.cqx);
    auto rest = wait(b.cq, 2);
    ASSERT_EQ(rest.size(), 2u) << "round " << round;
    EXPECT_EQ(rest[0].wr_id, next_id + 2);
    EXPECT_EQ(rest[1].wr_id, next_id + 3);
    EXPECT_EQ(rest[1].byte_len, 13u + static_cast<uint32_t>(round));
    EXPECT_EQ(std::memcmp(dst.data() + 64 * 3, src.data(), rest[1].byte_len), 0);
    next_id += 4;
  }
  // Empty: ENOENT, and the lock is not held afterwards (ibv_poll_cq returns).
  EXPECT_EQ(ibv_start_poll(b.cqx, nullptr), ENOENT);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(b.cq, 1, &wc), 0);
  // next_poll at the end keeps the batch open until end_poll.
  post_recv(b, 1, dst.data(), 64, dmr->lkey);
  ibv_sge sge{addr_of(src.data()), 5, smr->lkey};
  ibv_send_wr w{};
  w.sg_list = &sge, w.num_sge = 1, w.opcode = IBV_WR_SEND, w.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  ASSERT_EQ(wait(a.cq, 1).size(), 1u);
  int rc = ENOENT;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((rc = ibv_start_poll(b.cqx, nullptr)) == ENOENT && std::chrono::steady_clock::now() < until) {
  }
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(b.cqx->wr_id, 1u);
  EXPECT_EQ(ibv_next_poll(b.cqx), ENOENT);
  ibv_end_poll(b.cqx);
  EXPECT_EQ(ibv_start_poll(b.cqx, nullptr), ENOENT) << "the completion was consumed once";
  ibv_poll_cq_attr bad_attr{};
  bad_attr.comp_mask = 1;
  EXPECT_EQ(ibv_start_poll(b.cqx, &bad_attr), EINVAL);
  EXPECT_EQ(ibv_poll_cq(b.cq, 1, &wc), 0) << "a refused start_poll holds no lock";
}

TEST_F(Extended, CqExWorksWithChannelsNotifyAndDestroy) {
  Side a, b;
  make(a, "isoroce0");
  Opts ob;
  ob.cq_ex = true;
  ob.channel = true;
  ob.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
  make(b, "isoroce1", ob);
  pair_rc(a, b);
  EXPECT_NE(b.cqx->read_byte_len, nullptr);
  EXPECT_EQ(b.cqx->read_imm_data, nullptr) << "only the accessors asked for, as rxe";
  EXPECT_EQ(b.cqx->read_completion_ts, nullptr);
  EXPECT_EQ(b.ch->refcnt, 1);
  std::vector<uint8_t> src(100), dst(100);
  fill(src, 9);
  ibv_mr* smr = a.reg(src.data(), src.size());
  ibv_mr* dmr = b.reg(dst.data(), dst.size());
  ASSERT_TRUE(smr && dmr);
  post_recv(b, 42, dst.data(), 100, dmr->lkey);
  ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);
  ibv_sge sge{addr_of(src.data()), 77, smr->lkey};
  ibv_send_wr w{};
  w.sg_list = &sge, w.num_sge = 1, w.opcode = IBV_WR_SEND, w.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  pollfd p{b.ch->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, ibv_cq_ex_to_cq(b.cqx));
  EXPECT_EQ(ev_ctx, &b);
  ibv_ack_cq_events(ev_cq, 1);
  ASSERT_EQ(ibv_start_poll(b.cqx, nullptr), 0);
  EXPECT_EQ(b.cqx->wr_id, 42u);
  EXPECT_EQ(b.cqx->status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_wc_read_byte_len(b.cqx), 77u);
  ibv_end_poll(b.cqx);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 77), 0);
  // Destroyed through ibv_destroy_cq (QP first), which releases the channel.
  for (ibv_mr* m : b.mrs) EXPECT_EQ(ibv_dereg_mr(m), 0);
  b.mrs.clear();
  ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
  b.qp = nullptr;
  ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(b.cqx)), 0);
  b.cq = nullptr;
  EXPECT_EQ(b.ch->refcnt, 0);
}

TEST_F(Extended, CqExRefusesWhatItCannotDo) {
  Side s;
  s.ctx = open("isoroce0");
  ASSERT_NE(s.ctx, nullptr);
  auto refused = [&](ibv_cq_init_attr_ex a, int err) {
    errno = 0;
    ibv_cq_ex* c = ibv_create_cq_ex(s.ctx, &a);
    if (c) ibv_destroy_cq(ibv_cq_ex_to_cq(c));
    return c == nullptr && errno == err;
  };
  ibv_cq_init_attr_ex a{};
  a.cqe = 16;
  a.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  testing::internal::CaptureStderr();
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "completion timestamp";
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("isoroce-verbs: create_cq_ex: completion timestamps are not supported"), std::string::npos) << log;
  a.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "wallclock";
  for (uint64_t f : {uint64_t{IBV_WC_EX_WITH_CVLAN}, uint64_t{IBV_WC_EX_WITH_FLOW_TAG}, uint64_t{IBV_WC_EX_WITH_TM_INFO},
                     uint64_t{1} << 40}) {
    a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | f;
    testing::internal::CaptureStderr();
    EXPECT_TRUE(refused(a, EOPNOTSUPP)) << f;
    EXPECT_NE(testing::internal::GetCapturedStderr().find("wc_flags"), std::string::npos);
  }
  a.wc_flags = IBV_WC_STANDARD_FLAGS;
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "parent domain";
  a.comp_mask = 1u << 7;
  EXPECT_TRUE(refused(a, EINVAL)) << "unknown comp_mask";
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "ignore overrun";
  a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
  ibv_cq_ex* ok = ibv_create_cq_ex(s.ctx, &a);
  ASSERT_NE(ok, nullptr) << "single-threaded is accepted";
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(ok)), 0);
  a.comp_mask = 0;
  a.cqe = 0;
  EXPECT_TRUE(refused(a, EINVAL)) << "cqe 0";
  a.cqe = 16;
  a.comp_vector = 1;
  EXPECT_TRUE(refused(a, EINVAL)) << "comp_vector";
}

// ---- ibv_create_qp_ex and the ibv_wr_* API -------------------------------------

TEST_F(Extended, QpExPostsEveryRcOpcodeWithBytesChecked) {
  Side a, b;
  Opts oa;
  oa.send_ops = kRcOps;
  oa.send_sge = 3;
  make(a, "isoroce0", oa);
  make(b, "isoroce1");
  pair_rc(a, b);
  // a: sources, READ destination, atomic results. b: WRITE targets, receives, atomic word.
  std::vector<uint8_t> src(4096), lread(4096, 0), recv(4 * 512, 0), target(8192, 0);
  fill(src, 3);
  fill(target, 200);
  const std::vector<uint8_t> target0 = target;
  alignas(8) static uint64_t results[2];
  alignas(8) static uint64_t word;
  results[0] = results[1] = 0;
  word = 100;
  ibv_mr* smr = a.reg(src.data(), src.size());
  ibv_mr* lrmr = a.reg(lread.data(), lread.size());
  ibv_mr* resmr = a.reg(results, sizeof results);
  ibv_mr* rmr = b.reg(recv.data(), recv.size());
  ibv_mr* tmr = b.reg(target.data(), target.size());
  ibv_mr* wmr = b.reg(&word, sizeof word);
  ASSERT_TRUE(smr && lrmr && resmr && rmr && tmr && wmr);
  for (uint32_t i = 0; i < 4; ++i) post_recv(b, 100 + i, recv.data() + 512 * i, 512, rmr->lkey);

  ibv_qp_ex* x = a.qpx;
  ibv_wr_start(x);
  x->wr_id = 1, x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, tmr->rkey, addr_of(target.data() + 10));
  ibv_wr_set_sge(x, smr->lkey, addr_of(src.data()), 1000);
  x->wr_id = 2;
  ibv_wr_rdma_write_imm(x, tmr->rkey, addr_of(target.data() + 3000), htonl(0xfeed0002));
  const ibv_sge three[3] = {{addr_of(src.data() + 100), 50, smr->lkey},
                            {addr_of(src.data() + 500), 70, smr->lkey},
                            {addr_of(src.data() + 2000), 30, smr->lkey}};
  ibv_wr_set_sge_list(x, 3, three);
  x->wr_id = 3;
  uint8_t inl[40];
  std::memcpy(inl, "inline bytes, copied when they are set", 39);
  ibv_wr_send(x);
  ibv_wr_set_inline_data(x, inl, 39);
  std::memset(inl, 'X', sizeof inl);  // the library copied them already
  x->wr_id = 4;
  ibv_wr_send_imm(x, htonl(0xfeed0004));
  const ibv_data_buf parts[3] = {{src.data() + 7, 5}, {src.data() + 60, 11}, {src.data() + 900, 3}};
  ibv_wr_set_inline_data_list(x, 3, parts);
  x->wr_id = 5;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, smr->lkey, addr_of(src.data() + 1234), 333);
  // Nothing is visible to the daemon before wr_complete publishes the batch.
  EXPECT_TRUE(quiet(b.cq));
  EXPECT_TRUE(quiet(a.cq, 10));
  ASSERT_EQ(ibv_wr_complete(x), 0);
  auto sc = wait(a.cq, 5);
  ASSERT_EQ(sc.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sc[i].status, IBV_WC_SUCCESS) << i << ibv_wc_status_str(sc[i].status);
    EXPECT_EQ(sc[i].wr_id, i + 1);
  }
  EXPECT_EQ(sc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(sc[2].opcode, IBV_WC_SEND);
  auto rc = wait(b.cq, 4);
  ASSERT_EQ(rc.size(), 4u);
  EXPECT_EQ(rc[0].wr_id, 100u);
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ntohl(rc[0].imm_data), 0xfeed0002u);
  EXPECT_EQ(rc[0].byte_len, 150u);
  EXPECT_EQ(rc[1].wr_id, 101u);
  EXPECT_EQ(rc[1].opcode, IBV_WC_RECV);
  EXPECT_EQ(rc[1].byte_len, 39u);
  EXPECT_EQ(std::memcmp(recv.data() + 512, "inline bytes, copied when they are set", 39), 0);
  EXPECT_EQ(rc[2].wr_id, 102u);
  EXPECT_TRUE(rc[2].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(rc[2].imm_data), 0xfeed0004u);
  ASSERT_EQ(rc[2].byte_len, 19u);
  EXPECT_EQ(std::memcmp(recv.data() + 1024, src.data() + 7, 5), 0);
  EXPECT_EQ(std::memcmp(recv.data() + 1024 + 5, src.data() + 60, 11), 0);
  EXPECT_EQ(std::memcmp(recv.data() + 1024 + 16, src.data() + 900, 3), 0);
  EXPECT_EQ(rc[3].wr_id, 103u);
  EXPECT_EQ(rc[3].opcode, IBV_WC_RECV);
  EXPECT_EQ(rc[3].byte_len, 333u);
  EXPECT_EQ(std::memcmp(recv.data() + 1536, src.data() + 1234, 333), 0);
  // The WRITEs, and nothing around them.
  EXPECT_EQ(std::memcmp(target.data() + 10, src.data(), 1000), 0);
  EXPECT_EQ(std::memcmp(target.data() + 3000, src.data() + 100, 50), 0);
  EXPECT_EQ(std::memcmp(target.data() + 3050, src.data() + 500, 70), 0);
  EXPECT_EQ(std::memcmp(target.data() + 3120, src.data() + 2000, 30), 0);
  EXPECT_EQ(std::memcmp(target.data(), target0.data(), 10), 0);
  EXPECT_EQ(std::memcmp(target.data() + 1010, target0.data() + 1010, 1990), 0);
  EXPECT_EQ(std::memcmp(target.data() + 3150, target0.data() + 3150, 5042), 0);

  // READ and both atomics in a second batch.
  ibv_wr_start(x);
  x->wr_id = 6, x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_read(x, tmr->rkey, addr_of(target.data() + 5000));
  ibv_wr_set_sge(x, lrmr->lkey, addr_of(lread.data() + 1), 2500);
  x->wr_id = 7;
  ibv_wr_atomic_fetch_add(x, wmr->rkey, addr_of(&word), 23);
  ibv_wr_set_sge(x, resmr->lkey, addr_of(&results[0]), 8);
  x->wr_id = 8;
  ibv_wr_atomic_cmp_swp(x, wmr->rkey, addr_of(&word), 123, 7);
  ibv_wr_set_sge(x, resmr->lkey, addr_of(&results[1]), 8);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  sc = wait(a.cq, 3);
  ASSERT_EQ(sc.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sc[i].status, IBV_WC_SUCCESS) << i << ibv_wc_status_str(sc[i].status);
  EXPECT_EQ(sc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(sc[1].opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(sc[2].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(std::memcmp(lread.data() + 1, target.data() + 5000, 2500), 0);
  EXPECT_EQ(lread[0], 0);
  EXPECT_EQ(results[0], 100u) << "fetch_add returns the old value";
  EXPECT_EQ(results[1], 123u) << "cmp_swp returns the old value";
  EXPECT_EQ(word, 7u) << "100 + 23 = 123, swapped for 7";
}

TEST_F(Extended, QpExUdSendsWithSetUdAddr) {
  Side a, b;
  Opts oa;
  oa.type = IBV_QPT_UD;
  oa.send_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  make(a, "isoroce0", oa);
  Opts ob;
  ob.type = IBV_QPT_UD;
  ob.cq_ex = true;
  make(b, "isoroce1", ob);
  ud_ready(a);
  ud_ready(b);
  ibv_ah* ah = ah_to(a, "::ffff:10.0.0.2");
  ASSERT_NE(ah, nullptr);
  std::vector<uint8_t> src(512), recv(2 * 1024, 0);
  fill(src, 77);
  ibv_mr* smr = a.reg(src.data(), src.size());
  ibv_mr* rmr = b.reg(recv.data(), recv.size());
  ASSERT_TRUE(smr && rmr);
  post_recv(b, 1, recv.data(), 1024, rmr->lkey);
  post_recv(b, 2, recv.data() + 1024, 1024, rmr->lkey);
  ibv_qp_ex* x = a.qpx;
  ibv_wr_start(x);
  x->wr_id = 11, x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(x);
  ibv_wr_set_ud_addr(x, ah, b.qp->qp_num, kQkey);
  ibv_wr_set_sge(x, smr->lkey, addr_of(src.data()), 300);
  x->wr_id = 12;
  ibv_wr_send_imm(x, htonl(0x0badcafe));
  ibv_wr_set_inline_data(x, src.data() + 300, 20);
  ibv_wr_set_ud_addr(x, ah, b.qp->qp_num, kQkey);  // setters in any order
  ASSERT_EQ(ibv_wr_complete(x), 0);
  auto sc = wait(a.cq, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sc[1].wr_id, 12u);
  for (int i = 0; i < 2; ++i) {
    int rc = ENOENT;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((rc = ibv_start_poll(b.cqx, nullptr)) == ENOENT && std::chrono::steady_clock::now() < until) {
    }
    ASSERT_EQ(rc, 0);
    EXPECT_EQ(b.cqx->status, IBV_WC_SUCCESS);
    EXPECT_EQ(b.cqx->wr_id, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(ibv_wc_read_src_qp(b.cqx), a.qp->qp_num);
    EXPECT_TRUE(ibv_wc_read_wc_flags(b.cqx) & IBV_WC_GRH);
    EXPECT_EQ(ibv_wc_read_byte_len(b.cqx), kGrh + (i == 0 ? 300 : 20));
    if (i == 1) { EXPECT_EQ(ntohl(ibv_wc_read_imm_data(b.cqx)), 0x0badcafeu); }
    ibv_end_poll(b.cqx);
  }
  EXPECT_EQ(std::memcmp(recv.data() + kGrh, src.data(), 300), 0);
  EXPECT_EQ(std::memcmp(recv.data() + 1024 + kGrh, src.data() + 300, 20), 0);
  // A UD send without an address is refused at wr_complete, nothing posted.
  ibv_wr_start(x);
  x->wr_id = 13;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, smr->lkey, addr_of(src.data()), 8);
  EXPECT_EQ(ibv_wr_complete(x), EINVAL);
  EXPECT_TRUE(quiet(a.cq));
}

TEST_F(Extended, QpExFailedOrAbortedBatchesPostNothing) {
  Side a, b;
  Opts oa;
  oa.send_ops = kRcOps;
  make(a, "isoroce0", oa);
  make(b, "isoroce1");
  std::vector<uint8_t> src(256), recv(16 * 64, 0);
  fill(src, 5);
  ibv_mr* smr = a.reg(src.data(), src.size());
  ibv_mr* rmr = b.reg(recv.data(), recv.size());
  ASSERT_TRUE(smr && rmr);
  ibv_qp_ex* x = a.qpx;
  auto send = [&](uint64_t id, uint32_t len) {
    x->wr_id = id;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, smr->lkey, addr_of(src.data()), len);
  };
  // RESET: the shared validation refuses the batch.
  ibv_wr_start(x);
  send(1, 8);
  EXPECT_EQ(ibv_wr_complete(x), EINVAL);
  pair_rc(a, b);
  for (uint32_t i = 0; i < 8; ++i) post_recv(b, 500 + i, recv.data() + 64 * i, 64, rmr->lkey);

  // Aborted: never seen.
  ibv_wr_start(x);
  send(2, 8);
  send(3, 8);
  ibv_wr_abort(x);
  EXPECT_TRUE(quiet(b.cq));
  // A bad request in the middle (4 SGEs > max_send_sge 2) fails the batch.
  ibv_wr_start(x);
  send(4, 8);
  const ibv_sge four[4] = {{addr_of(src.data()), 1, smr->lkey}, {addr_of(src.data()), 1, smr->lkey},
                           {addr_of(src.data()), 1, smr->lkey}, {addr_of(src.data()), 1, smr->lkey}};
  x->wr_id = 5;
  ibv_wr_send(x);
  ibv_wr_set_sge_list(x, 4, four);
  send(6, 8);
  EXPECT_EQ(ibv_wr_complete(x), EINVAL);
  // Inline data beyond max_inline_data.
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_CAP, &qi), 0);
  std::vector<uint8_t> big(qi.cap.max_inline_data + 1, 1);
  ibv_wr_start(x);
  send(7, 8);
  x->wr_id = 8;
  ibv_wr_send(x);
  ibv_wr_set_inline_data(x, big.data(), big.size());
  EXPECT_EQ(ibv_wr_complete(x), EINVAL);
  // An atomic whose SGE is not 8 bytes (post_send's rule).
  ibv_wr_start(x);
  send(9, 8);
  x->wr_id = 10;
  ibv_wr_atomic_fetch_add(x, 1, 0, 1);
  ibv_wr_set_sge(x, smr->lkey, addr_of(src.data()), 4);
  EXPECT_EQ(ibv_wr_complete(x), EINVAL);
  // A setter with no work request started.
  ibv_wr_start(x);
  ibv_wr_set_sge(x, smr->lkey, addr_of(src.data()), 8);
  send(11, 8);
  EXPECT_EQ(ibv_wr_complete(x), EINVAL);
  EXPECT_TRUE(quiet(b.cq)) << "no failed batch posted anything";
  EXPECT_TRUE(quiet(a.cq, 10));
  // The next good batch goes through, with only its own requests.
  ibv_wr_start(x);
  send(12, 8);
  send(13, 9);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  auto sc = wait(a.cq, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].wr_id, 12u);
  EXPECT_EQ(sc[1].wr_id, 13u);
  auto rc = wait(b.cq, 2);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 500u);
  EXPECT_EQ(rc[0].byte_len, 8u);
  EXPECT_EQ(rc[1].byte_len, 9u);
  EXPECT_TRUE(quiet(b.cq, 50));
}

TEST_F(Extended, QpExFullQueueFailsTheBatchAtTheRingsSize) {
  // max_send_wr 4: a ring of 8 that holds 7. Unpublished elements cannot be
  // consumed, so a batch of 8 is full at its 8th request however fast the
  // daemon is — and posts nothing; a batch of 7 goes through.
  Side a, b;
  Opts oa;
  oa.send_ops = kRcOps;
  oa.depth = 4;
  make(a, "isoroce0", oa);
  Opts ob;
  ob.depth = 16;
  make(b, "isoroce1", ob);
  pair_rc(a, b);
  std::vector<uint8_t> src(64), recv(16 * 64);
  ibv_mr* smr = a.reg(src.data(), src.size());
  ibv_mr* rmr = b.reg(recv.data(), recv.size());
  ASSERT_TRUE(smr && rmr);
  for (uint32_t i = 0; i < 16; ++i) post_recv(b, i, recv.data() + 64 * i, 64, rmr->lkey);
  ibv_qp_ex* x = a.qpx;
  auto batch = [&](uint32_t n) {
    ibv_wr_start(x);
    for (uint32_t i = 0; i < n; ++i) {
      x->wr_id = i;
      x->wr_flags = IBV_SEND_SIGNALED;
      ibv_wr_send(x);
      ibv_wr_set_sge(x, smr->lkey, addr_of(src.data()), 4);
    }
    return ibv_wr_complete(x);
  };
  EXPECT_EQ(batch(8), ENOMEM);
  EXPECT_EQ(batch(50), ENOMEM);
  EXPECT_TRUE(quiet(b.cq));
  ASSERT_EQ(batch(7), 0);
  EXPECT_EQ(wait(a.cq, 7).size(), 7u);
  EXPECT_EQ(wait(b.cq, 7).size(), 7u);
  EXPECT_TRUE(quiet(b.cq, 50));
}

TEST_F(Extended, CreateQpExRefusesUnsupportedOpsAndAttributes) {
  Side s;
  s.ctx = open("isoroce0");
  ASSERT_NE(s.ctx, nullptr);
  s.pd = ibv_alloc_pd(s.ctx);
  s.cq = ibv_create_cq(s.ctx, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(s.pd && s.cq);
  ibv_qp_init_attr_ex base{};
  base.send_cq = base.recv_cq = s.cq;
  base.qp_type = IBV_QPT_RC;
  base.cap.max_send_wr = base.cap.max_recv_wr = 4;
  base.cap.max_send_sge = base.cap.max_recv_sge = 1;
  base.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  base.pd = s.pd;
  auto refused = [&](ibv_qp_init_attr_ex a, int err) {
    errno = 0;
    ibv_qp* q = ibv_create_qp_ex(s.ctx, &a);
    if (q) ibv_destroy_qp(q);
    return q == nullptr && errno == err;
  };
  ibv_qp_init_attr_ex a = base;
  for (uint64_t op : {uint64_t{IBV_QP_EX_WITH_TSO}, uint64_t{1} << 11, uint64_t{IBV_QP_EX_WITH_ATOMIC_WRITE}}) {
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | op;
    testing::internal::CaptureStderr();
    EXPECT_TRUE(refused(a, EOPNOTSUPP)) << op;
    EXPECT_NE(testing::internal::GetCapturedStderr().find("send_ops_flags"), std::string::npos);
  }
  a = base;
  a.qp_type = IBV_QPT_UD;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "RDMA on UD";
  a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "windows on UD";
  a = base;
  a.qp_type = IBV_QPT_UC;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "UC";
  a = base;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  a.comp_mask |= IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "TSO header";
  a.comp_mask = base.comp_mask | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  EXPECT_TRUE(refused(a, EOPNOTSUPP)) << "create flags";
  a = base;
  a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;  // no PD
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  EXPECT_TRUE(refused(a, EINVAL)) << "no PD";
  a = base;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  a.cap.max_send_sge = 1000;
  EXPECT_TRUE(refused(a, EINVAL)) << "capabilities";
  // Only the builders asked for; capabilities come back as ibv_create_qp's.
  a = base;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  ibv_qp* q = ibv_create_qp_ex(s.ctx, &a);
  ASSERT_NE(q, nullptr);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(q);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(&x->qp_base, q);
  EXPECT_NE(x->wr_send, nullptr);
  EXPECT_NE(x->wr_rdma_write, nullptr);
  EXPECT_EQ(x->wr_rdma_read, nullptr);
  EXPECT_EQ(x->wr_bind_mw, nullptr);
  EXPECT_GT(a.cap.max_inline_data, 0u);
  EXPECT_EQ(ibv_destroy_qp(q), 0);
  // ibv_create_qp (and ibv_create_qp_ex with only a PD, which is ibv_create_qp): no ibv_qp_ex.
  a = base;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  q = ibv_create_qp_ex(s.ctx, &a);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(ibv_qp_to_qp_ex(q), nullptr);
  EXPECT_EQ(ibv_destroy_qp(q), 0);
}

// ---- ibv_init_ah_from_wc / ibv_create_ah_from_wc ----------------------------------

// Memory windows through the ibv_wr_* API (as rxe has them): the target binds
// a type 2 window with ibv_wr_bind_mw, the initiator WRITEs through it, the
// owner ends it with ibv_wr_local_inv; a second window is ended by the
// initiator's ibv_wr_send_inv, after which its key is refused.
TEST_F(Extended, QpExBindsWindowsAndInvalidatesThem) {
  Side a, b;
  Opts oa, ob;
  oa.send_ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND_WITH_INV;
  ob.send_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
  make(a, "isoroce0", oa);
  make(b, "isoroce1", ob);
  ASSERT_NE(a.qpx->wr_send_inv, nullptr);
  ASSERT_NE(b.qpx->wr_bind_mw, nullptr);
  ASSERT_NE(b.qpx->wr_local_inv, nullptr);
  EXPECT_EQ(a.qpx->wr_bind_mw, nullptr);
  pair_rc(a, b);
  std::vector<uint8_t> src(4096), target(8192, 0), recv(64, 0);
  fill(src, 7);
  ibv_mr* smr = a.reg(src.data(), src.size());
  ibv_mr* tmr = b.reg(target.data(), target.size(), kAll | IBV_ACCESS_MW_BIND);
  ibv_mr* rmr = b.reg(recv.data(), recv.size());
  ASSERT_TRUE(smr && tmr && rmr);
  ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
  ibv_mw* mw2 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(mw && mw2) << std::strerror(errno);
  const ibv_mw_bind_info info{tmr, addr_of(target.data() + 1024), 4096, IBV_ACCESS_REMOTE_WRITE};
  // Binds window w to `key` on b; the completion's status.
  auto bind = [&](ibv_mw* w, uint32_t key) {
    ibv_wr_start(b.qpx);
    b.qpx->wr_id = key, b.qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_bind_mw(b.qpx, w, key, &info);
    EXPECT_EQ(ibv_wr_complete(b.qpx), 0);
    auto wc = wait(b.cq, 1);
    EXPECT_EQ(wc.size(), 1u);
    if (wc.size() != 1) return IBV_WC_GENERAL_ERR;
    EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
    EXPECT_EQ(wc[0].wr_id, key);
    return wc[0].status;
  };
  const uint32_t k1 = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind(mw, k1), IBV_WC_SUCCESS);
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.data(), 4096, smr->lkey, info.addr, k1), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(src.data(), target.data() + 1024, 4096), 0);
  // The owner invalidates k1 (a refused WRITE moves a's QP to the error
  // state, so only k2's refusal is checked, last); mw2 is bound.
  ibv_wr_start(b.qpx);
  b.qpx->wr_id = 50, b.qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_local_inv(b.qpx, k1);
  ASSERT_EQ(ibv_wr_complete(b.qpx), 0);
  auto wc = wait(b.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_LOCAL_INV);
  const uint32_t k2 = ibv_inc_rkey(mw2->rkey);
  ASSERT_EQ(bind(mw2, k2), IBV_WC_SUCCESS);
  fill(src, 9);
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.data(), 512, smr->lkey, info.addr + 8, k2), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(src.data(), target.data() + 1032, 512), 0);
  // The initiator's SEND_WITH_INV ends k2 at b; the receive names it.
  post_recv(b, 77, recv.data(), 64, rmr->lkey);
  ibv_wr_start(a.qpx);
  a.qpx->wr_id = 60, a.qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send_inv(a.qpx, k2);
  ibv_wr_set_sge(a.qpx, smr->lkey, addr_of(src.data()), 16);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  wc = wait(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  wc = wait(b.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wc[0].invalidated_rkey, k2);
  EXPECT_EQ(std::memcmp(src.data(), recv.data(), 16), 0);
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.data(), 64, smr->lkey, info.addr, k2), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
}

TEST_F(Extended, UdServerAnswersWithAnAhFromTheCompletion) {
  Side client, server;
  Opts o;
  o.type = IBV_QPT_UD;
  make(client, "isoroce0", o);
  make(server, "isoroce1", o);
  ud_ready(client);
  ud_ready(server);
  // The client's AH says TTL 17 and DSCP 26: the server's reply AH must carry them back.
  ibv_ah* to_server = ah_to(client, "::ffff:10.0.0.2", 17, 26 << 2);
  ASSERT_NE(to_server, nullptr);
  std::vector<uint8_t> cbuf(2048, 0), sbuf(2048, 0);
  ibv_mr* cmr = client.reg(cbuf.data(), cbuf.size());
  ibv_mr* smr = server.reg(sbuf.data(), sbuf.size());
  ASSERT_TRUE(cmr && smr);
  post_recv(server, 1, sbuf.data(), 1024, smr->lkey);
  post_recv(client, 2, cbuf.data() + 1024, 1024, cmr->lkey);
  const char ping[] = "ping from isoroce0";
  std::memcpy(cbuf.data(), ping, sizeof ping);
  ibv_sge sge{addr_of(cbuf.data()), sizeof ping, cmr->lkey};
  ibv_send_wr w{};
  w.wr_id = 10, w.sg_list = &sge, w.num_sge = 1, w.opcode = IBV_WR_SEND, w.send_flags = IBV_SEND_SIGNALED;
  w.wr.ud.ah = to_server, w.wr.ud.remote_qpn = server.qp->qp_num, w.wr.ud.remote_qkey = kQkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(client.qp, &w, &bad), 0);
  auto got = wait(server.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  ibv_wc wc = got[0];
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_TRUE(wc.wc_flags & IBV_WC_GRH);
  EXPECT_EQ(wc.byte_len, kGrh + sizeof ping);
  EXPECT_STREQ(reinterpret_cast<char*>(sbuf.data() + kGrh), ping);
  auto* grh = reinterpret_cast<ibv_grh*>(sbuf.data());

  ibv_ah_attr attr;
  std::memset(&attr, 0x5a, sizeof attr);
  ASSERT_EQ(ibv_init_ah_from_wc(server.ctx, 1, &wc, grh, &attr), 0);
  char text[64];
  inet_ntop(AF_INET6, attr.grh.dgid.raw, text, sizeof text);
  EXPECT_STREQ(text, "::ffff:10.0.0.1") << "the packet's source";
  EXPECT_EQ(attr.is_global, 1);
  EXPECT_EQ(attr.grh.sgid_index, 0);
  EXPECT_EQ(attr.grh.hop_limit, 17);
  EXPECT_EQ(attr.grh.traffic_class & 0xfc, 26 << 2);
  EXPECT_EQ(attr.grh.flow_label, 0u);
  EXPECT_EQ(attr.port_num, 1);
  EXPECT_EQ(attr.sl, wc.sl);
  EXPECT_EQ(attr.dlid, wc.slid);

  // The answer uses nothing but the completion and its GRH.
  ibv_ah* back = ibv_create_ah_from_wc(server.pd, &wc, grh, 1);
  ASSERT_NE(back, nullptr) << std::strerror(errno);
  server.ahs.push_back(back);
  const char pong[] = "pong from isoroce1, via ibv_create_ah_from_wc";
  std::memcpy(sbuf.data() + 1024, pong, sizeof pong);
  ibv_sge rs{addr_of(sbuf.data() + 1024), sizeof pong, smr->lkey};
  w = {};
  w.wr_id = 20, w.sg_list = &rs, w.num_sge = 1, w.opcode = IBV_WR_SEND, w.send_flags = IBV_SEND_SIGNALED;
  w.wr.ud.ah = back, w.wr.ud.remote_qpn = wc.src_qp, w.wr.ud.remote_qkey = kQkey;
  ASSERT_EQ(ibv_post_send(server.qp, &w, &bad), 0);
  auto reply = wait(client.cq, 2);  // the client's send and its receive
  ASSERT_EQ(reply.size(), 2u);
  const ibv_wc& r = reply[0].wr_id == 2 ? reply[0] : reply[1];
  ASSERT_EQ(r.wr_id, 2u);
  ASSERT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.src_qp, server.qp->qp_num);
  EXPECT_EQ(r.byte_len, kGrh + sizeof pong);
  EXPECT_STREQ(reinterpret_cast<char*>(cbuf.data() + 1024 + kGrh), pong);
  // The reply's IPv4 header (last 20 bytes of the GRH area): from 10.0.0.2, TTL 17.
  const uint8_t* ip4 = cbuf.data() + 1024 + 20;
  EXPECT_EQ(ip4[0], 0x45);
  EXPECT_EQ(ip4[8], 17) << "the hop limit came back";
  EXPECT_EQ(ip4[1] & 0xfc, 26 << 2) << "the traffic class came back";
  EXPECT_EQ(std::memcmp(ip4 + 12, "\x0a\x00\x00\x02", 4), 0);
  EXPECT_EQ(wait(server.cq, 1).size(), 1u);
}

TEST_F(Extended, InitAhFromWcFollowsRoceRulesAndRefusesTheRest) {
  Side s;
  s.ctx = open("isoroce1");  // GID ::ffff:10.0.0.2
  ASSERT_NE(s.ctx, nullptr);
  s.pd = ibv_alloc_pd(s.ctx);
  ASSERT_NE(s.pd, nullptr);
  ibv_wc wc{};
  wc.wc_flags = IBV_WC_GRH;
  wc.sl = 3;
  // An IPv4 GRH area as the engine writes it: 20 zero bytes, then the header.
  auto v4 = [](const char* src, const char* dst, uint8_t tos, uint8_t ttl) {
    ibv_grh g;
    std::memset(&g, 0, sizeof g);
    uint8_t* h = reinterpret_cast<uint8_t*>(&g) + 20;
    h[0] = 0x45, h[1] = tos, h[8] = ttl, h[9] = IPPROTO_UDP;
    inet_pton(AF_INET, src, h + 12);
    inet_pton(AF_INET, dst, h + 16);
    return g;
  };
  ibv_grh g = v4("10.0.0.7", "10.0.0.2", 0x48, 9);
  ibv_ah_attr attr;
  ASSERT_EQ(ibv_init_ah_from_wc(s.ctx, 1, &wc, &g, &attr), 0);
  char text[64];
  inet_ntop(AF_INET6, attr.grh.dgid.raw, text, sizeof text);
  EXPECT_STREQ(text, "::ffff:10.0.0.7");
  EXPECT_EQ(attr.grh.traffic_class, 0x48);
  EXPECT_EQ(attr.grh.hop_limit, 9);
  EXPECT_EQ(attr.sl, 3);
  // An IPv6 (RoCEv2) header is the GRH layout itself.
  ibv_grh g6;
  std::memset(&g6, 0, sizeof g6);
  g6.version_tclass_flow = htonl(6u << 28 | 0xb8u << 20 | 0x12345u);
  g6.next_hdr = IPPROTO_UDP;
  g6.hop_limit = 33;
  inet_pton(AF_INET6, "fd00::99", g6.sgid.raw);
  inet_pton(AF_INET6, "::ffff:10.0.0.2", g6.dgid.raw);
  ASSERT_EQ(ibv_init_ah_from_wc(s.ctx, 1, &wc, &g6, &attr), 0);
  inet_ntop(AF_INET6, attr.grh.dgid.raw, text, sizeof text);
  EXPECT_STREQ(text, "fd00::99");
  EXPECT_EQ(attr.grh.traffic_class, 0xb8);
  EXPECT_EQ(attr.grh.flow_label, 0x12345u);
  EXPECT_EQ(attr.grh.hop_limit, 33);
  EXPECT_EQ(attr.grh.sgid_index, 0);

  auto refused = [&](ibv_wc w, ibv_grh grh, uint8_t port, int err) {
    errno = 0;
    ibv_ah_attr a;
    const bool init_failed = ibv_init_ah_from_wc(s.ctx, port, &w, &grh, &a) == -1 && errno == err;
    errno = 0;
    ibv_ah* ah = ibv_create_ah_from_wc(s.pd, &w, &grh, port);
    if (ah) ibv_destroy_ah(ah);
    return init_failed && ah == nullptr && errno == err;
  };
  ibv_wc no_grh = wc;
  no_grh.wc_flags = IBV_WC_WITH_IMM;
  testing::internal::CaptureStderr();
  EXPECT_TRUE(refused(no_grh, g, 1, EPROTOTYPE)) << "RoCE needs the GRH";
  EXPECT_NE(testing::internal::GetCapturedStderr().find("IBV_WC_GRH"), std::string::npos);
  EXPECT_TRUE(refused(wc, g, 2, EINVAL)) << "port 2";
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(s.ctx, 1, &wc, nullptr, &attr), -1);
  EXPECT_EQ(errno, EINVAL) << "no GRH buffer";
  EXPECT_TRUE(refused(wc, v4("10.0.0.7", "239.1.1.1", 0, 64), 1, EINVAL)) << "multicast";
  EXPECT_TRUE(refused(wc, v4("10.0.0.7", "10.0.0.9", 0, 64), 1, ENOENT)) << "not our GID";
  ibv_grh zero;
  std::memset(&zero, 0, sizeof zero);
  EXPECT_TRUE(refused(wc, zero, 1, EPROTONOSUPPORT)) << "neither IPv4 nor IPv6";
  ibv_grh v1 = g6;
  v1.next_hdr = 0x1b;  // RoCE v1 (IB next header)
  EXPECT_TRUE(refused(wc, v1, 1, EPROTONOSUPPORT)) << "RoCE v1";
  ibv_grh mc6 = g6;
  inet_pton(AF_INET6, "ff02::1", mc6.dgid.raw);
  EXPECT_TRUE(refused(wc, mc6, 1, EINVAL)) << "IPv6 multicast";
}

// ---- ibv_rereg_mr ----------------------------------------------------------------

class Rereg : public Extended {
 protected:
  void SetUp() override {
    Extended::SetUp();
    make(a_, "isoroce0");
    make(b_, "isoroce1");
    pair_rc(a_, b_);
    src_.resize(8192);
    fill(src_, 41);
    smr_ = a_.reg(src_.data(), src_.size());
    ASSERT_NE(smr_, nullptr);
  }
  // WRITE len bytes of src_ (from offset `from`) into [raddr, +len) with rkey.
  ibv_wc_status write(uint64_t raddr, uint32_t rkey, uint32_t len, size_t from = 0) {
    return rdma(a_, IBV_WR_RDMA_WRITE, src_.data() + from, len, smr_->lkey, raddr, rkey);
  }
  Side a_, b_;
  std::vector<uint8_t> src_;
  ibv_mr* smr_ = nullptr;
};

TEST_F(Rereg, ChangeTranslationMovesTheMrToNewMemory) {
  std::vector<uint8_t> old_buf(4096, 0), new_buf(6000, 0);
  ibv_mr* mr = b_.reg(old_buf.data(), old_buf.size());
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(write(addr_of(old_buf.data()), mr->rkey, 4096), IBV_WC_SUCCESS);
  ASSERT_EQ(std::memcmp(old_buf.data(), src_.data(), 4096), 0);
  const uint32_t old_rkey = mr->rkey;
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, new_buf.data(), new_buf.size(), 0), 0);
  EXPECT_EQ(mr->addr, new_buf.data());
  EXPECT_EQ(mr->length, new_buf.size());
  EXPECT_EQ(mr->pd, b_.pd);
  EXPECT_NE(mr->rkey, old_rkey);
  ASSERT_EQ(write(addr_of(new_buf.data()), mr->rkey, 6000, 100), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(new_buf.data(), src_.data() + 100, 6000), 0);
  EXPECT_EQ(std::memcmp(old_buf.data(), src_.data(), 4096), 0) << "the old memory is untouched";
  // The local side too: the source MR moved, its new lkey gathers from the new place.
  std::vector<uint8_t> src2(3000);
  fill(src2, 99);
  ASSERT_EQ(ibv_rereg_mr(smr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, src2.data(), src2.size(), 0), 0);
  ASSERT_EQ(rdma(a_, IBV_WR_RDMA_WRITE, src2.data(), 3000, smr_->lkey, addr_of(new_buf.data() + 5), mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(new_buf.data() + 5, src2.data(), 3000), 0);
  // The old registration is gone: its rkey is refused (this ends the QP).
  EXPECT_EQ(rdma(a_, IBV_WR_RDMA_WRITE, src2.data(), 8, smr_->lkey, addr_of(old_buf.data()), old_rkey),
            IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Rereg, ChangePdMovesTheMrBetweenProtectionDomains) {
  ibv_pd* other = ibv_alloc_pd(b_.ctx);
  ASSERT_NE(other, nullptr);
  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mr = ibv_reg_mr(other, buf.data(), buf.size(), kAll);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, b_.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(mr->pd, b_.pd);
  EXPECT_EQ(mr->addr, buf.data());
  ASSERT_EQ(write(addr_of(buf.data() + 64), mr->rkey, 2048, 7), IBV_WC_SUCCESS) << "the QP's PD now";
  EXPECT_EQ(std::memcmp(buf.data() + 64, src_.data() + 7, 2048), 0);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  EXPECT_EQ(mr->pd, other);
  EXPECT_EQ(write(addr_of(buf.data()), mr->rkey, 64), IBV_WC_REM_ACCESS_ERR) << "another PD than the QP's";
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

TEST_F(Rereg, ChangeAccessGrantsAndRevokesRemoteAccess) {
  std::vector<uint8_t> buf(4096, 0), back(4096, 0);
  ibv_mr* mr = b_.reg(buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* bmr = a_.reg(back.data(), back.size());
  ASSERT_TRUE(mr && bmr);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  ASSERT_EQ(write(addr_of(buf.data()), mr->rkey, 4096, 1000), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(buf.data(), src_.data() + 1000, 4096), 0);
  // Read-only for the peer now: READ works, WRITE does not (which ends the QP).
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
            0);
  ASSERT_EQ(rdma(a_, IBV_WR_RDMA_READ, back.data(), 4096, bmr->lkey, addr_of(buf.data()), mr->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(back.data(), src_.data() + 1000, 4096), 0);
  EXPECT_EQ(write(addr_of(buf.data()), mr->rkey, 64), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Rereg, AllThreeFlagsAtOnce) {
  ibv_pd* other = ibv_alloc_pd(b_.ctx);
  ASSERT_NE(other, nullptr);
  std::vector<uint8_t> old_buf(1000, 0), new_buf(5000, 0);
  ibv_mr* mr = ibv_reg_mr(other, old_buf.data(), old_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS,
                         b_.pd, new_buf.data(), new_buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  ASSERT_EQ(write(addr_of(new_buf.data()), mr->rkey, 5000, 3), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(new_buf.data(), src_.data() + 3, 5000), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

TEST_F(Rereg, ErrorsLeaveTheOldRegistrationUsable) {
  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mr = b_.reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  const ibv_mr before = *mr;
  Side other;
  other.ctx = open("isoroce0");
  ASSERT_NE(other.ctx, nullptr);
  other.pd = ibv_alloc_pd(other.ctx);
  ASSERT_NE(other.pd, nullptr);
  struct Case {
    const char* what;
    int flags;
    ibv_pd* pd;
    void* addr;
    size_t len;
    int access;
    int rc;
  };
  const Case cases[] = {
      {"unknown flag", 1 << 3, nullptr, nullptr, 0, 0, IBV_REREG_MR_ERR_INPUT},
      {"translation without an address", IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 100, 0,
       IBV_REREG_MR_ERR_INPUT},
      {"translation without a length", IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buf.data(), 0, 0,
       IBV_REREG_MR_ERR_INPUT},
      {"access without CHANGE_ACCESS", IBV_REREG_MR_CHANGE_PD, b_.pd, nullptr, 0, IBV_ACCESS_LOCAL_WRITE,
       IBV_REREG_MR_ERR_INPUT},
      {"no PD", IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0, IBV_REREG_MR_ERR_INPUT},
      {"a PD of another context", IBV_REREG_MR_CHANGE_PD, other.pd, nullptr, 0, 0, IBV_REREG_MR_ERR_INPUT},
      {"remote write without local write", IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE,
       IBV_REREG_MR_ERR_INPUT},
      {"on-demand paging", IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, IBV_REREG_MR_ERR_INPUT},
      {"unmapped new range", IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, reinterpret_cast<void*>(0x1000), 4096, 0,
       IBV_REREG_MR_ERR_DONT_FORK_NEW},
  };
  uint8_t seed = 0;
  for (const Case& c : cases) {
    errno = 0;
    EXPECT_EQ(ibv_rereg_mr(mr, c.flags, c.pd, c.addr, c.len, c.access), c.rc) << c.what;
    EXPECT_NE(errno, 0) << c.what;
    EXPECT_EQ(mr->lkey, before.lkey) << c.what;
    EXPECT_EQ(mr->rkey, before.rkey) << c.what;
    EXPECT_EQ(mr->addr, before.addr) << c.what;
    EXPECT_EQ(mr->pd, before.pd) << c.what;
    ASSERT_EQ(write(addr_of(buf.data()), mr->rkey, 256, seed), IBV_WC_SUCCESS) << c.what;
    EXPECT_EQ(std::memcmp(buf.data(), src_.data() + seed, 256), 0) << c.what;
    seed = static_cast<uint8_t>(seed + 17);
  }
  EXPECT_EQ(ibv_rereg_mr(mr, 0, nullptr, nullptr, 0, 0), 0) << "no flags: nothing to change";
  EXPECT_EQ(mr->rkey, before.rkey);
  // The daemon refuses (a PD handle it never gave out): ERR_CMD; the MR
  // must not be used, but ibv_dereg_mr still releases it.
  ibv_pd fake = *b_.pd;
  fake.handle = 0xfffff;
  testing::internal::CaptureStderr();
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, &fake, nullptr, 0, 0), IBV_REREG_MR_ERR_CMD);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("ibv_rereg_mr"), std::string::npos);
  EXPECT_EQ(errno, EINVAL);
  b_.mrs.clear();
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

}  // namespace
}  // namespace isoroce::test
