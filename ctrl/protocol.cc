#include "ctrl/protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace isoroce::ctrl {

bool send_message(int fd, std::string_view text, std::span<const int> fds) {
  if (text.size() > kMaxMessage || fds.size() > kMaxFds) {
    errno = EMSGSIZE;
    return false;
  }
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n) == text.size();
    if (errno != EINTR) return false;
  }
}

RecvStatus recv_message(int fd, std::string* text, std::vector<int>* fds) {
  text->resize(kMaxMessage);
  iovec iov{text->data(), text->size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return RecvStatus::kWouldBlock;
  if (n < 0) return errno == ECONNRESET ? RecvStatus::kClosed : RecvStatus::kError;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->push_back(received);
    }
  }
  if (n == 0) {
    text->clear();
    return RecvStatus::kClosed;
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    errno = EMSGSIZE;
    return RecvStatus::kError;
  }
  text->resize(static_cast<size_t>(n));
  return RecvStatus::kOk;
}

size_t json_depth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_request(std::string_view text) {
  if (json_depth(text) > kMaxDepth) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, false);
}

bool parse_qp_name(std::string_view text, std::string* device, uint32_t* qpn) {
  const size_t slash = text.rfind('/');
  const std::string_view dev = slash == std::string_view::npos ? std::string_view{} : text.substr(0, slash);
  const std::string num(slash == std::string_view::npos ? text : text.substr(slash + 1));
  if (slash != std::string_view::npos && dev.empty()) return false;
  if (num.empty() || num[0] == '-' || num[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(num.c_str(), &end, 0);
  if (errno != 0 || *end != '\0' || v > 0xffffff) return false;
  *device = std::string(dev);
  *qpn = static_cast<uint32_t>(v);
  return true;
}

}  // namespace isoroce::ctrl
