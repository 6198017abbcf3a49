#include "transport/cm/mad.h"

#include <cstring>

namespace isoroce::cm {

void MadHeader::init(AttrId a, uint64_t transaction_id) {
  std::memset(this, 0, sizeof *this);
  base_version = kBaseVersion;
  mgmt_class = kMgmtClassCm;
  class_version = kCmClassVersion;
  r_method = static_cast<uint8_t>(Method::kSend);
  set_tid(transaction_id);
  set_attr_id(static_cast<uint16_t>(a));
}

const char* mad_error_text(MadError e) {
  switch (e) {
    case MadError::kOk: return "ok";
    case MadError::kTooShort: return "shorter than a MAD (256 bytes)";
    case MadError::kBaseVersion: return "MAD base version is not 1";
    case MadError::kWrongClass: return "not a CM MAD (management class is not 0x07)";
    case MadError::kClassVersion: return "CM class version is not 2";
    case MadError::kMethod: return "CM method is not Send";
    case MadError::kUnknownAttribute: return "unknown or unsupported CM attribute";
  }
  return "?";
}

MadError check_mad(std::span<const uint8_t> mad, const MadHeader** hdr) {
  if (mad.size() < kMadBytes) return MadError::kTooShort;
  const auto* h = reinterpret_cast<const MadHeader*>(mad.data());
  *hdr = h;
  if (h->base_version != kBaseVersion) return MadError::kBaseVersion;
  if (h->mgmt_class != kMgmtClassCm) return MadError::kWrongClass;
  if (h->class_version != kCmClassVersion) return MadError::kClassVersion;
  if (h->method() != static_cast<uint8_t>(Method::kSend)) return MadError::kMethod;
  const uint16_t a = h->attr_id();
  if (a < static_cast<uint16_t>(AttrId::kReq) || a > static_cast<uint16_t>(AttrId::kSidrRep))
    return MadError::kUnknownAttribute;
  return MadError::kOk;
}

}  // namespace isoroce::cm
