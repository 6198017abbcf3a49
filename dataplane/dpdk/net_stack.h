// The little IP stack a port needs beside RoCEv2 so real peers can reach it:
// ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861) — answering for our
// address, learning peers, soliciting a peer's MAC — and ICMP/ICMPv6 echo so
// `ping` works. Pure frame logic over byte spans: no DPDK calls, no clock, so
// tests feed it hand-built frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/time.h"
#include "transport/wire/packet.h"

namespace isoroce::dataplane {

using wire::IpAddr;
using wire::MacAddr;

struct NetStackCounters {
  uint64_t arp_requests_answered = 0;
  uint64_t arp_replies_received = 0;
  uint64_t nd_solicits_answered = 0;
  uint64_t nd_adverts_received = 0;
  uint64_t echo_answered = 0;
  uint64_t solicits_sent = 0;
  uint64_t solicits_refused = 0;    // resolve(): off-link, too many pending, or the bucket empty
  uint64_t resolutions_expired = 0; // pending resolutions never answered within kResolveTimeout
  uint64_t neighbors_refused = 0;   // entries not learnt: off-link sender, or the table full
  uint64_t dropped = 0;  // not RoCE and not for the stack (other protocols, other hosts)
};

struct IpAddrHash {
  size_t operator()(const IpAddr& a) const;
};
using NeighborTable = std::unordered_map<IpAddr, MacAddr, IpAddrHash>;

class NetStack {
 public:
  static constexpr size_t kMaxPending = 64;
  static constexpr unsigned kMaxSolicits = 3;  // RFC 4861 MAX_MULTICAST_SOLICIT
  static constexpr sched::Picos kSolicitEvery = 250'000'000'000;   // 250 ms
  static constexpr sched::Picos kResolveTimeout = 1'000'000'000'000;  // 1 s
  static constexpr unsigned kSolicitBurst = 16;
  static constexpr unsigned kSolicitsPerSecond = 16;
  static constexpr size_t kMaxNeighbors = 1024;

  // prefix_len: the port's subnet (0: every address is on-link).
  NetStack(const MacAddr& mac, const IpAddr& ip, uint8_t prefix_len = 0);

  enum class Verdict : uint8_t {
    kRoce,      // UDP to port 4791 on our address: give it to the engine
    kConsumed,  // handled here (a reply may have been written)
    kDrop,      // not for us or malformed
  };

  // Handles one received frame. When the stack answers, the reply frame is
  // written to *reply (resized to its length); otherwise *reply is emptied.
  Verdict receive(std::span<const uint8_t> frame, std::vector<uint8_t>* reply);

  // A frame asking who has `ip` (ARP request, or neighbour solicitation to
  // its solicited-node multicast address). Keeps no state: resolve() does.
  std::vector<uint8_t> solicit(const IpAddr& ip);

  enum class Resolution : uint8_t {
    kKnown,    // the neighbour entry exists
    kSolicit,  // *frame holds a solicitation to send; the answer will be learnt
    kPending,  // a resolution is under way and not due for another solicitation
    kRefused,  // off-link, kMaxPending under way, or the solicitation budget spent
  };
  // Resolves ip within the bounds above (the header comment).
  Resolution resolve(const IpAddr& ip, sched::Picos now, std::vector<uint8_t>* frame);
  bool on_link(const IpAddr& ip) const;
  size_t pending() const { return pending_.size(); }

  std::optional<MacAddr> lookup(const IpAddr& ip) const;
  void set_neighbor(const IpAddr& ip, const MacAddr& mac);
  // Neighbours learnt or changed since the last call (for Engine::set_neighbor).
  std::vector<std::pair<IpAddr, MacAddr>> take_learned();
  const NeighborTable& neighbors() const { return table_; }

  const MacAddr& mac() const { return mac_; }
  const IpAddr& ip() const { return ip_; }
  const NetStackCounters& counters() const { return counters_; }

 private:
  Verdict on_arp(std::span<const uint8_t> frame, size_t l3, std::vector<uint8_t>* reply);
  Verdict on_ipv4(std::span<const uint8_t> frame, size_t l3, std::vector<uint8_t>* reply);
  Verdict on_ipv6(std::span<const uint8_t> frame, size_t l3, std::vector<uint8_t>* reply);
  Verdict on_icmpv6(std::span<const uint8_t> frame, size_t l3, size_t len,
                    std::vector<uint8_t>* reply);
  void learn(const IpAddr& ip, const MacAddr& mac);
  // learn() for what a peer told us on its own: known, asked for, or on-link
  // with room in the table.
  void learn_unsolicited(const IpAddr& ip, const MacAddr& mac);
  void expire(sched::Picos now);

  struct Pending {
    sched::Picos began = 0, last = 0;
    unsigned sent = 0;
  };

  MacAddr mac_;
  IpAddr ip_;
  bool ipv4_;
  uint8_t prefix_bits_;  // of the 128-bit address (IPv4: 96 + prefix)
  NeighborTable table_;
  std::unordered_map<IpAddr, Pending, IpAddrHash> pending_;
  double tokens_ = kSolicitBurst;
  sched::Picos refilled_ = 0;
  std::vector<std::pair<IpAddr, MacAddr>> learned_;
  NetStackCounters counters_;
};

}  // namespace isoroce::dataplane
