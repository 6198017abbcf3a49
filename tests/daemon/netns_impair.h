// A seeded, user-space stand-in for `tc netem` between two veths: a thread
// that enters a network namespace, opens one AF_PACKET socket per interface
// and forwards every frame from one to the other, dropping, corrupting (one
// bit flipped past the Ethernet header), duplicating and reordering (held back
// behind the next frame) RoCEv2 frames (UDP port 4791) with the given
// probabilities. Other frames (ARP) pass untouched. The fate of the n-th RoCE
// frame in each direction depends only on the seed, so a run is as repeatable
// as the order of the frames the daemons send.
//
// Used because netem is not always in the kernel (CONFIG_NET_SCH_NETEM is off
// on the CI VMs' kernel), and because its randomness cannot be seeded.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace isoroce::test {

struct Impairment {
  double loss = 0, corrupt = 0, duplicate = 0, reorder = 0;  // probabilities, 0..1
  uint32_t seed = 1;
  // A congestion point (what `tbf` + `red ... ecn` would be, for kernels
  // without sch_red): RoCE frames of each direction wait in a FIFO served at
  // bottleneck_mbps (0: no bottleneck); a frame arriving to a queue of q bytes
  // is marked CE with probability 0 below ecn_kmin_bytes, rising linearly to 1
  // at ecn_kmax_bytes (ECT frames only), and dropped above queue_limit_bytes.
  double bottleneck_mbps = 0;
  uint32_t ecn_kmin_bytes = 20'000, ecn_kmax_bytes = 100'000, queue_limit_bytes = 1'000'000;
};

struct ImpairCounters {
  uint64_t forwarded = 0, roce = 0, dropped = 0, corrupted = 0, duplicated = 0, reordered = 0;
  uint64_t ecn_marked = 0, queue_drops = 0, max_queue_bytes = 0;
  std::string text() const;
};

class NetnsImpairer {
 public:
  NetnsImpairer(std::string netns, std::string if_a, std::string if_b, Impairment impairment);
  ~NetnsImpairer();
  // Starts the thread; false and *error if it could not enter the namespace
  // or open its sockets.
  bool start(std::string* error);
  void stop();
  // Counters per direction (a->b, b->a); read after stop().
  const ImpairCounters& a_to_b() const { return dir_[0]; }
  const ImpairCounters& b_to_a() const { return dir_[1]; }

 private:
  void run();

  std::string netns_, if_a_, if_b_;
  Impairment imp_;
  int fd_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  ImpairCounters dir_[2];
};

}  // namespace isoroce::test
