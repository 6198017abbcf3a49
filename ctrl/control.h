// What the control socket's operations act on, without the socket and
// without EAL: the devices (each reached through its DeviceDriver and
// Executor), the QP registry, the table of operations, the sessions that
// opened a device, and the views that the socket and telemetry share.
// isoroced's Daemon is a Control with DPDK devices, a session server and
// reference flows; tests/ctrl builds one over engines in virtual time.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ctrl/cm_ids.h"
#include "ctrl/config.h"
#include "ctrl/device_entry.h"
#include "ctrl/op_table.h"
#include "ctrl/session.h"
#include "ctrl/trace_session.h"

namespace isoroce::ctrl {

inline constexpr const char* kVersion = "0.1.0";

class Control;

// A new engine for an unused device with cfg's scheduler settings (policy,
// DCQCN, justitia): set_policy/set_dcqcn/set_justitia and the daemon's reload
// on SIGHUP. Reference flows with an end in it stop and start again. The reply.
nlohmann::json apply_engine_settings(Control& ctl, DeviceEntry& dev, const dataplane::DeviceConfig& cfg,
                                     const std::string& op);

class Control {
 public:
  Control();
  virtual ~Control();
  Control(const Control&) = delete;
  Control& operator=(const Control&) = delete;

  // One request (a JSON object with a string "op") from a client; the reply.
  json handle(Session& s, const json& req, std::vector<int>& fds);
  // Destroys everything s created and closes its device.
  void reclaim(Session& s);
  // Takes every engine's asynchronous events: logs, counts, queues them for
  // their clients (periodically, and before get_async_events).
  void drain_async_events();

  std::vector<std::unique_ptr<DeviceEntry>>& devices() { return devices_; }
  DeviceEntry* find_device(const std::string& name);
  // The device of QP `qpn`: the device named `device` if not empty (it must have
  // the QP), else the only device that has it. QPNs repeat across devices (every
  // device's reference echo is QPN 15), so a bare QPN that several devices have is
  // ambiguous. nullptr and *err, *error otherwise: ENODEV (no device `device`),
  // ENOENT (no such QP), EINVAL (ambiguous: the candidates, "isoroce0/15, isoroce1/15").
  DeviceEntry* find_qp(uint32_t qpn, const std::string& device, int* err, std::string* error);
  // ARP/ND for ip on d; waits up to one second for the answer.
  bool resolve_neighbor(DeviceEntry& d, const wire::IpAddr& ip);
  QpRegistry& registry() { return registry_; }
  const ClientLimits& limits() const { return limits_; }
  Tenants& tenants() { return tenants_; }
  void set_limits(const ClientLimits& l) { limits_ = l; }
  // A count, size or amount a client asks for, against its limit: "" or a
  // failure reply's text ("limits.max_qps (1024) reached").
  static std::string over(const char* limit, uint64_t have, uint64_t adding, uint64_t max);
  const OpTable& ops() const { return ops_; }
  // The device's CM agent (QP1, ctrl/cm_agent.h): made and started on its
  // worker, or logged why not (d.cm stays null). stop_cm destroys QP1 and the
  // agent; pause_cm/resume_cm keep the agent (and its ids) around a new engine.
  void start_cm(DeviceEntry& d);
  // The seed of the agents start_cm makes (0: random; tests fix it).
  void set_cm_seed(uint64_t seed) { cm_seed_ = seed; }
  void stop_cm(DeviceEntry& d);
  void pause_cm(DeviceEntry& d);
  void resume_cm(DeviceEntry& d);
  // A session opened / closed a device (the async events' owners).
  void attach(Session& s, DeviceEntry& d);

  // Whether s may see and steer QP qpn of d: privileged clients every QP,
  // others their own user's (docs/security.md).
  bool may_see(const Session& s, const DeviceEntry& d, uint32_t qpn) const;

  // Views shared by the socket and telemetry (inspect.cc). With a viewer,
  // only the QPs it may see.
  virtual json status_view();
  json devices_view();
  json device_view(DeviceEntry& d);
  json qps_view(const Session* viewer = nullptr);
  std::optional<json> qp_view(DeviceEntry& d, uint32_t qpn);
  json stats_view();
  json sched_view();

  // Engine settings that need a new engine (set_policy, set_dcqcn,
  // set_justitia): stops the reference flows with an end on d (returning
  // the devices to start them on again), and starts one on d.
  virtual std::vector<DeviceEntry*> stop_reference_flows(DeviceEntry& d) { return {&d}; }
  virtual void start_reference_flow(DeviceEntry&) {}

  // rdma_cm identifiers (ctrl/cm_ids.h, ops_cm.cc).
  CmIds& cm_ids() { return *cm_; }
  // A device's CM agent started: the daemon watches its event fd and calls
  // drain_cm_events() when it is readable (tests/ctrl drain by hand).
  virtual void watch_cm_fd(int) {}
  void drain_cm_events() { cm_->drain(); }

  // The live trace (ops_trace.cc, ctrl/trace_session.h): at most one, running
  // or finished and not yet collected by its owner.
  std::unique_ptr<TraceSession>& trace() { return trace_; }
  // Control thread, every few milliseconds: drains a running trace and
  // finishes it at its deadline. Whether one is running.
  bool trace_tick(TraceSession::Clock::time_point now);

 protected:
  json qp_json(DeviceEntry& d, uint32_t qpn);
  json justitia_json(DeviceEntry& d);
  json tenants_json(DeviceEntry& d);

  std::vector<std::unique_ptr<DeviceEntry>> devices_;
  std::unique_ptr<CmIds> cm_;  // rdma_cm ids (cm_ids.h)
  QpRegistry registry_;
  OpTable ops_;
  ClientLimits limits_;
  Tenants tenants_;
  std::set<Session*> attached_;  // sessions with a device open
  std::unique_ptr<TraceSession> trace_;
  uint64_t cm_seed_ = 0;
};

// Justitia's application of a client connection (its session id; 0: none known).
uint32_t app_id(uint64_t session);

// A QP's name wherever QPNs can repeat (every device numbers its own): "isoroce0/17"
// (issue 19; isoroce-ctl takes the same form).
std::string qp_label(const DeviceEntry& d, uint32_t qpn);

// qpn on d was put in `tenant`: true if d's policy ignores tenants (ctrl/tenants.h),
// logged once per device and tenant.
bool note_tenant_ignored(Control& ctl, DeviceEntry& d, uint32_t qpn, const std::string& tenant);

}  // namespace isoroce::ctrl
