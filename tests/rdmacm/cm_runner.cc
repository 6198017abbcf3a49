#include "tests/rdmacm/cm_runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <sstream>
#include <thread>

namespace isoroce::test {

CmResult run_cm(const CmEndpoint& where, const std::string& cmd, int timeout_s, const std::string& env) {
  std::string full;
  if (!where.netns.empty()) full = "/usr/sbin/ip netns exec " + where.netns + " ";
  full += "env LD_PRELOAD=\"" ISOROCE_RDMACM_LIB " " ISOROCE_VERBS_LIB "\" ISOROCE_SOCKET=" + where.socket + " " + env +
          " timeout " + std::to_string(timeout_s) + " " + cmd + " 2>&1";
  CmResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(full.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::pair<CmResult, CmResult> run_cm_pair(const CmEndpoint& server, const std::string& server_cmd,
                                          const CmEndpoint& client, const std::string& client_cmd,
                                          const CmPairOptions& o) {
  const int timeout_s = o.timeout_s;
  const std::string& client_env = o.client_env;
  auto srv_future = std::async(std::launch::async, [&] {
    return run_cm(server, server_cmd, o.server_runs_forever ? o.server_timeout_s : timeout_s);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CmResult cli;
  for (int attempt = 0; attempt < 10; ++attempt) {
    cli = run_cm(client, client_cmd, timeout_s, client_env);
    if (cli.rc == 0) break;
    // Retry only while the server is not listening yet (REJ: no listener).
    const bool refused = cli.out.find("REJECTED") != std::string::npos ||
                         cli.out.find("efused") != std::string::npos ||
                         cli.out.find("UNREACHABLE") != std::string::npos;
    if (!refused) break;
    if (srv_future.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready) break;
  }
  CmResult srv = srv_future.get();
  EXPECT_EQ(cli.rc, 0) << "client: " << client_cmd << "\n" << cli.out << "\nserver:\n" << srv.out;
  EXPECT_EQ(srv.rc, o.server_runs_forever ? 124 : 0) << "server: " << server_cmd << "\n" << srv.out << "\nclient:\n" << cli.out;
  for (const CmResult* r : {&cli, &srv}) {
    std::istringstream in(r->out);
    for (std::string line; std::getline(in, line);) {
      if (line.find("isoroce-rdmacm:") == std::string::npos && line.find("isoroce-verbs:") == std::string::npos) continue;
      if (!o.allowed_complaint.empty() && line.find(o.allowed_complaint) != std::string::npos) continue;
      ADD_FAILURE() << "the library complained: " << line << "\n" << r->out;
    }
  }
  std::printf("%s: client %.2f s, server %.2f s\n", client_cmd.c_str(), cli.seconds, srv.seconds);
  return {cli, srv};
}

int count_lines(const std::string& out, const std::string& what) {
  std::istringstream in(out);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(what) != std::string::npos) ++n;
  return n;
}

}  // namespace isoroce::test
