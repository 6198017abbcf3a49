// isoroce-rperf-probe: RPerf's round trip measured by a libibverbs program
// (../shared/papers/rperf.md; docs/profiling.md, "Latency breakdown"). On
// device D it connects a wire RC QP to a QP on the peer device P and a
// loopback RC QP pair on D (addressed by D's own GID, docs/engine.md), then N
// times posts a SEND on the wire QP and right after it a SEND on the loopback
// QP, polls their send CQ and takes CLOCK_MONOTONIC when ibv_poll_cq returns
// each completion: RTT_i = T_W,i - T_L,i (the host side cancels). Optionally a
// second wire QP on D keeps 1 MB RDMA WRITEs in flight to P (the bandwidth
// flow competing in D's scheduler). One process drives both devices, or P's
// side runs in a --serve process on another daemon (--connect HOST:PORT).
//
// It links only libibverbs: run it with LD_PRELOAD=libisoroce-verbs.so (the
// shared-memory rings, no control round trip per post) against an isoroced.
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "isoroce/verbs_ext.h"
#include "tools/rperf/probe_remote.h"
#include "tools/rperf/probe_verbs.h"

namespace {

using namespace isoroce::tools::rperf_probe;

// The bandwidth flow: its own contexts on D and P (another application), one
// RC QP pair, bg_depth RDMA WRITEs of bg_bytes in flight until stopped.
struct Background {
  Dev d, p;
  ibv_cq *scq = nullptr, *pcq = nullptr;
  ibv_qp *qp = nullptr, *peer = nullptr;
  Mem src, dst;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  std::atomic<int> error{0};
  std::thread worker;

  // D's side; with local_peer also P's (else a --serve process's).
  void open(const Options& o, bool local_peer) {
    d = open_dev(o.device, o.gid_index);
    scq = make_cq(d, static_cast<int>(o.bg_depth) * 2);
    qp = make_qp(d, scq, scq, o.bg_depth);
    if (o.classes) isoroce_qp_set_class_if_present(qp, ISOROCE_CLASS_BANDWIDTH);
    reg(d, src, o.bg_bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!local_peer) return;
    p = open_dev(o.peer_device, o.gid_index);
    pcq = make_cq(p, 16);
    peer = make_qp(p, pcq, pcq, 1);
    reg(p, dst, o.bg_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    connect(p, peer, d.gid, qp->qp_num, o.gid_index);
    remote_addr = reinterpret_cast<uint64_t>(dst.bytes.data());
    rkey = dst.mr->rkey;
  }
  void start(const Options& o, const ibv_gid& gid, uint32_t qpn) {
    connect(d, qp, gid, qpn, o.gid_index);
    worker = std::thread([this, o] { run(o); });
  }

  void post_write(uint32_t bytes) {
    ibv_sge s{reinterpret_cast<uint64_t>(src.bytes.data()), bytes, src.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    if (int e = ibv_post_send(qp, &wr, &bad)) error = e;
  }

  // Keeps the queue full; sleeps between polls (a 1 MB WRITE takes hundreds
  // of µs), so it takes little of the CPU the probe runs on.
  void run(const Options& o) {
    uint32_t outstanding = 0;
    while (!stop && !error) {
      while (outstanding < o.bg_depth && !error) post_write(o.bg_bytes), ++outstanding;
      ibv_wc wc[8];
      const int k = ibv_poll_cq(scq, 8, wc);
      for (int i = 0; i < k; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) error = -static_cast<int>(wc[i].status);
        --outstanding, ++done;
      }
      if (k == 0) {
        const timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
    const uint64_t until = now_ns() + 2000000000ull;  // drain what is in flight
    while (outstanding > 0 && now_ns() < until) {
      ibv_wc wc[8];
      outstanding -= static_cast<uint32_t>(std::max(0, ibv_poll_cq(scq, 8, wc)));
    }
  }
};

struct Sample {
  uint64_t t_w, t_l;  // ns after the post of the pair
};

// One pair: the wire SEND, right after it the loopback SEND, then their
// shared send CQ polled until both completed; a completion's time is when the
// ibv_poll_cq that returned it returned. (One CQ: with a CQ each, whichever is
// polled first would gain one ibv_poll_cq call, about 0.07 µs here.) False on
// a timeout.
// With only one of them posted (--only, to see each path alone), the other's
// time is 0.
bool measure(ibv_qp* wire, ibv_qp* loop, ibv_cq* scq, Mem& m, uint32_t size, uint64_t id, int timeout_ms,
             const std::string& only, Sample* s) {
  const uint64_t t_p = now_ns();
  if (only != "loopback") post_send(wire, m, size, id);
  if (only != "wire") post_send(loop, m, size, id);
  uint64_t t_w = only == "loopback" ? t_p : 0, t_l = only == "wire" ? t_p : 0;
  const uint64_t until = t_p + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  while (!t_w || !t_l) {
    ibv_wc wc[2];
    const int k = ibv_poll_cq(scq, 2, wc);
    const uint64_t t = now_ns();
    for (int i = 0; i < k; ++i) {
      const bool is_wire = wc[i].qp_num == wire->qp_num;
      if (wc[i].status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "isoroce-rperf-probe: %s SEND completed with %s\n", is_wire ? "wire" : "loopback",
                     ibv_wc_status_str(wc[i].status));
        std::exit(kExitSetup);
      }
      (is_wire ? t_w : t_l) = t;
    }
    if (k == 0 && now_ns() > until) return false;
  }
  *s = {t_w - t_p, t_l - t_p};
  return true;
}

struct Stats {
  double p50 = 0, p99 = 0, p999 = 0, mean = 0, min = 0, max = 0;  // µs
};

// Nearest-rank percentiles, in µs, of values in ns.
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) { return v[static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1]; };
  double sum = 0;
  for (double x : v) sum += x;
  s = {rank(0.5), rank(0.99), rank(0.999), sum / static_cast<double>(v.size()), v.front(), v.back()};
  for (double* x : {&s.p50, &s.p99, &s.p999, &s.mean, &s.min, &s.max}) *x /= 1000.0;
  return s;
}

std::string json_stats(const Stats& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"p50_us\": %.3f, \"p99_us\": %.3f, \"p999_us\": %.3f, \"mean_us\": %.3f, \"min_us\": %.3f, "
                "\"max_us\": %.3f}",
                s.p50, s.p99, s.p999, s.mean, s.min, s.max);
  return buf;
}

int parse(int argc, char** argv, Options* o) {
  CLI::App app{"isoroce-rperf-probe: RPerf's RTT (T_W - T_L of a wire SEND and a loopback SEND posted right after "
               "it) on isoroced, through libisoroce-verbs.so (docs/profiling.md)"};
  app.add_option("-d,--device", o->device, "device D that sends (default: the first)");
  app.add_option("--peer-device", o->peer_device, "device P the wire QP reaches (default: the first other one)");
  app.add_option("-n,--iters", o->iters, "measured pairs")->check(CLI::Range(1, 100000000));
  app.add_option("--warmup", o->warmup, "pairs before the measured ones")->check(CLI::Range(0, 1000000));
  app.add_option("-s,--size", o->size, "SEND payload bytes")->check(CLI::Range(1u, 1u << 20));
  app.add_option("--background-bytes", o->bg_bytes, "RDMA WRITE size of a background bandwidth flow D -> P (0: none)")
      ->check(CLI::Range(0u, 1u << 30));
  app.add_option("--background-depth", o->bg_depth, "background WRITEs in flight")->check(CLI::Range(1u, 64u));
  app.add_option("-x,--gid-index", o->gid_index, "GID index")->check(CLI::Range(0, 255));
  app.add_option("--timeout-ms", o->timeout_ms, "give up on a pair after this long")->check(CLI::Range(1, 600000));
  app.add_flag("!--no-classes", o->classes,
               "leave the QPs' flow classes as created (default: latency for the probe's QPs, bandwidth for the "
               "background, through isoroce/verbs_ext.h)");
  app.add_option("--only", o->only, "post only the wire or only the loopback SEND (each path alone; no T_W - T_L)")
      ->check(CLI::IsMember({"wire", "loopback"}));
  app.add_option("--serve", o->serve_port, "be the responder P for a --connect probe: listen on this TCP port")
      ->check(CLI::Range(1, 65535));
  app.add_option("--connect", o->connect_to, "HOST:PORT of a --serve process on P's daemon (instead of --peer-device)");
  app.add_option("--samples", o->samples_path, "write every pair's T_W and T_L (ns) to this CSV file");
  app.add_flag("--json", o->json, "print JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "isoroce-rperf-probe: %s (see --help)\n", e.what());
    return kExitUsage;
  }
  return -1;
}

void print(const Options& o, const std::vector<Sample>& s, const Background* bg, double secs) {
  std::vector<double> w, l, r;
  for (const Sample& x : s) {
    w.push_back(static_cast<double>(x.t_w));
    l.push_back(static_cast<double>(x.t_l));
    r.push_back(static_cast<double>(x.t_w) - static_cast<double>(x.t_l));
  }
  const Stats sw = stats(w), sl = stats(l), sr = stats(r);
  const bool has_w = o.only != "loopback", has_l = o.only != "wire", has_r = o.only.empty();
  const uint64_t bg_done = bg ? bg->done.load() : 0;
  const double bg_gbps = static_cast<double>(bg_done) * o.bg_bytes * 8 / secs / 1e9;
  if (o.json) {
    std::printf("{\"device\": \"%s\", \"peer_device\": \"%s\", \"size\": %u, \"samples\": %zu, "
                "\"background\": {\"bytes\": %u, \"depth\": %u, \"messages\": %llu, \"gbps\": %.3f},\n"
                " \"t_w\": %s,\n \"t_l\": %s,\n \"rtt\": %s}\n",
                o.device.c_str(), o.peer_device.c_str(), o.size, s.size(), o.bg_bytes, bg ? o.bg_depth : 0,
                static_cast<unsigned long long>(bg_done), bg_gbps, has_w ? json_stats(sw).c_str() : "null",
                has_l ? json_stats(sl).c_str() : "null", has_r ? json_stats(sr).c_str() : "null");
    return;
  }
  std::printf("%s -> %s, %u-byte SENDs, %zu pairs", o.device.c_str(), o.peer_device.c_str(), o.size, s.size());
  if (bg) std::printf(", beside %u-byte WRITEs (%llu done, %.2f Gb/s)", o.bg_bytes,
                      static_cast<unsigned long long>(bg_done), bg_gbps);
  std::printf("\n%-16s %10s %10s %10s %10s\n", "", "p50 us", "p99 us", "p99.9 us", "mean us");
  for (auto [name, st, has] : {std::tuple{"T_W (wire)", sw, has_w}, std::tuple{"T_L (loopback)", sl, has_l},
                               std::tuple{"T_W - T_L", sr, has_r}})
    if (has) std::printf("%-16s %10.2f %10.2f %10.2f %10.2f\n", name, st.p50, st.p99, st.p999, st.mean);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, &o); rc >= 0) return rc;
  if (o.device.empty()) o.device = pick_device("");
  if (o.serve_port != 0) return serve(o);
  const bool local = o.connect_to.empty();
  if (!local && o.connect_to.find(':') == std::string::npos) {
    std::fprintf(stderr, "isoroce-rperf-probe: --connect '%s' is not HOST:PORT\n", o.connect_to.c_str());
    return kExitUsage;
  }
  if (!local) o.peer_device = o.connect_to;
  if (o.peer_device.empty()) o.peer_device = pick_device(o.device);
  if (o.device.empty() || o.peer_device.empty() || o.device == o.peer_device) {
    std::fprintf(stderr, "isoroce-rperf-probe: needs two devices, D and P (%s%s%s): run it with "
                         "LD_PRELOAD=libisoroce-verbs.so against e.g. isoroced --loopback\n",
                 o.device.c_str(), o.device.empty() ? "" : " and ", o.peer_device.c_str());
    return kExitSetup;
  }
  Dev d = open_dev(o.device, o.gid_index), p;
  ibv_cq* scq = make_cq(d, 16);  // the wire's and the loopback's send completions
  ibv_cq *lrcq = make_cq(d, 2 * kRecvDepth), *prcq = nullptr;
  ibv_qp* wire = make_qp(d, scq, scq, 4);
  ibv_qp* loop = make_qp(d, scq, scq, 4);
  ibv_qp* loop_resp = make_qp(d, make_cq(d, 4), lrcq, 4);  // never sends
  ibv_qp* resp = nullptr;
  Mem src, psink, lsink;
  reg(d, src, o.size, IBV_ACCESS_LOCAL_WRITE);
  reg(d, lsink, o.size, IBV_ACCESS_LOCAL_WRITE);
  Background* bg = nullptr;
  if (o.bg_bytes > 0) (bg = new Background)->open(o, local);
  Remote peer;
  int peer_fd = -1;
  if (local) {
    p = open_dev(o.peer_device, o.gid_index);
    prcq = make_cq(p, 2 * kRecvDepth);
    resp = make_qp(p, make_cq(p, 4), prcq, 4);
    reg(p, psink, o.size, IBV_ACCESS_LOCAL_WRITE);
    connect(p, resp, d.gid, wire->qp_num, o.gid_index);
    for (uint32_t i = 0; i < kRecvDepth; ++i) post_recv(resp, psink, o.size);
    peer = {p.gid, resp->qp_num, bg ? bg->peer->qp_num : 0};
  } else {
    peer = exchange(o.connect_to, {d.gid, wire->qp_num, bg ? bg->qp->qp_num : 0, 0, o.bg_bytes, o.size}, &peer_fd);
    if (bg) bg->remote_addr = peer.bg_addr, bg->rkey = peer.bg_rkey;
  }
  if (o.classes)
    for (ibv_qp* q : {wire, resp, loop, loop_resp})
      if (q) isoroce_qp_set_class_if_present(q, ISOROCE_CLASS_LATENCY);
  connect(d, wire, peer.gid, peer.wire_qpn, o.gid_index);
  connect(d, loop, d.gid, loop_resp->qp_num, o.gid_index);  // D's own GID: same-device loopback
  connect(d, loop_resp, d.gid, loop->qp_num, o.gid_index);
  for (uint32_t i = 0; i < kRecvDepth; ++i) post_recv(loop_resp, lsink, o.size);
  if (bg) {
    bg->start(o, peer.gid, peer.bg_qpn);
    // Measure beside a flow that runs: its first WRITE has completed, so its
    // messages fill D's scheduler (on a loaded machine the thread can start late).
    const uint64_t until = now_ns() + static_cast<uint64_t>(o.timeout_ms) * 1'000'000;
    while (bg->done.load() == 0 && bg->error.load() == 0 && now_ns() < until) std::this_thread::yield();
    if (bg->done.load() == 0) {
      std::fprintf(stderr, "isoroce-rperf-probe: the background flow completed no WRITE within %d ms (error %d)\n",
                   o.timeout_ms, bg->error.load());
      return kExitSetup;
    }
  }
  std::vector<Sample> samples;
  samples.reserve(static_cast<std::size_t>(o.iters));
  const uint64_t t0 = now_ns();
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    Sample s;
    if (!measure(wire, loop, scq, src, o.size, static_cast<uint64_t>(i), o.timeout_ms, o.only, &s)) {
      std::fprintf(stderr, "isoroce-rperf-probe: pair %d not completed within %d ms\n", i, o.timeout_ms);
      return kExitSetup;
    }
    if (i >= o.warmup) samples.push_back(s);
    if (local) refill(prcq, resp, psink, o.size);
    refill(lrcq, loop_resp, lsink, o.size);
    if (bg && bg->error) {
      std::fprintf(stderr, "isoroce-rperf-probe: background WRITE failed (%d)\n", bg->error.load());
      return kExitSetup;
    }
  }
  const double secs = static_cast<double>(now_ns() - t0) / 1e9;
  if (bg) bg->stop = true, bg->worker.join();
  if (peer_fd >= 0) close(peer_fd);  // the --serve process ends
  if (!o.samples_path.empty()) {
    FILE* f = std::fopen(o.samples_path.c_str(), "w");
    if (!f) fail("cannot write '" + o.samples_path + "'", errno);
    std::fprintf(f, "t_w_ns,t_l_ns\n");
    for (const Sample& s : samples)
      std::fprintf(f, "%llu,%llu\n", static_cast<unsigned long long>(s.t_w), static_cast<unsigned long long>(s.t_l));
    std::fclose(f);
  }
  print(o, samples, bg, secs);
  return 0;
}
