#include "tests/verbs_compat/tool_runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <sstream>
#include <thread>
#include <vector>

namespace isoroce::test {

ToolResult run_tool(const std::string& socket, const std::string& cmd, const std::string& netns, int timeout_s) {
  std::string full;
  if (!netns.empty()) full = "/usr/sbin/ip netns exec " + netns + " env ";
  full += "LD_PRELOAD=" ISOROCE_VERBS_LIB " ISOROCE_SOCKET=" + socket + " timeout " + std::to_string(timeout_s) +
          " " + cmd + " 2>&1";
  ToolResult r;
  FILE* p = popen(full.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::pair<ToolResult, ToolResult> run_pair(const Endpoint& server, const Endpoint& client,
                                           const std::string& server_host, const std::string& prog,
                                           const std::string& args, const std::string& gid_flag,
                                           const std::string& summary, int timeout_s) {
  static int port = 18600;
  const std::string common = " " + gid_flag + " -p " + std::to_string(++port) + " " + args;
  auto srv_future = std::async(std::launch::async, [&] {
    return run_tool(server.socket, prog + " -d " + server.device + common, server.netns, timeout_s);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ToolResult cli;
  for (int attempt = 0; attempt < 10; ++attempt) {
    cli = run_tool(client.socket, prog + " -d " + client.device + common + " " + server_host, client.netns, timeout_s);
    // Retry only while the server is not listening yet ("Couldn't connect", "Connection refused").
    if (cli.rc == 0 || cli.out.find("onnect") == std::string::npos) break;
    if (srv_future.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready) break;
  }
  ToolResult srv = srv_future.get();
  EXPECT_EQ(cli.rc, 0) << "client: " << prog << common << "\n" << cli.out << "\nserver:\n" << srv.out;
  EXPECT_EQ(srv.rc, 0) << "server: " << prog << common << "\n" << srv.out << "\nclient:\n" << cli.out;
  EXPECT_NE(cli.out.find(summary), std::string::npos) << cli.out;
  for (const ToolResult* r : {&cli, &srv}) {
    EXPECT_EQ(r->out.find("isoroce-verbs:"), std::string::npos) << "the library complained:\n" << r->out;
  }
  return {cli, srv};
}

void expect_pingpong(const std::pair<ToolResult, ToolResult>& r, const std::string& client_gid,
                     const std::string& server_gid) {
  const auto& [cli, srv] = r;
  EXPECT_NE(cli.out.find("bytes in"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("iters in"), std::string::npos) << cli.out;
  EXPECT_NE(srv.out.find("iters in"), std::string::npos) << srv.out;
  EXPECT_NE(cli.out.find("local address:  LID 0x0000"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("GID " + client_gid + "\n"), std::string::npos) << cli.out;
  EXPECT_NE(srv.out.find("GID " + server_gid + "\n"), std::string::npos) << srv.out;
  // Each learnt the other's GID over TCP.
  EXPECT_NE(cli.out.find("remote address: LID 0x0000"), std::string::npos) << cli.out;
  EXPECT_NE(srv.out.find("GID " + client_gid + "\n"), std::string::npos) << srv.out;
}

void expect_perftest_result(const ToolResult& r, int iters) {
  const size_t header = r.out.find("#bytes");
  ASSERT_NE(header, std::string::npos) << r.out;
  const size_t row = r.out.find('\n', header);
  ASSERT_NE(row, std::string::npos) << r.out;
  std::istringstream in(r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1));
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  ASSERT_GE(v.size(), 3u) << "no result row under the header:\n" << r.out;
  EXPECT_GT(v[0], 0) << "message size\n" << r.out;
  EXPECT_EQ(v[1], iters) << "iterations\n" << r.out;
  // Bandwidth tests: peak, average, rate (the passive side's peak is 0).
  // Latency tests: min, max, typical, average, stdev, percentiles.
  const bool bw = r.out.find("BW average") != std::string::npos;
  for (size_t i = bw ? 3 : 2; i < v.size(); ++i) {
    if (!bw && i == 6) continue;  // the standard deviation may be 0
    EXPECT_GT(v[i], 0) << "column " << i << " of the result row\n" << r.out;
  }
}

}  // namespace isoroce::test
