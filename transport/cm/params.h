// What a consumer (the daemon's rdma_cm operations) gives the CM with each
// command, and what it learns of the peer. Plain values; Manager checks them
// (lengths of private data, 24-bit QPNs and PSNs, 4/5-bit fields).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "transport/cm/constants.h"

namespace isoroce::cm {

using Gid = std::array<uint8_t, 16>;  // RoCEv2: the IPv6 or IPv4-mapped address

// connect(): the REQ (12.6.5). Addressing (local GID, P_Key) is the Manager's.
struct ConnectParams {
  Gid peer_gid{};
  uint64_t service_id = 0;
  uint32_t qpn = 0;           // local QPN (24 bits)
  uint32_t starting_psn = 0;  // local QP's receive PSN (rq_psn), which the peer sends from (24 bits)
  QpType qp_type = QpType::kRc;
  uint8_t responder_resources = 0;  // RDMA READ/atomic we accept (max_dest_rd_atomic)
  uint8_t initiator_depth = 0;      // RDMA READ/atomic we issue (max_rd_atomic)
  uint8_t retry_count = 7;          // 3 bits
  uint8_t rnr_retry_count = 7;      // 3 bits
  uint8_t path_mtu = 3;             // IB enum: 1=256 ... 5=4096
  uint8_t local_ack_timeout = 14;   // 5 bits (path's Local ACK Timeout)
  bool srq = false;
  bool end_to_end_flow_control = true;
  // CM timers (12.6.5: 4.096 us * 2^t): how long the peer may take to answer
  // (our retry period) and how long we take; retries before giving up.
  uint8_t remote_cm_response_timeout = 20;  // Linux rdma_cm: CMA_CM_RESPONSE_TIMEOUT 20 (~4.3 s)
  uint8_t local_cm_response_timeout = 20;
  uint8_t max_cm_retries = 15;              // 4 bits (CMA_MAX_CM_RETRIES)
  // Path (annex A17: GRH fields of the route).
  uint32_t flow_label = 0;  // 20 bits
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  uint8_t sl = 0;           // 4 bits
  std::vector<uint8_t> private_data;  // at most kReqPrivateData (92)
};

// accept(): the REP (12.6.8).
struct AcceptParams {
  uint32_t qpn = 0;
  uint32_t starting_psn = 0;  // local QP's receive PSN (rq_psn), which the peer sends from
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t rnr_retry_count = 7;
  uint8_t target_ack_delay = 0;  // 5 bits
  bool srq = false;
  bool end_to_end_flow_control = true;
  bool failover_accepted = false;
  std::vector<uint8_t> private_data;  // at most kRepPrivateData (196)
};

// reject(): the REJ (12.6.7).
struct RejectParams {
  RejReason reason = RejReason::kConsumerReject;
  std::vector<uint8_t> ari;           // additional reject information, at most 72
  std::vector<uint8_t> private_data;  // at most kRejPrivateData (148)
};

// sidr_resolve(): the SIDR_REQ (12.11.1).
struct SidrParams {
  Gid peer_gid{};
  uint64_t service_id = 0;
  uint8_t timeout = 20;       // response timeout, 4.096 us * 2^t per try
  uint8_t max_retries = 15;
  std::vector<uint8_t> private_data;  // at most kSidrReqPrivateData (216)
};

// sidr_reply(): the SIDR_REP (12.11.2).
struct SidrReplyParams {
  SidrStatus status = SidrStatus::kValid;
  uint32_t qpn = 0;   // with kValid
  uint32_t qkey = 0;  // with kValid
  std::vector<uint8_t> private_data;  // at most kSidrRepPrivateData (136)
};

// What we know of the other end of a connection: filled from its REQ (on the
// passive side) or its REP (on the active side), and whatever is in the
// message that produced an event.
struct PeerParams {
  Gid gid{};                     // the peer's GID (source GID of its MADs)
  uint32_t qpn = 0;              // its QPN (REQ's Local QPN / REP's Local QPN)
  uint32_t starting_psn = 0;     // its receive PSN: our QP's sq_psn (as Linux and RNICs use it)
  uint32_t comm_id = 0;          // its Local Communication ID
  uint64_t service_id = 0;       // the REQ's or SIDR_REQ's service ID
  QpType qp_type = QpType::kRc;
  uint8_t responder_resources = 0;  // its responder resources (our max_rd_atomic bound)
  uint8_t initiator_depth = 0;      // its initiator depth (our max_dest_rd_atomic bound)
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
  uint8_t path_mtu = 3;             // REQ: IB MTU enum
  uint8_t local_ack_timeout = 14;   // REQ's primary path
  uint8_t target_ack_delay = 0;     // REP
  bool srq = false;
  bool end_to_end_flow_control = false;
  uint32_t flow_label = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;
  uint16_t pkey = kDefaultPkey;
};

}  // namespace isoroce::cm
