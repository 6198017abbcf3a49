// own_port_mac (dataplane/dpdk/port_mac.h): a net_af_packet port's address of
// its own differs from its interface's, whether that was globally or locally
// administered, and is a locally administered unicast address.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "dataplane/dpdk/port_mac.h"

namespace isoroce::dataplane {
namespace {

TEST(OwnPortMac, DerivedFromTheInterfacesAddress) {
  // A NIC's (globally administered) and a veth's (random, locally administered).
  EXPECT_EQ(own_port_mac({0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e}), (wire::MacAddr{0x06, 0x1b, 0x21, 0x3c, 0x4d, 0x5e}));
  EXPECT_EQ(own_port_mac({0x02, 0x11, 0x22, 0x33, 0x44, 0x55}), (wire::MacAddr{0x06, 0x11, 0x22, 0x33, 0x44, 0x55}));
  EXPECT_EQ(own_port_mac({0x06, 0x11, 0x22, 0x33, 0x44, 0x55}), (wire::MacAddr{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}));
  EXPECT_EQ(own_port_mac({0xfe, 0x11, 0x22, 0x33, 0x44, 0x55}), (wire::MacAddr{0xfa, 0x11, 0x22, 0x33, 0x44, 0x55}));
}

TEST(OwnPortMac, NeverTheInterfacesAndAlwaysLocalUnicast) {
  std::mt19937 rng(4791);
  for (int i = 0; i < 10000; ++i) {
    wire::MacAddr iface;
    for (auto& b : iface) b = static_cast<uint8_t>(rng());
    iface[0] &= 0xfe;  // an interface's address is unicast
    const wire::MacAddr own = own_port_mac(iface);
    ASSERT_NE(own, iface);
    EXPECT_EQ(own[0] & 0x01, 0);  // unicast
    EXPECT_EQ(own[0] & 0x02, 2);  // locally administered
    EXPECT_TRUE(std::equal(own.begin() + 1, own.end(), iface.begin() + 1));
  }
}

}  // namespace
}  // namespace isoroce::dataplane
