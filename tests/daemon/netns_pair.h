// Two network namespaces joined by a veth pair, for tests that run one
// isoroced per namespace on net_af_packet (tests/daemon/netns_test.cc,
// tests/verbs_compat/netns_tools_test.cc). Root only.
//
//   ns A (isoroce-<tag>a-<pid>)              ns B (isoroce-<tag>b-<pid>)
//   veth irA<pid>  kernel 10.9.0.1/24  <-->  veth irB<pid>  kernel 10.9.0.2/24
//                  daemon 10.9.0.11/24                      daemon 10.9.0.12/24
//
// The daemon and the kernel share each veth; af_packet sees every frame the
// veth sees, so each side's addresses must be distinct. A daemon's frames leave
// its veth and arrive at the other one: the kernel of ns A reaches daemon B and
// kernel B (TCP between the namespaces goes kernel to kernel), never daemon A.
// Each kernel ignores RoCE frames to the daemon's address (not local, no
// forwarding; and, as each port has an Ethernet address of its own, the
// kernel marks them for another host and drops them first thing).
//
// With `middle`, a third namespace M sits between them: irA <-> irAm (ns M)
// and irBm (ns M) <-> irB, for a forwarder (NetnsImpairer) joining irAm and irBm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/daemon/harness.h"

namespace isoroce::test {

inline constexpr const char* kKernelA = "10.9.0.1";
inline constexpr const char* kKernelB = "10.9.0.2";
inline constexpr const char* kDaemonA = "10.9.0.11";
inline constexpr const char* kDaemonB = "10.9.0.12";

// Runs a shell command; its output (stdout and stderr) and exit status (-1 if
// it did not exit normally).
std::string run(const std::string& cmd, int* status);

// `ip netns exec NS ` (with the trailing space), to prefix a command with.
std::string ns_exec(const std::string& ns);

class NetnsPair {
 public:
  enum class Made { kOk, kSkip, kFail };

  // Names only; nothing exists until make(). `tag` keeps the namespaces of
  // different suites apart ("n" gives isoroce-na-<pid>, isoroce-nb-<pid>).
  explicit NetnsPair(const std::string& tag = "n", bool middle = false);
  ~NetnsPair() { destroy(); }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // Creates the namespaces, the veth(s), the kernel addresses and brings
  // everything up (IPv6 off on the daemons' veths: no router solicitations or
  // MLD on their links). kSkip (not root, no `ip netns`) or kFail with *why.
  Made make(std::string* why);
  // Deletes the namespaces (and with them the veths); true if none is left.
  bool destroy(std::string* why = nullptr);
  bool made() const { return made_; }

  // isoroced arguments for one port on `veth` with address `addr_prefix`
  // (qdisc_bypass=0: tc qdiscs on the veth see the frames), `extra` daemon
  // flags, and a small heap without hugepages.
  static std::vector<std::string> daemon_args(const std::string& veth, const std::string& addr_prefix,
                                              const std::vector<std::string>& extra = {});
  // One daemon per namespace (A on irA with kDaemonA, B on irB with kDaemonB
  // unless given); nullptr-free, check ok().
  std::unique_ptr<DaemonProcess> start_daemon_a(const std::vector<std::string>& extra = {},
                                                const std::string& addr_prefix = "") const;
  std::unique_ptr<DaemonProcess> start_daemon_b(const std::vector<std::string>& extra = {},
                                                const std::string& addr_prefix = "") const;

  std::string ns_a, ns_b, ns_m, veth_a, veth_b, veth_am, veth_bm;
  bool middle;

 private:
  bool made_ = false;
};

}  // namespace isoroce::test
