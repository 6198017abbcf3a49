// Test harness: a link of Config::link_bps driven by a fake clock. The test steps the
// clock; the link dequeues whenever the scheduler has something due and records every
// grant per QP. QPs are endlessly backlogged with packets from a per-QP size rule.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "sched/scheduler.h"

namespace isoroce::sched::testing {

// Per-QP record of what left.
struct QpRecord {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  std::uint64_t control_packets = 0;
  Picos first = kNever;      // departure of the first packet in the window
  Picos last = 0;            // departure of the last packet in the window
  std::uint64_t last_bytes = 0;
  std::uint64_t window_bytes = 0;  // bytes of packets departing in the window
  std::uint64_t window_packets = 0;

  // Bits of every packet but the last, over first..last: the rate packets left at.
  double rate_bps() const {
    if (window_packets < 2 || last <= first) return 0;
    return static_cast<double>(window_bytes - last_bytes) * 8.0 * 1e12 /
           static_cast<double>(last - first);
  }
};

class FakeLink : public PacketSource {
 public:
  // sizes(qp, index) gives the size of qp's index-th packet (0: no more packets).
  using SizeRule = std::function<Packet(QpId, std::uint64_t)>;

  FakeLink(Scheduler& sched, const Config& config, SizeRule sizes, std::size_t batch = 32)
      : sched_(sched),
        link_cost_(byte_cost(config.link_bps)),
        lookahead_(config.lookahead),
        sizes_(std::move(sizes)),
        records_(config.max_qps),
        next_index_(config.max_qps),
        out_(batch) {}

  // Activates qp at the current time with its next packet.
  void start(QpId qp) {
    const Packet p = sizes_(qp, next_index_[qp]);
    if (p.bytes == 0) return;
    sched_.activate(now_, qp, p);
  }

  // Moves the clock to `end`, dequeuing at every deadline on the way.
  void run_until(Picos end) {
    while (true) {
      const Picos d = sched_.next_deadline();
      if (d == kNever || d > end) break;
      now_ = std::max(now_, d);
      const std::size_t n = sched_.dequeue(now_, out_, *this);
      for (std::size_t i = 0; i < n; ++i) record(out_[i]);
      if (n == 0) ++empty_dequeues_;
    }
    now_ = std::max(now_, end);
  }

  // Forgets what was recorded (not the QPs' packet counters).
  void reset_records() {
    for (QpRecord& r : records_) r = QpRecord{};
    window_total_bytes_ = 0;
  }

  // Starts the window afresh: only packets departing at or after `t` count in it.
  void open_window(Picos t) {
    for (QpRecord& r : records_) {
      r.first = kNever;
      r.last = 0;
      r.last_bytes = r.window_bytes = r.window_packets = 0;
    }
    window_total_bytes_ = 0;
    window_start_ = t;
  }
  void close_window(Picos t) { window_end_ = t; }

  Packet on_grant(QpId qp, std::uint32_t) override {
    ++next_index_[qp];
    return sizes_(qp, next_index_[qp]);
  }

  Picos now() const { return now_; }
  const QpRecord& record_of(QpId qp) const { return records_[qp]; }
  const std::vector<Grant>& log() const { return log_; }
  void keep_log(bool keep) { keep_log_ = keep; }
  std::uint64_t total_bytes() const { return total_bytes_; }
  std::uint64_t window_total_bytes() const { return window_total_bytes_; }
  std::uint64_t empty_dequeues() const { return empty_dequeues_; }
  Picos busy_until() const { return busy_until_; }

 private:
  void record(const Grant& g) {
    // The link model must never overlap two packets nor send before "now".
    EXPECT_GE(g.departure, busy_until_) << "qp " << g.qp;
    EXPECT_GE(g.departure, now_);
    EXPECT_LE(g.departure, now_ + lookahead_);
    busy_until_ = g.departure + duration(g.bytes, link_cost_);
    total_bytes_ += g.bytes;
    if (keep_log_) log_.push_back(g);
    QpRecord& r = records_[g.qp];
    if (g.kind == GrantKind::kControl) {
      ++r.control_packets;
    } else {
      ++r.packets;
      r.bytes += g.bytes;
    }
    if (g.kind == GrantKind::kData && g.departure >= window_start_ && g.departure < window_end_) {
      if (r.first == kNever) r.first = g.departure;
      r.last = g.departure;
      r.last_bytes = g.bytes;
      r.window_bytes += g.bytes;
      ++r.window_packets;
      window_total_bytes_ += g.bytes;
    }
  }

  Scheduler& sched_;
  ByteCost link_cost_;
  Picos lookahead_;
  SizeRule sizes_;
  std::vector<QpRecord> records_;
  std::vector<std::uint64_t> next_index_;
  std::vector<Grant> out_;
  std::vector<Grant> log_;
  bool keep_log_ = false;
  Picos now_ = 0;
  Picos busy_until_ = 0;
  Picos window_start_ = 0;
  Picos window_end_ = kNever;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t window_total_bytes_ = 0;
  std::uint64_t empty_dequeues_ = 0;
};

}  // namespace isoroce::sched::testing
