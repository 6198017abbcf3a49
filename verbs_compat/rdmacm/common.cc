// Logging, event channels, the id table, addresses and the isoroce devices.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>

#include "verbs_compat/rdmacm/internal.h"

namespace isoroce::rcm {

namespace {
void vlog(const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::fprintf(stderr, "isoroce-rdmacm: %s\n", buf);
}
}  // namespace

void log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void debug(const char* fmt, ...) {
  static const bool on = std::getenv("ISOROCE_VERBS_DEBUG") != nullptr;
  if (!on) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

int fail(int err) {
  errno = err;
  return -1;
}

int reply_errno(const json& r) {
  auto it = r.find("errno");
  if (it != r.end() && it->is_number_integer() && it->get<int>() > 0) return it->get<int>();
  return EIO;
}

json Channel::call(const json& req, bool quiet) {
  std::lock_guard lock(mu);
  if (!client) return {{"ok", false}, {"errno", EBADF}, {"error", "the event channel is destroyed"}};
  json r = client->call(req);
  if (!r.value("ok", false) && !quiet)
    debug("%s: %s (errno %d)", req.value("op", "?").c_str(), r.value("error", std::string("failed")).c_str(),
          reply_errno(r));
  return r;
}

Channel* new_channel() {
  std::string err;
  auto client = ctrl::Client::connect(ctrl::default_socket_path(), &err);
  if (!client) {
    log("%s", err.c_str());
    errno = ENODEV;
    return nullptr;
  }
  auto* c = new Channel;
  c->client = std::move(client);
  std::vector<int> fds;
  json r;
  {
    std::lock_guard lock(c->mu);
    r = c->client->call({{"op", "cm_channel"}}, {}, &fds);
  }
  if (!r.value("ok", false) || fds.size() != 1) {
    for (int f : fds) close(f);
    log("cm_channel: %s", r.value("error", std::string("no eventfd in the reply")).c_str());
    errno = r.value("ok", false) ? EPROTO : reply_errno(r);
    delete c;
    return nullptr;
  }
  c->ch.fd = fds[0];
  c->token = r.value("token", uint64_t{0});
  return c;
}

namespace {
// Destroyed channels kept a while (their fds closed, daemon connections
// ended) so a late rdma_get_cm_event on one finds it marked destroyed.
constexpr size_t kQuarantine = 256;
std::mutex g_quarantine_mu;
std::deque<Channel*>& quarantine() {
  static auto* q = new std::deque<Channel*>;
  return *q;
}

// The fd closes and the object goes to the quarantine (wait_mu not held).
void finish_delete(Channel* c) {
  if (c->ch.fd >= 0) {
    const int fl = fcntl(c->ch.fd, F_GETFL);
    c->nonblocking = fl >= 0 && (fl & O_NONBLOCK);
    close(c->ch.fd);
  }
  Channel* old = nullptr;
  {
    std::lock_guard lock(g_quarantine_mu);
    quarantine().push_back(c);
    if (quarantine().size() > kQuarantine) {
      old = quarantine().front();
      quarantine().pop_front();
    }
  }
  delete old;
}
}  // namespace

void delete_channel(Channel* c) {
  if (c == nullptr) return;
  {
    // The connection closes: the daemon destroys what it still holds.
    std::lock_guard lock(c->mu);
    c->client.reset();
  }
  std::unique_lock lock(c->wait_mu);
  if (c->destroyed) return;
  c->destroyed = true;
  if (c->waiters > 0) return;  // the last waiter finishes (leave_wait)
  lock.unlock();
  finish_delete(c);
}

bool enter_wait(Channel* c) {
  std::unique_lock lock(c->wait_mu);
  if (c->destroyed) {
    if (c->nonblocking) return fail(EBADF), false;
    lock.unlock();
    park_forever(c);
  }
  ++c->waiters;
  return true;
}

void leave_wait(Channel* c) {
  std::unique_lock lock(c->wait_mu);
  if (--c->waiters > 0 || !c->destroyed) return;
  lock.unlock();
  finish_delete(c);
}

void park_forever(Channel* c) {
  debug("rdma_get_cm_event: the event channel (fd %d) is destroyed; this thread stays blocked", c->ch.fd);
  for (;;) pause();  // a cancellation point; exit() ends the process as usual
}

Channel* chan(const Id& i) { return channel_of(i.id.channel); }

namespace {
std::mutex g_ids_mu;
std::map<uint32_t, Id*>& ids() {
  static auto* m = new std::map<uint32_t, Id*>;
  return *m;
}
}  // namespace

void insert_id(Id* i) {
  std::lock_guard lock(g_ids_mu);
  ids()[i->handle] = i;
}
void erase_id(Id* i) {
  std::lock_guard lock(g_ids_mu);
  auto it = ids().find(i->handle);
  if (it != ids().end() && it->second == i) ids().erase(it);
}
Id* find_id(uint32_t handle) {
  std::lock_guard lock(g_ids_mu);
  auto it = ids().find(handle);
  return it == ids().end() ? nullptr : it->second;
}

socklen_t addr_len(const sockaddr* sa) {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (sa->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

json addr_json(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa == nullptr) return nullptr;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return {{"addr", text}, {"port", ntohs(in->sin_port)}};
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    return {{"addr", text}, {"port", ntohs(in6->sin6_port)}};
  }
  return nullptr;
}

bool json_addr(const json& j, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  if (!j.is_object()) return false;
  const std::string a = j.value("addr", std::string());
  const uint16_t port = static_cast<uint16_t>(j.value("port", 0));
  auto* in = reinterpret_cast<sockaddr_in*>(out);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET, a.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    return true;
  }
  if (inet_pton(AF_INET6, a.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    return true;
  }
  return false;
}

std::string hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t k = 0; k < n; ++k) {
    const uint8_t b = static_cast<const uint8_t*>(p)[k];
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out;
  auto v = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t k = 0; k + 1 < s.size(); k += 2) out.push_back(static_cast<uint8_t>(v(s[k]) << 4 | v(s[k + 1])));
  return out;
}

namespace {
std::mutex g_devs_mu;
std::vector<Dev*>* g_devs = nullptr;  // never freed: contexts live for the process
}  // namespace

bool init_devices() {
  std::lock_guard lock(g_devs_mu);
  if (g_devs != nullptr) return !g_devs->empty() || (errno = ENODEV, false);
  // Our verbs must be isoroce's: libisoroce-verbs.so has to be preloaded too
  // (else the application's ibv_* reach the system libibverbs).
  void* ours = dlsym(RTLD_DEFAULT, "isoroce_qp_set_class");
  if (ours == nullptr)
    log("libisoroce-verbs.so is not loaded: LD_PRELOAD both libraries (libisoroce-rdmacm.so libisoroce-verbs.so)");
  g_devs = new std::vector<Dev*>;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int k = 0; list != nullptr && k < n; ++k) {
    ibv_context* c = ibv_open_device(list[k]);
    if (c == nullptr) continue;
    auto* d = new Dev;
    d->verbs = c;
    d->name = ibv_get_device_name(list[k]);
    ibv_query_gid(c, 1, 0, &d->gid);
    ibv_port_attr pa{};
    if (ibv_query_port(c, 1, &pa) == 0) d->active_mtu = pa.active_mtu;
    d->pd = ibv_alloc_pd(c);
    g_devs->push_back(d);
  }
  if (list != nullptr) ibv_free_device_list(list);
  if (g_devs->empty()) {
    errno = ENODEV;
    return false;
  }
  return true;
}

Dev* find_dev(const std::string& name) {
  if (!init_devices()) return nullptr;
  std::lock_guard lock(g_devs_mu);
  for (Dev* d : *g_devs)
    if (d->name == name) return d;
  return nullptr;
}

Dev* find_dev(ibv_context* verbs) {
  if (!init_devices()) return nullptr;
  std::lock_guard lock(g_devs_mu);
  for (Dev* d : *g_devs)
    if (d->verbs == verbs) return d;
  return nullptr;
}

std::vector<Dev*> all_devs() {
  if (!init_devices()) return {};
  std::lock_guard lock(g_devs_mu);
  return *g_devs;
}

void apply_addressing(Id& i, const json& j) {
  sockaddr_storage ss;
  if (j.contains("local") && json_addr(j["local"], &ss)) std::memcpy(&i.id.route.addr.src_storage, &ss, sizeof ss);
  if (j.contains("peer") && json_addr(j["peer"], &ss)) std::memcpy(&i.id.route.addr.dst_storage, &ss, sizeof ss);
  const std::string dev = j.value("device", std::string());
  if (!dev.empty() && i.id.verbs == nullptr) {
    if (Dev* d = find_dev(dev)) {
      i.id.verbs = d->verbs;
      if (i.id.pd == nullptr) i.id.pd = d->pd;
      i.id.port_num = 1;
      i.id.route.addr.addr.ibaddr.sgid = d->gid;
      i.id.route.addr.addr.ibaddr.pkey = htons(0xffff);
      i.mtu = d->active_mtu;
    } else {
      log("the daemon named device %s, which this process cannot open", dev.c_str());
    }
  }
  if (j.contains("dgid") && j["dgid"].is_string()) {
    in6_addr g{};
    if (inet_pton(AF_INET6, j["dgid"].get<std::string>().c_str(), &g) == 1)
      std::memcpy(i.id.route.addr.addr.ibaddr.dgid.raw, &g, 16);
  }
}

}  // namespace isoroce::rcm
