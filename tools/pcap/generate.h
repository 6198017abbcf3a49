// Deterministic sample traffic: at least one frame of every opcode the codec
// knows, with varied payload sizes and every pad count, for `isoroce-pcap gen`
// and for the interop tests that feed it to tshark and scapy.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/wire/build.h"

namespace isoroce::tools {

struct GeneratedFrame {
  wire::FrameSpec spec;          // spec.payload is empty here; see payload
  std::vector<uint8_t> payload;  // the payload the frame carries
  std::vector<uint8_t> bytes;    // the built frame
};

std::vector<GeneratedFrame> generate_frames(bool ipv6, uint64_t seed);

}  // namespace isoroce::tools
