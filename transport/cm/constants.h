// Numbers of the IB Communication Manager (IBTA vol. 1 ch. 12 and 13.4) and of
// Linux's rdma_cm that the codec, the state machine and the daemon share.
#pragma once

#include <cstdint>

namespace isoroce::cm {

// MAD common header (13.4.2).
inline constexpr uint8_t kBaseVersion = 1;
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint32_t kMadBytes = 256;        // every MAD is 256 bytes
inline constexpr uint32_t kMadHeaderBytes = 24;
inline constexpr uint32_t kGsiQpn = 1;            // the CM lives on QP1 (GSI)
inline constexpr uint32_t kGsiQkey = 0x80010000;  // the GSI's well-known Q_Key
inline constexpr uint16_t kDefaultPkey = 0xffff;

// MAD methods the CM uses (13.4.5).
enum class Method : uint8_t { kGet = 0x01, kSet = 0x02, kGetResp = 0x81, kSend = 0x03 };

// CM attribute IDs (12.11, Table 103).
enum class AttrId : uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001a,
};

// "ConnectRequest", "ReadyToUse", ... as tshark names them; "?" if unknown.
const char* attr_name(uint16_t attr_id);

// Transport service type of a REQ (12.6.5, 2 bits).
enum class QpType : uint8_t { kRc = 0, kUc = 1, kRd = 2, kXrc = 3 };

// REJ reasons (12.6.7.2, Table 112). Only the ones isoroce sends or that a
// peer commonly sends are named; any 16-bit value decodes.
enum class RejReason : uint16_t {
  kNoQp = 1,
  kNoEec = 2,
  kNoResources = 3,
  kTimeout = 4,
  kUnsupported = 5,
  kInvalidCommId = 6,
  kInvalidCommInstance = 7,
  kInvalidServiceId = 8,
  kInvalidTransportType = 9,
  kStaleConnection = 10,
  kRdcNotExist = 11,
  kInvalidGid = 12,
  kInvalidLid = 13,
  kInvalidSl = 14,
  kInvalidTrafficClass = 15,
  kInvalidHopLimit = 16,
  kInvalidPacketRate = 17,
  kPortCmRedirect = 24,
  kPortRedirect = 25,
  kInvalidMtu = 26,
  kInsufficientRespResources = 27,
  kConsumerReject = 28,
  kInvalidRnrRetry = 29,
  kDuplicateLocalCommId = 30,
  kInvalidClassVersion = 31,
  kInvalidFlowLabel = 32,
  kInvalidAltFlowLabel = 33,
};
const char* rej_reason_name(uint16_t reason);

// Which message a REJ or an MRA refers to (MsgREJected / MsgMRAed, 2 bits):
// 2 is LAP in an MRA and "other" (no message: a withdrawn REQ) in a REJ.
enum class MsgKind : uint8_t { kReq = 0, kRep = 1, kLap = 2, kOther = 2 };

// SIDR_REP status (12.11.2, Table 119).
enum class SidrStatus : uint8_t {
  kValid = 0,
  kServiceIdNotSupported = 1,
  kRejected = 2,
  kNoQp = 3,
  kRedirect = 4,
  kVersionNotSupported = 5,
};

// Linux rdma_cm: port spaces and the service ID of a port (IB_CMA_SERVICE_ID).
inline constexpr uint16_t kPsTcp = 0x0106;
inline constexpr uint16_t kPsUdp = 0x0111;
inline constexpr uint16_t kPsIb = 0x013f;
inline constexpr uint16_t kPsIpoib = 0x0002;
inline constexpr uint64_t kCmaServiceId = 0x0000000001000000ull;
inline constexpr uint64_t kCmaServiceIdMask = 0xffffffffff000000ull;
inline constexpr uint32_t kRdmaUdpQkey = 0x01234567;  // RDMA_UDP_QKEY
// Private data sizes (12.6, Table 98 and friends).
inline constexpr uint32_t kReqPrivateData = 92;
inline constexpr uint32_t kMraPrivateData = 222;
inline constexpr uint32_t kRejPrivateData = 148;
inline constexpr uint32_t kRepPrivateData = 196;
inline constexpr uint32_t kRtuPrivateData = 224;
inline constexpr uint32_t kDreqPrivateData = 220;
inline constexpr uint32_t kDrepPrivateData = 224;
inline constexpr uint32_t kSidrReqPrivateData = 216;
inline constexpr uint32_t kSidrRepPrivateData = 136;
inline constexpr uint32_t kRejAriBytes = 72;

// One CM timeout unit: 4.096 us * 2^t, in picoseconds (t clamped to 31).
constexpr uint64_t cm_timeout_picos(uint8_t t) { return 4'096'000ull << (t > 31 ? 31 : t); }

}  // namespace isoroce::cm
