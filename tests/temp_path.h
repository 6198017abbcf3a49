// Paths under the temporary directory for one test process, removed when the
// process exits if none of its tests failed (a failed test's files stay: its
// messages name them). ctest runs each test in a process of its own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace isoroce::test {

class TempPaths {
 public:
  static TempPaths& get() {
    static TempPaths paths;
    return paths;
  }
  // PREFIX + this process's id + "-" + NAME in the temporary directory.
  std::string add(const std::string& prefix, const std::string& name) {
    std::string p = (std::filesystem::temp_directory_path() / (prefix + std::to_string(getpid()) + "-" + name)).string();
    paths_.push_back(p);
    return p;
  }
  ~TempPaths() {
    if (::testing::UnitTest::GetInstance()->failed_test_count() != 0) return;
    std::error_code ec;
    for (const std::string& p : paths_) std::filesystem::remove_all(p, ec);
  }

 private:
  TempPaths() = default;
  std::vector<std::string> paths_;
};

inline std::string temp_path(const std::string& prefix, const std::string& name) {
  return TempPaths::get().add(prefix, name);
}

}  // namespace isoroce::test
