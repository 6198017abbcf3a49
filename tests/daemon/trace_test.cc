// The live trace of a real isoroced (`isoroce-ctl trace`, docs/profiling.md):
// a SEND pingpong between the two ports of --loopback traced while it runs,
// each message's stages present in order; a tiny ring overflows, reported and
// not fatal; bad arguments exit 2 with a message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <thread>

#include "sched/trace.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"
#include "tools/rperf/breakdown.h"

namespace isoroce::test {
namespace {

constexpr uint32_t kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

// Runs cmd (stderr folded in), its output and exit status.
std::string run(const std::string& cmd, int* status) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (f && fgets(buf, sizeof buf, f)) out += buf;
  const int st = f ? pclose(f) : -1;
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::vector<trace::Record> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<trace::Record> rs(text.size() / sizeof(trace::Record));
  std::memcpy(rs.data(), text.data(), rs.size() * sizeof(trace::Record));
  return rs;
}

class LiveTrace : public DaemonSuite {
 protected:
  static void SetUpTestSuite() { start({"--loopback", "--policy", "fifo", "--link-gbps", "10"}); }
  std::string ctl() const { return bin_path("isoroce-ctl") + " --socket " + daemon_->socket() + " trace "; }

  // n SENDs of 256 B from isoroce0 to isoroce1, one at a time, while `cmd` runs.
  struct Ids {
    uint32_t qa = 0, qb = 0;
  };
  Ids pingpong_during(const std::string& cmd, int n, std::string* out, int* status) {
    Verbs a(daemon_->socket(), "isoroce0"), b(daemon_->socket(), "isoroce1");
    const uint32_t ca = a.create_cq(), cb = b.create_cq();
    Ids ids{a.create_qp(ca), b.create_qp(cb)};
    Buffer* ba = a.reg(1 << 16, kAccess);
    Buffer* bb = b.reg(1 << 16, kAccess);
    EXPECT_TRUE(a.connect_rc(ids.qa, "10.0.0.2", ids.qb, 0, 0)["ok"].get<bool>());
    EXPECT_TRUE(b.connect_rc(ids.qb, "10.0.0.1", ids.qa, 0, 0)["ok"].get<bool>());
    std::thread tracer([&] { *out = run(cmd, status); });
    // Traffic starts once every device's ring is attached.
    for (int i = 0; i < 500 && !a.call({{"op", "trace_status"}}).value("active", false); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (int i = 0; i < n; ++i) {
      EXPECT_TRUE(b.post_recv(ids.qb, {{"wr_id", i}, {"sg", {sge(*bb, 0, 4096)}}})["ok"].get<bool>());
      EXPECT_TRUE(a.post_send(ids.qa, {{"wr_id", i}, {"opcode", "send"}, {"send_flags", IBV_SEND_SIGNALED},
                                       {"sg", {sge(*ba, 0, 256)}}})["ok"].get<bool>());
      EXPECT_EQ(a.wait(ca, 1).size(), 1u);
      EXPECT_EQ(b.wait(cb, 1).size(), 1u);
    }
    tracer.join();
    return ids;
  }

};

TEST_F(LiveTrace, APingpongHasEachMessagesStagesWithNonDecreasingTimes) {
  const std::string raw = daemon_->socket() + ".trace", json_out = daemon_->socket() + ".json";
  std::string out;
  int status = -1;
  const Ids ids = pingpong_during(ctl() + "--seconds 1.5 --raw --out " + raw, 20, &out, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("0 dropped"), std::string::npos) << out;
  const auto rs = read_raw(raw);
  namespace rp = tools::rperf;
  const auto msgs = rp::messages(rs, {0, ids.qa}, rp::QpRef{1, ids.qb});
  ASSERT_EQ(msgs.size(), 20u) << out;
  // On a failure, the two QPs' records up to the message's completion, by time.
  auto records_until = [&](sched::Picos end) {
    std::string s;
    for (const auto& r : rs)
      if (((r.port == 0 && r.qp == ids.qa) || (r.port == 1 && r.qp == ids.qb)) && r.time <= end)
        s += std::to_string(r.time) + " port " + std::to_string(r.port) + " " +
             std::string(trace::kEventNames[static_cast<std::size_t>(r.event)]) + " psn " + std::to_string(r.psn) +
             " a " + std::to_string(r.a) + "\n";
    return s;
  };
  for (const auto& m : msgs) {
    ASSERT_TRUE(m.grant && m.tx && m.resp_rx && m.resp_ack_tx && m.ack && m.completion)
        << records_until(m.completion.value_or(m.post)) << "message " << m.id << ": grant " << m.grant.has_value() << " tx " << m.tx.has_value() << " resp_rx "
        << m.resp_rx.has_value() << " resp_ack_tx " << m.resp_ack_tx.has_value() << " ack " << m.ack.has_value()
        << " completion " << m.completion.has_value();
    EXPECT_LE(m.post, *m.grant) << m.id;
    EXPECT_LE(*m.grant, *m.tx) << m.id;
    EXPECT_LE(*m.tx, *m.resp_rx) << m.id;
    EXPECT_LE(*m.resp_rx, *m.resp_ack_tx) << m.id;
    EXPECT_LE(*m.resp_ack_tx, *m.ack) << m.id;
    EXPECT_LE(*m.ack, *m.completion) << m.id;
  }
  // isoroce-rperf reads the same file.
  out = run(bin_path("isoroce-rperf") + " " + raw + " --wire 0:" + std::to_string(ids.qa) + " --peer 1:" +
                std::to_string(ids.qb) + " --json",
            &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["messages"], 20) << out;
  std::remove(raw.c_str());
}

TEST_F(LiveTrace, ATinyRingOverflowsReportedNotFatal) {
  const std::string path = daemon_->socket() + ".tiny.json";
  std::string out;
  int status = -1;
  pingpong_during(ctl() + "--seconds 1 --ring 2 --out " + path, 50, &out, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("dropped (ring full"), std::string::npos) << out;
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_GT(j["otherData"]["dropped"].get<uint64_t>(), 0u);
  std::remove(path.c_str());
}

TEST_F(LiveTrace, BadEventsOrAnUnwritableFileExitTwoWithAMessage) {
  int status = -1;
  std::string out = run(ctl() + "--seconds 1 --out /tmp/x.json --events post,bogus", &status);
  EXPECT_EQ(status, 2);
  EXPECT_NE(out.find("unknown trace event 'bogus'"), std::string::npos) << out;
  out = run(ctl() + "--seconds 1 --out /nonexistent/dir/x.json", &status);
  EXPECT_EQ(status, 2);
  EXPECT_NE(out.find("cannot write '/nonexistent/dir/x.json'"), std::string::npos) << out;
  out = run(ctl() + "--seconds 9999 --out /tmp/x.json", &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("seconds"), std::string::npos) << out;
}

}  // namespace
}  // namespace isoroce::test
