// The verbs library called directly against a real `isoroced --loopback`
// (one per test suite): devices isoroce0 (10.0.0.1) and isoroce1 (10.0.0.2),
// a PD/CQ/QP per side, RC connection, polling with a deadline. The base of
// every library suite (library, extended, resize, shared-MR tests).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"

namespace isoroce::test {

inline constexpr int kAllAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
inline constexpr const char* kGid0 = "::ffff:10.0.0.1";
inline constexpr const char* kGid1 = "::ffff:10.0.0.2";

struct VerbsDev {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<ibv_mr*> mrs;  // deregistered first
  VerbsDev() = default;
  VerbsDev(const VerbsDev&) = delete;
  VerbsDev& operator=(const VerbsDev&) = delete;
  ~VerbsDev() {
    for (ibv_mr* m : mrs) ibv_dereg_mr(m);
    if (qp) ibv_destroy_qp(qp);
    if (cq) ibv_destroy_cq(cq);
    if (ch) ibv_destroy_comp_channel(ch);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

struct DevOptions {
  int cqe = 64;
  uint32_t send_wr = 16, recv_wr = 16;
  bool channel = false;
};

class VerbsTest : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    start({"--loopback"});
    setenv("ISOROCE_SOCKET", daemon_->socket().c_str(), 1);
  }

  static ibv_context* open(const char* name) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ibv_context* ctx = nullptr;
    for (int i = 0; i < n; ++i)
      if (std::string(ibv_get_device_name(list[i])) == name) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    return ctx;
  }
  // Context, PD, CQ (shared by send and receive), RC QP.
  static void make(VerbsDev& d, const char* name, const DevOptions& o = {}) {
    d.ctx = open(name);
    ASSERT_NE(d.ctx, nullptr);
    d.pd = ibv_alloc_pd(d.ctx);
    ASSERT_NE(d.pd, nullptr);
    if (o.channel) {
      d.ch = ibv_create_comp_channel(d.ctx);
      ASSERT_NE(d.ch, nullptr);
    }
    d.cq = ibv_create_cq(d.ctx, o.cqe, nullptr, d.ch, 0);
    ASSERT_NE(d.cq, nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = d.cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = o.send_wr;
    ia.cap.max_recv_wr = o.recv_wr;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 64;
    d.qp = ibv_create_qp(d.pd, &ia);
    ASSERT_NE(d.qp, nullptr);
  }
  // RESET -> INIT -> RTR -> RTS towards dgid/dqpn.
  static void connect(VerbsDev& d, const char* dgid, uint32_t dqpn) { connect_qp(d.qp, dgid, dqpn); }
  static void connect_qp(ibv_qp* qp, const char* dgid, uint32_t dqpn) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = kAllAccess;
    ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dqpn;
    a.rq_psn = 100;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    inet_pton(AF_INET6, dgid, a.ah_attr.grh.dgid.raw);
    ASSERT_EQ(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 100;
    a.max_rd_atomic = 4;
    ASSERT_EQ(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC),
              0);
  }
  // a on isoroce0 and b on isoroce1, connected to each other.
  static void pair(VerbsDev& a, VerbsDev& b, const DevOptions& ao = {}, const DevOptions& bo = {}) {
    ASSERT_NO_FATAL_FAILURE(make(a, "isoroce0", ao));
    ASSERT_NO_FATAL_FAILURE(make(b, "isoroce1", bo));
    ASSERT_NO_FATAL_FAILURE(connect(a, kGid1, b.qp->qp_num));
    ASSERT_NO_FATAL_FAILURE(connect(b, kGid0, a.qp->qp_num));
  }
  // Polls until n completions arrived or timeout_ms passed (at most max_batch per poll).
  static std::vector<ibv_wc> wait(ibv_cq* cq, size_t n, int timeout_ms = 5000, int max_batch = 16) {
    std::vector<ibv_wc> out;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out.size() < n && std::chrono::steady_clock::now() < until) {
      ibv_wc wc[64];
      const int want = std::min<int>(max_batch, static_cast<int>(std::min<size_t>(64, n - out.size())));
      const int k = ibv_poll_cq(cq, want, wc);
      for (int i = 0; i < k; ++i) out.push_back(wc[i]);
    }
    return out;
  }
  // One RDMA operation from d, waited for; its status.
  static ibv_wc_status rdma(VerbsDev& d, ibv_wr_opcode op, void* local, uint32_t len, uint32_t lkey,
                            uint64_t remote, uint32_t rkey) {
    return rdma(d.qp, d.cq, op, local, len, lkey, remote, rkey);
  }
  static ibv_wc_status rdma(ibv_qp* qp, ibv_cq* cq, ibv_wr_opcode op, void* local, uint32_t len, uint32_t lkey,
                            uint64_t remote, uint32_t rkey) {
    ibv_sge s{reinterpret_cast<uintptr_t>(local), len, lkey};
    ibv_send_wr w{};
    w.wr_id = 42, w.sg_list = &s, w.num_sge = 1, w.opcode = op, w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = remote, w.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp, &w, &bad) != 0) return IBV_WC_GENERAL_ERR;
    auto wc = wait(cq, 1);
    return wc.size() == 1 ? wc[0].status : IBV_WC_RESP_TIMEOUT_ERR;
  }

};

}  // namespace isoroce::test
