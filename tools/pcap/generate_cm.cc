#include "tools/pcap/generate_cm.h"

#include "transport/cm/manager.h"
#include "transport/cm/rdma_cm_header.h"
#include "transport/wire/opcode.h"

namespace isoroce::tools {
namespace {

using namespace wire;

struct Side {
  cm::Manager m;
  IpAddr ip;
  MacAddr mac;
};

IpAddr v6(uint8_t host) {
  IpAddr a{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, host};
  return a;
}

}  // namespace

std::vector<GeneratedFrame> generate_cm_frames(bool ipv6, uint64_t seed) {
  const IpAddr ip_a = ipv6 ? v6(1) : ipv4_mapped(0x0a000001);
  const IpAddr ip_b = ipv6 ? v6(2) : ipv4_mapped(0x0a000002);
  cm::ManagerConfig ca, cb;
  ca.local_gid = ip_a, cb.local_gid = ip_b;
  ca.ca_guid = 0x0000aafffe000001ull, cb.ca_guid = 0x0000aafffe000002ull;
  ca.seed = seed * 2 + 1, cb.seed = seed * 2 + 2;
  Side a{cm::Manager(ca), ip_a, {0x02, 0, 0, 0, 0, 0x01}};
  Side b{cm::Manager(cb), ip_b, {0x02, 0, 0, 0, 0, 0x02}};
  std::vector<GeneratedFrame> out;
  uint32_t psn = 0;
  // Every MAD `from` has sent, as a frame, and delivered to the other side.
  auto flush = [&](Side& from, Side& to, cm::Picos now) {
    cm::OutMad m;
    while (from.m.pop_mad(&m)) {
      GeneratedFrame g;
      g.payload = m.bytes;
      FrameSpec& s = g.spec;
      s.src_mac = from.mac;
      s.dst_mac = to.mac;
      s.src_ip = from.ip;
      s.dst_ip = to.ip;
      s.opcode = 0x64;  // UD SEND only
      s.dest_qp = Qpn(cm::kGsiQpn);
      s.psn = Psn(psn++);
      s.pkey = m.pkey;
      s.deth = DethFields{cm::kGsiQkey, cm::kGsiQpn};
      s.udp_sport = udp_sport_for_qps(Qpn(1), Qpn(1));
      s.payload = g.payload;
      g.bytes.resize(frame_size(s));
      build_frame(s, g.bytes);
      s.payload = {};
      to.m.on_mad(from.ip, cm::kGsiQpn, m.bytes, now);
      out.push_back(std::move(g));
    }
  };
  cm::Event e;
  auto next_event = [&](Side& s) {
    const bool got = s.m.pop_event(&e);
    return got;
  };
  const uint64_t sid = cm::rdma_cm_service_id(cm::kPsTcp, 18515);
  cm::Id listen = 0, ia = 0;
  b.m.listen(1, sid, &listen);
  cm::ConnectParams p;
  p.peer_gid = ip_b;
  p.service_id = sid;
  p.qpn = 0x11;
  p.starting_psn = 0x123456;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  cm::RdmaCmHeader h;
  h.src = cm::RdmaCmAddr::from_gid(ip_a);
  h.dst = cm::RdmaCmAddr::from_gid(ip_b);
  h.src_port = 0xc001;
  p.private_data = cm::build_rdma_cm_private_data(h, {}, cm::kReqPrivateData);
  a.m.connect(2, p, 0, &ia);
  flush(a, b, 1);  // REQ
  if (!next_event(b)) return out;
  const cm::Id ib = e.id;
  b.m.send_mra(ib, 20, {}, 2);
  flush(b, a, 3);  // MRA
  cm::AcceptParams ap;
  ap.qpn = 0x22;
  ap.starting_psn = 0x654321;
  ap.responder_resources = 1;
  ap.initiator_depth = 1;
  b.m.accept(ib, ap, 4);
  flush(b, a, 5);  // REP
  a.m.establish(ia, {}, 6);
  flush(a, b, 7);  // RTU
  a.m.disconnect(ia, {}, 8);
  flush(a, b, 9);  // DREQ
  b.m.disconnect(ib, {}, 10);
  flush(b, a, 11);  // DREP
  // A second REQ, rejected by the consumer.
  cm::Id ia2 = 0;
  p.qpn = 0x12;
  a.m.connect(2, p, 12, &ia2);
  flush(a, b, 13);
  while (next_event(b))
    if (e.type == cm::EventType::kReqReceived) break;
  cm::RejectParams rj;
  rj.private_data = {'n', 'o'};
  b.m.reject(e.id, rj, 14);
  flush(b, a, 15);  // REJ
  // SIDR.
  const uint64_t usid = cm::rdma_cm_service_id(cm::kPsUdp, 7174);
  cm::Id ul = 0, ua = 0;
  b.m.listen(1, usid, &ul);
  cm::SidrParams sp;
  sp.peer_gid = ip_b;
  sp.service_id = usid;
  a.m.sidr_resolve(2, sp, 16, &ua);
  flush(a, b, 17);  // SIDR_REQ
  while (next_event(b))
    if (e.type == cm::EventType::kSidrReqReceived) break;
  cm::SidrReplyParams rp;
  rp.qpn = 0x33;
  rp.qkey = cm::kRdmaUdpQkey;
  b.m.sidr_reply(e.id, rp, 18);
  flush(b, a, 19);  // SIDR_REP
  return out;
}

}  // namespace isoroce::tools
