// The justitia policy's reference flow in isoroced (Justitia's "reference flow",
// as dataplane/sim/reference_flow.h runs it in the simulator): an RC QP pair from
// a device to a peer device of the same daemon, both ends owned by the daemon
// (its own PD, CQ and memory on each), posting a 10-byte RDMA WRITE every
// RefPeriod and handing each latency, post to completion, to the source engine
// (Engine::add_reference_latency), which keeps Current99 and adjusts SafeUtil.
//
// It runs on the source device's worker as a DeviceHook (Device::poll calls it
// with the current time at the start of every pass); one probe is outstanding at
// a time, and a probe due while the last is still out is posted when it completes.
// Setup and teardown are split by device: the daemon runs each half on that
// device's worker (Worker::call), so the two devices may be on different workers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dataplane/dpdk/device.h"
#include "sched/scheduler.h"

namespace isoroce::ctrl {

struct ReferenceStats {
  bool running = false;      // connected and probing
  bool failed = false;       // a probe completed in error (the QP is dead)
  uint64_t posted = 0;
  uint64_t completed = 0;    // latencies fed to the engine
  uint64_t errors = 0;
  sched::Picos last = 0, min = 0, max = 0;  // post-to-completion latency
  uint32_t src_qpn = 0, dst_qpn = 0;
};

class ReferenceFlow final : public dataplane::DeviceHook {
 public:
  static constexpr uint32_t kProbeBytes = 10;
  static constexpr uint32_t kApp = 0xffff'fffe;  // the policy's own "application"

  ReferenceFlow(dataplane::Device& src, dataplane::Device& dst, sched::Picos period);
  ~ReferenceFlow();
  ReferenceFlow(const ReferenceFlow&) = delete;
  ReferenceFlow& operator=(const ReferenceFlow&) = delete;

  dataplane::Device& src() { return src_; }
  dataplane::Device& dst() { return dst_; }

  // Setup, in this order, each on its device's worker; "" or what failed.
  std::string create_src();               // PD, CQ, MR, QP on src
  std::string create_dst();               // PD, CQ, MR (remote write), QP on dst
  std::string connect_dst();              // dst QP to RTS towards src (needs the neighbour)
  std::string connect_src(sched::Picos now);  // src QP to RTS, class kReference; adds the hook
  // Teardown, each on its device's worker (whatever setup made; safe after a failed setup).
  void destroy_src();                     // removes the hook first
  void destroy_dst();

  ReferenceStats stats() const { return stats_; }  // on src's worker
  uint32_t src_qpn() const { return stats_.src_qpn; }  // any thread (set by setup only)

  unsigned poll(sched::Picos now) override;
  sched::Picos next_deadline() const override;

 private:
  void post(sched::Picos now);

  dataplane::Device& src_;
  dataplane::Device& dst_;
  sched::Picos period_;
  struct End {
    transport::PdHandle pd = 0;
    transport::CqHandle cq = 0;
    uint32_t lkey = 0, rkey = 0;
    uint32_t qpn = 0;
    bool has_pd = false, has_cq = false, has_mr = false, has_qp = false;
  };
  End s_, d_;
  std::unique_ptr<uint8_t[]> local_, remote_;  // 64 bytes each
  uint32_t src_psn_ = 0, dst_psn_ = 0;
  bool hooked_ = false;
  bool outstanding_ = false;
  sched::Picos posted_at_ = 0;
  sched::Picos next_due_ = 0;
  uint64_t seq_ = 0;
  ReferenceStats stats_;
};

}  // namespace isoroce::ctrl
