// A QEMU guest running Linux rxe (scripts/rxe-guest/): booted once, then told
// to run commands through the agent of its /init on a virtio-serial port,
// while the test runs the other side of each program on isoroce.
//
//   network namespace ns (RxeGuestVm::netns())
//     tap (kernel 10.14.0.1/24) ── guest eth0 10.14.0.2/24, rxe0 on it
//                               └─ isoroced net_af_packet on the tap, 10.14.0.11/24
//
// The guest is TCG-emulated (no KVM): its programs run about 10 to 50 times
// slower than here, so commands get generous timeouts.
#pragma once

#include <sys/types.h>

#include <string>

namespace isoroce::test {

struct GuestResult {
  int rc = -1;      // the command's exit status (124: killed by `timeout`)
  std::string out;  // stdout and stderr
};

class RxeGuestVm {
 public:
  struct Options {
    std::string tag = "qemu";           // names: ns-<tag>-rxe-<pid>, tap <tag>tap<pid>
    std::string guest_ip = "10.14.0.2/24";
    std::string kernel_ip = "10.14.0.1/24";
    int mtu = 1500;
    int boot_timeout_s = 240;           // fetch + initramfs on a cold cache, then the boot
  };
  enum class Made { kOk, kSkip, kFail };

  RxeGuestVm() : RxeGuestVm(Options{}) {}
  explicit RxeGuestVm(Options o);
  ~RxeGuestVm() { stop(); }
  RxeGuestVm(const RxeGuestVm&) = delete;
  RxeGuestVm& operator=(const RxeGuestVm&) = delete;

  // Why QEMU cannot run here (not root, no qemu-system-x86_64, no
  // /dev/net/tun), or "" when it can.
  static std::string cannot_run();

  // Makes the namespace and tap (scripts/rxe-guest/net.sh), builds or reuses
  // the initramfs and boots the guest (boot.sh), waits for its agent.
  // kSkip only for cannot_run(); kFail with *why (and the console) otherwise.
  Made boot(std::string* why);
  // Powers the guest off and deletes the namespace.
  void stop();

  // Runs `sh -c cmd` in the guest, killed after timeout_s.
  GuestResult run(const std::string& cmd, int timeout_s = 60);
  // Starts `cmd` in the background (killed after timeout_s); wait() collects it.
  int start(const std::string& cmd, int timeout_s = 60);
  GuestResult wait(int job, int timeout_s = 120);

  const std::string& netns() const { return ns_; }
  const std::string& tap() const { return tap_; }
  std::string guest_addr() const;   // 10.14.0.2
  std::string kernel_addr() const;  // 10.14.0.1
  double boot_seconds() const { return boot_s_; }
  std::string console() const;  // what the guest printed on its serial console

 private:
  bool send(const std::string& line);
  // Reads until `marker` (a whole line starting with it); what came before,
  // and the marker line itself in *line. False on timeout or a closed port.
  bool read_until(const std::string& marker, int timeout_s, std::string* before, std::string* line);

  Options o_;
  std::string ns_, tap_, ctl_path_, console_path_, dir_;
  pid_t qemu_ = -1;
  int fd_ = -1;
  int next_job_ = 1;
  std::string buf_;
  double boot_s_ = 0;
  bool net_made_ = false;
};

}  // namespace isoroce::test
