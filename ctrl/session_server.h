// The control socket: a Unix SOCK_SEQPACKET listener, one epoll over it and
// the clients' connections, a Session per connection. Each request goes to
// Control::handle; a closed connection's resources are reclaimed at once.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ctrl/control.h"

namespace isoroce::ctrl {

class SessionServer {
 public:
  SessionServer(Control& ctl, std::string path) : ctl_(ctl), path_(std::move(path)) {}
  ~SessionServer();  // closes connections (without reclaiming) and the socket
  SessionServer(const SessionServer&) = delete;
  SessionServer& operator=(const SessionServer&) = delete;

  // Binds the socket (refusing if another daemon serves it; a stale file is
  // replaced) and makes the epoll. Clients are accepted after listen().
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
  void accept_clients();
  void serve(Session& s);
  void close_session(uint64_t id);

  Control& ctl_;
  std::string path_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::vector<int> watched_;
  uint64_t next_session_ = 1;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;
  std::map<int, uint64_t> session_by_fd_;
  std::atomic<size_t> count_{0};  // sessions_.size(), for telemetry's thread
};

}  // namespace isoroce::ctrl
