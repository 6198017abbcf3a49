// What Linux's rdma_cm adds to the IB CM: the service ID of an IP port
// (IB_CMA_SERVICE_ID | port space << 16 | port) and the 36-byte header it
// puts at the start of the private data of a REQ and of a SIDR_REQ
// (struct cma_hdr: version 0, IP version in the high nibble, the source
// port, then the source and destination addresses, IPv4 in the last 4
// bytes of 16 with 12 zero bytes before them).
//
// A REQ from rdma_connect carries this header followed by the application's
// private data (at most 92 - 36 = 56 bytes); a SIDR_REQ likewise (216 - 36).
// REP, REJ, RTU, DREQ, DREP and SIDR_REP carry the application's data only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace isoroce::cm {

inline constexpr uint32_t kRdmaCmHeaderBytes = 36;
inline constexpr uint8_t kRdmaCmVersion = 0x00;

// An IP address as rdma_cm carries it: IPv4 (v4 in network order in the last
// 4 bytes of addr, the rest 0) or IPv6.
struct RdmaCmAddr {
  bool ipv6 = false;
  std::array<uint8_t, 16> addr{};

  // From/to the IPv4-mapped GID form (::ffff:a.b.c.d) isoroce uses for IPv4.
  static RdmaCmAddr from_gid(const std::array<uint8_t, 16>& gid);
  std::array<uint8_t, 16> to_gid() const;
  static RdmaCmAddr v4(uint32_t host_order);
  std::string text() const;  // "10.0.0.1" or "fe80::1"
  bool operator==(const RdmaCmAddr&) const = default;
};

struct RdmaCmHeader {
  uint8_t version = kRdmaCmVersion;
  uint16_t src_port = 0;  // host order
  RdmaCmAddr src, dst;    // both of one family (src.ipv6 decides the IP version)
};

// Service IDs of rdma_cm (rdma_cma.h: RDMA_PS_TCP 0x0106, RDMA_PS_UDP 0x0111).
constexpr uint64_t rdma_cm_service_id(uint16_t port_space, uint16_t port) {
  return 0x0000000001000000ull | static_cast<uint64_t>(port_space) << 16 | port;
}
// Whether sid is an rdma_cm service ID; its port space and port.
constexpr bool is_rdma_cm_service_id(uint64_t sid) { return (sid & 0xffffffffff000000ull) == 0x0000000001000000ull; }
constexpr uint16_t rdma_cm_port_space(uint64_t sid) { return static_cast<uint16_t>(sid >> 16); }
constexpr uint16_t rdma_cm_port(uint64_t sid) { return static_cast<uint16_t>(sid); }

// The header followed by the application's private data. Empty if the result
// would exceed max_bytes (kReqPrivateData or kSidrReqPrivateData).
std::vector<uint8_t> build_rdma_cm_private_data(const RdmaCmHeader& h, std::span<const uint8_t> app_data,
                                                size_t max_bytes);
// The header at the start of private data; nullopt (and *error) if it is
// shorter than 36 bytes, of another version, or of an IP version other than
// 4 or 6. The application's data is private_data.subspan(kRdmaCmHeaderBytes).
std::optional<RdmaCmHeader> parse_rdma_cm_header(std::span<const uint8_t> private_data, std::string* error = nullptr);

}  // namespace isoroce::cm
