// Two engines joined by a wire in virtual time, and the two ways isoroce drives
// workload::ReferenceProbe over them:
//   - PollDriver, isoroced's: the probe is a hook at the start of every pass of
//     a poll loop (ctrl/reference_flow.h over dataplane::Device::poll): it polls
//     its own CQ and posts when due; passes repeat while they do work, and the
//     loop sleeps until the next deadline (the engines', the wire's, the probe's);
//   - EventDriver, the simulator's (dataplane/sim/reference_flow.cc): a timer
//     event at every grid point calls on_time, and every completion of the CQ
//     is handed in with on_completion after the host's service.
// The wire decides when each frame arrives (a fixed delay, or a script).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "transport/engine/engine.h"
#include "workload/reference_probe.h"

namespace isoroce::workload::testing {

using sched::kNever;

class Wire final : private transport::TxSink {
 public:
  // When a frame that engine `from` sends at `departure` arrives at the other.
  using Arrival = std::function<Picos(int from, Picos departure)>;

  explicit Wire(Arrival arrival) : arrival_(std::move(arrival)) {
    for (int i = 0; i < 2; ++i) {
      transport::EngineConfig c;
      c.mac = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)};
      c.ip = wire::ipv4_mapped(0x0a000001 + i);
      c.key_seed = 100 + i;
      c.qpn_seed = 7 + i;
      auto e = transport::Engine::create(c);
      EXPECT_TRUE(e.ok());
      eng_[i] = std::move(e.value());
    }
    eng_[0]->set_neighbor(eng_[1]->config().ip, eng_[1]->config().mac);
    eng_[1]->set_neighbor(eng_[0]->config().ip, eng_[0]->config().mac);
  }

  transport::Engine& engine(int i) { return *eng_[i]; }

  // Frames due by now into their engines, then both engines advanced and
  // drained; how many frames moved.
  size_t service(Picos now) {
    size_t n = 0;
    while (!inflight_.empty() && inflight_.begin()->first.first <= now) {
      auto [to, bytes] = std::move(inflight_.begin()->second);
      inflight_.erase(inflight_.begin());
      eng_[to]->receive(now, bytes);
      ++n;
    }
    for (int i = 0; i < 2; ++i) {
      eng_[i]->advance(now);
      from_ = i;
      now_ = now;
      n += eng_[i]->transmit(now, *this, 64);
    }
    return n;
  }
  Picos next_time() const {
    Picos t = std::min(eng_[0]->next_deadline(), eng_[1]->next_deadline());
    if (!inflight_.empty()) t = std::min(t, inflight_.begin()->first.first);
    return t;
  }

 private:
  std::span<uint8_t> tx_buffer(size_t len) override {
    buf_.assign(len, 0);
    return buf_;
  }
  void tx_commit(Picos departure, size_t len) override {
    buf_.resize(len);
    const Picos at = std::max(arrival_(from_, std::max(departure, now_)), now_);
    inflight_.emplace(std::make_pair(at, seq_++), std::make_pair(1 - from_, buf_));
  }

  Arrival arrival_;
  std::unique_ptr<transport::Engine> eng_[2];
  std::map<std::pair<Picos, uint64_t>, std::pair<int, std::vector<uint8_t>>> inflight_;
  std::vector<uint8_t> buf_;
  uint64_t seq_ = 0;
  int from_ = 0;
  Picos now_ = 0;
};

// A probe from engine 0 to engine 1 of a wire, with its memory.
struct ProbeRig {
  ProbeRig(Wire& w, Picos period, uint32_t dst_rkey_xor = 0) : probe(period) {
    probe.set_trace([this](const ProbeMark& m) { marks.push_back(m); });
    ProbeEnd ends[2];
    for (int i = 0; i < 2; ++i) {
      transport::Engine& e = w.engine(i);
      ProbeEnd& end = ends[i];
      end.engine = &e;
      end.pd = e.alloc_pd().value();
      end.ip = e.config().ip;
      end.mem = mem[i];
      end.iova = reinterpret_cast<uint64_t>(mem[i]);
      auto keys = e.reg_mr(end.pd, mem[i], sizeof mem[i], end.iova,
                           IBV_ACCESS_LOCAL_WRITE | (i ? IBV_ACCESS_REMOTE_WRITE : 0));
      EXPECT_TRUE(keys.ok());
      end.lkey = keys.value().lkey;
      end.rkey = keys.value().rkey ^ (i ? dst_rkey_xor : 0);
      end.psn = 1000 + 77 * i;
    }
    EXPECT_EQ(probe.create_src(ends[0]), "");
    EXPECT_EQ(probe.create_dst(ends[1]), "");
    EXPECT_EQ(probe.connect_dst(), "");
    EXPECT_EQ(probe.connect_src(0), "");
  }
  ReferenceProbe probe;
  std::vector<ProbeMark> marks;
  uint8_t mem[2][64] = {};
};

// isoroced's way: the probe at the start of every pass.
inline void run_polled(Wire& w, ReferenceProbe& probe, Picos until) {
  Picos now = 0;
  for (int passes = 0; now <= until && passes < 10'000'000; ++passes) {
    const unsigned work = probe.poll(now).work + static_cast<unsigned>(w.service(now));
    if (work) continue;  // busy: the next pass at once
    now = std::min(w.next_time(), probe.next_deadline());
    if (now == kNever) return;
  }
}

// The simulator's way: a timer at every grid point, completions handed in.
inline void run_evented(Wire& w, ReferenceProbe& probe, Picos until) {
  Picos now = 0, grid = 0;
  while (now <= until) {
    if (now == grid) {
      probe.on_time(now);
      grid += probe.period();
    }
    for (;;) {
      size_t work = w.service(now);
      ibv_wc wc[4];
      const int n = w.engine(0).poll_cq(probe.src_cq(), wc);
      for (int i = 0; i < n; ++i) probe.on_completion(now, wc[i]);
      if (work == 0 && n <= 0) break;
    }
    now = std::min(w.next_time(), grid);
  }
}

}  // namespace isoroce::workload::testing
