// Deterministic CM traffic: two cm::Managers go through a whole exchange
// (REQ, MRA, REP, RTU, DREQ, DREP; a REQ rejected; SIDR_REQ, SIDR_REP) and
// every MAD they send becomes a RoCEv2 UD SEND to QP1, for `isoroce-pcap gen
// --cm` and for the interop test that has tshark decode them.
#pragma once

#include <cstdint>
#include <vector>

#include "tools/pcap/generate.h"

namespace isoroce::tools {

std::vector<GeneratedFrame> generate_cm_frames(bool ipv6, uint64_t seed);

}  // namespace isoroce::tools
