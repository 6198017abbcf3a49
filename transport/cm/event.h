// What the CM tells its consumer (Manager::pop_event) and what it sends
// (Manager::pop_mad).
#pragma once

#include <cstdint>
#include <vector>

#include "transport/cm/params.h"

namespace isoroce::cm {

// A CM identifier: unique among the live identifiers of one Manager; it is
// also the Local Communication ID of its connection on the wire. 0 is never
// an identifier.
using Id = uint32_t;

enum class EventType : uint8_t {
  // Passive side: a REQ reached a listener. `id` is a new identifier (owner
  // and listen_id those of the listener), in the REQ-received state; answer
  // with accept(), reject() or send_mra(), or destroy() it (REJ).
  kReqReceived,
  // Active side: the REP arrived. Move the QP to RTR/RTS with peer's
  // parameters, then establish() (RTU), or reject().
  kRepReceived,
  // Passive side: the RTU (or the first message of an established connection)
  // arrived. The active side gets no event: establish() is its own success.
  kEstablished,
  // The peer rejected (REJ, any reason, kTimeout and kStaleConnection
  // included): `reason`, `ari` and private_data are its. The id is idle.
  kRejected,
  // No answer after max CM retries (REQ, REP, or SIDR_REQ): the id is back
  // to idle (a REJ with reason kTimeout told the peer); destroy() it.
  kUnreachable,
  // The peer asked for more time (MRA); informational, timers are extended.
  kMraReceived,
  // The peer sent DREQ: call disconnect() (DREP) then destroy().
  kDreqReceived,
  // The connection is closed: DREP received, or our DREQ timed out
  // (timed_out), or we answered a DREQ with DREP. Then timewait.
  kDisconnected,
  // Timewait is over; the id may be destroyed (QPs may be reused).
  kTimewaitExit,
  // Passive side: a SIDR_REQ reached a listener: answer with sidr_reply().
  kSidrReqReceived,
  // Active side: the SIDR_REP arrived (sidr_status, sidr_qpn, sidr_qkey).
  // The id returns to idle; destroy() it or sidr_resolve again.
  kSidrRepReceived,
};
const char* event_name(EventType t);

struct Event {
  EventType type{};
  Id id = 0;
  Id listen_id = 0;    // kReqReceived, kSidrReqReceived: the listener it came through
  uint64_t owner = 0;  // the owner tag of id (for a new id: its listener's)
  PeerParams peer;     // the peer's parameters as far as known
  // kRejected: the REJ's reason and additional information. kUnreachable: kTimeout.
  RejReason reason = RejReason::kTimeout;
  std::vector<uint8_t> ari;
  bool timed_out = false;  // kDisconnected: our DREQ got no DREP
  uint8_t mra_service_timeout = 0;  // kMraReceived: 4.096 us * 2^t more
  // kSidrRepReceived.
  SidrStatus sidr_status = SidrStatus::kValid;
  uint32_t sidr_qpn = 0;
  uint32_t sidr_qkey = 0;
  // The message's private data, as many bytes as the message carries (REQ 92,
  // REP 196, REJ 148, RTU 224, DREQ 220, DREP 224, SIDR_REQ 216, SIDR_REP
  // 136): IB CM has no length field, so trailing zeros are the peer's padding.
  std::vector<uint8_t> private_data;
};

// A MAD to send: a UD SEND of the 256 bytes to (dgid, QPN 1) with Q_Key
// 0x80010000 and P_Key `pkey`.
struct OutMad {
  Gid dgid{};
  uint32_t dqpn = kGsiQpn;
  uint16_t pkey = kDefaultPkey;
  std::vector<uint8_t> bytes;  // kMadBytes
};

}  // namespace isoroce::cm
