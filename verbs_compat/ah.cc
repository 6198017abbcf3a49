// Address handles: ibv_create_ah / ibv_destroy_ah over the control
// protocol, and the AH that answers a received UD datagram
// (ibv_init_ah_from_wc / ibv_create_ah_from_wc) with RoCEv2 rules, as
// rdma-core's libibverbs/verbs.c applies them on an Ethernet port:
//
// - the completion must carry a GRH (IBV_WC_GRH; the kernel's
//   ib_init_ah_attr_from_wc() refuses RoCE without one, EPROTOTYPE);
// - the 40 bytes in front of the payload hold either an IPv6 header (the
//   GRH layout) or, for IPv4, zeros and then the IPv4 header in the last 20
//   bytes (what isoroced's engine writes, transport/engine/ud.cc). An IPv6
//   header says version 6 in its first nibble; the IPv4 case is recognised by
//   version 4 at byte 20 (a version-6 area whose bytes 20.. also form a valid
//   IPv4 header with a correct checksum counts as IPv4, as libibverbs does);
// - the packet's source becomes the dgid (IPv4: ::ffff:a.b.c.d), its
//   destination must be a GID of the port (its index is sgid_index), TTL /
//   hop limit and TOS / traffic class are copied, the flow label comes from
//   the first word, sl / dlid / src_path_bits from the completion.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "verbs_compat/internal.h"

namespace isoroce::vc {
namespace {

constexpr size_t kIpv4InGrh = 20;  // offset of the IPv4 header in the GRH area

std::string gid_string(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

uint16_t ipv4_checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (size_t i = 0; i < 20; i += 2)
    if (i != 10) sum += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);  // bytes 10-11: the checksum itself
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// 4 or 6, or 0 when the area holds neither.
int grh_ip_version(const ibv_grh& grh) {
  const auto* raw = reinterpret_cast<const uint8_t*>(&grh);
  const uint8_t* ip4 = raw + kIpv4InGrh;
  const bool ip4_shaped = (ip4[0] >> 4) == 4;
  if ((raw[0] >> 4) != 6) return ip4_shaped ? 4 : 0;
  if (!ip4_shaped || (ip4[0] & 0xf) != 5) return 6;  // RoCEv2 IPv4 headers have no options
  return ipv4_checksum(ip4) == static_cast<uint16_t>(ip4[10] << 8 | ip4[11]) ? 4 : 6;
}

ibv_gid v4_mapped(const uint8_t addr[4]) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  std::memcpy(g.raw + 12, addr, 4);
  return g;
}

int fail(int err, const char* what) {
  log("ibv_init_ah_from_wc: %s", what);
  errno = err;
  return -1;
}

}  // namespace
}  // namespace isoroce::vc

using namespace isoroce::vc;

extern "C" {

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!attr->is_global || attr->grh.sgid_index != 0 || (attr->port_num != 0 && attr->port_num != 1)) {
    log("create_ah: RoCE needs a GRH (is_global, dgid) from GID 0 of port 1");
    return errno = EINVAL, nullptr;
  }
  json r = context_of(pd->context)
               ->call({{"op", "create_ah"},
                       {"pd", pd->handle},
                       {"dgid", gid_string(attr->grh.dgid)},
                       {"traffic_class", attr->grh.traffic_class},
                       {"hop_limit", attr->grh.hop_limit},
                       {"flow_label", attr->grh.flow_label},
                       {"sl", attr->sl}});
  if (!r.value("ok", false)) return errno = reply_errno(r), nullptr;
  auto* ah = new Ah;
  ah->ah.context = pd->context;
  ah->ah.pd = pd;
  ah->ah.handle = r["ah"].get<uint32_t>();
  return &ah->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  json r = context_of(ah->context)->call({{"op", "destroy_ah"}, {"ah", ah->handle}});
  if (!r.value("ok", false)) return reply_errno(r);
  delete outer_of(ah, &Ah::ah);
  return 0;
}

// 0, or -1 with errno: EINVAL (arguments, a multicast destination),
// EPROTOTYPE (no GRH), EPROTONOSUPPORT (neither IPv4 nor RoCEv2 IPv6 in the
// GRH area), ENOENT (the packet's destination is not this port's GID).
int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* ah_attr) {
  if (context == nullptr || wc == nullptr || ah_attr == nullptr) return fail(EINVAL, "missing argument");
  std::memset(ah_attr, 0, sizeof *ah_attr);
  if (port_num != 1) return fail(EINVAL, "port 1 is the only port");
  if (!(wc->wc_flags & IBV_WC_GRH)) return fail(EPROTOTYPE, "RoCE needs the GRH of the received packet (IBV_WC_GRH)");
  if (grh == nullptr) return fail(EINVAL, "no GRH (the first 40 bytes of the receive buffer)");
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  ah_attr->is_global = 1;
  const uint32_t first = ntohl(grh->version_tclass_flow);
  ah_attr->grh.flow_label = first & 0xfffff;

  ibv_gid own{};  // the packet's destination: must be a GID of the port
  switch (grh_ip_version(*grh)) {
    case 4: {
      const auto* ip4 = reinterpret_cast<const uint8_t*>(grh) + kIpv4InGrh;
      const uint8_t* saddr = ip4 + 12;
      const uint8_t* daddr = ip4 + 16;
      if ((daddr[0] & 0xf0) == 0xe0) return fail(EINVAL, "the datagram went to an IPv4 multicast address");
      own = v4_mapped(daddr);
      ah_attr->grh.dgid = v4_mapped(saddr);
      ah_attr->grh.traffic_class = ip4[1];  // TOS
      ah_attr->grh.hop_limit = ip4[8];      // TTL
      break;
    }
    case 6:
      if (grh->dgid.raw[0] == 0xff) return fail(EINVAL, "the datagram went to an IPv6 multicast GID");
      if (grh->next_hdr != IPPROTO_UDP)
        return fail(EPROTONOSUPPORT, "the GRH's next header is not UDP (RoCE v1 is not supported, v2 is)");
      own = grh->dgid;
      ah_attr->grh.dgid = grh->sgid;
      ah_attr->grh.traffic_class = static_cast<uint8_t>(first >> 20);
      ah_attr->grh.hop_limit = grh->hop_limit;
      break;
    default:
      return fail(EPROTONOSUPPORT, "the GRH area holds neither an IPv4 nor an IPv6 header");
  }
  if (std::memcmp(context_of(context)->dev->gid, own.raw, sizeof own.raw) != 0)
    return fail(ENOENT, ("the datagram's destination " + gid_string(own) + " is not a GID of this port").c_str());
  ah_attr->grh.sgid_index = 0;
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (pd == nullptr) return errno = EINVAL, nullptr;
  ibv_ah_attr a;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a) != 0) return nullptr;
  return ibv_create_ah(pd, &a);
}

}  // extern "C"
