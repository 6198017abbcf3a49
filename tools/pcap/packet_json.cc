#include "tools/pcap/packet_json.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include "transport/cm/constants.h"
#include "transport/cm/describe.h"
#include "transport/wire/bytes.h"

namespace isoroce::tools {

using nlohmann::ordered_json;
using wire::ParseError;

std::string ip_to_string(const wire::IpAddr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (wire::is_ipv4_mapped(a)) {
    inet_ntop(AF_INET, &a[12], buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, a.data(), buf, sizeof(buf));
  }
  return buf;
}

namespace {

bool has_ip(const wire::RocePacket& p) { return p.ip_version != 0; }
bool has_udp(const wire::ParseResult& r) { return r.pkt.has_udp; }
bool has_bth(const wire::ParseResult& r) { return r.pkt.has_bth && r.pkt.op; }

// The MAD of a UD SEND to QP1 (the CM's GSI), if the frame holds one.
std::span<const uint8_t> cm_mad(const wire::ParseResult& r, std::span<const uint8_t> frame) {
  const wire::RocePacket& p = r.pkt;
  if (!r.ok() || !p.deth || p.dest_qp.value() != isoroce::cm::kGsiQpn || frame.empty()) return {};
  if (p.payload_offset + p.payload_len > frame.size() || p.payload_len < isoroce::cm::kMadHeaderBytes) return {};
  return frame.subspan(p.payload_offset, p.payload_len);
}

}  // namespace

ordered_json packet_to_json(uint64_t frame_no, const wire::ParseResult& r, std::span<const uint8_t> frame) {
  const wire::RocePacket& p = r.pkt;
  ordered_json j;
  j["frame"] = frame_no;
  j["ip_version"] = has_ip(p) ? ordered_json(p.ip_version) : ordered_json(nullptr);
  j["src"] = has_ip(p) ? ordered_json(ip_to_string(p.src_ip)) : ordered_json(nullptr);
  j["dst"] = has_ip(p) ? ordered_json(ip_to_string(p.dst_ip)) : ordered_json(nullptr);
  if (p.vlan_tci) j["vlan"] = *p.vlan_tci & 0x0fff;
  if (has_ip(p)) {
    j["dscp"] = p.dscp();
    j["ecn"] = p.ecn();
  }
  j["udp_sport"] = has_udp(r) ? ordered_json(p.udp_sport) : ordered_json(nullptr);
  if (p.has_bth) {
    j["opcode"] = p.opcode;
    j["opcode_name"] = p.op ? std::string(p.op->name) : std::string("UNKNOWN");
    j["dest_qp"] = p.dest_qp.value();
    j["psn"] = p.psn.value();
    j["ack_req"] = p.ack_req;
    j["solicited"] = p.solicited;
    j["mig_req"] = p.mig_req;
    j["pad"] = p.pad;
    j["tver"] = p.tver;
    j["pkey"] = p.pkey;
    j["fecn"] = p.fecn;
    j["becn"] = p.becn;
  }
  if (p.reth) j["reth"] = {{"va", p.reth->va}, {"rkey", p.reth->rkey}, {"len", p.reth->dma_len}};
  if (p.aeth) j["aeth"] = {{"syndrome", p.aeth->syndrome}, {"msn", p.aeth->msn}};
  if (p.deth) j["deth"] = {{"qkey", p.deth->qkey}, {"src_qp", p.deth->src_qp}};
  if (p.imm) j["imm"] = *p.imm;
  if (p.ieth) j["ieth"] = {{"rkey", *p.ieth}};
  if (p.atomic) {
    j["atomic"] = {{"va", p.atomic->va}, {"rkey", p.atomic->rkey},
                   {"swap_add", p.atomic->swap_add}, {"compare", p.atomic->compare}};
  }
  if (p.atomic_ack) j["atomic_ack"] = {{"orig", *p.atomic_ack}};
  const bool reached_icrc = r.ok() || r.error == ParseError::kBadIcrc;
  j["payload_len"] = reached_icrc ? ordered_json(p.payload_len) : ordered_json(nullptr);
  j["icrc_ok"] = reached_icrc ? ordered_json(p.icrc_ok) : ordered_json(nullptr);
  if (reached_icrc) j["icrc"] = fmt::format("0x{:08x}", p.icrc);
  if (auto mad = cm_mad(r, frame); !mad.empty()) {
    j["mad"] = {{"mgmt_class", mad[1]},
                {"attribute_id", wire::load_be16(mad.data() + 16)},
                {"transaction_id", fmt::format("0x{:016x}", wire::load_be64(mad.data() + 8))},
                {"text", isoroce::cm::describe_mad(mad)}};
  }
  if (r.ok()) {
    j["error"] = nullptr;
  } else {
    j["error"] = std::string(wire::parse_error_name(r.error));
    j["error_message"] = std::string(wire::parse_error_message(r.error));
  }
  return j;
}

std::string packet_to_line(uint64_t frame_no, const wire::ParseResult& r, std::span<const uint8_t> frame) {
  const wire::RocePacket& p = r.pkt;
  std::string s = fmt::format("{:>6} ", frame_no);
  if (has_ip(p)) {
    s += fmt::format("{} -> {} ", ip_to_string(p.src_ip), ip_to_string(p.dst_ip));
  }
  if (has_udp(r)) s += fmt::format("udp {}->{} ", p.udp_sport, p.udp_dport);
  if (has_bth(r)) {
    s += fmt::format("{} qp={:#x} psn={}{}{}{} pad={} pkey={:#06x}", p.op->name, p.dest_qp.value(),
                     p.psn.value(), p.ack_req ? " A" : "", p.solicited ? " SE" : "",
                     p.becn ? " BECN" : "", p.pad, p.pkey);
    if (p.reth) s += fmt::format(" reth[va={:#x} rkey={:#x} len={}]", p.reth->va, p.reth->rkey, p.reth->dma_len);
    if (p.aeth) s += fmt::format(" aeth[syn={:#04x} msn={}]", p.aeth->syndrome, p.aeth->msn);
    if (p.deth) s += fmt::format(" deth[qkey={:#x} src_qp={:#x}]", p.deth->qkey, p.deth->src_qp);
    if (p.imm) s += fmt::format(" imm={:#010x}", *p.imm);
    if (p.ieth) s += fmt::format(" ieth[rkey={:#x}]", *p.ieth);
    if (p.atomic) {
      s += fmt::format(" atomic[va={:#x} rkey={:#x} swap_add={:#x} compare={:#x}]", p.atomic->va,
                       p.atomic->rkey, p.atomic->swap_add, p.atomic->compare);
    }
    if (p.atomic_ack) s += fmt::format(" atomic_ack[orig={:#x}]", *p.atomic_ack);
    s += fmt::format(" len={}", p.payload_len);
  }
  if (r.ok()) {
    s += " icrc=ok";
    if (auto mad = cm_mad(r, frame); !mad.empty()) s += " | " + isoroce::cm::describe_mad(mad);
  } else {
    s += fmt::format(" error={} ({})", wire::parse_error_name(r.error),
                     wire::parse_error_message(r.error));
  }
  return s;
}

}  // namespace isoroce::tools
