// Parsing RoCEv2 frames. Never reads outside the given bytes; on failure the
// returned packet holds every field decoded before the error, so tools can
// still show what the frame was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/wire/packet.h"

namespace isoroce::wire {

struct ParseResult {
  ParseError error = ParseError::kOk;
  RocePacket pkt;
  bool ok() const { return error == ParseError::kOk; }
};

struct ParseOptions {
  bool verify_icrc = true;
  bool verify_ip_checksum = true;
};

// An Ethernet frame (optionally with one 802.1Q tag). The frame is mutable
// only because the ICRC check masks fields in place; it is unchanged on return.
ParseResult parse_frame(std::span<uint8_t> frame, const ParseOptions& opts = {});

// The same, starting at an IPv4 or IPv6 header at l3_offset (for captures
// whose link layer is not Ethernet).
ParseResult parse_ip(std::span<uint8_t> frame, size_t l3_offset, const ParseOptions& opts = {});

}  // namespace isoroce::wire
