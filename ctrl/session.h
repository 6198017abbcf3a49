// One client connection and everything it created: destroyed when the
// connection closes, however the client went away (Control::reclaim).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ctrl/client_handles.h"
#include "ctrl/shm_pump.h"

namespace isoroce::ctrl {

struct DeviceEntry;

struct Session {
  uint64_t id = 0;
  int fd = -1;
  int pid = 0;
  // SO_PEERCRED at connect; unknown (no credentials) is (uid_t)-1, nobody's.
  uint32_t uid = UINT32_MAX, gid = UINT32_MAX;
  // Root, the daemon's own user or a member of admin_group: may act on every
  // QP and change device-wide settings (docs/security.md).
  bool privileged = false;
  std::string comm;
  DeviceEntry* dev = nullptr;  // after "open"
  ClientObjects objs;          // its handles (changed on the device's executor only)
  // Against ClientLimits: the daemon's mmaps for it (MR pieces, rings) and its registered bytes.
  size_t mappings = 0;
  uint64_t mr_bytes = 0;
  // Shared-memory queues (ctrl/shm_abi.h) of this client's objects.
  std::map<uint32_t, std::unique_ptr<ShmQueue>> cq_rings, srq_rings;
  std::map<uint32_t, std::pair<std::unique_ptr<ShmQueue>, std::unique_ptr<ShmQueue>>> qp_rings;  // SQ, RQ
  std::map<uint32_t, int> cq_eventfds;
  std::vector<int> reply_fds;  // sent with the reply to the current request, then closed
  // Asynchronous events of this client's objects not yet taken (get_async_events).
  std::deque<nlohmann::json> async_events;
  int async_eventfd = -1;  // "open" with async_events: written when one is queued
  // "open" with doorbell: the client's doorbell eventfd, in its device's
  // worker's wait set (ctrl/shm_abi.h); objs.doorbell says it is there.
  int doorbell_eventfd = -1;
  // "open" with membarrier: the client posts without a fence; its worker
  // counts it and makes the membarrier call before it sleeps.
  bool membarrier_user = false;
  // rdma_cm (ctrl/cm_ids.h): after "cm_channel", the client's event channel:
  // an EFD_SEMAPHORE eventfd counting the events queued here; its ids; the
  // token that proves them its own to rdma_migrate_id.
  int cm_eventfd = -1;
  std::deque<nlohmann::json> cm_events;
  std::set<uint32_t> cm_ids;
  uint64_t cm_token = 0;
};

}  // namespace isoroce::ctrl
