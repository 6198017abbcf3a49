// isoroced --loopback --policy justitia: the configuration (errors name the
// setting), classes and applications of QPs (create_qp's class, set-class), the
// reference flow running inside the daemon (probes counted in `sched`), soft
// admission's async event, traffic of a latency and a bandwidth QP intact, the
// justitia fields in `sched` and DPDK telemetry, set-justitia.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

std::string run_cmd(const std::string& cmd, int* status) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

void fill(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

uint32_t create_qp(Verbs& v, uint32_t cq, const std::string& cls = "") {
  json req = {{"op", "create_qp"}, {"pd", v.pd()}, {"send_cq", cq}, {"recv_cq", cq}, {"type", "rc"},
              {"max_send_wr", 64}, {"max_recv_wr", 64}, {"max_send_sge", 1}, {"max_recv_sge", 1}};
  if (!cls.empty()) req["class"] = cls;
  json r = v.call(req);
  return r["ok"].get<bool>() ? r["qpn"].get<uint32_t>() : 0;
}

TEST(JustitiaConfig, BadSettingsExitWithAMessageNamingThem) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--loopback", "--policy", "justitia", "--justitia", "nonsense=1"}, "--justitia nonsense=1: unknown parameter"},
      {{"--loopback", "--policy", "justitia", "--justitia", "window=many"}, "--justitia window=many: window:"},
      {{"--loopback", "--policy", "justitia", "--justitia", "target99_us=0"}, "justitia: target99_us must be above 0"},
      {{"--loopback", "--policy", "justitia", "--justitia", "split_bytes=2000000"}, "split_bytes must be"},
      {{"--loopback", "--policy", "justitia", "--justitia", "ref_period_us"}, "is not NAME=VALUE"},
  };
  for (const Case& c : cases) {
    DaemonProcess d(c.args);
    EXPECT_FALSE(d.ok()) << "started with a bad configuration: " << c.says;
    EXPECT_NE(d.log().find(c.says), std::string::npos) << d.log();
    EXPECT_NE(d.log().find("bad configuration"), std::string::npos) << d.log();
  }
  const std::string path = "/tmp/isoroce-justitia-" + std::to_string(getpid()) + ".toml";
  for (const auto& [table, says] : std::vector<std::pair<std::string, std::string>>{
           {"[justitia]\nwindow = -3\n", "justitia.window: window: '-3'"},
           {"[justitia]\ntarget_us = 3\n", "justitia.target_us: unknown parameter"},
           {"[justitia]\nref_period_us = \"fast\"\n", "justitia.ref_period_us: must be a number"},
           {"justitia = 3\n", "justitia: must be a table"}}) {
    FILE* f = fopen(path.c_str(), "w");
    fputs(("loopback = true\npolicy = \"justitia\"\n" + table).c_str(), f);
    fclose(f);
    DaemonProcess d({"--config", path});
    EXPECT_FALSE(d.ok()) << table;
    EXPECT_NE(d.log().find(says), std::string::npos) << d.log();
  }
  // A good table and flags on top, with DCQCN: --check accepts them.
  FILE* f = fopen(path.c_str(), "w");
  fputs("loopback = true\npolicy = \"justitia\"\n[justitia]\ntarget99_us = 50\nmax_rate_gbps = 8.5\n", f);
  fclose(f);
  int st;
  const std::string out = run_cmd(daemon_path() + " --check --config " + path +
                                      " --justitia ref_period_us=200 --dcqcn enabled=true",
                                  &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("policy justitia"), std::string::npos) << out;
  unlink(path.c_str());
}

class JustitiaLoopback : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    // Target99 of 10 ns: no probe meets it, so a latency QP is admitted with the
    // target missed (soft admission raises the event) and SafeUtil halves.
    start({"--loopback", "--policy", "justitia", "--link-gbps", "10", "--justitia",
                                 "target99_us=0.01", "--justitia", "ref_period_us=250"});
  }

  json sched() {
    int st;
    const std::string out = run_cmd(bin_path("isoroce-ctl") + " --socket " + daemon_->socket() + " --json sched", &st);
    json j = json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out;
    return j.is_discarded() ? json::object() : j["sched"];
  }
  std::string ctl(const std::string& args, int* st) {
    return run_cmd(bin_path("isoroce-ctl") + " --socket " + daemon_->socket() + " " + args, st);
  }

};

TEST_F(JustitiaLoopback, ReferenceFlowProbesEveryPeriod) {
  json s0 = sched();
  ASSERT_TRUE(s0["isoroce0"].contains("justitia")) << s0.dump(2);
  const json& r0 = s0["isoroce0"]["justitia"]["reference"];
  EXPECT_EQ(r0["peer"], "isoroce1") << r0.dump();
  EXPECT_EQ(r0["running"], true) << r0.dump();
  EXPECT_EQ(s0["isoroce1"]["justitia"]["reference"]["peer"], "isoroce0");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  json s1 = sched();
  for (const char* dev : {"isoroce0", "isoroce1"}) {
    const json& a = s0[dev]["justitia"];
    const json& b = s1[dev]["justitia"];
    // A probe every 250 us: thousands a second; a loaded CI VM gives fewer.
    EXPECT_GE(b["reference"]["probes"].get<uint64_t>(), a["reference"]["probes"].get<uint64_t>() + 100) << b.dump(2);
    EXPECT_GE(b["samples"].get<uint64_t>(), a["samples"].get<uint64_t>() + 100) << b.dump(2);
    EXPECT_EQ(b["reference"]["errors"], 0) << b.dump(2);
    EXPECT_GT(b["current99_us"].get<double>(), 0) << b.dump(2);
    EXPECT_DOUBLE_EQ(b["target99_us"].get<double>(), 0.01);
    EXPECT_DOUBLE_EQ(b["params"]["ref_period_us"].get<double>(), 250);
    EXPECT_EQ(b["max_rate_bps"], 10'000'000'000u);
    for (const char* k : {"safe_util_bps", "tau_us", "tokens", "latency_flows", "bandwidth_flows", "halvings"})
      EXPECT_TRUE(b.contains(k)) << k;
  }
  EXPECT_NE(daemon_->log().find("isoroce0: policy justitia: reference flow to isoroce1"), std::string::npos)
      << daemon_->log();
}

TEST_F(JustitiaLoopback, QpClassComesFromCreateQpThenSetClass) {
  Verbs v(daemon_->socket(), "isoroce0");
  ASSERT_TRUE(v.ok());
  const uint64_t client = v.call({{"op", "hello"}})["client"].get<uint64_t>();
  const uint32_t cq = v.create_cq();
  const uint32_t lat = create_qp(v, cq, "latency");
  const uint32_t bw = create_qp(v, cq);
  ASSERT_TRUE(lat && bw);
  EXPECT_FALSE(v.call({{"op", "create_qp"}, {"pd", v.pd()}, {"send_cq", cq}, {"recv_cq", cq}, {"class", "urgent"}})["ok"]
                   .get<bool>());
  EXPECT_FALSE(v.call({{"op", "create_qp"}, {"pd", v.pd()}, {"send_cq", cq}, {"recv_cq", cq}, {"class", "reference"}})["ok"]
                   .get<bool>());
  int st;
  std::string out = ctl("set-class " + std::to_string(bw) + " throughput", &st);
  EXPECT_EQ(st, 0) << out;
  for (auto [qpn, cls] : {std::pair{lat, "latency"}, std::pair{bw, "throughput"}}) {
    out = ctl("--json qp " + std::to_string(qpn), &st);
    json j = json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j["qp"]["class"], cls) << out;
    EXPECT_EQ(j["qp"]["app"], client) << out;
  }
  out = ctl("qps", &st);
  EXPECT_EQ(st, 0);
  EXPECT_NE(out.find(" app "), std::string::npos) << out;
  EXPECT_NE(out.find("reference"), std::string::npos) << out;  // the daemon's own probe QPs
  // The reference flow's QP is not the operator's to reclassify.
  const uint32_t ref = sched()["isoroce0"]["justitia"]["reference"]["qpn"].get<uint32_t>();
  out = ctl("set-class " + std::to_string(ref) + " bandwidth", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("reference flow"), std::string::npos) << out;
  // The scheduler sees the classes: a latency flow is active once it sends (not yet).
  json j = sched()["isoroce0"]["justitia"];
  EXPECT_TRUE(j.contains("latency_flows")) << j.dump();
}

TEST_F(JustitiaLoopback, LatencyQpAdmittedOverTargetRaisesAnAsyncEvent) {
  Verbs v(daemon_->socket(), "isoroce0");
  ASSERT_TRUE(v.ok());
  const uint32_t cq = v.create_cq();
  // Current99 exists (the probes ran) and is far above 10 ns.
  ASSERT_GT(sched()["isoroce0"]["justitia"]["current99_us"].get<double>(), 0);
  v.call({{"op", "get_async_events"}});  // drains what other tests' clients raised
  const uint64_t before = sched()["isoroce0"]["justitia"]["latency_target_missed"].get<uint64_t>();
  const uint32_t qpn = create_qp(v, cq, "latency");
  ASSERT_NE(qpn, 0u);
  json r = v.call({{"op", "get_async_events"}});
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  ASSERT_EQ(r["events"].size(), 1u) << r.dump();
  EXPECT_EQ(r["events"][0]["type"], "latency_target_missed");
  EXPECT_EQ(r["events"][0]["id"], qpn);
  EXPECT_EQ(r["events"][0]["device"], "isoroce0");
  EXPECT_TRUE(v.call({{"op", "get_async_events"}})["events"].empty());  // taken
  EXPECT_EQ(sched()["isoroce0"]["justitia"]["latency_target_missed"].get<uint64_t>(), before + 1);
  EXPECT_NE(daemon_->log().find("latency-class QP isoroce0/" + std::to_string(qpn)), std::string::npos) << daemon_->log();
  // A bandwidth QP raises nothing.
  ASSERT_NE(create_qp(v, cq), 0u);
  EXPECT_TRUE(v.call({{"op", "get_async_events"}})["events"].empty());
}

TEST_F(JustitiaLoopback, LatencyAndBandwidthTrafficBothCompleteIntact) {
  // Two applications on isoroce0 (a latency one and a bandwidth one), their peers on isoroce1.
  struct App {
    std::unique_ptr<Verbs> a, b;
    uint32_t cq_a = 0, cq_b = 0, qp_a = 0, qp_b = 0;
    Buffer *buf_a = nullptr, *buf_b = nullptr;
  };
  auto make = [&](const std::string& cls, uint32_t psn) {
    App p;
    p.a = std::make_unique<Verbs>(daemon_->socket(), "isoroce0");
    p.b = std::make_unique<Verbs>(daemon_->socket(), "isoroce1");
    EXPECT_TRUE(p.a->ok() && p.b->ok());
    p.cq_a = p.a->create_cq();
    p.cq_b = p.b->create_cq();
    p.qp_a = create_qp(*p.a, p.cq_a, cls);
    p.qp_b = create_qp(*p.b, p.cq_b, cls);
    p.buf_a = p.a->reg(4 << 20, kAll);
    p.buf_b = p.b->reg(4 << 20, kAll);
    EXPECT_TRUE(p.qp_a && p.qp_b && p.buf_a && p.buf_b);
    EXPECT_TRUE(p.a->connect_rc(p.qp_a, "10.0.0.2", p.qp_b, psn, psn + 7)["ok"].get<bool>());
    EXPECT_TRUE(p.b->connect_rc(p.qp_b, "10.0.0.1", p.qp_a, psn + 7, psn)["ok"].get<bool>());
    return p;
  };
  App lat = make("latency", 100);
  App bw = make("bandwidth", 9000);
  // The bandwidth application: 4 WRITEs of 1 MB in flight.
  fill(bw.buf_a->data, 4 << 20, 1);
  for (uint32_t i = 0; i < 4; ++i)
    ASSERT_TRUE(bw.a->post_send(bw.qp_a, {{"wr_id", i}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                          {"sg", {sge(*bw.buf_a, i << 20, 1 << 20)}},
                                          {"remote_addr", bw.buf_b->iova() + (i << 20)}, {"rkey", bw.buf_b->rkey}})["ok"]
                    .get<bool>());
  // Meanwhile the latency application: 50 small WRITEs one after another, and a SEND.
  fill(lat.buf_a->data, 64 * 1024, 2);
  for (uint32_t i = 0; i < 50; ++i) {
    ASSERT_TRUE(lat.a->post_send(lat.qp_a, {{"wr_id", i}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                            {"sg", {sge(*lat.buf_a, i * 1024, 1024)}},
                                            {"remote_addr", lat.buf_b->iova() + i * 1024}, {"rkey", lat.buf_b->rkey}})["ok"]
                      .get<bool>());
    auto wc = lat.a->wait(lat.cq_a, 1);
    ASSERT_EQ(wc.size(), 1u);
    ASSERT_EQ(wc[0]["status"], 0) << wc[0].dump();
  }
  EXPECT_EQ(std::memcmp(lat.buf_a->data, lat.buf_b->data, 50 * 1024), 0);
  ASSERT_TRUE(lat.b->post_recv(lat.qp_b, {{"wr_id", 5}, {"sg", {sge(*lat.buf_b, 1 << 20, 4096)}}})["ok"].get<bool>());
  ASSERT_TRUE(lat.a->post_send(lat.qp_a, {{"wr_id", 99}, {"opcode", "send"}, {"send_flags", IBV_SEND_SIGNALED},
                                          {"sg", {sge(*lat.buf_a, 0, 3000)}}})["ok"].get<bool>());
  auto rwc = lat.b->wait(lat.cq_b, 1);
  ASSERT_EQ(rwc.size(), 1u);
  EXPECT_EQ(rwc[0]["status"], 0);
  EXPECT_EQ(rwc[0]["byte_len"], 3000);
  EXPECT_EQ(std::memcmp(lat.buf_a->data, lat.buf_b->data + (1 << 20), 3000), 0);
  ASSERT_EQ(lat.a->wait(lat.cq_a, 1).size(), 1u);
  auto wc = bw.a->wait(bw.cq_a, 4, 30000);
  ASSERT_EQ(wc.size(), 4u);
  for (const json& w : wc) EXPECT_EQ(w["status"], 0) << w.dump();
  EXPECT_EQ(std::memcmp(bw.buf_a->data, bw.buf_b->data, 4 << 20), 0);
  // The scheduler handed the bandwidth flow tokens, and saw the latency flow.
  json j = sched()["isoroce0"]["justitia"];
  EXPECT_GT(j["tokens_issued"].get<uint64_t>(), 0u) << j.dump(2);
  // Each QP's traffic is counted under its own class.
  int st;
  json q = json::parse(ctl("--json qp " + std::to_string(bw.qp_a), &st), nullptr, false);
  EXPECT_GE(q["qp"]["tx_bytes"].get<uint64_t>(), 4u << 20);
  EXPECT_EQ(q["qp"]["class"], "bandwidth");
}

TEST_F(JustitiaLoopback, TelemetryShowsTheJustitiaFields) {
  const std::string cmd = "printf '/isoroce/sched\\n' | timeout 20 /usr/bin/dpdk-telemetry.py -f " + daemon_->prefix();
  int st;
  const std::string out = run_cmd(cmd, &st);
  EXPECT_EQ(st, 0) << out;
  for (const char* k : {"\"policy\": \"justitia\"", "\"justitia_safe_util_bps\": ", "\"justitia_tau_us\": ",
                        "\"justitia_current99_us\": ", "\"justitia_target99_us\": ", "\"justitia_tokens\": ",
                        "\"justitia_latency_flows\": ", "\"justitia_halvings\": ", "\"justitia_reference_probes\": ",
                        "\"justitia_params_window\": ", "\"dcqcn_enabled\": "})
    EXPECT_NE(out.find(k), std::string::npos) << k << "\n" << out;
}

TEST(JustitiaCtl, SetJustitiaOnAnUnusedDeviceRestartsTheReferenceFlow) {
  DaemonProcess d({"--loopback", "--policy", "justitia"});
  ASSERT_TRUE(d.ok()) << d.log();
  const std::string ctl = bin_path("isoroce-ctl") + " --socket " + d.socket() + " ";
  int st;
  std::string out = run_cmd(ctl + "set-justitia isoroce1 ref_period_us=1000 target99_us=40", &st);
  EXPECT_EQ(st, 0) << out;
  out = run_cmd(ctl + "set-justitia isoroce1 bogus=1", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("unknown parameter 'bogus'"), std::string::npos) << out;
  out = run_cmd(ctl + "set-justitia isoroce1 window=0", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("window must be"), std::string::npos) << out;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  json j = json::parse(run_cmd(ctl + "--json sched", &st), nullptr, false)["sched"];
  EXPECT_DOUBLE_EQ(j["isoroce1"]["justitia"]["params"]["ref_period_us"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(j["isoroce1"]["justitia"]["target99_us"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(j["isoroce0"]["justitia"]["params"]["ref_period_us"].get<double>(), 500);
  // Both flows were stopped (each has an end on isoroce1) and run again.
  for (const char* dev : {"isoroce0", "isoroce1"}) {
    EXPECT_EQ(j[dev]["justitia"]["reference"]["running"], true) << j.dump(2);
    EXPECT_GT(j[dev]["justitia"]["reference"]["probes"].get<uint64_t>(), 0u) << j.dump(2);
  }
  // Another policy: no justitia there, isoroce0's flow still probes through it.
  out = run_cmd(ctl + "set-policy isoroce1 tassel", &st);
  EXPECT_EQ(st, 0) << out;
  j = json::parse(run_cmd(ctl + "--json sched", &st), nullptr, false)["sched"];
  EXPECT_FALSE(j["isoroce1"].contains("justitia"));
  EXPECT_EQ(j["isoroce0"]["justitia"]["reference"]["running"], true) << j.dump(2);
  // In use: refused (the engine takes its parameters at creation).
  Verbs v(d.socket(), "isoroce0");
  ASSERT_TRUE(v.ok());
  out = run_cmd(ctl + "set-justitia isoroce0 window=100", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("client(s) have it open"), std::string::npos) << out;
  EXPECT_EQ(d.stop(), 0) << d.log();
}

TEST(JustitiaCtl, WithoutASecondPortTheLogSaysSafeUtilStaysAtMaxRate) {
  // One port and no loopback peer: no reference flow, said at start-up.
  DaemonProcess d({"--port", "net_null0", "--ip", "10.0.0.1/24", "--policy", "justitia"});
  ASSERT_TRUE(d.ok()) << d.log();
  EXPECT_NE(d.log().find("SafeUtil stays at MaxRate"), std::string::npos) << d.log();
  int st;
  json j = json::parse(run_cmd(bin_path("isoroce-ctl") + " --socket " + d.socket() + " --json sched", &st), nullptr,
                       false)["sched"];
  EXPECT_EQ(j["isoroce0"]["justitia"]["reference"]["running"], false) << j.dump(2);
  EXPECT_NE(j["isoroce0"]["justitia"]["reference"]["note"].get<std::string>().find("--loopback"), std::string::npos);
  EXPECT_EQ(d.stop(), 0) << d.log();
}

// Automatic classification on the daemon (issue 19): a QP on isoroce0 that declares
// itself latency-sensitive and sends 1 MB WRITEs to isoroce1, and one created with no
// class that sends 16 B WRITEs one at a time. Expect: under classify = verify the liar
// is reclassified (bandwidth) after 3 messages and the undeclared QP becomes latency;
// under classify = auto the liar is believed and the undeclared QP becomes latency;
// under declared nothing moves and `qp` labels the undeclared QP bandwidth as before.
TEST(JustitiaClassifyDaemon, ALiarIsCaughtUnderVerifyAndAnUndeclaredQpClassifiedUnderAuto) {
  for (const std::string mode : {"verify", "auto", "declared"}) {
    DaemonProcess d({"--loopback", "--policy", "justitia", "--justitia", "classify=" + mode});
    ASSERT_TRUE(d.ok()) << d.log();
    Verbs a(d.socket(), "isoroce0"), b(d.socket(), "isoroce1");
    ASSERT_TRUE(a.ok() && b.ok());
    const uint32_t cq_a = a.create_cq(), cq_b = b.create_cq();
    const uint32_t liar_a = create_qp(a, cq_a, "latency"), liar_b = create_qp(b, cq_b, "latency");
    const uint32_t quiet_a = create_qp(a, cq_a), quiet_b = create_qp(b, cq_b);
    Buffer* buf_a = a.reg(1 << 20, kAll);
    Buffer* buf_b = b.reg(1 << 20, kAll);
    ASSERT_TRUE(liar_a && liar_b && quiet_a && quiet_b && buf_a && buf_b);
    ASSERT_TRUE(a.connect_rc(liar_a, "10.0.0.2", liar_b, 100, 200)["ok"].get<bool>());
    ASSERT_TRUE(b.connect_rc(liar_b, "10.0.0.1", liar_a, 200, 100)["ok"].get<bool>());
    ASSERT_TRUE(a.connect_rc(quiet_a, "10.0.0.2", quiet_b, 300, 400)["ok"].get<bool>());
    ASSERT_TRUE(b.connect_rc(quiet_b, "10.0.0.1", quiet_a, 400, 300)["ok"].get<bool>());
    for (auto [qp, len] : {std::pair{liar_a, 1u << 20}, std::pair{quiet_a, 16u}}) {
      for (int k = 0; k < 5; ++k) {
        ASSERT_TRUE(a.post_send(qp, {{"wr_id", k}, {"opcode", "write"}, {"send_flags", IBV_SEND_SIGNALED},
                                     {"sg", {sge(*buf_a, 0, len)}}, {"remote_addr", buf_b->iova()},
                                     {"rkey", buf_b->rkey}})["ok"].get<bool>());
        auto wc = a.wait(cq_a, 1);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0]["status"], 0) << wc[0].dump();
      }
    }
    const json j = a.call({{"op", "sched"}})["sched"]["isoroce0"]["justitia"];
    EXPECT_EQ(j["params"]["classify"], mode) << j.dump(2);
    const uint64_t want = mode == "verify" ? 2 : mode == "auto" ? 1 : 0;  // the liar (verify), the quiet QP
    EXPECT_EQ(j["reclassified"].get<uint64_t>(), want) << mode << " " << j.dump(2);
    const json q = a.call({{"op", "qp"}, {"qpn", quiet_a}})["qp"];
    EXPECT_EQ(q["class"], mode == "declared" ? "bandwidth" : "auto") << q.dump();
    EXPECT_EQ(d.stop(), 0) << d.log();
  }
}

}  // namespace
}  // namespace isoroce::test
