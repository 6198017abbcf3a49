// The control socket's framing: a Unix SOCK_SEQPACKET socket, one JSON object
// per message, file descriptors (a memfd for ibv_reg_mr) passed with the message
// as SCM_RIGHTS. Requests carry "op" and optional "id"; every reply has "ok",
// and on failure "errno" (positive, as libibverbs reports it) and "error".
// The operations are listed in docs/control-protocol.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ctrl/protocol_limits.h"

namespace isoroce::ctrl {

inline constexpr size_t kMaxMessage = 256 * 1024;
inline constexpr size_t kMaxFds = 4;
inline constexpr int kProtocolVersion = 1;
// No request needs more than a few levels of nesting; nlohmann::json's
// copies, dump() and destructor recurse once per level, so a 256 KiB message
// of brackets ({"op":…,"id":[[[[…]]]]}) overflowed the daemon's stack. The
// daemon measures the depth before parsing (json_depth, parse_request).
inline constexpr size_t kMaxDepth = protocol::kMaxJsonDepth;

// false (errno set) if the message could not be sent whole.
bool send_message(int fd, std::string_view text, std::span<const int> fds = {});

enum class RecvStatus { kOk, kClosed, kError, kWouldBlock /* non-blocking socket, nothing there */ };
// One message into *text; descriptors it carried are appended to *fds (the
// caller owns them). kClosed when the peer has gone away.
RecvStatus recv_message(int fd, std::string* text, std::vector<int>* fds);

// The deepest nesting of arrays and objects in JSON text (brackets inside
// strings do not count); stops counting past `limit`.
size_t json_depth(std::string_view text, size_t limit = kMaxDepth);
// A request as the daemon must read one: parsed without exceptions, and
// discarded (is_discarded()) when it is not JSON or nests deeper than kMaxDepth.
nlohmann::json parse_request(std::string_view text);

// A QP's name where QPNs repeat across devices: "DEVICE/QPN" ("isoroce0/15") or a
// bare QPN ("15", "0x1f"), which names it only where one device has it. false if
// the text is neither (QPNs are 24 bits).
bool parse_qp_name(std::string_view text, std::string* device, uint32_t* qpn);

}  // namespace isoroce::ctrl
