// The control socket: a Unix SOCK_SEQPACKET listener, one epoll over it and
// the clients' connections, a Session per connection. Each request goes to
// Control::handle; a closed connection's resources are reclaimed at once.
//
// No client can stall the others: connections are non-blocking, a reply
// that does not fit the socket waits in the connection's own queue (with the
// descriptors it carries), and a client that lets more than kMaxQueuedReplies
// replies or kMaxQueuedBytes bytes pile up is disconnected, never waited for.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "ctrl/control.h"

namespace isoroce::ctrl {

inline constexpr size_t kMaxQueuedReplies = 64;
inline constexpr size_t kMaxQueuedBytes = 4 << 20;

class SessionServer {
 public:
  // admin_group: members are privileged clients (besides root and the daemon's user).
  SessionServer(Control& ctl, std::string path, std::optional<gid_t> admin_group = std::nullopt)
      : ctl_(ctl), path_(std::move(path)), admin_group_(admin_group) {}
  // Who may connect: the socket file's group (nullopt: the daemon's) and mode.
  void set_access(std::optional<gid_t> group, uint32_t mode) {
    socket_group_ = group;
    socket_mode_ = mode;
  }
  ~SessionServer();  // closes connections (without reclaiming) and the socket
  SessionServer(const SessionServer&) = delete;
  SessionServer& operator=(const SessionServer&) = delete;

  // Binds the socket under a temporary name (refusing if another daemon
  // serves the path), gives it its group and mode, and makes the epoll.
  // listen() listens and renames it onto the path (a stale file is replaced):
  // a client that finds the path is never refused.
  bool open(std::string* error);
  bool listen(std::string* error);
  // Another descriptor in the epoll (the daemon's signalfd): reported by poll().
  void watch(int fd);
  // Waits up to timeout_ms and serves what is ready: new connections,
  // requests, hang-ups. Returns the watched descriptors that are ready.
  std::vector<int> poll(int timeout_ms);
  // Closes and unlinks the listening socket (no new clients).
  void stop_listening();
  // Reclaims and closes every connection.
  void close_all();
  size_t sessions() const { return count_.load(); }

 private:
  struct Reply {
    std::string text;
    std::vector<int> fds;  // owned until sent
  };
  struct Connection {
    std::unique_ptr<Session> s;
    std::deque<Reply> out;  // replies the socket could not take yet
    size_t out_bytes = 0;
  };
  // chown/chmod of the bound socket file; "" or what failed.
  std::string apply_access(const std::string& file) const;
  void accept_clients();
  void identify(Session& s);
  void serve(Connection& c);
  // Sends or queues; false if the connection was closed.
  bool reply(Connection& c, Reply r);
  // Sends what is queued; false if the connection was closed.
  bool flush(Connection& c);
  void want_write(Connection& c, bool on);
  void close_session(uint64_t id);

  Control& ctl_;
  std::string path_;
  std::string tmp_path_;  // the bound name until listen() renames it
  std::optional<gid_t> admin_group_;
  std::optional<gid_t> socket_group_;
  uint32_t socket_mode_ = 0660;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::vector<int> watched_;
  uint64_t next_session_ = 1;
  std::map<uint64_t, Connection> sessions_;
  std::map<int, uint64_t> session_by_fd_;
  std::atomic<size_t> count_{0};  // sessions_.size(), for telemetry's thread
};

}  // namespace isoroce::ctrl
