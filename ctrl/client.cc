#include "ctrl/client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ctrl/config.h"
#include "ctrl/protocol.h"

namespace isoroce::ctrl {

std::string default_socket_path() {
  const char* env = std::getenv("ISOROCE_SOCKET");
  return env != nullptr && *env ? env : kDefaultSocket;
}

std::unique_ptr<Client> Client::connect(const std::string& path, std::string* error) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    *error = "socket path too long: " + path;
    return nullptr;
  }
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = "cannot reach isoroced at " + path + ": " + std::strerror(errno) +
             " (is the daemon running? --socket or ISOROCE_SOCKET pick another path)";
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<Client>(new Client(fd));
}

Client::~Client() { close(fd_); }

nlohmann::json Client::call(const nlohmann::json& req, std::span<const int> fds) {
  std::vector<int> got;
  nlohmann::json reply = call(req, fds, &got);
  for (int f : got) close(f);
  return reply;
}

nlohmann::json Client::call(const nlohmann::json& req, std::span<const int> fds, std::vector<int>* received) {
  nlohmann::json r = req;
  r["id"] = next_id_++;
  auto broken = [](int err) {
    return nlohmann::json{{"ok", false}, {"errno", err}, {"error", std::string("control socket: ") + std::strerror(err)}};
  };
  if (!send_message(fd_, r.dump(), fds)) return broken(errno ? errno : EPIPE);
  std::string text;
  const RecvStatus st = recv_message(fd_, &text, received);
  if (st == RecvStatus::kClosed) return broken(ECONNRESET);
  if (st == RecvStatus::kError) return broken(errno);
  nlohmann::json reply = nlohmann::json::parse(text, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) return broken(EPROTO);
  return reply;
}

}  // namespace isoroce::ctrl
