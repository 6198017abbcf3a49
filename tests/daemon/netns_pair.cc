#include "tests/daemon/netns_pair.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

namespace isoroce::test {

namespace {
const std::string kIp = "/usr/sbin/ip ";
}  // namespace

std::string run(const std::string& cmd, int* status) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) {
    *status = -1;
    return "popen failed";
  }
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string ns_exec(const std::string& ns) { return kIp + "netns exec " + ns + " "; }

NetnsPair::NetnsPair(const std::string& tag, bool with_middle) : middle(with_middle) {
  const std::string pid = std::to_string(getpid());
  ns_a = "isoroce-" + tag + "a-" + pid;
  ns_b = "isoroce-" + tag + "b-" + pid;
  ns_m = "isoroce-" + tag + "m-" + pid;
  // Interface names live in their namespaces: no tag needed (15 characters at most).
  veth_a = "irA" + pid;
  veth_b = "irB" + pid;
  veth_am = "irAm" + pid;
  veth_bm = "irBm" + pid;
}

NetnsPair::Made NetnsPair::make(std::string* why) {
  if (geteuid() != 0) {
    *why = "needs root (network namespaces, veth, af_packet)";
    return Made::kSkip;
  }
  int st;
  run(kIp + "netns list", &st);
  if (st != 0) {
    *why = "`ip netns` is unavailable";
    return Made::kSkip;
  }
  for (const std::string& ns : {ns_a, ns_b, ns_m}) run(kIp + "netns del " + ns, &st);  // a crashed run's, same pid
  std::vector<std::string> cmds = {kIp + "netns add " + ns_a, kIp + "netns add " + ns_b};
  if (middle) {
    for (const std::string& c :
         {kIp + "netns add " + ns_m,
          kIp + "link add " + veth_a + " netns " + ns_a + " type veth peer name " + veth_am + " netns " + ns_m,
          kIp + "link add " + veth_b + " netns " + ns_b + " type veth peer name " + veth_bm + " netns " + ns_m,
          ns_exec(ns_m) + "sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
          kIp + "-n " + ns_m + " link set " + veth_am + " up", kIp + "-n " + ns_m + " link set " + veth_bm + " up"})
      cmds.push_back(c);
  } else {
    cmds.push_back(kIp + "link add " + veth_a + " netns " + ns_a + " type veth peer name " + veth_b + " netns " + ns_b);
  }
  for (const std::string& c : {
           // No IPv6 chatter (router solicitations, MLD) on the daemons' links.
           ns_exec(ns_a) + "sysctl -qw net.ipv6.conf." + veth_a + ".disable_ipv6=1",
           ns_exec(ns_b) + "sysctl -qw net.ipv6.conf." + veth_b + ".disable_ipv6=1",
           kIp + "-n " + ns_a + " addr add " + kKernelA + "/24 dev " + veth_a,
           kIp + "-n " + ns_b + " addr add " + kKernelB + "/24 dev " + veth_b,
           kIp + "-n " + ns_a + " link set lo up",
           kIp + "-n " + ns_b + " link set lo up",
           kIp + "-n " + ns_a + " link set " + veth_a + " up",
           kIp + "-n " + ns_b + " link set " + veth_b + " up"})
    cmds.push_back(c);
  made_ = true;
  for (const std::string& c : cmds) {
    const std::string out = run(c, &st);
    if (st != 0) {
      *why = c + ": " + out;
      if (c == cmds[0]) {
        made_ = false;
        *why = "`ip netns add` fails here: " + out;
        return Made::kSkip;
      }
      return Made::kFail;
    }
  }
  return Made::kOk;
}

bool NetnsPair::destroy(std::string* why) {
  if (!made_) return true;
  made_ = false;
  int st;
  for (const std::string& ns : {ns_a, ns_b, ns_m}) run(kIp + "netns del " + ns, &st);  // and the veths
  const std::string out = run(kIp + "netns list", &st);
  for (const std::string& ns : {ns_a, ns_b, ns_m}) {
    if (out.find(ns) != std::string::npos) {
      if (why) *why = ns + " is still there: " + out;
      return false;
    }
  }
  return true;
}

std::vector<std::string> NetnsPair::daemon_args(const std::string& veth, const std::string& addr_prefix,
                                                const std::vector<std::string>& extra) {
  std::vector<std::string> a = {"--port", "net_af_packet0,iface=" + veth + ",qdisc_bypass=0", "--ip", addr_prefix};
  a.insert(a.end(), extra.begin(), extra.end());
  a.insert(a.end(), {"--", "--no-huge", "-m", "256"});
  return a;
}

std::unique_ptr<DaemonProcess> NetnsPair::start_daemon_a(const std::vector<std::string>& extra,
                                                         const std::string& addr_prefix) const {
  return std::make_unique<DaemonProcess>(
      daemon_args(veth_a, addr_prefix.empty() ? std::string(kDaemonA) + "/24" : addr_prefix, extra), ns_a);
}

std::unique_ptr<DaemonProcess> NetnsPair::start_daemon_b(const std::vector<std::string>& extra,
                                                         const std::string& addr_prefix) const {
  return std::make_unique<DaemonProcess>(
      daemon_args(veth_b, addr_prefix.empty() ? std::string(kDaemonB) + "/24" : addr_prefix, extra), ns_b);
}

}  // namespace isoroce::test
