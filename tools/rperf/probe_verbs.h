// isoroce-rperf-probe's verbs helpers (tools/rperf/probe.cc): its options,
// opening a device, CQs, RC QPs connected by GID and QPN, registered memory,
// posting, and a clear error with errno for every failure (exit 1).
#pragma once

#include <infiniband/verbs.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace isoroce::tools::rperf_probe {

inline constexpr int kExitSetup = 1, kExitUsage = 2;
inline constexpr uint32_t kRecvDepth = 128;

struct Options {
  std::string device, peer_device, samples_path, only, connect_to;
  int serve_port = 0;
  int iters = 10000, warmup = 100, gid_index = 0, timeout_ms = 5000;
  uint32_t size = 64, bg_bytes = 0, bg_depth = 4;
  bool json = false, classes = true;
};

[[noreturn]] inline void fail(const std::string& what, int err) {
  std::fprintf(stderr, "isoroce-rperf-probe: %s: %s (errno %d)\n", what.c_str(), std::strerror(err), err);
  std::exit(kExitSetup);
}

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// One opened device: context, PD, port attributes and the GID used.
struct Dev {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
};

inline Dev open_dev(const std::string& name, int gid_index) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    std::fprintf(stderr,
                 "isoroce-rperf-probe: no RDMA device (run it with LD_PRELOAD=libisoroce-verbs.so and "
                 "ISOROCE_SOCKET against an isoroced)\n");
    std::exit(kExitSetup);
  }
  Dev d;
  d.name = name;
  std::string names;
  for (int i = 0; i < n; ++i) {
    const std::string dn = ibv_get_device_name(list[i]);
    names += " " + dn;
    if (dn == name && !d.ctx) {
      d.ctx = ibv_open_device(list[i]);
      if (!d.ctx) fail("ibv_open_device " + name, errno);
    }
  }
  ibv_free_device_list(list);
  if (!d.ctx) {
    std::fprintf(stderr, "isoroce-rperf-probe: no device '%s' (devices:%s)\n", name.c_str(), names.c_str());
    std::exit(kExitSetup);
  }
  if (!(d.pd = ibv_alloc_pd(d.ctx))) fail("ibv_alloc_pd on " + name, errno);
  if (int e = ibv_query_port(d.ctx, 1, &d.port)) fail("ibv_query_port on " + name, e);
  if (int e = ibv_query_gid(d.ctx, 1, gid_index, &d.gid)) fail("ibv_query_gid on " + name, e);
  return d;
}

// The first device's name, or the first one other than `not_this`.
inline std::string pick_device(const std::string& not_this) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::string out;
  for (int i = 0; list && i < n && out.empty(); ++i) {
    const std::string dn = ibv_get_device_name(list[i]);
    if (dn != not_this) out = dn;
  }
  if (list) ibv_free_device_list(list);
  return out;
}

inline ibv_cq* make_cq(Dev& d, int cqe) {
  ibv_cq* cq = ibv_create_cq(d.ctx, cqe, nullptr, nullptr, 0);
  if (!cq) fail("ibv_create_cq on " + d.name, errno);
  return cq;
}

inline ibv_qp* make_qp(Dev& d, ibv_cq* scq, ibv_cq* rcq, uint32_t send_wr) {
  ibv_qp_init_attr ia{};
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = send_wr;
  ia.cap.max_recv_wr = kRecvDepth;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(d.pd, &ia);
  if (!qp) fail("ibv_create_qp on " + d.name, errno);
  return qp;
}

// RESET -> INIT -> RTR -> RTS towards (dgid, dqpn) on `from`'s port 1.
inline void connect(Dev& from, ibv_qp* qp, const ibv_gid& dgid, uint32_t dqpn, int gid_index) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    fail("ibv_modify_qp INIT on " + from.name, e);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = from.port.active_mtu;
  a.dest_qp_num = dqpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  a.ah_attr.grh.dgid = dgid;
  if (int e = ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    fail("ibv_modify_qp RTR on " + from.name, e);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  if (int e = ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC))
    fail("ibv_modify_qp RTS on " + from.name, e);
}

struct Mem {
  std::vector<uint8_t> bytes;
  ibv_mr* mr = nullptr;
};

inline void reg(Dev& d, Mem& m, std::size_t len, int access) {
  m.bytes.assign(std::max<std::size_t>(len, 1), 0x5a);
  m.mr = ibv_reg_mr(d.pd, m.bytes.data(), m.bytes.size(), access);
  if (!m.mr) fail("ibv_reg_mr of " + std::to_string(len) + " bytes on " + d.name, errno);
}

inline void post_recv(ibv_qp* qp, Mem& m, uint32_t len) {
  ibv_sge s{reinterpret_cast<uint64_t>(m.bytes.data()), len, m.mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.sg_list = &s;
  wr.num_sge = 1;
  if (int e = ibv_post_recv(qp, &wr, &bad)) fail("ibv_post_recv", e);
}

// Takes the receive completions there are and posts as many receives again.
inline void refill(ibv_cq* cq, ibv_qp* qp, Mem& m, uint32_t len) {
  ibv_wc wc[16];
  int k;
  while ((k = ibv_poll_cq(cq, 16, wc)) > 0) {
    for (int i = 0; i < k; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "isoroce-rperf-probe: receive completion: %s\n", ibv_wc_status_str(wc[i].status));
        std::exit(kExitSetup);
      }
      post_recv(qp, m, len);
    }
  }
}

inline void post_send(ibv_qp* qp, Mem& m, uint32_t len, uint64_t id) {
  ibv_sge s{reinterpret_cast<uint64_t>(m.bytes.data()), len, m.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (int e = ibv_post_send(qp, &wr, &bad)) fail("ibv_post_send", e);
}

}  // namespace isoroce::tools::rperf_probe
