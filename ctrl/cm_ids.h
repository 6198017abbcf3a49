// The daemon's rdma_cm identifiers (ops_cm.cc, docs/rdma_cm.md): what each
// client's CM id is bound to, which device's CmAgent (ctrl/cm_agent.h) carries
// its connection, and the events it owes its client. Control thread only.
//
// Every id belongs to one session (the connection that made it, or that a
// CONNECT_REQUEST's listener belonged to, or that rdma_migrate_id moved it
// to): CmIds::owned() is the one check. Events go into the session's queue
// and count one on its eventfd (EFD_SEMAPHORE), which is the client's
// rdma_event_channel fd. When a session closes, reclaim() destroys its ids:
// the CM sends the DREQ (established) or REJ (handshake under way) the spec
// asks for.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "transport/cm/event.h"
#include "transport/wire/packet.h"

namespace isoroce::ctrl {

using nlohmann::json;

class CmAgent;
class Control;
struct DeviceEntry;
struct Session;

// At most this many events wait per session (older ones are dropped, with a log line).
inline constexpr size_t kMaxCmEvents = 4096;

struct CmIdRec {
  uint32_t handle = 0;
  Session* s = nullptr;
  bool udp = false;                // RDMA_PS_UDP (SIDR, UD QPs); else RDMA_PS_TCP (RC)
  bool ipv6 = false;
  // Addressing: local (bound or chosen by resolve_addr), peer.
  wire::IpAddr local_ip{};
  bool bound = false, wildcard = true;  // bound: rdma_bind_addr/resolve_addr ran; wildcard: any address
  uint16_t local_port = 0, peer_port = 0;
  wire::IpAddr peer_ip{};
  DeviceEntry* dev = nullptr;      // once bound to an address of a device, or resolved
  bool addr_resolved = false, route_resolved = false;
  // Listening: a CM listener on each device it covers.
  std::vector<std::pair<DeviceEntry*, cm::Id>> listens;
  // The connection (or SIDR exchange) on dev.
  cm::Id cid = 0;
  bool disconnected_reported = false;  // DISCONNECTED already queued (a DREQ came first)
  bool established = false;
  bool accepted = false;  // made by a REQ to a listener: shares its port, holds none (as Linux's bind list)
  uint8_t tos = 0, ack_timeout = 14;
  bool reuseaddr = false, afonly = false;
  uint64_t events_reported = 0;
};

class CmIds {
 public:
  explicit CmIds(Control& ctl) : ctl_(ctl) {}
  ~CmIds();

  // A new id of s (nullptr and *error when s is over its limit).
  CmIdRec* create(Session& s, bool udp, std::string* error);
  // The id `handle` if s owns it: the one ownership check of every operation.
  CmIdRec* owned(const Session& s, uint32_t handle);
  CmIdRec* find(uint32_t handle);
  // Ends the id: its connection or listeners on the wire, its pending events.
  void destroy(CmIdRec& r);
  // Everything s owns (its connection closed).
  void reclaim(Session& s);
  // Moves r to session to with its pending events (a listener's: its
  // CONNECT_REQUESTs and their new ids).
  void migrate(CmIdRec& r, Session& to);

  // Ports: a free ephemeral port for (udp), or whether port is free for r.
  uint16_t ephemeral_port(bool udp);
  bool port_free(const CmIdRec& r, uint16_t port) const;

  // The agent of d (DeviceEntry::cm), made and started on first use (nullptr
  // and *error if it cannot run); Control::watch_cm_fd learns its event fd.
  CmAgent* agent(DeviceEntry& d, std::string* error);
  // Takes every agent's events and turns them into the clients' events.
  void drain();
  // Queues {"event": ...} for r's session (with the addressing it learnt).
  void queue(CmIdRec& r, int event, int status, json extra = json::object());
  // r's addressing as the client applies it: local, peer, device, dgid.
  json addressing(const CmIdRec& r) const;

  // rdma_resolve_addr's neighbour resolution without blocking the control
  // thread: resolve_later() remembers r (already solicited); the daemon's
  // loop calls poll_resolutions() every 25 ms while resolving(), which queues
  // ADDR_RESOLVED when the neighbour is known or ADDR_ERROR (-EHOSTUNREACH)
  // after a second, soliciting again every 250 ms.
  void resolve_later(CmIdRec& r);
  void poll_resolutions();
  bool resolving() const { return !resolving_.empty(); }
  bool resolving(uint32_t handle) const;

  // (device, cm id) -> our handle.
  void map_cm(DeviceEntry* d, cm::Id id, uint32_t handle) { by_cm_[{d, id}] = handle; }
  void unmap_cm(DeviceEntry* d, cm::Id id) { by_cm_.erase({d, id}); }

  size_t size() const { return ids_.size(); }
  json view() const;

 private:
  void on_event(DeviceEntry& d, const cm::Event& e);

  Control& ctl_;
  uint32_t next_handle_ = 1;
  std::map<uint32_t, std::unique_ptr<CmIdRec>> ids_;
  std::map<std::pair<DeviceEntry*, cm::Id>, uint32_t> by_cm_;
  uint32_t port_seed_ = 0x5eed;
  std::set<std::pair<DeviceEntry*, int>> watched_;  // agents' event fds the daemon watches
  struct Resolving {
    uint32_t handle;
    DeviceEntry* dev;
    wire::IpAddr ip;
    std::chrono::steady_clock::time_point since, next_solicit;
  };
  std::vector<Resolving> resolving_;
};

std::string ip_text(const wire::IpAddr& ip);
std::optional<wire::IpAddr> parse_ip(const std::string& text, bool* ipv6);

}  // namespace isoroce::ctrl
