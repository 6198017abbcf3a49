// A pcapng file (draft-ietf-opsawg-pcapng) written as frames come, for the
// simulator's --pcap captures: one section, one Ethernet interface per host link
// (if_name "host NAME", if_tsresol 10^-9: virtual nanoseconds from 0), and an
// Enhanced Packet Block per frame with its direction (epb_flags) and an optional
// comment (opt_comment: the scheduling decision that released a transmitted frame).
// Written in the host's byte order, which the byte-order magic records.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace isoroce::tools {

class PcapngWriter {
 public:
  PcapngWriter() = default;
  ~PcapngWriter();
  PcapngWriter(const PcapngWriter&) = delete;
  PcapngWriter& operator=(const PcapngWriter&) = delete;

  // Creates the file with one interface per name (interface i: names[i]); false
  // (and err) on failure.
  bool open(const std::string& path, const std::vector<std::string>& interfaces, std::string& err);
  // One frame on interface `iface`; outbound: sent by the host (else received).
  void write(uint32_t iface, uint64_t time_ns, std::span<const uint8_t> frame, bool outbound,
             std::string_view comment = {});
  uint64_t frames() const { return frames_; }
  // False if a write failed (disk full): the file is incomplete.
  bool ok() const { return ok_; }

 private:
  void put(const void* p, size_t n);
  void put32(uint32_t v) { put(&v, 4); }
  void put16(uint16_t v) { put(&v, 2); }
  void pad(size_t n);  // zero bytes to the next multiple of 4 after n bytes
  void option(uint16_t code, std::span<const uint8_t> value);

  std::FILE* f_ = nullptr;
  uint64_t frames_ = 0;
  bool ok_ = true;
};

}  // namespace isoroce::tools
