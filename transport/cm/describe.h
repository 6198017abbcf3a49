// One line of text for a CM MAD, for isoroce-pcap decode and logs:
// "CM ConnectRequest tid=0x... local_comm_id=0x... service_id=0x... (rdma_cm tcp port 18515) qpn=0x3d ...".
// Never fails: a MAD that check_mad() refuses is described by the refusal.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace isoroce::cm {

std::string describe_mad(std::span<const uint8_t> mad);

}  // namespace isoroce::cm
