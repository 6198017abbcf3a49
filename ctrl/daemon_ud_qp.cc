#include "ctrl/daemon_ud_qp.h"

#include <cstring>

namespace isoroce::ctrl {
namespace {

std::string failed(const char* what, int err) { return std::string(what) + " failed: " + std::strerror(err); }

}  // namespace

DaemonUdQp::DaemonUdQp(const DaemonUdQpConfig& c)
    : config_(c), mem_(new uint8_t[static_cast<size_t>(c.recvs) * c.slot_bytes]()) {}

std::string DaemonUdQp::create(transport::Engine& e) {
  auto pd = e.alloc_pd();
  if (!pd.ok()) return failed("alloc_pd", pd.err());
  pd_ = pd.value(), has_pd_ = true;
  auto cq = e.create_cq(static_cast<int>(config_.recvs + config_.sends));
  if (!cq.ok()) return failed("create_cq", cq.err());
  cq_ = cq.value(), has_cq_ = true;
  const size_t bytes = static_cast<size_t>(config_.recvs) * config_.slot_bytes;
  auto mr = e.reg_mr(pd_, mem_.get(), bytes, reinterpret_cast<uint64_t>(mem_.get()), IBV_ACCESS_LOCAL_WRITE);
  if (!mr.ok()) return failed("reg_mr", mr.err());
  lkey_ = mr.value().lkey, has_mr_ = true;
  transport::QpCreate qc;
  qc.pd = pd_;
  qc.send_cq = qc.recv_cq = cq_;
  qc.qpn = config_.qpn;
  qc.init.qp_type = IBV_QPT_UD;
  qc.init.cap.max_send_wr = config_.sends;
  qc.init.cap.max_recv_wr = config_.recvs;
  qc.init.cap.max_send_sge = 1;
  qc.init.cap.max_recv_sge = 1;
  qc.init.cap.max_inline_data = config_.max_inline;
  auto qp = e.create_qp(qc);
  if (!qp.ok()) return failed((std::string("create_qp (") + config_.what + ")").c_str(), qp.err());
  has_qp_ = true;
  const wire::Qpn q(config_.qpn);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = config_.qkey;
  if (int rc = e.modify_qp(q, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return failed("modify_qp INIT", rc);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (int rc = e.modify_qp(q, a, IBV_QP_STATE)) return failed("modify_qp RTR", rc);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (int rc = e.modify_qp(q, a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return failed("modify_qp RTS", rc);
  for (uint32_t i = 0; i < config_.recvs; ++i) post_recv(e, i);
  return {};
}

void DaemonUdQp::destroy(transport::Engine& e) {
  if (has_qp_) e.destroy_qp(wire::Qpn(config_.qpn));
  if (has_cq_) e.destroy_cq(cq_);
  if (has_mr_) e.dereg_mr(lkey_);
  if (has_pd_) e.dealloc_pd(pd_);
  has_qp_ = has_cq_ = has_mr_ = has_pd_ = false;
}

void DaemonUdQp::post_recv(transport::Engine& e, uint32_t slot) {
  transport::Sge sge{reinterpret_cast<uint64_t>(mem_.get() + static_cast<size_t>(slot) * config_.slot_bytes),
                     config_.slot_bytes, lkey_};
  transport::RecvWr wr;
  wr.wr_id = slot;
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  if (e.post_recv(wire::Qpn(config_.qpn), wr) != 0) ++post_errors_;
}

void DaemonUdQp::back_to_rts(transport::Engine& e) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  e.modify_qp(wire::Qpn(config_.qpn), a, IBV_QP_STATE);
}

}  // namespace isoroce::ctrl
