// Test harness for the real daemon: starts build/bin/isoroced as a child
// process (its own socket and EAL file prefix), and a small verbs client over
// the control socket (ctrl/client.h) with memfd-backed registered memory.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ctrl/client.h"
#include "ctrl/protocol.h"

namespace isoroce::test {

using nlohmann::json;

// The daemon binary next to the test binary (build/bin/).
std::string daemon_path();
std::string bin_path(const std::string& name);

class DaemonProcess {
 public:
  // Starts isoroced with `args` plus --socket/--file-prefix of its own; waits
  // until the socket answers (up to 20 s). ok() false if it did not come up.
  explicit DaemonProcess(std::vector<std::string> args, const std::string& netns = "");
  ~DaemonProcess();
  bool ok() const { return ok_; }
  const std::string& socket() const { return socket_; }
  const std::string& prefix() const { return prefix_; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_; }
  std::string log() const;
  // SIGTERM and wait; the exit status (-1 if it had to be killed).
  int stop(int timeout_ms = 10000);

 private:
  std::string socket_, prefix_, log_;
  pid_t pid_ = -1;
  bool ok_ = false;
};

// Registered memory the daemon maps from our memfd.
struct Buffer {
  int fd = -1;
  uint8_t* data = nullptr;
  uint64_t len = 0;
  uint32_t lkey = 0, rkey = 0;
  uint64_t iova() const { return reinterpret_cast<uint64_t>(data); }
};

// One connection with one device open, a PD, and helpers for QPs.
class Verbs {
 public:
  Verbs(const std::string& socket, const std::string& device);
  ~Verbs();
  bool ok() const { return ok_; }
  json call(json req) { return client_->call(req); }
  ctrl::Client& client() { return *client_; }
  const json& device() const { return device_; }
  uint32_t pd() const { return pd_; }

  // memfd of len bytes, mapped here and registered with `access`.
  Buffer* reg(uint64_t len, uint32_t access);
  uint32_t create_cq(int cqe = 256);
  uint32_t create_qp(uint32_t cq, const std::string& type = "rc", uint32_t depth = 64);
  // INIT -> RTR -> RTS towards (gid, dest_qpn); PSNs given; path_mtu in bytes.
  json connect_rc(uint32_t qpn, const std::string& dgid, uint32_t dest_qpn, uint32_t my_psn,
                  uint32_t peer_psn, uint32_t timeout = 14, uint32_t retry_cnt = 7, uint32_t path_mtu = 1024);
  json post_send(uint32_t qpn, const json& wr) { return call({{"op", "post_send"}, {"qpn", qpn}, {"wr", wr}}); }
  json post_recv(uint32_t qpn, const json& wr) { return call({{"op", "post_recv"}, {"qpn", qpn}, {"wr", wr}}); }
  // Polls until n completions arrived or timeout_ms passed.
  std::vector<json> wait(uint32_t cq, size_t n, int timeout_ms = 10000);

 private:
  std::unique_ptr<ctrl::Client> client_;
  json device_;
  uint32_t pd_ = 0;
  std::vector<std::unique_ptr<Buffer>> bufs_;
  bool ok_ = false;
};

json sge(const Buffer& b, uint64_t off, uint32_t len);

}  // namespace isoroce::test
