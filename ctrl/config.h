// isoroced's configuration: from a TOML file (--config), then the command-line
// flags on top. validate() names the setting that is wrong, the way the file
// or the flag spells it. Sample files: docs/isoroced-*.toml.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sched/justitia_params.h"
#include "ctrl/tenants.h"
#include "sched/scheduler.h"
#include "transport/dcqcn/params.h"
#include "transport/wire/packet.h"

namespace isoroce::ctrl {

inline constexpr const char* kDefaultSocket = "/run/isoroce/isoroced.sock";

struct PortConfig {
  std::string devargs;      // "net_af_packet0,iface=veth0", "net_ring0", "0000:3b:00.0"
  std::string ip_text;      // "10.0.0.1/24" or "fd00::1/64"
  wire::IpAddr ip{};
  uint8_t prefix_len = 0;
  double link_gbps = 0;     // 0: the daemon's link_gbps
  std::optional<std::string> policy;  // none: the daemon's policy
  uint32_t mtu = 0;         // 0: the daemon's mtu
  // Lanes (docs/isoroced.md, "Lanes"): engines of this port, each on its own
  // worker lcore; 0: the daemon's lanes_per_port. validate() resolves it.
  uint32_t lanes = 0;
  // justitia: the reference flow's peer in another isoroced (ctrl/reference_echo.h);
  // empty: the daemon's ref_peer.
  std::string ref_peer_text;
  std::optional<wire::IpAddr> ref_peer;
  // The port's Ethernet address on a kernel interface through net_af_packet
  // (docs/isoroced.md, "An address of its own"): "own" (one of its own, derived
  // from the interface's, so the kernel's IP stack leaves its frames alone) or
  // "interface" (the kernel's); empty: the daemon's port_mac. validate() resolves it.
  std::string mac;
};

// What one client (one connection) may hold (docs/isoroced.md "Limits"):
// counts of objects, sizes of queues, registered bytes and the daemon's
// mappings made for it (each MR piece and each shared-memory ring is one).
// Over a count, bytes or mappings: ENOMEM; a queue over its size: EINVAL.
struct ClientLimits {
  uint32_t max_pds = 256;
  uint32_t max_cqs = 1024;
  uint32_t max_qps = 1024;
  uint32_t max_srqs = 256;
  uint32_t max_ahs = 1024;
  uint32_t max_mrs = 4096;
  uint32_t max_cqe = 32767;   // entries of one CQ (the device's max_cqe)
  uint32_t max_wr = 16384;    // entries of one send, receive or shared receive queue
  uint64_t max_mr_bytes = uint64_t{64} << 30;  // registered bytes, all MRs together
  uint32_t max_mappings = 8192;  // of vm.max_map_count (65530 by default), shared by every client
  uint32_t max_cm_ids = 1024;    // rdma_cm identifiers of one event channel (ctrl/cm_ids.h)
};

// The limits by name (max_qps, ...), in order; set one ("" or what is wrong).
const std::vector<std::string>& limit_names();
std::string set_limit(ClientLimits& l, const std::string& name, uint64_t value);
std::string set_limit(ClientLimits& l, const std::string& assignment);  // "NAME=VALUE"
std::vector<std::pair<std::string, uint64_t>> limit_values(const ClientLimits& l);

inline constexpr const char* kDefaultSocketGroup = "isoroce";

// The rnic preset of the daemon's default baseline, and its parameters.
inline constexpr const char* kDefaultRnicPreset = "cx4-roce";
sched::RnicParams default_rnic_params();

struct DaemonConfig {
  std::string config_file;  // the --config file (SIGHUP reloads its scheduler settings)
  std::string socket = kDefaultSocket;
  std::vector<PortConfig> ports;
  bool loopback = false;    // two ports joined by an in-process ring pair
  // Every device's reference echo (UD QPN 15, ctrl/reference_echo.h): false makes the
  // daemon a peer that answers no probe (as rxe or a hardware RNIC), and it probes none.
  bool reference_echo = true;
  // A registered policy (sched/policy_registry.h). The default baseline is the rnic
  // policy with the cx4-roce preset (kDefaultRnicPreset): a hardware RNIC's arbitration,
  // as the Justitia paper measured it on RoCEv2; "fifo" stays selectable by name.
  std::string policy = "rnic";
  double link_gbps = 10;
  uint32_t mtu = 1024;      // RoCE path MTU of every port: 256, 512, 1024, 2048 or 4096
  std::string ref_peer;     // every port's justitia reference peer (an address), unless its own
  std::string port_mac = "own";  // every port's [[port]] mac unless its own: "own" or "interface"
  std::string lcores = "0,1";  // EAL -l: the first is the control thread, the rest poll
  // Every port's lanes unless its own: 1 (one engine, one worker per port) up
  // to 16 (docs/isoroced.md, "Lanes").
  uint32_t lanes_per_port = 1;
  std::string log_level = "info";  // error, warning, info, debug
  std::string file_prefix = "isoroced";  // EAL --file-prefix (also names the telemetry socket)
  uint32_t idle_sleep_us = 1000;  // longest sleep of an idle worker (it backs off from 10 us)
  uint32_t idle_spin_us = 20;     // a worker busy-polls this long after its last work, then sleeps (0: 2000 passes)
  uint32_t worker_slice_us = 100; // the worker threads' EEVDF slice (Linux >= 6.12); 0: the kernel's default
  bool idle_spin_adaptive = true; // spin idle_spin_us only while most idle gaps are shorter (else 1 us)
  std::vector<std::string> eal_args;  // given after `--` or as eal_args = [...]
  dcqcn::Params dcqcn;      // [dcqcn] table / --dcqcn NAME=VALUE (docs/dcqcn.md)
  sched::JustitiaParams justitia;  // [justitia] table / --justitia NAME=VALUE (docs/sched.md)
  // policy_plugins = [...] / --policy-plugin PATH: loaded at start (sched/policy_plugin.h),
  // only ever from here: no client request loads code (docs/security.md).
  std::vector<std::string> policy_plugins;
  sched::RnicParams rnic = default_rnic_params();  // [rnic] table / --rnic NAME=VALUE (docs/sched.md)
  ClientLimits limits;      // [limits] table / --limit NAME=VALUE
  std::vector<TenantRule> tenants;  // [[tenant]] tables: name, weight, uids, comms (ctrl/tenants.h)
  // Members (a group name or number) are privileged clients besides root and
  // the daemon's user: device-wide settings, every QP (docs/security.md).
  std::string admin_group;
  std::optional<uint32_t> admin_gid;  // resolved by validate()
  // Who may connect at all: the socket's group and mode (like rdma-core's
  // udev rules for /dev/infiniband/uverbs*). The default group is "isoroce"
  // (the package makes it); if it does not exist, the daemon's own group.
  std::string socket_group = kDefaultSocketGroup;
  std::optional<uint32_t> socket_gid;  // resolved by validate()
  uint32_t socket_mode = 0660;
};

// The justitia parameters by the names of sched::set (target99_us, ...), in order.
const std::vector<std::string>& justitia_param_names();
// Sets one: "" or what is wrong ("unknown parameter (known: ...)", "'x' is not ...").
std::string set_justitia_param(sched::JustitiaParams& p, const std::string& name, const std::string& value);
// "NAME=VALUE".
std::string set_justitia_param(sched::JustitiaParams& p, const std::string& assignment);
// Each parameter's value in the unit of its name (target99_us: microseconds, ...).
std::vector<std::pair<std::string, double>> justitia_param_values(const sched::JustitiaParams& p);
// The parameters whose values are names: signal (probe, passive, both), classify
// (declared, auto, verify).
std::vector<std::pair<std::string, std::string>> justitia_param_words(const sched::JustitiaParams& p);

// The setting at fault and what is wrong with it.
struct ConfigError {
  std::string setting;
  std::string message;
  std::string text() const { return setting.empty() ? message : setting + ": " + message; }
};

// Reads the TOML file into *config (on top of what it holds).
std::optional<ConfigError> load_config_file(const std::string& path, DaemonConfig* config);
// Loads and registers one policy plugin (its faults go to the daemon's log). Loading
// a file again is a no-op (SIGHUP re-reads the configuration file).
std::optional<ConfigError> load_policy_plugin(const std::string& path);

// "0660" -> 0660; nullopt unless octal digits up to 0777.
std::optional<uint32_t> parse_mode(const std::string& text);

// Parses "a.b.c.d/len" or "v6addr/len" (the prefix defaults to /24 or /64).
bool parse_ip_prefix(const std::string& text, wire::IpAddr* ip, uint8_t* prefix_len);

// Fills derived fields (ip, prefix_len; the loopback ports) and checks
// everything a port needs before any DPDK call.
std::optional<ConfigError> validate(DaemonConfig* config);

// Frames in each of a net_af_packet port's rings unless its devargs say
// (framecnt=): DPDK's default, 512, is half a millisecond of a 10 Gb/s sender
// (1 KB MTU); a receiving daemon that is off its core longer than that (two
// cores shared with the applications) loses the rest in the kernel, and go-back-N
// resends whole windows. 4096 (8 MiB of 2 KiB slots) holds about 3.6 ms.
inline constexpr uint32_t kAfPacketFrames = 4096;
// Above MTU 1024 the ring holds the same payload instead, 4 MiB: framecnt =
// this / mtu (2048 frames at MTU 2048, 1024 at 4096). The kernel and the PMD
// walk every slot of a ring in turn, so a ring is the memory each frame's
// copies touch: 1024 slots of 4608 bytes carried 64 KB WRITEs through one
// daemon 1.45-2x as fast as 4096 (19 MB a ring, four per daemon of two ports)
// in 4 of 5 rounds; 256 and 512 slots, faster still there under load, lost
// frames between two daemons whose receivers wait for their CPU (0.55-0.8x)
// (docs/performance.md, "The kernel path, tuned").
inline constexpr uint32_t kAfPacketRingPayload = 4u << 20;

// The largest Ethernet frame a port of RoCE path MTU `mtu` bytes sends or must
// receive: a full RoCE packet (Ethernet + VLAN + IPv6 + UDP + BTH +
// RETH/AtomicETH + ICRC) or a full 1500-byte Ethernet frame (ARP, ping).
uint32_t max_frame_bytes(uint32_t mtu);
// The largest IP packet of RoCE path MTU `mtu` (IPv6 + UDP + BTH + RETH/AtomicETH
// + payload + ICRC): what the kernel interface behind a port must carry
// (1116 for 1024: a cloud NIC's MTU of 1400 is enough).
inline uint32_t roce_ip_mtu(uint32_t mtu) { return mtu + 40 + 8 + 12 + 28 + 4; }

// A net_af_packet slot holds the kernel's tpacket2 header and address (52
// bytes) before the frame; DPDK's default slot is 2048 bytes, enough up to MTU 1024.
inline constexpr uint32_t kAfPacketSlotOverhead = 64;
inline constexpr uint32_t kAfPacketDefaultFramesz = 2048;

// A port's devargs as given to EAL. net_af_packet gets
// framecnt=kAfPacketRingPayload/mtu (at most kAfPacketFrames, whole blocks)
// unless it names its own framecnt, and, for an MTU whose frames do not fit
// DPDK's 2048-byte slots, a framesz (and blocksz) that holds them unless it names
// its own; other devices are unchanged.
std::string af_packet_devargs(const std::string& devargs, uint32_t mtu);
// The mbuf data room a net_af_packet port of these devargs needs (its slots
// less the kernel's header); 0 for other devices.
uint32_t af_packet_data_room(const std::string& devargs, uint32_t mtu);

// A port given as a bare interface name ("eth1", `--iface eth1`): the kernel
// interface through net_af_xdp, or net_af_packet where AF_XDP cannot carry the
// MTU (over kAfXdpMaxMtu) or does not come up (the daemon logs why). Such
// ports are plugged after EAL starts, not given to it as --vdev.
bool is_interface_port(const std::string& devargs);
// DPDK 22.11's net_af_xdp holds each frame in one UMEM chunk (an mbuf) of at
// most a page, behind 256 bytes of XDP headroom, and has no multi-buffer:
// frames up to about 3.5 KB, RoCE MTU 2048.
inline constexpr uint32_t kAfXdpMaxMtu = 2048;
// net_af_xdp ports are plugged after EAL starts too: DPDK 22.11's driver
// detaches whatever XDP program its interface has when it closes, so the
// daemon first checks that no other AF_XDP user holds the interface.
bool is_af_xdp(const std::string& devargs);
// The value of devarg `key` ("iface" of "net_af_xdp0,iface=eth1"); "" if absent.
std::string devarg_text(const std::string& devargs, const std::string& key);
// The vdev devargs of interface port `iface`: net_af_xdp (xdp) or
// net_af_packet with its rings sized for `mtu` (af_packet_devargs).
std::string interface_devargs(const std::string& iface, uint32_t mtu, bool xdp);

// The EAL arguments for this configuration (argv[0] first).
std::vector<std::string> eal_arguments(const DaemonConfig& config);

}  // namespace isoroce::ctrl
