// Strong types for the identifiers of the RoCEv2 base transport header.
// A Psn is 24 bits and compares with serial-number arithmetic (IBTA vol.1
// 9.7.1: a PSN is "ahead" of another when it lies in the half of the 24-bit
// space that follows it), so ordering survives the wrap from 0xffffff to 0.
#pragma once

#include <cstdint>
#include <compare>

namespace isoroce::wire {

inline constexpr uint32_t kMask24 = 0xffffff;

class Psn {
 public:
  constexpr Psn() = default;
  constexpr explicit Psn(uint32_t v) : v_(v & kMask24) {}
  constexpr uint32_t value() const { return v_; }

  constexpr Psn operator+(uint32_t n) const { return Psn(v_ + n); }
  constexpr Psn operator-(uint32_t n) const { return Psn(v_ - n); }
  constexpr Psn& operator+=(uint32_t n) { v_ = (v_ + n) & kMask24; return *this; }
  constexpr Psn& operator++() { return *this += 1; }
  constexpr bool operator==(const Psn&) const = default;

  // Signed distance a - b in [-2^23, 2^23): positive when a is after b.
  friend constexpr int32_t psn_diff(Psn a, Psn b) {
    return static_cast<int32_t>((a.v_ - b.v_) << 8) >> 8;
  }
  constexpr bool before(Psn o) const { return psn_diff(*this, o) < 0; }
  constexpr bool after(Psn o) const { return psn_diff(*this, o) > 0; }

 private:
  uint32_t v_ = 0;
};

class Qpn {
 public:
  constexpr Qpn() = default;
  constexpr explicit Qpn(uint32_t v) : v_(v & kMask24) {}
  constexpr uint32_t value() const { return v_; }
  constexpr auto operator<=>(const Qpn&) const = default;

 private:
  uint32_t v_ = 0;
};

class Rkey {
 public:
  constexpr Rkey() = default;
  constexpr explicit Rkey(uint32_t v) : v_(v) {}
  constexpr uint32_t value() const { return v_; }
  constexpr auto operator<=>(const Rkey&) const = default;

 private:
  uint32_t v_ = 0;
};

// Linux derives a RoCEv2 UDP source port from the two QP numbers when no
// flow label is set: rdma_calc_flow_label() folds their product into 20 bits
// and rdma_flow_label_to_udp_sport() folds those into the 14 low bits of a
// port in 0xc000..0xffff (include/rdma/ib_verbs.h).
constexpr uint32_t flow_label_from_qpns(Qpn local, Qpn remote) {
  uint64_t v = static_cast<uint64_t>(local.value()) * remote.value();
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<uint32_t>(v & 0xfffff);
}

constexpr uint16_t udp_sport_from_flow_label(uint32_t flow_label) {
  uint32_t low = flow_label & 0x3fff;
  uint32_t high = flow_label & 0xfc000;
  low ^= high >> 14;
  return static_cast<uint16_t>(low | 0xc000);
}

constexpr uint16_t udp_sport_for_qps(Qpn local, Qpn remote) {
  return udp_sport_from_flow_label(flow_label_from_qpns(local, remote));
}

inline constexpr uint16_t kRoceV2Port = 4791;

}  // namespace isoroce::wire
