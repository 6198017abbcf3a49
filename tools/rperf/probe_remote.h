// isoroce-rperf-probe's responder in another process (tools/rperf/probe.cc).
#pragma once

#include "tools/rperf/probe_verbs.h"

namespace isoroce::tools::rperf_probe {

// The responder in another process (--serve PORT on P's daemon, reached by
// --connect HOST:PORT), so that P runs on another daemon's worker. One text
// line each way over TCP, as perftest exchanges QP numbers:
//   client: WIRE_QPN BG_QPN BG_BYTES SIZE GID      server: WIRE_QPN BG_QPN BG_ADDR BG_RKEY GID
// (GID as 32 hex digits; BG_QPN 0: no background flow).
struct Remote {
  ibv_gid gid{};
  uint32_t wire_qpn = 0, bg_qpn = 0, bg_rkey = 0, bg_bytes = 0, size = 0;
  uint64_t bg_addr = 0;
};

// The client's side of the exchange: connects to HOST:PORT (retrying for 10 s
// while the server is not listening yet), sends ours, returns the server's
// and the connection (closing it ends the server).
Remote exchange(const std::string& host_port, const Remote& ours, int* fd_out);

// --serve: P's side for one client (the wire responder, the background's
// target), until the client hangs up. The exit status.
int serve(const Options& o);

}  // namespace isoroce::tools::rperf_probe
