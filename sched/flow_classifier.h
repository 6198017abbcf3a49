// Automatic flow classification (JustitiaParams::classify; docs/sched.md,
// "Classification"): a QP's Justitia class from what it sends, as the scheduler
// sees it grant by grant.
//
// The rule. Every message of the QP votes for one class:
//   - bandwidth, as soon as the message has reached classify_bytes wire bytes (a
//     big message votes at that packet, not at its end, so a QP that declares
//     itself latency-sensitive and sends 1 MB is caught while it sends);
//   - throughput, a smaller message that was queued behind the QP's own previous
//     message (the QP still had a packet ready when that one ended: outstanding
//     work and a rate above what the NIC drains, as a batch of 64 x 16 B has);
//   - latency, a smaller message that found the QP idle (posted after the previous
//     one left: one outstanding message, as a ping-pong has).
// Hysteresis: the class changes when classify_messages consecutive messages vote
// for the same other class; a vote for the present class resets the count. A QP
// that switches from 16 B to 1 MB messages is thus reclassified at the packet that
// carries its classify_messages-th big message past classify_bytes.
#pragma once

#include <cstdint>

#include "sched/justitia_params.h"

namespace isoroce::sched {

class FlowClassifier {
 public:
  void reset(FlowClass start) {
    cls_ = cand_ = start;
    run_ = 0;
    msg_bytes_ = 0;
    voted_ = false;
    queued_ = false;
  }
  FlowClass cls() const { return cls_; }

  // One granted data packet: `starts`/`ends` its message; `queued`: the message it
  // starts waited behind the QP's own previous message. True if the class changed.
  bool on_packet(std::uint32_t bytes, bool starts, bool ends, bool queued, const JustitiaParams& p) {
    if (starts) {
      msg_bytes_ = 0;
      voted_ = false;
      queued_ = queued;
    }
    msg_bytes_ += bytes;
    if (!voted_ && msg_bytes_ >= p.classify_bytes) {
      voted_ = true;
      return vote(FlowClass::kBandwidth, p.classify_messages);
    }
    if (ends && !voted_) {
      voted_ = true;
      return vote(queued_ ? FlowClass::kThroughput : FlowClass::kLatency, p.classify_messages);
    }
    return false;
  }

 private:
  bool vote(FlowClass c, std::uint32_t needed) {
    if (c == cls_) {
      run_ = 0;
      return false;
    }
    if (c == cand_) {
      ++run_;
    } else {
      cand_ = c;
      run_ = 1;
    }
    if (run_ < needed) return false;
    cls_ = c;
    run_ = 0;
    return true;
  }

  std::uint64_t msg_bytes_ = 0;  // of the message being sent
  std::uint32_t run_ = 0;        // consecutive votes for cand_
  FlowClass cls_ = FlowClass::kBandwidth;
  FlowClass cand_ = FlowClass::kBandwidth;
  bool voted_ = false;   // the message being sent has voted
  bool queued_ = false;  // it waited behind the QP's previous message
};

}  // namespace isoroce::sched
