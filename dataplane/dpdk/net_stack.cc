#include "dataplane/dpdk/net_stack.h"

#include <rte_ip.h>

#include <algorithm>
#include <cstring>

#include "transport/wire/bytes.h"

namespace isoroce::dataplane {
namespace {

using wire::load_be16;
using wire::load_be32;
using wire::store_be16;
using wire::store_be32;

constexpr uint16_t kEtherArp = 0x0806;
constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;
constexpr uint16_t kEtherVlan = 0x8100;
constexpr size_t kEthLen = 14;
constexpr size_t kArpLen = 28;
constexpr size_t kIpv6Len = 40;
constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoIcmpv6 = 58;
constexpr uint16_t kRoceV2Port = 4791;
constexpr uint8_t kIcmpEchoRequest = 8;
constexpr uint8_t kIcmpEchoReply = 0;
constexpr uint8_t kIcmpv6EchoRequest = 128;
constexpr uint8_t kIcmpv6EchoReply = 129;
constexpr uint8_t kNdSolicit = 135;
constexpr uint8_t kNdAdvert = 136;
constexpr uint8_t kNdOptSourceLl = 1;
constexpr uint8_t kNdOptTargetLl = 2;

const MacAddr kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

MacAddr mac_at(const uint8_t* p) {
  MacAddr m;
  std::memcpy(m.data(), p, 6);
  return m;
}

IpAddr ipv4_mapped(const uint8_t* p) {
  IpAddr a{};
  a[10] = a[11] = 0xff;
  std::memcpy(&a[12], p, 4);
  return a;
}

IpAddr ipv6_at(const uint8_t* p) {
  IpAddr a;
  std::memcpy(a.data(), p, 16);
  return a;
}

// Ones' complement checksum of the bytes, folded, not inverted.
uint32_t sum_bytes(const uint8_t* p, size_t len, uint32_t sum = 0) {
  return sum + rte_raw_cksum(p, len);
}

// rte_raw_cksum sums 16-bit words in host order; the folded result is stored
// as is (not byte-swapped), as DPDK stores its checksums.
void put_checksum(uint8_t* p, uint16_t sum) { std::memcpy(p, &sum, 2); }

uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

// ICMPv6 checksum (RFC 4443 2.3) over the pseudo-header and the message.
uint16_t icmpv6_checksum(const uint8_t* ip6, const uint8_t* msg, size_t len) {
  uint8_t ph[40] = {};
  std::memcpy(ph, ip6 + 8, 32);  // source and destination addresses
  store_be32(ph + 32, static_cast<uint32_t>(len));
  ph[39] = kProtoIcmpv6;
  return fold(sum_bytes(msg, len, sum_bytes(ph, sizeof ph)));
}

// Solicited-node multicast address ff02::1:ffXX:XXXX of an IPv6 address.
IpAddr solicited_node(const IpAddr& ip) {
  IpAddr a{};
  a[0] = 0xff;
  a[1] = 0x02;
  a[11] = 0x01;
  a[12] = 0xff;
  a[13] = ip[13];
  a[14] = ip[14];
  a[15] = ip[15];
  return a;
}

MacAddr multicast_mac(const IpAddr& group) {
  return {0x33, 0x33, group[12], group[13], group[14], group[15]};
}

// Ethernet header (and the VLAN tag of the frame being answered, if any).
size_t put_eth(std::vector<uint8_t>* out, const MacAddr& dst, const MacAddr& src,
               std::span<const uint8_t> vlan_tag, uint16_t ethertype) {
  out->clear();
  out->insert(out->end(), dst.begin(), dst.end());
  out->insert(out->end(), src.begin(), src.end());
  out->insert(out->end(), vlan_tag.begin(), vlan_tag.end());
  out->resize(out->size() + 2);
  store_be16(out->data() + out->size() - 2, ethertype);
  return out->size();
}

}  // namespace

size_t IpAddrHash::operator()(const IpAddr& a) const {
  uint64_t lo, hi;
  std::memcpy(&lo, a.data(), 8);
  std::memcpy(&hi, a.data() + 8, 8);
  return std::hash<uint64_t>()(lo * 0x9e3779b97f4a7c15ull ^ hi);
}

NetStack::NetStack(const MacAddr& mac, const IpAddr& ip, uint8_t prefix_len)
    : mac_(mac),
      ip_(ip),
      ipv4_(wire::is_ipv4_mapped(ip)),
      prefix_bits_(prefix_len == 0 ? 0 : static_cast<uint8_t>(std::min(128, (ipv4_ ? 96 : 0) + prefix_len))) {}

bool NetStack::on_link(const IpAddr& ip) const {
  if (wire::is_ipv4_mapped(ip) != ipv4_) return false;
  const unsigned whole = prefix_bits_ / 8, rest = prefix_bits_ % 8;
  if (std::memcmp(ip.data(), ip_.data(), whole) != 0) return false;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff00u >> rest);
  return (ip[whole] & mask) == (ip_[whole] & mask);
}

void NetStack::expire(sched::Picos now) {
  std::erase_if(pending_, [&](const auto& e) {
    const bool old = now - e.second.began >= kResolveTimeout;
    if (old) ++counters_.resolutions_expired;
    return old;
  });
}

NetStack::Resolution NetStack::resolve(const IpAddr& ip, sched::Picos now, std::vector<uint8_t>* frame) {
  frame->clear();
  if (table_.count(ip)) return Resolution::kKnown;
  if (ip == ip_ || !on_link(ip)) return ++counters_.solicits_refused, Resolution::kRefused;
  expire(now);
  auto it = pending_.find(ip);
  if (it != pending_.end()) {
    Pending& p = it->second;
    if (p.sent >= kMaxSolicits || now - p.last < kSolicitEvery) return Resolution::kPending;
    p.last = now;
    ++p.sent;
    *frame = solicit(ip);
    return Resolution::kSolicit;
  }
  // A new address: a place in the table and a token from the bucket.
  tokens_ = std::min<double>(kSolicitBurst, tokens_ + static_cast<double>(now - refilled_) * kSolicitsPerSecond / 1e12);
  refilled_ = now;
  if (pending_.size() >= kMaxPending || tokens_ < 1) return ++counters_.solicits_refused, Resolution::kRefused;
  tokens_ -= 1;
  pending_[ip] = Pending{now, now, 1};
  *frame = solicit(ip);
  return Resolution::kSolicit;
}

NetStack::Verdict NetStack::receive(std::span<const uint8_t> frame, std::vector<uint8_t>* reply) {
  reply->clear();
  if (frame.size() < kEthLen) return ++counters_.dropped, Verdict::kDrop;
  size_t l3 = kEthLen;
  uint16_t type = load_be16(&frame[12]);
  if (type == kEtherVlan) {
    if (frame.size() < kEthLen + 4) return ++counters_.dropped, Verdict::kDrop;
    type = load_be16(&frame[16]);
    l3 += 4;
  }
  Verdict v = Verdict::kDrop;
  switch (type) {
    case kEtherArp: v = on_arp(frame, l3, reply); break;
    case kEtherIpv4: v = on_ipv4(frame, l3, reply); break;
    case kEtherIpv6: v = on_ipv6(frame, l3, reply); break;
    default: break;
  }
  if (v == Verdict::kDrop) ++counters_.dropped;
  return v;
}

NetStack::Verdict NetStack::on_arp(std::span<const uint8_t> f, size_t l3,
                                   std::vector<uint8_t>* reply) {
  if (f.size() < l3 + kArpLen || !ipv4_) return Verdict::kDrop;
  const uint8_t* a = &f[l3];
  // Ethernet (1), IPv4, 6-byte hardware and 4-byte protocol addresses.
  if (load_be16(a) != 1 || load_be16(a + 2) != kEtherIpv4 || a[4] != 6 || a[5] != 4)
    return Verdict::kDrop;
  uint16_t op = load_be16(a + 6);
  MacAddr sha = mac_at(a + 8);
  IpAddr sip = ipv4_mapped(a + 14);
  IpAddr tip = ipv4_mapped(a + 24);
  bool for_us = tip == ip_;
  // RFC 826: update an entry we have; add one when the packet is for us
  // (within the bounds of learn_unsolicited).
  if (sip != ip_ && table_.count(sip)) learn(sip, sha);
  else if (sip != ip_ && for_us) learn_unsolicited(sip, sha);
  if (op == 2) {
    if (for_us) ++counters_.arp_replies_received;
    return for_us ? Verdict::kConsumed : Verdict::kDrop;
  }
  if (op != 1 || !for_us) return Verdict::kDrop;
  size_t off = put_eth(reply, sha, mac_, f.subspan(12, l3 - kEthLen), kEtherArp);
  reply->resize(off + kArpLen);
  uint8_t* r = reply->data() + off;
  store_be16(r, 1);
  store_be16(r + 2, kEtherIpv4);
  r[4] = 6;
  r[5] = 4;
  store_be16(r + 6, 2);
  std::memcpy(r + 8, mac_.data(), 6);
  std::memcpy(r + 14, &ip_[12], 4);
  std::memcpy(r + 18, sha.data(), 6);
  std::memcpy(r + 24, a + 14, 4);
  reply->resize(std::max<size_t>(reply->size(), 60));  // minimum Ethernet frame
  ++counters_.arp_requests_answered;
  return Verdict::kConsumed;
}

NetStack::Verdict NetStack::on_ipv4(std::span<const uint8_t> f, size_t l3,
                                    std::vector<uint8_t>* reply) {
  if (!ipv4_ || f.size() < l3 + 20) return Verdict::kDrop;
  const uint8_t* ip = &f[l3];
  size_t ihl = (ip[0] & 0xf) * 4u;
  size_t total = load_be16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl || f.size() < l3 + total) return Verdict::kDrop;
  if (std::memcmp(ip + 16, &ip_[12], 4) != 0) return Verdict::kDrop;
  if (ip[9] == kProtoUdp) {
    if (total < ihl + 8) return Verdict::kDrop;
    return load_be16(ip + ihl + 2) == kRoceV2Port ? Verdict::kRoce : Verdict::kDrop;
  }
  if (ip[9] != kProtoIcmp || total < ihl + 8 || ip[ihl] != kIcmpEchoRequest) return Verdict::kDrop;
  if ((load_be16(ip + 6) & 0x3fff) != 0) return Verdict::kDrop;  // fragments: not reassembled
  if (fold(sum_bytes(ip + ihl, total - ihl)) != 0) return Verdict::kDrop;
  // Echo reply: the request's identifier, sequence and data, addresses swapped.
  size_t off = put_eth(reply, mac_at(&f[6]), mac_, f.subspan(12, l3 - kEthLen), kEtherIpv4);
  reply->resize(off + 20 + (total - ihl));
  uint8_t* r = reply->data() + off;
  std::memset(r, 0, 20);
  r[0] = 0x45;
  r[1] = ip[1] & 0xfc;  // keep DSCP, not ECN
  store_be16(r + 2, static_cast<uint16_t>(20 + total - ihl));
  r[8] = 64;
  r[9] = kProtoIcmp;
  std::memcpy(r + 12, ip + 16, 4);
  std::memcpy(r + 16, ip + 12, 4);
  wire::ipv4_set_checksum(r);
  std::memcpy(r + 20, ip + ihl, total - ihl);
  r[20] = kIcmpEchoReply;
  store_be16(r + 22, 0);
  put_checksum(r + 22, fold(sum_bytes(r + 20, total - ihl)));
  reply->resize(std::max<size_t>(reply->size(), 60));
  ++counters_.echo_answered;
  return Verdict::kConsumed;
}

NetStack::Verdict NetStack::on_ipv6(std::span<const uint8_t> f, size_t l3,
                                    std::vector<uint8_t>* reply) {
  if (ipv4_ || f.size() < l3 + kIpv6Len) return Verdict::kDrop;
  const uint8_t* ip = &f[l3];
  size_t len = load_be16(ip + 4);
  if ((ip[0] >> 4) != 6 || f.size() < l3 + kIpv6Len + len) return Verdict::kDrop;
  IpAddr dst = ipv6_at(ip + 24);
  bool to_us = dst == ip_;
  if (ip[6] == kProtoUdp) {
    if (!to_us || len < 8) return Verdict::kDrop;
    return load_be16(ip + kIpv6Len + 2) == kRoceV2Port ? Verdict::kRoce : Verdict::kDrop;
  }
  if (ip[6] != kProtoIcmpv6 || len < 8) return Verdict::kDrop;
  if (!to_us && dst != solicited_node(ip_)) return Verdict::kDrop;
  return on_icmpv6(f, l3, len, reply);
}

NetStack::Verdict NetStack::on_icmpv6(std::span<const uint8_t> f, size_t l3, size_t len,
                                      std::vector<uint8_t>* reply) {
  const uint8_t* ip = &f[l3];
  const uint8_t* m = ip + kIpv6Len;
  if (icmpv6_checksum(ip, m, len) != 0) return Verdict::kDrop;
  IpAddr src = ipv6_at(ip + 8);
  uint8_t type = m[0];
  const bool unspecified_src = src == IpAddr{};
  if (type == kNdAdvert || type == kNdSolicit) {
    // RFC 4861 7.1: hop limit 255, code 0, at least the 24-byte message.
    if (ip[7] != 255 || m[1] != 0 || len < 24) return Verdict::kDrop;
    IpAddr target = ipv6_at(m + 8);
    std::optional<MacAddr> ll;
    for (size_t o = 24; o + 8 <= len;) {
      size_t olen = m[o + 1] * 8u;
      if (olen == 0 || o + olen > len) return Verdict::kDrop;
      if (m[o] == (type == kNdSolicit ? kNdOptSourceLl : kNdOptTargetLl)) ll = mac_at(m + o + 2);
      o += olen;
    }
    if (type == kNdAdvert) {
      if (ll && target != ip_) learn_unsolicited(target, *ll);
      ++counters_.nd_adverts_received;
      return Verdict::kConsumed;
    }
    if (target != ip_) return Verdict::kDrop;
    if (ll && !unspecified_src) learn_unsolicited(src, *ll);
    // Neighbour advertisement: solicited, override, with our link-layer address.
    IpAddr to = unspecified_src ? IpAddr{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1} : src;
    MacAddr to_mac = unspecified_src ? multicast_mac(to) : (ll ? *ll : mac_at(&f[6]));
    size_t off = put_eth(reply, to_mac, mac_, f.subspan(12, l3 - kEthLen), kEtherIpv6);
    reply->resize(off + kIpv6Len + 32);
    uint8_t* r = reply->data() + off;
    std::memset(r, 0, kIpv6Len + 32);
    r[0] = 0x60;
    store_be16(r + 4, 32);
    r[6] = kProtoIcmpv6;
    r[7] = 255;
    std::memcpy(r + 8, ip_.data(), 16);
    std::memcpy(r + 24, to.data(), 16);
    uint8_t* na = r + kIpv6Len;
    na[0] = kNdAdvert;
    na[4] = unspecified_src ? 0x20 : 0x60;  // S (unless unsolicited), O
    std::memcpy(na + 8, ip_.data(), 16);
    na[24] = kNdOptTargetLl;
    na[25] = 1;
    std::memcpy(na + 26, mac_.data(), 6);
    put_checksum(na + 2, icmpv6_checksum(r, na, 32));
    ++counters_.nd_solicits_answered;
    return Verdict::kConsumed;
  }
  if (type != kIcmpv6EchoRequest || ipv6_at(ip + 24) != ip_) return Verdict::kDrop;
  size_t off = put_eth(reply, mac_at(&f[6]), mac_, f.subspan(12, l3 - kEthLen), kEtherIpv6);
  reply->resize(off + kIpv6Len + len);
  uint8_t* r = reply->data() + off;
  std::memcpy(r, ip, kIpv6Len + len);
  r[7] = 64;
  std::memcpy(r + 8, ip_.data(), 16);
  std::memcpy(r + 24, src.data(), 16);
  r[kIpv6Len] = kIcmpv6EchoReply;
  store_be16(r + kIpv6Len + 2, 0);
  put_checksum(r + kIpv6Len + 2, icmpv6_checksum(r, r + kIpv6Len, len));
  ++counters_.echo_answered;
  return Verdict::kConsumed;
}

std::vector<uint8_t> NetStack::solicit(const IpAddr& target) {
  std::vector<uint8_t> out;
  ++counters_.solicits_sent;
  if (ipv4_) {
    size_t off = put_eth(&out, kBroadcast, mac_, {}, kEtherArp);
    out.resize(60);
    uint8_t* a = out.data() + off;
    store_be16(a, 1);
    store_be16(a + 2, kEtherIpv4);
    a[4] = 6;
    a[5] = 4;
    store_be16(a + 6, 1);
    std::memcpy(a + 8, mac_.data(), 6);
    std::memcpy(a + 14, &ip_[12], 4);
    std::memcpy(a + 24, &target[12], 4);
    return out;
  }
  IpAddr group = solicited_node(target);
  size_t off = put_eth(&out, multicast_mac(group), mac_, {}, kEtherIpv6);
  out.resize(off + kIpv6Len + 32);
  uint8_t* r = out.data() + off;
  r[0] = 0x60;
  store_be16(r + 4, 32);
  r[6] = kProtoIcmpv6;
  r[7] = 255;
  std::memcpy(r + 8, ip_.data(), 16);
  std::memcpy(r + 24, group.data(), 16);
  uint8_t* ns = r + kIpv6Len;
  ns[0] = kNdSolicit;
  std::memcpy(ns + 8, target.data(), 16);
  ns[24] = kNdOptSourceLl;
  ns[25] = 1;
  std::memcpy(ns + 26, mac_.data(), 6);
  put_checksum(ns + 2, icmpv6_checksum(r, ns, 32));
  return out;
}

std::optional<MacAddr> NetStack::lookup(const IpAddr& ip) const {
  auto it = table_.find(ip);
  if (it == table_.end()) return std::nullopt;
  return it->second;
}

void NetStack::set_neighbor(const IpAddr& ip, const MacAddr& mac) { learn(ip, mac); }

void NetStack::learn_unsolicited(const IpAddr& ip, const MacAddr& mac) {
  const bool asked = pending_.count(ip) != 0;
  if (!asked && !table_.count(ip) && (!on_link(ip) || table_.size() >= kMaxNeighbors)) {
    ++counters_.neighbors_refused;
    return;
  }
  learn(ip, mac);
}

void NetStack::learn(const IpAddr& ip, const MacAddr& mac) {
  pending_.erase(ip);
  auto [it, added] = table_.try_emplace(ip, mac);
  if (!added && it->second == mac) return;
  it->second = mac;
  learned_.emplace_back(ip, mac);
}

std::vector<std::pair<IpAddr, MacAddr>> NetStack::take_learned() {
  std::vector<std::pair<IpAddr, MacAddr>> out;
  out.swap(learned_);
  return out;
}

}  // namespace isoroce::dataplane
