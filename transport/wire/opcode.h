// The BTH opcode table (IBTA vol.1 9.2.1 table 36 and annex A17.9.3 for the
// CNP): for each opcode, which extension headers follow the BTH, at which
// offsets, where the packet sits in its message and whether it carries payload.
// Built at compile time; lookup is one array index.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "transport/wire/headers.h"

namespace isoroce::wire {

enum class Transport : uint8_t { kRc, kUc, kUd, kCnp };

enum class OpKind : uint8_t {
  kSend,
  kWrite,
  kReadRequest,
  kReadResponse,
  kAck,
  kAtomicAck,
  kCompareSwap,
  kFetchAdd,
  kCnp,
};

// Extension headers that can follow the BTH, and the payload flag.
enum HeaderMask : uint16_t {
  kHdrDeth = 1 << 0,
  kHdrReth = 1 << 1,
  kHdrAtomicEth = 1 << 2,
  kHdrAeth = 1 << 3,
  kHdrAtomicAckEth = 1 << 4,
  kHdrImmDt = 1 << 5,
  kHdrIeth = 1 << 6,
  kHdrCnpReserved = 1 << 7,
  kHdrPayload = 1 << 8,
};

enum PositionMask : uint8_t {
  kPosFirst = 1 << 0,
  kPosMiddle = 1 << 1,
  kPosLast = 1 << 2,
  kPosOnly = kPosFirst | kPosLast,
};

struct OpcodeInfo {
  std::string_view name;  // empty for opcodes this codec does not know
  uint16_t headers = 0;
  Transport transport = Transport::kRc;
  OpKind kind = OpKind::kSend;
  uint8_t position = 0;
  uint8_t length = 0;  // BTH plus extension headers, in bytes
  // Offsets from the start of the BTH; meaningful only when the header is present.
  uint8_t deth = 0, reth = 0, atomic_eth = 0, aeth = 0, atomic_ack_eth = 0, immdt = 0, ieth = 0;

  constexpr bool valid() const { return !name.empty(); }
  constexpr bool has(uint16_t mask) const { return (headers & mask) == mask; }
  constexpr bool has_payload() const { return has(kHdrPayload); }
  constexpr bool is_first() const { return position & kPosFirst; }
  constexpr bool is_last() const { return position & kPosLast; }
  constexpr bool is_middle() const { return position & kPosMiddle; }
};

namespace detail {

constexpr OpcodeInfo make_op(std::string_view name, Transport t, OpKind k, uint8_t pos,
                             uint16_t headers) {
  OpcodeInfo op;
  op.name = name;
  op.transport = t;
  op.kind = k;
  op.position = pos;
  op.headers = headers;
  // Canonical header order after the BTH (9.2, figure 27 and A17.4).
  uint8_t off = sizeof(Bth);
  if (headers & kHdrDeth) { op.deth = off; off += sizeof(Deth); }
  if (headers & kHdrReth) { op.reth = off; off += sizeof(Reth); }
  if (headers & kHdrAtomicEth) { op.atomic_eth = off; off += sizeof(AtomicEth); }
  if (headers & kHdrAeth) { op.aeth = off; off += sizeof(Aeth); }
  if (headers & kHdrAtomicAckEth) { op.atomic_ack_eth = off; off += sizeof(AtomicAckEth); }
  if (headers & kHdrImmDt) { op.immdt = off; off += sizeof(ImmDt); }
  if (headers & kHdrIeth) { op.ieth = off; off += sizeof(Ieth); }
  if (headers & kHdrCnpReserved) { off += kCnpReservedBytes; }
  op.length = off;
  return op;
}

// The send/write opcodes shared by RC (base 0x00) and UC (base 0x20).
template <size_t N>
constexpr void add_send_write(std::array<OpcodeInfo, N>& t, uint8_t base, Transport tr,
                              std::string_view (&names)[12]) {
  constexpr uint16_t P = kHdrPayload;
  t[base + 0x00] = make_op(names[0], tr, OpKind::kSend, kPosFirst, P);
  t[base + 0x01] = make_op(names[1], tr, OpKind::kSend, kPosMiddle, P);
  t[base + 0x02] = make_op(names[2], tr, OpKind::kSend, kPosLast, P);
  t[base + 0x03] = make_op(names[3], tr, OpKind::kSend, kPosLast, P | kHdrImmDt);
  t[base + 0x04] = make_op(names[4], tr, OpKind::kSend, kPosOnly, P);
  t[base + 0x05] = make_op(names[5], tr, OpKind::kSend, kPosOnly, P | kHdrImmDt);
  t[base + 0x06] = make_op(names[6], tr, OpKind::kWrite, kPosFirst, P | kHdrReth);
  t[base + 0x07] = make_op(names[7], tr, OpKind::kWrite, kPosMiddle, P);
  t[base + 0x08] = make_op(names[8], tr, OpKind::kWrite, kPosLast, P);
  t[base + 0x09] = make_op(names[9], tr, OpKind::kWrite, kPosLast, P | kHdrImmDt);
  t[base + 0x0a] = make_op(names[10], tr, OpKind::kWrite, kPosOnly, P | kHdrReth);
  t[base + 0x0b] = make_op(names[11], tr, OpKind::kWrite, kPosOnly, P | kHdrReth | kHdrImmDt);
}

constexpr std::array<OpcodeInfo, 256> make_opcode_table() {
  std::array<OpcodeInfo, 256> t{};
  constexpr uint16_t P = kHdrPayload;
  std::string_view rc[12] = {
      "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_SEND_LAST_WITH_IMMEDIATE",
      "RC_SEND_ONLY", "RC_SEND_ONLY_WITH_IMMEDIATE", "RC_RDMA_WRITE_FIRST",
      "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST", "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
      "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
  std::string_view uc[12] = {
      "UC_SEND_FIRST", "UC_SEND_MIDDLE", "UC_SEND_LAST", "UC_SEND_LAST_WITH_IMMEDIATE",
      "UC_SEND_ONLY", "UC_SEND_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_FIRST",
      "UC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_LAST", "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
      "UC_RDMA_WRITE_ONLY", "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
  add_send_write(t, 0x00, Transport::kRc, rc);
  add_send_write(t, 0x20, Transport::kUc, uc);

  const auto R = Transport::kRc;
  t[0x0c] = make_op("RC_RDMA_READ_REQUEST", R, OpKind::kReadRequest, kPosOnly, kHdrReth);
  t[0x0d] = make_op("RC_RDMA_READ_RESPONSE_FIRST", R, OpKind::kReadResponse, kPosFirst, P | kHdrAeth);
  t[0x0e] = make_op("RC_RDMA_READ_RESPONSE_MIDDLE", R, OpKind::kReadResponse, kPosMiddle, P);
  t[0x0f] = make_op("RC_RDMA_READ_RESPONSE_LAST", R, OpKind::kReadResponse, kPosLast, P | kHdrAeth);
  t[0x10] = make_op("RC_RDMA_READ_RESPONSE_ONLY", R, OpKind::kReadResponse, kPosOnly, P | kHdrAeth);
  t[0x11] = make_op("RC_ACKNOWLEDGE", R, OpKind::kAck, kPosOnly, kHdrAeth);
  t[0x12] = make_op("RC_ATOMIC_ACKNOWLEDGE", R, OpKind::kAtomicAck, kPosOnly, kHdrAeth | kHdrAtomicAckEth);
  t[0x13] = make_op("RC_COMPARE_SWAP", R, OpKind::kCompareSwap, kPosOnly, kHdrAtomicEth);
  t[0x14] = make_op("RC_FETCH_ADD", R, OpKind::kFetchAdd, kPosOnly, kHdrAtomicEth);
  t[0x16] = make_op("RC_SEND_LAST_WITH_INVALIDATE", R, OpKind::kSend, kPosLast, P | kHdrIeth);
  t[0x17] = make_op("RC_SEND_ONLY_WITH_INVALIDATE", R, OpKind::kSend, kPosOnly, P | kHdrIeth);

  t[0x64] = make_op("UD_SEND_ONLY", Transport::kUd, OpKind::kSend, kPosOnly, P | kHdrDeth);
  t[0x65] = make_op("UD_SEND_ONLY_WITH_IMMEDIATE", Transport::kUd, OpKind::kSend, kPosOnly,
                    P | kHdrDeth | kHdrImmDt);

  t[0x81] = make_op("CNP", Transport::kCnp, OpKind::kCnp, kPosOnly, kHdrCnpReserved);
  return t;
}

}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodes = detail::make_opcode_table();

inline constexpr const OpcodeInfo& opcode_info(uint8_t opcode) { return kOpcodes[opcode]; }

// Opcode numbers used by name in the engine.
namespace op {
inline constexpr uint8_t kRcSendFirst = 0x00, kRcSendMiddle = 0x01, kRcSendLast = 0x02,
                         kRcSendLastImm = 0x03, kRcSendOnly = 0x04, kRcSendOnlyImm = 0x05,
                         kRcWriteFirst = 0x06, kRcWriteMiddle = 0x07, kRcWriteLast = 0x08,
                         kRcWriteLastImm = 0x09, kRcWriteOnly = 0x0a, kRcWriteOnlyImm = 0x0b,
                         kRcReadRequest = 0x0c, kRcReadResponseFirst = 0x0d,
                         kRcReadResponseMiddle = 0x0e, kRcReadResponseLast = 0x0f,
                         kRcReadResponseOnly = 0x10, kRcAck = 0x11, kRcAtomicAck = 0x12,
                         kRcCompareSwap = 0x13, kRcFetchAdd = 0x14, kRcSendLastInv = 0x16,
                         kRcSendOnlyInv = 0x17, kUcBase = 0x20, kUdSendOnly = 0x64,
                         kUdSendOnlyImm = 0x65, kCnp = 0x81;
}  // namespace op

static_assert(opcode_info(op::kRcWriteOnlyImm).length == 12 + 16 + 4);
static_assert(opcode_info(op::kRcAtomicAck).aeth == 12 && opcode_info(op::kRcAtomicAck).atomic_ack_eth == 16);
static_assert(opcode_info(op::kUdSendOnlyImm).immdt == 20);
static_assert(opcode_info(op::kCnp).length == 28);

}  // namespace isoroce::wire
