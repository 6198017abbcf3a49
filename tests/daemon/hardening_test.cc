// The real daemon at its trust boundary (docs/security.md): a request that
// nests 70,000 deep, a client that never reads its replies, and an
// unprivileged user (a forked child that drops to nobody) trying to steer
// root's QP and the device's policy.
#include <gtest/gtest.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
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

// EAL's runtime directory (config, fbarray_* maps of 10+ MB with --no-huge)
// is removed when the daemon exits: one left per run filled this project's disk.
TEST(Hardening, AStoppedDaemonLeavesNoRuntimeDirectoryBehind) {
  DaemonProcess d({"--loopback"});
  ASSERT_TRUE(d.ok()) << d.log();
  const std::string dir = "/var/run/dpdk/" + d.prefix();
  struct stat st{};
  ASSERT_EQ(stat((dir + "/config").c_str(), &st), 0) << dir << " while the daemon runs";
  ASSERT_EQ(d.stop(), 0) << d.log();
  EXPECT_NE(stat(dir.c_str(), &st), 0) << dir << " is still there after the daemon exited";
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
  // A socket everyone may connect to: what each client may do is the point.
  DaemonProcess d({"--loopback", "--socket-mode", "0666"});
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

// Who may connect is the socket's group and mode (issue 18): a user in the
// group gets in, one outside it is refused by the kernel before the daemon
// sees anything.
TEST(SocketAccess, TheGroupGetsInAndOthersAreRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to other users";
  DaemonProcess d({"--loopback", "--socket-group", "4242", "--socket-mode", "0660"});
  ASSERT_TRUE(d.ok()) << d.log();
  struct stat st{};
  ASSERT_EQ(stat(d.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, 4242u);
  auto try_as = [&](gid_t gid) {
    const pid_t child = fork();
    if (child == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(65534) != 0) _exit(10);
      std::string error;
      auto c = ctrl::Client::connect(d.socket(), &error);
      if (!c) _exit(error.find("ermission") != std::string::npos ? 20 : 21);
      _exit(c->call({{"op", "hello"}})["ok"] ? 0 : 22);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(try_as(4242), 0) << "a member of the socket's group is refused";
  EXPECT_EQ(try_as(65534), 20) << "a user outside the group got in (or failed otherwise)";
  EXPECT_EQ(d.stop(), 0);
}

TEST(SocketAccess, BadSettingsAreNamed) {
  DaemonProcess bad_mode({"--loopback", "--socket-mode", "0999"});
  EXPECT_FALSE(bad_mode.ok());
  EXPECT_NE(bad_mode.log().find("--socket-mode"), std::string::npos) << bad_mode.log();
  DaemonProcess bad_group({"--loopback", "--socket-group", "no-such-group-xyz"});
  EXPECT_FALSE(bad_group.ok());
  EXPECT_NE(bad_group.log().find("socket_group"), std::string::npos) << bad_group.log();
}

// SIGHUP reloads the scheduler settings of the configuration file on devices
// no client has open, and leaves a device in use (and its QPs) alone.
TEST(Reload, SighupAppliesThePolicyWhereNoClientIsAndKeepsClientsQps) {
  const std::string conf = "/tmp/isoroce-reload-" + std::to_string(getpid()) + ".toml";
  auto write = [&](const std::string& policy) {
    std::ofstream(conf) << "loopback = true\npolicy = \"" << policy << "\"\n";
  };
  write("fifo");
  DaemonProcess d({"--config", conf});
  ASSERT_TRUE(d.ok()) << d.log();
  Verbs user(d.socket(), "isoroce0");  // isoroce0 is in use from here on
  ASSERT_TRUE(user.ok());
  const uint32_t qpn = user.create_qp(user.create_cq());
  write("tassel");
  kill(d.pid(), SIGHUP);
  auto policy_of = [&](const std::string& dev) {
    for (int i = 0; i < 50; ++i) {
      const json r = user.call({{"op", "devices"}});
      for (const json& v : r["devices"])
        if (v["name"] == dev && (v["policy"] == "tassel" || i == 49)) return v["policy"].get<std::string>();
      usleep(100'000);
    }
    return std::string("?");
  };
  EXPECT_EQ(policy_of("isoroce1"), "tassel") << d.log();
  EXPECT_EQ(policy_of("isoroce0"), "fifo") << d.log();
  EXPECT_NE(d.log().find("isoroce0: 1 client(s) have it open"), std::string::npos) << d.log();
  EXPECT_TRUE(user.call({{"op", "qp"}, {"qpn", qpn}})["ok"]) << "the client's QP survived";
  // A broken file changes nothing and says why.
  std::ofstream(conf) << "policy = \"round-robin\"\n";
  kill(d.pid(), SIGHUP);
  usleep(500'000);
  EXPECT_NE(d.log().find("kept the running settings"), std::string::npos) << d.log();
  EXPECT_EQ(d.stop(), 0);
  unlink(conf.c_str());
}

}  // namespace
}  // namespace isoroce::test
