#include "tools/sim/pcap_writer.h"

#include <cerrno>
#include <cstring>

namespace isoroce::tools {

namespace {
void put32(std::FILE* f, uint32_t v) { std::fwrite(&v, 4, 1, f); }  // host order, as the magic says
void put16(std::FILE* f, uint16_t v) { std::fwrite(&v, 2, 1, f); }
}  // namespace

PcapWriter::~PcapWriter() {
  if (f_) std::fclose(f_);
}

bool PcapWriter::open(const std::string& path, std::string& err) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) {
    err = std::strerror(errno);
    return false;
  }
  put32(f_, 0xa1b23c4d);  // nanosecond resolution
  put16(f_, 2);
  put16(f_, 4);
  put32(f_, 0);      // thiszone
  put32(f_, 0);      // sigfigs
  put32(f_, 65535);  // snaplen
  put32(f_, 1);      // LINKTYPE_ETHERNET
  return true;
}

void PcapWriter::write(uint64_t time_ns, std::span<const uint8_t> frame) {
  if (!f_) return;
  const auto len = static_cast<uint32_t>(frame.size());
  put32(f_, static_cast<uint32_t>(time_ns / 1'000'000'000));
  put32(f_, static_cast<uint32_t>(time_ns % 1'000'000'000));
  put32(f_, len);
  put32(f_, len);
  std::fwrite(frame.data(), 1, frame.size(), f_);
  ++frames_;
}

}  // namespace isoroce::tools
