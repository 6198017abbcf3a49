// The control side's trust boundary (docs/security.md): who may steer which
// QP and change device-wide settings, per-client limits, request ids, and the
// shared-memory path checking handles as the socket does.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "ctrl/protocol.h"
#include "ctrl/protocol_limits.h"
#include "ctrl/shm_abi.h"
#include "tests/ctrl/virtual_fabric.h"

namespace isoroce::ctrl::testing {
namespace {

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// open, a PD, a CQ and an RC QP; the QPN.
uint32_t make_qp(TestClient& c, const std::string& dev = "isoroce0") {
  EXPECT_TRUE(c.call({{"op", "open"}, {"device", dev}})["ok"]);
  const uint32_t pd = c.call({{"op", "alloc_pd"}})["pd"];
  const uint32_t cq = c.call({{"op", "create_cq"}, {"cqe", 16}})["cq"];
  json r = c.call({{"op", "create_qp"}, {"pd", pd}, {"send_cq", cq}, {"recv_cq", cq}});
  EXPECT_TRUE(r["ok"]) << r.dump();
  return r.value("qpn", 0u);
}

TEST(Credentials, AnUnprivilegedClientSteersOnlyItsOwnUsersQps) {
  VirtualFabric f;
  TestClient root(f, 1), user(f, 2, 1000), same_user(f, 3, 1000);
  const uint32_t root_qp = make_qp(root);
  const uint32_t user_qp = make_qp(user);
  // Another user's QP: neither rate nor class, and not seen.
  EXPECT_EQ(same_user.call({{"op", "set_rate"}, {"qpn", root_qp}, {"bps", 8000}})["errno"], EPERM);
  EXPECT_EQ(same_user.call({{"op", "set_class"}, {"qpn", root_qp}, {"class", "latency"}})["errno"], EPERM);
  EXPECT_EQ(same_user.call({{"op", "qp"}, {"qpn", root_qp}})["errno"], EPERM);
  json qps = same_user.call({{"op", "qps"}})["qps"];
  ASSERT_EQ(qps.size(), 1u);
  EXPECT_EQ(qps[0]["qpn"], user_qp);
  // Its own user's, from another connection (isoroce-ctl beside the application): yes.
  EXPECT_TRUE(same_user.call({{"op", "set_rate"}, {"qpn", user_qp}, {"bps", 1000000}})["ok"]);
  // Device-wide settings need privilege.
  EXPECT_EQ(same_user.call({{"op", "set_policy"}, {"device", "isoroce1"}, {"policy", "tassel"}})["errno"], EPERM);
  EXPECT_EQ(same_user.call({{"op", "set_dcqcn"}, {"device", "isoroce1"}, {"params", {"enabled=false"}}})["errno"],
            EPERM);
  // Root steers everyone's and sees everyone's.
  EXPECT_TRUE(root.call({{"op", "set_rate"}, {"qpn", user_qp}, {"bps", 2000000}})["ok"]);
  // (and each device's QP1, the daemon's CM: ctrl/cm_agent.h)
  json all = root.call({{"op", "qps"}})["qps"];
  size_t gsi = 0;
  for (const json& q : all) gsi += q["qpn"] == 1;
  EXPECT_EQ(gsi, 2u);
  EXPECT_EQ(all.size(), 2u + gsi);
  EXPECT_TRUE(root.call({{"op", "set_policy"}, {"device", "isoroce1"}, {"policy", "tassel"}})["ok"]);
}

TEST(Limits, CountsSizesAndMappingsPerClientAndGivenBack) {
  VirtualFabric f;
  ClientLimits lim;
  lim.max_qps = 2;
  lim.max_cqe = 64;
  lim.max_wr = 32;
  lim.max_mappings = 3;
  lim.max_mr_bytes = 1 << 16;
  f.control().set_limits(lim);
  TestClient a(f, 1), b(f, 2);
  ASSERT_TRUE(a.call({{"op", "open"}, {"device", "isoroce0"}})["ok"]);
  const uint32_t pd = a.call({{"op", "alloc_pd"}})["pd"];
  EXPECT_EQ(a.call({{"op", "create_cq"}, {"cqe", 65}})["errno"], EINVAL);
  std::vector<int> got;
  json r = a.call({{"op", "create_cq"}, {"cqe", 64}, {"shm", true}}, {}, &got);  // one mapping
  ASSERT_TRUE(r["ok"]) << r.dump();
  for (int fd : got) close(fd);
  const uint32_t cq = r["cq"];
  EXPECT_EQ(a.call({{"op", "resize_cq"}, {"cq", cq}, {"cqe", 100}})["errno"], EINVAL);
  json qp = {{"op", "create_qp"}, {"pd", pd}, {"send_cq", cq}, {"recv_cq", cq}};
  json big = qp;
  big["max_send_wr"] = 33;
  EXPECT_EQ(a.call(big)["errno"], EINVAL);
  json shm = qp;
  shm["shm"] = true;  // SQ and RQ: two more mappings, three in all
  r = a.call(shm);
  ASSERT_TRUE(r["ok"]) << r.dump();
  const uint32_t q1 = r["qpn"];
  r = a.call(shm);
  EXPECT_EQ(r["errno"], ENOMEM);
  EXPECT_NE(r["error"].get<std::string>().find("limits.max_mappings"), std::string::npos) << r.dump();
  ASSERT_TRUE(a.call(qp)["ok"]);
  r = a.call(qp);
  EXPECT_EQ(r["errno"], ENOMEM);
  EXPECT_NE(r["error"].get<std::string>().find("limits.max_qps"), std::string::npos) << r.dump();
  // Registered bytes: 64 KiB in all.
  Memory m(1 << 17);
  EXPECT_EQ(a.call({{"op", "reg_mr"}, {"pd", pd}, {"length", 1 << 17}, {"access", kAll}}, {dup(m.fd)})["errno"],
            ENOMEM);
  // The limits are each client's: another one has its own.
  EXPECT_NE(make_qp(b), 0u);
  // Destroying gives the room back.
  ASSERT_TRUE(a.call({{"op", "destroy_qp"}, {"qpn", q1}})["ok"]);
  r = a.call(shm);
  EXPECT_TRUE(r["ok"]) << r.dump();
}

TEST(Requests, IdsAreScalarsAndDeepNestingIsRefusedUnparsed) {
  VirtualFabric f;
  TestClient c(f, 1);
  json r = c.call({{"op", "hello"}, {"id", json::array({1, 2})}});
  EXPECT_EQ(r["errno"], EINVAL);
  EXPECT_FALSE(r.contains("id"));
  EXPECT_EQ(c.call({{"op", "hello"}, {"id", "abc"}})["id"], "abc");
  EXPECT_EQ(c.call({{"op", "hello"}, {"id", 12}})["id"], 12);
  // 70,000 levels (what killed the daemon) and one past the limit, against the pre-scan.
  const std::string deep = "{\"op\":\"hello\",\"id\":" + std::string(70000, '[') + std::string(70000, ']') + "}";
  EXPECT_GT(json_depth(deep), kMaxDepth);
  const size_t n = kMaxDepth;
  EXPECT_EQ(json_depth(std::string(n + 1, '[') + std::string(n + 1, ']')), n + 1);
  EXPECT_EQ(json_depth(std::string(n, '[') + std::string(n, ']')), n);
  // Brackets inside strings (escaped quotes too) do not count.
  EXPECT_EQ(json_depth("{\"a\":\"" + std::string(100, '[') + "\\\"[[[\"}"), 1u);
}

TEST(ShmPath, AnotherClientsAhNumberInAnSqRingCompletesInError) {
  VirtualFabric f;
  TestClient owner(f, 1), thief(f, 2);
  ASSERT_TRUE(owner.call({{"op", "open"}, {"device", "isoroce0"}})["ok"]);
  const uint32_t opd = owner.call({{"op", "alloc_pd"}})["pd"];
  json ah = owner.call({{"op", "create_ah"}, {"pd", opd}, {"dgid", "10.0.0.2"}});
  ASSERT_TRUE(ah["ok"]) << ah.dump();
  ASSERT_TRUE(thief.call({{"op", "open"}, {"device", "isoroce0"}})["ok"]);
  const uint32_t pd = thief.call({{"op", "alloc_pd"}})["pd"];
  std::vector<int> fds;
  json cq = thief.call({{"op", "create_cq"}, {"cqe", 16}, {"shm", true}}, {}, &fds);
  ASSERT_EQ(fds.size(), 1u);
  const size_t cq_bytes = shm::queue_bytes(cq["log2_entries"], cq["log2_elem"], true);
  void* cq_ring = mmap(nullptr, cq_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  close(fds[0]);
  fds.clear();
  json qp = thief.call({{"op", "create_qp"}, {"pd", pd}, {"send_cq", cq["cq"]}, {"recv_cq", cq["cq"]}, {"type", "ud"},
                        {"shm", true}},
                       {}, &fds);
  ASSERT_EQ(fds.size(), 2u) << qp.dump();
  const uint32_t log2_entries = qp["sq"]["log2_entries"], log2_elem = qp["sq"]["log2_elem"];
  const size_t sq_bytes = shm::queue_bytes(log2_entries, log2_elem, false);
  void* sq = mmap(nullptr, sq_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  for (int fd : fds) close(fd);
  for (json attr : {json{{"qp_state", "INIT"}, {"qkey", 0x11111111}, {"port_num", 1}, {"pkey_index", 0}},
                    json{{"qp_state", "RTR"}}, json{{"qp_state", "RTS"}, {"sq_psn", 0}}})
    ASSERT_TRUE(thief.call({{"op", "modify_qp"}, {"qpn", qp["qpn"]}, {"attr", attr}})["ok"]);
  rxe_send_wqe w{};
  w.wr.wr_id = 3;
  w.wr.opcode = IBV_WR_SEND;
  w.wr.send_flags = IBV_SEND_SIGNALED;
  w.wr.wr.ud.ah_num = ah["ah"];  // the owner's
  w.wr.wr.ud.remote_qpn = 0x100010;
  w.wr.wr.ud.remote_qkey = 0x11111111;
  std::memcpy(shm::element(sq, 0, log2_elem), &w, sizeof w);
  shm::producer(sq).store(1, std::memory_order_release);
  f.run_for(10'000'000);
  ASSERT_EQ(shm::producer(cq_ring).load(std::memory_order_acquire), 1u);
  ib_uverbs_wc wc;
  std::memcpy(&wc, shm::element(cq_ring, 0, cq["log2_elem"]), sizeof wc);
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_QP_OP_ERR);
  EXPECT_EQ(f.device(0).engine().counters().tx_frames, 0u);
  munmap(sq, sq_bytes);
  munmap(cq_ring, cq_bytes);
}

}  // namespace
}  // namespace isoroce::ctrl::testing
