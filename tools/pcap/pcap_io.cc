#include "tools/pcap/pcap_io.h"

#include <pcap/pcap.h>

#include <memory>

namespace isoroce::tools {

bool read_capture(const std::string& path, std::vector<CapturedFrame>& frames, std::string& err) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  std::unique_ptr<pcap_t, decltype(&pcap_close)> p(pcap_open_offline(path.c_str(), errbuf),
                                                   &pcap_close);
  if (!p) {
    err = errbuf;
    return false;
  }
  const int linktype = pcap_datalink(p.get());
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  uint64_t n = 0;
  int rc;
  while ((rc = pcap_next_ex(p.get(), &hdr, &data)) == 1) {
    CapturedFrame f;
    f.frame_no = ++n;
    f.linktype = linktype;
    f.bytes.assign(data, data + hdr->caplen);
    frames.push_back(std::move(f));
  }
  if (rc == PCAP_ERROR) {
    err = pcap_geterr(p.get());
    return false;
  }
  return true;
}

bool write_capture(const std::string& path, const std::vector<std::vector<uint8_t>>& frames,
                   std::string& err) {
  std::unique_ptr<pcap_t, decltype(&pcap_close)> p(pcap_open_dead(DLT_EN10MB, 65535), &pcap_close);
  if (!p) {
    err = "pcap_open_dead failed";
    return false;
  }
  pcap_dumper_t* d = pcap_dump_open(p.get(), path.c_str());
  if (!d) {
    err = pcap_geterr(p.get());
    return false;
  }
  // Fixed, increasing timestamps keep the output byte-for-byte reproducible.
  uint64_t usec = 0;
  for (const auto& f : frames) {
    pcap_pkthdr h{};
    h.ts.tv_sec = static_cast<time_t>(usec / 1000000);
    h.ts.tv_usec = static_cast<suseconds_t>(usec % 1000000);
    h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
    usec += 1;
  }
  const bool ok = pcap_dump_flush(d) == 0;
  pcap_dump_close(d);
  if (!ok) err = "write to " + path + " failed";
  return ok;
}

int l3_offset_for_linktype(int linktype, const std::vector<uint8_t>& bytes) {
  switch (linktype) {
    case DLT_EN10MB: return -1;
    case DLT_RAW:
#ifdef DLT_IPV4
    case DLT_IPV4:
    case DLT_IPV6:
#endif
      return 0;
    case DLT_LINUX_SLL: return bytes.size() >= 16 ? 16 : -2;
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2: return bytes.size() >= 20 ? 20 : -2;
#endif
    default: return -2;
  }
}

}  // namespace isoroce::tools
