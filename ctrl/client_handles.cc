#include "ctrl/client_handles.h"

#include <cerrno>

namespace isoroce::ctrl {

std::optional<uint32_t> own_handle(const std::set<uint32_t>& set, const nlohmann::json& j, const char* key) {
  auto v = j.find(key);
  if (v == j.end() || !v->is_number_unsigned()) return std::nullopt;
  const auto h = v->get<uint64_t>();
  if (h > UINT32_MAX || !set.count(static_cast<uint32_t>(h))) return std::nullopt;
  return static_cast<uint32_t>(h);
}

int check_send_wr(const ClientObjects& c, uint32_t qpn, transport::SendWr& wr, std::span<transport::Sge> sges,
                  InlineSource source, const char** why) {
  if (!c.qps.count(qpn)) return *why = "not a QP of this client", EINVAL;
  return check_send_wr_handles(c, wr, sges, source, why);
}

int check_send_wr_handles(const ClientObjects& c, transport::SendWr& wr, std::span<transport::Sge> sges,
                          InlineSource source, const char** why) {
  // AH 0 names none (a UD send without one is refused by the engine).
  if (wr.ah != 0 && !c.ahs.count(wr.ah)) return *why = "not an AH of this client", EINVAL;
  if (wr.opcode == IBV_WR_BIND_MW && !c.mws.count(wr.bind.mw_rkey >> 8))
    return *why = "not a memory window of this client", EINVAL;
  if ((wr.send_flags & IBV_SEND_INLINE) && source == InlineSource::kClientMemory) {
    // The engine copies inline data from a pointer in this process: the
    // client's addresses must name its own registered memory (lkey, bounds).
    for (transport::Sge& g : sges) {
      auto m = c.mrs.find(g.lkey);
      if (m == c.mrs.end() || g.addr < m->second.iova || g.length > m->second.length ||
          g.addr - m->second.iova > m->second.length - g.length)
        return *why = "an inline SGE must lie in one of this client's MRs (lkey and bounds)", EINVAL;
      g.addr = reinterpret_cast<uint64_t>(m->second.addr + (g.addr - m->second.iova));
    }
  }
  wr.sg_list = sges;
  return 0;
}

int check_recv_wr(const ClientObjects& c, uint32_t qpn, std::optional<uint32_t> srq, const char** why) {
  if (srq) return c.srqs.count(*srq) ? 0 : (*why = "not an SRQ of this client", EINVAL);
  return c.qps.count(qpn) ? 0 : (*why = "not a QP of this client", EINVAL);
}

}  // namespace isoroce::ctrl
