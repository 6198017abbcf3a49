#include "transport/cm/describe.h"

#include <arpa/inet.h>

#include <cstdio>

#include "transport/cm/messages.h"
#include "transport/cm/rdma_cm_header.h"

namespace isoroce::cm {
namespace {

std::string fmt(const char* f, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

std::string gid_text(const Gid& g) { return RdmaCmAddr::from_gid(g).text(); }

std::string service(uint64_t sid) {
  std::string s = fmt(" service_id=0x%016llx", static_cast<unsigned long long>(sid));
  if (is_rdma_cm_service_id(sid)) {
    const uint16_t ps = rdma_cm_port_space(sid);
    const char* name = ps == kPsTcp ? "tcp" : ps == kPsUdp ? "udp" : ps == kPsIb ? "ib" : ps == kPsIpoib ? "ipoib" : "?";
    s += fmt(" (rdma_cm %s port %u)", name, rdma_cm_port(sid));
  }
  return s;
}

std::string ids(uint32_t local, uint32_t remote) { return fmt(" local_comm_id=0x%08x remote_comm_id=0x%08x", local, remote); }

}  // namespace

std::string describe_mad(std::span<const uint8_t> mad) {
  const MadHeader* h = nullptr;
  const MadError err = check_mad(mad, &h);
  if (err == MadError::kTooShort) return fmt("MAD truncated (%zu bytes)", mad.size());
  if (err != MadError::kOk && err != MadError::kUnknownAttribute)
    return fmt("MAD class 0x%02x version %u/%u method 0x%02x attribute 0x%04x: %s", h->mgmt_class, h->base_version,
               h->class_version, h->method(), h->attr_id(), mad_error_text(err));
  std::string s = fmt("CM %s tid=0x%016llx", attr_name(h->attr_id()), static_cast<unsigned long long>(h->tid()));
  const uint8_t* p = mad.data();
  switch (static_cast<AttrId>(h->attr_id())) {
    case AttrId::kReq: {
      const auto& m = *msg_cast<ReqMsg>(p);
      s += fmt(" local_comm_id=0x%08x", m.local_comm_id()) + service(m.service_id());
      s += fmt(" qpn=0x%06x psn=0x%06x type=%s resp_res=%u init_depth=%u mtu=%u retry=%u rnr_retry=%u"
               " timeouts=%u/%u max_cm_retries=%u pkey=0x%04x",
               m.local_qpn(), m.starting_psn(), m.transport_type() == 0 ? "RC" : m.transport_type() == 1 ? "UC" : "?",
               m.responder_resources(), m.initiator_depth(), m.path_mtu(), m.retry_count(), m.rnr_retry_count(),
               m.remote_cm_response_timeout(), m.local_cm_response_timeout(), m.max_cm_retries(), m.pkey());
      s += " gid " + gid_text(m.primary_local_gid()) + " -> " + gid_text(m.primary_remote_gid());
      if (is_rdma_cm_service_id(m.service_id())) {
        if (auto hdr = parse_rdma_cm_header(std::span<const uint8_t>(m.private_data, kReqPrivateData)))
          s += fmt(" rdma_cm %s:%u -> %s", hdr->src.text().c_str(), hdr->src_port, hdr->dst.text().c_str());
      }
      break;
    }
    case AttrId::kMra: {
      const auto& m = *msg_cast<MraMsg>(p);
      s += ids(m.local_comm_id(), m.remote_comm_id()) +
           fmt(" mraed=%u service_timeout=%u", m.message_mraed(), m.service_timeout());
      break;
    }
    case AttrId::kRej: {
      const auto& m = *msg_cast<RejMsg>(p);
      s += ids(m.local_comm_id(), m.remote_comm_id()) +
           fmt(" rejected=%u reason=%u (%s)", m.message_rejected(), m.reason(), rej_reason_name(m.reason()));
      break;
    }
    case AttrId::kRep: {
      const auto& m = *msg_cast<RepMsg>(p);
      s += ids(m.local_comm_id(), m.remote_comm_id()) +
           fmt(" qpn=0x%06x psn=0x%06x resp_res=%u init_depth=%u rnr_retry=%u srq=%u", m.local_qpn(),
               m.starting_psn(), m.responder_resources(), m.initiator_depth(), m.rnr_retry_count(), m.srq());
      break;
    }
    case AttrId::kRtu: {
      const auto& m = *msg_cast<RtuMsg>(p);
      s += ids(m.local_comm_id(), m.remote_comm_id());
      break;
    }
    case AttrId::kDreq: {
      const auto& m = *msg_cast<DreqMsg>(p);
      s += ids(m.local_comm_id(), m.remote_comm_id()) + fmt(" remote_qpn=0x%06x", m.remote_qpn());
      break;
    }
    case AttrId::kDrep: {
      const auto& m = *msg_cast<DrepMsg>(p);
      s += ids(m.local_comm_id(), m.remote_comm_id());
      break;
    }
    case AttrId::kSidrReq: {
      const auto& m = *msg_cast<SidrReqMsg>(p);
      s += fmt(" request_id=0x%08x pkey=0x%04x", m.request_id(), m.pkey()) + service(m.service_id());
      break;
    }
    case AttrId::kSidrRep: {
      const auto& m = *msg_cast<SidrRepMsg>(p);
      s += fmt(" request_id=0x%08x status=%u qpn=0x%06x qkey=0x%08x", m.request_id(), m.status(), m.qpn(), m.qkey()) +
           service(m.service_id());
      break;
    }
    default:
      s += " (not decoded)";
      break;
  }
  return s;
}

}  // namespace isoroce::cm
