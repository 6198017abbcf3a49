// Hierarchical sharing for the tassel policy (issue 19): tenants (weight) above
// applications (weight) above QPs. The QPs held here are the ones that may send now
// (their rate limit, if any, allows it: tassel's timeline released them); the tree
// decides which of them goes next so that, when they want more than the link, a
// tenant gets its weight's share of the link whatever its number of applications or
// QPs, an application its weight's share of its tenant's, and an application's QPs
// equal turns.
//
//   tenants:       surplus round robin by bytes, quantum kQuantum x weight
//   applications:  the same inside each tenant (a ring per tenant)
//   QPs:           round robin per packet inside each application (a FIFO)
//
// Surplus round robin (deficit round robin that lets the deficit go below zero, so
// a turn never stalls on a packet larger than the credit): the node at the head of a
// ring sends while its credit is above zero, each packet taking its bytes; at zero or
// below it gets quantum x weight more and goes to the back. A node whose last QP
// leaves drops out of its ring, keeping a debt but not a credit. Every operation is
// O(1); nothing is scanned. Idle nodes cost nothing (work-conserving).
//
// Nodes come and go with the QPs that refer to them; tenant and application ids are
// the caller's (sched::Scheduler::set_tenant, set_class).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sched/index_list.h"
#include "sched/qp_slot.h"

namespace isoroce::sched {

class ShareTree {
 public:
  // Bytes of credit per unit of weight and turn: about one 4 KB packet.
  static constexpr std::int64_t kQuantum = 4'096;

  explicit ShareTree(std::uint32_t max_qps);

  // qp's tenant (kNoTenant: tenant 0, weight 1) and application (kOwnApp: the QP
  // alone). The QP must not be queued (remove it first). The last weight given for
  // a tenant or an application is its weight.
  void set_tenant(std::uint32_t qp, std::uint32_t tenant, std::uint32_t weight);
  void set_app(std::uint32_t qp, std::uint32_t app, std::uint32_t weight);

  bool empty() const { return tenants_ring_.empty(); }

  // qps[qp] may send: to the back of its application's FIFO (where_ = kShared).
  void push(QpSlot* qps, std::uint32_t qp);
  // The next QP to send, taken off its application's FIFO (where_ = kIdle), its
  // application and tenant staying in their rings until charge(); kNil if empty.
  std::uint32_t pop(QpSlot* qps);
  // The QP that pop() returned sent `bytes` (it may have been pushed back since).
  void charge(std::uint32_t qp, std::uint32_t bytes);
  // Takes qps[qp] off the tree (where_ = kIdle).
  void remove(QpSlot* qps, std::uint32_t qp);

  // Bytes of tree state now: per QP, and nodes.
  std::size_t bytes() const;

 private:
  // What the caller said of a QP (cold: read only when the QP changes node).
  struct QpRef {
    std::uint32_t tenant = 0;  // caller's tenant id
    std::uint32_t app = 0xffff'ffff;
    std::uint32_t app_weight = 1;
  };
  struct App {
    std::uint64_t key = 0;
    std::uint32_t tenant = 0;  // index in tenants_
    std::uint32_t weight = 1;
    std::uint32_t refs = 0;
    bool queued = false;       // on its tenant's ring
    std::int64_t credit = 0;
    IndexList qps;             // QPs that may send, round robin
    std::uint32_t next_ = kNil;  // its tenant's ring
    std::uint32_t prev_ = kNil;
  };
  struct Tenant {
    std::uint32_t id = 0;
    std::uint32_t weight = 1;
    std::uint32_t refs = 0;
    bool queued = false;
    std::int64_t credit = 0;
    IndexList apps;            // applications with a QP that may send
    std::uint32_t next_ = kNil;  // the tenants' ring
    std::uint32_t prev_ = kNil;
  };

  void attach(std::uint32_t qp);  // qp_[qp].node from its tenant and application
  void detach(std::uint32_t qp);
  std::uint32_t tenant_index(std::uint32_t id);
  void turn_app(std::uint32_t a);
  void turn_tenant(std::uint32_t t);

  std::vector<std::uint32_t> node_;  // each QP's application node (kNil: none yet); hot
  std::vector<QpRef> qp_;
  std::vector<App> apps_;
  std::vector<std::uint32_t> free_apps_;
  std::unordered_map<std::uint64_t, std::uint32_t> app_by_key_;
  std::vector<Tenant> tenants_;  // [0]: kNoTenant
  std::vector<std::uint32_t> free_tenants_;
  std::unordered_map<std::uint32_t, std::uint32_t> tenant_by_id_;
  IndexList tenants_ring_;
  std::uint32_t charge_app_ = kNil;  // the application of the QP pop() returned
};

}  // namespace isoroce::sched
