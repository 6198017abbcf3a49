// What a flow (an application, workload/flow.h) needs from the host it runs
// on: verbs, registered memory, completions and a CPU to post from. The
// simulator's Host provides them over a transport::Engine in virtual time
// (dataplane/sim/host.cc); isoroce-ctl run's live hosts over isoroced's control
// socket in real time (tools/ctl/live_run.cc). One flow generator serves both.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "transport/engine/engine.h"
#include "workload/app_id.h"
#include "workload/flow_config.h"

namespace isoroce::workload {

class Flow;

// Registered memory a host allocated for an application (the simulator with
// malloc, live hosts as a memfd mapping: the deleter is the allocator's).
struct Region {
  std::shared_ptr<uint8_t> mem;
  uint64_t len = 0;
  uint64_t iova = 0;
  uint32_t lkey = 0, rkey = 0;
  uint8_t* at(uint64_t off) const { return mem.get() + off; }
  uint64_t va(uint64_t off) const { return iova + off; }
};

// Which flow and QP a (host, QPN) belongs to.
struct QpRef {
  uint32_t flow = 0;
  uint32_t qp = 0;
  bool requester = false;
};

// The verbs a flow calls; their meaning, results and errnos are those of
// transport::Engine's methods of the same name.
class FlowVerbs {
 public:
  virtual verbs::Result<transport::CqHandle> create_cq(int cqe) = 0;
  virtual verbs::Result<transport::SrqHandle> create_srq(transport::PdHandle pd, const ibv_srq_attr& attr) = 0;
  virtual verbs::Result<transport::AhHandle> create_ah(transport::PdHandle pd, const transport::AhAttr& attr) = 0;
  virtual verbs::Result<wire::Qpn> create_qp(const transport::QpCreate& create) = 0;
  virtual int modify_qp(wire::Qpn qpn, const ibv_qp_attr& attr, uint32_t mask) = 0;
  virtual int post_send(Picos now, wire::Qpn qpn, const transport::SendWr& wr) = 0;
  virtual int post_recv(wire::Qpn qpn, const transport::RecvWr& wr) = 0;
  virtual int post_srq_recv(transport::SrqHandle srq, const transport::RecvWr& wr) = 0;
  virtual int set_qp_rate(Picos now, wire::Qpn qpn, uint64_t bps) = 0;
  virtual int set_qp_class(Picos now, wire::Qpn qpn, sched::FlowClass cls, uint32_t app, uint32_t weight) = 0;
  // `tenant`: FlowConfig::tenant (a name; the simulator numbers them, the daemon
  // keeps its own names).
  virtual int set_qp_tenant(Picos now, wire::Qpn qpn, const std::string& tenant, uint32_t weight) = 0;

 protected:
  ~FlowVerbs() = default;
};

// FlowVerbs straight onto an engine (the simulator).
class EngineVerbs final : public FlowVerbs {
 public:
  explicit EngineVerbs(transport::Engine& e) : e_(e) {}
  verbs::Result<transport::CqHandle> create_cq(int cqe) override { return e_.create_cq(cqe); }
  verbs::Result<transport::SrqHandle> create_srq(transport::PdHandle pd, const ibv_srq_attr& a) override {
    return e_.create_srq(pd, a);
  }
  verbs::Result<transport::AhHandle> create_ah(transport::PdHandle pd, const transport::AhAttr& a) override {
    return e_.create_ah(pd, a);
  }
  verbs::Result<wire::Qpn> create_qp(const transport::QpCreate& c) override { return e_.create_qp(c); }
  int modify_qp(wire::Qpn qpn, const ibv_qp_attr& a, uint32_t mask) override { return e_.modify_qp(qpn, a, mask); }
  int post_send(Picos now, wire::Qpn qpn, const transport::SendWr& wr) override { return e_.post_send(now, qpn, wr); }
  int post_recv(wire::Qpn qpn, const transport::RecvWr& wr) override { return e_.post_recv(qpn, wr); }
  int post_srq_recv(transport::SrqHandle srq, const transport::RecvWr& wr) override {
    return e_.post_srq_recv(srq, wr);
  }
  int set_qp_rate(Picos now, wire::Qpn qpn, uint64_t bps) override { return e_.set_qp_rate(now, qpn, bps); }
  int set_qp_class(Picos now, wire::Qpn qpn, sched::FlowClass cls, uint32_t app, uint32_t weight) override {
    return e_.set_qp_class(now, qpn, cls, app, weight);
  }
  int set_qp_tenant(Picos now, wire::Qpn qpn, const std::string& tenant, uint32_t weight) override {
    return e_.set_qp_tenant(now, qpn, tenant_id(tenant), weight);
  }

 private:
  transport::Engine& e_;
};

class FlowHost {
 public:
  virtual uint32_t index() const = 0;
  virtual const wire::IpAddr& ip() const = 0;  // its GID
  virtual transport::PdHandle pd() const = 0;
  virtual FlowVerbs& verbs() = 0;
  // Memory registered with the host, zeroed, at a deterministic iova.
  virtual std::optional<SetupError> alloc_region(uint64_t len, uint32_t access, Region* out) = 0;
  // Completions of `cq` go to flow->on_completion(side).
  virtual void bind_cq(transport::CqHandle cq, Flow* flow, int side) = 0;
  // The application decided at `now` to post on flow's QP q (the host's CPU
  // posts it: at once, or after its per-message cost in the simulator).
  virtual void app_post(Picos now, Flow* flow, uint32_t q) = 0;
  // The host should look at its engine again at t (receives were posted).
  virtual void request_service(Picos t) = 0;
  // Asynchronous events of the host's engine, into the host's log.
  virtual void collect_events() = 0;

 protected:
  ~FlowHost() = default;
};

}  // namespace isoroce::workload
