#include "tools/sim/pcapng_writer.h"

#include <cerrno>
#include <cstring>

namespace isoroce::tools {

namespace {

constexpr uint32_t kSectionHeader = 0x0A0D0D0A;
constexpr uint32_t kInterfaceDescription = 1;
constexpr uint32_t kEnhancedPacket = 6;
constexpr uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr uint16_t kOptEnd = 0, kOptComment = 1;
constexpr uint16_t kIfName = 2, kIfTsresol = 9;
constexpr uint16_t kEpbFlags = 2;
constexpr uint16_t kLinktypeEthernet = 1;

constexpr size_t padded(size_t n) { return (n + 3) & ~size_t{3}; }
constexpr size_t option_size(size_t len) { return 4 + padded(len); }

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

PcapngWriter::~PcapngWriter() {
  if (f_) std::fclose(f_);
}

void PcapngWriter::put(const void* p, size_t n) {
  if (std::fwrite(p, 1, n, f_) != n) ok_ = false;
}

void PcapngWriter::pad(size_t n) {
  static constexpr uint8_t kZero[4] = {};
  put(kZero, padded(n) - n);
}

void PcapngWriter::option(uint16_t code, std::span<const uint8_t> value) {
  put16(code);
  put16(static_cast<uint16_t>(value.size()));
  put(value.data(), value.size());
  pad(value.size());
}

bool PcapngWriter::open(const std::string& path, const std::vector<std::string>& interfaces, std::string& err) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) {
    err = std::strerror(errno);
    return false;
  }
  // Section Header Block: no options, section length unknown (-1).
  const uint32_t shb_len = 28;
  put32(kSectionHeader);
  put32(shb_len);
  put32(kByteOrderMagic);
  put16(1);
  put16(0);
  const int64_t unknown = -1;
  put(&unknown, 8);
  put32(shb_len);
  for (const std::string& name : interfaces) {
    const uint8_t tsresol = 9;  // 10^-9 s
    const auto len = static_cast<uint32_t>(16 + option_size(name.size()) + option_size(1) + 4 + 4);
    put32(kInterfaceDescription);
    put32(len);
    put16(kLinktypeEthernet);
    put16(0);
    put32(0);  // snaplen: no limit
    option(kIfName, bytes_of(name));
    option(kIfTsresol, std::span(&tsresol, 1));
    option(kOptEnd, {});
    put32(len);
  }
  if (!ok_) err = std::strerror(errno);
  return ok_;
}

void PcapngWriter::write(uint32_t iface, uint64_t time_ns, std::span<const uint8_t> frame, bool outbound,
                         std::string_view comment) {
  if (!f_) return;
  const size_t opts = (comment.empty() ? 0 : option_size(comment.size())) + option_size(4) + 4;
  const auto len = static_cast<uint32_t>(28 + padded(frame.size()) + opts + 4);
  put32(kEnhancedPacket);
  put32(len);
  put32(iface);
  put32(static_cast<uint32_t>(time_ns >> 32));
  put32(static_cast<uint32_t>(time_ns));
  put32(static_cast<uint32_t>(frame.size()));
  put32(static_cast<uint32_t>(frame.size()));
  put(frame.data(), frame.size());
  pad(frame.size());
  if (!comment.empty()) option(kOptComment, bytes_of(comment));
  const uint32_t flags = outbound ? 2 : 1;  // bits 0-1: direction (1 inbound, 2 outbound)
  option(kEpbFlags, std::span(reinterpret_cast<const uint8_t*>(&flags), 4));
  option(kOptEnd, {});
  put32(len);
  ++frames_;
}

}  // namespace isoroce::tools
