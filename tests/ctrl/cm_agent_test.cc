// Two devices of one daemon (engines in virtual time) connect through their
// CM agents: REQ/REP/RTU and DREQ/DREP as real UD packets on QP1, events out
// through the agents' queues and eventfds; a REQ for nobody is rejected on
// the wire; a client's ids all go with destroy_owner.
#include <gtest/gtest.h>
#include <poll.h>

#include "tests/ctrl/virtual_fabric.h"
#include "transport/cm/rdma_cm_header.h"

namespace isoroce::ctrl::testing {
namespace {

constexpr sched::Picos kMs = 1'000'000'000;
const uint64_t kSid = cm::rdma_cm_service_id(cm::kPsTcp, 7471);

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// Every event the agent has, checking the eventfd said so.
std::vector<cm::Event> events(CmAgent& a) {
  const bool ready = readable(a.event_fd());
  auto ev = a.take_events();
  EXPECT_EQ(ready, !ev.empty());
  EXPECT_FALSE(readable(a.event_fd()));
  return ev;
}

cm::ConnectParams params(const DeviceEntry& to) {
  cm::ConnectParams p;
  p.peer_gid = to.config().ip;
  p.service_id = kSid;
  p.qpn = 0x1234;
  p.starting_psn = 0x42;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.remote_cm_response_timeout = 10;  // 4 ms
  p.max_cm_retries = 3;
  cm::RdmaCmHeader h;
  h.src = cm::RdmaCmAddr::from_gid(p.peer_gid);
  h.dst = h.src;
  p.private_data = cm::build_rdma_cm_private_data(h, {}, cm::kReqPrivateData);
  return p;
}

TEST(CmAgent, TwoDevicesConnectAndDisconnectOverQp1) {
  VirtualFabric f(2);
  DeviceEntry& d0 = f.device(0);
  DeviceEntry& d1 = f.device(1);
  ASSERT_TRUE(d0.cm && d1.cm);
  EXPECT_TRUE(f.control().registry().find(&d0, 1).has_value());
  cm::Id listen = 0, a = 0;
  d1.run([&](sched::Picos) { ASSERT_EQ(d1.cm->listen(7, kSid, &listen), 0); });
  d0.run([&](sched::Picos now) { ASSERT_EQ(d0.cm->connect(5, params(d1), now, &a), 0); });
  f.run_for(1 * kMs);
  auto ev = events(*d1.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kReqReceived);
  EXPECT_EQ(ev[0].owner, 7u);
  EXPECT_EQ(ev[0].peer.qpn, 0x1234u);
  EXPECT_EQ(ev[0].peer.gid, d0.config().ip);
  auto hdr = cm::parse_rdma_cm_header(ev[0].private_data);
  ASSERT_TRUE(hdr);
  const cm::Id b = ev[0].id;
  cm::AcceptParams ap;
  ap.qpn = 0x5678;
  ap.starting_psn = 0x99;
  d1.run([&](sched::Picos now) { ASSERT_EQ(d1.cm->accept(b, ap, now), 0); });
  f.run_for(1 * kMs);
  ev = events(*d0.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kRepReceived);
  EXPECT_EQ(ev[0].id, a);
  EXPECT_EQ(ev[0].owner, 5u);
  EXPECT_EQ(ev[0].peer.qpn, 0x5678u);
  EXPECT_EQ(ev[0].peer.starting_psn, 0x99u);
  d0.run([&](sched::Picos now) { ASSERT_EQ(d0.cm->establish(a, {}, now), 0); });
  f.run_for(1 * kMs);
  ev = events(*d1.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kEstablished);
  // Disconnect from the passive side this time.
  d1.run([&](sched::Picos now) { ASSERT_EQ(d1.cm->disconnect(b, {}, now), 0); });
  f.run_for(1 * kMs);
  ev = events(*d0.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kDreqReceived);
  d0.run([&](sched::Picos now) { ASSERT_EQ(d0.cm->disconnect(a, {}, now), 0); });
  f.run_for(1 * kMs);
  ev = events(*d0.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kDisconnected);
  ev = events(*d1.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kDisconnected);
  // Timewait ends by the agents' own timers (next_deadline).
  f.run_for(200 * kMs);
  EXPECT_EQ(events(*d0.cm).size(), 1u);
  EXPECT_EQ(events(*d1.cm).size(), 1u);
  CmAgentStats s0, s1;
  d0.run([&](sched::Picos) { s0 = d0.cm->stats(); });
  d1.run([&](sched::Picos) { s1 = d1.cm->stats(); });
  EXPECT_EQ(s0.sent, 3u);  // REQ, RTU, DREP
  EXPECT_EQ(s1.sent, 2u);  // REP, DREQ
  EXPECT_EQ(s0.received, 2u);
  EXPECT_EQ(s1.received, 3u);
  EXPECT_EQ(s0.manager.retransmits + s1.manager.retransmits, 0u);
  EXPECT_EQ(s0.manager.malformed + s1.manager.malformed, 0u);
  EXPECT_EQ(s0.send_errors + s1.send_errors + s0.unresolved + s1.unresolved, 0u);
  // The stats view carries them (telemetry and isoroce-ctl read it).
  TestClient c(f, 1);
  json st = c.call({{"op", "stats"}});
  ASSERT_TRUE(st["ok"]) << st.dump();
  EXPECT_EQ(st["stats"]["isoroce0"]["cm"]["sent"], 3);
  EXPECT_EQ(st["stats"]["isoroce1"]["cm"]["established"], 1);
  EXPECT_EQ(st["stats"]["isoroce1"]["cm"]["malformed"], 0);
}

TEST(CmAgent, NoListenerIsRejectedOnTheWireAndRetriesTime) {
  VirtualFabric f(2);
  DeviceEntry& d0 = f.device(0);
  DeviceEntry& d1 = f.device(1);
  cm::Id a = 0;
  d0.run([&](sched::Picos now) { ASSERT_EQ(d0.cm->connect(5, params(d1), now, &a), 0); });
  f.run_for(1 * kMs);
  auto ev = events(*d0.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kRejected);
  EXPECT_EQ(ev[0].reason, cm::RejReason::kInvalidServiceId);
  // To an address nobody has: unresolved, the REQ's retries run out.
  cm::ConnectParams p = params(d1);
  p.peer_gid = wire::ipv4_mapped(0x0a000063);
  d0.run([&](sched::Picos now) { ASSERT_EQ(d0.cm->connect(5, p, now, &a), 0); });
  f.run_for(2000 * kMs);
  ev = events(*d0.cm);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, cm::EventType::kUnreachable);
}

TEST(CmAgent, DestroyOwnerClosesEverythingOfAClient) {
  VirtualFabric f(2);
  DeviceEntry& d0 = f.device(0);
  DeviceEntry& d1 = f.device(1);
  cm::Id listen = 0;
  d1.run([&](sched::Picos) { ASSERT_EQ(d1.cm->listen(7, kSid, &listen), 0); });
  for (uint32_t i = 0; i < 3; ++i) {
    cm::Id a = 0;
    cm::ConnectParams p = params(d1);
    p.qpn = 0x100 + i;
    d0.run([&](sched::Picos now) { ASSERT_EQ(d0.cm->connect(5, p, now, &a), 0); });
  }
  f.run_for(1 * kMs);
  auto ev = events(*d1.cm);
  ASSERT_EQ(ev.size(), 3u);
  for (const auto& e : ev) d1.run([&](sched::Picos now) { ASSERT_EQ(d1.cm->accept(e.id, {}, now), 0); });
  f.run_for(1 * kMs);
  ev = events(*d0.cm);
  ASSERT_EQ(ev.size(), 3u);
  for (const auto& e : ev) d0.run([&](sched::Picos now) { ASSERT_EQ(d0.cm->establish(e.id, {}, now), 0); });
  f.run_for(1 * kMs);
  EXPECT_EQ(events(*d1.cm).size(), 3u);
  // The client of owner 5 goes: its three connections send DREQ.
  size_t n = 0;
  d0.run([&](sched::Picos now) { n = d0.cm->destroy_owner(5, now); });
  EXPECT_EQ(n, 3u);
  f.run_for(1 * kMs);
  ev = events(*d1.cm);
  ASSERT_EQ(ev.size(), 3u);
  for (const auto& e : ev) EXPECT_EQ(e.type, cm::EventType::kDreqReceived);
  EXPECT_TRUE(events(*d0.cm).empty());  // destroyed ids report nothing
}

}  // namespace
}  // namespace isoroce::ctrl::testing
