// libisoroce-verbs called directly (this binary links it in place of
// libibverbs): devices and queries, error paths that must fail before
// anything reaches the rings, registered memory remapped in place (stack,
// static, heap, overlapping), data through the rings, completion channels.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>
#include <vector>

#include "isoroce/verbs_ext.h"
#include "tests/daemon/harness.h"
#include "tests/verbs_compat/verbs_fixture.h"

namespace isoroce::test {
namespace {

constexpr int kAll = kAllAccess;

alignas(64) uint8_t g_static_buf[3 * 4096 + 100];

using Dev = VerbsDev;

class Library : public VerbsTest {
 protected:
  static void make(Dev& d, const char* name, ibv_qp_type type = IBV_QPT_RC, uint32_t depth = 16, bool channel = false) {
    d.ctx = open(name);
    ASSERT_NE(d.ctx, nullptr);
    d.pd = ibv_alloc_pd(d.ctx);
    ASSERT_NE(d.pd, nullptr);
    if (channel) ASSERT_NE(d.ch = ibv_create_comp_channel(d.ctx), nullptr);
    d.cq = ibv_create_cq(d.ctx, 2 * static_cast<int>(depth), nullptr, d.ch, 0);
    ASSERT_NE(d.cq, nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = d.cq;
    ia.qp_type = type;
    ia.cap.max_send_wr = depth;
    ia.cap.max_recv_wr = depth;
    ia.cap.max_send_sge = 2;
    ia.cap.max_recv_sge = 2;
    d.qp = ibv_create_qp(d.pd, &ia);
    ASSERT_NE(d.qp, nullptr);
  }
};

TEST_F(Library, DevicesPortAndGidAsRxeShowsThem) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_EQ(n, 2);
  EXPECT_STREQ(ibv_get_device_name(list[0]), "isoroce0");
  EXPECT_STREQ(ibv_get_device_name(list[1]), "isoroce1");
  EXPECT_EQ(list[0]->node_type, IBV_NODE_CA);
  EXPECT_EQ(list[0]->transport_type, IBV_TRANSPORT_IB);
  EXPECT_EQ(list[2], nullptr);
  EXPECT_NE(ibv_get_device_guid(list[0]), ibv_get_device_guid(list[1]));
  ibv_free_device_list(list);
  Dev d;
  d.ctx = open("isoroce1");
  ASSERT_NE(d.ctx, nullptr);
  ibv_port_attr pa;
  ASSERT_EQ(ibv_query_port(d.ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(pa.gid_tbl_len, 1);
  EXPECT_EQ(ibv_query_port(d.ctx, 2, &pa), EINVAL);
  ibv_gid gid;
  ASSERT_EQ(ibv_query_gid(d.ctx, 1, 0, &gid), 0);
  char text[64];
  inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  EXPECT_STREQ(text, "::ffff:10.0.0.2");
  ibv_gid_entry e;
  ASSERT_EQ(ibv_query_gid_ex(d.ctx, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  ibv_device_attr da;
  ASSERT_EQ(ibv_query_device(d.ctx, &da), 0);
  EXPECT_EQ(da.phys_port_cnt, 1);
  EXPECT_GE(da.max_qp_wr, 1024);
}

TEST_F(Library, InvalidArgumentsFailWithErrnoAndALogLine) {
  Dev d;
  d.ctx = open("isoroce0");
  ASSERT_NE(d.ctx, nullptr);
  d.pd = ibv_alloc_pd(d.ctx);
  ASSERT_NE(d.pd, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(d.ctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_create_cq(d.ctx, 1 << 20, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  d.cq = ibv_create_cq(d.ctx, 8, nullptr, nullptr, 0);
  ASSERT_NE(d.cq, nullptr);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = d.cq;
  ia.qp_type = IBV_QPT_UC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  EXPECT_EQ(ibv_create_qp(d.pd, &ia), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_sge = 1000;
  EXPECT_EQ(ibv_create_qp(d.pd, &ia), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ia.cap.max_send_sge = 1;
  d.qp = ibv_create_qp(d.pd, &ia);
  ASSERT_NE(d.qp, nullptr);
  EXPECT_GT(ia.cap.max_inline_data, 0u) << "inline data fills the WQE element, as rxe";
  // An address vector without a GRH means nothing on RoCE.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = kAll;
  ASSERT_EQ(ibv_modify_qp(d.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.ah_attr.dlid = 1;
  EXPECT_EQ(ibv_modify_qp(d.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU), EINVAL);
  // INIT -> RTS skips RTR: the daemon refuses, the state stays.
  a = {};
  a.qp_state = IBV_QPS_RTS;
  EXPECT_NE(ibv_modify_qp(d.qp, &a, IBV_QP_STATE), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(d.qp, &q, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(qi.cap.max_send_wr, 4u);
  // MRs: empty, unmapped.
  EXPECT_EQ(ibv_reg_mr(d.pd, g_static_buf, 0, kAll), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_reg_mr(d.pd, reinterpret_cast<void*>(0x1000), 4096, kAll), nullptr);
  EXPECT_EQ(errno, EFAULT);
  // Destroying a CQ a QP uses fails and leaves both usable.
  EXPECT_NE(ibv_destroy_cq(d.cq), 0);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(d.cq, 1, &wc), 0);
}

TEST_F(Library, PostingInTheWrongStateOrWithBadWorkRequestsFailsWithBadWr) {
  Dev d;
  make(d, "isoroce0", IBV_QPT_RC, 4);
  static uint8_t buf[4096];
  ibv_mr* mr = ibv_reg_mr(d.pd, buf, sizeof buf, kAll);
  ASSERT_NE(mr, nullptr);
  d.mrs.push_back(mr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
  ibv_send_wr w2{};
  w2.wr_id = 2, w2.sg_list = &sge, w2.num_sge = 1, w2.opcode = IBV_WR_SEND;
  ibv_send_wr w1 = w2;
  w1.wr_id = 1, w1.next = &w2;
  ibv_send_wr* bad = nullptr;
  // RESET: neither queue takes work.
  EXPECT_EQ(ibv_post_send(d.qp, &w1, &bad), EINVAL);
  EXPECT_EQ(bad, &w1);
  ibv_recv_wr r{};
  r.sg_list = &sge, r.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(ibv_post_recv(d.qp, &r, &rbad), EINVAL);
  EXPECT_EQ(rbad, &r);
  // INIT: receives yes, sends no.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = kAll;
  ASSERT_EQ(ibv_modify_qp(d.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  EXPECT_EQ(ibv_post_recv(d.qp, &r, &rbad), 0);
  bad = nullptr;
  EXPECT_EQ(ibv_post_send(d.qp, &w1, &bad), EINVAL);
  EXPECT_EQ(bad, &w1);
  // Too many receive SGEs.
  ibv_sge sges[3] = {sge, sge, sge};
  r.sg_list = sges, r.num_sge = 3;
  EXPECT_EQ(ibv_post_recv(d.qp, &r, &rbad), EINVAL);
}

TEST_F(Library, BadSendWorkRequestsAreRefusedAtTheirPosition) {
  Dev a, b;
  make(a, "isoroce0", IBV_QPT_RC, 4);
  make(b, "isoroce1", IBV_QPT_RC, 4);
  connect(a, "::ffff:10.0.0.2", b.qp->qp_num);
  static uint8_t buf[8192];
  ibv_mr* mr = ibv_reg_mr(a.pd, buf, sizeof buf, kAll);
  ASSERT_NE(mr, nullptr);
  a.mrs.push_back(mr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
  ibv_sge three[3] = {sge, sge, sge};
  ibv_send_wr ok{}, w{};
  ok.sg_list = &sge, ok.num_sge = 1, ok.opcode = IBV_WR_RDMA_WRITE, ok.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  auto refused = [&](ibv_send_wr bad_wr) {
    ibv_send_wr first = ok;
    first.next = &bad_wr;
    bad = nullptr;
    const int rc = ibv_post_send(a.qp, &first, &bad);
    return rc == EINVAL && bad == &bad_wr;
  };
  w = ok, w.num_sge = 3, w.sg_list = three;
  EXPECT_TRUE(refused(w)) << "num_sge > max_send_sge";
  w = ok, w.opcode = static_cast<ibv_wr_opcode>(IBV_WR_BIND_MW);
  EXPECT_TRUE(refused(w)) << "opcode";
  w = ok, w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;  // 64 bytes, not 8
  EXPECT_TRUE(refused(w)) << "atomic length";
  w = ok, w.send_flags |= IBV_SEND_INLINE, sge.length = 4096;
  EXPECT_TRUE(refused(w)) << "inline beyond max_inline_data";
  sge.length = 64;
  // The good first WRs were posted and complete.
  EXPECT_EQ(wait(a.cq, 4).size(), 4u);
}

TEST_F(Library, FullSendQueueGivesEnomemAndBadWr) {
  // A QP towards a QP number nobody has: nothing is acknowledged, so the
  // engine's send queue and then the ring fill up.
  Dev a, b;
  make(a, "isoroce0", IBV_QPT_RC, 4);
  make(b, "isoroce1", IBV_QPT_RC, 4);
  connect(a, "::ffff:10.0.0.2", b.qp->qp_num + 1000);
  static uint8_t buf[4096];
  ibv_mr* mr = ibv_reg_mr(a.pd, buf, sizeof buf, kAll);
  ASSERT_NE(mr, nullptr);
  a.mrs.push_back(mr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 8, mr->lkey};
  std::vector<ibv_send_wr> wrs(200);
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].wr_id = i;
    wrs[i].sg_list = &sge;
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_SEND;
    wrs[i].send_flags = IBV_SEND_SIGNALED;
    wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a.qp, &wrs[0], &bad), ENOMEM);
  ASSERT_NE(bad, nullptr);
  const size_t at = static_cast<size_t>(bad - wrs.data());
  EXPECT_GE(at, 7u) << "the ring holds 7 of max_send_wr 4 (a ring of 8)";
  EXPECT_LT(at, 50u);
}

TEST_F(Library, RegisteredMemoryIsSharedInPlaceStackStaticHeapOverlapping) {
  Dev a, b;
  make(a, "isoroce0");
  make(b, "isoroce1");
  connect(a, "::ffff:10.0.0.2", b.qp->qp_num);
  connect(b, "::ffff:10.0.0.1", a.qp->qp_num);
  // Source on the stack, filled before registration (the remap keeps it).
  alignas(64) uint8_t stack_src[6000];
  for (size_t i = 0; i < sizeof stack_src; ++i) stack_src[i] = static_cast<uint8_t>(i * 7 + 1);
  ibv_mr* src = ibv_reg_mr(a.pd, stack_src, sizeof stack_src, kAll);
  ASSERT_NE(src, nullptr);
  for (size_t i = 0; i < sizeof stack_src; ++i) ASSERT_EQ(stack_src[i], static_cast<uint8_t>(i * 7 + 1));
  // Destination: static memory, registered as two overlapping MRs.
  ibv_mr* dst1 = ibv_reg_mr(b.pd, g_static_buf, 8192, kAll);
  ibv_mr* dst2 = ibv_reg_mr(b.pd, g_static_buf + 4000, sizeof g_static_buf - 4000, kAll);
  ASSERT_NE(dst1, nullptr);
  ASSERT_NE(dst2, nullptr);
  // Heap memory for a READ back.
  auto* heap = static_cast<uint8_t*>(std::malloc(10000));
  std::memset(heap, 0, 10000);
  ibv_mr* hmr = ibv_reg_mr(a.pd, heap, 10000, kAll);
  ASSERT_NE(hmr, nullptr);

  ibv_sge s{reinterpret_cast<uintptr_t>(stack_src), 6000, src->lkey};
  ibv_send_wr w{};
  w.wr_id = 1, w.sg_list = &s, w.num_sge = 1, w.opcode = IBV_WR_RDMA_WRITE, w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(g_static_buf + 5000);  // inside both MRs' overlap and beyond
  w.wr.rdma.rkey = dst2->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  auto wc = wait(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(std::memcmp(g_static_buf + 5000, stack_src, 6000), 0) << "the daemon wrote our static pages in place";
  // READ through the other MR (dst1 covers [0, 8192)) into the heap buffer.
  ibv_sge h{reinterpret_cast<uintptr_t>(heap + 100), 3000, hmr->lkey};
  w = {};
  w.wr_id = 2, w.sg_list = &h, w.num_sge = 1, w.opcode = IBV_WR_RDMA_READ, w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(g_static_buf + 5000), w.wr.rdma.rkey = dst1->rkey;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  wc = wait(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(std::memcmp(heap + 100, stack_src, 3000), 0);
  EXPECT_EQ(ibv_dereg_mr(hmr), 0);
  EXPECT_EQ(ibv_dereg_mr(dst2), 0);
  EXPECT_EQ(ibv_dereg_mr(dst1), 0);
  EXPECT_EQ(ibv_dereg_mr(src), 0);
  std::free(heap);
}

TEST_F(Library, SendWithImmediateWakesTheCompletionChannel) {
  Dev a, b;
  make(a, "isoroce0", IBV_QPT_RC, 16, true);
  make(b, "isoroce1", IBV_QPT_RC, 16, true);
  connect(a, "::ffff:10.0.0.2", b.qp->qp_num);
  connect(b, "::ffff:10.0.0.1", a.qp->qp_num);
  static uint8_t sbuf[4096], rbuf[4096];
  ibv_mr* smr = ibv_reg_mr(a.pd, sbuf, sizeof sbuf, kAll);
  ibv_mr* rmr = ibv_reg_mr(b.pd, rbuf, sizeof rbuf, kAll);
  ASSERT_TRUE(smr && rmr);
  ibv_sge rs{reinterpret_cast<uintptr_t>(rbuf), 4096, rmr->lkey};
  ibv_recv_wr r{};
  r.wr_id = 77, r.sg_list = &rs, r.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(b.qp, &r, &rbad), 0);
  ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);
  std::memcpy(sbuf, "hello, verbs", 13);
  ibv_sge ss{reinterpret_cast<uintptr_t>(sbuf), 13, smr->lkey};
  ibv_send_wr w{};
  w.wr_id = 5, w.sg_list = &ss, w.num_sge = 1, w.opcode = IBV_WR_SEND_WITH_IMM;
  w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, w.imm_data = htonl(0xabcdef01);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  pollfd p{b.ch->fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "the channel's fd is pollable";
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, b.cq);
  ibv_ack_cq_events(ev_cq, 1);
  auto wc = wait(b.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 77u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wc[0].byte_len, 13u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc[0].imm_data), 0xabcdef01u);
  EXPECT_EQ(wc[0].qp_num, b.qp->qp_num);
  EXPECT_STREQ(reinterpret_cast<char*>(rbuf), "hello, verbs");
  // Non-blocking channel with nothing pending: EAGAIN, not a hang.
  fcntl(b.ch->fd, F_SETFL, fcntl(b.ch->fd, F_GETFL) | O_NONBLOCK);
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(b.ch, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(wait(a.cq, 1).size(), 1u);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(rmr), 0);
}

TEST_F(Library, InlineSendsCarryTheirBytesUpToMaxInlineData) {
  Dev a, b;
  make(a, "isoroce0");
  make(b, "isoroce1");
  connect(a, "::ffff:10.0.0.2", b.qp->qp_num);
  connect(b, "::ffff:10.0.0.1", a.qp->qp_num);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_CAP, &qi), 0);
  const uint32_t max_inline = qi.cap.max_inline_data;
  ASSERT_GE(max_inline, 16u);
  std::vector<uint8_t> src(max_inline + 1), dst(4096);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 3);
  ibv_mr* rmr = ibv_reg_mr(b.pd, dst.data(), dst.size(), kAll);
  ASSERT_NE(rmr, nullptr);
  b.mrs.push_back(rmr);
  for (uint32_t len : {1u, 7u, 13u, max_inline}) {
    std::fill(dst.begin(), dst.end(), 0);
    ibv_sge rs{reinterpret_cast<uintptr_t>(dst.data()), 4096, rmr->lkey};
    ibv_recv_wr r{};
    r.wr_id = len, r.sg_list = &rs, r.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(ibv_post_recv(b.qp, &r, &rbad), 0);
    // Two SGEs, neither registered: inline data is copied at post time.
    ibv_sge ss[2] = {{reinterpret_cast<uintptr_t>(src.data()), len / 2, 0},
                     {reinterpret_cast<uintptr_t>(src.data() + len / 2), len - len / 2, 0}};
    ibv_send_wr w{};
    w.wr_id = len, w.sg_list = ss, w.num_sge = 2, w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
    auto wc = wait(b.cq, 1);
    ASSERT_EQ(wc.size(), 1u) << len;
    EXPECT_EQ(wc[0].byte_len, len);
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), len), 0) << len;
    EXPECT_EQ(wait(a.cq, 1).size(), 1u);
  }
  ibv_sge big{reinterpret_cast<uintptr_t>(src.data()), max_inline + 1, 0};
  ibv_send_wr w{};
  w.sg_list = &big, w.num_sge = 1, w.opcode = IBV_WR_SEND, w.send_flags = IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);
  EXPECT_EQ(bad, &w);
}

// A WRITE with an L_Key of nobody completes with IBV_WC_LOC_PROT_ERR, the QP
// goes to ERR, and the daemon's QP-fatal event reaches ibv_get_async_event
// through the context's async_fd (readable in poll(2) first), naming the
// application's own ibv_qp; destroying the QP waits for the acknowledgement.
TEST_F(Library, QpFatalReachesIbvGetAsyncEventThroughAsyncFd) {
  Dev a, b;
  make(a, "isoroce0");
  make(b, "isoroce1");
  connect(a, "::ffff:10.0.0.2", b.qp->qp_num);
  connect(b, "::ffff:10.0.0.1", a.qp->qp_num);
  // Nothing yet: a non-blocking async_fd says EAGAIN.
  const int flags = fcntl(a.ctx->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(a.ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_async_event ev{};
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(a.ctx, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(fcntl(a.ctx->async_fd, F_SETFL, flags), 0);

  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(a.pd, buf.data(), buf.size(), kAll);
  ASSERT_NE(mr, nullptr);
  a.mrs.push_back(mr);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), 64, mr->lkey ^ 0x5a5a00};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 42;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = 0x1000;
  wr.wr.rdma.rkey = 1;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  auto wc = wait(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 42u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);

  pollfd p{a.ctx->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "async_fd never became readable";
  ASSERT_EQ(ibv_get_async_event(a.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ev.element.qp, a.qp);
  ibv_ack_async_event(&ev);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a.qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
  EXPECT_EQ(ibv_destroy_qp(a.qp), 0);  // returns: the event was acknowledged
  a.qp = nullptr;
  // The peer saw nothing.
  ASSERT_EQ(fcntl(b.ctx->async_fd, F_SETFL, fcntl(b.ctx->async_fd, F_GETFL) | O_NONBLOCK), 0);
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(b.ctx, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
}

// The flow class: isoroce_qp_set_class (isoroce/verbs_ext.h) and, for
// unmodified programs, ISOROCE_FLOW_CLASS; the daemon's view shows it.
TEST_F(Library, FlowClassFromVerbsExtAndFromTheEnvironment) {
  Verbs admin(daemon_->socket(), "isoroce0");
  auto cls = [&](uint32_t qpn) {
    json r = admin.call({{"op", "qp"}, {"qpn", qpn}});
    return r.value("qp", json::object()).value("class", std::string("?"));
  };
  Dev a;
  make(a, "isoroce0");
  EXPECT_EQ(cls(a.qp->qp_num), "bandwidth");
  EXPECT_EQ(isoroce_qp_set_class_if_present(a.qp, ISOROCE_CLASS_LATENCY), 0);
  EXPECT_EQ(cls(a.qp->qp_num), "latency");
  EXPECT_EQ(isoroce_qp_set_class(a.qp, ISOROCE_CLASS_THROUGHPUT), 0);
  EXPECT_EQ(cls(a.qp->qp_num), "throughput");
  EXPECT_EQ(isoroce_qp_set_class(a.qp, static_cast<isoroce_flow_class>(9)), EINVAL);

  setenv("ISOROCE_FLOW_CLASS", "latency", 1);
  Dev b;
  make(b, "isoroce0");
  EXPECT_EQ(cls(b.qp->qp_num), "latency");
  setenv("ISOROCE_FLOW_CLASS", "fastest", 1);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = b.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(b.pd, &ia), nullptr) << "an unknown class is refused, not ignored";
  EXPECT_EQ(errno, EINVAL);
  unsetenv("ISOROCE_FLOW_CLASS");
}

// The tenant of an unmodified program's QPs: ISOROCE_TENANT; a bad name is refused.
TEST_F(Library, TenantFromTheEnvironment) {
  Verbs admin(daemon_->socket(), "isoroce0");
  auto tenant = [&](uint32_t qpn) {
    json r = admin.call({{"op", "qp"}, {"qpn", qpn}});
    return r.value("qp", json::object()).value("tenant", std::string("none"));
  };
  setenv("ISOROCE_TENANT", "analytics", 1);
  Dev a;
  make(a, "isoroce0");
  EXPECT_EQ(tenant(a.qp->qp_num), "analytics");
  setenv("ISOROCE_TENANT", "no/slashes", 1);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = a.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a.pd, &ia), nullptr) << "a bad tenant name is refused, not ignored";
  EXPECT_EQ(errno, EINVAL);
  unsetenv("ISOROCE_TENANT");
  Dev b;
  make(b, "isoroce0");
  EXPECT_EQ(tenant(b.qp->qp_num), "none");
}

}  // namespace
}  // namespace isoroce::test
