// Names of attributes, REJ reasons, events and states for logs and tools.
#include "transport/cm/event.h"
#include "transport/cm/manager.h"

namespace isoroce::cm {

const char* attr_name(uint16_t attr_id) {
  switch (static_cast<AttrId>(attr_id)) {
    case AttrId::kClassPortInfo: return "ClassPortInfo";
    case AttrId::kReq: return "ConnectRequest";
    case AttrId::kMra: return "MsgRcptAck";
    case AttrId::kRej: return "ConnectReject";
    case AttrId::kRep: return "ConnectReply";
    case AttrId::kRtu: return "ReadyToUse";
    case AttrId::kDreq: return "DisconnectRequest";
    case AttrId::kDrep: return "DisconnectReply";
    case AttrId::kSidrReq: return "ServiceIDResReq";
    case AttrId::kSidrRep: return "ServiceIDResReqResp";
    case AttrId::kLap: return "LoadAlternatePath";
    case AttrId::kApr: return "AlternatePathResponse";
  }
  return "?";
}

const char* rej_reason_name(uint16_t reason) {
  switch (static_cast<RejReason>(reason)) {
    case RejReason::kNoQp: return "no QP";
    case RejReason::kNoEec: return "no EEC";
    case RejReason::kNoResources: return "no resources";
    case RejReason::kTimeout: return "timeout";
    case RejReason::kUnsupported: return "unsupported request";
    case RejReason::kInvalidCommId: return "invalid communication ID";
    case RejReason::kInvalidCommInstance: return "invalid communication instance";
    case RejReason::kInvalidServiceId: return "invalid service ID";
    case RejReason::kInvalidTransportType: return "invalid transport service type";
    case RejReason::kStaleConnection: return "stale connection";
    case RejReason::kRdcNotExist: return "RDC does not exist";
    case RejReason::kInvalidGid: return "invalid GID";
    case RejReason::kInvalidLid: return "invalid LID";
    case RejReason::kInvalidSl: return "invalid SL";
    case RejReason::kInvalidTrafficClass: return "invalid traffic class";
    case RejReason::kInvalidHopLimit: return "invalid hop limit";
    case RejReason::kInvalidPacketRate: return "invalid packet rate";
    case RejReason::kPortCmRedirect: return "port and CM redirect";
    case RejReason::kPortRedirect: return "port redirect";
    case RejReason::kInvalidMtu: return "invalid path MTU";
    case RejReason::kInsufficientRespResources: return "insufficient responder resources";
    case RejReason::kConsumerReject: return "consumer reject";
    case RejReason::kInvalidRnrRetry: return "invalid RNR retry count";
    case RejReason::kDuplicateLocalCommId: return "duplicate local communication ID";
    case RejReason::kInvalidClassVersion: return "invalid class version";
    case RejReason::kInvalidFlowLabel: return "invalid flow label";
    case RejReason::kInvalidAltFlowLabel: return "invalid alternate flow label";
  }
  return "other";
}

const char* event_name(EventType t) {
  switch (t) {
    case EventType::kReqReceived: return "req_received";
    case EventType::kRepReceived: return "rep_received";
    case EventType::kEstablished: return "established";
    case EventType::kRejected: return "rejected";
    case EventType::kUnreachable: return "unreachable";
    case EventType::kMraReceived: return "mra_received";
    case EventType::kDreqReceived: return "dreq_received";
    case EventType::kDisconnected: return "disconnected";
    case EventType::kTimewaitExit: return "timewait_exit";
    case EventType::kSidrReqReceived: return "sidr_req_received";
    case EventType::kSidrRepReceived: return "sidr_rep_received";
  }
  return "?";
}

const char* state_name(State s) {
  switch (s) {
    case State::kIdle: return "idle";
    case State::kListen: return "listen";
    case State::kReqSent: return "req_sent";
    case State::kReqRcvd: return "req_rcvd";
    case State::kMraReqSent: return "mra_req_sent";
    case State::kMraReqRcvd: return "mra_req_rcvd";
    case State::kRepSent: return "rep_sent";
    case State::kRepRcvd: return "rep_rcvd";
    case State::kMraRepSent: return "mra_rep_sent";
    case State::kMraRepRcvd: return "mra_rep_rcvd";
    case State::kEstablished: return "established";
    case State::kDreqSent: return "dreq_sent";
    case State::kDreqRcvd: return "dreq_rcvd";
    case State::kTimewait: return "timewait";
    case State::kSidrReqSent: return "sidr_req_sent";
    case State::kSidrReqRcvd: return "sidr_req_rcvd";
  }
  return "?";
}

}  // namespace isoroce::cm
