// An application killed in the middle of a transfer hurts nobody else: while
// ib_write_bw moves 64 KB WRITEs between the two ports, both its processes get
// SIGKILL; an ibv_rc_pingpong pair running at the same time finishes cleanly,
// the daemon reclaims the dead QPs within a second, and a new pair works.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/daemon/harness.h"

extern char** environ;

namespace isoroce::test {
namespace {

// A shell command under LD_PRELOAD, started in the background; its output goes
// to out_path.
pid_t spawn(const std::string& socket, const std::string& cmd, const std::string& out_path) {
  const std::string full = "exec env LD_PRELOAD=" ISOROCE_VERBS_LIB " ISOROCE_SOCKET=" + socket + " " + cmd + " >" +
                           out_path + " 2>&1";
  std::vector<char*> argv = {const_cast<char*>("/bin/sh"), const_cast<char*>("-c"), const_cast<char*>(full.c_str()),
                             nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

int wait_exit(pid_t pid, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int st = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

std::string slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

uint64_t client_qps(DaemonProcess& d) {
  Verbs v(d.socket(), "isoroce0");
  uint64_t n = 0;
  for (const json& q : v.call({{"op", "qps"}})["qps"])
    if (q.value("class", std::string()) != "reference") ++n;
  return n;
}

uint64_t rx_bytes(DaemonProcess& d) {
  Verbs v(d.socket(), "isoroce1");
  return v.call({{"op", "stats"}})["stats"]["isoroce1"]["port"].value("rx_bytes", uint64_t{0});
}

TEST(KilledApplication, MidTransferKillHurtsNobodyElse) {
  DaemonProcess d({"--loopback"});
  ASSERT_TRUE(d.ok()) << d.log();
  const std::string tmp = "/tmp/isoroce-kill-" + std::to_string(getpid());
  // The victim: 64 KB WRITEs for 30 s (it will not live that long).
  const pid_t bw_server = spawn(d.socket(), "ib_write_bw -d isoroce1 -x 0 -p 18751 -s 65536 -D 30", tmp + ".bws");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const pid_t bw_client =
      spawn(d.socket(), "ib_write_bw -d isoroce0 -x 0 -p 18751 -s 65536 -D 30 127.0.0.1", tmp + ".bwc");
  ASSERT_GT(bw_server, 0);
  ASSERT_GT(bw_client, 0);
  // The bystander, at the same time.
  const pid_t pp_server = spawn(d.socket(), "ibv_rc_pingpong -d isoroce1 -g 0 -p 18752 -n 3000", tmp + ".pps");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const pid_t pp_client =
      spawn(d.socket(), "ibv_rc_pingpong -d isoroce0 -g 0 -p 18752 -n 3000 127.0.0.1", tmp + ".ppc");
  // Data is flowing: the receiving port's byte count grows.
  const uint64_t before = rx_bytes(d);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const uint64_t during = rx_bytes(d);
  EXPECT_GT(during, before + (16u << 20)) << "ib_write_bw was not moving data\n" << slurp(tmp + ".bwc");
  ASSERT_EQ(kill(bw_client, SIGKILL), 0);
  ASSERT_EQ(kill(bw_server, SIGKILL), 0);
  EXPECT_EQ(wait_exit(bw_client, 5000), 128 + SIGKILL);
  EXPECT_EQ(wait_exit(bw_server, 5000), 128 + SIGKILL);

  // The bystander finishes as if nothing happened.
  EXPECT_EQ(wait_exit(pp_client, 60000), 0) << slurp(tmp + ".ppc");
  EXPECT_EQ(wait_exit(pp_server, 60000), 0) << slurp(tmp + ".pps");
  EXPECT_NE(slurp(tmp + ".ppc").find("iters in"), std::string::npos) << slurp(tmp + ".ppc");

  // The dead application's QPs are gone within a second.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (client_qps(d) != 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(client_qps(d), 0u) << d.log();

  // And a new pair works.
  const pid_t s2 = spawn(d.socket(), "ibv_rc_pingpong -d isoroce1 -g 0 -p 18753 -n 500", tmp + ".s2");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const pid_t c2 = spawn(d.socket(), "ibv_rc_pingpong -d isoroce0 -g 0 -p 18753 -n 500 127.0.0.1", tmp + ".c2");
  EXPECT_EQ(wait_exit(c2, 60000), 0) << slurp(tmp + ".c2");
  EXPECT_EQ(wait_exit(s2, 60000), 0) << slurp(tmp + ".s2");
  EXPECT_EQ(d.stop(), 0) << d.log();
  for (const char* ext : {".bws", ".bwc", ".pps", ".ppc", ".s2", ".c2"}) std::remove((tmp + ext).c_str());
}

}  // namespace
}  // namespace isoroce::test
