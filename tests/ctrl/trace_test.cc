// The live trace's operations (ctrl/ops_trace.cc, ctrl/trace_session.h) on
// engines in virtual time: who may trace, one at a time, clear refusals, a
// pingpong's stages in order, overflow counted and never fatal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "tests/ctrl/virtual_fabric.h"
#include "tools/rperf/breakdown.h"

namespace isoroce::ctrl::testing {
namespace {

constexpr uint32_t kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

struct Qp {
  uint32_t cq = 0, qpn = 0, lkey = 0;
};

Qp make_qp(TestClient& c, const std::string& dev, Memory& mem) {
  Qp e;
  EXPECT_TRUE(c.call({{"op", "open"}, {"device", dev}})["ok"]);
  const uint32_t pd = c.call({{"op", "alloc_pd"}})["pd"];
  json r = c.call({{"op", "reg_mr"}, {"pd", pd}, {"length", mem.len}, {"iova", 0x10000}, {"access", kAccess}},
                  {dup(mem.fd)});
  e.lkey = r["lkey"];
  e.cq = c.call({{"op", "create_cq"}, {"cqe", 256}})["cq"];
  r = c.call({{"op", "create_qp"}, {"pd", pd}, {"send_cq", e.cq}, {"recv_cq", e.cq}, {"max_send_wr", 128},
              {"max_recv_wr", 128}});
  EXPECT_TRUE(r["ok"]) << r.dump();
  e.qpn = r["qpn"];
  return e;
}

void connect(TestClient& c, const Qp& me, const Qp& peer, const std::string& peer_ip) {
  for (json attr : {json{{"qp_state", "INIT"}, {"qp_access_flags", kAccess}, {"port_num", 1}, {"pkey_index", 0}},
                    json{{"qp_state", "RTR"}, {"path_mtu", 1024}, {"dest_qp_num", peer.qpn}, {"rq_psn", 0},
                         {"max_dest_rd_atomic", 1}, {"min_rnr_timer", 1}, {"ah_attr", {{"dgid", peer_ip}}}},
                    json{{"qp_state", "RTS"}, {"sq_psn", 0}, {"timeout", 14}, {"retry_cnt", 7}, {"rnr_retry", 7},
                         {"max_rd_atomic", 1}}})
    ASSERT_TRUE(c.call({{"op", "modify_qp"}, {"qpn", me.qpn}, {"attr", attr}})["ok"]);
}

json send(TestClient& c, const Qp& q, uint64_t id, uint32_t len) {
  return c.call({{"op", "post_send"}, {"qpn", q.qpn},
                 {"wr", {{"opcode", "send"}, {"wr_id", id}, {"send_flags", IBV_SEND_SIGNALED},
                         {"sg", {{{"addr", 0x10000}, {"length", len}, {"lkey", q.lkey}}}}}}});
}
json recv(TestClient& c, const Qp& q, uint64_t id) {
  return c.call({{"op", "post_recv"}, {"qpn", q.qpn},
                 {"wr", {{"wr_id", id}, {"sg", {{{"addr", 0x20000}, {"length", 4096}, {"lkey", q.lkey}}}}}}});
}

// The records of a finished trace's memfd.
std::vector<trace::Record> records_of(int fd, uint64_t n) {
  std::vector<trace::Record> rs(n);
  EXPECT_EQ(pread(fd, rs.data(), n * sizeof(trace::Record), 0), static_cast<ssize_t>(n * sizeof(trace::Record)));
  return rs;
}

// Two connected clients on isoroce0 and isoroce1.
struct Pair {
  VirtualFabric f;
  TestClient a{f, 1}, b{f, 2};
  Memory ma{1 << 17}, mb{1 << 17};
  Qp qa, qb;
  Pair() {
    qa = make_qp(a, "isoroce0", ma);
    qb = make_qp(b, "isoroce1", mb);
    connect(a, qa, qb, "10.0.0.2");
    connect(b, qb, qa, "10.0.0.1");
  }
  // n SENDs from a to b, one at a time (each waits for its completion).
  void pingpong(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(recv(b, qb, i)["ok"]);
      ASSERT_TRUE(send(a, qa, i, 256)["ok"]);
      f.run_for(50'000'000);
      ASSERT_EQ(a.call({{"op", "poll_cq"}, {"cq", qa.cq}})["wc"].size(), 1u);
      ASSERT_EQ(b.call({{"op", "poll_cq"}, {"cq", qb.cq}})["wc"].size(), 1u);
    }
  }
};

TEST(Trace, AnUnprivilegedClientMayNotTrace) {
  VirtualFabric f;
  TestClient user(f, 1, 1000);
  for (const char* op : {"trace_start", "trace_stop", "trace_status"}) {
    json r = user.call({{"op", op}, {"seconds", 1}});
    EXPECT_EQ(r["errno"], EPERM) << op << " " << r.dump();
  }
  EXPECT_EQ(f.control().trace(), nullptr);
}

TEST(Trace, BadOptionsAreClearRefusals) {
  VirtualFabric f;
  TestClient c(f, 1);
  json r = c.call({{"op", "trace_start"}, {"seconds", 1}, {"events", "post,bogus"}});
  EXPECT_EQ(r["errno"], EINVAL);
  EXPECT_NE(r["error"].get<std::string>().find("unknown trace event 'bogus'"), std::string::npos) << r.dump();
  EXPECT_NE(r["error"].get<std::string>().find("completion"), std::string::npos) << "lists the known names";
  EXPECT_EQ(c.call({{"op", "trace_start"}, {"seconds", 0}})["errno"], EINVAL);
  EXPECT_EQ(c.call({{"op", "trace_start"}, {"seconds", 601}})["errno"], EINVAL);
  EXPECT_EQ(c.call({{"op", "trace_start"}, {"seconds", "1"}})["errno"], EINVAL);
  EXPECT_EQ(c.call({{"op", "trace_start"}, {"seconds", 1}, {"ring_records", 1}})["errno"], EINVAL);
  EXPECT_EQ(c.call({{"op", "trace_start"}, {"seconds", 1}, {"device", "isoroce9"}})["errno"], ENODEV);
  EXPECT_EQ(c.call({{"op", "trace_stop"}})["errno"], ENOENT);
  EXPECT_EQ(f.control().trace(), nullptr);
}

TEST(Trace, OneAtATimeAndOnlyItsOwnerStopsIt) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  std::vector<int> fds;
  json r = a.call({{"op", "trace_start"}, {"seconds", 5}}, {}, &fds);
  ASSERT_TRUE(r["ok"]) << r.dump();
  ASSERT_EQ(fds.size(), 1u);
  close(fds[0]);
  EXPECT_EQ(r["devices"].size(), 2u);
  EXPECT_EQ(b.call({{"op", "trace_start"}, {"seconds", 1}})["errno"], EBUSY);
  EXPECT_EQ(b.call({{"op", "trace_stop"}})["errno"], EPERM);
  EXPECT_EQ(b.call({{"op", "trace_status"}})["owner"], 1);
  EXPECT_TRUE(a.call({{"op", "trace_stop"}})["ok"]);
  EXPECT_TRUE(b.call({{"op", "trace_start"}, {"seconds", 1}, {"device", "isoroce1"}})["ok"]);
}

TEST(Trace, ATraceEndsAtItsDeadlineAndWithItsOwner) {
  VirtualFabric f;
  TestClient b(f, 2);
  {
    TestClient a(f, 1);
    ASSERT_TRUE(a.call({{"op", "trace_start"}, {"seconds", 0.5}})["ok"]);
    const auto now = TraceSession::Clock::now();
    EXPECT_TRUE(f.control().trace_tick(now));
    EXPECT_FALSE(f.control().trace_tick(now + std::chrono::seconds(1)));  // finished, not yet collected
    ASSERT_NE(f.control().trace(), nullptr);
    EXPECT_FALSE(f.control().trace()->active());
    json r = a.call({{"op", "trace_stop"}});
    EXPECT_TRUE(r["ok"]);
    EXPECT_FALSE(r["active"]);
    ASSERT_TRUE(a.call({{"op", "trace_start"}, {"seconds", 5}})["ok"]);
  }  // a's connection closes
  EXPECT_EQ(f.control().trace(), nullptr);
  EXPECT_TRUE(b.call({{"op", "trace_start"}, {"seconds", 1}})["ok"]);
}

// Expect: for every message of the requester's QP, post <= grant <= frame_tx
// <= the responder's frame_rx <= ack <= completion, all present.
TEST(Trace, APingpongHasEachMessagesStagesInOrder) {
  Pair p;
  std::vector<int> fds;
  ASSERT_TRUE(p.a.call({{"op", "trace_start"}, {"seconds", 5}, {"events", "post,grant,frame_tx,frame_rx,ack,completion"}},
                       {}, &fds)["ok"]);
  p.pingpong(5);
  json r = p.a.call({{"op", "trace_stop"}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["dropped"], 0);
  const std::vector<trace::Record> rs = records_of(fds[0], r["records"]);
  close(fds[0]);
  // Per message of qa (records of one port come in order): the stage times.
  using E = trace::Event;
  std::map<uint32_t, std::map<E, sched::Picos>> msgs;
  int cur = -1;
  for (const trace::Record& x : rs) {
    const bool req = x.port == 0 && x.qp == p.qa.qpn, resp = x.port == 1 && x.qp == p.qb.qpn;
    if (!req && !resp) continue;
    if (req && x.event == E::kPost) cur = static_cast<int>(x.psn);
    if (cur < 0) continue;
    auto& st = msgs[static_cast<uint32_t>(cur)];
    if (!st.count(x.event) && (req || x.event == E::kFrameRx)) st[x.event] = x.time;
  }
  ASSERT_EQ(msgs.size(), 5u);
  for (const auto& [id, st] : msgs) {
    sched::Picos last = 0;
    for (E e : {E::kPost, E::kGrant, E::kFrameTx, E::kFrameRx, E::kAck, E::kCompletion}) {
      ASSERT_TRUE(st.count(e)) << "message " << id << " has no " << trace::name(e);
      EXPECT_LE(last, st.at(e)) << "message " << id << " " << trace::name(e);
      last = st.at(e);
    }
  }
  // isoroce-rperf's breakdown of the same records against the fabric's known
  // schedule: every frame arrives 1 us after it departs, so the wire and the
  // return stage are exactly 1 us each.
  namespace rp = tools::rperf;
  const auto stages = rp::breakdown(rp::messages(rs, {0, p.qa.qpn}, rp::QpRef{1, p.qb.qpn}));
  ASSERT_EQ(stages.size(), 6u);
  EXPECT_EQ(stages[1].name, "wire");
  EXPECT_EQ(stages[1].p.n, 5u);
  EXPECT_DOUBLE_EQ(stages[1].p.p50_ns, 1000);
  EXPECT_DOUBLE_EQ(stages[1].p.max_ns, 1000);
  EXPECT_EQ(stages[3].name, "return");
  EXPECT_DOUBLE_EQ(stages[3].p.p50_ns, 1000);
  EXPECT_DOUBLE_EQ(stages[3].p.max_ns, 1000);
}

TEST(Trace, ATinyRingOverflowsCountedAndTrafficGoesOn) {
  Pair p;
  std::vector<int> fds;
  ASSERT_TRUE(p.a.call({{"op", "trace_start"}, {"seconds", 5}, {"ring_records", 2}}, {}, &fds)["ok"]);
  close(fds[0]);
  p.pingpong(3);  // nobody drains in between: the rings fill
  json r = p.a.call({{"op", "trace_stop"}});
  ASSERT_TRUE(r["ok"]);
  EXPECT_GT(r["dropped"].get<uint64_t>(), 0u);
  // One ring for both devices: the test's thread runs them both (one worker).
  ASSERT_EQ(r["rings"].size(), 1u);
  EXPECT_EQ(r["rings"][0]["ports"], json::array({0, 1}));
  EXPECT_EQ(r["records"], 2);
  EXPECT_EQ(r["rings"][0]["dropped"], r["dropped"]);
  EXPECT_EQ(r["rings"][0]["recorded"], 2);
}

TEST(Trace, MaxRecordsTruncatesAndSaysSo) {
  Pair p;
  std::vector<int> fds;
  ASSERT_TRUE(p.a.call({{"op", "trace_start"}, {"seconds", 5}, {"max_records", 3}}, {}, &fds)["ok"]);
  close(fds[0]);
  p.pingpong(2);
  json r = p.a.call({{"op", "trace_stop"}});
  EXPECT_EQ(r["records"], 3);
  EXPECT_GT(r["truncated"].get<uint64_t>(), 0u);
  EXPECT_EQ(r["dropped"], 0);
}

TEST(Trace, AQpFilterKeepsThatQpOnly) {
  Pair p;
  std::vector<int> fds;
  ASSERT_TRUE(p.a.call({{"op", "trace_start"}, {"seconds", 5}, {"qp", p.qb.qpn}}, {}, &fds)["ok"]);
  p.pingpong(2);
  json r = p.a.call({{"op", "trace_stop"}});
  const auto rs = records_of(fds[0], r["records"]);
  close(fds[0]);
  ASSERT_FALSE(rs.empty());
  for (const auto& x : rs) EXPECT_EQ(x.qp, p.qb.qpn);
}

}  // namespace
}  // namespace isoroce::ctrl::testing
