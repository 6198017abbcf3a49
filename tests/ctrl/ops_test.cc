// The control socket's operations run without a socket and without EAL: a
// Control over two engines in virtual time (virtual_fabric.h), each request
// handed to Control::handle as the session server would.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/ctrl/virtual_fabric.h"

namespace isoroce::ctrl::testing {
namespace {

constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

struct End {
  uint32_t pd = 0, cq = 0, qpn = 0, lkey = 0, rkey = 0;
};

// open, alloc_pd, reg_mr (mem), create_cq, create_qp over the socket's operations.
End make_end(TestClient& c, const std::string& dev, Memory& mem, bool shm = false) {
  End e;
  EXPECT_TRUE(c.call({{"op", "open"}, {"device", dev}})["ok"]);
  json r = c.call({{"op", "alloc_pd"}});
  e.pd = r["pd"];
  r = c.call({{"op", "reg_mr"}, {"pd", e.pd}, {"length", mem.len}, {"iova", 0x10000}, {"access", kAll}},
             {dup(mem.fd)});
  EXPECT_TRUE(r["ok"]) << r.dump();
  e.lkey = r["lkey"];
  e.rkey = r["rkey"];
  r = c.call({{"op", "create_cq"}, {"cqe", 64}});
  EXPECT_TRUE(r["ok"]) << r.dump();
  e.cq = r["cq"];
  r = c.call({{"op", "create_qp"}, {"pd", e.pd}, {"send_cq", e.cq}, {"recv_cq", e.cq}, {"shm", shm}});
  EXPECT_TRUE(r["ok"]) << r.dump();
  e.qpn = r["qpn"];
  return e;
}

void connect(TestClient& c, const End& me, const End& peer, const std::string& peer_gid) {
  for (json attr : {json{{"qp_state", "INIT"}, {"qp_access_flags", kAll}, {"port_num", 1}, {"pkey_index", 0}},
                    json{{"qp_state", "RTR"}, {"path_mtu", 1024}, {"dest_qp_num", peer.qpn}, {"rq_psn", 0},
                         {"max_dest_rd_atomic", 1}, {"min_rnr_timer", 1}, {"ah_attr", {{"dgid", peer_gid}}}},
                    json{{"qp_state", "RTS"}, {"sq_psn", 0}, {"timeout", 14}, {"retry_cnt", 7}, {"rnr_retry", 7},
                         {"max_rd_atomic", 1}}}) {
    json r = c.call({{"op", "modify_qp"}, {"qpn", me.qpn}, {"attr", attr}});
    ASSERT_TRUE(r["ok"]) << r.dump();
  }
}

TEST(OpTable, HelpListsEveryOperationWithItsText) {
  VirtualFabric f;
  TestClient c(f, 1);
  json r = c.call({{"op", "help"}});
  ASSERT_TRUE(r["ok"]);
  std::set<std::string> names;
  for (const json& op : r["ops"]) {
    names.insert(op["op"].get<std::string>());
    EXPECT_FALSE(op["help"].get<std::string>().empty()) << op.dump();
  }
  for (const char* n : {"hello", "open", "alloc_pd", "reg_mr", "create_qp", "post_send", "set_rate", "set_policy",
                        "resize_cq", "get_async_events", "help", "alloc_mw", "dealloc_mw", "set_tenant", "cm_channel",
                        "cm_connect", "cm_get_event", "cm_migrate_id"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(names.size(), 58u);  // 41 verbs and admin operations, 17 rdma_cm ones (ops_cm.cc)
}

// Memory windows are their client's: another client cannot free one, and
// any key of the window (binds change the low 8 bits) names it for its owner.
TEST(OpTable, MemoryWindowsBelongToTheirClient) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  ASSERT_TRUE(a.call({{"op", "open"}, {"device", "isoroce0"}})["ok"]);
  ASSERT_TRUE(b.call({{"op", "open"}, {"device", "isoroce0"}})["ok"]);
  json pd = a.call({{"op", "alloc_pd"}});
  ASSERT_TRUE(pd["ok"]);
  json mw = a.call({{"op", "alloc_mw"}, {"pd", pd["pd"]}, {"type", 2}});
  ASSERT_TRUE(mw["ok"]) << mw.dump();
  const uint32_t rkey = mw["rkey"].get<uint32_t>();
  EXPECT_EQ(a.call({{"op", "alloc_mw"}, {"pd", pd["pd"]}, {"type", 3}})["errno"], EINVAL);
  EXPECT_EQ(b.call({{"op", "dealloc_mw"}, {"rkey", rkey}})["errno"], EINVAL);
  EXPECT_EQ(a.call({{"op", "dealloc_pd"}, {"pd", pd["pd"]}})["errno"], EBUSY);
  EXPECT_TRUE(a.call({{"op", "dealloc_mw"}, {"rkey", (rkey & ~0xffu) | ((rkey + 7) & 0xffu)}})["ok"]);
  EXPECT_EQ(a.call({{"op", "dealloc_mw"}, {"rkey", rkey}})["errno"], EINVAL);
  EXPECT_TRUE(a.call({{"op", "dealloc_pd"}, {"pd", pd["pd"]}})["ok"]);
}

TEST(OpTable, DeviceOperationsNeedOpenAndUnknownOnesAreRefused) {
  VirtualFabric f;
  TestClient c(f, 1);
  json r = c.call({{"op", "alloc_pd"}, {"id", 7}});
  EXPECT_EQ(r["errno"], ENODEV);
  EXPECT_EQ(r["id"], 7);
  EXPECT_EQ(c.call({{"op", "frobnicate"}})["errno"], EOPNOTSUPP);
  EXPECT_EQ(c.call({{"op", 5}})["errno"], EPROTO);
  ASSERT_TRUE(c.call({{"op", "open"}, {"device", "isoroce0"}})["ok"]);
  EXPECT_EQ(c.call({{"op", "frobnicate"}})["errno"], EOPNOTSUPP);
  // A field of the wrong type is a refusal, not an exception out of the handler.
  EXPECT_EQ(c.call({{"op", "create_qp"}, {"type", 3}})["errno"], EINVAL);
  EXPECT_EQ(c.call({{"op", "open"}, {"device", "isoroce1"}})["errno"], EBUSY);
}

TEST(Ops, RdmaWriteBetweenTwoClientsInVirtualTime) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  End ea = make_end(a, "isoroce0", ma), eb = make_end(b, "isoroce1", mb);
  connect(a, ea, eb, "10.0.0.2");
  connect(b, eb, ea, "10.0.0.1");
  std::memset(ma.data, 0x5a, 4096);
  json r = a.call({{"op", "post_send"}, {"qpn", ea.qpn},
                   {"wr", {{"opcode", "write"}, {"wr_id", 9}, {"send_flags", IBV_SEND_SIGNALED}, {"remote_addr", 0x10000 + 8192},
                           {"rkey", eb.rkey}, {"sg", {{{"addr", 0x10000}, {"length", 4096}, {"lkey", ea.lkey}}}}}}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  f.run_for(100'000'000);  // 100 us
  r = a.call({{"op", "poll_cq"}, {"cq", ea.cq}});
  ASSERT_EQ(r["wc"].size(), 1u) << r.dump();
  EXPECT_EQ(r["wc"][0]["status"], 0);
  EXPECT_EQ(r["wc"][0]["wr_id"], 9);
  EXPECT_EQ(mb.data[8192], 0x5a);
  EXPECT_EQ(mb.data[8192 + 4095], 0x5a);
  EXPECT_EQ(mb.data[8192 + 4096], 0);
  // The views see both clients' QPs, with their owners (and each device's
  // QP1, the daemon's CM: ctrl/cm_agent.h).
  r = a.call({{"op", "qps"}});
  json clients = json::array();
  for (const json& q : r["qps"])
    if (q["qpn"] != 1) clients.push_back(q);
  EXPECT_EQ(r["qps"].size(), clients.size() + 2);
  ASSERT_EQ(clients.size(), 2u);
  EXPECT_EQ(clients[0]["client"], 1);
}

TEST(Ops, HandlesOfAnotherClientAreRefused) {
  VirtualFabric f;
  TestClient a(f, 1), b(f, 2);
  Memory ma(1 << 16), mb(1 << 16);
  End ea = make_end(a, "isoroce0", ma), eb = make_end(b, "isoroce0", mb);
  EXPECT_EQ(b.call({{"op", "destroy_qp"}, {"qpn", ea.qpn}})["errno"], EINVAL);
  EXPECT_EQ(b.call({{"op", "poll_cq"}, {"cq", ea.cq}})["errno"], EINVAL);
  EXPECT_EQ(b.call({{"op", "dereg_mr"}, {"lkey", ea.lkey}})["errno"], EINVAL);
  json ah = a.call({{"op", "create_ah"}, {"pd", ea.pd}, {"dgid", "10.0.0.2"}});
  ASSERT_TRUE(ah["ok"]) << ah.dump();
  json r = b.call({{"op", "post_send"}, {"qpn", eb.qpn}, {"wr", {{"opcode", "send"}, {"ah", ah["ah"]}}}});
  EXPECT_EQ(r["errno"], EINVAL);
  EXPECT_NE(r["error"].get<std::string>().find("not an AH of this client"), std::string::npos);
}

TEST(Ops, ReclaimDestroysEverythingAClientMade) {
  VirtualFabric f;
  Memory m(1 << 16);
  {
    TestClient a(f, 1);
    make_end(a, "isoroce0", m, true);
    EXPECT_EQ(f.device(0).sessions, 1u);
  }
  EXPECT_EQ(f.device(0).sessions, 0u);
  // Only the daemon's own QP1 (the CM) is left.
  const auto left = f.device(0).engine().qp_numbers();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].value(), CmAgent::kQpn);
  EXPECT_TRUE(f.device(0).pump->empty());
  TestClient b(f, 2);
  for (const json& q : b.call({{"op", "qps"}})["qps"]) EXPECT_EQ(q["qpn"], 1);
}

TEST(Ops, SetPolicyReplacesTheEngineOfAnUnusedDevice) {
  VirtualFabric f;
  TestClient op(f, 1), user(f, 2);
  ASSERT_TRUE(user.call({{"op", "open"}, {"device", "isoroce1"}})["ok"]);
  EXPECT_EQ(op.call({{"op", "set_policy"}, {"device", "isoroce1"}, {"policy", "tassel"}})["errno"], EBUSY);
  json r = op.call({{"op", "set_policy"}, {"device", "isoroce0"}, {"policy", "tassel"}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["policy"], "tassel");
  EXPECT_EQ(f.device(0).config().policy, "tassel");
  EXPECT_EQ(op.call({{"op", "set_policy"}, {"device", "isoroce0"}, {"policy", "nope"}})["errno"], EINVAL);
}

}  // namespace
}  // namespace isoroce::ctrl::testing
