#include "sched/share_tree.h"

#include <algorithm>

#include "sched/scheduler.h"

namespace isoroce::sched {

ShareTree::ShareTree(std::uint32_t max_qps) : node_(max_qps, kNil), qp_(max_qps), tenants_(1) { tenant_by_id_[kNoTenant] = 0; }

std::uint32_t ShareTree::tenant_index(std::uint32_t id) {
  if (auto it = tenant_by_id_.find(id); it != tenant_by_id_.end()) return it->second;
  std::uint32_t t;
  if (!free_tenants_.empty()) {
    t = free_tenants_.back();
    free_tenants_.pop_back();
    tenants_[t] = Tenant{};
  } else {
    t = static_cast<std::uint32_t>(tenants_.size());
    tenants_.emplace_back();
  }
  tenants_[t].id = id;
  tenant_by_id_[id] = t;
  return t;
}

void ShareTree::attach(std::uint32_t qp) {
  QpRef& r = qp_[qp];
  const std::uint32_t t = tenant_index(r.tenant);
  const std::uint64_t key = (std::uint64_t{t} << 33) |
                            (r.app == kOwnApp ? (std::uint64_t{1} << 32) | qp : std::uint64_t{r.app});
  std::uint32_t a;
  if (auto it = app_by_key_.find(key); it != app_by_key_.end()) {
    a = it->second;
  } else {
    if (!free_apps_.empty()) {
      a = free_apps_.back();
      free_apps_.pop_back();
      apps_[a] = App{};
    } else {
      a = static_cast<std::uint32_t>(apps_.size());
      apps_.emplace_back();
    }
    apps_[a].key = key;
    apps_[a].tenant = t;
    app_by_key_[key] = a;
    ++tenants_[t].refs;
  }
  apps_[a].weight = std::max<std::uint32_t>(1, r.app_weight);
  ++apps_[a].refs;
  node_[qp] = a;
}

void ShareTree::detach(std::uint32_t qp) {
  const std::uint32_t a = node_[qp];
  if (a == kNil) return;
  node_[qp] = kNil;
  if (--apps_[a].refs != 0) return;
  const std::uint32_t t = apps_[a].tenant;
  app_by_key_.erase(apps_[a].key);
  free_apps_.push_back(a);
  if (--tenants_[t].refs == 0 && t != 0) {
    tenant_by_id_.erase(tenants_[t].id);
    free_tenants_.push_back(t);
  }
}

void ShareTree::set_tenant(std::uint32_t qp, std::uint32_t tenant, std::uint32_t weight) {
  if (qp >= qp_.size()) return;
  detach(qp);
  qp_[qp].tenant = tenant;
  tenants_[tenant_index(tenant)].weight = std::max<std::uint32_t>(1, weight);
  attach(qp);
}

void ShareTree::set_app(std::uint32_t qp, std::uint32_t app, std::uint32_t weight) {
  if (qp >= qp_.size()) return;
  detach(qp);
  qp_[qp].app = app;
  qp_[qp].app_weight = weight;
  attach(qp);
}

void ShareTree::push(QpSlot* qps, std::uint32_t qp) {
  if (node_[qp] == kNil) attach(qp);
  const std::uint32_t n = node_[qp];
  qps[qp].where_ = Where::kShared;
  App& a = apps_[n];
  a.qps.push_back(qps, qp);
  if (a.queued) return;
  a.queued = true;
  Tenant& t = tenants_[a.tenant];
  t.apps.push_back(apps_.data(), n);
  if (t.queued) return;
  t.queued = true;
  tenants_ring_.push_back(tenants_.data(), a.tenant);
}

std::uint32_t ShareTree::pop(QpSlot* qps) {
  const std::uint32_t t = tenants_ring_.head;
  if (t == kNil) return kNil;
  // The application stays on its ring until charge(), even if its FIFO is empty for
  // a moment (the QP may come straight back with its next packet).
  const std::uint32_t a = tenants_[t].apps.head;
  const std::uint32_t qp = apps_[a].qps.pop_front(qps);
  qps[qp].where_ = Where::kIdle;
  charge_app_ = a;
  return qp;
}

void ShareTree::turn_app(std::uint32_t a) {
  App& app = apps_[a];
  Tenant& t = tenants_[app.tenant];
  if (app.qps.empty()) {
    t.apps.remove(apps_.data(), a);
    app.queued = false;
    app.credit = std::min<std::int64_t>(app.credit, 0);
  } else if (app.credit <= 0) {
    app.credit += kQuantum * app.weight;
    if (t.apps.tail != a) {
      t.apps.remove(apps_.data(), a);
      t.apps.push_back(apps_.data(), a);
    }
  }
}

void ShareTree::turn_tenant(std::uint32_t ti) {
  Tenant& t = tenants_[ti];
  if (t.apps.empty()) {
    tenants_ring_.remove(tenants_.data(), ti);
    t.queued = false;
    t.credit = std::min<std::int64_t>(t.credit, 0);
  } else if (t.credit <= 0) {
    t.credit += kQuantum * t.weight;
    if (tenants_ring_.tail != ti) {
      tenants_ring_.remove(tenants_.data(), ti);
      tenants_ring_.push_back(tenants_.data(), ti);
    }
  }
}

void ShareTree::charge(std::uint32_t qp, std::uint32_t bytes) {
  (void)qp;
  const std::uint32_t a = charge_app_;
  if (a == kNil) return;
  charge_app_ = kNil;
  apps_[a].credit -= bytes;
  const std::uint32_t t = apps_[a].tenant;
  tenants_[t].credit -= bytes;
  turn_app(a);
  turn_tenant(t);
}

void ShareTree::remove(QpSlot* qps, std::uint32_t qp) {
  if (qps[qp].where_ != Where::kShared) return;
  qps[qp].where_ = Where::kIdle;
  const std::uint32_t a = node_[qp];
  apps_[a].qps.remove(qps, qp);
  if (a == charge_app_ || !apps_[a].qps.empty()) return;
  // Its last QP left: the application drops out of its ring, and the tenant too if
  // that was its last application (no turn is taken or given).
  App& app = apps_[a];
  Tenant& t = tenants_[app.tenant];
  t.apps.remove(apps_.data(), a);
  app.queued = false;
  app.credit = std::min<std::int64_t>(app.credit, 0);
  if (!t.apps.empty()) return;
  tenants_ring_.remove(tenants_.data(), app.tenant);
  t.queued = false;
  t.credit = std::min<std::int64_t>(t.credit, 0);
}

std::size_t ShareTree::bytes() const {
  return qp_.size() * (sizeof(QpRef) + sizeof(std::uint32_t)) + apps_.capacity() * sizeof(App) + tenants_.capacity() * sizeof(Tenant) +
         app_by_key_.size() * 32 + tenant_by_id_.size() * 24;
}

}  // namespace isoroce::sched
