// Unmodified RDMA programs (rdma-core's examples, perftest) under
// LD_PRELOAD=libisoroce-verbs.so, alone or as a server/client pair that
// exchanges QP information over TCP: used by tools_test.cc (one daemon,
// two ports) and netns_tools_test.cc (two daemons in two namespaces).
#pragma once

#include <string>
#include <utility>

namespace isoroce::test {

struct ToolResult {
  int rc = -1;
  std::string out;  // stdout and stderr
};

// Where a program runs: its daemon's socket, the device it opens, and the
// network namespace it runs in ("" for this one).
struct Endpoint {
  std::string socket, device, netns;
};

// `cmd` (a shell command line) with the library preloaded, ISOROCE_SOCKET set,
// inside `netns` if given, killed after timeout_s.
ToolResult run_tool(const std::string& socket, const std::string& cmd, const std::string& netns = "",
                    int timeout_s = 60);

// `prog -d DEV gid_flag -p PORT args` as the server on `server`, then as the
// client on `client` connecting to server_host (retried while the server is
// not listening yet). Expects, for both, exit status 0 and no `isoroce-verbs:`
// complaint, and `summary` in the client's output (perftest's passive side
// prints no table for READ and atomics). gid_flag picks GID 0 ("-g 0" for the
// examples, "-x 0" for perftest).
std::pair<ToolResult, ToolResult> run_pair(const Endpoint& server, const Endpoint& client,
                                           const std::string& server_host, const std::string& prog,
                                           const std::string& args, const std::string& gid_flag,
                                           const std::string& summary, int timeout_s = 60);

// An ibv_*_pingpong pair's checks on top of run_pair's: both report their
// iterations, the client its bandwidth, and each its own GID (client_gid,
// server_gid: "::ffff:10.0.0.1").
void expect_pingpong(const std::pair<ToolResult, ToolResult>& r, const std::string& client_gid,
                     const std::string& server_gid);

// perftest's result table: the row under the "#bytes" header has `iters`
// iterations and only positive numbers after them (bandwidth, message rate or
// latencies; a passive side's peak may be 0 and is not checked).
void expect_perftest_result(const ToolResult& r, int iters);

}  // namespace isoroce::test
