// The 24-byte MAD common header (IBTA vol. 1 13.4.2) and the checks every
// received CM MAD passes before its attribute is looked at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/cm/constants.h"
#include "transport/wire/bytes.h"

namespace isoroce::cm {

struct MadHeader {
  uint8_t base_version;
  uint8_t mgmt_class;
  uint8_t class_version;
  uint8_t r_method;  // R:1 (response) Method:7
  uint8_t status_[2];
  uint8_t class_specific_[2];
  uint8_t tid_[8];
  uint8_t attr_id_[2];
  uint8_t reserved_[2];
  uint8_t attr_mod_[4];

  uint8_t method() const { return r_method; }  // with the R bit (0x81 = GetResp)
  uint16_t status() const { return wire::load_be16(status_); }
  uint16_t class_specific() const { return wire::load_be16(class_specific_); }
  uint64_t tid() const { return wire::load_be64(tid_); }
  uint16_t attr_id() const { return wire::load_be16(attr_id_); }
  uint32_t attr_mod() const { return wire::load_be32(attr_mod_); }

  void set_status(uint16_t v) { wire::store_be16(status_, v); }
  void set_tid(uint64_t v) { wire::store_be64(tid_, v); }
  void set_attr_id(uint16_t v) { wire::store_be16(attr_id_, v); }
  void set_attr_mod(uint32_t v) { wire::store_be32(attr_mod_, v); }
  // A CM Send of attribute a with transaction ID tid (the rest zero).
  void init(AttrId a, uint64_t transaction_id);
};
static_assert(sizeof(MadHeader) == kMadHeaderBytes);

enum class MadError : uint8_t {
  kOk,
  kTooShort,         // fewer than 256 bytes
  kBaseVersion,      // not 1
  kWrongClass,       // not the CM class (0x07)
  kClassVersion,     // not 2
  kMethod,           // not Send (CM messages are all Send)
  kUnknownAttribute, // not one of REQ..SIDR_REP (LAP/APR/ClassPortInfo included)
};
const char* mad_error_text(MadError e);

// Checks the header of a received MAD; *hdr points into mad on kOk (and on
// every error but kTooShort).
MadError check_mad(std::span<const uint8_t> mad, const MadHeader** hdr);

// Bits [shift, shift+width) of a byte, and setting them.
constexpr uint8_t get_bits(uint8_t b, int shift, int width) {
  return static_cast<uint8_t>((b >> shift) & ((1u << width) - 1));
}
constexpr void set_bits(uint8_t* b, int shift, int width, uint32_t v) {
  const uint8_t mask = static_cast<uint8_t>(((1u << width) - 1) << shift);
  *b = static_cast<uint8_t>((*b & ~mask) | ((v << shift) & mask));
}

}  // namespace isoroce::cm
