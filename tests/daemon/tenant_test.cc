// Tenants on the real daemon (issue 19): isoroced --loopback --policy justitia at a
// 1 Gb/s emulated line, tenant "big" with four applications (client connections) of
// one QP each, tenant "small" with one, every QP WRITEing 256 KB messages from
// isoroce0 to isoroce1. "big" comes from create_qp's tenant (what ISOROCE_TENANT
// sends), "small" from `isoroce-ctl set-tenant`; the weights from [[tenant]]. The
// shares are the daemon's own: `sched`'s per-tenant tx_bytes, over a window in which
// every QP has WRITEs queued.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr uint32_t kMsg = 256 * 1024;
constexpr uint32_t kDepth = 64;  // 16 MB a QP: at least 260 ms at 0.5 Gb/s

std::string run_cmd(const std::string& cmd, int* status) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

struct Sender {
  std::unique_ptr<Verbs> v;
  uint32_t cq = 0, qp = 0, peer_qp = 0;
  Buffer* buf = nullptr;
};

// tenant -> tx_bytes on isoroce0, from `sched`.
std::map<std::string, uint64_t> tenant_bytes(Verbs& v, json* view = nullptr) {
  const json s = v.call({{"op", "sched"}})["sched"]["isoroce0"];
  if (view) *view = s;
  std::map<std::string, uint64_t> out;
  for (const json& t : s.value("tenants", json::array())) out[t["tenant"]] = t["tx_bytes"].get<uint64_t>();
  return out;
}

// Receive: tenants big (4 QPs, 4 applications) and small (1 QP), weights from the
// configuration, 64 WRITEs of 256 KB queued on each QP. Expect: over 120 ms with all
// backlogged, small's share of the bytes is small_weight / (1 + small_weight)
// +- 0.1 (per QP round robin would give it 1/5 at equal weights); `sched` lists both
// tenants with their QP counts and weights; `qp` shows a QP's tenant.
void shares_on_the_daemon(uint32_t small_weight, const char* policy = "justitia") {
  const std::string path = "/tmp/isoroce-ten-tenants-" + std::to_string(getpid()) + ".toml";
  FILE* f = fopen(path.c_str(), "w");
  fprintf(f,
          "loopback = true\npolicy = \"%s\"\nlink_gbps = 1\n[justitia]\ntoken_bytes = 65536\n"
          "[[tenant]]\nname = \"big\"\nweight = 1\n[[tenant]]\nname = \"small\"\nweight = %u\n",
          policy, small_weight);
  fclose(f);
  DaemonProcess d({"--config", path});
  ASSERT_TRUE(d.ok()) << d.log();
  Verbs peer(d.socket(), "isoroce1");
  ASSERT_TRUE(peer.ok());
  const uint32_t peer_cq = peer.create_cq(1024);
  Buffer* sink = peer.reg(kMsg, kAll);
  ASSERT_NE(sink, nullptr);
  std::vector<Sender> senders(5);
  for (size_t i = 0; i < senders.size(); ++i) {
    Sender& s = senders[i];
    s.v = std::make_unique<Verbs>(d.socket(), "isoroce0");
    ASSERT_TRUE(s.v->ok());
    s.cq = s.v->create_cq(256);
    json req = {{"op", "create_qp"}, {"pd", s.v->pd()}, {"send_cq", s.cq}, {"recv_cq", s.cq}, {"type", "rc"},
                {"max_send_wr", kDepth}, {"max_recv_wr", 1}, {"max_send_sge", 1}, {"max_recv_sge", 1},
                {"class", "bandwidth"}};
    if (i < 4) req["tenant"] = "big";
    const json r = s.v->call(req);
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    s.qp = r["qpn"].get<uint32_t>();
    s.peer_qp = peer.create_qp(peer_cq);
    s.buf = s.v->reg(kMsg, kAll);
    ASSERT_TRUE(s.peer_qp && s.buf);
    ASSERT_TRUE(s.v->connect_rc(s.qp, "10.0.0.2", s.peer_qp, 100 + i, 900 + i)["ok"].get<bool>());
    ASSERT_TRUE(peer.connect_rc(s.peer_qp, "10.0.0.1", s.qp, 900 + i, 100 + i)["ok"].get<bool>());
  }
  const std::string ctl = bin_path("isoroce-ctl") + " --socket " + d.socket() + " ";
  int st;
  std::string out = run_cmd(ctl + "set-tenant isoroce0/" + std::to_string(senders[4].qp) + " small", &st);
  ASSERT_EQ(st, 0) << out;
  // The reply names the QP with its device and says the policy applies tenants.
  EXPECT_NE(out.find("qp: isoroce0/" + std::to_string(senders[4].qp)), std::string::npos) << out;
  EXPECT_NE(out.find("enforced: true"), std::string::npos) << out;
  out = run_cmd(ctl + "set-tenant isoroce0/" + std::to_string(senders[4].qp) + " bad/name", &st);
  EXPECT_NE(st, 0) << out;
  const json q = senders[0].v->call({{"op", "qp"}, {"qpn", senders[0].qp}, {"device", "isoroce0"}})["qp"];
  EXPECT_EQ(q.value("tenant", ""), "big") << q.dump();
  // Queue every WRITE (small's last: its 16 MB then outlast the window at 2/3 of the
  // line), then measure.
  for (size_t k = 0; k < senders.size(); ++k) {
    Sender& s = senders[k];
    for (uint32_t w = 0; w < kDepth; ++w)
      ASSERT_TRUE(s.v->post_send(s.qp, {{"wr_id", w}, {"opcode", "write"}, {"sg", {sge(*s.buf, 0, kMsg)}},
                                        {"remote_addr", sink->iova()}, {"rkey", sink->rkey}})["ok"]
                      .get<bool>());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const auto b0 = tenant_bytes(*senders[0].v);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  json view;
  const auto b1 = tenant_bytes(*senders[0].v, &view);
  const double big = static_cast<double>(b1.at("big") - b0.at("big"));
  const double small = static_cast<double>(b1.at("small") - b0.at("small"));
  const double want = static_cast<double>(small_weight) / (1 + small_weight);
  EXPECT_NEAR(small / (big + small), want, 0.1) << view.dump(2);
  // Enough traffic for the shares to mean something (at least 16 tokens of 64 KB);
  // how much the worker moves depends on the machine's load, the order of the
  // scheduler's grants does not.
  EXPECT_GT(big + small, 16.0 * 65536) << "too little traffic in the window";
  ASSERT_EQ(view["tenants"].size(), 2u) << view.dump(2);
  for (const json& t : view["tenants"]) {
    EXPECT_EQ(t["qps"], t["tenant"] == "big" ? 4 : 1) << t.dump();
    EXPECT_EQ(t["weight"], t["tenant"] == "big" ? 1 : small_weight) << t.dump();
  }
  std::printf("%s tenant shares (small weight %u): small %.3f, big %.3f, want small %.3f; %.0f Mb/s in the window\n",
              policy, small_weight, small / (big + small), big / (big + small), want, (big + small) * 8 / 0.12 / 1e6);
  EXPECT_EQ(d.stop(), 0) << d.log();
  unlink(path.c_str());
}

TEST(TenantDaemon, FourQpsGetNoMoreThanOneAtEqualWeights) { shares_on_the_daemon(1); }
TEST(TenantDaemon, WeightTwoGetsTwoThirds) { shares_on_the_daemon(2); }
// The same under tassel (its share tree, sched/share_tree.h): the four unlimited QPs
// of "big" against small's one.
TEST(TenantDaemon, TasselFourQpsGetNoMoreThanOneAtEqualWeights) { shares_on_the_daemon(1, "tassel"); }
TEST(TenantDaemon, TasselWeightTwoGetsTwoThirds) { shares_on_the_daemon(2, "tassel"); }

// Receive: isoroced --policy fifo, then rnic (a hardware RNIC's arbitration: no
// tenants), two QPs created in tenant "big" (create_qp's tenant) and one moved by
// `isoroce-ctl set-tenant`. Expect: both accepted and recorded (`qp` shows the
// tenant, `sched` lists it with "enforced": false), set-tenant answers "enforced:
// false", and the daemon logs once per device and tenant that the policy ignores
// tenants, naming the QP as DEVICE/QPN.
TEST(TenantDaemon, FifoAndRnicRecordTenantsAndSayTheyIgnoreThem) {
  for (const char* policy : {"fifo", "rnic"}) {
    DaemonProcess d({"--loopback", "--policy", policy});
    ASSERT_TRUE(d.ok()) << d.log();
    Verbs v(d.socket(), "isoroce0");
    ASSERT_TRUE(v.ok());
    const uint32_t cq = v.create_cq(16);
    std::vector<uint32_t> qps;
    for (int i = 0; i < 3; ++i) {
      json req = {{"op", "create_qp"}, {"pd", v.pd()}, {"send_cq", cq}, {"recv_cq", cq}, {"type", "rc"},
                  {"max_send_wr", 4}, {"max_recv_wr", 1}, {"max_send_sge", 1}, {"max_recv_sge", 1}};
      if (i < 2) req["tenant"] = "big";
      const json r = v.call(req);
      ASSERT_TRUE(r.value("ok", false)) << r.dump();
      qps.push_back(r["qpn"].get<uint32_t>());
    }
    const std::string ctl = bin_path("isoroce-ctl") + " --socket " + d.socket() + " ";
    int st;
    const std::string out = run_cmd(ctl + "set-tenant isoroce0/" + std::to_string(qps[2]) + " small", &st);
    ASSERT_EQ(st, 0) << out;
    EXPECT_NE(out.find("enforced: false"), std::string::npos) << out;
    const json q = v.call({{"op", "qp"}, {"qpn", qps[0]}, {"device", "isoroce0"}})["qp"];
    EXPECT_EQ(q.value("tenant", ""), "big") << q.dump();
    const json s = v.call({{"op", "sched"}})["sched"]["isoroce0"];
    ASSERT_EQ(s["tenants"].size(), 2u) << s.dump(2);
    for (const json& t : s["tenants"]) EXPECT_EQ(t["enforced"], false) << t.dump();
    EXPECT_EQ(d.stop(), 0) << d.log();
    const std::string log = d.log();
    const std::string line = "QP isoroce0/" + std::to_string(qps[0]) + " in tenant 'big': policy " + policy +
                             " models a hardware RNIC, which arbitrates per QP and has no tenants";
    EXPECT_NE(log.find(line), std::string::npos) << log;
    EXPECT_EQ(log.find("QP isoroce0/" + std::to_string(qps[1]) + " in tenant"), std::string::npos) << log;  // once
    EXPECT_NE(log.find("QP isoroce0/" + std::to_string(qps[2]) + " in tenant 'small'"), std::string::npos) << log;
  }
}

// Receive: a [[tenant]] table with a bad weight, an unknown key, a name twice.
// Expect: the daemon refuses to start, naming the setting.
TEST(TenantDaemon, BadTenantTablesNameThemselves) {
  const std::string path = "/tmp/isoroce-ten-badtenants-" + std::to_string(getpid()) + ".toml";
  for (const auto& [table, says] : std::vector<std::pair<std::string, std::string>>{
           {"[[tenant]]\nname = \"a\"\nweight = 0\n", "tenant[0].weight: must be an integer from 1 to 1000000"},
           {"[[tenant]]\nname = \"a\"\ncolour = 1\n", "tenant[0].colour: unknown setting"},
           {"[[tenant]]\nweight = 2\n", "tenant[0].name: missing"},
           {"[[tenant]]\nname = \"a\"\n[[tenant]]\nname = \"a\"\n", "tenant[1].name: 'a' is given twice"}}) {
    FILE* f = fopen(path.c_str(), "w");
    fputs(("loopback = true\n" + table).c_str(), f);
    fclose(f);
    int st;
    const std::string out = run_cmd(daemon_path() + " --check --config " + path, &st);
    EXPECT_NE(st, 0) << table;
    EXPECT_NE(out.find(says), std::string::npos) << out;
  }
  unlink(path.c_str());
}

}  // namespace
}  // namespace isoroce::test
