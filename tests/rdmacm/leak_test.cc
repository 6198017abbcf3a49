// 1000 sequential connect/transfer/disconnect cycles, then 200 connections
// up at once, through libisoroce-rdmacm's endpoint API and the rdma_verbs.h
// helpers (rdma_reg_msgs, rdma_post_send/recv, rdma_get_*_comp), against one
// `isoroced --loopback`: afterwards the daemon has as many QPs, rdma_cm ids
// and descriptors as before, about the same RSS, and so does this process.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ctrl/client.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

constexpr int kMsg = 64;

int count_fds(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - (pid == getpid() ? 1 : 0);  // our own opendir
}

long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

struct DaemonCounts {
  long rss_kb = 0;
  int fds = 0;
  size_t qps = 0, cm_ids = 0;
};

DaemonCounts counts(const DaemonProcess& d) {
  DaemonCounts c;
  c.rss_kb = rss_kb(d.pid());
  c.fds = count_fds(d.pid());
  std::string err;
  auto cl = ctrl::Client::connect(d.socket(), &err);
  if (cl != nullptr) {
    json q = cl->call({{"op", "qps"}});
    if (q.contains("qps") && q["qps"].is_array()) c.qps = q["qps"].size();
    json ids = cl->call({{"op", "cm_ids"}});
    if (ids.contains("cm_ids")) c.cm_ids = ids["cm_ids"].size();
  }
  return c;
}

class CmLeak : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    // A worker that sleeps at most 50 us when idle (default 1 ms): each of the
    // cycle's ~40 daemon calls that reach an engine waits for the worker.
    const std::string conf = "/tmp/isoroce-test-rcm-leak-" + std::to_string(getpid()) + ".toml";
    FILE* f = std::fopen(conf.c_str(), "w");
    if (f != nullptr) {
      std::fputs("loopback = true\nidle_sleep_us = 50\n", f);
      std::fclose(f);
    }
    start({"--config", conf});
    std::remove(conf.c_str());
    setenv("ISOROCE_SOCKET", daemon_->socket().c_str(), 1);
  }
  void TearDown() override {
    if (HasFailure()) std::printf("daemon log:\n%s\n", daemon_->log().c_str());
  }
};

ibv_qp_init_attr qp_attr() {
  ibv_qp_init_attr a{};
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = 0;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 1;
  return a;
}

// The passive side: `n` connections; each receives one message and answers
// it. With hold, all stay up until the client has all n, then each waits for
// its DISCONNECTED; otherwise each waits for it at once. false on any failure.
bool serve(rdma_cm_id* listener, int n, bool hold, std::string* why) {
  struct Conn {
    rdma_cm_id* id;
    std::vector<uint8_t> buf;
    ibv_mr* mr;
  };
  std::vector<Conn> up;
  auto finish = [&](Conn& c) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(c.id->channel, &e) != 0) return *why = "get_cm_event: " + std::string(strerror(errno)), false;
    const bool ok = e->event == RDMA_CM_EVENT_DISCONNECTED;
    if (!ok) *why = std::string("expected DISCONNECTED, got ") + rdma_event_str(e->event);
    rdma_ack_cm_event(e);
    rdma_dereg_mr(c.mr);
    rdma_destroy_ep(c.id);
    return ok;
  };
  for (int i = 0; i < n; ++i) {
    Conn c;
    if (rdma_get_request(listener, &c.id) != 0) return *why = "get_request: " + std::string(strerror(errno)), false;
    c.buf.assign(2 * kMsg, 0);
    c.mr = rdma_reg_msgs(c.id, c.buf.data(), c.buf.size());
    ibv_wc wc{};
    if (!c.mr || rdma_post_recv(c.id, nullptr, c.buf.data(), kMsg, c.mr) != 0 || rdma_accept(c.id, nullptr) != 0 ||
        rdma_get_recv_comp(c.id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
      return *why = "accept/receive " + std::to_string(i) + ": " + strerror(errno), false;
    std::memcpy(c.buf.data() + kMsg, c.buf.data(), kMsg);
    c.buf[kMsg] ^= 0xff;
    if (rdma_post_send(c.id, nullptr, c.buf.data() + kMsg, kMsg, c.mr, 0) != 0 || rdma_get_send_comp(c.id, &wc) <= 0 ||
        wc.status != IBV_WC_SUCCESS)
      return *why = "answer " + std::to_string(i) + ": " + strerror(errno), false;
    if (hold) up.push_back(c);
    else if (!finish(c)) return false;
  }
  for (Conn& c : up)
    if (!finish(c)) return false;
  return true;
}

struct Client {
  rdma_cm_id* id = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(2 * kMsg);
  ibv_mr* mr = nullptr;
};

// Connects, sends one message with `tag`, checks the answer. false and *why.
bool connect_once(rdma_addrinfo* res, int tag, Client* c, std::string* why) {
  ibv_qp_init_attr a = qp_attr();
  if (rdma_create_ep(&c->id, res, nullptr, &a) != 0) return *why = "create_ep: " + std::string(strerror(errno)), false;
  c->mr = rdma_reg_msgs(c->id, c->buf.data(), c->buf.size());
  std::memset(c->buf.data(), tag & 0xff, kMsg);
  ibv_wc wc{};
  if (!c->mr || rdma_post_recv(c->id, nullptr, c->buf.data() + kMsg, kMsg, c->mr) != 0 ||
      rdma_connect(c->id, nullptr) != 0)
    return *why = "connect " + std::to_string(tag) + ": " + strerror(errno), false;
  if (rdma_post_send(c->id, nullptr, c->buf.data(), kMsg, c->mr, 0) != 0 || rdma_get_send_comp(c->id, &wc) <= 0 ||
      wc.status != IBV_WC_SUCCESS || rdma_get_recv_comp(c->id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS)
    return *why = "transfer " + std::to_string(tag) + ": " + strerror(errno), false;
  if (c->buf[kMsg] != static_cast<uint8_t>((tag & 0xff) ^ 0xff) || c->buf[kMsg + 1] != (tag & 0xff))
    return *why = "wrong answer to " + std::to_string(tag), false;
  return true;
}

void disconnect(Client* c) {
  rdma_disconnect(c->id);
  if (c->mr) rdma_dereg_mr(c->mr);
  rdma_destroy_ep(c->id);
  c->id = nullptr;
}

TEST_F(CmLeak, ThousandCyclesAndTwoHundredConcurrentConnectionsLeakNothing) {
  rdma_addrinfo hints{};
  rdma_addrinfo* passive = nullptr;
  rdma_addrinfo* active = nullptr;
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  ASSERT_EQ(rdma_getaddrinfo("10.0.0.2", "19400", &hints, &passive), 0);
  hints.ai_flags = 0;
  ASSERT_EQ(rdma_getaddrinfo("10.0.0.2", "19400", &hints, &active), 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, "10.0.0.1", &src.sin_addr);
  active->ai_src_addr = static_cast<sockaddr*>(calloc(1, sizeof(sockaddr_storage)));
  std::memcpy(active->ai_src_addr, &src, sizeof src);
  active->ai_src_len = sizeof src;
  rdma_cm_id* listener = nullptr;
  ibv_qp_init_attr a = qp_attr();
  ASSERT_EQ(rdma_create_ep(&listener, passive, nullptr, &a), 0) << strerror(errno);
  ASSERT_EQ(rdma_listen(listener, 256), 0);

  auto round = [&](int cycles, int concurrent) {
    std::string server_why, client_why;
    bool server_ok = false;
    std::thread server([&] {
      server_ok = serve(listener, cycles, false, &server_why) && serve(listener, concurrent, true, &server_why);
    });
    bool ok = true;
    for (int i = 0; i < cycles && ok; ++i) {
      Client c;
      ok = connect_once(active, i, &c, &client_why);
      if (c.id) disconnect(&c);
    }
    std::vector<Client> many(concurrent);
    for (int i = 0; i < concurrent && ok; ++i) ok = connect_once(active, i, &many[i], &client_why);
    for (Client& c : many)
      if (c.id) disconnect(&c);
    server.join();
    EXPECT_TRUE(ok) << client_why;
    EXPECT_TRUE(server_ok) << server_why;
  };
  // Warm up (the CM agents' QP1s, the verbs contexts, allocator pools), then measure.
  round(5, 5);
  if (HasFailure()) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the warm-up's connections close
  const DaemonCounts before = counts(*daemon_);
  const int my_fds = count_fds(getpid());
  const long my_rss = rss_kb(getpid());
  const auto t0 = std::chrono::steady_clock::now();
  round(1000, 200);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // timewait (100 ms) ends
  const DaemonCounts after = counts(*daemon_);
  std::printf("1000 cycles + 200 concurrent in %.2f s; daemon RSS %ld -> %ld kB, fds %d -> %d, QPs %zu -> %zu, "
              "rdma_cm ids %zu -> %zu; this process fds %d -> %d, RSS %ld -> %ld kB\n",
              secs, before.rss_kb, after.rss_kb, before.fds, after.fds, before.qps, after.qps, before.cm_ids,
              after.cm_ids, my_fds, count_fds(getpid()), my_rss, rss_kb(getpid()));
  EXPECT_EQ(after.qps, before.qps);
  EXPECT_EQ(after.cm_ids, before.cm_ids);
  EXPECT_EQ(after.fds, before.fds);
  EXPECT_LE(after.rss_kb, before.rss_kb + 16 * 1024) << "the daemon's RSS grew by more than 16 MiB";
  EXPECT_EQ(count_fds(getpid()), my_fds);
  rdma_destroy_ep(listener);
  rdma_freeaddrinfo(passive);
  rdma_freeaddrinfo(active);
}

}  // namespace
}  // namespace isoroce::test
