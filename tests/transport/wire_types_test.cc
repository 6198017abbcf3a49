// PSN serial arithmetic and the Linux UDP source port derivation.
#include <gtest/gtest.h>

#include "transport/wire/types.h"

namespace isoroce::wire {
namespace {

TEST(Psn, WrapsAt24Bits) {
  EXPECT_EQ(Psn(0xffffff) + 1, Psn(0));
  EXPECT_EQ(Psn(0x1000000).value(), 0u);
  EXPECT_EQ(Psn(0) - 1, Psn(0xffffff));
  Psn p(0xfffffe);
  ++p;
  ++p;
  EXPECT_EQ(p.value(), 0u);
}

TEST(Psn, SerialOrderAcrossWrap) {
  // Receive 0xfffff0, expect 0x000010 to be after it and 16 + 16 away.
  EXPECT_EQ(psn_diff(Psn(0x10), Psn(0xfffff0)), 32);
  EXPECT_EQ(psn_diff(Psn(0xfffff0), Psn(0x10)), -32);
  EXPECT_TRUE(Psn(0xfffff0).before(Psn(0x10)));
  EXPECT_TRUE(Psn(0x10).after(Psn(0xfffff0)));
  // Half the space ahead is "after", the other half "before".
  EXPECT_EQ(psn_diff(Psn(0x7fffff), Psn(0)), 0x7fffff);
  EXPECT_EQ(psn_diff(Psn(0x800000), Psn(0)), -0x800000);
  EXPECT_FALSE(Psn(5).before(Psn(5)));
}

TEST(UdpSport, MatchesLinuxRxeCaptures) {
  // Receive the QPN pairs and UDP source ports Linux rxe used in the shipped
  // captures (linlinw5_*.pcap): both directions of a connection carry the
  // port derived from the product of the two QP numbers.
  EXPECT_EQ(udp_sport_for_qps(Qpn(27), Qpn(29)), 49935);  // rdma_write_bw
  EXPECT_EQ(udp_sport_for_qps(Qpn(29), Qpn(27)), 49935);
  EXPECT_EQ(udp_sport_for_qps(Qpn(32), Qpn(33)), 50208);  // pingpong_rc
}

TEST(UdpSport, AlwaysInRoceRange) {
  for (uint32_t a = 1; a < 3000; a += 7) {
    for (uint32_t b = 0xfff000; b < 0xffffff; b += 977) {
      const uint16_t s = udp_sport_for_qps(Qpn(a), Qpn(b));
      ASSERT_GE(s, 0xc000);
    }
  }
  EXPECT_EQ(udp_sport_from_flow_label(0), 0xc000);
  // The six high bits of the label fold into the low bits.
  EXPECT_EQ(udp_sport_from_flow_label(0xfc000), 0xc000 | 0x3f);
}

}  // namespace
}  // namespace isoroce::wire
