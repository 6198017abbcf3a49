// libisoroce-rdmacm internals: the objects behind the rdma_cm handles.
// Every event channel is one connection to isoroced (its own Session: the
// daemon's CM ids belong to it); the channel's fd is an eventfd the daemon
// counts one per queued event on (EFD_SEMAPHORE), so poll/epoll, blocking
// and O_NONBLOCK reads behave as with the kernel's rdma_cm fd. Verbs objects
// (contexts, PDs, CQs, QPs) are libisoroce-verbs' own, reached only through
// the public ibv_* API.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ctrl/client.h"

namespace isoroce::rcm {

using nlohmann::json;

// "isoroce-rdmacm: ..." on stderr (failures always, debug with ISOROCE_VERBS_DEBUG).
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// errno = err, returns -1 (librdmacm's ERR()).
int fail(int err);
int reply_errno(const json& r);

struct Channel {
  rdma_event_channel ch{};  // ch.fd: the daemon's eventfd
  std::unique_ptr<ctrl::Client> client;
  std::mutex mu;             // one request at a time
  uint64_t token = 0;        // proves ownership of its ids (cm_migrate_id)
  json call(const json& req, bool quiet = false);  // {"ok": false, "errno": EBADF} once destroyed
  // rdma_destroy_event_channel against threads in rdma_get_cm_event
  // (docs/rdma_cm.md, "Event channels"): waiters counts the threads inside
  // it; destroying a channel with waiters ends the daemon connection but
  // keeps the fd open (a blocked reader stays blocked, as in the kernel's
  // ucma read) and the last waiter to leave closes it; a channel destroyed
  // without waiters is closed at once and its object kept in a bounded
  // quarantine, so a thread that calls rdma_get_cm_event on it a moment
  // later blocks (or fails with EBADF on an O_NONBLOCK fd) instead of
  // reading a closed or reused fd number.
  std::mutex wait_mu;
  int waiters = 0;
  bool destroyed = false;
  bool nonblocking = false;  // the fd's O_NONBLOCK when it was destroyed
};
// ch is Channel's first member (and id Id's): the public pointer is the object's.
inline Channel* channel_of(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }
Channel* new_channel();  // nullptr and errno
void delete_channel(Channel* c);
// rdma_get_cm_event's side of the above: false (errno EBADF) if the channel
// is destroyed and non-blocking; blocks for good if destroyed and blocking.
bool enter_wait(Channel* c);
void leave_wait(Channel* c);
// Called by a waiter that found its channel destroyed: blocks for good.
[[noreturn]] void park_forever(Channel* c);

struct Event {
  rdma_cm_event ev{};
  uint8_t private_data[256] = {};
  struct Id* owner = nullptr;  // whose events_completed an ack counts
};

struct Id {
  rdma_cm_id id{};
  uint32_t handle = 0;  // the daemon's CM id
  bool sync = false;    // created without a channel: calls wait for their event
  uint32_t psn = 0;     // our QP's starting PSN (sent in REQ/REP)
  // What the peer told us (REQ or REP; SIDR_REP for UD).
  uint32_t remote_qpn = 0, remote_psn = 0, remote_qkey = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  uint8_t responder_resources = 0, initiator_depth = 0;  // negotiated (librdmacm's id_priv fields)
  uint8_t retry_count = 7, rnr_retry_count = 7, ack_timeout = 14, min_rnr_timer = 12;
  uint8_t tos = 0;
  bool have_remote = false, connect_error = false;
  std::vector<uint8_t> connect_data;  // rdma_create_ep's ai_connect, sent with the next connect
  std::unique_ptr<ibv_qp_init_attr> qp_init_attr;  // passive endpoint: the QP each request gets
  std::mutex mu;
  std::condition_variable cv;
  uint64_t events_reported = 0, events_completed = 0;
};
inline Id* id_of(rdma_cm_id* i) { return reinterpret_cast<Id*>(i); }
Channel* chan(const Id& i);
// Handle -> Id of this process.
void insert_id(Id* i);
void erase_id(Id* i);
Id* find_id(uint32_t handle);

// Devices (devices.cc): the isoroce contexts, opened once, with a PD each.
struct Dev {
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  union ibv_gid gid{};
  ibv_mtu active_mtu = IBV_MTU_1024;
};
bool init_devices();  // false (errno) if no isoroce device
Dev* find_dev(const std::string& name);
Dev* find_dev(ibv_context* verbs);
std::vector<Dev*> all_devs();

// Addresses (addr.cc).
json addr_json(const sockaddr* sa);  // {"addr": "...", "port": N} or null
bool json_addr(const json& j, sockaddr_storage* out);
socklen_t addr_len(const sockaddr* sa);
std::string hex(const void* p, size_t n);
std::vector<uint8_t> unhex(const std::string& s);

// Applies a daemon reply's/event's "local", "peer", "device", "dgid"/"sgid"
// to the public id (route, verbs, pd, port_num).
void apply_addressing(Id& i, const json& j);

// Waits for the id's next event (sync ids): 0 or -1 with errno (librdmacm's ucma_complete).
int complete(Id& i);
// QP state changes (qp.cc).
int modify_qp_rtr(Id& i, uint8_t resp_res);
int modify_qp_rts(Id& i, uint8_t init_depth);
int modify_qp_err(Id& i);
int init_qp_attr(Id& i, ibv_qp_attr* a, int* mask);
int do_establish(Id& i);  // RTR, RTS, then "cm_establish" (RTU)

}  // namespace isoroce::rcm
