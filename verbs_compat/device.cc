// Devices, contexts, queries and strings: what ibv_devices and ibv_devinfo use.
// The daemon's devices look like rxe ones: node type CA, transport IB, one
// port (1) with an Ethernet link layer, one GID: the IPv4-mapped address
// (RoCE v2).
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "transport/verbs/mtu.h"
#include "verbs_compat/internal.h"

namespace isoroce::vc {

void log(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "isoroce-verbs: %s\n", buf);
}

void debug(const char* fmt, ...) {
  static const bool on = std::getenv("ISOROCE_VERBS_DEBUG") != nullptr;
  if (!on) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "isoroce-verbs: %s\n", buf);
}

Device* device_of(ibv_device* d) { return outer_of(d, &Device::dev); }
Context* context_of(ibv_context* c) {
  verbs_context* v = outer_of(c, &verbs_context::context);
  return outer_of(v, &Context::vctx);
}

int reply_errno(const json& r) {
  auto it = r.find("errno");
  if (it != r.end() && it->is_number_integer() && it->get<int>() > 0) return it->get<int>();
  return EIO;
}

json Context::call(const json& req, std::span<const int> fds, std::vector<int>* received, bool quiet) {
  std::lock_guard lock(mu);
  json r = received ? client->call(req, fds, received) : client->call(req, fds);
  if (!r.value("ok", false) && !quiet)
    log("%s: %s (errno %d)", req.value("op", "?").c_str(), r.value("error", std::string("failed")).c_str(),
        reply_errno(r));
  return r;
}

namespace {

std::mutex g_devices_mu;
std::vector<Device*>& known_devices() {  // never freed: ibv_device pointers stay valid
  static auto* v = new std::vector<Device*>;
  return *v;
}

ibv_mtu mtu_from_bytes(int bytes) { return verbs::mtu_at_most(static_cast<uint64_t>(std::max(bytes, 0))); }

void update_device(Device* d, const json& v) {
  d->name = v.value("name", std::string());
  const std::string gid = v.contains("gid") && v["gid"].is_array() && !v["gid"].empty() ? v["gid"][0].get<std::string>() : "";
  std::memset(d->gid, 0, sizeof d->gid);
  if (inet_pton(AF_INET6, gid.c_str(), d->gid) != 1) {
    in_addr v4{};
    if (inet_pton(AF_INET, gid.c_str(), &v4) == 1) {
      d->gid[10] = d->gid[11] = 0xff;
      std::memcpy(d->gid + 12, &v4, 4);
    }
  }
  unsigned m[6] = {};
  const std::string mac = v.value("mac", std::string());
  uint8_t eui[8] = {};
  if (std::sscanf(mac.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6) {
    eui[0] = static_cast<uint8_t>(m[0] ^ 2), eui[1] = static_cast<uint8_t>(m[1]), eui[2] = static_cast<uint8_t>(m[2]);
    eui[3] = 0xff, eui[4] = 0xfe;
    eui[5] = static_cast<uint8_t>(m[3]), eui[6] = static_cast<uint8_t>(m[4]), eui[7] = static_cast<uint8_t>(m[5]);
  }
  std::memcpy(&d->guid_be, eui, 8);
  d->active_mtu = mtu_from_bytes(v.value("active_mtu", 1024));
  d->link_gbps = v.value("link_gbps", 0.0);
  d->link_up = v.value("link_up", true);
  ibv_device& dev = d->dev;
  dev.node_type = IBV_NODE_CA;
  dev.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(dev.name, sizeof dev.name, "%s", d->name.c_str());
  std::snprintf(dev.dev_name, sizeof dev.dev_name, "uverbs-%s", d->name.c_str());
  // No sysfs behind these: ibv_read_sysfs_file on them fails cleanly.
  std::snprintf(dev.dev_path, sizeof dev.dev_path, "/run/isoroce/no-sysfs/%s", dev.dev_name);
  std::snprintf(dev.ibdev_path, sizeof dev.ibdev_path, "/run/isoroce/no-sysfs/%s", d->name.c_str());
}

int query_port(ibv_context* c, uint8_t port_num, ibv_port_attr* out, size_t len);

// What the extended query reports, truthfully: the legacy attributes and
// nothing beyond them — no on-demand paging, no completion timestamps (no
// HCA clock), no TSO, RSS, packet pacing, raw packet, tag matching, CQ
// moderation, device memory or PCI atomics, one physical port. attr_size is
// the size of the caller's struct (older programs pass a smaller one).
int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex a;
  std::memset(&a, 0, sizeof a);
  fill_device_attr(*context_of(c)->dev, &a.orig_attr);
  a.comp_mask = 0;
  a.odp_caps = {};                    // general_caps without IBV_ODP_SUPPORT
  a.completion_timestamp_mask = 0;    // read_completion_ts is not offered (cq_ex.cc)
  a.hca_core_clock = 0;
  a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
  a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
  std::memset(attr, 0, attr_size);
  std::memcpy(attr, &a, std::min(attr_size, sizeof a));
  return 0;
}

void fill_port_attr(const Device& d, ibv_port_attr* a) {
  std::memset(a, 0, sizeof *a);
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = d.active_mtu;
  a->gid_tbl_len = 1;
  a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  a->max_msg_sz = 1u << 31;
  a->bad_pkey_cntr = 0;
  a->qkey_viol_cntr = 0;
  a->pkey_tbl_len = 1;
  a->lid = 0;
  a->sm_lid = 0;
  a->lmc = 0;
  a->max_vl_num = 1;
  a->sm_sl = 0;
  a->subnet_timeout = 0;
  a->init_type_reply = 0;
  // Width x speed closest to the link rate, as rxe derives it from the netdev.
  a->active_width = 2;                                      // 4X
  a->active_speed = d.link_gbps > 40 ? 32 : (d.link_gbps > 10 ? 16 : 1);  // EDR / FDR10 / SDR
  a->phys_state = 5;                                        // LinkUp
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

int query_port(ibv_context* c, uint8_t port_num, ibv_port_attr* out, size_t len) {
  if (port_num != 1) return EINVAL;
  ibv_port_attr a;
  fill_port_attr(*context_of(c)->dev, &a);
  std::memcpy(out, &a, std::min(len, sizeof a));
  return 0;
}

}  // namespace

void fill_device_attr(const Device& d, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "isoroce 0.1.0");
  a->node_guid = d.guid_be;
  a->sys_image_guid = d.guid_be;
  a->max_mr_size = ~0ull;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = 0xffffff;  // as rxe
  a->vendor_part_id = 0;
  a->hw_ver = 0;
  a->max_qp = 0x10000;
  a->max_qp_wr = kMaxQpWr;
  a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_CHANGE_PHY_PORT |
                        IBV_DEVICE_UD_AV_PORT_ENFORCE | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
                        IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_MEM_WINDOW |
                        IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a->max_mw = 0x40000 - 1;  // as rxe
  a->max_sge = kMaxSge;
  a->max_sge_rd = kMaxSge;
  a->max_cq = 0x10000;
  a->max_cqe = kMaxCqe;
  a->max_mr = 0x80000 - 1;
  a->max_pd = 0x10000;
  a->max_qp_rd_atom = 128;
  a->max_ee_rd_atom = 0;
  a->max_res_rd_atom = 0x3f000;
  a->max_qp_init_rd_atom = 128;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ah = 0x4000 - 1;
  a->max_srq = 0x10000;
  a->max_srq_wr = kMaxQpWr;
  a->max_srq_sge = kMaxSrqSge;
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
}

}  // namespace isoroce::vc

using namespace isoroce::vc;

#undef ibv_query_port

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  std::string err;
  const std::string path = isoroce::ctrl::default_socket_path();
  std::unique_ptr<isoroce::ctrl::Client> c = isoroce::ctrl::Client::connect(path, &err);
  json list = json::array();
  if (!c) {
    log("no daemon at %s (%s): no devices", path.c_str(), err.c_str());
  } else {
    json r = c->call({{"op", "devices"}});
    if (r.value("ok", false) && r["devices"].is_array()) list = r["devices"];
    else log("devices: %s", r.value("error", std::string("failed")).c_str());
  }
  std::lock_guard lock(g_devices_mu);
  std::vector<Device*> now;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = list[i].value("name", std::string());
    Device* d = nullptr;
    for (Device* k : known_devices())
      if (k->name == name) d = k;
    if (d == nullptr) {
      d = new Device;
      d->index = static_cast<int>(known_devices().size());
      known_devices().push_back(d);
    }
    update_device(d, list[i]);
    now.push_back(d);
  }
  auto** out = static_cast<ibv_device**>(std::calloc(now.size() + 1, sizeof(ibv_device*)));
  if (out == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < now.size(); ++i) out[i] = &now[i]->dev;
  if (num_devices) *num_devices = static_cast<int>(now.size());
  return out;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device->name; }

__be64 ibv_get_device_guid(ibv_device* device) { return device_of(device)->guid_be; }

int ibv_get_device_index(ibv_device* device) { return device_of(device)->index; }

ibv_context* ibv_open_device(ibv_device* device) {
  Device* d = device_of(device);
  std::string err;
  auto client = isoroce::ctrl::Client::connect(isoroce::ctrl::default_socket_path(), &err);
  if (!client) {
    log("open %s: %s", d->name.c_str(), err.c_str());
    errno = ENODEV;
    return nullptr;
  }
  auto* ctx = new Context;
  ctx->client = std::move(client);
  ctx->dev = d;
  std::vector<int> fds;
  // The doorbell (ctrl/shm_abi.h) unless ISOROCE_VERBS_DOORBELL=0: a daemon
  // without one ignores the field and sends the async eventfd alone.
  const char* bell_env = std::getenv("ISOROCE_VERBS_DOORBELL");
  const bool want_bell = bell_env == nullptr || std::strcmp(bell_env, "0") != 0;
  // With ISOROCE_VERBS_MEMBARRIER=1 the worker's membarrier replaces our fence
  // per post (ctrl/shm_abi.h), if the kernel registers us and the daemon
  // counts us (its reply's "membarrier"). Opt-in: the call's IPIs (about 50 us
  // on a VM) then precede each of the worker's long sleeps, which doubled two
  // daemons' round trips (docs/performance.md, "Adaptive spinning that stayed
  // short, and a membarrier that cost two daemons").
  const char* mb_env = std::getenv("ISOROCE_VERBS_MEMBARRIER");
  const bool want_membarrier =
      want_bell && mb_env != nullptr && std::strcmp(mb_env, "1") == 0 && membarrier_registered();
  json r = ctx->call({{"op", "open"},
                      {"device", d->name},
                      {"async_events", true},
                      {"shm_abi", isoroce::shm::kShmAbiVersion},
                      {"doorbell", want_bell},
                      {"membarrier", want_membarrier}},
                     {}, &fds);
  const bool with_bell = r.value("doorbell", false) == true;
  if (!r.value("ok", false) || fds.size() != (with_bell ? 3u : 1u)) {
    for (int f : fds) close(f);
    errno = r.value("ok", false) ? EPROTO : reply_errno(r);
    delete ctx;
    return nullptr;
  }
  if (with_bell) {
    void* page = mmap(nullptr, isoroce::shm::kDoorbellPageBytes, PROT_READ, MAP_SHARED, fds[1], 0);
    close(fds[1]);
    if (page == MAP_FAILED) {
      log("open %s: doorbell page: %s; posts wait for the worker's polling", d->name.c_str(), std::strerror(errno));
      close(fds[2]);
    } else {
      ctx->bell = static_cast<const isoroce::shm::DoorbellPage*>(page);
      ctx->bell_fd = fds[2];
      ctx->bell_membarrier = r.value("membarrier", false) == true &&
                             (ctx->bell->flags.load(std::memory_order_relaxed) & isoroce::shm::kBellMembarrier);
    }
  }
  ctx->info = r.value("device", json::object());
  if (!ctx->info.is_null() && ctx->info.is_object()) {
    std::lock_guard lock(g_devices_mu);
    update_device(d, ctx->info);
  }
  verbs_context& v = ctx->vctx;
  v.sz = sizeof(verbs_context);
  v.query_port = query_port;
  v.query_device_ex = query_device_ex;
  v.create_cq_ex = isoroce::vc::create_cq_ex;
  v.create_qp_ex = isoroce::vc::create_qp_ex;
  ibv_context& c = v.context;
  c.device = device;
  c.ops = ibv_context_ops{
      .poll_cq = isoroce::vc::poll_cq,
      .req_notify_cq = isoroce::vc::req_notify_cq,
      .post_srq_recv = isoroce::vc::post_srq_recv,
      .post_send = isoroce::vc::post_send,
      .post_recv = isoroce::vc::post_recv,
  };
  fill_unsupported_ops(v);
  fill_mw_ops(c);
  c.cmd_fd = ctx->client->fd();
  c.async_fd = fds[0];  // the daemon writes it when it queues an event (async.cc)
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  debug("opened %s", d->name.c_str());
  return &c;
}

int ibv_close_device(ibv_context* context) {
  Context* ctx = context_of(context);
  if (context->async_fd >= 0) close(context->async_fd);
  if (ctx->bell != nullptr) munmap(const_cast<isoroce::shm::DoorbellPage*>(ctx->bell), isoroce::shm::kDoorbellPageBytes);
  if (ctx->bell_fd >= 0) close(ctx->bell_fd);
  pthread_mutex_destroy(&context->mutex);
  delete ctx;  // closing the connection makes the daemon destroy what is left
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  fill_device_attr(*context_of(context)->dev, attr);
  return 0;
}

// The compat entry (binaries built before verbs.h made it an inline): the
// old struct ends before port_cap_flags2.
int ibv_query_port(ibv_context* context, uint8_t port_num, struct _compat_ibv_port_attr* attr) {
  return query_port(context, port_num, reinterpret_cast<ibv_port_attr*>(attr), offsetof(ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (port_num != 1 || index < 0) return -1;
  std::memset(gid, 0, sizeof *gid);
  if (index == 0) std::memcpy(gid->raw, context_of(context)->dev->gid, 16);
  return index < 1 ? 0 : -1;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size) {
  if (flags || port_num != 1 || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (gid_index != 0) return gid_index < 1 ? ENODATA : EINVAL;
  std::memset(entry, 0, entry_size);
  std::memcpy(entry->gid.raw, context_of(context)->dev->gid, 16);
  entry->gid_index = 0;
  entry->port_num = 1;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = 0;
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                             size_t entry_size) {
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  if (max_entries < 1) return -EINVAL;
  int rc = _ibv_query_gid_ex(context, 1, 0, entries, 0, entry_size);
  return rc ? -rc : 1;
}

// rdma-core's private ibv_query_gid_type (IBVERBS_PRIVATE_34), which
// ibv_devinfo calls: 1 is IBV_GID_TYPE_SYSFS_ROCE_V2.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  (void)context;
  if (port_num != 1) return -1;
  *type = index == 0 ? 1 : 0;
  return 0;
}

int ibv_query_pkey(ibv_context*, uint8_t port_num, int index, __be16* pkey) {
  if (port_num != 1 || index != 0) return -1;
  *pkey = htons(0xffff);
  return 0;
}

int ibv_get_pkey_index(ibv_context*, uint8_t port_num, __be16 pkey) {
  if (port_num != 1) return -1;
  return ntohs(pkey) == 0xffff ? 0 : -1;
}

int ibv_fork_init(void) { return 0; }  // registered pages are MAP_SHARED memfds: fork cannot break them
enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

const char* ibv_node_type_str(enum ibv_node_type node_type) {
  static const char* const kNames[] = {"unknown", "InfiniBand channel adapter", "InfiniBand switch",
                                       "InfiniBand router", "iWARP NIC", "usNIC", "usNIC UDP", "unspecified"};
  if (node_type < IBV_NODE_CA || node_type > IBV_NODE_UNSPECIFIED) return kNames[0];
  return kNames[node_type];
}

const char* ibv_port_state_str(enum ibv_port_state port_state) {
  static const char* const kNames[] = {"no state change (NOP)", "down", "init", "armed", "active", "active defer"};
  if (port_state < IBV_PORT_NOP || port_state > IBV_PORT_ACTIVE_DEFER) return "unknown";
  return kNames[port_state];
}

const char* ibv_event_type_str(enum ibv_event_type event) {
  static const char* const kNames[] = {
      "CQ error", "local work queue catastrophic error", "invalid request local work queue error",
      "local access violation work queue error", "communication established", "send queue drained",
      "path migrated", "path migration request error", "local catastrophic error", "port active",
      "port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
      "last WQE reached", "client reregistration", "GID table change", "WQ fatal"};
  if (event < IBV_EVENT_CQ_ERR || event > IBV_EVENT_WQ_FATAL) return "unknown";
  return kNames[event];
}

const char* ibv_wc_status_str(enum ibv_wc_status status) {
  static const char* const kNames[] = {
      "success", "local length error", "local QP operation error", "local EE context operation error",
      "local protection error", "Work Request Flushed Error", "memory management operation error",
      "bad response error", "local access error", "remote invalid request error", "remote access error",
      "remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
      "local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
      "invalid EE context state", "fatal error", "response timeout error", "general error",
      "TM error", "TM software rendezvous"};
  if (status < IBV_WC_SUCCESS || static_cast<size_t>(status) >= std::size(kNames)) return "unknown";
  return kNames[status];
}

int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) {
  log("ibv_resolve_eth_l2_from_gid: not supported (the daemon resolves neighbours itself)");
  return EOPNOTSUPP;
}

}  // extern "C"
