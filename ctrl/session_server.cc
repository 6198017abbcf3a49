#include "ctrl/session_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ctrl/log.h"
#include "ctrl/protocol.h"
#include "ctrl/protocol_limits.h"

namespace isoroce::ctrl {

SessionServer::~SessionServer() {
  for (auto& [id, c] : sessions_) {
    if (c.s->fd >= 0) close(c.s->fd);
    for (Reply& r : c.out)
      for (int f : r.fds) close(f);
  }
  stop_listening();
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

bool SessionServer::open(std::string* error) {
  // Bound under a temporary name and renamed onto path_ only once it listens
  // (listen()): a client that finds the path is never refused.
  const std::filesystem::path path(path_);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  tmp_path_ = path_ + "." + std::to_string(getpid()) + ".new";
  sockaddr_un addr{}, tmp{};
  addr.sun_family = tmp.sun_family = AF_UNIX;
  if (tmp_path_.size() >= sizeof tmp.sun_path) {
    *error = "socket " + path_ + ": path too long";
    tmp_path_.clear();
    return false;
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size());
  std::memcpy(tmp.sun_path, tmp_path_.c_str(), tmp_path_.size());
  auto failed = [&](const std::string& why) {
    *error = "socket " + path_ + ": " + why;
    if (listen_fd_ >= 0) close(listen_fd_), listen_fd_ = -1;
    tmp_path_.clear();
    return false;
  };
  // A live daemon keeps its path; a stale file is replaced by the rename.
  const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  const bool alive = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(probe);
  if (alive) return failed("another isoroced is serving it (--socket picks another path)");
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return failed(std::strerror(errno));
  unlink(tmp_path_.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&tmp), sizeof tmp) != 0) return failed(std::strerror(errno));
  if (std::string why = apply_access(tmp_path_); !why.empty()) return failed(why);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  return true;
}

std::string SessionServer::apply_access(const std::string& file) const {
  if (socket_group_ && chown(file.c_str(), static_cast<uid_t>(-1), *socket_group_) != 0)
    return "chown to group " + std::to_string(*socket_group_) + ": " + std::strerror(errno);
  if (chmod(file.c_str(), socket_mode_) != 0) return std::string("chmod: ") + std::strerror(errno);
  return "";
}

bool SessionServer::listen(std::string* error) {
  if (::listen(listen_fd_, 64) != 0) {
    *error = "listen " + path_ + ": " + std::strerror(errno);
    return false;
  }
  if (rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    *error = "socket " + path_ + ": rename from " + tmp_path_ + ": " + std::strerror(errno);
    return false;
  }
  tmp_path_.clear();
  return true;
}

void SessionServer::watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  watched_.push_back(fd);
}

std::vector<int> SessionServer::poll(int timeout_ms) {
  std::vector<int> ready;
  epoll_event evs[32];
  const int n = epoll_wait(epoll_fd_, evs, 32, timeout_ms);
  for (int i = 0; i < n; ++i) {
    const int fd = evs[i].data.fd;
    if (fd == listen_fd_) {
      accept_clients();
    } else if (std::find(watched_.begin(), watched_.end(), fd) != watched_.end()) {
      ready.push_back(fd);
    } else if (auto it = session_by_fd_.find(fd); it != session_by_fd_.end()) {
      const uint64_t id = it->second;
      if ((evs[i].events & EPOLLOUT) && !flush(sessions_.at(id))) continue;
      if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) serve(sessions_.at(id));
    }
  }
  return ready;
}

void SessionServer::stop_listening() {
  if (listen_fd_ < 0) return;
  if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  close(listen_fd_);
  listen_fd_ = -1;
  // The path only if this daemon published it (never another daemon's).
  unlink(tmp_path_.empty() ? path_.c_str() : tmp_path_.c_str());
}

void SessionServer::close_all() {
  while (!sessions_.empty()) close_session(sessions_.begin()->first);
}

void SessionServer::identify(Session& s) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(s.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;  // stays unprivileged, uid 0 unknown
  s.pid = cred.pid;
  s.uid = cred.uid;
  s.gid = cred.gid;
  std::ifstream comm("/proc/" + std::to_string(cred.pid) + "/comm");
  std::getline(comm, s.comm);
  bool member = admin_group_ && cred.gid == *admin_group_;
  if (admin_group_ && !member) {
    // Supplementary groups, as the kernel had them when the client connected.
    std::ifstream status("/proc/" + std::to_string(cred.pid) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Groups:", 0) != 0) continue;
      std::istringstream groups(line.substr(7));
      for (gid_t g; groups >> g;) member |= g == *admin_group_;
    }
  }
  s.privileged = cred.uid == 0 || cred.uid == geteuid() || member;
}

void SessionServer::accept_clients() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    Connection c;
    c.s = std::make_unique<Session>();
    Session& s = *c.s;
    s.id = next_session_++;
    s.fd = fd;
    identify(s);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    log(LogLevel::kDebug, "client {} connected (pid {}, uid {}, {}{})", s.id, s.pid, s.uid, s.comm,
        s.privileged ? ", privileged" : "");
    session_by_fd_[fd] = s.id;
    sessions_[s.id] = std::move(c);
    count_ = sessions_.size();
  }
}

void SessionServer::serve(Connection& c) {
  Session& s = *c.s;
  std::string text;
  std::vector<int> fds;
  const RecvStatus st = recv_message(s.fd, &text, &fds);
  if (st == RecvStatus::kWouldBlock) return;
  if (st != RecvStatus::kOk) {
    for (int f : fds) close(f);
    close_session(s.id);
    return;
  }
  json reply_json;
  if (json_depth(text) > kMaxDepth) {
    // Refused unparsed: nothing deep reaches the recursive parts of nlohmann::json.
    reply_json = {{"ok", false}, {"errno", EPROTO},
                  {"error", "a request nests objects and arrays at most " + std::to_string(kMaxDepth) + " deep"}};
  } else {
    const json req = parse_request(text);
    reply_json = req.is_discarded()
                     ? json{{"ok", false}, {"errno", EPROTO}, {"error", "a request is a JSON object with a string \"op\""}}
                     : ctl_.handle(s, req, fds);
  }
  for (int f : fds) close(f);  // handlers dup what they keep
  Reply r{reply_json.dump(-1, ' ', false, json::error_handler_t::replace), std::move(s.reply_fds)};
  s.reply_fds.clear();
  reply(c, std::move(r));
}

bool SessionServer::reply(Connection& c, Reply r) {
  if (c.out.empty()) {
    if (send_message(c.s->fd, r.text, r.fds)) {
      for (int f : r.fds) close(f);
      return true;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      for (int f : r.fds) close(f);
      close_session(c.s->id);
      return false;
    }
  }
  c.out_bytes += r.text.size();
  c.out.push_back(std::move(r));
  if (c.out.size() > kMaxQueuedReplies || c.out_bytes > kMaxQueuedBytes) {
    log(LogLevel::kWarning, "client {} (pid {}, {}) reads no replies ({} waiting, {} bytes): disconnected", c.s->id,
        c.s->pid, c.s->comm, c.out.size(), c.out_bytes);
    close_session(c.s->id);
    return false;
  }
  want_write(c, true);
  return true;
}

bool SessionServer::flush(Connection& c) {
  while (!c.out.empty()) {
    Reply& r = c.out.front();
    if (!send_message(c.s->fd, r.text, r.fds)) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      close_session(c.s->id);
      return false;
    }
    for (int f : r.fds) close(f);
    c.out_bytes -= r.text.size();
    c.out.pop_front();
  }
  want_write(c, false);
  return true;
}

void SessionServer::want_write(Connection& c, bool on) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
  ev.data.fd = c.s->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.s->fd, &ev);
}

void SessionServer::close_session(uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  Session& s = *it->second.s;
  ctl_.reclaim(s);
  for (Reply& r : it->second.out)
    for (int f : r.fds) close(f);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s.fd, nullptr);
  close(s.fd);
  session_by_fd_.erase(s.fd);
  log(LogLevel::kDebug, "client {} gone (pid {}): resources reclaimed", s.id, s.pid);
  sessions_.erase(it);
  count_ = sessions_.size();
}

}  // namespace isoroce::ctrl
