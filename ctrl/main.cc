// isoroced: the isoroce daemon. Manual: docs/isoroced.md.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "ctrl/config.h"
#include "ctrl/daemon.h"
#include "ctrl/log.h"
#include "ctrl/sd_notify.h"
#include "sched/policy_registry.h"

using namespace isoroce;

namespace {

// --check: the configuration as the daemon would run it.
int print_check(const ctrl::DaemonConfig& c) {
  std::printf("socket %s, policy %s, lcores %s\n", c.socket.c_str(), c.policy.c_str(),
              c.lcores.c_str());
  for (size_t i = 0; i < c.ports.size(); ++i)
    std::printf("isoroce%zu: %s, %s, %g Gb/s, mtu %u, policy %s, mac %s\n", i, c.ports[i].devargs.c_str(),
                c.ports[i].ip_text.c_str(), c.ports[i].link_gbps, c.ports[i].mtu,
                c.ports[i].policy->c_str(), c.ports[i].mac.c_str());
  for (size_t i = 0; i < c.ports.size(); ++i) {
    const ctrl::PortConfig& p = c.ports[i];
    if (!ctrl::is_interface_port(p.devargs)) continue;
    const bool xdp = p.mtu <= ctrl::kAfXdpMaxMtu;
    std::printf("isoroce%zu: interface %s through %s%s\n", i, p.devargs.c_str(),
                ctrl::interface_devargs(p.devargs, p.mtu, xdp).c_str(),
                xdp ? (", else " + ctrl::interface_devargs(p.devargs, p.mtu, false)).c_str()
                    : " (net_af_xdp carries mtu 2048 at most)");
  }
  const sched::RnicParams& r = c.rnic;
  std::printf("rnic: batch_packets %u, pipeline_packets %u, pipeline_jitter_packets %u, message_burst_bytes %s, "
              "max_mops %g\n", r.batch_packets, r.pipeline_packets, r.pipeline_jitter_packets,
              r.message_burst_bytes == sched::kWholeMessage ? "whole" : std::to_string(r.message_burst_bytes).c_str(),
              static_cast<double>(r.max_msgs_per_sec) / 1e6);
  std::string eal_line;
  for (const auto& a : ctrl::eal_arguments(c)) eal_line += " " + a;
  std::printf("EAL:%s\n", eal_line.c_str());
  return 0;
}

}  // namespace

// Long on purpose: every flag, its binding and its override of the file, read top to bottom.
int main(int argc, char** argv) {
  CLI::App app{"isoroced: software RoCEv2 RNICs on DPDK ports (docs/isoroced.md)"};
  std::string config_file;
  std::vector<std::string> ports, ips;
  std::vector<double> gbps;
  uint32_t mtu = 0;
  std::string ref_peer;
  std::string socket, policy, lcores, log_level, file_prefix;
  bool loopback = false;
  bool no_reference_echo = false;
  std::vector<std::string> eal;
  app.add_option("--config", config_file, "TOML configuration file (flags override it)")->check(CLI::ExistingFile);
  app.add_option("--socket", socket, std::string("control socket (default ") + ctrl::kDefaultSocket + ")");
  app.add_option("--port,--iface", ports,
                 "a port: a network interface name (eth1: AF_XDP, else AF_PACKET), a DPDK vdev "
                 "(net_af_packet0,iface=veth0) or a PCI address; repeat per port");
  app.add_option("--ip", ips, "ADDR/PREFIX of each --port, in order");
  app.add_option("--link-gbps", gbps, "emulated line rate of each --port, or one value for all");
  app.add_flag("--no-reference-echo", no_reference_echo,
               "answer no justitia reference probe (no UD QPN 15): a peer like rxe or a hardware RNIC (docs/isoroced.md)");
  app.add_flag("--loopback", loopback, "two ports isoroce0 (10.0.0.1) and isoroce1 (10.0.0.2) joined by an in-process ring pair");
  app.add_option("--mtu", mtu, "RoCE path MTU of every port: 256, 512, 1024, 2048 or 4096 (default 1024)");
  std::string port_mac;
  app.add_option("--port-mac", port_mac,
                 "own (default): each net_af_packet port on a kernel interface takes an Ethernet address of its own, "
                 "so the kernel's IP stack leaves its frames alone; interface: the interface's (docs/isoroced.md)");
  app.add_option("--ref-peer", ref_peer,
                 "justitia: probe this address (a port of another isoroced) as the reference flow (docs/isoroced.md)");
  app.add_option("--policy", policy, "transmit scheduler: rnic (default, preset cx4-roce), fifo, tassel, justitia or a plugin's policy");
  std::vector<std::string> plugins;
  app.add_option("--policy-plugin", plugins,
                 "load a policy plugin (shared object, sched/policy_api.h) before anything names its policy; repeat");
  app.add_option("--lcores", lcores, "EAL lcore list: the first serves the control socket, the others poll ports, spread round robin (default 0,1); "
                 "LCORE@CPU entries place lcores on CPUs (EAL --lcores), e.g. 0@0,1@1,2@0");
  uint32_t lanes_per_port = 0;
  app.add_option("--lanes-per-port", lanes_per_port,
                 "engines per port, each on its own worker lcore, sharing the link by their backlog (default 1; "
                 "docs/isoroced.md, Lanes)");
  app.add_option("--log-level", log_level, "error, warning, info or debug");
  app.add_option("--file-prefix", file_prefix, "EAL --file-prefix; dpdk-telemetry.py -f uses it (default isoroced)");
  std::vector<std::string> dcqcn;
  app.add_option("--dcqcn", dcqcn, "a DCQCN parameter NAME=VALUE, e.g. enabled=true (repeat; docs/dcqcn.md)");
  std::vector<std::string> justitia;
  std::vector<std::string> rnic;
  app.add_option("--rnic", rnic, "an rnic parameter NAME=VALUE: preset=cx4-roce|cx3-ib|t6-iwarp|fifo, batch_packets=4 (repeat; docs/sched.md#rnic)");
  app.add_option("--justitia", justitia, "a justitia parameter NAME=VALUE, e.g. target99_us=50 (repeat; docs/isoroced.md)");
  std::vector<std::string> limits;
  app.add_option("--limit", limits, "a per-client limit NAME=VALUE, e.g. max_qps=64 (repeat; docs/isoroced.md)");
  std::string admin_group;
  app.add_option("--admin-group", admin_group,
                 "members of this group may change device-wide settings and steer every QP (docs/security.md)");
  std::string socket_group, socket_mode;
  app.add_option("--socket-group", socket_group,
                 "the control socket's group: its members may connect (default isoroce, if it exists)");
  app.add_option("--socket-mode", socket_mode, "the control socket's mode, octal (default 0660)");
  bool check = false;
  app.add_flag("--check", check, "validate the configuration, print the ports and EAL arguments, and exit");
  app.footer("EAL arguments go after --, e.g. isoroced --loopback -- --no-huge -m 512");
  app.allow_extras(false);
  // Everything after the first "--" is for the EAL. Split here: CLI11 2.1's
  // repeatable options would otherwise take those words as their own values.
  int ours = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      ours = i;
      eal.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  CLI11_PARSE(app, ours, argv);

  ctrl::DaemonConfig c;
  auto bad = [](const ctrl::ConfigError& e) {
    std::fprintf(stderr, "isoroced: bad configuration: %s\n", e.text().c_str());
    return 2;
  };
  for (const std::string& so : plugins) {
    if (auto e = ctrl::load_policy_plugin(so)) return bad({"--policy-plugin", e->message});
    c.policy_plugins.push_back(so);
  }
  if (!config_file.empty()) {
    if (auto e = ctrl::load_config_file(config_file, &c)) return bad(*e);
    c.config_file = config_file;
  }
  if (!socket.empty()) c.socket = socket;
  if (!policy.empty()) {
    if (sched::find_policy(policy) == nullptr)
      return bad({"--policy", "'" + policy + "' is not a policy (" + sched::policy_names() + ")"});
    c.policy = policy;
  }
  if (mtu != 0) {
    c.mtu = mtu;
    for (ctrl::PortConfig& p : c.ports) p.mtu = 0;  // the flag wins over the file's [[port]] mtu
  }
  if (!ref_peer.empty()) {
    c.ref_peer = ref_peer;
    for (ctrl::PortConfig& p : c.ports) p.ref_peer_text.clear();  // the flag wins over [[port]] ref_peer
  }
  if (!port_mac.empty()) {
    c.port_mac = port_mac;
    for (ctrl::PortConfig& p : c.ports) p.mac.clear();  // the flag wins over [[port]] mac
  }
  if (!lcores.empty()) c.lcores = lcores;
  if (app.count("--lanes-per-port") != 0) {  // 0 given is refused by the check below
    c.lanes_per_port = lanes_per_port;
    for (ctrl::PortConfig& p : c.ports) p.lanes = 0;  // the flag wins over the file's [[port]] lanes
  }
  if (!log_level.empty()) c.log_level = log_level;
  if (!file_prefix.empty()) c.file_prefix = file_prefix;
  if (loopback) c.loopback = true;
  if (no_reference_echo) c.reference_echo = false;
  if (!eal.empty()) c.eal_args = eal;
  for (const std::string& kv : dcqcn) {
    if (std::string e = dcqcn::set_param(c.dcqcn, kv); !e.empty()) return bad({"--dcqcn " + kv, e});
  }
  for (const std::string& kv : justitia) {
    if (std::string e = ctrl::set_justitia_param(c.justitia, kv); !e.empty()) return bad({"--justitia " + kv, e});
  }
  for (const std::string& kv : rnic) {
    if (!sched::set(c.rnic, kv)) return bad({"--rnic " + kv, "unknown parameter or bad value (docs/sched.md#rnic)"});
  }
  for (const std::string& kv : limits) {
    if (std::string e = ctrl::set_limit(c.limits, kv); !e.empty()) return bad({"--limit " + kv, e});
  }
  if (!admin_group.empty()) c.admin_group = admin_group;
  if (!socket_group.empty()) c.socket_group = socket_group;
  if (!socket_mode.empty()) {
    auto m = ctrl::parse_mode(socket_mode);
    if (!m) return bad({"--socket-mode", "'" + socket_mode + "' is not an octal mode such as 0660"});
    c.socket_mode = *m;
  }
  if (!ports.empty()) {
    if (ips.size() != ports.size())
      return bad({"--ip", "give one --ip per --port (" + std::to_string(ports.size()) + " port(s), " +
                              std::to_string(ips.size()) + " address(es))"});
    if (gbps.size() > 1 && gbps.size() != ports.size())
      return bad({"--link-gbps", "give one value for all ports or one per --port"});
    c.ports.clear();
    for (size_t i = 0; i < ports.size(); ++i) {
      ctrl::PortConfig p;
      p.devargs = ports[i];
      p.ip_text = ips[i];
      if (!gbps.empty()) p.link_gbps = gbps.size() == 1 ? gbps[0] : gbps[i];
      c.ports.push_back(p);
    }
  } else if (!ips.empty()) {
    return bad({"--ip", "needs a --port"});
  } else if (gbps.size() == 1) {
    c.link_gbps = gbps[0];
  } else if (gbps.size() > 1) {
    return bad({"--link-gbps", "several values need as many --port"});
  }
  if (auto e = ctrl::validate(&c)) return bad(*e);
  if (check) return print_check(c);

  ctrl::Daemon daemon(c);
  std::string error;
  if (!daemon.start(&error)) {
    std::fprintf(stderr, "isoroced: cannot start: %s\n", error.c_str());
    return 1;
  }
  // start() returns once the socket accepts clients: only now is the service ready.
  if (!ctrl::sd_notify_state("READY=1\nSTATUS=serving " + c.socket, &error))
    std::fprintf(stderr, "isoroced: %s\n", error.c_str());
  const int status = daemon.run();
  ctrl::sd_notify_state("STOPPING=1", &error);
  return status;
}
