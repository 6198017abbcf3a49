#include "ctrl/reference_echo.h"

#include <algorithm>
#include <cstring>

#include "transport/wire/packet.h"

namespace isoroce::ctrl {
namespace {

constexpr uint8_t kMagic[4] = {'I', 'R', 'F', '1'};
constexpr uint8_t kProbe = 1, kEcho = 2;
constexpr uint32_t kGrh = 40;

}  // namespace

ReferenceEcho::ReferenceEcho(dataplane::Device& dev)
    : dev_(dev), qp_({kQpn, kQkey, kRecvs, kSends, kSlot, kProbeBytes, "QPN 15"}) {}

ReferenceEcho::~ReferenceEcho() = default;

std::string ReferenceEcho::create(sched::Picos now) {
  transport::Engine& e = dev_.engine();
  if (std::string err = qp_.create(e); !err.empty()) return err;
  // Echoes and probes are the policy's own (latency-class service, never paced).
  e.set_qp_class(now, wire::Qpn(kQpn), sched::FlowClass::kReference, kApp, 1);
  dev_.add_hook(this);
  hooked_ = true;
  return {};
}

void ReferenceEcho::start_probing(sched::Picos now, const wire::IpAddr& peer, sched::Picos period) {
  peer_ = peer;
  period_ = std::max<sched::Picos>(period, 1);
  next_due_ = now;
  stats_.probing = true;
}

void ReferenceEcho::destroy() {
  if (hooked_) dev_.remove_hook(this), hooked_ = false;
  transport::Engine& e = dev_.engine();
  for (const auto& [ip, ah] : ahs_) e.destroy_ah(ah);
  ahs_.clear();
  qp_.destroy(e);
  stats_.probing = stats_.peer_known = false;
}

uint32_t ReferenceEcho::address(sched::Picos now, const wire::IpAddr& ip) {
  if (auto it = ahs_.find(ip); it != ahs_.end()) return it->second;
  // Unknown neighbours are resolved within NetStack's bounds (nothing for an
  // off-link address, a bounded and expiring set under way, a budget of
  // solicitations): a flood of forged probes cannot make the device broadcast
  // or remember one solicitation per probe.
  if (!dev_.resolve(ip, now)) return 0;
  if (ahs_.size() >= kMaxAhs) {
    // Full of addresses that probed us once: forget one that is not our peer.
    auto victim = std::find_if(ahs_.begin(), ahs_.end(), [&](const auto& e) { return e.first != peer_; });
    dev_.engine().destroy_ah(victim->second);
    ahs_.erase(victim);
  }
  transport::AhAttr attr;
  attr.dgid = ip;
  auto ah = dev_.engine().create_ah(qp_.pd(), attr);
  if (!ah.ok()) {
    ++stats_.errors;
    return 0;
  }
  ahs_[ip] = ah.value();
  return ah.value();
}

bool ReferenceEcho::send(sched::Picos now, uint32_t ah, uint32_t qpn, uint8_t kind, uint64_t seq) {
  uint8_t msg[kProbeBytes] = {};
  std::memcpy(msg, kMagic, 4);
  msg[4] = kind;
  std::memcpy(msg + 8, &seq, 8);
  transport::Sge sge{reinterpret_cast<uint64_t>(msg), kProbeBytes, 0};
  transport::SendWr wr;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_INLINE;  // unsignaled: only errors complete
  wr.sg_list = std::span<const transport::Sge>(&sge, 1);
  wr.ah = ah;
  wr.remote_qpn = qpn;
  wr.remote_qkey = kQkey;
  if (dev_.engine().post_send(now, wire::Qpn(kQpn), wr) != 0) {
    ++stats_.errors;
    return false;
  }
  return true;
}

void ReferenceEcho::on_recv(sched::Picos now, const ibv_wc& wc) {
  const uint8_t* buf = qp_.slot(wc.wr_id);
  if (wc.byte_len < kGrh + kProbeBytes || std::memcmp(buf + kGrh, kMagic, 4) != 0) return;
  const uint8_t kind = buf[kGrh + 4];
  uint64_t seq;
  std::memcpy(&seq, buf + kGrh + 8, 8);
  if (kind == kProbe) {
    // The sender's address from the GRH: an IPv4 header in its last 20 bytes,
    // or the IPv6 header itself (RoCEv2, as the port's own family).
    wire::IpAddr src{};
    if (wire::is_ipv4_mapped(dev_.config().ip)) {
      uint32_t v4;
      std::memcpy(&v4, buf + 20 + 12, 4);
      src = wire::ipv4_mapped(__builtin_bswap32(v4));
    } else {
      std::memcpy(src.data(), buf + 8, 16);
    }
    if (uint32_t ah = address(now, src); ah == 0) ++stats_.unanswered;
    else if (send(now, ah, wc.src_qp, kEcho, seq)) ++stats_.echoed;
  } else if (kind == kEcho && stats_.probing && outstanding_ && seq == seq_) {
    const sched::Picos lat = now - posted_at_;
    outstanding_ = false;
    dev_.engine().add_reference_latency(now, lat);
    ++stats_.completed;
    stats_.last = lat;
    stats_.min = stats_.completed == 1 ? lat : std::min(stats_.min, lat);
    stats_.max = std::max(stats_.max, lat);
  }
}

unsigned ReferenceEcho::poll(sched::Picos now) {
  transport::Engine& e = dev_.engine();
  unsigned work = qp_.drain(
      e, [&](const ibv_wc& wc) { on_recv(now, wc); },
      [&](const ibv_wc& wc) {
        if (wc.opcode != IBV_WC_RECV) ++stats_.errors;  // a send that failed
      });
  if (!stats_.probing) return work;
  if (outstanding_ && now - posted_at_ >= kLostAfter) {
    outstanding_ = false;
    ++stats_.lost;
    e.add_reference_latency(now, kLostAfter);
  }
  if (!outstanding_ && now >= next_due_) {
    next_due_ += period_;
    if (next_due_ <= now) next_due_ = now + period_;  // late: no burst of catch-up probes
    const uint32_t ah = address(now, peer_);
    stats_.peer_known = ah != 0;
    if (ah != 0 && send(now, ah, kQpn, kProbe, ++seq_)) {
      outstanding_ = true;
      posted_at_ = now;
      ++stats_.posted;
    }
    ++work;
  }
  return work;
}

sched::Picos ReferenceEcho::next_deadline() const {
  if (!stats_.probing) return sched::kNever;  // probes of others arrive as received work
  return outstanding_ ? posted_at_ + kLostAfter : next_due_;
}

}  // namespace isoroce::ctrl
