// libisoroce-rdmacm called directly (this test links it and libisoroce-verbs):
// the symbol map against the installed librdmacm, event channels (poll,
// epoll, blocking and O_NONBLOCK), addresses and ports, reject with private
// data, what is not supported, and a client that dies with a connection up.
// Against one `isoroced --loopback` (isoroce0 10.0.0.1, isoroce1 10.0.0.2).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "ctrl/client.h"
#include "tests/daemon/daemon_suite.h"
#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

using Sym = std::tuple<std::string, std::string, bool>;
std::set<Sym> exported(const std::string& lib) {
  std::set<Sym> out;
  FILE* p = popen(("objdump -T " + lib).c_str(), "r");
  if (p == nullptr) return out;
  char line[512];
  while (fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string addr, bind, type, section, size, version, name;
    if (!(in >> addr >> bind)) continue;
    if (bind != "g" && bind != "w") continue;
    if (!(in >> type >> section >> size >> version >> name)) continue;
    if ((type != "DF" && type != "DO") || section == "*UND*") continue;
    const bool hidden = version.front() == '(';
    if (hidden) version = version.substr(1, version.size() - 2);
    if (version.rfind("RDMACM_", 0) != 0) continue;
    out.emplace(name, version, !hidden);
  }
  pclose(p);
  return out;
}

TEST(CmSymbols, EveryLibrdmacmNameIsOursWithItsVersion) {
  const std::set<Sym> system = exported("/usr/lib/x86_64-linux-gnu/librdmacm.so.1");
  const std::set<Sym> ours = exported(ISOROCE_RDMACM_LIB);
  ASSERT_GT(system.size(), 60u) << "objdump -T of the installed librdmacm";
  for (const Sym& s : system)
    EXPECT_TRUE(ours.count(s)) << std::get<0>(s) << "@" << std::get<1>(s) << " is not defined by libisoroce-rdmacm";
  for (const Sym& s : ours)
    EXPECT_TRUE(system.count(s)) << std::get<0>(s) << "@" << std::get<1>(s) << " is not a librdmacm name";
}

class CmApi : public DaemonSuite {
 protected:
  static void SetUpTestSuite() {
    start({"--loopback"});
    setenv("ISOROCE_SOCKET", daemon_->socket().c_str(), 1);
  }
  void TearDown() override {
    if (HasFailure()) std::printf("daemon log:\n%s\n", daemon_->log().c_str());
  }

  static sockaddr_in v4(const char* ip, uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
  }
  // A listener on 10.0.0.2:port (isoroce1) on channel sch, and, when cid is
  // given, an id on cch whose address resolution from 10.0.0.1 towards it is
  // under way (its ADDR_RESOLVED is cch's next event).
  static void listen_and_resolve(uint16_t port, rdma_event_channel* sch, rdma_cm_id** listener,
                                 rdma_event_channel* cch = nullptr, rdma_cm_id** cid = nullptr) {
    ASSERT_EQ(rdma_create_id(sch, listener, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in la = v4("10.0.0.2", port);
    ASSERT_EQ(rdma_bind_addr(*listener, reinterpret_cast<sockaddr*>(&la)), 0);
    ASSERT_EQ(rdma_listen(*listener, 4), 0);
    if (cid == nullptr) return;
    ASSERT_EQ(rdma_create_id(cch, cid, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in src = v4("10.0.0.1", 0);
    ASSERT_EQ(rdma_resolve_addr(*cid, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&la), 2000), 0);
  }
  // The next event of ch within timeout_ms (channel made non-blocking here).
  static rdma_cm_event* next_event(rdma_event_channel* ch, int timeout_ms = 5000) {
    pollfd p{ch->fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return nullptr;
    rdma_cm_event* e = nullptr;
    return rdma_get_cm_event(ch, &e) == 0 ? e : nullptr;
  }
};

TEST_F(CmApi, EventChannelWorksWithPollEpollBlockingAndNonBlocking) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  // Non-blocking: nothing yet is EAGAIN, and poll/epoll see nothing.
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd p{ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev), 0);
  EXPECT_EQ(epoll_wait(ep, &ev, 1, 0), 0);

  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, this, RDMA_PS_TCP), 0);
  sockaddr_in src = v4("10.0.0.1", 0), dst = v4("10.0.0.2", 9);
  ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  EXPECT_EQ(epoll_wait(ep, &ev, 1, 5000), 1);
  EXPECT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_EQ(rdma_get_cm_event(ch, &e), 0);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(e->id, id);
  EXPECT_EQ(e->status, 0);
  EXPECT_EQ(rdma_ack_cm_event(e), 0);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  // The id is on isoroce0 (the source address's device), an isoroce context.
  ASSERT_NE(id->verbs, nullptr);
  EXPECT_STREQ(ibv_get_device_name(id->verbs->device), "isoroce0");
  EXPECT_NE(id->pd, nullptr);
  EXPECT_NE(rdma_get_src_port(id), 0);
  EXPECT_EQ(ntohs(rdma_get_dst_port(id)), 9);
  char text[64];
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(rdma_get_local_addr(id))->sin_addr, text, sizeof text);
  EXPECT_STREQ(text, "10.0.0.1");
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(id))->sin_addr, text, sizeof text);
  EXPECT_STREQ(text, "10.0.0.2");

  // Blocking again: rdma_get_cm_event waits for ROUTE_RESOLVED.
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) & ~O_NONBLOCK), 0);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  ASSERT_EQ(rdma_get_cm_event(ch, &e), 0);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_STREQ(rdma_event_str(e->event), "RDMA_CM_EVENT_ROUTE_RESOLVED");
  rdma_ack_cm_event(e);
  close(ep);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(ch);
}

TEST_F(CmApi, BindsAnyAddressAndPortZeroAndRefusesForeignAddresses) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in any = v4("0.0.0.0", 0);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any)), 0);
  EXPECT_NE(rdma_get_src_port(id), 0) << "port 0 binds an ephemeral port";
  ASSERT_EQ(rdma_listen(id, 8), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);

  // IPv6 wildcard.
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in6 any6{};
  any6.sin6_family = AF_INET6;
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any6)), 0);
  EXPECT_NE(rdma_get_src_port(id), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);

  // An address no isoroce device has.
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in foreign = v4("10.77.0.1", 0);
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&foreign)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  EXPECT_EQ(rdma_destroy_id(id), 0);

  // A port taken by a listener.
  rdma_cm_id* a = nullptr;
  rdma_cm_id* b = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &a, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(nullptr, &b, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in fixed = v4("10.0.0.1", 19999);
  ASSERT_EQ(rdma_bind_addr(a, reinterpret_cast<sockaddr*>(&fixed)), 0);
  ASSERT_EQ(rdma_listen(a, 1), 0);
  EXPECT_EQ(rdma_bind_addr(b, reinterpret_cast<sockaddr*>(&fixed)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  rdma_destroy_id(b);
  rdma_destroy_id(a);
}

TEST_F(CmApi, GetaddrinfoGivesPassiveAndActiveAddresses) {
  rdma_addrinfo hints{};
  rdma_addrinfo* res = nullptr;
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  ASSERT_EQ(rdma_getaddrinfo("10.0.0.2", "7471", &hints, &res), 0);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_dst_addr, nullptr);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(ntohs(reinterpret_cast<sockaddr_in*>(res->ai_src_addr)->sin_port), 7471);
  rdma_freeaddrinfo(res);
  hints = {};
  hints.ai_port_space = RDMA_PS_UDP;
  ASSERT_EQ(rdma_getaddrinfo("fd00::5", "99", &hints, &res), 0);
  ASSERT_NE(res->ai_dst_addr, nullptr);
  EXPECT_EQ(res->ai_family, AF_INET6);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  rdma_freeaddrinfo(res);
}

// rping 44's teardown race (fixed in rping upstream, f3ae6534a): its CM
// thread acks the last event and calls rdma_get_cm_event again after main
// destroyed the id (whose last event was queued, counted on the fd, then
// dropped) and the channel. A thread inside the kernel's rdma_get_cm_event
// never sees the fd closed; ours neither: a late call on a destroyed channel
// blocks (EBADF only on an O_NONBLOCK fd) and never reads a closed or reused
// fd number ("rdma_get_cm_event: Bad file descriptor" before).
TEST_F(CmApi, GetEventOnAChannelDestroyedMeanwhileNeverReadsItsClosedFd) {
  for (bool nonblocking : {true, false}) {
    SCOPED_TRACE(nonblocking ? "O_NONBLOCK" : "blocking");
    rdma_event_channel* ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in src = v4("10.0.0.1", 0), dst = v4("10.0.0.2", 9);
    ASSERT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    pollfd p{ch->fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 5000), 1) << "ADDR_RESOLVED counted on the fd";
    if (nonblocking) ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
    ASSERT_EQ(rdma_destroy_id(id), 0);  // its event goes, its count stays
    rdma_destroy_event_channel(ch);
    // The fd number is free and taken again (as rping's exit path may).
    int again[2];
    ASSERT_EQ(pipe(again), 0);
    const uint64_t junk = 1;
    ASSERT_EQ(write(again[1], &junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
    struct Result {
      std::atomic<int> rc{1}, err{0};
    };
    auto* r = new Result;  // the thread may outlive the test: never freed
    std::thread t([ch, r] {
      rdma_cm_event* e = nullptr;
      const int rc = rdma_get_cm_event(ch, &e);
      r->err = errno;
      r->rc = rc;
    });
    if (nonblocking) {
      t.join();
      EXPECT_EQ(r->rc.load(), -1);
      EXPECT_EQ(r->err.load(), EBADF);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      EXPECT_EQ(r->rc.load(), 1) << "returned " << r->rc.load() << " errno " << r->err.load();
      t.detach();  // blocked for good, as in the kernel
    }
    uint64_t left = 0;
    EXPECT_EQ(read(again[0], &left, sizeof left), static_cast<ssize_t>(sizeof left)) << "the reused fd was not read";
    close(again[0]);
    close(again[1]);
  }
}

// rdma_disconnect while our REQ is unanswered (docs/rdma_cm.md): 0 and nothing
// on the wire, as Linux; rdma_destroy_id then withdraws the REQ (REJ timeout)
// and the passive side's id gets REJECTED.
TEST_F(CmApi, DisconnectWhileTheReqIsUnansweredIsLinuxs) {
  rdma_event_channel* sch = rdma_create_event_channel();
  rdma_event_channel* cch = rdma_create_event_channel();
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* cid = nullptr;
  ASSERT_NO_FATAL_FAILURE(listen_and_resolve(19812, sch, &listener, cch, &cid));
  rdma_cm_event* e = next_event(cch);
  ASSERT_NE(e, nullptr);
  rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_resolve_route(cid, 2000), 0);
  e = next_event(cch);
  ASSERT_NE(e, nullptr);
  rdma_ack_cm_event(e);
  rdma_conn_param cp{};
  cp.qp_num = 0x123;
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(cid, &cp), 0);
  e = next_event(sch);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  rdma_cm_id* req = e->id;
  rdma_ack_cm_event(e);
  EXPECT_EQ(rdma_disconnect(cid), 0) << std::strerror(errno);
  EXPECT_EQ(next_event(cch, 300), nullptr) << "no event for the client";
  EXPECT_EQ(next_event(sch, 300), nullptr) << "nothing reached the server";
  ASSERT_EQ(rdma_destroy_id(cid), 0);
  e = next_event(sch);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(e->id, req);
  EXPECT_EQ(e->status, 4) << "IB CM reason: timeout";
  rdma_ack_cm_event(e);
  EXPECT_EQ(rdma_destroy_id(req), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  rdma_destroy_event_channel(cch);
  rdma_destroy_event_channel(sch);
}

// After DISCONNECTED, an id (with its QP) that is still there when its
// connection's timewait ends gets RDMA_CM_EVENT_TIMEWAIT_EXIT, as on Linux:
// both sides (the daemon's timewait is 100 ms).
TEST_F(CmApi, TimewaitExitFollowsDisconnectedOnBothSides) {
  rdma_event_channel* sch = rdma_create_event_channel();
  rdma_event_channel* cch = rdma_create_event_channel();
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* cid = nullptr;
  ASSERT_NO_FATAL_FAILURE(listen_and_resolve(19813, sch, &listener, cch, &cid));
  auto expect = [](rdma_cm_event* e, rdma_cm_event_type t, rdma_cm_id* id) {
    EXPECT_NE(e, nullptr) << "no " << rdma_event_str(t);
    if (e == nullptr) return;
    EXPECT_EQ(e->event, t) << rdma_event_str(e->event) << " instead of " << rdma_event_str(t);
    if (id) EXPECT_EQ(e->id, id);
    EXPECT_EQ(e->status, 0);
  };
  rdma_cm_event* e = next_event(cch);
  expect(e, RDMA_CM_EVENT_ADDR_RESOLVED, cid);
  if (e) rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_resolve_route(cid, 2000), 0);
  e = next_event(cch);
  expect(e, RDMA_CM_EVENT_ROUTE_RESOLVED, cid);
  if (e) rdma_ack_cm_event(e);
  ibv_qp_init_attr qa{};
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.qp_type = IBV_QPT_RC;
  ASSERT_EQ(rdma_create_qp(cid, nullptr, &qa), 0) << std::strerror(errno);
  rdma_conn_param cp{};
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(cid, &cp), 0);
  e = next_event(sch);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  rdma_cm_id* req = e->id;
  rdma_ack_cm_event(e);
  ibv_qp_init_attr qb = qa;
  qb.send_cq = qb.recv_cq = nullptr;  // rdma_create_qp filled qa's with the client device's CQs
  ASSERT_EQ(rdma_create_qp(req, nullptr, &qb), 0) << std::strerror(errno);
  ASSERT_EQ(rdma_accept(req, &cp), 0) << std::strerror(errno);
  e = next_event(cch);
  expect(e, RDMA_CM_EVENT_ESTABLISHED, cid);
  if (e) rdma_ack_cm_event(e);
  e = next_event(sch);
  expect(e, RDMA_CM_EVENT_ESTABLISHED, req);
  if (e) rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_disconnect(cid), 0);
  e = next_event(sch);
  expect(e, RDMA_CM_EVENT_DISCONNECTED, req);
  if (e) rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_disconnect(req), 0);
  e = next_event(cch);
  expect(e, RDMA_CM_EVENT_DISCONNECTED, cid);
  if (e) rdma_ack_cm_event(e);
  e = next_event(cch, 3000);
  expect(e, RDMA_CM_EVENT_TIMEWAIT_EXIT, cid);
  if (e) rdma_ack_cm_event(e);
  e = next_event(sch, 3000);
  expect(e, RDMA_CM_EVENT_TIMEWAIT_EXIT, req);
  if (e) rdma_ack_cm_event(e);
  EXPECT_EQ(next_event(cch, 300), nullptr) << "one TIMEWAIT_EXIT each";
  rdma_destroy_qp(cid);
  rdma_destroy_qp(req);
  EXPECT_EQ(rdma_destroy_id(cid), 0);
  EXPECT_EQ(rdma_destroy_id(req), 0);
  EXPECT_EQ(rdma_destroy_id(listener), 0);
  rdma_destroy_event_channel(cch);
  rdma_destroy_event_channel(sch);
}

// rdma_resolve_addr to a neighbour that never answers (10.0.0.77, on
// isoroce0's subnet) returns at once and ADDR_ERROR (-EHOSTUNREACH) comes
// about a second later; meanwhile the daemon serves everyone else (another
// id's resolution completes at once). Before, the daemon's control thread
// waited the second inside the call.
TEST_F(CmApi, ResolveAddrDoesNotBlockTheDaemon) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - a).count();
  };
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_event_channel* other = rdma_create_event_channel();
  rdma_cm_id* lost = nullptr;
  rdma_cm_id* fine = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &lost, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(other, &fine, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in src = v4("10.0.0.1", 0), nobody = v4("10.0.0.77", 9), peer = v4("10.0.0.2", 9);
  const auto t0 = Clock::now();
  ASSERT_EQ(rdma_resolve_addr(lost, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&nobody), 2000), 0);
  EXPECT_LT(ms(t0), 300) << "rdma_resolve_addr waited for the neighbour";
  EXPECT_EQ(rdma_resolve_addr(lost, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&nobody), 2000), -1);
  EXPECT_EQ(errno, EINVAL) << "a second resolution while one is under way";
  const auto t1 = Clock::now();
  ASSERT_EQ(rdma_resolve_addr(fine, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&peer), 2000), 0);
  rdma_cm_event* e = next_event(other, 2000);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_LT(ms(t1), 500) << "the other id waited for the first one's resolution";
  rdma_ack_cm_event(e);
  e = next_event(ch, 5000);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ADDR_ERROR);
  EXPECT_EQ(e->status, -EHOSTUNREACH);
  EXPECT_GE(ms(t0), 900);
  EXPECT_LT(ms(t0), 4000);
  rdma_ack_cm_event(e);
  EXPECT_EQ(rdma_destroy_id(lost), 0);
  EXPECT_EQ(rdma_destroy_id(fine), 0);
  rdma_destroy_event_channel(ch);
  rdma_destroy_event_channel(other);
}

TEST_F(CmApi, RejectCarriesPrivateDataToTheActiveSide) {
  rdma_event_channel* sch = rdma_create_event_channel();
  rdma_event_channel* cch = rdma_create_event_channel();
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* cid = nullptr;
  ASSERT_NO_FATAL_FAILURE(listen_and_resolve(19811, sch, &listener, cch, &cid));
  rdma_cm_event* e = next_event(cch);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  rdma_ack_cm_event(e);
  ASSERT_EQ(rdma_resolve_route(cid, 2000), 0);
  e = next_event(cch);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  rdma_ack_cm_event(e);
  rdma_conn_param cp{};
  const char hello[] = "hello from the active side";
  cp.private_data = hello;
  cp.private_data_len = sizeof hello;
  cp.qp_num = 0x123;  // no QP: the connection is refused before it needs one
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(cid, &cp), 0);
  e = next_event(sch);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(e->listen_id, listener);
  ASSERT_GE(e->param.conn.private_data_len, sizeof hello);
  EXPECT_EQ(std::memcmp(e->param.conn.private_data, hello, sizeof hello), 0);
  EXPECT_EQ(e->param.conn.qp_num, 0x123u);
  rdma_cm_id* req = e->id;
  char text[64];
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(req))->sin_addr, text, sizeof text);
  EXPECT_STREQ(text, "10.0.0.1");
  EXPECT_EQ(rdma_get_dst_port(req), rdma_get_src_port(cid));
  const char no[] = "no thanks";
  ASSERT_EQ(rdma_reject(req, no, sizeof no), 0);
  rdma_ack_cm_event(e);
  e = next_event(cch);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(e->status, 28) << "IB CM reason: consumer reject";
  ASSERT_GE(e->param.conn.private_data_len, sizeof no);
  EXPECT_EQ(std::memcmp(e->param.conn.private_data, no, sizeof no), 0);
  rdma_ack_cm_event(e);
  rdma_destroy_id(req);
  rdma_destroy_id(cid);
  rdma_destroy_id(listener);
  rdma_destroy_event_channel(cch);
  rdma_destroy_event_channel(sch);
}

TEST_F(CmApi, UnsupportedCallsFailWithTheDocumentedError) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in mc = v4("239.1.1.1", 0);
  EXPECT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&mc), nullptr), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&mc)), -1);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  EXPECT_EQ(rsocket(AF_INET, SOCK_STREAM, 0), -1);
  EXPECT_EQ(errno, ENOSYS);
  EXPECT_EQ(rclose(3), -1);
  EXPECT_EQ(errno, EBADF);
  rdma_cm_id* ib = nullptr;
  EXPECT_EQ(rdma_create_id(nullptr, &ib, nullptr, RDMA_PS_IB), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// The daemon's side of the protocol: an id is its connection's only, and bad
// requests are refused with the reason.
TEST_F(CmApi, AnIdBelongsToTheConnectionThatMadeItOnly) {
  std::string err;
  auto a = ctrl::Client::connect(daemon_->socket(), &err);
  auto b = ctrl::Client::connect(daemon_->socket(), &err);
  ASSERT_TRUE(a && b) << err;
  json r = a->call({{"op", "cm_create_id"}, {"ps", "tcp"}});
  EXPECT_EQ(r.value("errno", 0), EINVAL) << "an id needs an event channel first: " << r.dump();
  json ca = a->call({{"op", "cm_channel"}});
  json cb = b->call({{"op", "cm_channel"}});
  ASSERT_TRUE(ca.value("ok", false) && cb.value("ok", false)) << ca.dump() << cb.dump();
  EXPECT_EQ(a->call({{"op", "cm_channel"}}).value("errno", 0), EBUSY);
  r = a->call({{"op", "cm_create_id"}, {"ps", "tcp"}});
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  const uint32_t id = r["cm_id"];
  EXPECT_EQ(a->call({{"op", "cm_create_id"}, {"ps", "sdp"}}).value("errno", 0), EINVAL);
  // B names A's id: refused, whatever the operation.
  for (const char* op : {"cm_bind", "cm_listen", "cm_connect", "cm_accept", "cm_reject", "cm_disconnect",
                         "cm_destroy_id", "cm_resolve_route", "cm_set_option"}) {
    json q = {{"op", op}, {"cm_id", id}, {"addr", {{"addr", "10.0.0.1"}, {"port", 0}}}};
    json rb = b->call(q);
    EXPECT_EQ(rb.value("errno", 0), EINVAL) << op << ": " << rb.dump();
    EXPECT_NE(rb.value("error", std::string()).find("not an rdma_cm id of this client"), std::string::npos) << rb.dump();
  }
  // Taking it over needs A's token.
  EXPECT_EQ(b->call({{"op", "cm_migrate_id"}, {"cm_id", id}, {"token", cb["token"]}}).value("errno", 0), EINVAL);
  EXPECT_TRUE(b->call({{"op", "cm_migrate_id"}, {"cm_id", id}, {"token", ca["token"]}}).value("ok", false));
  EXPECT_EQ(a->call({{"op", "cm_bind"}, {"cm_id", id}, {"addr", {{"addr", "10.0.0.1"}, {"port", 0}}}}).value("errno", 0),
            EINVAL) << "A gave it away";
  // Bad fields.
  EXPECT_EQ(b->call({{"op", "cm_bind"}, {"cm_id", id}, {"addr", {{"addr", "not-an-ip"}}}}).value("errno", 0), EINVAL);
  EXPECT_EQ(b->call({{"op", "cm_reject"}, {"cm_id", id}, {"private_data", "zz"}}).value("errno", 0), EINVAL);
  EXPECT_EQ(b->call({{"op", "cm_get_event"}}).value("errno", 0), EAGAIN);
  EXPECT_TRUE(b->call({{"op", "cm_destroy_id"}, {"cm_id", id}}).value("ok", false));
}

// A program killed with a connection up: the daemon ends it on the wire
// (DREQ) and the peer sees DISCONNECTED.
TEST_F(CmApi, AKilledProgramsConnectionsAreClosedOnTheWire) {
  rdma_event_channel* sch = rdma_create_event_channel();
  rdma_cm_id* listener = nullptr;
  ASSERT_NO_FATAL_FAILURE(listen_and_resolve(19812, sch, &listener));
  const std::string cmd = std::string("env LD_PRELOAD=\"") + ISOROCE_RDMACM_LIB + " " + ISOROCE_VERBS_LIB +
                          "\" ISOROCE_SOCKET=" + daemon_->socket() +
                          " timeout -s KILL 3 rping -c -a 10.0.0.2 -I 10.0.0.1 -p 19812 -C 1000000 -S 64 >/dev/null 2>&1 &";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  rdma_cm_event* e = next_event(sch);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  rdma_cm_id* conn = e->id;
  rdma_ack_cm_event(e);
  ibv_qp_init_attr qa{};
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.qp_type = IBV_QPT_RC;
  ASSERT_EQ(rdma_create_qp(conn, nullptr, &qa), 0);
  ASSERT_EQ(rdma_accept(conn, nullptr), 0);
  e = next_event(sch);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ESTABLISHED);
  rdma_ack_cm_event(e);
  // rping (KILLed after 3 s, never disconnecting) leaves; its daemon session closes.
  e = next_event(sch, 10000);
  ASSERT_NE(e, nullptr) << "no event after the client was killed";
  EXPECT_EQ(e->event, RDMA_CM_EVENT_DISCONNECTED) << rdma_event_str(e->event);
  rdma_ack_cm_event(e);
  rdma_destroy_qp(conn);
  rdma_destroy_id(conn);
  rdma_destroy_id(listener);
  rdma_destroy_event_channel(sch);
}

}  // namespace
}  // namespace isoroce::test
