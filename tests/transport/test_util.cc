#include "tests/transport/test_util.h"

#include "tests/temp_path.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <sys/wait.h>

namespace isoroce::test {

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool have_program(const std::string& name) {
  return run_command("command -v " + name + " >/dev/null 2>&1").status == 0;
}

std::string temp_path(const std::string& name) {
  // One directory per process, removed at exit unless a test failed (temp_path.h).
  static const std::string dir = temp_path("isoroce-test-", "files");
  std::filesystem::create_directories(dir);
  return (std::filesystem::path(dir) / name).string();
}

std::vector<std::string> capture_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(ISOROCE_CAPTURES_DIR)) {
    if (e.path().extension() == ".pcap") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace isoroce::test
