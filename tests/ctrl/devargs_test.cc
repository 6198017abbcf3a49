// What isoroced adds to the devargs of kernel-path ports (ctrl/config.h).
#include <gtest/gtest.h>

#include "ctrl/config.h"

namespace isoroce::ctrl {
namespace {

// DPDK's af_xdp default (busy_budget 64) makes every empty receive burst a
// recvfrom() that busy-polls the socket; isoroced asks for 0 unless told.
TEST(DaemonDevargs, AfXdpPortsDoNotBusyPollUnlessTheDevargsSaySo) {
  EXPECT_EQ(af_xdp_devargs("net_af_xdp0,iface=veth-a"), "net_af_xdp0,iface=veth-a,busy_budget=0");
  EXPECT_EQ(af_xdp_devargs("net_af_xdp_eth1,iface=eth1,start_queue=0"),
            "net_af_xdp_eth1,iface=eth1,start_queue=0,busy_budget=0");
  EXPECT_EQ(af_xdp_devargs("net_af_xdp0,iface=veth-a,busy_budget=32"), "net_af_xdp0,iface=veth-a,busy_budget=32");
  EXPECT_EQ(af_xdp_devargs("net_af_xdp0,busy_budget=0,iface=veth-a"), "net_af_xdp0,busy_budget=0,iface=veth-a");
  // Other drivers are left alone.
  EXPECT_EQ(af_xdp_devargs("net_af_packet0,iface=veth-a"), "net_af_packet0,iface=veth-a");
  EXPECT_EQ(af_xdp_devargs("net_ring0"), "net_ring0");
  EXPECT_EQ(af_xdp_devargs(interface_devargs("veth-a", 1024, true)), "net_af_xdp_veth-a,iface=veth-a,busy_budget=0");
}

}  // namespace
}  // namespace isoroce::ctrl
