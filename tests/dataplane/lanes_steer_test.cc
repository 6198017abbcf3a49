// Lanes (dataplane/dpdk/lanes.h): the BTH destination QPN read off a frame
// for steering, for every frame shape the wire can carry, and nothing for
// what is not a RoCEv2 frame (those stay with lane 0, whose engine counts them).
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "dataplane/dpdk/lanes.h"
#include "transport/wire/build.h"
#include "transport/wire/opcode.h"

namespace isoroce::dataplane {
namespace {

std::vector<uint8_t> frame(bool ipv4, bool vlan, uint32_t qpn) {
  wire::FrameSpec s;
  s.src_ip = ipv4 ? wire::ipv4_mapped(0x0a000001) : wire::IpAddr{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  s.dst_ip = ipv4 ? wire::ipv4_mapped(0x0a000002) : wire::IpAddr{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  if (vlan) s.vlan_tci = 7;
  s.opcode = wire::op::kRcSendOnly;
  s.dest_qp = wire::Qpn(qpn);
  std::array<uint8_t, 16> payload{};
  s.payload = payload;
  std::vector<uint8_t> out(wire::frame_size(s));
  EXPECT_TRUE(wire::build_frame(s, out).ok());
  return out;
}

TEST(LanesSteer, DestQpnOfIpv4Ipv6AndVlanFrames) {
  for (bool v4 : {true, false})
    for (bool vlan : {false, true})
      for (uint32_t qpn : {1u, 17u, 0x100011u, 0xfffffeu}) {
        auto f = frame(v4, vlan, qpn);
        auto q = roce_dest_qpn(f);
        ASSERT_TRUE(q.has_value()) << v4 << vlan << qpn;
        EXPECT_EQ(*q, qpn);
      }
}

TEST(LanesSteer, NothingFromShortOrForeignFrames) {
  auto f = frame(true, false, 99);
  for (size_t n : {0u, 13u, 33u, 41u, 53u}) EXPECT_FALSE(roce_dest_qpn(std::span(f).first(n)).has_value()) << n;
  auto udp = f;
  udp[14 + 20 + 3] ^= 1;  // another UDP port than 4791
  EXPECT_FALSE(roce_dest_qpn(udp).has_value());
  auto tcp = f;
  tcp[14 + 9] = 6;
  EXPECT_FALSE(roce_dest_qpn(tcp).has_value());
  auto arp = f;
  arp[12] = 0x08, arp[13] = 0x06;
  EXPECT_FALSE(roce_dest_qpn(arp).has_value());
}

}  // namespace
}  // namespace isoroce::dataplane
