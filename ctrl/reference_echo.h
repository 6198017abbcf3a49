// Justitia's reference flow to a peer in another daemon (`ref_peer`), and the
// echo that answers such a flow.
//
// Every device of every isoroced has one UD QP with the well-known QPN kQpn
// and Q_Key kQkey. A probe is a 16-byte UD SEND to (ref_peer, kQpn); the peer
// sends it back; the probe's latency is post to echo, one round trip through
// both schedulers — the remote counterpart of ReferenceFlow's RC WRITE, which
// needs both ends in one daemon. UD needs no handshake and no PSN agreement,
// so either daemon may restart at any time, and any isoroced answers, whatever
// its policy. A probe with no echo within kLostAfter counts as lost and as a
// latency of kLostAfter (the peer is gone or the probe was dropped: both mean
// the tail latency is out of reach).
//
// Runs on its device's worker as a DeviceHook: create() and destroy() through
// Worker::call; probing resolves the peer's neighbour entry by itself (ARP/ND
// through Device::resolve until known), so nothing blocks the control thread.
//
// Probes come from anyone on the wire, forged ones too: a probe from an
// address whose neighbour entry is not known is answered only once the
// device's bounded resolution (dataplane/dpdk/net_stack.h: on-link only, few
// at a time, each forgotten after a second) has found it, and counted as
// unanswered meanwhile; address handles are kept for at most kMaxAhs senders.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ctrl/daemon_ud_qp.h"
#include "dataplane/dpdk/device.h"
#include "sched/scheduler.h"
#include "workload/app_id.h"

namespace isoroce::ctrl {

struct EchoStats {
  bool probing = false;       // a ref_peer is set
  bool peer_known = false;    // its neighbour entry and address handle exist
  uint64_t posted = 0, completed = 0, lost = 0;
  uint64_t echoed = 0;        // probes of others answered
  uint64_t unanswered = 0;    // probes of others whose sender is not (yet) resolved
  uint64_t errors = 0;        // send errors, address handles that could not be made
  sched::Picos last = 0, min = 0, max = 0;
};

class ReferenceEcho final : public dataplane::DeviceHook {
 public:
  static constexpr uint32_t kQpn = 15;             // below every device's first QPN (16)
  static constexpr uint32_t kQkey = 0x150CE;
  static constexpr uint32_t kProbeBytes = 16;      // "IRF1", kind, 3 spare, sequence number
  static constexpr sched::Picos kLostAfter = 10'000'000'000;  // 10 ms
  static constexpr uint32_t kApp = workload::kReferenceApp;  // the policy's own "application"

  explicit ReferenceEcho(dataplane::Device& dev);
  ~ReferenceEcho();
  ReferenceEcho(const ReferenceEcho&) = delete;
  ReferenceEcho& operator=(const ReferenceEcho&) = delete;

  // On the worker: PD, CQ, MR, the UD QP kQpn in RTS with its receives
  // posted, and the hook. "" or what failed (destroy() cleans up either way).
  std::string create(sched::Picos now);
  // Probe `peer` every `period` (latencies go to the engine's justitia policy).
  void start_probing(sched::Picos now, const wire::IpAddr& peer, sched::Picos period);
  void destroy();

  EchoStats stats() const {  // on the worker
    EchoStats s = stats_;
    s.errors += qp_.post_errors();
    return s;
  }
  unsigned poll(sched::Picos now) override;
  sched::Picos next_deadline() const override;

 private:
  static constexpr uint32_t kRecvs = 32;
  static constexpr uint32_t kSlot = 128;  // 40-byte GRH + the message
  static constexpr uint32_t kSends = 16;
  static constexpr size_t kMaxAhs = 16;

  bool send(sched::Picos now, uint32_t ah, uint32_t qpn, uint8_t kind, uint64_t seq);
  // The address handle for ip: made once its neighbour is known (0: not yet).
  uint32_t address(sched::Picos now, const wire::IpAddr& ip);
  void on_recv(sched::Picos now, const ibv_wc& wc);

  dataplane::Device& dev_;
  DaemonUdQp qp_;
  bool hooked_ = false;
  std::map<wire::IpAddr, uint32_t> ahs_;  // at most kMaxAhs
  // Probing.
  wire::IpAddr peer_{};
  sched::Picos period_ = 0;
  bool outstanding_ = false;
  uint64_t seq_ = 0;
  sched::Picos posted_at_ = 0, next_due_ = 0;
  EchoStats stats_;
};

}  // namespace isoroce::ctrl
