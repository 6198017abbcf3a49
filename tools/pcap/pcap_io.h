// Reading and writing classic pcap files with libpcap (pcapng is read too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace isoroce::tools {

struct CapturedFrame {
  uint64_t frame_no = 0;  // 1-based, as tshark numbers frames
  int linktype = 0;       // DLT_* of the file
  std::vector<uint8_t> bytes;
};

// Reads every frame of a capture. Returns false and sets err on failure.
bool read_capture(const std::string& path, std::vector<CapturedFrame>& frames, std::string& err);

// Writes Ethernet frames to a pcap file. Returns false and sets err on failure.
bool write_capture(const std::string& path, const std::vector<std::vector<uint8_t>>& frames,
                   std::string& err);

// Offset of the IP header for a frame of this link type, or -1 when the
// link type carries Ethernet (parse_frame handles it) or is unsupported (-2).
int l3_offset_for_linktype(int linktype, const std::vector<uint8_t>& bytes);

}  // namespace isoroce::tools
