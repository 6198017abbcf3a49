#include "transport/cm/rdma_cm_header.h"

#include <arpa/inet.h>

#include <cstring>

#include "transport/wire/bytes.h"

namespace isoroce::cm {
namespace {

constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

}  // namespace

RdmaCmAddr RdmaCmAddr::from_gid(const std::array<uint8_t, 16>& gid) {
  RdmaCmAddr a;
  if (std::memcmp(gid.data(), kV4Mapped, 12) == 0) {
    std::memcpy(a.addr.data() + 12, gid.data() + 12, 4);
  } else {
    a.ipv6 = true;
    a.addr = gid;
  }
  return a;
}

std::array<uint8_t, 16> RdmaCmAddr::to_gid() const {
  if (ipv6) return addr;
  std::array<uint8_t, 16> g{};
  std::memcpy(g.data(), kV4Mapped, 12);
  std::memcpy(g.data() + 12, addr.data() + 12, 4);
  return g;
}

RdmaCmAddr RdmaCmAddr::v4(uint32_t host_order) {
  RdmaCmAddr a;
  wire::store_be32(a.addr.data() + 12, host_order);
  return a;
}

std::string RdmaCmAddr::text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ipv6) inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
  else inet_ntop(AF_INET, addr.data() + 12, buf, sizeof buf);
  return buf;
}

std::vector<uint8_t> build_rdma_cm_private_data(const RdmaCmHeader& h, std::span<const uint8_t> app_data,
                                                size_t max_bytes) {
  if (kRdmaCmHeaderBytes + app_data.size() > max_bytes) return {};
  std::vector<uint8_t> out(kRdmaCmHeaderBytes + app_data.size());
  out[0] = h.version;
  out[1] = static_cast<uint8_t>((h.src.ipv6 ? 6 : 4) << 4);
  wire::store_be16(out.data() + 2, h.src_port);
  // IPv4 addresses as rdma_cm writes them: 12 zero bytes, then the address.
  RdmaCmAddr src = h.src, dst = h.dst;
  if (!src.ipv6) std::memset(src.addr.data(), 0, 12);
  if (!dst.ipv6) std::memset(dst.addr.data(), 0, 12);
  std::memcpy(out.data() + 4, src.addr.data(), 16);
  std::memcpy(out.data() + 20, dst.addr.data(), 16);
  if (!app_data.empty()) std::memcpy(out.data() + kRdmaCmHeaderBytes, app_data.data(), app_data.size());
  return out;
}

std::optional<RdmaCmHeader> parse_rdma_cm_header(std::span<const uint8_t> pd, std::string* error) {
  auto fail = [&](const char* why) -> std::optional<RdmaCmHeader> {
    if (error) *error = why;
    return std::nullopt;
  };
  if (pd.size() < kRdmaCmHeaderBytes) return fail("private data shorter than the rdma_cm header (36 bytes)");
  if (pd[0] != kRdmaCmVersion) return fail("rdma_cm header version is not 0");
  const uint8_t ipv = pd[1] >> 4;
  if (ipv != 4 && ipv != 6) return fail("rdma_cm header IP version is neither 4 nor 6");
  RdmaCmHeader h;
  h.version = pd[0];
  h.src_port = wire::load_be16(pd.data() + 2);
  h.src.ipv6 = h.dst.ipv6 = ipv == 6;
  std::memcpy(h.src.addr.data(), pd.data() + 4, 16);
  std::memcpy(h.dst.addr.data(), pd.data() + 20, 16);
  if (ipv == 4) {
    std::memset(h.src.addr.data(), 0, 12);
    std::memset(h.dst.addr.data(), 0, 12);
  }
  return h;
}

}  // namespace isoroce::cm
