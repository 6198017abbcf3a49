// The real daemon at its trust boundary (docs/security.md): a request that
// nests 70,000 deep, a client that never reads its replies, and an
// unprivileged user (a forked child that drops to nobody) trying to steer
// root's QP and the device's policy.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

// A connection to the daemon that sends raw text and may stop reading.
int raw_connect(const std::string& path) {
  std::string error;
  auto c = ctrl::Client::connect(path, &error);
  return c ? dup(c->fd()) : -1;
}

TEST(Hardening, A70000DeepIdIsRefusedAndTheDaemonCarriesOn) {
  DaemonProcess d({"--loopback"});
  ASSERT_TRUE(d.ok()) << d.log();
  const int fd = raw_connect(d.socket());
  ASSERT_GE(fd, 0);
  const std::string deep = "{\"op\":\"hello\",\"id\":" + std::string(70000, '[') + std::string(70000, ']') + "}";
  ASSERT_TRUE(ctrl::send_message(fd, deep));
  std::string text;
  std::vector<int> fds;
  ASSERT_EQ(ctrl::recv_message(fd, &text, &fds), ctrl::RecvStatus::kOk) << d.log();
  const json reply = json::parse(text);
  EXPECT_EQ(reply["errno"], EPROTO) << text;
  close(fd);
  std::string error;
  auto c = ctrl::Client::connect(d.socket(), &error);
  ASSERT_NE(c, nullptr) << error;
  EXPECT_TRUE(c->call({{"op", "hello"}})["ok"]) << d.log();
  EXPECT_EQ(d.stop(), 0);
}

TEST(Hardening, AClientThatNeverReadsIsDisconnectedAndOthersAreServed) {
  DaemonProcess d({"--loopback"});
  ASSERT_TRUE(d.ok()) << d.log();
  const int greedy = raw_connect(d.socket());
  ASSERT_GE(greedy, 0);
  // Requests, never a read, until the socket takes no more (or the daemon hangs up).
  const std::string hello = "{\"op\":\"devices\"}";
  int sent = 0;
  for (int stalls = 0; sent < 20000 && stalls < 50;) {
    if (send(greedy, hello.data(), hello.size(), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
      ++sent;
      stalls = 0;
    } else if (errno == EAGAIN) {
      ++stalls;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    } else {
      break;  // disconnected
    }
  }
  EXPECT_GT(sent, 64);
  // Another client is answered within a few seconds, not stuck behind the first.
  std::string error;
  auto c = ctrl::Client::connect(d.socket(), &error);
  ASSERT_NE(c, nullptr) << error;
  timeval tv{5, 0};
  setsockopt(c->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  json r = c->call({{"op", "hello"}});
  EXPECT_TRUE(r["ok"]) << r.dump();
  EXPECT_NE(d.log().find("reads no replies"), std::string::npos) << d.log();
  close(greedy);
  EXPECT_EQ(d.stop(), 0);
}

TEST(Hardening, AnUnprivilegedUserCannotSteerRootsQpOrTheDevice) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another user";
  DaemonProcess d({"--loopback"});
  ASSERT_TRUE(d.ok()) << d.log();
  Verbs root(d.socket(), "isoroce0");
  ASSERT_TRUE(root.ok());
  const uint32_t qpn = root.create_qp(root.create_cq());
  const pid_t child = fork();
  if (child == 0) {
    // nobody: every refusal is an exit code the parent reads.
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    std::string error;
    auto c = ctrl::Client::connect(d.socket(), &error);
    if (!c) _exit(11);
    if (c->call({{"op", "set_rate"}, {"qpn", qpn}, {"bps", 8000}})["errno"] != EPERM) _exit(12);
    if (c->call({{"op", "set_class"}, {"qpn", qpn}, {"class", "latency"}})["errno"] != EPERM) _exit(13);
    if (c->call({{"op", "set_policy"}, {"device", "isoroce1"}, {"policy", "tassel"}})["errno"] != EPERM) _exit(14);
    if (!c->call({{"op", "qps"}})["qps"].empty()) _exit(15);
    if (c->call({{"op", "qp"}, {"qpn", qpn}})["errno"] != EPERM) _exit(16);
    // Its own QP it steers.
    if (!c->call({{"op", "open"}, {"device", "isoroce0"}})["ok"]) _exit(17);
    const json pd = c->call({{"op", "alloc_pd"}})["pd"];
    const json cq = c->call({{"op", "create_cq"}, {"cqe", 16}})["cq"];
    const json own = c->call({{"op", "create_qp"}, {"pd", pd}, {"send_cq", cq}, {"recv_cq", cq}})["qpn"];
    if (!c->call({{"op", "set_rate"}, {"qpn", own}, {"bps", 1000000}})["ok"]) _exit(18);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the unprivileged client's step that failed: " << WEXITSTATUS(status);
  // Root still steers it, and the rate stayed untouched by the other user.
  json q = root.call({{"op", "qp"}, {"qpn", qpn}});
  EXPECT_EQ(q["qp"]["rate_bps"], 0) << q.dump();
  EXPECT_TRUE(root.call({{"op", "set_rate"}, {"qpn", qpn}, {"bps", 8000}})["ok"]);
  EXPECT_EQ(d.stop(), 0);
}

TEST(Hardening, PerClientLimitsFromTheCommandLineRefuseAtTheVerb) {
  DaemonProcess d({"--loopback", "--limit", "max_cqs=20", "--limit", "max_cqe=1024"});
  ASSERT_TRUE(d.ok()) << d.log();
  Verbs a(d.socket(), "isoroce0"), b(d.socket(), "isoroce0");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.call({{"op", "create_cq"}, {"cqe", 1025}})["errno"], EINVAL);
  int made = 0;
  json r;
  for (; made < 100; ++made) {
    r = a.call({{"op", "create_cq"}, {"cqe", 16}});
    if (!r["ok"]) break;
  }
  EXPECT_EQ(made, 20);
  EXPECT_EQ(r["errno"], ENOMEM);
  EXPECT_NE(r.value("error", "").find("limits.max_cqs"), std::string::npos) << r.dump();
  EXPECT_TRUE(b.call({{"op", "create_cq"}, {"cqe", 16}})["ok"]);  // each client its own
  EXPECT_EQ(d.stop(), 0);
}

}  // namespace
}  // namespace isoroce::test
