// The CM state machine between two Managers in virtual time: the happy path,
// the loss of each message, retries running out, rejects, duplicates, MRA,
// stale connections, a peer that dies mid-handshake, SIDR.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/transport/cm/fabric.h"

namespace isoroce::cm::test {
namespace {

constexpr uint64_t kSid = 0x0000000001064853ull;  // rdma_cm TCP port 18515
constexpr Picos kStep = 30 * kMilli;               // longer than every retry sequence of the tests

State state_of(Node& n, Id id) {
  State s = State::kIdle;
  EXPECT_TRUE(n.m.state(id, &s));
  return s;
}

struct Connected {
  Id listen = 0, a = 0, b = 0;
};

// B listens, A connects, B accepts, A establishes: ids of both ends.
Connected connect(Fabric& f, uint64_t sid = kSid) {
  Connected c;
  EXPECT_EQ(f.b->m.listen(77, sid, &c.listen), 0);
  EXPECT_EQ(f.a->m.connect(55, connect_params(f.b->gid, sid), f.now, &c.a), 0);
  EXPECT_TRUE(f.wait(*f.b, EventType::kReqReceived));
  auto reqs = f.b->of(EventType::kReqReceived);
  EXPECT_EQ(reqs.size(), 1u);
  if (reqs.empty()) return c;
  c.b = reqs[0].id;
  EXPECT_EQ(f.b->m.accept(c.b, accept_params(), f.now), 0);
  EXPECT_TRUE(f.wait(*f.a, EventType::kRepReceived));
  EXPECT_EQ(f.a->count(EventType::kRepReceived), 1u);
  EXPECT_EQ(f.a->m.establish(c.a, {}, f.now), 0);
  EXPECT_TRUE(f.wait(*f.b, EventType::kEstablished));
  EXPECT_EQ(f.b->count(EventType::kEstablished), 1u);
  return c;
}

void disconnect(Fabric& f, const Connected& c) {
  EXPECT_EQ(f.a->m.disconnect(c.a, {}, f.now), 0);
  EXPECT_TRUE(f.wait(*f.b, EventType::kDreqReceived));
  ASSERT_EQ(f.b->count(EventType::kDreqReceived), 1u);
  EXPECT_EQ(f.b->m.disconnect(c.b, {}, f.now), 0);
  EXPECT_TRUE(f.run_until([&] { return f.a->count(EventType::kDisconnected) && f.b->count(EventType::kDisconnected); }));
  EXPECT_EQ(f.a->count(EventType::kDisconnected), 1u);
  EXPECT_EQ(f.b->count(EventType::kDisconnected), 1u);
}

TEST(CmManager, HappyPathCarriesEveryParameter) {
  Fabric f;
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(77, kSid, &listen), 0);
  ASSERT_EQ(f.a->m.connect(55, connect_params(f.b->gid, kSid), f.now, &a), 0);
  EXPECT_EQ(state_of(*f.a, a), State::kReqSent);
  ASSERT_TRUE(f.wait(*f.b, EventType::kReqReceived));
  // Receive REQ / Expect: a new id of the listener's owner with A's parameters.
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  const Event& r = reqs[0];
  EXPECT_EQ(r.owner, 77u);
  EXPECT_EQ(r.listen_id, listen);
  EXPECT_NE(r.id, listen);
  EXPECT_EQ(r.peer.gid, f.a->gid);
  EXPECT_EQ(r.peer.qpn, 0x11u);
  EXPECT_EQ(r.peer.starting_psn, 0x123456u);
  EXPECT_EQ(r.peer.comm_id, a);
  EXPECT_EQ(r.peer.service_id, kSid);
  EXPECT_EQ(r.peer.responder_resources, 4);
  EXPECT_EQ(r.peer.initiator_depth, 2);
  EXPECT_EQ(r.peer.retry_count, 6);
  EXPECT_EQ(r.peer.rnr_retry_count, 5);
  EXPECT_EQ(r.peer.path_mtu, 3);
  EXPECT_EQ(r.peer.qp_type, QpType::kRc);
  ASSERT_EQ(r.private_data.size(), kReqPrivateData);
  EXPECT_EQ(r.private_data[0], 1);
  EXPECT_EQ(r.private_data[3], 4);
  EXPECT_EQ(r.private_data[4], 0);
  EXPECT_EQ(state_of(*f.b, r.id), State::kReqRcvd);
  // Accept / Expect: A gets B's parameters.
  ASSERT_EQ(f.b->m.accept(r.id, accept_params(), f.now), 0);
  EXPECT_EQ(state_of(*f.b, r.id), State::kRepSent);
  ASSERT_TRUE(f.wait(*f.a, EventType::kRepReceived));
  auto reps = f.a->of(EventType::kRepReceived);
  ASSERT_EQ(reps.size(), 1u);
  EXPECT_EQ(reps[0].id, a);
  EXPECT_EQ(reps[0].owner, 55u);
  EXPECT_EQ(reps[0].peer.qpn, 0x22u);
  EXPECT_EQ(reps[0].peer.starting_psn, 0x654321u);
  EXPECT_EQ(reps[0].peer.comm_id, r.id);
  EXPECT_EQ(reps[0].peer.responder_resources, 2);
  EXPECT_EQ(reps[0].peer.initiator_depth, 4);
  EXPECT_EQ(reps[0].peer.rnr_retry_count, 6);
  ASSERT_EQ(reps[0].private_data.size(), kRepPrivateData);
  EXPECT_EQ(reps[0].private_data[0], 9);
  // RTU / Expect: both established, no retransmission anywhere.
  ASSERT_EQ(f.a->m.establish(a, {}, f.now), 0);
  EXPECT_EQ(state_of(*f.a, a), State::kEstablished);
  ASSERT_TRUE(f.wait(*f.b, EventType::kEstablished));
  EXPECT_EQ(f.b->count(EventType::kEstablished), 1u);
  EXPECT_EQ(state_of(*f.b, r.id), State::kEstablished);
  EXPECT_EQ(f.a->m.stats().retransmits + f.b->m.stats().retransmits, 0u);
  EXPECT_EQ(f.a->sent_count(AttrId::kReq), 1u);
  EXPECT_EQ(f.b->sent_count(AttrId::kRep), 1u);
  EXPECT_EQ(f.a->sent_count(AttrId::kRtu), 1u);
  // Disconnect: DREQ, DREP, timewait, its end.
  disconnect(f, {listen, a, r.id});
  EXPECT_EQ(state_of(*f.a, a), State::kTimewait);
  EXPECT_EQ(state_of(*f.b, r.id), State::kTimewait);
  f.run_for(100 * kMilli);
  EXPECT_EQ(f.a->count(EventType::kTimewaitExit), 1u);
  EXPECT_EQ(f.b->count(EventType::kTimewaitExit), 1u);
  EXPECT_EQ(f.a->m.destroy(a, f.now), 0);
  EXPECT_EQ(f.b->m.destroy(r.id, f.now), 0);
  EXPECT_EQ(f.a->m.live_ids(), 0u);
  EXPECT_EQ(f.b->m.live_ids(), 1u);  // the listener
  EXPECT_EQ(f.a->m.stats().malformed + f.b->m.stats().malformed, 0u);
}

// Losing the first copy of each message: the handshake and the disconnect
// still complete, by retransmission, and every event comes exactly once.
class CmLoss : public ::testing::TestWithParam<AttrId> {};

TEST_P(CmLoss, FirstCopyLostIsRecovered) {
  Fabric f;
  const AttrId lost = GetParam();
  f.drop = [lost](AttrId a, int k) { return a == lost && k == 0; };
  Connected c = connect(f);
  EXPECT_EQ(state_of(*f.a, c.a), State::kEstablished);
  EXPECT_EQ(state_of(*f.b, c.b), State::kEstablished);
  disconnect(f, c);
  EXPECT_EQ(f.dropped, 1u);
  EXPECT_GE(f.a->m.stats().retransmits + f.b->m.stats().retransmits, 1u);
  for (Node* n : {f.a.get(), f.b.get()}) {
    EXPECT_LE(n->count(EventType::kReqReceived), 1u);
    EXPECT_EQ(n->count(EventType::kUnreachable), 0u);
    EXPECT_EQ(n->count(EventType::kRejected), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(EachMessage, CmLoss,
                         ::testing::Values(AttrId::kReq, AttrId::kRep, AttrId::kRtu, AttrId::kDreq, AttrId::kDrep),
                         [](const auto& info) { return std::string(attr_name(static_cast<uint16_t>(info.param))); });

// SIDR with its request or its reply lost once.
class CmSidrLoss : public ::testing::TestWithParam<int> {};

TEST_P(CmSidrLoss, Resolves) {
  Fabric f;
  const int which = GetParam();  // 0: nothing lost, 1: SIDR_REQ, 2: SIDR_REP
  f.drop = [which](AttrId a, int k) {
    return k == 0 && ((which == 1 && a == AttrId::kSidrReq) || (which == 2 && a == AttrId::kSidrRep));
  };
  const uint64_t sid = 0x0000000001110007ull;  // rdma_cm UDP port 7
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(3, sid, &listen), 0);
  SidrParams p;
  p.peer_gid = f.b->gid;
  p.service_id = sid;
  p.timeout = Fabric::kTimeout;
  p.max_retries = 3;
  p.private_data = {5, 6};
  ASSERT_EQ(f.a->m.sidr_resolve(4, p, f.now, &a), 0);
  ASSERT_TRUE(f.wait(*f.b, EventType::kSidrReqReceived));
  auto reqs = f.b->of(EventType::kSidrReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].owner, 3u);
  EXPECT_EQ(reqs[0].peer.service_id, sid);
  ASSERT_EQ(reqs[0].private_data.size(), kSidrReqPrivateData);
  EXPECT_EQ(reqs[0].private_data[1], 6);
  SidrReplyParams rp;
  rp.qpn = 0x4321;
  rp.qkey = kRdmaUdpQkey;
  rp.private_data = {1};
  ASSERT_EQ(f.b->m.sidr_reply(reqs[0].id, rp, f.now), 0);
  ASSERT_TRUE(f.wait(*f.a, EventType::kSidrRepReceived));
  f.run_for(kStep);
  auto reps = f.a->of(EventType::kSidrRepReceived);
  ASSERT_EQ(reps.size(), 1u);
  EXPECT_EQ(reps[0].id, a);
  EXPECT_EQ(reps[0].owner, 4u);
  EXPECT_EQ(reps[0].sidr_status, SidrStatus::kValid);
  EXPECT_EQ(reps[0].sidr_qpn, 0x4321u);
  EXPECT_EQ(reps[0].sidr_qkey, kRdmaUdpQkey);
  EXPECT_EQ(f.b->count(EventType::kSidrReqReceived), 1u);  // the retry was a duplicate
  EXPECT_EQ(f.a->count(EventType::kUnreachable), 0u);
  EXPECT_EQ(state_of(*f.a, a), State::kIdle);
  f.run_for(100 * kMilli);
  EXPECT_EQ(f.b->m.live_ids(), 1u);  // the reply's record ended with timewait
}

INSTANTIATE_TEST_SUITE_P(EachMessage, CmSidrLoss, ::testing::Values(0, 1, 2));

TEST(CmManager, SidrForNobodyGetsServiceIdNotSupported) {
  Fabric f;
  Id a = 0;
  SidrParams p;
  p.peer_gid = f.b->gid;
  p.service_id = 99;
  p.timeout = Fabric::kTimeout;
  ASSERT_EQ(f.a->m.sidr_resolve(4, p, f.now, &a), 0);
  f.run_for(kStep);
  auto reps = f.a->of(EventType::kSidrRepReceived);
  ASSERT_EQ(reps.size(), 1u);
  EXPECT_EQ(reps[0].sidr_status, SidrStatus::kServiceIdNotSupported);
  EXPECT_EQ(f.b->m.stats().no_listener, 1u);
}

TEST(CmManager, SidrRetriesRunOut) {
  Fabric f;
  f.drop = [](AttrId a, int) { return a == AttrId::kSidrReq; };
  Id a = 0;
  SidrParams p;
  p.peer_gid = f.b->gid;
  p.service_id = 99;
  p.timeout = Fabric::kTimeout;
  p.max_retries = 2;
  ASSERT_EQ(f.a->m.sidr_resolve(4, p, f.now, &a), 0);
  f.run_for(kStep);
  EXPECT_EQ(f.a->sent_count(AttrId::kSidrReq), 3u);
  EXPECT_EQ(f.a->count(EventType::kUnreachable), 1u);
}

TEST(CmManager, ReqRetriesRunOutIntoUnreachable) {
  Fabric f;
  f.drop = [](AttrId a, int) { return a == AttrId::kReq; };
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &listen), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  f.run_for(kStep);
  EXPECT_EQ(f.a->sent_count(AttrId::kReq), 4u);  // the first and max_cm_retries (3) more
  auto ev = f.a->of(EventType::kUnreachable);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].id, a);
  EXPECT_EQ(ev[0].reason, RejReason::kTimeout);
  EXPECT_EQ(state_of(*f.a, a), State::kIdle);
  EXPECT_EQ(f.a->m.stats().timeouts, 1u);
  EXPECT_EQ(f.a->sent_count(AttrId::kRej), 1u);  // the REJ (timeout) telling B
  // Timing: four tries ~1 ms apart, no more.
  EXPECT_EQ(f.a->m.next_deadline(), kNoDeadline);
}

TEST(CmManager, PeerDiesAfterReq) {
  // A sends its REQ and is never heard again: B's REP retries run out.
  Fabric f;
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &listen), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  f.run_for(kStep);
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  f.a->m.destroy(a, f.now);                 // its REJ ...
  f.drop = [](AttrId, int) { return true; };  // ... and everything after is lost: A is gone
  ASSERT_EQ(f.b->m.accept(reqs[0].id, accept_params(), f.now), 0);
  f.run_for(kStep);
  EXPECT_EQ(f.b->sent_count(AttrId::kRep), 4u);
  EXPECT_EQ(f.b->count(EventType::kUnreachable), 1u);
  EXPECT_EQ(f.b->count(EventType::kEstablished), 0u);
  EXPECT_EQ(state_of(*f.b, reqs[0].id), State::kTimewait);
}

TEST(CmManager, PeerDiesAfterRep) {
  // B accepted and A never sends RTU nor anything else: B gives up, A is told.
  Fabric f;
  f.drop = [](AttrId a, int) { return a == AttrId::kRep; };
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &listen), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  f.run_for(kStep);
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  ASSERT_EQ(f.b->m.accept(reqs[0].id, accept_params(), f.now), 0);
  f.run_for(kStep);
  // Both sides time out; each learns it (unreachable, or the other's REJ).
  EXPECT_EQ(f.a->count(EventType::kEstablished) + f.b->count(EventType::kEstablished), 0u);
  EXPECT_EQ(f.a->count(EventType::kUnreachable) + f.a->count(EventType::kRejected), 1u);
  EXPECT_EQ(f.b->count(EventType::kUnreachable) + f.b->count(EventType::kRejected), 1u);
}

TEST(CmManager, DreqRetriesRunOut) {
  Fabric f;
  Connected c = connect(f);
  f.drop = [](AttrId a, int) { return a == AttrId::kDreq; };
  ASSERT_EQ(f.a->m.disconnect(c.a, {}, f.now), 0);
  f.run_for(kStep);
  auto ev = f.a->of(EventType::kDisconnected);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].timed_out);
  EXPECT_EQ(f.a->sent_count(AttrId::kDreq), 4u);
  EXPECT_EQ(state_of(*f.a, c.a), State::kTimewait);
}

TEST(CmManager, NoListenerIsInvalidServiceId) {
  Fabric f;
  Id a = 0;
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  f.run_for(kStep);
  auto ev = f.a->of(EventType::kRejected);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].reason, RejReason::kInvalidServiceId);
  EXPECT_EQ(static_cast<int>(ev[0].reason), 8);
  EXPECT_EQ(f.b->m.stats().no_listener, 1u);
  EXPECT_EQ(f.b->m.live_ids(), 0u);
  EXPECT_EQ(state_of(*f.a, a), State::kIdle);
  EXPECT_EQ(f.a->sent_count(AttrId::kReq), 1u);  // no retry after a REJ
}

TEST(CmManager, ConsumerRejectWithPrivateData) {
  Fabric f;
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &listen), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  f.run_for(kStep);
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  RejectParams rp;
  rp.private_data = {'n', 'o', '!'};
  ASSERT_EQ(f.b->m.reject(reqs[0].id, rp, f.now), 0);
  f.run_for(kStep);
  auto ev = f.a->of(EventType::kRejected);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(static_cast<int>(ev[0].reason), 28);
  ASSERT_EQ(ev[0].private_data.size(), kRejPrivateData);
  EXPECT_EQ(std::memcmp(ev[0].private_data.data(), "no!", 3), 0);
  EXPECT_EQ(f.a->m.stats().rejected_received, 1u);
  // Too much private data is refused, not truncated.
  RejectParams big;
  big.private_data.assign(kRejPrivateData + 1, 1);
  Id a2 = 0;
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a2), 0);
  f.run_for(kStep);
  auto reqs2 = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs2.size(), 2u);
  EXPECT_EQ(f.b->m.reject(reqs2[1].id, big, f.now), EINVAL);
}

TEST(CmManager, DuplicateReqWhileUnansweredGetsMra) {
  Fabric f;
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &listen), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  f.run_for(2 * kMilli);  // REQ retransmitted once (period ~1 ms) while B's consumer sleeps
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_GE(f.b->m.stats().duplicates, 1u);
  EXPECT_EQ(f.b->sent_count(AttrId::kMra), 1u);
  EXPECT_EQ(f.a->count(EventType::kMraReceived), 1u);
  EXPECT_EQ(state_of(*f.a, a), State::kMraReqRcvd);
  // The MRA's service timeout (2^23 * 4 us ~ 34 s) keeps A waiting far longer
  // than its own retries (4 ms): the consumer answers after 1 s.
  f.run_for(1000 * kMilli);
  EXPECT_EQ(f.a->count(EventType::kUnreachable), 0u);
  ASSERT_EQ(f.b->m.accept(reqs[0].id, accept_params(), f.now), 0);
  ASSERT_TRUE(f.wait(*f.a, EventType::kRepReceived));
  ASSERT_EQ(f.a->count(EventType::kRepReceived), 1u);
  ASSERT_EQ(f.a->m.establish(a, {}, f.now), 0);
  ASSERT_TRUE(f.wait(*f.b, EventType::kEstablished));
  EXPECT_EQ(f.b->count(EventType::kEstablished), 1u);
}

TEST(CmManager, ExplicitMraExtendsTheWait) {
  Fabric f;
  Id listen = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &listen), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  f.run_for(100 * kMicro);
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  ASSERT_EQ(f.b->m.send_mra(reqs[0].id, 14, {}, f.now), 0);  // ~67 ms
  f.run_for(40 * kMilli);
  EXPECT_EQ(f.a->count(EventType::kUnreachable), 0u);
  EXPECT_EQ(f.a->sent_count(AttrId::kReq), 1u);  // no retransmission while MRAed
  f.run_for(100 * kMilli);                       // the extension runs out
  EXPECT_EQ(f.a->count(EventType::kUnreachable), 1u);
}

TEST(CmManager, DuplicateMessagesAreAnsweredAgainNotDelivered) {
  Fabric f;
  Connected c = connect(f);
  const auto& req = f.a->sent.front();
  ASSERT_EQ(wire::load_be16(req.data() + 16), static_cast<uint16_t>(AttrId::kReq));
  // A late copy of the REQ: no second connection.
  f.inject(*f.b, f.a->gid, req);
  f.run_for(kStep);
  EXPECT_EQ(f.b->count(EventType::kReqReceived), 1u);
  // A late copy of the REP: A answers with its RTU again, no second event.
  std::vector<uint8_t> rep;
  for (const auto& s : f.b->sent)
    if (wire::load_be16(s.data() + 16) == static_cast<uint16_t>(AttrId::kRep)) rep = s;
  ASSERT_FALSE(rep.empty());
  const size_t rtus = f.a->sent_count(AttrId::kRtu);
  f.inject(*f.a, f.b->gid, rep);
  EXPECT_EQ(f.a->sent_count(AttrId::kRtu), rtus + 1);
  f.run_for(kStep);
  EXPECT_EQ(f.a->count(EventType::kRepReceived), 1u);
  EXPECT_EQ(f.b->count(EventType::kEstablished), 1u);
  // A copy of the DREQ after the disconnect: DREP again, no second event.
  disconnect(f, c);
  std::vector<uint8_t> dreq;
  for (const auto& s : f.a->sent)
    if (wire::load_be16(s.data() + 16) == static_cast<uint16_t>(AttrId::kDreq)) dreq = s;
  const size_t dreps = f.b->sent_count(AttrId::kDrep);
  f.inject(*f.b, f.a->gid, dreq);
  EXPECT_EQ(f.b->sent_count(AttrId::kDrep), dreps + 1);
  EXPECT_EQ(f.b->count(EventType::kDreqReceived), 1u);
  EXPECT_GE(f.a->m.stats().duplicates + f.b->m.stats().duplicates, 3u);
}

TEST(CmManager, CrossedDreqsBothClose) {
  Fabric f;
  Connected c = connect(f);
  ASSERT_EQ(f.a->m.disconnect(c.a, {}, f.now), 0);
  ASSERT_EQ(f.b->m.disconnect(c.b, {}, f.now), 0);
  f.run_for(kStep);
  EXPECT_EQ(f.a->count(EventType::kDisconnected), 1u);
  EXPECT_EQ(f.b->count(EventType::kDisconnected), 1u);
  EXPECT_EQ(state_of(*f.a, c.a), State::kTimewait);
  EXPECT_EQ(state_of(*f.b, c.b), State::kTimewait);
}

TEST(CmManager, StaleConnectionIsRejectedAndTheOldOneClosed) {
  Fabric f;
  Connected c = connect(f);
  // A restarts (a new Manager, same GID) and connects from the same QPN.
  ManagerConfig cfg;
  cfg.local_gid = f.a->gid;
  cfg.seed = 999;
  f.a = std::make_unique<Node>(cfg);
  Id a2 = 0;
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a2), 0);
  f.run_for(kStep);
  auto ev = f.a->of(EventType::kRejected);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].reason, RejReason::kStaleConnection);
  EXPECT_EQ(f.b->m.stats().stale, 1u);
  // B closed the old connection: its DREQ found no connection at the new A,
  // whose DREP (12.9.8.4) ends it.
  EXPECT_EQ(f.b->count(EventType::kDisconnected), 1u);
  EXPECT_EQ(state_of(*f.b, c.b), State::kTimewait);
}

TEST(CmManager, DestroyInEveryStateSaysWhatTheStateNeeds) {
  Fabric f;
  Connected c = connect(f);
  // Established: destroy sends DREQ; B's consumer answers; no event on A.
  ASSERT_EQ(f.a->m.destroy(c.a, f.now), 0);
  f.run_for(kStep);
  ASSERT_EQ(f.b->count(EventType::kDreqReceived), 1u);
  ASSERT_EQ(f.b->m.disconnect(c.b, {}, f.now), 0);
  f.run_for(100 * kMilli);
  EXPECT_EQ(f.a->count(EventType::kDisconnected), 0u);
  EXPECT_EQ(f.a->m.live_ids(), 0u);  // erased after timewait
  // REQ received, not answered: destroy rejects it (consumer reject).
  Id a2 = 0;
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a2), 0);
  f.run_for(kStep);
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 2u);
  ASSERT_EQ(f.b->m.destroy(reqs[1].id, f.now), 0);
  f.run_for(kStep);
  auto rej = f.a->of(EventType::kRejected);
  ASSERT_EQ(rej.size(), 1u);
  EXPECT_EQ(rej[0].reason, RejReason::kConsumerReject);
  // destroy_owner ends every id of an owner, listeners included.
  // (the listener and the connection it gave, idle after timewait).
  EXPECT_EQ(f.b->m.destroy_owner(77, f.now), 2u);
  Id x = 0;
  EXPECT_EQ(f.b->m.listen(78, kSid, &x), 0);  // the service ID is free again
  EXPECT_EQ(f.b->m.destroy(c.b, f.now), ENOENT);
  EXPECT_EQ(f.b->m.live_ids(), 2u);  // the new listener, the rejected REQ in timewait
}

TEST(CmManager, CommandsCheckStatesAndParameters) {
  Fabric f;
  Id l = 0, l2 = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &l), 0);
  EXPECT_EQ(f.b->m.listen(1, kSid, &l2), EBUSY);
  EXPECT_EQ(f.b->m.accept(l, accept_params(), f.now), EPROTO);
  EXPECT_EQ(f.b->m.accept(12345, accept_params(), f.now), ENOENT);
  auto p = connect_params(f.b->gid, kSid);
  p.qpn = 1u << 24;
  EXPECT_EQ(f.a->m.connect(1, p, f.now, &a), EINVAL);
  p = connect_params(f.b->gid, kSid);
  p.path_mtu = 6;
  EXPECT_EQ(f.a->m.connect(1, p, f.now, &a), EINVAL);
  p = connect_params(f.b->gid, kSid);
  p.private_data.assign(kReqPrivateData + 1, 0);
  EXPECT_EQ(f.a->m.connect(1, p, f.now, &a), EINVAL);
  ASSERT_EQ(f.a->m.connect(1, connect_params(f.b->gid, kSid), f.now, &a), 0);
  EXPECT_EQ(f.a->m.establish(a, {}, f.now), EPROTO);  // no REP yet
  EXPECT_EQ(f.b->m.disconnect(l, {}, f.now), EPROTO);  // a listener
  EXPECT_EQ(f.a->m.disconnect(12345, {}, f.now), ENOENT);
  EXPECT_EQ(f.a->m.live_ids(), 1u);
}

// rdma_disconnect while our REQ is unanswered, as on Linux: 0, nothing on the
// wire, and the handshake's own outcome is the next event.
TEST(CmManager, DisconnectWhileReqUnansweredLeavesTheOutcomeToTheHandshake) {
  Fabric f;
  Id l = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &l), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  ASSERT_TRUE(f.wait(*f.b, EventType::kReqReceived));  // the first copy, before any retry
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  const size_t sent = f.a->sent.size();
  EXPECT_EQ(f.a->m.disconnect(a, {}, f.now), 0);
  EXPECT_EQ(f.b->m.disconnect(reqs[0].id, {}, f.now), 0);  // the passive side too
  f.run_for(kMicro);
  EXPECT_EQ(f.a->sent.size(), sent) << "no DREQ, no REJ";
  EXPECT_EQ(state_of(*f.a, a), State::kReqSent);
  EXPECT_EQ(state_of(*f.b, reqs[0].id), State::kReqRcvd);
  EXPECT_TRUE(f.a->events.empty());
  // B answers after all: A gets the REP (its consumer's QP in ERR then fails
  // RTR: librdmacm's CONNECT_ERROR) and destroys: REJ for the REP.
  ASSERT_EQ(f.b->m.accept(reqs[0].id, accept_params(), f.now), 0);
  ASSERT_TRUE(f.wait(*f.a, EventType::kRepReceived));
  EXPECT_EQ(f.a->m.disconnect(a, {}, f.now), 0);  // REP received: still nothing
  EXPECT_EQ(state_of(*f.a, a), State::kRepRcvd);
  ASSERT_EQ(f.a->m.destroy(a, f.now), 0);
  ASSERT_TRUE(f.wait(*f.b, EventType::kRejected));
  EXPECT_EQ(f.b->of(EventType::kRejected)[0].reason, RejReason::kConsumerReject);
  EXPECT_EQ(f.b->count(EventType::kEstablished), 0u);
}

TEST(CmManager, DisconnectWhileReqUnansweredThenNoAnswerIsUnreachable) {
  Fabric f;
  f.drop = [](AttrId a, int) { return a == AttrId::kReq; };
  Id l = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &l), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  EXPECT_EQ(f.a->m.disconnect(a, {}, f.now), 0);
  f.run_for(kStep);
  EXPECT_EQ(f.a->sent_count(AttrId::kReq), 4u);  // the REQ went on being retried
  EXPECT_EQ(f.a->count(EventType::kUnreachable), 1u);
  EXPECT_EQ(f.a->sent_count(AttrId::kDreq), 0u);
}

// The active side gives up a REQ the passive side holds unanswered (destroyed
// id, as rdma_destroy_id after rdma_disconnect): REJ "timeout" carrying its
// CA GUID, found by (GID, comm ID), and the passive consumer is told.
TEST(CmManager, WithdrawnReqReachesThePassiveConsumer) {
  Fabric f;
  Id l = 0, a = 0;
  ASSERT_EQ(f.b->m.listen(1, kSid, &l), 0);
  ASSERT_EQ(f.a->m.connect(2, connect_params(f.b->gid, kSid), f.now, &a), 0);
  ASSERT_TRUE(f.wait(*f.b, EventType::kReqReceived));  // A knows no ID of B's yet (no MRA)
  auto reqs = f.b->of(EventType::kReqReceived);
  ASSERT_EQ(reqs.size(), 1u);
  ASSERT_EQ(f.a->m.destroy(a, f.now), 0);
  f.run_for(kStep);
  ASSERT_EQ(f.a->sent_count(AttrId::kRej), 1u);
  const auto& rej = *msg_cast<RejMsg>(f.a->sent.back().data());
  EXPECT_EQ(rej.reason(), static_cast<uint16_t>(RejReason::kTimeout));
  EXPECT_EQ(rej.message_rejected(), static_cast<uint8_t>(MsgKind::kOther));
  EXPECT_EQ(rej.remote_comm_id(), 0u);
  ASSERT_EQ(rej.ari_length(), 8u);
  EXPECT_EQ(wire::load_be64(rej.ari), f.a->m.config().ca_guid);
  auto ev = f.b->of(EventType::kRejected);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].id, reqs[0].id);
  EXPECT_EQ(ev[0].reason, RejReason::kTimeout);
  EXPECT_EQ(f.b->m.accept(reqs[0].id, accept_params(), f.now), EPROTO);
  EXPECT_EQ(f.b->m.stats().unmatched, 0u);
  // A REJ "timeout" from another GID names nobody.
  auto stray = make_msg<RejMsg>(AttrId::kRej, 1);
  stray.set_local_comm_id(ev[0].peer.comm_id);
  stray.set_reason(static_cast<uint16_t>(RejReason::kTimeout));
  const auto* p = reinterpret_cast<const uint8_t*>(&stray);
  f.inject(*f.b, v4_gid(10, 0, 0, 9), std::vector<uint8_t>(p, p + kMadBytes));
  EXPECT_EQ(f.b->m.stats().unmatched, 1u);
}

TEST(CmManager, ReqFloodIsBounded) {
  ManagerConfig cfg;
  cfg.local_gid = v4_gid(10, 0, 0, 2);
  cfg.max_pending_reqs = 4;
  Manager m(cfg);
  Id l = 0;
  ASSERT_EQ(m.listen(1, kSid, &l), 0);
  for (uint32_t i = 0; i < 100; ++i) {
    auto r = make_msg<ReqMsg>(AttrId::kReq, i);
    r.set_local_comm_id(1000 + i);
    r.set_service_id(kSid);
    r.set_local_qpn(100 + i);
    r.set_path_mtu(3);
    m.on_mad(v4_gid(10, 0, 0, 9), kGsiQpn, std::span(reinterpret_cast<const uint8_t*>(&r), kMadBytes), 0);
  }
  EXPECT_EQ(m.live_ids(), 5u);  // the listener and 4 pending
  EXPECT_EQ(m.stats().overload, 96u);
  size_t rejs = 0;
  OutMad out;
  while (m.pop_mad(&out)) {
    const auto* rej = msg_cast<RejMsg>(out.bytes.data());
    EXPECT_EQ(rej->hdr.attr_id(), static_cast<uint16_t>(AttrId::kRej));
    EXPECT_EQ(rej->reason(), static_cast<uint16_t>(RejReason::kNoResources));
    ++rejs;
  }
  EXPECT_EQ(rejs, 96u);
}

}  // namespace
}  // namespace isoroce::cm::test
