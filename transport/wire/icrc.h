// RoCEv2 invariant CRC (IBTA annex A17.3.3): CRC-32 (the Ethernet polynomial)
// over 8 bytes of ones standing for the masked LRH, then the IP header with
// its variant fields (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow
// label, hop limit) set to ones, the UDP header with its checksum set to ones,
// the BTH with its resv8a byte (FECN/BECN) set to ones, then every byte up to
// the ICRC. The ICRC is appended least significant byte first, as the
// Ethernet FCS is (rxe and hardware RNICs agree).
//
// Computed with crc32.h's folding CRC: the first bytes of the IP datagram (IP,
// UDP and BTH headers, where every masked field lies) are copied to the stack and
// masked there; the rest is read in place. The frame is never written.
//
// Incremental form, for building and receiving a frame while its payload is copied
// (each payload byte read once), in one fold stream over headers and payload (one
// reduction per frame): icrc_fold_begin() over the headers, crc32_fold_copy() over
// the payload as it is copied (piece by piece), crc32_fold() over the pad, then
// icrc_finish(crc32_fold_register()). icrc_compute() is the same stream without the
// copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/wire/crc32.h"

namespace isoroce::wire {

// CRC of frame[l3_offset, icrc_offset). The IP header must be complete and
// its version valid (the parser or the builder has checked that). icrc_offset
// must be >= l3_offset + IP + UDP + BTH.
uint32_t icrc_compute(std::span<const uint8_t> frame, size_t l3_offset, size_t icrc_offset);

// The CRC stream after the masked LRH and frame[l3_offset, end_offset) (end_offset
// at or past the BTH: the headers in front of a payload), to be continued.
Crc32Fold icrc_fold_begin(std::span<const uint8_t> frame, size_t l3_offset, size_t end_offset);

// Its register (to continue with crc32_update(): one reduction more).
uint32_t icrc_begin(std::span<const uint8_t> frame, size_t l3_offset, size_t end_offset);

// The ICRC from the register after its last byte.
inline uint32_t icrc_finish(uint32_t reg) { return ~reg; }

// Writes the ICRC into frame[icrc_offset, icrc_offset + 4).
void icrc_seal(std::span<uint8_t> frame, size_t l3_offset, size_t icrc_offset);

// Writes `icrc` at p, least significant byte first.
inline void icrc_store(uint8_t* p, uint32_t icrc) {
  p[0] = static_cast<uint8_t>(icrc);
  p[1] = static_cast<uint8_t>(icrc >> 8);
  p[2] = static_cast<uint8_t>(icrc >> 16);
  p[3] = static_cast<uint8_t>(icrc >> 24);
}

// Reads the 4-byte ICRC stored at icrc_offset.
uint32_t icrc_stored(std::span<const uint8_t> frame, size_t icrc_offset);

}  // namespace isoroce::wire
