// A UD QP the daemon itself owns on a device, at a well-known QPN: the CM
// agent's GSI QP1 (ctrl/cm_agent.h) and the reference echo's QPN 15
// (ctrl/reference_echo.h). It owns the PD, the CQ, the receive slots and their
// MR, brings the QP to RTS and keeps every slot posted; its owner sends (inline)
// and makes its address handles in that PD. Everything runs on the device's
// worker, inside the owner's DeviceHook::poll.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

#include "transport/engine/engine.h"

namespace isoroce::ctrl {

struct DaemonUdQpConfig {
  uint32_t qpn = 0;
  uint32_t qkey = 0;
  uint32_t recvs = 0;       // receive slots, each posted once
  uint32_t sends = 0;       // send queue depth
  uint32_t slot_bytes = 0;  // per receive: the 40-byte GRH and the message
  uint32_t max_inline = 0;  // the largest message sent (inline)
  const char* what = "";    // for errors: "QPN 1, the GSI"
};

class DaemonUdQp {
 public:
  explicit DaemonUdQp(const DaemonUdQpConfig& c);
  DaemonUdQp(const DaemonUdQp&) = delete;
  DaemonUdQp& operator=(const DaemonUdQp&) = delete;

  // PD, CQ, MR over the receive slots, the QP in RTS with every slot posted.
  // "" or what failed; destroy() cleans up either way.
  std::string create(transport::Engine& e);
  // The QP, CQ, MR and PD, whichever exist (the owner's address handles first:
  // a posted UD send has its own copy of its address).
  void destroy(transport::Engine& e);

  transport::PdHandle pd() const { return pd_; }
  uint32_t qpn() const { return config_.qpn; }
  const uint8_t* slot(uint64_t i) const { return mem_.get() + i * config_.slot_bytes; }
  // Receives that could not be posted again (the slot is lost until destroy).
  uint64_t post_errors() const { return post_errors_; }

  // Drains the CQ, unless the engine has queued no completion since the last
  // call: on_recv(wc) for each successful receive (its slot is posted again
  // after), on_error(wc) for each failed receive or send (flushes aside; a
  // failed send leaves the QP in SQE, and it is moved back to RTS). Returns
  // the completions seen.
  template <typename OnRecv, typename OnError>
  unsigned drain(transport::Engine& e, OnRecv&& on_recv, OnError&& on_error) {
    const uint64_t queued = e.completions_queued();
    if (queued == seen_completions_ && &e == seen_engine_) return 0;
    seen_completions_ = queued;
    seen_engine_ = &e;
    unsigned work = 0;
    ibv_wc wc[16];
    for (int n; has_cq_ && (n = e.poll_cq(cq_, wc)) > 0;) {
      for (int i = 0; i < n; ++i) {
        ++work;
        const ibv_wc& c = wc[i];
        if (c.status == IBV_WC_WR_FLUSH_ERR) continue;
        if (c.opcode == IBV_WC_RECV) {
          if (c.status == IBV_WC_SUCCESS) on_recv(c);
          else on_error(c);
          post_recv(e, static_cast<uint32_t>(c.wr_id));
        } else if (c.status != IBV_WC_SUCCESS) {
          on_error(c);
          back_to_rts(e);
        }
      }
    }
    return work;
  }

 private:
  void post_recv(transport::Engine& e, uint32_t slot);
  void back_to_rts(transport::Engine& e);

  DaemonUdQpConfig config_;
  std::unique_ptr<uint8_t[]> mem_;
  transport::PdHandle pd_ = 0;
  transport::CqHandle cq_ = 0;
  uint32_t lkey_ = 0;
  bool has_pd_ = false, has_cq_ = false, has_mr_ = false, has_qp_ = false;
  uint64_t post_errors_ = 0;
  uint64_t seen_completions_ = 0;                   // the engine's completions_queued() at the last drain
  const transport::Engine* seen_engine_ = nullptr;  // and that engine (a reconfigure replaces it)
};

}  // namespace isoroce::ctrl
