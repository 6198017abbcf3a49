// A client of isoroced's control socket (ctrl/protocol.h): isoroce-ctl, the
// tests, and later libisoroce-verbs. One request at a time, one reply each.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace isoroce::ctrl {

class Client {
 public:
  // nullptr and *error when the daemon cannot be reached.
  static std::unique_ptr<Client> connect(const std::string& socket_path, std::string* error);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends req (with fds) and returns the reply. A broken connection gives
  // {"ok": false, "errno": EPIPE/ECONNRESET, "error": ...}.
  nlohmann::json call(const nlohmann::json& req, std::span<const int> fds = {});
  // The same; descriptors that came with the reply are appended to *received
  // (the caller closes them).
  nlohmann::json call(const nlohmann::json& req, std::span<const int> fds, std::vector<int>* received);

  int fd() const { return fd_; }

 private:
  explicit Client(int fd) : fd_(fd) {}
  int fd_;
  uint64_t next_id_ = 1;
};

// "socket" from the environment (ISOROCE_SOCKET) or the default path.
std::string default_socket_path();

}  // namespace isoroce::ctrl
