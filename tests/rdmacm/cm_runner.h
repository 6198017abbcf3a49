// Unmodified librdmacm programs (rdmacm-utils, perftest -R) under
// LD_PRELOAD="libisoroce-rdmacm.so libisoroce-verbs.so": a server started
// first, then its client, both checked for exit status 0 and no complaint of
// either library.
#pragma once

#include <string>
#include <utility>

namespace isoroce::test {

struct CmResult {
  int rc = -1;
  std::string out;  // stdout and stderr
  double seconds = 0;
};

// Where a program runs: its daemon's socket and network namespace ("": this one).
struct CmEndpoint {
  std::string socket, netns;
};

// `cmd` with both libraries preloaded, ISOROCE_SOCKET set, `env` (VAR=VALUE
// ...) added, inside netns if given, killed after timeout_s.
CmResult run_cm(const CmEndpoint& where, const std::string& cmd, int timeout_s = 30, const std::string& env = "");

// How a pair is judged beyond the defaults.
struct CmPairOptions {
  int timeout_s = 30;
  std::string client_env;     // VAR=VALUE for the client
  // A server that never exits by itself (cmtime's): killed after server_timeout_s,
  // and that (status 124) is its success.
  bool server_runs_forever = false;
  int server_timeout_s = 4;
  // A library line containing this is expected (e.g. an EBUSY the program ignores).
  std::string allowed_complaint;
};

// The server command, then (after it listens: the client is retried while
// it is refused or finds nobody) the client command. Expects exit status 0
// from both and no "isoroce-rdmacm:"/"isoroce-verbs:" line.
std::pair<CmResult, CmResult> run_cm_pair(const CmEndpoint& server, const std::string& server_cmd,
                                          const CmEndpoint& client, const std::string& client_cmd,
                                          const CmPairOptions& o = {});

// How many lines of out contain what.
int count_lines(const std::string& out, const std::string& what);

}  // namespace isoroce::test
