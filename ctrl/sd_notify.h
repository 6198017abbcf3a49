// The service manager's readiness protocol (sd_notify(3)) without libsystemd:
// one datagram of "KEY=VALUE" lines to the Unix socket named by NOTIFY_SOCKET
// (a path, or an abstract name starting with '@'). Nothing happens when the
// variable is unset (not started by systemd with Type=notify).
#pragma once

#include <string>

namespace isoroce::ctrl {

// Sends `state` (e.g. "READY=1\nSTATUS=serving 2 devices"). Returns false and
// sets *error only when NOTIFY_SOCKET is set and the datagram cannot be sent.
bool sd_notify_state(const std::string& state, std::string* error);

}  // namespace isoroce::ctrl
