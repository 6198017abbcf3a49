#include "ctrl/reference_flow.h"

#include <cstring>
#include <random>

namespace isoroce::ctrl {
namespace {

constexpr uint32_t kRegion = 64;

std::string failed(const std::string& what, int err) { return what + " failed: " + std::strerror(err); }

}  // namespace

ReferenceFlow::ReferenceFlow(dataplane::Device& src, dataplane::Device& dst, sched::Picos period)
    : src_(src), dst_(dst), probe_(period), local_(new uint8_t[kRegion]()), remote_(new uint8_t[kRegion]()) {
  std::random_device rd;
  src_psn_ = rd() & wire::kMask24;
  dst_psn_ = rd() & wire::kMask24;
}

ReferenceFlow::~ReferenceFlow() = default;

std::string ReferenceFlow::create_end(dataplane::Device& dev, End& end, uint8_t* mem, uint32_t access,
                                      uint32_t psn, workload::ProbeEnd* out, const char* peer) {
  transport::Engine& e = dev.engine();
  auto pd = e.alloc_pd();
  if (!pd.ok()) return failed(std::string("alloc_pd") + peer, pd.err());
  end.pd = pd.value(), end.has_pd = true;
  auto mr = e.reg_mr(end.pd, mem, kRegion, reinterpret_cast<uint64_t>(mem), access);
  if (!mr.ok()) return failed(std::string("reg_mr") + peer, mr.err());
  end.lkey = mr.value().lkey, end.rkey = mr.value().rkey, end.has_mr = true;
  out->engine = &e;
  out->pd = end.pd;
  out->ip = dev.config().ip;
  out->mem = mem;
  out->iova = reinterpret_cast<uint64_t>(mem);
  out->lkey = end.lkey;
  out->rkey = end.rkey;
  out->psn = psn;
  return {};
}

std::string ReferenceFlow::create_src() {
  workload::ProbeEnd end;
  if (std::string e = create_end(src_, s_, local_.get(), IBV_ACCESS_LOCAL_WRITE, src_psn_, &end, ""); !e.empty())
    return e;
  return probe_.create_src(end);
}

std::string ReferenceFlow::create_dst() {
  workload::ProbeEnd end;
  if (std::string e = create_end(dst_, d_, remote_.get(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                 dst_psn_, &end, " (peer)");
      !e.empty())
    return e;
  return probe_.create_dst(end);
}

std::string ReferenceFlow::connect_dst() { return probe_.connect_dst(); }

std::string ReferenceFlow::connect_src(sched::Picos now) {
  if (std::string e = probe_.connect_src(now); !e.empty()) return e;
  src_.add_hook(this);
  hooked_ = true;
  return {};
}

void ReferenceFlow::destroy_end(dataplane::Device& dev, End& end) {
  transport::Engine& e = dev.engine();
  if (end.has_mr) e.dereg_mr(end.lkey);
  if (end.has_pd) e.dealloc_pd(end.pd);
  end = End{};
}

void ReferenceFlow::destroy_src() {
  if (hooked_) src_.remove_hook(this), hooked_ = false;
  probe_.destroy_src();
  destroy_end(src_, s_);
}

void ReferenceFlow::destroy_dst() {
  probe_.destroy_dst();
  destroy_end(dst_, d_);
}

}  // namespace isoroce::ctrl
