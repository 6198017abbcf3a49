// Over ~600 lines: one loopback daemon and its client helpers serve every
// case here; the cases are short and grouped by verb.
// isoroced with --loopback: two devices joined by an in-process net_ring pair.
// Every verb across the ports with every byte checked, UD, isolation between
// clients, reclaim after SIGKILL, telemetry, bad configuration.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <thread>

#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC;

void fill(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

class Loopback : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    start({"--loopback", "--policy", "tassel", "--link-gbps", "10", "--dcqcn", "enabled=true"});
  }

  // A connected RC pair: a on isoroce0, b on isoroce1.
  struct Pair {
    std::unique_ptr<Verbs> a, b;
    uint32_t cq_a = 0, cq_b = 0, qp_a = 0, qp_b = 0;
    Buffer *buf_a = nullptr, *buf_b = nullptr;
  };
  Pair make_pair(uint64_t buf_len = 1 << 20) {
    Pair p;
    p.a = std::make_unique<Verbs>(daemon_->socket(), "isoroce0");
    p.b = std::make_unique<Verbs>(daemon_->socket(), "isoroce1");
    EXPECT_TRUE(p.a->ok() && p.b->ok());
    p.cq_a = p.a->create_cq();
    p.cq_b = p.b->create_cq();
    p.qp_a = p.a->create_qp(p.cq_a);
    p.qp_b = p.b->create_qp(p.cq_b);
    p.buf_a = p.a->reg(buf_len, kAll);
    p.buf_b = p.b->reg(buf_len, kAll);
    EXPECT_TRUE(p.qp_a && p.qp_b && p.buf_a && p.buf_b);
    EXPECT_TRUE(p.a->connect_rc(p.qp_a, "10.0.0.2", p.qp_b, 100, 5000)["ok"].get<bool>());
    EXPECT_TRUE(p.b->connect_rc(p.qp_b, "10.0.0.1", p.qp_a, 5000, 100)["ok"].get<bool>());
    return p;
  }

};

TEST_F(Loopback, DevicesLookLikeRoceV2Nics) {
  Verbs v(daemon_->socket(), "isoroce0");
  ASSERT_TRUE(v.ok());
  json d = v.call({{"op", "devices"}})["devices"];
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0]["name"], "isoroce0");
  EXPECT_EQ(d[0]["gid"][0], "::ffff:10.0.0.1");
  EXPECT_EQ(d[1]["gid"][0], "::ffff:10.0.0.2");
  EXPECT_EQ(d[0]["policy"], "tassel");
  EXPECT_NE(d[0]["mac"], d[1]["mac"]);
}

TEST_F(Loopback, WriteReadAtomicsAndSendsAcrossPortsIntact) {
  Pair p = make_pair();
  // RDMA WRITE of several sizes, each landing at its own offset in b's memory.
  uint64_t off = 0;
  uint64_t id = 1;
  for (uint32_t len : {1u, 1000u, 1024u, 4096u, 65536u, 300000u}) {
    fill(p.buf_a->data + off, len, len);
    ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", id++}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                        {"sg", {sge(*p.buf_a, off, len)}}, {"remote_addr", p.buf_b->iova() + off},
                                        {"rkey", p.buf_b->rkey}})["ok"].get<bool>());
    auto wc = p.a->wait(p.cq_a, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0]["status"], 0) << wc[0].dump();
    EXPECT_EQ(std::memcmp(p.buf_a->data + off, p.buf_b->data + off, len), 0) << "write of " << len;
    off += len;
  }
  // SEND with immediate into a posted receive.
  const uint32_t send_len = 5000;
  fill(p.buf_a->data, send_len, 7);
  ASSERT_TRUE(p.b->post_recv(p.qp_b, {{"wr_id", 77}, {"sg", {sge(*p.buf_b, 0, 8192)}}})["ok"].get<bool>());
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", id++}, {"opcode", "send_imm"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"imm_data", 0xabcdef01u}, {"sg", {sge(*p.buf_a, 0, send_len)}}})["ok"].get<bool>());
  auto rwc = p.b->wait(p.cq_b, 1);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0]["status"], 0);
  EXPECT_EQ(rwc[0]["wr_id"], 77);
  EXPECT_EQ(rwc[0]["byte_len"], send_len);
  EXPECT_EQ(rwc[0]["imm_data"], 0xabcdef01u);
  EXPECT_EQ(std::memcmp(p.buf_a->data, p.buf_b->data, send_len), 0);
  ASSERT_EQ(p.a->wait(p.cq_a, 1).size(), 1u);
  // RDMA READ of b's memory into a's.
  fill(p.buf_b->data + 100000, 70000, 9);
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", id++}, {"opcode", "read"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*p.buf_a, 200000, 70000)}},
                                      {"remote_addr", p.buf_b->iova() + 100000}, {"rkey", p.buf_b->rkey}})["ok"].get<bool>());
  auto wc = p.a->wait(p.cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0]["status"], 0);
  EXPECT_EQ(std::memcmp(p.buf_a->data + 200000, p.buf_b->data + 100000, 70000), 0);
  // Atomics on an aligned counter in b's memory; the original value lands in a's.
  uint64_t counter = 41;
  std::memcpy(p.buf_b->data + 512 * 1024, &counter, 8);
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", id++}, {"opcode", "fetch_add"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*p.buf_a, 0, 8)}}, {"remote_addr", p.buf_b->iova() + 512 * 1024},
                                      {"rkey", p.buf_b->rkey}, {"compare_add", 1}})["ok"].get<bool>());
  ASSERT_EQ(p.a->wait(p.cq_a, 1).size(), 1u);
  uint64_t orig;
  std::memcpy(&orig, p.buf_a->data, 8);
  std::memcpy(&counter, p.buf_b->data + 512 * 1024, 8);
  EXPECT_EQ(orig, 41u);
  EXPECT_EQ(counter, 42u);
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", id++}, {"opcode", "cmp_swap"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*p.buf_a, 8, 8)}}, {"remote_addr", p.buf_b->iova() + 512 * 1024},
                                      {"rkey", p.buf_b->rkey}, {"compare_add", 42}, {"swap", 1000}})["ok"].get<bool>());
  ASSERT_EQ(p.a->wait(p.cq_a, 1).size(), 1u);
  std::memcpy(&orig, p.buf_a->data + 8, 8);
  std::memcpy(&counter, p.buf_b->data + 512 * 1024, 8);
  EXPECT_EQ(orig, 42u);
  EXPECT_EQ(counter, 1000u);
  // And the other direction: b writes into a.
  fill(p.buf_b->data + 600000, 40000, 11);
  ASSERT_TRUE(p.b->post_send(p.qp_b, {{"wr_id", 1}, {"opcode", "write_imm"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"imm_data", 5}, {"sg", {sge(*p.buf_b, 600000, 40000)}},
                                      {"remote_addr", p.buf_a->iova() + 600000}, {"rkey", p.buf_a->rkey}})["ok"].get<bool>());
  // write_imm consumes a receive at a.
  EXPECT_EQ(p.b->wait(p.cq_b, 1, 300).size(), 0u);  // RNR: no receive yet, retried forever
  ASSERT_TRUE(p.a->post_recv(p.qp_a, {{"wr_id", 3}})["ok"].get<bool>());
  auto awc = p.a->wait(p.cq_a, 1);
  ASSERT_EQ(awc.size(), 1u);
  EXPECT_EQ(awc[0]["opcode"], IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(awc[0]["imm_data"], 5);
  ASSERT_EQ(p.b->wait(p.cq_b, 1).size(), 1u);
  EXPECT_EQ(std::memcmp(p.buf_a->data + 600000, p.buf_b->data + 600000, 40000), 0);
  // Per-QP counters show the traffic.
  json q = p.a->call({{"op", "qp"}, {"qpn", p.qp_a}})["qp"];
  EXPECT_GT(q["tx_packets"].get<uint64_t>(), 300u);
  EXPECT_EQ(q["state"], "RTS");
  EXPECT_EQ(q["errors"], 0);
  // DCQCN is on and nothing marks CE on a ring pair: no CNPs, the rate unlimited.
  ASSERT_TRUE(q.contains("dcqcn")) << q.dump();
  EXPECT_FALSE(q["dcqcn"]["limiting"].get<bool>());
  EXPECT_EQ(q["cnps_received"], 0);
}

TEST_F(Loopback, ManyOutstandingWritesKeepOrderAndData) {
  Pair p = make_pair(4 << 20);
  fill(p.buf_a->data, 4 << 20, 3);
  const int n = 48;
  for (int i = 0; i < n; ++i) {
    const uint64_t off = static_cast<uint64_t>(i) * 65536;
    ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", i}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                        {"sg", {sge(*p.buf_a, off, 65536)}}, {"remote_addr", p.buf_b->iova() + off},
                                        {"rkey", p.buf_b->rkey}})["ok"].get<bool>());
  }
  auto wc = p.a->wait(p.cq_a, n);
  ASSERT_EQ(wc.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(wc[i]["wr_id"], i);
    EXPECT_EQ(wc[i]["status"], 0);
  }
  EXPECT_EQ(std::memcmp(p.buf_a->data, p.buf_b->data, static_cast<size_t>(n) * 65536), 0);
}

TEST_F(Loopback, BadRkeyGetsRemoteAccessErrorAndDaemonCarriesOn) {
  Pair p = make_pair();
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", 9}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*p.buf_a, 0, 64)}}, {"remote_addr", p.buf_b->iova()},
                                      {"rkey", p.buf_b->rkey ^ 0x5a5a00}})["ok"].get<bool>());
  auto wc = p.a->wait(p.cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0]["status"], IBV_WC_REM_ACCESS_ERR) << wc[0].dump();
  // Out of bounds of the MR.
  Pair q = make_pair();
  ASSERT_TRUE(q.a->post_send(q.qp_a, {{"wr_id", 1}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*q.buf_a, 0, 4096)}}, {"remote_addr", q.buf_b->iova() + (1 << 20) - 100},
                                      {"rkey", q.buf_b->rkey}})["ok"].get<bool>());
  wc = q.a->wait(q.cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0]["status"], IBV_WC_REM_ACCESS_ERR);
  // Still serving: a fresh pair works.
  Pair r = make_pair();
  ASSERT_TRUE(r.a->post_send(r.qp_a, {{"wr_id", 1}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*r.buf_a, 0, 64)}}, {"remote_addr", r.buf_b->iova()},
                                      {"rkey", r.buf_b->rkey}})["ok"].get<bool>());
  wc = r.a->wait(r.cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0]["status"], 0);
}

TEST_F(Loopback, UdDatagramsCarryGrhAndSource) {
  Verbs a(daemon_->socket(), "isoroce0"), b(daemon_->socket(), "isoroce1");
  const uint32_t cq_a = a.create_cq(), cq_b = b.create_cq();
  const uint32_t qa = a.create_qp(cq_a, "ud"), qb = b.create_qp(cq_b, "ud");
  Buffer* ba = a.reg(65536, kAll);
  Buffer* bb = b.reg(65536, kAll);
  ASSERT_TRUE(qa && qb && ba && bb);
  for (auto [v, q] : {std::pair{&a, qa}, std::pair{&b, qb}}) {
    ASSERT_TRUE(v->call({{"op", "modify_qp"}, {"qpn", q}, {"attr", {{"qp_state", "INIT"}, {"pkey_index", 0}, {"port_num", 1}, {"qkey", 0x1111}}}})["ok"].get<bool>());
    ASSERT_TRUE(v->call({{"op", "modify_qp"}, {"qpn", q}, {"attr", {{"qp_state", "RTR"}}}})["ok"].get<bool>());
    ASSERT_TRUE(v->call({{"op", "modify_qp"}, {"qpn", q}, {"attr", {{"qp_state", "RTS"}, {"sq_psn", 1}}}})["ok"].get<bool>());
  }
  json ah = a.call({{"op", "create_ah"}, {"pd", a.pd()}, {"dgid", "10.0.0.2"}});
  ASSERT_TRUE(ah["ok"].get<bool>()) << ah.dump();
  fill(ba->data, 1000, 5);
  ASSERT_TRUE(b.post_recv(qb, {{"wr_id", 1}, {"sg", {sge(*bb, 0, 2048)}}})["ok"].get<bool>());
  ASSERT_TRUE(a.post_send(qa, {{"wr_id", 2}, {"opcode", "send"}, {"send_flags", IBV_SEND_SIGNALED},
                               {"sg", {sge(*ba, 0, 1000)}}, {"ah", ah["ah"]}, {"remote_qpn", qb},
                               {"remote_qkey", 0x1111}})["ok"].get<bool>());
  auto wc = b.wait(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0]["byte_len"], 1040);
  EXPECT_EQ(wc[0]["src_qp"], qa);
  EXPECT_TRUE(wc[0]["wc_flags"].get<uint32_t>() & IBV_WC_GRH);
  EXPECT_EQ(std::memcmp(ba->data, bb->data + 40, 1000), 0);
}

TEST_F(Loopback, HandlesOfAnotherClientAreRejected) {
  Pair p = make_pair();
  Verbs intruder(daemon_->socket(), "isoroce0");
  ASSERT_TRUE(intruder.ok());
  const uint32_t cq = intruder.create_cq();
  for (json req : {json{{"op", "post_send"}, {"qpn", p.qp_a}, {"wr", {{"opcode", "send"}}}},
                   json{{"op", "destroy_qp"}, {"qpn", p.qp_a}},
                   json{{"op", "poll_cq"}, {"cq", p.cq_a}},
                   json{{"op", "dereg_mr"}, {"lkey", p.buf_a->lkey}},
                   json{{"op", "create_qp"}, {"pd", p.a->pd()}, {"send_cq", cq}, {"recv_cq", cq}}}) {
    json r = intruder.call(req);
    EXPECT_FALSE(r["ok"].get<bool>()) << req.dump();
    EXPECT_EQ(r["errno"], EINVAL) << req.dump();
  }
  // Garbage is answered, not fatal.
  ASSERT_TRUE(ctrl::send_message(intruder.client().fd(), "{not json"));
  std::string text;
  std::vector<int> fds;
  ASSERT_EQ(ctrl::recv_message(intruder.client().fd(), &text, &fds), ctrl::RecvStatus::kOk);
  EXPECT_NE(text.find("\"errno\":71"), std::string::npos) << text;  // EPROTO
  json r = intruder.call({{"op", "post_send"}, {"qpn", 1}, {"wr", {{"opcode", "bogus"}}}});
  EXPECT_FALSE(r["ok"].get<bool>());
  // The owner's QP still works.
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", 1}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*p.buf_a, 0, 64)}}, {"remote_addr", p.buf_b->iova()},
                                      {"rkey", p.buf_b->rkey}})["ok"].get<bool>());
  EXPECT_EQ(p.a->wait(p.cq_a, 1).size(), 1u);
}

TEST_F(Loopback, KilledClientsResourcesAreReclaimedWithinOneSecond) {
  auto count_qps = [&] {
    Verbs v(daemon_->socket(), "isoroce0");
    return v.call({{"op", "qps"}})["qps"].size();
  };
  const size_t before = count_qps();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    Verbs v(daemon_->socket(), "isoroce0");
    const uint32_t cq = v.create_cq();
    bool ok = v.ok() && cq && v.reg(1 << 20, kAll);
    for (int i = 0; i < 4; ++i) ok = ok && v.create_qp(cq);
    const char c = ok ? 'y' : 'n';
    (void)write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_EQ(count_qps(), before + 4);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  const auto t0 = std::chrono::steady_clock::now();
  while (count_qps() != before && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(count_qps(), before) << "QPs of a SIGKILLed client are still there after 1 s";
  close(ready[0]);
  close(ready[1]);
}

TEST_F(Loopback, TelemetryAnswersThroughDpdkTelemetryPy) {
  Pair p = make_pair();
  const std::string cmd = "printf '/isoroce/devices\\n/isoroce/qp," + std::to_string(p.qp_a) +
                          "\\n/isoroce/sched\\n' | timeout 20 /usr/bin/dpdk-telemetry.py -f " + daemon_->prefix();
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  EXPECT_EQ(pclose(f), 0) << out;
  EXPECT_NE(out.find("\"/isoroce/devices\": {\"isoroce0\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"qpn\": " + std::to_string(p.qp_a)), std::string::npos) << out;
  EXPECT_NE(out.find("\"state\": \"RTS\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"policy\": \"tassel\""), std::string::npos) << out;
}

// --lcores in EAL's LCORE@CPU form: three lcores on two CPUs, so a 2-core
// machine runs two workers, one port each; a WRITE crosses from one to the other.
TEST(DaemonConfig, LcoresPlacedOnCpusGiveTwoWorkersOnePortEach) {
  DaemonProcess d({"--loopback", "--lcores", "0@0,1@1,2@0"});
  ASSERT_TRUE(d.ok()) << d.log();
  {
    Verbs a(d.socket(), "isoroce0"), b(d.socket(), "isoroce1");
    ASSERT_TRUE(a.ok() && b.ok());
    const json st = a.call({{"op", "status"}});
    ASSERT_TRUE(st["ok"].get<bool>()) << st.dump();
    const json& w = st["status"]["workers"];
    ASSERT_EQ(w.size(), 2u) << st.dump();
    EXPECT_EQ(w[0]["devices"], json::array({"isoroce0"})) << st.dump();
    EXPECT_EQ(w[1]["devices"], json::array({"isoroce1"})) << st.dump();
    const uint32_t cq_a = a.create_cq(), cq_b = b.create_cq();
    const uint32_t qp_a = a.create_qp(cq_a), qp_b = b.create_qp(cq_b);
    Buffer* buf_a = a.reg(1 << 16, kAll);
    Buffer* buf_b = b.reg(1 << 16, kAll);
    ASSERT_TRUE(qp_a && qp_b && buf_a && buf_b);
    ASSERT_TRUE(a.connect_rc(qp_a, "10.0.0.2", qp_b, 1, 2)["ok"].get<bool>());
    ASSERT_TRUE(b.connect_rc(qp_b, "10.0.0.1", qp_a, 2, 1)["ok"].get<bool>());
    fill(buf_a->data, 40000, 3);
    ASSERT_TRUE(a.post_send(qp_a, {{"wr_id", 1}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                   {"sg", {sge(*buf_a, 0, 40000)}}, {"remote_addr", buf_b->iova()},
                                   {"rkey", buf_b->rkey}})["ok"].get<bool>());
    auto wc = a.wait(cq_a, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0]["status"], 0) << wc[0].dump();
    EXPECT_EQ(std::memcmp(buf_a->data, buf_b->data, 40000), 0);
    const json after = a.call({{"op", "status"}});
    EXPECT_GT(after["status"]["workers"][0]["busy_ns"].get<uint64_t>(), 0u) << after.dump();
    EXPECT_GT(after["status"]["workers"][1]["busy_ns"].get<uint64_t>(), 0u) << after.dump();
  }
  EXPECT_EQ(d.stop(), 0) << d.log();
}

TEST(DaemonConfig, BadSettingsExitWithAMessageNamingThem) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--port", "net_ring0", "--ip", "10.0.0.300/24"}, "port[0].ip"},
      {{"--port", "net_ring0"}, "--ip"},
      {{"--loopback", "--policy", "wfq"}, "--policy"},
      {{"--port", "eth0/1", "--ip", "10.0.0.1"}, "port[0].devargs"},
      // A bare name is a kernel interface (AF_XDP, else AF_PACKET); one that
      // does not exist is refused by name (never the host's real NIC here).
      {{"--port", "isoroce-nosuch", "--ip", "10.0.0.1"}, "no network interface 'isoroce-nosuch' here"},
      {{"--loopback", "--lcores", "0"}, "lcores"},
      {{"--port", "net_bogus0", "--ip", "10.0.0.1"}, "port[0]"},
      {{}, "port"},
      {{"--loopback", "--dcqcn", "enabled=true"}, "DCQCN (dcqcn.enabled) needs a rate-limiting policy"},
      {{"--loopback", "--policy", "tassel", "--dcqcn", "g=7"}, "--dcqcn g=7"},
      {{"--loopback", "--policy", "tassel", "--dcqcn", "nonsense=1"}, "unknown parameter"},
      {{"--loopback", "--mtu", "1500"}, "mtu: must be 256, 512, 1024, 2048 or 4096"},
      {{"--loopback", "--limit", "max_qps=0"}, "--limit max_qps=0: max_qps: must be in 1.."},
      {{"--loopback", "--limit", "max_things=3"}, "unknown limit 'max_things'"},
      {{"--loopback", "--admin-group", "no-such-group-here"}, "admin_group: 'no-such-group-here' is no group"},
      {{"--loopback", "--policy-plugin", "/nonexistent/p.so"},
       "--policy-plugin: policy plugin /nonexistent/p.so: No such file or directory"},
      {{"--loopback", "--policy-plugin", ISOROCE_TEST_WRONG_ABI_SO}, "policy ABI version 2, this isoroce speaks"},
      {{"--loopback", "--policy-plugin", ISOROCE_TEST_NO_SYMBOL_SO}, "no isoroce_policy_entry symbol"},
      {{"--loopback", "--policy", "strict_priority"}, "'strict_priority' is not a policy ("},
      {{"--loopback", "--port-mac", "mine"}, "port_mac: 'mine' is neither own"},
  };
  for (const Case& c : cases) {
    DaemonProcess d(c.args);
    EXPECT_FALSE(d.ok()) << "started with a bad configuration: " << c.says;
    const std::string log = d.log();
    EXPECT_NE(log.find(c.says), std::string::npos) << log;
    EXPECT_TRUE(log.find("bad configuration") != std::string::npos ||
                log.find("cannot start") != std::string::npos) << log;
  }
  // A plugin's policy, named on the command line: the ports run it; a client
  // cannot load code, only name a registered policy.
  {
    DaemonProcess d({"--loopback", "--policy-plugin", ISOROCE_TEST_STRICT_PRIORITY_SO, "--policy", "strict_priority"});
    ASSERT_TRUE(d.ok()) << d.log();
    EXPECT_NE(d.log().find("policy strict_priority"), std::string::npos) << d.log();
  }
  // A config file with an unknown key.
  const std::string path = "/tmp/isoroce-bad-" + std::to_string(getpid()) + ".toml";
  FILE* f = fopen(path.c_str(), "w");
  fputs("loopback = true\npolcy = \"fifo\"\n", f);
  fclose(f);
  DaemonProcess d({"--config", path});
  EXPECT_FALSE(d.ok());
  EXPECT_NE(d.log().find("polcy"), std::string::npos) << d.log();
  // Adaptive spinning is a boolean.
  f = fopen(path.c_str(), "w");
  fputs("loopback = true\nidle_spin_adaptive = \"yes\"\n", f);
  fclose(f);
  DaemonProcess spin({"--config", path});
  EXPECT_FALSE(spin.ok());
  EXPECT_NE(spin.log().find("idle_spin_adaptive"), std::string::npos) << spin.log();
  unlink(path.c_str());
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

std::string run(const std::string& cmd, int* status) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(IsoroceCtl, InspectsAndSteersALiveDaemon) {
  DaemonProcess d({"--loopback"});
  ASSERT_TRUE(d.ok()) << d.log();
  const std::string ctl = bin_path("isoroce-ctl") + " --socket " + d.socket() + " ";
  int st;
  std::string out = run(ctl + "devices", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("isoroce1"), std::string::npos) << out;
  EXPECT_NE(out.find("::ffff:10.0.0.2"), std::string::npos) << out;
  // set-policy on an unused device, then the device reports it.
  out = run(ctl + "set-policy isoroce1 tassel", &st);
  EXPECT_EQ(st, 0) << out;
  out = run(ctl + "--json sched", &st);
  json j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["sched"]["isoroce1"]["policy"], "tassel");
  EXPECT_EQ(j["sched"]["isoroce0"]["policy"], "rnic");  // the default baseline (cx4-roce)
  // A QP: rate and class are set and shown.
  Verbs v(d.socket(), "isoroce0");
  const uint32_t cq = v.create_cq();
  const uint32_t qpn = v.create_qp(cq);
  ASSERT_NE(qpn, 0u);
  out = run(ctl + "set-rate " + std::to_string(qpn) + " 2.5G", &st);
  EXPECT_EQ(st, 0) << out;
  out = run(ctl + "set-class " + std::to_string(qpn) + " latency", &st);
  EXPECT_EQ(st, 0) << out;
  out = run(ctl + "qp " + std::to_string(qpn) + " --json", &st);
  j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["qp"]["rate_bps"], 2'500'000'000u);
  EXPECT_EQ(j["qp"]["class"], "latency");
  EXPECT_EQ(j["qp"]["state"], "RESET");
  // DCQCN parameters of an unused device (and refused with fifo, or bad values).
  out = run(ctl + "set-dcqcn isoroce1 enabled=true ai_mbps=7", &st);
  EXPECT_EQ(st, 0) << out;
  out = run(ctl + "--json sched", &st);
  j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["sched"]["isoroce1"]["dcqcn"]["enabled"], "true") << out;
  EXPECT_EQ(j["sched"]["isoroce1"]["dcqcn"]["ai_mbps"], "7") << out;
  out = run(ctl + "set-dcqcn isoroce1 g=9", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("g: must be in"), std::string::npos) << out;
  // The device is in use now: set-policy refuses and says why.
  out = run(ctl + "set-policy isoroce0 tassel", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("client"), std::string::npos) << out;
  // Bad input: clear messages, non-zero exits.
  out = run(ctl + "set-rate " + std::to_string(qpn) + " fast", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("not a rate"), std::string::npos) << out;
  out = run(ctl + "qp 3", &st);  // (QP 1 exists: every device's CM)
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("no QP 3"), std::string::npos) << out;
  out = run(ctl + "set-class " + std::to_string(qpn) + " urgent", &st);
  EXPECT_NE(st, 0);
  out = run(bin_path("isoroce-ctl") + " --socket /nonexistent/x.sock status", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("cannot reach isoroced"), std::string::npos) << out;
  EXPECT_EQ(d.stop(), 0) << d.log();
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

// `isoroced --check ARGS`: what it printed (stdout and stderr); its exit status in *status.
std::string check_daemon(const std::string& args, int* status) {
  FILE* f = popen((daemon_path() + " --check " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  *status = pclose(f);
  return out;
}

TEST(DaemonConfig, SampleConfigsInDocsAreValid) {
  for (const char* name : {"isoroced-loopback.toml", "isoroced-veth.toml", "isoroced-nic.toml"}) {
    int st = 0;
    const std::string out = check_daemon(std::string("--config ") + ISOROCE_DOCS_DIR + "/" + name, &st);
    EXPECT_EQ(st, 0) << name << ": " << out;
    EXPECT_NE(out.find("isoroce0:"), std::string::npos) << out;
    EXPECT_NE(out.find("EAL:"), std::string::npos) << out;
  }
  // --mtu overrides the file's port MTUs.
  int st = 0;
  const std::string out = check_daemon(std::string("--mtu 4096 --config ") + ISOROCE_DOCS_DIR + "/isoroced-loopback.toml", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("mtu 4096"), std::string::npos) << out;
  EXPECT_EQ(out.find("mtu 1024"), std::string::npos) << out;
}

// A net_af_packet port's Ethernet address (docs/isoroced.md, "An address of
// its own"): its own unless --port-mac or [[port]] mac says interface; --check
// shows which, and the flag wins over the file.
TEST(DaemonConfig, PortMacIsOwnUnlessSaidOtherwise) {
  auto check = [](const std::string& args) {
    int st = 0;
    const std::string out = check_daemon(args, &st);
    EXPECT_EQ(st, 0) << out;
    return out;
  };
  EXPECT_NE(check("--port net_af_packet0,iface=veth-a --ip 10.9.0.11/24").find(", mac own"), std::string::npos);
  EXPECT_NE(check("--port net_af_packet0,iface=veth-a --ip 10.9.0.11/24 --port-mac interface").find(", mac interface"),
            std::string::npos);
  const std::string path = "/tmp/isoroce-portmac-" + std::to_string(getpid()) + ".toml";
  FILE* f = fopen(path.c_str(), "w");
  fputs("[[port]]\ndevargs = \"net_af_packet0,iface=veth-a\"\nip = \"10.9.0.11/24\"\nmac = \"interface\"\n"
        "[[port]]\ndevargs = \"net_af_packet1,iface=veth-b\"\nip = \"10.9.0.12/24\"\n", f);
  fclose(f);
  std::string out = check("--config " + path);
  EXPECT_NE(out.find("isoroce0: net_af_packet0,iface=veth-a, 10.9.0.11/24, 10 Gb/s, mtu 1024, policy rnic, mac interface"),
            std::string::npos) << out;
  EXPECT_NE(out.find("10.9.0.12/24, 10 Gb/s, mtu 1024, policy rnic, mac own"), std::string::npos) << out;
  out = check("--config " + path + " --port-mac own");
  EXPECT_EQ(out.find("mac interface"), std::string::npos) << out;
  unlink(path.c_str());
}

// net_af_packet's rings get 4096 frames of DPDK's 2 KiB slots (MTU 1024)
// unless the devargs say otherwise (DPDK's 512 lost frames whenever a
// receiving daemon was off its core for half a millisecond:
// Netns.StoppedReceiverLosesNoFrameOfABurstTheRingHolds); above MTU 1024 a
// ring holds the same 4 MiB of payload in fewer, larger slots.
TEST(DaemonConfig, AfPacketRingsAreSizedFromTheMtuUnlessTheDevargsSizeThem) {
  auto eal = [](const std::string& port) {
    int st = 0;
    const std::string out = check_daemon("--port " + port + " --ip 10.9.0.11/24", &st);
    EXPECT_EQ(st, 0) << out;
    return out.substr(out.find("EAL:"));
  };
  std::string out = eal("net_af_packet0,iface=veth-a,qdisc_bypass=0");
  EXPECT_NE(out.find(" --vdev net_af_packet0,iface=veth-a,qdisc_bypass=0,framecnt=4096 "), std::string::npos) << out;
  out = eal("net_af_packet0,iface=veth-a,framecnt=1024");
  EXPECT_NE(out.find(" --vdev net_af_packet0,iface=veth-a,framecnt=1024 "), std::string::npos) << out;
  EXPECT_EQ(out.find("4096"), std::string::npos) << out;
  out = eal("net_tap0,iface=tap9");
  EXPECT_NE(out.find(" --vdev net_tap0,iface=tap9 "), std::string::npos) << out;
  // Frames above DPDK's 2048-byte slots: slots sized from the MTU, whole
  // pages per block, whole blocks per ring, and rings of 4 MiB of payload
  // (kAfPacketRingPayload: 1024 frames at 4096, 2048 at 2048; docs/performance.md,
  // "The kernel path, tuned").
  out = eal("net_af_packet0,iface=veth-a --mtu 4096");
  EXPECT_NE(out.find(" --vdev net_af_packet0,iface=veth-a,framesz=4608,blocksz=36864,framecnt=1024 "),
            std::string::npos) << out;
  out = eal("net_af_packet0,iface=veth-a --mtu 2048");
  EXPECT_NE(out.find(",framesz=2560,blocksz=20480,framecnt=2048 "), std::string::npos) << out;
  // What the devargs name stays: their framecnt, their slots (the ring still
  // holds 4 MiB of payload).
  out = eal("net_af_packet0,iface=veth-a,framecnt=4096 --mtu 4096");
  EXPECT_NE(out.find(" --vdev net_af_packet0,iface=veth-a,framecnt=4096,framesz=4608,blocksz=36864 "),
            std::string::npos) << out;
  out = eal("net_af_packet0,iface=veth-a,framesz=8192,blocksz=8192 --mtu 4096");
  EXPECT_NE(out.find(" --vdev net_af_packet0,iface=veth-a,framesz=8192,blocksz=8192,framecnt=1024 "),
            std::string::npos) << out;
}

TEST(DaemonConfig, AfPacketSlotsTooSmallForTheMtuAreRefusedNamingTheDevarg) {
  int st = 0;
  const std::string out = check_daemon("--port net_af_packet0,iface=veth-a,framesz=2048 --ip 10.9.0.11/24 --mtu 4096", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("port[0].devargs: framesz=2048 holds frames of MTU 4096 only with framesz >= 4270"),
            std::string::npos) << out;
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

uint64_t cpu_ticks(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream in(s.substr(s.rfind(')') + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return utime + stime;
}

TEST(DaemonIdle, IdleDaemonUsesUnderFivePercentOfACore) {
  DaemonProcess d({"--loopback"});
  ASSERT_TRUE(d.ok()) << d.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const uint64_t t0 = cpu_ticks(d.pid());
  const auto w0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(4));
  const uint64_t t1 = cpu_ticks(d.pid());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const double share = static_cast<double>(t1 - t0) / static_cast<double>(sysconf(_SC_CLK_TCK)) / wall;
  RecordProperty("idle_cpu_share", std::to_string(share));
  EXPECT_LT(share, 0.05) << "an idle daemon used " << share * 100 << " % of a core";
  // It slept, but never to its next deadline alone: --loopback's net_ring
  // ports have no socket to wake it, so every sleep keeps the quarter bound.
  const json st = Verbs(d.socket(), "isoroce0").call({{"op", "status"}});
  ASSERT_TRUE(st["ok"].get<bool>()) << st.dump();
  const json& w = st["status"]["workers"][0];
  EXPECT_GT(w["sleeps"].get<uint64_t>(), 0u) << st.dump();
  EXPECT_EQ(w["signalled_sleeps"], 0) << st.dump();
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

// Requests of every operation with fields of random types and values, some
// naming real handles: each is answered, and the daemon keeps serving.
TEST_F(Loopback, RandomRequestsAreAnsweredAndNeverStopTheDaemon) {
  Pair p = make_pair();
  std::mt19937_64 rng(20261122);
  const std::vector<std::string> ops = {
      "hello", "status", "devices", "qps", "qp", "stats", "sched", "set_rate", "set_class", "set_policy",
      "open", "alloc_pd", "dealloc_pd", "reg_mr", "dereg_mr", "create_cq", "destroy_cq", "poll_cq",
      "create_srq", "modify_srq", "destroy_srq", "post_srq_recv", "create_ah", "destroy_ah", "create_qp",
      "modify_qp", "query_qp", "destroy_qp", "post_send", "post_recv", "resize_cq", "bogus", ""};
  const std::vector<std::string> keys = {
      "pd", "cq", "qpn", "lkey", "srq", "ah", "device", "policy", "class", "bps", "cqe", "max", "length",
      "offset", "iova", "access", "send_cq", "recv_cq", "type", "max_send_wr", "dgid", "attr", "wr", "sg",
      "opcode", "qp_state", "path_mtu", "ah_attr", "remote_addr", "rkey", "max_wr", "srq_limit", "pieces"};
  std::function<json(int)> value = [&](int depth) -> json {
    switch (rng() % (depth > 2 ? 7 : 10)) {
      case 0: return static_cast<uint64_t>(rng());
      case 1: return static_cast<int64_t>(rng()) ;
      case 2: return static_cast<uint32_t>(rng() % 8);
      case 3: return std::vector<std::string>{"isoroce0", "RTS", "INIT", "ERR", "rc", "ud", "write", "10.0.0.2", "latency", "tassel", ""}[rng() % 11];
      case 4: return rng() % 2 == 0;
      case 5: return nullptr;
      case 6: return json{p.qp_a, p.cq_a, p.a->pd(), p.buf_a->lkey}[rng() % 4];
      case 7: {
        json a = json::array();
        for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (int i = 0, n = static_cast<int>(rng() % 5); i < n; ++i) o[keys[rng() % keys.size()]] = value(depth + 1);
        return o;
      }
    }
  };
  Verbs fuzzer(daemon_->socket(), "isoroce0");
  ASSERT_TRUE(fuzzer.ok());
  int malformed = 0, succeeded = 0;
  for (int i = 0; i < 3000; ++i) {
    json req = {{"op", ops[rng() % ops.size()]}};
    for (int k = 0, n = static_cast<int>(rng() % 6); k < n; ++k) req[keys[rng() % keys.size()]] = value(0);
    json r = fuzzer.call(req);
    ASSERT_TRUE(r.contains("ok")) << req.dump() << " -> " << r.dump();
    if (r.value("errno", 0) == ECONNRESET || r.value("errno", 0) == EPIPE) FAIL() << "daemon gone after " << req.dump();
    malformed += r.value("error", std::string()).rfind("malformed request", 0) == 0;
    succeeded += r["ok"].get<bool>();
  }
  // Both kinds happened: requests with fields of the wrong type, and real work.
  EXPECT_GT(malformed, 0);
  EXPECT_GT(succeeded, 100);
  // The daemon and the first pair still work.
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", 1}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                      {"sg", {sge(*p.buf_a, 0, 64)}}, {"remote_addr", p.buf_b->iova()},
                                      {"rkey", p.buf_b->rkey}})["ok"].get<bool>());
  auto wc = p.a->wait(p.cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0]["status"], 0);
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

// IBV_SEND_INLINE over the socket: the daemon copies the bytes from its mapping
// of the client's MR, and refuses addresses outside the client's MRs (the
// engine would otherwise read whatever the number points at in the daemon).
TEST_F(Loopback, InlineSendsUseTheClientsMemoryAndRefuseOtherAddresses) {
  Pair p = make_pair();
  fill(p.buf_a->data + 4096, 200, 21);
  ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", 1}, {"opcode", "write"},
                                      {"send_flags", IBV_SEND_SIGNALED | IBV_SEND_INLINE},
                                      {"sg", {sge(*p.buf_a, 4096, 200)}}, {"remote_addr", p.buf_b->iova() + 8192},
                                      {"rkey", p.buf_b->rkey}})["ok"].get<bool>());
  auto wc = p.a->wait(p.cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0]["status"], 0);
  EXPECT_EQ(std::memcmp(p.buf_a->data + 4096, p.buf_b->data + 8192, 200), 0);
  for (json bad : {json{{"addr", 0x1000}, {"length", 64}, {"lkey", p.buf_a->lkey}},
                   json{{"addr", p.buf_a->iova() + (1 << 20) - 10}, {"length", 64}, {"lkey", p.buf_a->lkey}},
                   json{{"addr", p.buf_b->iova()}, {"length", 64}, {"lkey", p.buf_b->lkey}},
                   json{{"addr", UINT64_MAX - 8}, {"length", 64}, {"lkey", p.buf_a->lkey}}}) {
    json r = p.a->post_send(p.qp_a, {{"wr_id", 2}, {"opcode", "send"}, {"send_flags", IBV_SEND_INLINE}, {"sg", {bad}}});
    EXPECT_FALSE(r["ok"].get<bool>()) << bad.dump();
    EXPECT_EQ(r["errno"], EINVAL) << bad.dump();
  }
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

// isoroce-ctl run: the simulator's flow generator on a live daemon, every
// verb across the two ports, every byte and atomic result checked.
TEST(IsoroceCtlRun, EveryVerbOfTheFlowGeneratorAcrossPortsIntact) {
  DaemonProcess d({"--loopback", "--policy", "tassel"});
  ASSERT_TRUE(d.ok()) << d.log();
  // The shipped example, pointed at this daemon's socket.
  std::ifstream in(std::string(ISOROCE_SOURCE_DIR) + "/tools/ctl/examples/loopback_all_verbs.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t at; (at = text.find("/run/isoroce/isoroced.sock")) != std::string::npos;)
    text.replace(at, std::strlen("/run/isoroce/isoroced.sock"), d.socket());
  const std::string path = "/tmp/isoroce-run-" + std::to_string(getpid()) + ".toml";
  std::ofstream(path) << text;
  int st;
  const std::string out = run(bin_path("isoroce-ctl") + " run " + path + " --json 2>/dev/null", &st);
  EXPECT_EQ(st, 0) << out;
  json j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_EQ(j["flows"].size(), 7u);
  for (const json& f : j["flows"]) {
    EXPECT_TRUE(f["integrity_ok"].get<bool>()) << f.dump();
    EXPECT_GT(f["messages"].get<uint64_t>(), 0u) << f.dump();
    EXPECT_EQ(f["errors"], 0) << f.dump();
  }
  EXPECT_TRUE(j["sim"]["all_finished"].get<bool>());
  // The run's QPs are gone with its connections (the daemon's own reference
  // echo QPs stay).
  Verbs v(d.socket(), "isoroce0");
  const json qps = v.call({{"op", "qps"}})["qps"];
  for (const json& q : qps) EXPECT_EQ(q.value("class", std::string()), "reference") << qps.dump();
  // A daemon that is not there: a clear message, exit 1; isoroce-sim refuses live scenarios.
  std::ofstream(path) << std::string(text).replace(text.find(d.socket()), d.socket().size(), "/nonexistent/x.sock");
  const std::string bad = run(bin_path("isoroce-ctl") + " run " + path, &st);
  EXPECT_EQ(st, 1) << bad;
  EXPECT_NE(bad.find("host[0] (a)"), std::string::npos) << bad;
  const std::string sim = run(bin_path("isoroce-sim") + " " + path, &st);
  EXPECT_EQ(st, 1) << sim;
  EXPECT_NE(sim.find("isoroce-ctl run"), std::string::npos) << sim;
  unlink(path.c_str());
  EXPECT_EQ(d.stop(), 0) << d.log();
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

// isoroce-ctl names a QP by number alone: a daemon's devices never share one.
TEST_F(Loopback, QpNumbersAreUniqueAcrossTheDaemonsDevices) {
  Verbs a(daemon_->socket(), "isoroce0"), b(daemon_->socket(), "isoroce1");
  const uint32_t ca = a.create_cq(), cb = b.create_cq();
  std::set<uint32_t> seen;
  for (int i = 0; i < 8; ++i) {
    const uint32_t qa = a.create_qp(ca), qb = b.create_qp(cb);
    ASSERT_TRUE(qa && qb);
    EXPECT_TRUE(seen.insert(qa).second) << qa;
    EXPECT_TRUE(seen.insert(qb).second) << qb;
    json q = b.call({{"op", "qp"}, {"qpn", qb}})["qp"];
    EXPECT_EQ(q["device"], "isoroce1") << q.dump();
  }
}

}  // namespace
}  // namespace isoroce::test

namespace isoroce::test {
namespace {

// reg_mr "pieces" (docs/control-protocol.md): every field checked, a client's
// file and a memfd mapped back to back, the bytes of a WRITE where each
// piece's file keeps them.
TEST_F(Loopback, RegMrPiecesAreCheckedAndMappedBackToBack) {
  Pair p = make_pair();
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  char path[] = "/dev/shm/isoroce-loopback-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  ASSERT_EQ(ftruncate(file, static_cast<off_t>(page)), 0);
  const int seg = memfd_create("isoroce-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  const int unsealable = memfd_create("isoroce-test", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(seg, static_cast<off_t>(2 * page)), 0);
  ASSERT_EQ(ftruncate(unsealable, static_cast<off_t>(page)), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const int fds[] = {file, seg, unsealable, pipefd[0]};
  auto reg_with = [&](std::span<const int> with, const json& pieces, uint64_t offset, uint64_t length,
                      uint32_t access) {
    return p.b->client().call({{"op", "reg_mr"}, {"pd", p.b->pd()}, {"offset", offset}, {"length", length},
                               {"iova", 0x100000 + offset % page}, {"access", access}, {"pieces", pieces}},
                              with);
  };
  auto reg = [&](const json& pieces, uint64_t offset, uint64_t length) {
    return reg_with(fds, pieces, offset, length, kAll);
  };
  auto piece = [](int fd, uint64_t off, uint64_t len, const char* kind) {
    return json{{"fd", fd}, {"offset", off}, {"length", len}, {"kind", kind}};
  };
  auto err = [](const json& r) { return r.value("ok", true) ? 0 : r.value("errno", -1); };
  // The errno, and the error sentence names the reason.
  auto fails = [&](const json& r, int want, const char* reason) {
    EXPECT_EQ(err(r), want) << r.dump();
    EXPECT_NE(r.value("error", std::string()).find(reason), std::string::npos) << r.dump();
  };
  // Expect: each malformed piece list EINVAL, a file too short EFAULT.
  auto one = [&](int fd, uint64_t off, uint64_t len, const char* kind) { return json::array({piece(fd, off, len, kind)}); };
  fails(reg(json::array(), 0, 1), EINVAL, "is a list of 1..64");
  fails(reg(one(9, 0, page, "file"), 0, 1), EINVAL, "a piece is {fd");
  fails(reg(one(0, 100, page, "file"), 0, 1), EINVAL, "a piece is {fd");
  fails(reg(one(0, 0, 100, "file"), 0, 1), EINVAL, "a piece is {fd");
  fails(reg(one(0, 0, page, "other"), 0, 1), EINVAL, "a piece is {fd");
  fails(reg(one(3, 0, page, "file"), 0, 1), EINVAL, "must be a regular file");
  fails(reg(one(2, 0, page, "memfd"), 0, 1), EINVAL, "MFD_ALLOW_SEALING");
  fails(reg(one(0, 0, 2 * page, "file"), 0, 1), EFAULT, "past the end of its file");
  fails(reg(one(0, 0, page, "file"), 100, page), EINVAL, "beyond the pieces");
  // A read-only descriptor cannot be mapped for write access, and can for reading.
  char fdpath[64];
  std::snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", file);
  const int ro = open(fdpath, O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  const int ro_fds[] = {ro};
  fails(reg_with(ro_fds, one(0, 0, page, "file"), 0, page, kAll), EACCES, "mmap of a file piece");
  json r = reg_with(ro_fds, one(0, 0, page, "file"), 0, page, IBV_ACCESS_REMOTE_READ);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_TRUE(p.b->call({{"op", "dereg_mr"}, {"lkey", r["lkey"]}})["ok"].get<bool>());
  close(ro);

  // [file page 0 | memfd page 1], the region from byte 100 of the file to 100
  // bytes before the memfd page's end.
  r = reg(json::array({piece(0, 0, page, "file"), piece(1, page, page, "memfd")}), 100, 2 * page - 200);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  fill(p.buf_a->data, 2 * page, 77);
  json wr = {{"wr_id", 7}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
             {"sg", {sge(*p.buf_a, 0, static_cast<uint32_t>(2 * page - 200))}}, {"remote_addr", 0x100000 + 100},
             {"rkey", r["rkey"]}};
  ASSERT_TRUE(p.a->post_send(p.qp_a, wr)["ok"].get<bool>());
  auto wc = p.a->wait(p.cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  ASSERT_EQ(wc[0]["status"], 0) << wc[0].dump();
  std::vector<uint8_t> got(page);
  ASSERT_EQ(pread(file, got.data(), page, 0), static_cast<ssize_t>(page));
  EXPECT_EQ(std::memcmp(got.data() + 100, p.buf_a->data, page - 100), 0) << "file piece";
  ASSERT_EQ(pread(seg, got.data(), page, static_cast<off_t>(page)), static_cast<ssize_t>(page));
  EXPECT_EQ(std::memcmp(got.data(), p.buf_a->data + page - 100, page - 100), 0) << "memfd piece";
  EXPECT_TRUE(p.b->call({{"op", "dereg_mr"}, {"lkey", r["lkey"]}})["ok"].get<bool>());
  for (int fd : {file, seg, unsealable, pipefd[0], pipefd[1]}) close(fd);
}

// resize_cq over the socket, for a CQ without a ring: the engine's CQ only.
TEST_F(Loopback, ResizeCqWithoutARingResizesTheEnginesCq) {
  Pair p = make_pair();
  auto resize = [&](Verbs& v, uint32_t cq, uint64_t cqe) {
    json r = v.call({{"op", "resize_cq"}, {"cq", cq}, {"cqe", cqe}});
    return r.value("ok", false) ? 0 : r.value("errno", -1);
  };
  EXPECT_EQ(resize(*p.a, p.cq_a, 0), EINVAL);
  EXPECT_EQ(resize(*p.a, p.cq_a, 1u << 20), EINVAL);
  Verbs other(daemon_->socket(), "isoroce0");
  const uint32_t other_cq = other.create_cq();
  ASSERT_NE(other_cq, p.cq_a);
  EXPECT_EQ(resize(*p.a, other_cq, 16), EINVAL) << "another client's CQ";
  // Five receive completions wait in b's CQ once a's five sends completed
  // (b's responder completes a receive before it acknowledges it).
  for (uint64_t k = 0; k < 5; ++k)
    ASSERT_TRUE(p.b->post_recv(p.qp_b, {{"wr_id", k}, {"sg", {sge(*p.buf_b, k * 64, 64)}}})["ok"].get<bool>());
  for (uint64_t k = 0; k < 5; ++k)
    ASSERT_TRUE(p.a->post_send(p.qp_a, {{"wr_id", k}, {"opcode", "send"}, {"send_flags", IBV_SEND_SIGNALED},
                                        {"sg", {sge(*p.buf_a, 0, 64)}}})["ok"].get<bool>());
  ASSERT_EQ(p.a->wait(p.cq_a, 5).size(), 5u);
  EXPECT_EQ(resize(*p.b, p.cq_b, 4), EINVAL) << "5 completions wait";
  EXPECT_EQ(resize(*p.b, p.cq_b, 5), 0);
  auto wc = p.b->wait(p.cq_b, 5);
  ASSERT_EQ(wc.size(), 5u);
  for (uint64_t k = 0; k < 5; ++k) EXPECT_EQ(wc[k]["wr_id"], k);
}

}  // namespace
}  // namespace isoroce::test
