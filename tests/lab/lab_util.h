// Helpers of the isoroce-lab tests: temporary files, running the CLI.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/temp_path.h"

namespace isoroce::lab::testing {

inline std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = isoroce::test::temp_path("isoroce-lab-test-", name);
  std::ofstream(path) << text;
  return path;
}

struct CmdResult {
  int status = -1;
  std::string out;
};

// Runs a command, stdout and stderr together.
inline CmdResult run_cmd(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A small lossy two-host scenario: with loss the seed changes the results.
inline const char* kLossyScenario = R"(seed = 1
duration_us = 2000
link_delay_ns = 500
[faults]
loss = 0.002
[[host]]
name = "a"
ip = "10.0.0.1"
link_gbps = 40
mtu = 1024
[[host]]
name = "b"
ip = "10.0.0.2"
link_gbps = 40
mtu = 1024
[[flow]]
name = "lat"
src = "a"
dst = "b"
verb = "write"
size = "16B"
[[flow]]
name = "bw"
src = "a"
dst = "b"
verb = "write"
size = "256KB"
depth = 4
)";

}  // namespace isoroce::lab::testing
