// The InfiniBand transport headers carried by RoCEv2 (IBTA vol.1 ch.9.2-9.5,
// annex A17.4), one packed struct each, fields stored as they are on the wire.
// Accessors convert; nothing here allocates or checks lengths (parse.cc does).
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/wire/bytes.h"
#include "transport/wire/types.h"

namespace isoroce::wire {

// Base Transport Header, 12 bytes (9.2).
struct Bth {
  uint8_t opcode;
  uint8_t se_m_pad_tver;  // SE:1 MigReq:1 PadCnt:2 TVer:4
  uint8_t pkey[2];
  uint8_t fecn_becn;  // F:1 B:1 resv6; "resv8a" masked out of the ICRC
  uint8_t dest_qp[3];
  uint8_t ack_req;  // A:1 resv7
  uint8_t psn[3];

  bool solicited() const { return se_m_pad_tver & 0x80; }
  bool mig_req() const { return se_m_pad_tver & 0x40; }
  uint8_t pad() const { return (se_m_pad_tver >> 4) & 0x3; }
  uint8_t tver() const { return se_m_pad_tver & 0x0f; }
  uint16_t p_key() const { return load_be16(pkey); }
  bool fecn() const { return fecn_becn & 0x80; }
  bool becn() const { return fecn_becn & 0x40; }
  Qpn dqpn() const { return Qpn(load_be24(dest_qp)); }
  bool a() const { return ack_req & 0x80; }
  Psn psn_value() const { return Psn(load_be24(psn)); }

  void set_flags(bool se, bool mig, uint8_t padcnt, uint8_t tv) {
    se_m_pad_tver = static_cast<uint8_t>((se ? 0x80 : 0) | (mig ? 0x40 : 0) |
                                         (padcnt & 0x3) << 4 | (tv & 0x0f));
  }
  void set_pkey(uint16_t v) { store_be16(pkey, v); }
  void set_ecn_bits(bool f, bool b) { fecn_becn = static_cast<uint8_t>((f ? 0x80 : 0) | (b ? 0x40 : 0)); }
  void set_dqpn(Qpn q) { store_be24(dest_qp, q.value()); }
  void set_ack_req(bool a) { ack_req = a ? 0x80 : 0; }
  void set_psn(Psn p) { store_be24(psn, p.value()); }
};
static_assert(sizeof(Bth) == 12);

// RDMA Extended Transport Header, 16 bytes (9.3.3).
struct Reth {
  uint8_t va[8];
  uint8_t rkey[4];
  uint8_t dma_len[4];
};
static_assert(sizeof(Reth) == 16);

// ACK Extended Transport Header, 4 bytes (9.3.5).
struct Aeth {
  uint8_t syndrome;
  uint8_t msn[3];
};
static_assert(sizeof(Aeth) == 4);

// Datagram Extended Transport Header, 8 bytes (9.3.2).
struct Deth {
  uint8_t qkey[4];
  uint8_t reserved;
  uint8_t src_qp[3];
};
static_assert(sizeof(Deth) == 8);

// Immediate data, 4 bytes (9.3.7); carried opaque, as ibv_wc.imm_data is.
struct ImmDt {
  uint8_t imm[4];
};
static_assert(sizeof(ImmDt) == 4);

// Invalidate Extended Transport Header, 4 bytes (9.3.8).
struct Ieth {
  uint8_t rkey[4];
};
static_assert(sizeof(Ieth) == 4);

// Atomic Extended Transport Header, 28 bytes (9.3.4).
struct AtomicEth {
  uint8_t va[8];
  uint8_t rkey[4];
  uint8_t swap_add[8];
  uint8_t compare[8];
};
static_assert(sizeof(AtomicEth) == 28);

// Atomic Acknowledge Extended Transport Header, 8 bytes (9.3.6).
struct AtomicAckEth {
  uint8_t orig[8];
};
static_assert(sizeof(AtomicAckEth) == 8);

// A RoCEv2 Congestion Notification Packet carries 16 reserved bytes after
// the BTH (annex A17.9.3).
inline constexpr size_t kCnpReservedBytes = 16;
inline constexpr size_t kIcrcBytes = 4;

// AETH syndrome (9.3.5 table 45): bits 6..5 select ACK / RNR NAK / NAK.
enum class AethKind : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
inline constexpr AethKind aeth_kind(uint8_t syndrome) {
  return static_cast<AethKind>((syndrome >> 5) & 0x3);
}
// NAK codes in the low 5 bits when the kind is kNak.
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
inline constexpr uint8_t make_syndrome(AethKind kind, uint8_t value5) {
  return static_cast<uint8_t>(static_cast<uint8_t>(kind) << 5 | (value5 & 0x1f));
}

}  // namespace isoroce::wire
