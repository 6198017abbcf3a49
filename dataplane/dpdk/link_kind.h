// What kind of kernel interface a port sits on, as far as a port's Ethernet
// address of its own is concerned (port.h, take_own_mac): interfaces that hand
// an AF_PACKET socket only the frames addressed to their own address (macvlan
// and ipvlan demultiplex their lower device's frames by destination; a Wi-Fi
// station's access point forwards only its associated address) cannot have
// one. Asked of the kernel (rtnetlink's IFLA_INFO_KIND, sysfs for Wi-Fi).
#pragma once

#include <cstdint>
#include <string>

namespace isoroce::dataplane {

// The rtnetlink link kind of interface `if_index` ("veth", "macvlan", "vlan",
// "bridge", ...), "" for a physical NIC or if it cannot be read.
std::string link_kind(uint32_t if_index);

// Whether frames to another unicast address than the interface's reach an
// AF_PACKET socket bound to it; if not, *why names the kind.
bool delivers_other_addresses(uint32_t if_index, std::string* why);

}  // namespace isoroce::dataplane
