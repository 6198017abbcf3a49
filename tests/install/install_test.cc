// Installing isoroce: the staged file list of `cmake --install`, the service's
// readiness (Type=notify) against the socket, and the Debian package installed
// on this machine with a pingpong through the installed library.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Cmd {
  int rc = -1;
  std::string out;
};

// A shell command's exit status and its stdout+stderr.
Cmd sh(const std::string& cmd) {
  Cmd r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string temp_dir(const std::string& tag) {
  std::string t = "/tmp/isoroce-install-" + tag + "-XXXXXX";
  return mkdtemp(t.data()) ? t : "";
}

// What `cmake --install` puts under the prefix, relative to DESTDIR.
std::vector<std::string> expected_files() {
  const std::string p = ISOROCE_INSTALL_PREFIX;
  return {p + "/sbin/isoroced",
          p + "/bin/isoroce-ctl",
          p + "/bin/isoroce-sim",
          p + "/bin/isoroce-pcap",
          p + "/bin/isoroce-dcqcn",
          std::string(ISOROCE_INSTALL_LIBDIR) + "/libisoroce-verbs.so",
          std::string(ISOROCE_INSTALL_LIBDIR) + "/pkgconfig/isoroce-verbs.pc",
          p + "/include/isoroce/verbs_ext.h",
          p + "/lib/systemd/system/isoroced.service",
          std::string(ISOROCE_CONFDIR) + "/isoroced.toml",
          p + "/share/doc/isoroce/README.md",
          p + "/share/doc/isoroce/isoroced.md",
          p + "/share/doc/isoroce/deploy.md",
          p + "/share/doc/isoroce/examples/isoroced-nic.toml",
          p + "/sbin/isoroce-setup"};
}

TEST(Install, StagedTreeHasEveryFileAndNothingFromTheBuild) {
  const std::string stage = temp_dir("stage");
  ASSERT_FALSE(stage.empty());
  Cmd r = sh("DESTDIR=" + stage + " cmake --install " ISOROCE_BUILD_DIR);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const std::string& f : expected_files()) EXPECT_TRUE(fs::exists(stage + f)) << f << " missing\n" << r.out;
  // No test, benchmark, static library or object file is installed.
  for (const auto& e : fs::recursive_directory_iterator(stage)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("isoroce-test"), std::string::npos) << e.path();
    EXPECT_EQ(name.find("isoroce-bench"), std::string::npos) << e.path();
    EXPECT_NE(e.path().extension(), ".a") << e.path();
  }
  // The pkg-config file names the installed header and library.
  const std::string pc_dir = stage + ISOROCE_INSTALL_LIBDIR + "/pkgconfig";
  Cmd cflags = sh("PKG_CONFIG_PATH=" + pc_dir + " pkg-config --cflags isoroce-verbs");
  ASSERT_EQ(cflags.rc, 0) << cflags.out;
  EXPECT_NE(cflags.out.find("-I" ISOROCE_INSTALL_PREFIX "/include"), std::string::npos) << cflags.out;
  Cmd preload = sh("PKG_CONFIG_PATH=" + pc_dir + " pkg-config --variable=preload isoroce-verbs");
  EXPECT_EQ(preload.out, std::string(ISOROCE_INSTALL_LIBDIR) + "/libisoroce-verbs.so\n");
  // The unit starts the installed daemon with the installed configuration.
  std::ifstream unit(stage + ISOROCE_INSTALL_PREFIX "/lib/systemd/system/isoroced.service");
  std::stringstream text;
  text << unit.rdbuf();
  EXPECT_NE(text.str().find("ExecStart=" ISOROCE_INSTALL_PREFIX "/sbin/isoroced --config " ISOROCE_CONFDIR
                            "/isoroced.toml"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("Type=notify"), std::string::npos);
  EXPECT_NE(text.str().find("RuntimeDirectory=isoroce"), std::string::npos);
  sh("rm -rf " + stage);
}

TEST(Install, BinariesAreNotTunedForThisCpu) {
  // Portable by default: the compile commands carry no -march=native.
  std::ifstream db(ISOROCE_BUILD_DIR "/compile_commands.json");
  ASSERT_TRUE(db.good()) << "no compile_commands.json in " ISOROCE_BUILD_DIR;
  std::stringstream text;
  text << db.rdbuf();
  if (std::string(ISOROCE_NATIVE) == "ON") GTEST_SKIP() << "built with -DISOROCE_NATIVE=ON";
  EXPECT_EQ(text.str().find("-march=native"), std::string::npos);
}

// isoroce-setup: a report of this host, clear refusals, usage errors.
TEST(Setup, CheckReportsTheHostAndBadInputIsRefused) {
  const std::string tool = ISOROCE_SOURCE_DIR "/tools/setup/isoroce-setup";
  Cmd j = sh(tool + " check --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); "
                    "print(sorted(d), len(d[\"netdevs\"]) > 0, \"2M\" in d[\"hugepages\"][\"sizes\"])'");
  EXPECT_EQ(j.rc, 0) << j.out;
  EXPECT_EQ(j.out, "['advice', 'dpdk_bound', 'hugepages', 'iommu', 'netdevs'] True True\n");
  Cmd text = sh(tool + " check");
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("hugepages:"), std::string::npos) << text.out;
  Cmd bad = sh(tool + " frobnicate");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("unknown command 'frobnicate'"), std::string::npos) << bad.out;
  EXPECT_EQ(sh(tool + " bind not-a-pci-address").rc, 2);
  EXPECT_EQ(sh(tool + " hugepages lots").rc, 2);
  Cmd none = sh(tool + " steer no-such-iface0 0");
  EXPECT_EQ(none.rc, 1) << none.out;
  EXPECT_NE(none.out.find("no interface no-such-iface0"), std::string::npos) << none.out;
  // A queue the interface does not have.
  Cmd q = sh(tool + " steer lo 99");
  EXPECT_EQ(q.rc, 1) << q.out;
}

// The daemon with NOTIFY_SOCKET set, as systemd starts a Type=notify service:
// READY=1 arrives only once the control socket accepts, and a client that
// hammers connect() from the daemon's first instant is never refused once the
// socket's path exists (it either finds no file yet or gets in).
TEST(Service, ReadyOnlyWhenTheSocketAcceptsAndNeverRefused) {
  const std::string dir = temp_dir("notify");
  ASSERT_FALSE(dir.empty());
  const std::string notify = dir + "/notify", sock = dir + "/isoroced.sock";
  const int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un na{};
  na.sun_family = AF_UNIX;
  std::snprintf(na.sun_path, sizeof na.sun_path, "%s", notify.c_str());
  ASSERT_EQ(bind(nfd, reinterpret_cast<sockaddr*>(&na), sizeof na), 0);
  timeval tv{30, 0};
  setsockopt(nfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("NOTIFY_SOCKET", notify.c_str(), 1);
    const std::string log = dir + "/log";
    freopen(log.c_str(), "w", stderr);
    execl(ISOROCE_BUILD_DIR "/bin/isoroced", "isoroced", "--loopback", "--socket", sock.c_str(), "--file-prefix",
          ("isoroce_notify_" + std::to_string(getpid())).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Hammer: until READY, connect as fast as possible; count refusals of an
  // existing socket file.
  int refused = 0, attempts = 0, accepted = 0;
  bool ready = false;
  std::string state;
  while (!ready) {
    const int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    ++attempts;
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) ++accepted;
    else if (errno == ECONNREFUSED) ++refused;
    close(c);
    char buf[256];
    const ssize_t n = recv(nfd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      state.assign(buf, static_cast<size_t>(n));
      ready = state.find("READY=1") != std::string::npos;
    }
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    if (attempts > 2'000'000) break;
  }
  ASSERT_TRUE(ready) << "no READY=1 from isoroced (" << state << ")\n" << sh("cat " + dir + "/log").out;
  EXPECT_EQ(refused, 0) << refused << " of " << attempts << " connects refused before READY";
  // Ready means accepting.
  const int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  close(c);
  kill(pid, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << sh("cat " + dir + "/log").out;
  // STOPPING=1 on the way out.
  char buf[256];
  const ssize_t n = recv(nfd, buf, sizeof buf, MSG_DONTWAIT);
  EXPECT_GT(n, 0);
  if (n > 0) EXPECT_NE(std::string(buf, static_cast<size_t>(n)).find("STOPPING=1"), std::string::npos);
  close(nfd);
  sh("rm -rf " + dir);
}

// The daemon on hugepages (what a server with a NIC uses), where this machine
// lets us reserve them: 2 MB pages in a private hugetlbfs mount, given back after.
TEST(Hugepages, DaemonRunsOnThemAndAPingpongPasses) {
  if (geteuid() != 0) GTEST_SKIP() << "reserving hugepages needs root";
  const std::string nr = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
  const std::string before = sh("cat " + nr).out;
  if (before.empty()) GTEST_SKIP() << "no 2 MB hugepages on this kernel";
  const long old_pages = std::stol(before);
  const std::string dir = temp_dir("huge");
  ASSERT_FALSE(dir.empty());
  sh("echo " + std::to_string(old_pages + 256) + " > " + nr);
  const long got = std::stol(sh("cat " + nr).out) - old_pages;
  if (got < 256) {
    sh("echo " + std::to_string(old_pages) + " > " + nr);
    GTEST_SKIP() << "this machine gave " << got << " of 256 hugepages";
  }
  ASSERT_EQ(sh("mkdir -p " + dir + "/mnt && mount -t hugetlbfs -o pagesize=2M nodev " + dir + "/mnt").rc, 0);
  const std::string sock = dir + "/isoroced.sock";
  Cmd start = sh("(" ISOROCE_BUILD_DIR "/bin/isoroced --loopback --socket " + sock +
                 " --file-prefix isoroce_huge_test -- --huge-dir " + dir + "/mnt -m 256 > " + dir +
                 "/log 2>&1 & echo $! > " + dir + "/pid); for i in $(seq 200); do [ -S " + sock +
                 " ] && break; sleep 0.1; done; [ -S " + sock + " ]");
  EXPECT_EQ(start.rc, 0) << sh("cat " + dir + "/log").out;
  // Its memory is on the hugepages: the mount holds its files.
  Cmd used = sh("grep -c " + dir + "/mnt /proc/$(cat " + dir + "/pid)/maps");
  EXPECT_NE(used.out, "0\n") << "no mapping of the hugetlbfs mount in the daemon";
  const std::string env = "LD_PRELOAD=" ISOROCE_BUILD_DIR "/lib/libisoroce-verbs.so ISOROCE_SOCKET=" + sock + " ";
  Cmd pp = sh("(" + env + "timeout 60 ibv_rc_pingpong -d isoroce1 -g 0 -p 18556 -n 500 > " + dir +
              "/server 2>&1 &); for i in $(seq 100); do ss -ltn | grep -q ':18556 ' && break; sleep 0.1; done; " +
              env + "timeout 60 ibv_rc_pingpong -d isoroce0 -g 0 -p 18556 -n 500 127.0.0.1");
  EXPECT_EQ(pp.rc, 0) << pp.out << sh("cat " + dir + "/log").out;
  EXPECT_NE(pp.out.find("500 iters in"), std::string::npos) << pp.out;
  // Stopped, its pages unmapped (a zombie's maps are empty), the mount gone:
  // only then can the pages go back.
  sh("kill $(cat " + dir + "/pid); for i in $(seq 100); do grep -q " + dir + "/mnt /proc/$(cat " + dir +
     "/pid)/maps 2>/dev/null || break; sleep 0.1; done");
  sh("for i in $(seq 50); do umount " + dir + "/mnt 2>/dev/null && break; sleep 0.1; done; echo " +
     std::to_string(old_pages) + " > " + nr + "; rm -rf " + dir);
  EXPECT_EQ(std::stol(sh("cat " + nr).out), old_pages);
}

// The Debian package, built by scripts/package.sh, installed on this machine
// with apt-get (its dependencies from Debian), then the installed daemon with
// the installed configuration, and ibv_rc_pingpong through the installed
// library. It changes the machine: it runs in CI (CI=true) or when asked.
TEST(Package, InstallsAndRunsAPingpongThroughTheInstalledLibrary) {
  const char* ci = std::getenv("CI");
  const char* asked = std::getenv("ISOROCE_TEST_PACKAGE");
  if (!(ci && std::string(ci) == "true") && !(asked && std::string(asked) == "1"))
    GTEST_SKIP() << "installs a package on this machine: runs with CI=true or ISOROCE_TEST_PACKAGE=1";
  if (geteuid() != 0) GTEST_SKIP() << "apt-get install needs root";
  const std::string deb_dir = ISOROCE_BUILD_DIR "-deb";
  Cmd build = sh("ISOROCE_DEB_DIR=" + deb_dir + " " ISOROCE_SOURCE_DIR "/scripts/package.sh");
  ASSERT_EQ(build.rc, 0) << build.out;
  Cmd deb = sh("ls " + deb_dir + "/isoroce_*.deb | head -1");
  ASSERT_EQ(deb.rc, 0) << deb.out;
  const std::string file = deb.out.substr(0, deb.out.find('\n'));
  Cmd contents = sh("dpkg-deb -c " + file);
  for (const char* want : {"./usr/sbin/isoroced", "./usr/lib/x86_64-linux-gnu/libisoroce-verbs.so",
                           "./usr/include/isoroce/verbs_ext.h", "./usr/lib/systemd/system/isoroced.service",
                           "./etc/isoroce/isoroced.toml", "./usr/share/doc/isoroce/deploy.md"})
    EXPECT_NE(contents.out.find(want), std::string::npos) << want << "\n" << contents.out;
  Cmd info = sh("dpkg-deb -f " + file + " Depends");
  EXPECT_NE(info.out.find("libibverbs1"), std::string::npos) << info.out;

  Cmd inst = sh("DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " + file);
  ASSERT_EQ(inst.rc, 0) << inst.out;
  EXPECT_EQ(sh("getent group isoroce").rc, 0) << "postinst makes the isoroce group";
  Cmd verify = sh("systemd-analyze verify /usr/lib/systemd/system/isoroced.service");
  EXPECT_EQ(verify.rc, 0) << verify.out;

  // The installed daemon as the unit starts it (the socket moved to a private
  // path so that this test never meets a daemon the machine may run).
  const std::string dir = temp_dir("pkg");
  const std::string sock = dir + "/isoroced.sock";
  Cmd start = sh("(/usr/sbin/isoroced --config /etc/isoroce/isoroced.toml --socket " + sock +
                 " --file-prefix isoroce_pkg_test > " + dir + "/log 2>&1 & echo $! > " + dir +
                 "/pid); for i in $(seq 200); do [ -S " + sock + " ] && break; sleep 0.1; done; [ -S " + sock + " ]");
  ASSERT_EQ(start.rc, 0) << sh("cat " + dir + "/log").out;
  const std::string env = "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libisoroce-verbs.so ISOROCE_SOCKET=" + sock + " ";
  // The server listens on TCP 18555 for the QP exchange; the client starts once it does.
  Cmd pp = sh("(" + env + "timeout 60 ibv_rc_pingpong -d isoroce1 -g 0 -p 18555 -n 200 > " + dir +
              "/server 2>&1 &); for i in $(seq 100); do ss -ltn | grep -q ':18555 ' && break; sleep 0.1; done; " +
              env + "timeout 60 ibv_rc_pingpong -d isoroce0 -g 0 -p 18555 -n 200 127.0.0.1");
  EXPECT_EQ(pp.rc, 0) << pp.out << "\nserver:\n" << sh("cat " + dir + "/server").out;
  EXPECT_NE(pp.out.find("200 iters in"), std::string::npos) << pp.out;
  sh("kill $(cat " + dir + "/pid); sleep 1");
  Cmd rm = sh("DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y isoroce");
  EXPECT_EQ(rm.rc, 0) << rm.out;
  EXPECT_FALSE(fs::exists("/usr/sbin/isoroced"));
  sh("rm -rf " + dir);
}

}  // namespace
