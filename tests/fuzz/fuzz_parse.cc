// libFuzzer target for the RoCEv2 parser: any bytes, as an Ethernet frame and
// as a bare IP datagram. The parser must never read or write outside the
// input (ASan), never hit undefined behaviour (UBSan), and a frame it accepts
// must rebuild to the same bytes from its decoded fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/wire/build.h"
#include "transport/wire/parse.h"

using namespace isoroce::wire;

namespace {

// Rebuilds an accepted frame from the fields the parser returned.
void check_rebuild(const std::vector<uint8_t>& in, const RocePacket& p) {
  FrameSpec s;
  s.dst_mac = p.dst_mac;
  s.src_mac = p.src_mac;
  s.vlan_tci = p.vlan_tci;
  s.src_ip = p.src_ip;
  s.dst_ip = p.dst_ip;
  s.traffic_class = p.traffic_class;
  s.hop_limit = p.hop_limit;
  s.flow_label = p.flow_label;
  s.udp_sport = p.udp_sport;
  s.opcode = p.opcode;
  s.solicited = p.solicited;
  s.mig_req = p.mig_req;
  s.pkey = p.pkey;
  s.fecn = p.fecn;
  s.becn = p.becn;
  s.dest_qp = p.dest_qp;
  s.ack_req = p.ack_req;
  s.psn = p.psn;
  s.reth = p.reth;
  s.aeth = p.aeth;
  s.deth = p.deth;
  s.imm = p.imm;
  s.ieth = p.ieth;
  s.atomic = p.atomic;
  s.atomic_ack = p.atomic_ack;
  s.payload = std::span(in).subspan(p.payload_offset, p.payload_len);
  std::vector<uint8_t> out(frame_size(s));
  const BuildResult b = build_frame(s, out);
  if (!b.ok()) abort();
  // The payload and every header field must survive; bytes the decode does
  // not keep (IPv4 id and flags, reserved bits, pad bytes, ICRC over them)
  // may differ, so compare by parsing again.
  const ParseResult again = parse_frame(out);
  if (!again.ok() || again.pkt.payload_len != p.payload_len || again.pkt.psn != p.psn ||
      again.pkt.dest_qp != p.dest_qp || again.pkt.opcode != p.opcode ||
      std::memcmp(out.data() + again.pkt.payload_offset, in.data() + p.payload_offset, p.payload_len) != 0) {
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> frame(data, data + size);
  const std::vector<uint8_t> original = frame;
  const ParseResult r = parse_frame(frame);
  if (frame != original) abort();  // the ICRC check must restore what it masks
  if (r.ok()) check_rebuild(frame, r.pkt);
  ParseOptions lax;
  lax.verify_icrc = false;
  lax.verify_ip_checksum = false;
  (void)parse_frame(frame, lax);
  (void)parse_ip(frame, 0);
  if (size > 3) (void)parse_ip(frame, 3);
  return 0;
}
