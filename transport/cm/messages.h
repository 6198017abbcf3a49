// The CM messages (IBTA vol. 1 12.6 and 12.11), one packed struct each, as
// they are on the wire: 24-byte MAD header, then the attribute's 232 bytes.
// Fields are stored as bytes; accessors convert (big-endian, sub-byte fields
// as 12.6 draws them, most significant bit first). RoCE (annex A17): the
// path's GIDs are the IP addresses, LIDs are 0xffff (permissive) as Linux
// sets them. Nothing here checks lengths: decode.h does.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "transport/cm/constants.h"
#include "transport/cm/mad.h"
#include "transport/cm/params.h"

namespace isoroce::cm {

using wire::load_be16;
using wire::load_be24;
using wire::load_be32;
using wire::load_be64;
using wire::store_be16;
using wire::store_be24;
using wire::store_be32;
using wire::store_be64;

inline constexpr uint16_t kPermissiveLid = 0xffff;

// ConnectRequest (12.6.5, Table 99).
struct ReqMsg {
  MadHeader hdr;
  uint8_t local_comm_id_[4];
  uint8_t rsvd4_[4];
  uint8_t service_id_[8];
  uint8_t local_ca_guid_[8];
  uint8_t rsvd24_[4];
  uint8_t local_qkey_[4];
  uint8_t off32_[4];  // local QPN:24, responder resources:8
  uint8_t off36_[4];  // local EECN:24, initiator depth:8
  uint8_t off40_[4];  // remote EECN:24, remote CM response timeout:5, transport service type:2, E2E flow control:1
  uint8_t off44_[4];  // starting PSN:24, local CM response timeout:5, retry count:3
  uint8_t pkey_[2];
  uint8_t off50_;     // path MTU:4, RDC exists:1, RNR retry count:3
  uint8_t off51_;     // max CM retries:4, SRQ:1, extended transport type:3
  uint8_t primary_local_lid_[2];
  uint8_t primary_remote_lid_[2];
  uint8_t primary_local_gid_[16];
  uint8_t primary_remote_gid_[16];
  uint8_t primary_off88_[4];  // flow label:20, rsvd:6, packet rate:6
  uint8_t primary_traffic_class_;
  uint8_t primary_hop_limit_;
  uint8_t primary_off94_;     // SL:4, subnet local:1, rsvd:3
  uint8_t primary_off95_;     // local ACK timeout:5, rsvd:3
  uint8_t alt_path_[44];      // alternate path: unused on RoCE, zero
  uint8_t private_data[kReqPrivateData];

  uint32_t local_comm_id() const { return load_be32(local_comm_id_); }
  uint64_t service_id() const { return load_be64(service_id_); }
  uint64_t local_ca_guid() const { return load_be64(local_ca_guid_); }
  uint32_t local_qkey() const { return load_be32(local_qkey_); }
  uint32_t local_qpn() const { return load_be24(off32_); }
  uint8_t responder_resources() const { return off32_[3]; }
  uint8_t initiator_depth() const { return off36_[3]; }
  uint8_t remote_cm_response_timeout() const { return get_bits(off40_[3], 3, 5); }
  uint8_t transport_type() const { return get_bits(off40_[3], 1, 2); }
  bool e2e_flow_control() const { return off40_[3] & 1; }
  uint32_t starting_psn() const { return load_be24(off44_); }
  uint8_t local_cm_response_timeout() const { return get_bits(off44_[3], 3, 5); }
  uint8_t retry_count() const { return get_bits(off44_[3], 0, 3); }
  uint16_t pkey() const { return load_be16(pkey_); }
  uint8_t path_mtu() const { return get_bits(off50_, 4, 4); }
  bool rdc_exists() const { return off50_ & 0x08; }
  uint8_t rnr_retry_count() const { return get_bits(off50_, 0, 3); }
  uint8_t max_cm_retries() const { return get_bits(off51_, 4, 4); }
  bool srq() const { return off51_ & 0x08; }
  uint8_t extended_transport() const { return get_bits(off51_, 0, 3); }
  uint16_t primary_local_lid() const { return load_be16(primary_local_lid_); }
  uint16_t primary_remote_lid() const { return load_be16(primary_remote_lid_); }
  Gid primary_local_gid() const { Gid g; std::memcpy(g.data(), primary_local_gid_, 16); return g; }
  Gid primary_remote_gid() const { Gid g; std::memcpy(g.data(), primary_remote_gid_, 16); return g; }
  uint32_t primary_flow_label() const { return load_be32(primary_off88_) >> 12; }
  uint8_t primary_packet_rate() const { return get_bits(primary_off88_[3], 0, 6); }
  uint8_t primary_traffic_class() const { return primary_traffic_class_; }
  uint8_t primary_hop_limit() const { return primary_hop_limit_; }
  uint8_t primary_sl() const { return get_bits(primary_off94_, 4, 4); }
  bool primary_subnet_local() const { return primary_off94_ & 0x08; }
  uint8_t primary_local_ack_timeout() const { return get_bits(primary_off95_, 3, 5); }

  void set_local_comm_id(uint32_t v) { store_be32(local_comm_id_, v); }
  void set_service_id(uint64_t v) { store_be64(service_id_, v); }
  void set_local_ca_guid(uint64_t v) { store_be64(local_ca_guid_, v); }
  void set_local_qkey(uint32_t v) { store_be32(local_qkey_, v); }
  void set_local_qpn(uint32_t v) { store_be24(off32_, v); }
  void set_responder_resources(uint8_t v) { off32_[3] = v; }
  void set_initiator_depth(uint8_t v) { off36_[3] = v; }
  void set_remote_cm_response_timeout(uint8_t v) { set_bits(&off40_[3], 3, 5, v); }
  void set_transport_type(uint8_t v) { set_bits(&off40_[3], 1, 2, v); }
  void set_e2e_flow_control(bool v) { set_bits(&off40_[3], 0, 1, v); }
  void set_starting_psn(uint32_t v) { store_be24(off44_, v); }
  void set_local_cm_response_timeout(uint8_t v) { set_bits(&off44_[3], 3, 5, v); }
  void set_retry_count(uint8_t v) { set_bits(&off44_[3], 0, 3, v); }
  void set_pkey(uint16_t v) { store_be16(pkey_, v); }
  void set_path_mtu(uint8_t v) { set_bits(&off50_, 4, 4, v); }
  void set_rnr_retry_count(uint8_t v) { set_bits(&off50_, 0, 3, v); }
  void set_max_cm_retries(uint8_t v) { set_bits(&off51_, 4, 4, v); }
  void set_srq(bool v) { set_bits(&off51_, 3, 1, v); }
  void set_primary_local_lid(uint16_t v) { store_be16(primary_local_lid_, v); }
  void set_primary_remote_lid(uint16_t v) { store_be16(primary_remote_lid_, v); }
  void set_primary_local_gid(const Gid& g) { std::memcpy(primary_local_gid_, g.data(), 16); }
  void set_primary_remote_gid(const Gid& g) { std::memcpy(primary_remote_gid_, g.data(), 16); }
  void set_primary_flow_label_rate(uint32_t flow_label, uint8_t packet_rate) {
    store_be32(primary_off88_, (flow_label & 0xfffff) << 12 | (packet_rate & 0x3f));
  }
  void set_primary_traffic_class(uint8_t v) { primary_traffic_class_ = v; }
  void set_primary_hop_limit(uint8_t v) { primary_hop_limit_ = v; }
  void set_primary_sl(uint8_t v) { set_bits(&primary_off94_, 4, 4, v); }
  void set_primary_subnet_local(bool v) { set_bits(&primary_off94_, 3, 1, v); }
  void set_primary_local_ack_timeout(uint8_t v) { set_bits(&primary_off95_, 3, 5, v); }
};
static_assert(sizeof(ReqMsg) == kMadBytes);

// MessageReceiptAcknowledgement (12.6.6, Table 102).
struct MraMsg {
  MadHeader hdr;
  uint8_t local_comm_id_[4];
  uint8_t remote_comm_id_[4];
  uint8_t off8_;  // message MRAed:2, rsvd:6
  uint8_t off9_;  // service timeout:5, rsvd:3
  uint8_t private_data[kMraPrivateData];

  uint32_t local_comm_id() const { return load_be32(local_comm_id_); }
  uint32_t remote_comm_id() const { return load_be32(remote_comm_id_); }
  uint8_t message_mraed() const { return get_bits(off8_, 6, 2); }
  uint8_t service_timeout() const { return get_bits(off9_, 3, 5); }
  void set_local_comm_id(uint32_t v) { store_be32(local_comm_id_, v); }
  void set_remote_comm_id(uint32_t v) { store_be32(remote_comm_id_, v); }
  void set_message_mraed(MsgKind k) { set_bits(&off8_, 6, 2, static_cast<uint8_t>(k)); }
  void set_service_timeout(uint8_t v) { set_bits(&off9_, 3, 5, v); }
};
static_assert(sizeof(MraMsg) == kMadBytes);

// ConnectReject (12.6.7, Table 103).
struct RejMsg {
  MadHeader hdr;
  uint8_t local_comm_id_[4];
  uint8_t remote_comm_id_[4];
  uint8_t off8_;  // message REJected:2, rsvd:6
  uint8_t off9_;  // reject info length:7, rsvd:1
  uint8_t reason_[2];
  uint8_t ari[kRejAriBytes];
  uint8_t private_data[kRejPrivateData];

  uint32_t local_comm_id() const { return load_be32(local_comm_id_); }
  uint32_t remote_comm_id() const { return load_be32(remote_comm_id_); }
  uint8_t message_rejected() const { return get_bits(off8_, 6, 2); }
  uint8_t ari_length() const { return get_bits(off9_, 1, 7); }
  uint16_t reason() const { return load_be16(reason_); }
  void set_local_comm_id(uint32_t v) { store_be32(local_comm_id_, v); }
  void set_remote_comm_id(uint32_t v) { store_be32(remote_comm_id_, v); }
  void set_message_rejected(MsgKind k) { set_bits(&off8_, 6, 2, static_cast<uint8_t>(k)); }
  void set_ari_length(uint8_t v) { set_bits(&off9_, 1, 7, v); }
  void set_reason(uint16_t v) { store_be16(reason_, v); }
};
static_assert(sizeof(RejMsg) == kMadBytes);

// ConnectReply (12.6.8, Table 104).
struct RepMsg {
  MadHeader hdr;
  uint8_t local_comm_id_[4];
  uint8_t remote_comm_id_[4];
  uint8_t local_qkey_[4];
  uint8_t off12_[4];  // local QPN:24, rsvd:8
  uint8_t off16_[4];  // local EECN:24, rsvd:8
  uint8_t off20_[4];  // starting PSN:24, rsvd:8
  uint8_t responder_resources_;
  uint8_t initiator_depth_;
  uint8_t off26_;     // target ACK delay:5, failover accepted:2, E2E flow control:1
  uint8_t off27_;     // RNR retry count:3, SRQ:1, rsvd:4
  uint8_t local_ca_guid_[8];
  uint8_t private_data[kRepPrivateData];

  uint32_t local_comm_id() const { return load_be32(local_comm_id_); }
  uint32_t remote_comm_id() const { return load_be32(remote_comm_id_); }
  uint32_t local_qkey() const { return load_be32(local_qkey_); }
  uint32_t local_qpn() const { return load_be24(off12_); }
  uint32_t local_eecn() const { return load_be24(off16_); }
  uint32_t starting_psn() const { return load_be24(off20_); }
  uint8_t responder_resources() const { return responder_resources_; }
  uint8_t initiator_depth() const { return initiator_depth_; }
  uint8_t target_ack_delay() const { return get_bits(off26_, 3, 5); }
  uint8_t failover_accepted() const { return get_bits(off26_, 1, 2); }
  bool e2e_flow_control() const { return off26_ & 1; }
  uint8_t rnr_retry_count() const { return get_bits(off27_, 5, 3); }
  bool srq() const { return off27_ & 0x10; }
  uint64_t local_ca_guid() const { return load_be64(local_ca_guid_); }
  void set_local_comm_id(uint32_t v) { store_be32(local_comm_id_, v); }
  void set_remote_comm_id(uint32_t v) { store_be32(remote_comm_id_, v); }
  void set_local_qkey(uint32_t v) { store_be32(local_qkey_, v); }
  void set_local_qpn(uint32_t v) { store_be24(off12_, v); }
  void set_starting_psn(uint32_t v) { store_be24(off20_, v); }
  void set_responder_resources(uint8_t v) { responder_resources_ = v; }
  void set_initiator_depth(uint8_t v) { initiator_depth_ = v; }
  void set_target_ack_delay(uint8_t v) { set_bits(&off26_, 3, 5, v); }
  void set_failover_accepted(uint8_t v) { set_bits(&off26_, 1, 2, v); }
  void set_e2e_flow_control(bool v) { set_bits(&off26_, 0, 1, v); }
  void set_rnr_retry_count(uint8_t v) { set_bits(&off27_, 5, 3, v); }
  void set_srq(bool v) { set_bits(&off27_, 4, 1, v); }
  void set_local_ca_guid(uint64_t v) { store_be64(local_ca_guid_, v); }
};
static_assert(sizeof(RepMsg) == kMadBytes);

// ReadyToUse (12.6.9), DisconnectReply (12.6.11): the two IDs and private data.
struct RtuMsg {
  MadHeader hdr;
  uint8_t local_comm_id_[4];
  uint8_t remote_comm_id_[4];
  uint8_t private_data[kRtuPrivateData];

  uint32_t local_comm_id() const { return load_be32(local_comm_id_); }
  uint32_t remote_comm_id() const { return load_be32(remote_comm_id_); }
  void set_local_comm_id(uint32_t v) { store_be32(local_comm_id_, v); }
  void set_remote_comm_id(uint32_t v) { store_be32(remote_comm_id_, v); }
};
static_assert(sizeof(RtuMsg) == kMadBytes);
using DrepMsg = RtuMsg;
static_assert(kDrepPrivateData == kRtuPrivateData);

// DisconnectRequest (12.6.10).
struct DreqMsg {
  MadHeader hdr;
  uint8_t local_comm_id_[4];
  uint8_t remote_comm_id_[4];
  uint8_t off8_[4];  // remote QPN/EECN:24, rsvd:8
  uint8_t private_data[kDreqPrivateData];

  uint32_t local_comm_id() const { return load_be32(local_comm_id_); }
  uint32_t remote_comm_id() const { return load_be32(remote_comm_id_); }
  uint32_t remote_qpn() const { return load_be24(off8_); }
  void set_local_comm_id(uint32_t v) { store_be32(local_comm_id_, v); }
  void set_remote_comm_id(uint32_t v) { store_be32(remote_comm_id_, v); }
  void set_remote_qpn(uint32_t v) { store_be24(off8_, v); }
};
static_assert(sizeof(DreqMsg) == kMadBytes);

// ServiceIDResolutionRequest (12.11.1, Table 118).
struct SidrReqMsg {
  MadHeader hdr;
  uint8_t request_id_[4];
  uint8_t pkey_[2];
  uint8_t rsvd_[2];
  uint8_t service_id_[8];
  uint8_t private_data[kSidrReqPrivateData];

  uint32_t request_id() const { return load_be32(request_id_); }
  uint16_t pkey() const { return load_be16(pkey_); }
  uint64_t service_id() const { return load_be64(service_id_); }
  void set_request_id(uint32_t v) { store_be32(request_id_, v); }
  void set_pkey(uint16_t v) { store_be16(pkey_, v); }
  void set_service_id(uint64_t v) { store_be64(service_id_, v); }
};
static_assert(sizeof(SidrReqMsg) == kMadBytes);

// ServiceIDResolutionResponse (12.11.2, Table 119).
struct SidrRepMsg {
  MadHeader hdr;
  uint8_t request_id_[4];
  uint8_t status_;
  uint8_t info_length_;
  uint8_t rsvd_[2];
  uint8_t off8_[4];  // QPN:24, rsvd:8
  uint8_t service_id_[8];
  uint8_t qkey_[4];
  uint8_t class_port_info[72];
  uint8_t private_data[kSidrRepPrivateData];

  uint32_t request_id() const { return load_be32(request_id_); }
  uint8_t status() const { return status_; }
  uint8_t info_length() const { return info_length_; }
  uint32_t qpn() const { return load_be24(off8_); }
  uint64_t service_id() const { return load_be64(service_id_); }
  uint32_t qkey() const { return load_be32(qkey_); }
  void set_request_id(uint32_t v) { store_be32(request_id_, v); }
  void set_status(uint8_t v) { status_ = v; }
  void set_qpn(uint32_t v) { store_be24(off8_, v); }
  void set_service_id(uint64_t v) { store_be64(service_id_, v); }
  void set_qkey(uint32_t v) { store_be32(qkey_, v); }
};
static_assert(sizeof(SidrRepMsg) == kMadBytes);

// A zeroed message of type T with its MAD header set (attribute a, tid).
template <typename T>
T make_msg(AttrId a, uint64_t tid) {
  T m;
  std::memset(&m, 0, sizeof m);
  m.hdr.init(a, tid);
  return m;
}

// The message at the start of a MAD that check_mad() accepted (T must match
// its attribute ID). Alignment 1: no copy needed.
template <typename T>
const T* msg_cast(const uint8_t* mad) {
  static_assert(alignof(T) == 1 && sizeof(T) == kMadBytes);
  return reinterpret_cast<const T*>(mad);
}

}  // namespace isoroce::cm
