// A test suite that shares one isoroced: the suite's SetUpTestSuite() calls
// start() with the daemon's flags; every test checks it came up, and after the
// suite's last test it is stopped and must exit with status 0.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/daemon/harness.h"

namespace isoroce::test {

class DaemonSuite : public ::testing::Test {
 protected:
  static void start(std::vector<std::string> args) { daemon_ = new DaemonProcess(std::move(args)); }
  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(), 0) << daemon_->log();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->log(); }

  // One slot for every suite of a binary: suites run one after another.
  inline static DaemonProcess* daemon_ = nullptr;
};

}  // namespace isoroce::test
