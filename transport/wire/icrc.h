// RoCEv2 invariant CRC (IBTA annex A17.3.3): CRC-32 (the Ethernet polynomial)
// over 8 bytes of ones standing for the masked LRH, then the IP header with
// its variant fields (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow
// label, hop limit) set to ones, the UDP header with its checksum set to ones,
// the BTH with its resv8a byte (FECN/BECN) set to ones, then every byte up to
// the ICRC. The ICRC is appended least significant byte first, as the
// Ethernet FCS is (rxe and hardware RNICs agree).
//
// Computed with DPDK's rte_net_crc over the frame itself: the masked bytes and
// the 8 bytes in front of the IP header are overwritten for the computation
// and restored before returning, so no byte of payload is copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace isoroce::wire {

// CRC of frame[l3_offset, icrc_offset). The IP header must be complete and
// its version valid (the parser or the builder has checked that); the frame is
// not modified on return. icrc_offset must be >= l3_offset + IP + UDP + BTH.
uint32_t icrc_compute(std::span<uint8_t> frame, size_t l3_offset, size_t icrc_offset);

// Writes the ICRC into frame[icrc_offset, icrc_offset + 4).
void icrc_seal(std::span<uint8_t> frame, size_t l3_offset, size_t icrc_offset);

// Reads the 4-byte ICRC stored at icrc_offset.
uint32_t icrc_stored(std::span<const uint8_t> frame, size_t icrc_offset);

}  // namespace isoroce::wire
