// The justitia policy's reference flow in isoroced: isoroced's driver of the
// one probe (workload/reference_probe.h, the probe the simulator runs too)
// between a device and a peer device of the same daemon, both ends owned by
// the daemon (its own PD and memory on each).
//
// It runs on the source device's worker as a DeviceHook: Device::poll calls it
// with the current time at the start of every pass, and it lets the probe poll
// its CQ and post when due. Setup and teardown are split by device: the daemon
// runs each half on that device's worker (Worker::call), so the two devices may
// be on different workers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dataplane/dpdk/device.h"
#include "sched/scheduler.h"
#include "workload/app_id.h"
#include "workload/reference_probe.h"

namespace isoroce::ctrl {

using ReferenceStats = workload::ProbeStats;

class ReferenceFlow final : public dataplane::DeviceHook {
 public:
  static constexpr uint32_t kProbeBytes = workload::ReferenceProbe::kProbeBytes;
  static constexpr uint32_t kApp = workload::kReferenceApp;

  ReferenceFlow(dataplane::Device& src, dataplane::Device& dst, sched::Picos period);
  ~ReferenceFlow();
  ReferenceFlow(const ReferenceFlow&) = delete;
  ReferenceFlow& operator=(const ReferenceFlow&) = delete;

  dataplane::Device& src() { return src_; }
  dataplane::Device& dst() { return dst_; }

  // Setup, in this order, each on its device's worker; "" or what failed.
  std::string create_src();               // PD, MR, then the probe's CQ and QP on src
  std::string create_dst();               // PD, MR (remote write), then the probe's CQ and QP on dst
  std::string connect_dst();              // dst QP to RTS towards src (needs the neighbour)
  std::string connect_src(sched::Picos now);  // src QP to RTS, class kReference; adds the hook
  // Teardown, each on its device's worker (whatever setup made; safe after a failed setup).
  void destroy_src();                     // removes the hook first
  void destroy_dst();

  ReferenceStats stats() const { return probe_.stats(); }  // on src's worker
  uint32_t src_qpn() const { return probe_.stats().src_qpn; }  // any thread (set by setup only)

  unsigned poll(sched::Picos now) override { return probe_.poll(now).work; }
  sched::Picos next_deadline() const override { return probe_.next_deadline(); }

 private:
  // The daemon's own PD and registered memory on one device.
  struct End {
    transport::PdHandle pd = 0;
    uint32_t lkey = 0, rkey = 0;
    bool has_pd = false, has_mr = false;
  };
  std::string create_end(dataplane::Device& dev, End& end, uint8_t* mem, uint32_t access, uint32_t psn,
                         workload::ProbeEnd* out, const char* peer);
  static void destroy_end(dataplane::Device& dev, End& end);

  dataplane::Device& src_;
  dataplane::Device& dst_;
  workload::ReferenceProbe probe_;
  End s_, d_;
  std::unique_ptr<uint8_t[]> local_, remote_;  // 64 bytes each
  uint32_t src_psn_ = 0, dst_psn_ = 0;
  bool hooked_ = false;
};

}  // namespace isoroce::ctrl
