// A client's handles on the device it opened, and the one place where the
// handles a client names are checked against them, for both transports: the
// control socket (post_send, post_recv, post_srq_recv) and the shared-memory
// queues the pump moves (ctrl/shm_pump.h). DESIGN.md's trust boundary: every
// handle a client names is checked against that client at one place.
//
// Threads: a client's ClientObjects is changed only inside an executor call
// (on the device's worker, while the control thread waits for it), so the
// pump may read it on the worker and the control thread between calls.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>

#include "ctrl/mr_map.h"
#include "transport/engine/engine.h"

namespace isoroce::ctrl {

struct ClientObjects {
  std::set<uint32_t> pds, cqs, srqs, ahs, qps;
  std::set<uint32_t> mws;  // memory windows by index (R_Key >> 8: binds change the low 8 bits)
  std::map<uint32_t, Mapping> mrs;  // lkey -> the daemon's mapping of it
  // The client took the worker's doorbell at "open" (ctrl/shm_abi.h): it
  // signals its posts, so its rings need no polling from an idle worker.
  bool doorbell = false;
};

// The handle under `key` in j if it is one of `set`'s (a client's own), else nullopt.
std::optional<uint32_t> own_handle(const std::set<uint32_t>& set, const nlohmann::json& j, const char* key);

// Where the addresses of a send WR's inline SGEs are: the client's
// registered memory named by iova and lkey (a socket post_send; translated
// here to the daemon's mapping), or bytes the daemon holds already (the
// inline data of a shared-memory WQE, copied out of the ring).
enum class InlineSource { kClientMemory, kDaemon };

// Checks a send WR of QP qpn against the client c: the QP and any AH must be
// c's; inline SGEs from client memory must lie in one of c's MRs and are
// rewritten to the daemon's addresses. Other SGEs keep the client's lkeys:
// the engine checks those against the QP's PD, and a PD is one client's.
// 0, or EINVAL with *why.
int check_send_wr(const ClientObjects& c, uint32_t qpn, transport::SendWr& wr, std::span<transport::Sge> sges,
                  InlineSource source, const char** why);
// The same checks but the QP's: for a caller that checked the QP once for a
// burst of its WRs (ShmPump::pump_send).
int check_send_wr_handles(const ClientObjects& c, transport::SendWr& wr, std::span<transport::Sge> sges,
                          InlineSource source, const char** why);

// A receive WR for QP qpn, or for SRQ srq when srq is set: the queue must be c's.
int check_recv_wr(const ClientObjects& c, uint32_t qpn, std::optional<uint32_t> srq, const char** why);

}  // namespace isoroce::ctrl
