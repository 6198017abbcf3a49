#include "tests/daemon/netns_impair.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <cstring>
#include <future>
#include <random>
#include <vector>

namespace isoroce::test {
namespace {

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

bool is_roce(const uint8_t* f, size_t len) {
  if (len < 14 + 20 + 8) return false;
  if (f[12] != 0x08 || f[13] != 0x00) return false;  // IPv4 (our tests' addresses)
  const size_t ihl = (f[14] & 0x0f) * 4u;
  if (f[14 + 9] != 17 || len < 14 + ihl + 8) return false;
  const uint8_t* udp = f + 14 + ihl;
  return ((udp[2] << 8) | udp[3]) == 4791;
}

// Sets CE in an ECN-capable IPv4 frame and fixes the header checksum; false
// if the frame is not ECN-capable.
bool mark_ce(uint8_t* f) {
  uint8_t* ip = f + 14;
  if ((ip[1] & 0x3) == 0) return false;
  ip[1] |= 0x3;
  ip[10] = ip[11] = 0;
  uint32_t sum = 0;
  const size_t ihl = (ip[0] & 0x0f) * 4u;
  for (size_t i = 0; i < ihl; i += 2) sum += static_cast<uint32_t>(ip[i] << 8 | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip[10] = static_cast<uint8_t>(~sum >> 8);
  ip[11] = static_cast<uint8_t>(~sum);
  return true;
}

}  // namespace

std::string ImpairCounters::text() const {
  return "forwarded " + std::to_string(forwarded) + " (RoCE " + std::to_string(roce) + "), dropped " +
         std::to_string(dropped) + ", corrupted " + std::to_string(corrupted) + ", duplicated " +
         std::to_string(duplicated) + ", reordered " + std::to_string(reordered) + ", ECN marked " +
         std::to_string(ecn_marked) + ", queue drops " + std::to_string(queue_drops) + ", max queue " +
         std::to_string(max_queue_bytes) + " B";
}

NetnsImpairer::NetnsImpairer(std::string netns, std::string if_a, std::string if_b, Impairment impairment)
    : netns_(std::move(netns)), if_a_(std::move(if_a)), if_b_(std::move(if_b)), imp_(impairment) {}

NetnsImpairer::~NetnsImpairer() { stop(); }

bool NetnsImpairer::start(std::string* error) {
  std::promise<std::string> ready;
  auto started = ready.get_future();
  thread_ = std::thread([this, &ready] {
    // setns changes this thread's namespace only; the sockets stay in it.
    const int ns = open(("/var/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
      ready.set_value("cannot enter netns " + netns_ + ": " + std::strerror(errno));
      if (ns >= 0) close(ns);
      return;
    }
    close(ns);
    const std::string* names[2] = {&if_a_, &if_b_};
    for (int i = 0; i < 2; ++i) {
      fd_[i] = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
      sockaddr_ll sll{};
      sll.sll_family = AF_PACKET;
      sll.sll_protocol = htons(ETH_P_ALL);
      sll.sll_ifindex = static_cast<int>(if_nametoindex(names[i]->c_str()));
      const int one = 1;
      const int bytes = 16 << 20;  // room for bursts while this thread waits for a core
      (void)setsockopt(fd_[i], SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes);
      (void)setsockopt(fd_[i], SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes);
      if (fd_[i] < 0 || sll.sll_ifindex == 0 || bind(fd_[i], reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0 ||
          setsockopt(fd_[i], SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
        ready.set_value("AF_PACKET socket on " + *names[i] + ": " + std::strerror(errno));
        return;
      }
    }
    ready.set_value("");
    run();
  });
  *error = started.get();
  if (!error->empty()) {
    thread_.join();
    for (int& fd : fd_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    return false;
  }
  return true;
}

void NetnsImpairer::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  for (int& fd : fd_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

void NetnsImpairer::run() {
  // One generator per direction: the fates of a direction's frames do not
  // depend on how the two directions interleave.
  std::mt19937_64 rng[2] = {std::mt19937_64(imp_.seed), std::mt19937_64(imp_.seed ^ 0x9e3779b97f4a7c15ull)};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<uint8_t> held[2];  // a frame waiting behind the next one (reorder)
  std::vector<uint8_t> buf(65536);
  auto send = [&](int to, const uint8_t* p, size_t n) {
    (void)::send(fd_[to], p, n, 0);
    ++dir_[1 - to].forwarded;
  };
  // The bottleneck: per direction a FIFO and when its head may leave.
  using Clock = std::chrono::steady_clock;
  std::deque<std::vector<uint8_t>> queue[2];
  uint64_t queued[2] = {0, 0};
  Clock::time_point free_at[2] = {Clock::now(), Clock::now()};
  const bool shaping = imp_.bottleneck_mbps > 0;
  auto serve = [&] {
    const auto now = Clock::now();
    for (int d = 0; d < 2; ++d) {
      while (!queue[d].empty() && free_at[d] <= now) {
        std::vector<uint8_t>& f = queue[d].front();
        send(1 - d, f.data(), f.size());
        const auto ns = static_cast<int64_t>((f.size() + 24) * 8 * 1000.0 / imp_.bottleneck_mbps);
        free_at[d] = std::max(free_at[d], now - std::chrono::microseconds(50)) + std::chrono::nanoseconds(ns);
        queued[d] -= f.size();
        queue[d].pop_front();
      }
    }
  };
  auto enqueue = [&](int d, const uint8_t* p, size_t n, double coin) {
    ImpairCounters& c = dir_[d];
    if (queued[d] + n > imp_.queue_limit_bytes) {
      ++c.queue_drops;
      return;
    }
    std::vector<uint8_t> f(p, p + n);
    const double q = static_cast<double>(queued[d]);
    const double pmark = q <= imp_.ecn_kmin_bytes   ? 0.0
                         : q >= imp_.ecn_kmax_bytes ? 1.0
                                                    : (q - imp_.ecn_kmin_bytes) / (imp_.ecn_kmax_bytes - imp_.ecn_kmin_bytes);
    if (coin < pmark && mark_ce(f.data())) ++c.ecn_marked;
    if (queue[d].empty() && free_at[d] < Clock::now()) free_at[d] = Clock::now();
    queued[d] += n;
    c.max_queue_bytes = std::max(c.max_queue_bytes, queued[d]);
    queue[d].push_back(std::move(f));
  };
  pollfd pfd[2] = {{fd_[0], POLLIN, 0}, {fd_[1], POLLIN, 0}};
  while (!stop_.load(std::memory_order_relaxed)) {
    if (shaping) serve();
    const bool waiting = shaping && (!queue[0].empty() || !queue[1].empty());
    const int r = poll(pfd, 2, waiting ? 0 : 1);
    if (r <= 0 && waiting) continue;
    if (r <= 0) {  // quiet for a millisecond: release held frames
      for (int d = 0; d < 2; ++d) {
        if (!held[d].empty()) send(1 - d, held[d].data(), held[d].size());
        held[d].clear();
      }
      continue;
    }
    for (int d = 0; d < 2; ++d) {
      if (!(pfd[d].revents & POLLIN)) continue;
      const ssize_t n = recv(fd_[d], buf.data(), buf.size(), MSG_DONTWAIT);
      if (n <= 0) continue;
      const int to = 1 - d;
      ImpairCounters& c = dir_[d];
      const size_t len = static_cast<size_t>(n);
      if (!is_roce(buf.data(), len)) {
        send(to, buf.data(), len);
        continue;
      }
      ++c.roce;
      if (shaping) {
        enqueue(d, buf.data(), len, u(rng[d]));
        continue;
      }
      // Draw every decision for every frame so the fates are a function of the
      // frame's index alone.
      const double p_loss = u(rng[d]), p_corrupt = u(rng[d]), p_dup = u(rng[d]), p_reorder = u(rng[d]);
      const uint64_t bit = rng[d]();
      if (p_loss < imp_.loss) {
        ++c.dropped;
        continue;
      }
      if (p_corrupt < imp_.corrupt) {
        const size_t at = 14 + bit % (len - 14);
        buf[at] ^= static_cast<uint8_t>(1u << ((bit >> 32) % 8));
        ++c.corrupted;
      }
      if (p_reorder < imp_.reorder && held[d].empty()) {
        held[d].assign(buf.data(), buf.data() + len);
        ++c.reordered;
        continue;
      }
      send(to, buf.data(), len);
      if (p_dup < imp_.duplicate) {
        send(to, buf.data(), len);
        ++c.duplicated;
      }
      if (!held[d].empty()) {
        send(to, held[d].data(), held[d].size());
        held[d].clear();
      }
    }
  }
}

}  // namespace isoroce::test
