// isoroced --policy rnic: the presets and parameters from flags and from the [rnic]
// table reach the configuration (--check prints them); bad ones name themselves.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

std::string check(const std::string& args, int* status) {
  FILE* f = popen((daemon_path() + " --check " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(RnicConfig, PresetFromFlagsAndFile) {
  int st;
  std::string out = check("--loopback --policy rnic --rnic preset=cx4-roce", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("policy rnic"), std::string::npos) << out;
  EXPECT_NE(out.find("rnic: batch_packets 2, pipeline_packets 22, pipeline_jitter_packets 4"), std::string::npos)
      << out;
  // A flag after the preset overrides one of its parameters.
  out = check("--loopback --policy rnic --rnic preset=t6-iwarp --rnic batch_packets=3", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("batch_packets 3, pipeline_packets 0, pipeline_jitter_packets 0, message_burst_bytes 980000"),
            std::string::npos)
      << out;
  const std::string path = "/tmp/isoroce-rnic-" + std::to_string(getpid()) + ".toml";
  FILE* f = fopen(path.c_str(), "w");
  fputs("loopback = true\npolicy = \"rnic\"\n[rnic]\npreset = \"fifo\"\npipeline_packets = 5\n", f);
  fclose(f);
  out = check("--config " + path, &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("pipeline_packets 5, pipeline_jitter_packets 0, message_burst_bytes whole"), std::string::npos)
      << out;
  for (const auto& [table, says] : std::vector<std::pair<std::string, std::string>>{
           {"[rnic]\npreset = \"cx9\"\n", "rnic.preset: 'cx9' is not a preset"},
           {"[rnic]\nbatch_packets = 0\n", "rnic.batch_packets: unknown parameter or bad value '0'"},
           {"rnic = 1\n", "rnic: must be a table"}}) {
    f = fopen(path.c_str(), "w");
    fputs(("loopback = true\npolicy = \"rnic\"\n" + table).c_str(), f);
    fclose(f);
    out = check("--config " + path, &st);
    EXPECT_NE(st, 0) << table;
    EXPECT_NE(out.find(says), std::string::npos) << out;
  }
  unlink(path.c_str());
  out = check("--loopback --policy rnic --rnic nonsense=1", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("--rnic nonsense=1"), std::string::npos) << out;
  out = check("--loopback --policy rnic --dcqcn enabled=true", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("rate-limiting policy"), std::string::npos) << out;
}

}  // namespace
}  // namespace isoroce::test
