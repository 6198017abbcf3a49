// libFuzzer target: the control protocol as the daemon reads a request,
// without the daemon (ctrl/protocol.cc and ctrl/wire_json.cc only).
//
// The first input byte says how many descriptors travel with the message
// (0..7: more than kMaxFds truncates the control data); the rest is the
// message. It goes through a SOCK_SEQPACKET pair with send_message and comes
// back through recv_message, then is parsed as the daemon must parse it
// (ctrl::parse_request: JSON, exceptions off, nesting bounded; a string "op"), and every JSON-to-verbs translation the
// handlers use is applied to it and to its "attr", "ah", "wr" and "gid"
// members, under the daemon's catch of std::exception. The reply's "id" is
// echoed and dumped as the daemon does.
//
// Checked beyond ASan/UBSan: the message arrives whole and unchanged (or
// refused as truncated), no descriptor leaks, and what the parsers accept
// survives the way back (qp_attr_to_json gives each accepted key its value;
// a GID prints and parses to itself).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ctrl/protocol.h"
#include "ctrl/wire_json.h"

using namespace isoroce;
using nlohmann::json;

namespace {

int g_sock[2] = {-1, -1};
int g_devnull = -1;

void check(bool ok) {
  if (!ok) std::abort();
}

// The lowest free descriptor: any leak moves it.
int lowest_free_fd() {
  const int fd = dup(0);
  close(fd);
  return fd;
}

void translate(const json& j) {
  std::string error;
  ibv_qp_attr attr{};
  uint32_t mask = 0;
  if (ctrl::qp_attr_from_json(j, &attr, &mask, &error)) {
    const json back = ctrl::qp_attr_to_json(attr);
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "ah_attr" || it.key() == "cur_qp_state") continue;
      check(back.contains(it.key()) && back[it.key()] == *it);
    }
  }
  transport::AhAttr ah;
  ctrl::ah_from_json(j, &ah, &error);
  std::vector<transport::Sge> sges;
  ctrl::sges_from_json(j, &sges, &error);
  check(sges.size() <= 64);
  transport::SendWr wr;
  ctrl::send_wr_from_json(j, &wr, &error);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  check(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, g_sock) == 0);
  const int big = 1 << 20;
  setsockopt(g_sock[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(g_sock[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  g_devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  check(g_devnull >= 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t nfds = data[0] & 7;
  const std::string_view sent(reinterpret_cast<const char*>(data + 1), size - 1);
  if (sent.empty() || sent.size() > ctrl::kMaxMessage) return 0;
  const int free_before = lowest_free_fd();

  // Framing: send_message -> recv_message, with descriptors.
  std::vector<int> out_fds;
  for (size_t i = 0; i < nfds; ++i) out_fds.push_back(g_devnull);
  // send_message takes at most kMaxFds; more are sent by hand to truncate.
  bool sent_ok;
  if (nfds <= ctrl::kMaxFds) {
    sent_ok = ctrl::send_message(g_sock[0], sent, out_fds);
  } else {
    iovec iov{const_cast<char*>(sent.data()), sent.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), out_fds.data(), sizeof(int) * nfds);
    sent_ok = sendmsg(g_sock[0], &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sent.size());
  }
  check(sent_ok);
  std::string text;
  std::vector<int> fds;
  const ctrl::RecvStatus st = ctrl::recv_message(g_sock[1], &text, &fds);
  check(fds.size() <= ctrl::kMaxFds);
  for (int f : fds) close(f);  // as the daemon does, whatever the status
  check(lowest_free_fd() == free_before);
  if (nfds > ctrl::kMaxFds) {
    check(st == ctrl::RecvStatus::kError);  // MSG_CTRUNC: refused
    return 0;
  }
  check(st == ctrl::RecvStatus::kOk && text == sent);

  // The daemon's parse (bounded nesting), then the translations under its catch.
  json req = ctrl::parse_request(text);
  if (ctrl::json_depth(text, SIZE_MAX) <= ctrl::kMaxDepth) {
    json plain = json::parse(text, nullptr, false);
    check(plain.is_discarded() == req.is_discarded() && (req.is_discarded() || plain == req));
  }
  if (req.is_discarded() || !req.is_object() || !req.contains("op") || !req["op"].is_string()) return 0;
  json reply = {{"ok", false}};
  try {
    translate(req);
    for (const char* key : {"attr", "ah", "wr"})
      if (req.contains(key)) translate(req[key]);
    if (req.contains("gid") && req["gid"].is_string()) {
      wire::IpAddr gid{}, again{};
      if (ctrl::parse_gid(req["gid"].get<std::string>(), &gid)) {
        check(ctrl::parse_gid(ctrl::gid_text(gid), &again) && again == gid);
      }
    }
    if (req.contains("wc") && req["wc"].is_string()) {
      // A completion as the engine makes them (valid enums), other fields from the string.
      const std::string& b = req["wc"].get_ref<const std::string&>();
      uint8_t raw[sizeof(ibv_wc)] = {};
      std::memcpy(raw, b.data(), std::min(b.size(), sizeof raw));
      ibv_wc wc;
      std::memcpy(&wc, raw, sizeof wc);
      wc.status = static_cast<ibv_wc_status>(raw[0] % (IBV_WC_TM_RNDV_INCOMPLETE + 1));
      static constexpr ibv_wc_opcode kOps[] = {IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP,
                                               IBV_WC_FETCH_ADD, IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM};
      wc.opcode = kOps[raw[1] % std::size(kOps)];
      reply["wc"] = ctrl::wc_to_json(wc);
    }
  } catch (const std::exception&) {
    // The daemon refuses such a request (EINVAL) and carries on.
  }
  if (req.contains("id")) reply["id"] = req["id"];
  const std::string dumped = reply.dump(-1, ' ', false, json::error_handler_t::replace);
  check(!dumped.empty());
  return 0;
}
