// The Ethernet address a port takes for its own on a kernel interface it
// shares with the kernel (net_af_packet; docs/isoroced.md, "An address of its
// own"): the interface's address, locally administered, with bit 2 of the
// first octet flipped, so it differs from the interface's whether that was
// globally or locally administered (a veth's random one). Frames to it reach
// the daemon's AF_PACKET tap and the kernel marks them for another host
// (PACKET_OTHERHOST), so its IP stack drops them first thing. Pure; unit-tested
// in tests/dataplane/port_mac_test.cc.
#pragma once

#include <cstdint>

#include "transport/wire/packet.h"

namespace isoroce::dataplane {

constexpr wire::MacAddr own_port_mac(const wire::MacAddr& interface_mac) {
  wire::MacAddr m = interface_mac;
  // Locally administered (bit 1), unicast (bit 0 clear), bit 2 flipped.
  m[0] = static_cast<uint8_t>(((interface_mac[0] | 0x02) ^ 0x04) & 0xfe);
  return m;
}

}  // namespace isoroce::dataplane
