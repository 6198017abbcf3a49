#include "ctrl/cm_agent.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "ctrl/device_entry.h"
#include "transport/wire/packet.h"

namespace isoroce::ctrl {
namespace {

// The Local CA GUID the CM puts in REQ and REP: the port's EUI-64, as
// libisoroce-verbs reports the node GUID (0 if the port has no MAC).
uint64_t port_guid(DeviceDriver& d) {
  const json p = d.port_json();
  const std::string mac = p.contains("mac") && p["mac"].is_string() ? p["mac"].get<std::string>() : "";
  unsigned m[6] = {};
  if (std::sscanf(mac.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) return 0;
  const uint8_t eui[8] = {static_cast<uint8_t>(m[0] ^ 2), static_cast<uint8_t>(m[1]), static_cast<uint8_t>(m[2]),
                          0xff, 0xfe, static_cast<uint8_t>(m[3]), static_cast<uint8_t>(m[4]),
                          static_cast<uint8_t>(m[5])};
  return wire::load_be64(eui);
}

}  // namespace

CmAgent::CmAgent(DeviceDriver& driver, uint64_t seed)
    : driver_(driver), qp_({kQpn, kQkey, kRecvs, kSends, kSlot, cm::kMadBytes, "QPN 1, the GSI"}) {
  cm::ManagerConfig c;
  c.local_gid = driver.config().ip;
  if (seed == 0) {
    std::random_device rd;
    seed = static_cast<uint64_t>(rd()) << 32 | rd();
  }
  c.seed = seed ^ wire::load_be64(c.local_gid.data() + 8);
  mgr_ = std::make_unique<cm::Manager>(c);
  efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

CmAgent::~CmAgent() {
  if (efd_ >= 0) close(efd_);
}

std::string CmAgent::start(sched::Picos now) {
  (void)now;
  if (stats_.running) return {};
  if (std::string err = qp_.create(driver_.engine()); !err.empty()) return err;
  driver_.add_hook(this);
  hooked_ = true;
  stats_.running = true;
  if (uint64_t guid = port_guid(driver_)) {
    // The GUID is known only now (the port exists): a Manager with it, unless ids live.
    if (mgr_->live_ids() == 0) {
      cm::ManagerConfig c = mgr_->config();
      c.ca_guid = guid;
      mgr_ = std::make_unique<cm::Manager>(c);
    }
  }
  return {};
}

void CmAgent::stop() {
  if (hooked_) driver_.remove_hook(this), hooked_ = false;
  transport::Engine& e = driver_.engine();
  for (const auto& [gid, ah] : ahs_) e.destroy_ah(ah);
  ahs_.clear();
  ah_order_.clear();
  qp_.destroy(e);
  waiting_.clear();
  looped_.clear();
  stats_.running = false;
}

uint32_t CmAgent::address(sched::Picos, const cm::Gid& gid) {
  if (auto it = ahs_.find(gid); it != ahs_.end()) return it->second;
  // Bounded resolution (ARP/ND within the device's limits): a flood of forged
  // REQs cannot make the device solicit without end.
  if (!driver_.neighbor_known(gid, true)) return 0;
  transport::Engine& e = driver_.engine();
  if (ahs_.size() >= kMaxAhs) {
    e.destroy_ah(ahs_.at(ah_order_.front()));
    ahs_.erase(ah_order_.front());
    ah_order_.pop_front();
  }
  transport::AhAttr attr;
  attr.dgid = gid;
  auto ah = e.create_ah(qp_.pd(), attr);
  if (!ah.ok()) {
    ++stats_.send_errors;
    return 0;
  }
  ahs_[gid] = ah.value();
  ah_order_.push_back(gid);
  return ah.value();
}

bool CmAgent::try_send(sched::Picos now, const cm::OutMad& m) {
  const uint32_t ah = address(now, m.dgid);
  if (ah == 0) return false;
  transport::Sge sge{reinterpret_cast<uint64_t>(m.bytes.data()), static_cast<uint32_t>(m.bytes.size()), 0};
  transport::SendWr wr;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_INLINE;  // unsignaled: only errors complete
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  wr.ah = ah;
  wr.remote_qpn = m.dqpn;
  wr.remote_qkey = kQkey;
  if (driver_.engine().post_send(now, wire::Qpn(kQpn), wr) != 0) ++stats_.send_errors;
  else ++stats_.sent;
  return true;
}

void CmAgent::pump(sched::Picos now) {
  cm::OutMad m;
  while (mgr_->pop_mad(&m)) {
    if (!stats_.running) continue;  // no QP1 (engine being replaced): the retries send it later
    if (m.dgid == mgr_->config().local_gid) {
      if (looped_.size() < kRecvs) looped_.push_back(std::move(m.bytes));
      else ++stats_.unresolved;  // bounded like the wire's receive queue; retries cover it
      continue;
    }
    if (!try_send(now, m)) {
      if (waiting_.size() >= kRecvs) {
        ++stats_.unresolved;  // bounded; the Manager's retries cover it
        continue;
      }
      if (waiting_.empty()) resolve_poll_at_ = now + kResolvePoll;
      waiting_.push_back({std::move(m), now});
    }
  }
  push_events();
}

void CmAgent::push_events() {
  if (!mgr_->has_events()) return;  // the common pass: no lock
  cm::Event e;
  size_t added = 0;
  {
    std::lock_guard lock(mu_);
    while (mgr_->pop_event(&e)) {
      if (events_.size() >= kMaxEvents) {
        ++stats_.events_dropped;
        continue;
      }
      events_.push_back(std::move(e));
      ++added;
    }
  }
  stats_.events += added;
  if (added && efd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(efd_, &one, sizeof one);
  }
}

std::vector<cm::Event> CmAgent::take_events() {
  uint64_t v;
  if (efd_ >= 0) [[maybe_unused]] ssize_t n = read(efd_, &v, sizeof v);
  std::vector<cm::Event> out;
  std::lock_guard lock(mu_);
  out.swap(events_);
  return out;
}

void CmAgent::flush(sched::Picos now) { pump(now); }

void CmAgent::on_recv(sched::Picos now, uint32_t slot, uint32_t byte_len, uint32_t src_qp) {
  if (byte_len < kGrh + cm::kMadBytes) {
    ++stats_.short_received;
    // Still shown to the Manager: it counts the truncated MAD like any other.
  }
  const uint8_t* buf = qp_.slot(slot);
  // The sender's GID from the GRH: an IPv4 header in its last 20 bytes, or
  // the IPv6 header itself (RoCEv2, as the port's own family).
  cm::Gid src{};
  if (wire::is_ipv4_mapped(driver_.config().ip)) {
    uint32_t v4;
    std::memcpy(&v4, buf + 20 + 12, 4);
    src = wire::ipv4_mapped(__builtin_bswap32(v4));
  } else {
    std::memcpy(src.data(), buf + 8, 16);
  }
  const uint32_t len = byte_len > kGrh ? std::min(byte_len - kGrh, cm::kMadBytes) : 0;
  ++stats_.received;
  mgr_->on_mad(src, src_qp, std::span<const uint8_t>(buf + kGrh, len), now);
}

unsigned CmAgent::poll(sched::Picos now) {
  transport::Engine& e = driver_.engine();
  unsigned work = 0;
  if (stats_.running)
    work = qp_.drain(
        e, [&](const ibv_wc& wc) { on_recv(now, static_cast<uint32_t>(wc.wr_id), wc.byte_len, wc.src_qp); },
        [&](const ibv_wc& wc) { ++(wc.opcode == IBV_WC_RECV ? stats_.recv_errors : stats_.send_errors); });
  // MADs to ourselves, as if received on QP1 (what they produce waits for the next poll).
  for (size_t n = looped_.size(); n > 0 && stats_.running; --n) {
    std::vector<uint8_t> mad = std::move(looped_.front());
    looped_.pop_front();
    ++stats_.looped;
    ++work;
    mgr_->on_mad(mgr_->config().local_gid, kQpn, mad, now);
  }
  if (mgr_->next_deadline() <= now) {
    mgr_->on_timer(now);
    ++work;
  }
  // MADs waiting for their neighbour: sent once known, dropped after kResolveWait.
  if (!waiting_.empty() && now >= resolve_poll_at_) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (try_send(now, it->mad)) {
        it = waiting_.erase(it);
        ++work;
      } else if (now - it->since >= kResolveWait) {
        ++stats_.unresolved;
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    resolve_poll_at_ = now + kResolvePoll;
  }
  pump(now);
  return work;
}

sched::Picos CmAgent::next_deadline() const {
  if (!looped_.empty()) return 0;  // now
  sched::Picos d = mgr_->next_deadline();
  // Resolution under way: look again soon (neighbour answers arrive as frames).
  if (!waiting_.empty()) d = std::min(d, resolve_poll_at_);
  return d == cm::kNoDeadline ? sched::kNever : d;
}

CmAgentStats CmAgent::stats() const {
  CmAgentStats s = stats_;
  s.send_errors += qp_.post_errors();  // receives that could not be posted again
  s.manager = mgr_->stats();
  return s;
}

// Commands: the Manager's, then whatever they produced goes out.
int CmAgent::listen(uint64_t owner, uint64_t service_id, cm::Id* id) { return mgr_->listen(owner, service_id, id); }

int CmAgent::connect(uint64_t owner, const cm::ConnectParams& p, sched::Picos now, cm::Id* id) {
  int rc = mgr_->connect(owner, p, now, id);
  pump(now);
  return rc;
}

int CmAgent::accept(cm::Id id, const cm::AcceptParams& p, sched::Picos now) {
  int rc = mgr_->accept(id, p, now);
  pump(now);
  return rc;
}

int CmAgent::reject(cm::Id id, const cm::RejectParams& p, sched::Picos now) {
  int rc = mgr_->reject(id, p, now);
  pump(now);
  return rc;
}

int CmAgent::send_mra(cm::Id id, uint8_t t, std::span<const uint8_t> pd, sched::Picos now) {
  int rc = mgr_->send_mra(id, t, pd, now);
  pump(now);
  return rc;
}

int CmAgent::establish(cm::Id id, std::span<const uint8_t> pd, sched::Picos now) {
  int rc = mgr_->establish(id, pd, now);
  pump(now);
  return rc;
}

int CmAgent::notify_established(cm::Id id, sched::Picos now) {
  int rc = mgr_->notify_established(id, now);
  pump(now);
  return rc;
}

int CmAgent::disconnect(cm::Id id, std::span<const uint8_t> pd, sched::Picos now) {
  int rc = mgr_->disconnect(id, pd, now);
  pump(now);
  return rc;
}

int CmAgent::sidr_resolve(uint64_t owner, const cm::SidrParams& p, sched::Picos now, cm::Id* id) {
  int rc = mgr_->sidr_resolve(owner, p, now, id);
  pump(now);
  return rc;
}

int CmAgent::sidr_reply(cm::Id id, const cm::SidrReplyParams& p, sched::Picos now) {
  int rc = mgr_->sidr_reply(id, p, now);
  pump(now);
  return rc;
}

int CmAgent::destroy(cm::Id id, sched::Picos now) {
  int rc = mgr_->destroy(id, now);
  pump(now);
  return rc;
}

size_t CmAgent::destroy_owner(uint64_t owner, sched::Picos now) {
  size_t n = mgr_->destroy_owner(owner, now);
  pump(now);
  return n;
}

}  // namespace isoroce::ctrl
