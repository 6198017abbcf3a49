// A classic pcap file with nanosecond timestamps (magic 0xa1b23c4d), written
// as frames come, for the simulator's --pcap captures (virtual time from 0).
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace isoroce::tools {

class PcapWriter {
 public:
  PcapWriter() = default;
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Creates the file; false (and err) on failure.
  bool open(const std::string& path, std::string& err);
  void write(uint64_t time_ns, std::span<const uint8_t> frame);
  uint64_t frames() const { return frames_; }

 private:
  std::FILE* f_ = nullptr;
  uint64_t frames_ = 0;
};

}  // namespace isoroce::tools
