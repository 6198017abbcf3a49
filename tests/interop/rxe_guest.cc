#include "tests/interop/rxe_guest.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/daemon/netns_pair.h"  // run()

namespace isoroce::test {

namespace {

using Clock = std::chrono::steady_clock;

const std::string kScripts = std::string(ISOROCE_SOURCE_DIR) + "/scripts/rxe-guest/";

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// 'text' for sh, whatever it holds.
std::string sh_quote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string addr_of(const std::string& prefix) { return prefix.substr(0, prefix.find('/')); }

// A shell command (tests/daemon/netns_pair.h's run(), which RxeGuestVm::run hides).
std::string shell(const std::string& cmd, int* status) { return run(cmd, status); }

bool executable_on_path(const std::string& name) {
  int st;
  shell("command -v " + name, &st);
  return st == 0;
}

}  // namespace

RxeGuestVm::RxeGuestVm(Options o) : o_(std::move(o)) {
  const std::string pid = std::to_string(getpid());
  ns_ = "ns-" + o_.tag + "-rxe-" + pid;
  tap_ = (o_.tag + "tap" + pid).substr(0, 15);
}

std::string RxeGuestVm::cannot_run() {
  if (geteuid() != 0) return "needs root (a network namespace and a tap device for the guest's NIC)";
  if (!executable_on_path("qemu-system-x86_64"))
    return "no qemu-system-x86_64 (scripts/install-deps.sh installs qemu-system-x86)";
  if (access("/dev/net/tun", R_OK | W_OK) != 0) return "no /dev/net/tun: QEMU cannot attach the guest's NIC to a tap";
  return "";
}

std::string RxeGuestVm::guest_addr() const { return addr_of(o_.guest_ip); }
std::string RxeGuestVm::kernel_addr() const { return addr_of(o_.kernel_ip); }
std::string RxeGuestVm::console() const { return console_path_.empty() ? "" : slurp(console_path_); }

RxeGuestVm::Made RxeGuestVm::boot(std::string* why) {
  if (std::string no = cannot_run(); !no.empty()) {
    *why = no;
    return Made::kSkip;
  }
  char tmpl[] = "/tmp/isoroce-qemu-rxe-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *why = std::string("mkdtemp: ") + strerror(errno);
    return Made::kFail;
  }
  dir_ = tmpl;
  ctl_path_ = dir_ + "/ctl.sock";
  console_path_ = dir_ + "/console.log";

  int st;
  std::string out = shell(kScripts + "net.sh up " + ns_ + " " + tap_ + " " + o_.kernel_ip + " " + std::to_string(o_.mtu), &st);
  if (st != 0) {
    *why = "net.sh up: " + out;
    return Made::kFail;
  }
  net_made_ = true;
  // The kernel and initramfs first (cached: a fraction of a second; cold: the
  // download and the packing), so that the boot's time is the boot's.
  out = shell(kScripts + "build.sh", &st);
  if (st != 0) {
    *why = "scripts/rxe-guest/build.sh: " + out;
    return Made::kFail;
  }

  const std::string boot_log = dir_ + "/boot.log";
  const auto t0 = Clock::now();
  qemu_ = fork();
  if (qemu_ == 0) {
    const int fd = open(boot_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    const std::string script = kScripts + "boot.sh", mtu = std::to_string(o_.mtu);
    execl("/bin/bash", "bash", script.c_str(), "--netns", ns_.c_str(), "--tap", tap_.c_str(), "--ip",
          o_.guest_ip.c_str(), "--mtu", mtu.c_str(), "--ctl", ctl_path_.c_str(), "--console", console_path_.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  if (qemu_ < 0) {
    *why = std::string("fork: ") + strerror(errno);
    return Made::kFail;
  }
  // "@@ready" on the console once rxe0 is up; "@@fail WHY" if /init gave up.
  const auto deadline = t0 + std::chrono::seconds(o_.boot_timeout_s);
  for (;;) {
    const std::string con = console();
    if (con.find("@@ready") != std::string::npos) break;
    const bool failed = con.find("@@fail") != std::string::npos || con.find("Kernel panic") != std::string::npos;
    const bool exited = waitpid(qemu_, &st, WNOHANG) == qemu_;
    if (exited) qemu_ = -1;
    if (failed || exited || Clock::now() > deadline) {
      *why = std::string(failed ? "the guest failed" : exited ? "qemu exited" : "the guest did not come up in time") +
             "\nboot.sh:\n" + slurp(boot_log) + "\nconsole:\n" + con;
      return Made::kFail;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  boot_s_ = std::chrono::duration<double>(Clock::now() - t0).count();

  // The agent prints "@@ready" before it opens its port, and reopens the port
  // while no host is connected (scripts/rxe-guest/init): once in a full suite
  // the first line right after "@@ready" was never answered (30 s). So the
  // handshake is tried on a fresh connection up to four times, 10 s each.
  GuestResult hello;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (fd_ >= 0) close(fd_);
    buf_.clear();
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", ctl_path_.c_str());
    if (connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      *why = "connect " + ctl_path_ + ": " + strerror(errno);
      return Made::kFail;
    }
    hello = run("echo agent", 10);
    if (hello.rc == 0 && hello.out == "agent\n") return Made::kOk;
    std::fprintf(stderr, "rxe guest: the agent did not answer the handshake (try %d of 4): %s\n", attempt + 1,
                 hello.out.c_str());
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  *why = "the guest's agent does not answer (rc " + std::to_string(hello.rc) + "): " + hello.out + "\nconsole:\n" +
         console();
  return Made::kFail;
}

void RxeGuestVm::stop() {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (qemu_ > 0) {
    kill(qemu_, SIGTERM);
    int st;
    for (int i = 0; i < 100 && waitpid(qemu_, &st, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (waitpid(qemu_, &st, WNOHANG) == 0) {
      kill(qemu_, SIGKILL);
      waitpid(qemu_, &st, 0);
    }
    qemu_ = -1;
  }
  if (net_made_) {
    int st;
    shell(kScripts + "net.sh down " + ns_, &st);
    net_made_ = false;
  }
  if (!dir_.empty()) {
    int st;
    shell("rm -rf " + dir_, &st);
    dir_.clear();
  }
}

bool RxeGuestVm::send(const std::string& line) {
  if (fd_ < 0) return false;
  const std::string l = line + "\n";
  size_t off = 0;
  while (off < l.size()) {
    const ssize_t n = ::send(fd_, l.data() + off, l.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool RxeGuestVm::read_until(const std::string& marker, int timeout_s, std::string* before, std::string* line) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    for (size_t pos = buf_.find(marker); pos != std::string::npos; pos = buf_.find(marker, pos + 1)) {
      if (pos != 0 && buf_[pos - 1] != '\n') continue;
      const size_t eol = buf_.find('\n', pos);
      if (eol == std::string::npos) break;
      *before = buf_.substr(0, pos);
      *line = buf_.substr(pos, eol - pos);
      buf_.erase(0, eol + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

int RxeGuestVm::start(const std::string& cmd, int timeout_s) {
  const int job = next_job_++;
  if (!send("start " + std::to_string(job) + " exec timeout " + std::to_string(timeout_s) + " sh -c " +
            sh_quote(cmd)))
    return -1;
  std::string before, line;
  if (!read_until("@@started " + std::to_string(job), 30, &before, &line)) return -1;
  return job;
}

GuestResult RxeGuestVm::wait(int job, int timeout_s) {
  GuestResult r;
  if (job < 0 || !send("wait " + std::to_string(job))) {
    r.out = "the guest's agent is gone";
    return r;
  }
  std::string line;
  if (!read_until("@@end " + std::to_string(job) + " ", timeout_s, &r.out, &line)) {
    r.out += "\n(no answer from the guest in " + std::to_string(timeout_s) + " s)";
    return r;
  }
  // The agent ends the output with a newline of its own before the marker.
  if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  r.rc = std::atoi(line.substr(line.rfind(' ') + 1).c_str());
  return r;
}

GuestResult RxeGuestVm::run(const std::string& cmd, int timeout_s) {
  return wait(start(cmd, timeout_s), timeout_s + 30);
}

}  // namespace isoroce::test
