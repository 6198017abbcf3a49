// A flow: an application that posts work requests over its QPs, keeps `depth`
// outstanding per QP, checks every byte it receives or writes and every atomic
// result, and measures latency from post to completion. Sans-I/O: it runs on
// FlowHosts (workload/flow_host.h) and is told the time; its driver (the
// simulator, isoroce-ctl run) starts it, hands it completions and the frames
// its QPs send, and learns through FlowDriver when it is finished.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "workload/flow_config.h"
#include "workload/flow_host.h"
#include "workload/flow_report.h"

namespace isoroce::workload {

// What a flow needs from whoever runs it, beyond its hosts.
class FlowDriver {
 public:
  // Call flow.start_receives(at) at `at` (the flow's post_recv_delay).
  virtual void schedule_receives(Picos at, Flow& flow) = 0;
  // QP `qpn` of host `host` is one of the flow's (to attribute frames to flows).
  virtual void bind_qp(uint32_t host, uint32_t qpn, const QpRef& ref) = 0;
  // Every message completed, or the flow stopped on an error.
  virtual void flow_finished(Flow& flow) = 0;

 protected:
  ~FlowDriver() = default;
};

// Where a flow runs and what its driver decided for it.
struct FlowPlace {
  FlowHost* src = nullptr;
  std::vector<FlowHost*> dst;  // in FlowConfig::dst's order
  uint64_t seed = 0;           // its random stream (PSNs, payload key, atomic bases)
  uint32_t mtu = 4096;         // path MTU
  uint32_t app = 0;            // application id (workload/app_id.h)
};

// The BTH fields of a frame one of the flow's QPs sent, and its length.
struct WireSeen {
  uint8_t opcode = 0;
  uint32_t psn = 0;
  std::optional<uint8_t> aeth_syndrome;  // acknowledgements only
  uint32_t read_dma_len = 0;             // READ requests only
  size_t frame_len = 0;                  // Ethernet header to ICRC
};

class Flow {
 public:
  Flow(FlowDriver& driver, uint32_t index, const FlowConfig& cfg, const FlowPlace& place);
  uint32_t index() const { return index_; }
  // At time 0: CQs, memory, QPs to RTS.
  std::optional<SetupError> setup();
  void start(Picos now);            // at cfg.start
  void start_receives(Picos now);   // FlowDriver::schedule_receives, or from start()
  void post(Picos now, uint32_t q); // the host's CPU posts the next reserved message of q
  void on_completion(Picos now, int side, const ibv_wc& wc);
  // A frame of QP ref left its host: retransmissions, NAKs, wire bytes.
  void on_wire(const QpRef& ref, const WireSeen& seen);
  FlowReport report(Picos run_end) const;
  bool finished() const { return finished_; }

 private:
  struct Outstanding {
    uint64_t msg;
    uint64_t seq;  // this QP's message number
    uint32_t dst;
    Picos posted_at;
  };
  struct Qp {
    wire::Qpn src_qpn;
    std::vector<wire::Qpn> dst_qpn;  // per destination
    std::vector<wire::Psn> start_psn;
    uint64_t seq = 0;  // messages reserved on this QP
    uint64_t completed = 0;
    std::deque<Outstanding> outstanding;  // reserved, in order; the last `unposted` not posted yet
    uint32_t unposted = 0;
    std::deque<std::pair<uint64_t, uint64_t>> awaiting_recv;  // (msg, seq) RC receives due, in order
    bool psn_seen = false;
    wire::Psn next_psn;  // after the last new request on the wire
    uint64_t cas_base = 0;
  };
  struct Dst {
    FlowHost* host = nullptr;
    transport::CqHandle cq = 0;
    Region target;  // RC WRITE/READ slots, atomic counters
    Region recv;    // receive buffers
    bool has_srq = false;
    transport::SrqHandle srq = 0;
    std::unordered_map<uint32_t, uint32_t> qp_of;  // QPN -> q
  };

  static constexpr uint32_t kQkey = 0x11111111;  // every UD QP's

  std::optional<SetupError> setup_dst(uint32_t d);
  transport::QpCreate source_qp(ibv_qp_type type) const;
  std::optional<SetupError> setup_rc(uint32_t q);
  std::optional<SetupError> setup_ud();
  void classify(Picos now);
  std::optional<SetupError> fail(const std::string& what, int err) const;
  void reserve_more(Picos now, uint32_t q);
  void post_recv_slot(uint32_t d, uint32_t q, uint64_t slot);
  void fill_wr(uint32_t q, Outstanding& o, transport::SendWr& wr);
  void on_requester_completion(Picos now, const ibv_wc& wc);
  void check_requester(uint32_t q, const Outstanding& o);
  void on_receive_completion(uint32_t d, const ibv_wc& wc);
  void check_ud_receive(uint32_t d, const Qp& qp, const uint8_t* buf, const ibv_wc& wc);
  void check_rc_receive(uint32_t q, const uint8_t* buf, const ibv_wc& wc);
  void count_error(int status);
  void integrity_failure(const std::string& what);
  void stop();
  void maybe_finish(Picos now);
  void check_atomic_counters(FlowReport& r) const;
  uint64_t local_off(uint32_t q, uint64_t seq) const { return (q * cfg_.depth + seq % cfg_.depth) * slot_; }
  uint64_t recv_slot_bytes() const { return cfg_.transport == Transport::kUd ? ud_slot_ : slot_; }
  bool more_to_send() const { return !stopped_ && (!cfg_.count || reserved_ < *cfg_.count); }
  uint64_t outstanding_total() const;

  FlowDriver& driver_;
  uint32_t index_;
  FlowConfig cfg_;
  FlowPlace place_;
  std::mt19937_64 rng_;
  uint64_t key_ = 0;  // payload pattern key
  FlowHost* src_ = nullptr;
  transport::CqHandle src_cq_ = 0;
  Region local_;
  std::unordered_map<uint32_t, uint32_t> src_qp_of_;
  std::vector<transport::AhHandle> ah_;  // UD: per destination
  std::vector<Dst> dst_;
  std::vector<Qp> qps_;
  uint64_t slot_ = 0, ud_slot_ = 0;
  uint32_t recv_depth_ = 0;
  uint32_t mtu_ = 4096;
  uint64_t reserved_ = 0;  // messages reserved (ids handed out)
  bool started_ = false;
  bool stopped_ = false;
  bool finished_ = false;
  Picos finish_time_ = 0;
  uint64_t fa_init_ = 0;
  std::vector<bool> fa_seen_;
  std::vector<uint16_t> ud_dst_of_;    // UD: destination of message m
  std::vector<uint8_t> ud_received_;   // UD: times message m was received

  // Report.
  uint64_t messages_ = 0;
  std::vector<Picos> lat_;
  uint64_t retransmits_ = 0, naks_ = 0, rnr_naks_ = 0, errors_ = 0;
  std::map<std::string, uint64_t> error_statuses_;
  uint64_t checked_ = 0, failures_ = 0;
  std::string first_failure_;
  uint64_t delivered_ = 0, ud_dups_ = 0;
  uint64_t wire_bytes_ = 0;
};

}  // namespace isoroce::workload
