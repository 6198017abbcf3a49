// Two cm::Managers wired by a fabric in virtual time: every MAD one sends to
// the other's GID arrives `delay` later, unless the test's drop rule says it
// is lost. Deterministic: no clock, no threads; seeds fix the Managers' IDs.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "transport/cm/manager.h"
#include "transport/cm/messages.h"

namespace isoroce::cm::test {

inline Gid v4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

inline constexpr Picos kMicro = 1'000'000;
inline constexpr Picos kMilli = 1'000'000'000;

struct Node {
  explicit Node(const ManagerConfig& c) : m(c), gid(c.local_gid) {}
  Manager m;
  Gid gid;
  std::vector<Event> events;
  std::vector<std::vector<uint8_t>> sent;  // every MAD it sent, in order

  // The events of type t so far.
  std::vector<Event> of(EventType t) const {
    std::vector<Event> out;
    for (const auto& e : events)
      if (e.type == t) out.push_back(e);
    return out;
  }
  size_t count(EventType t) const { return of(t).size(); }
  size_t sent_count(AttrId a) const {
    size_t n = 0;
    for (const auto& s : sent) n += wire::load_be16(s.data() + 16) == static_cast<uint16_t>(a);
    return n;
  }
};

class Fabric {
 public:
  // Short CM timers for tests: 2^8 * 4.096 us ~ 1 ms per try.
  static constexpr uint8_t kTimeout = 8;

  explicit Fabric(uint64_t seed = 1, Picos timewait = 50 * kMilli) {
    ManagerConfig ca, cb;
    ca.local_gid = v4_gid(10, 0, 0, 1);
    cb.local_gid = v4_gid(10, 0, 0, 2);
    ca.ca_guid = 0x0200aafffe000001ull;
    cb.ca_guid = 0x0200aafffe000002ull;
    ca.seed = seed * 2 + 1;
    cb.seed = seed * 2 + 2;
    ca.timewait = cb.timewait = timewait;
    a = std::make_unique<Node>(ca);
    b = std::make_unique<Node>(cb);
  }

  std::unique_ptr<Node> a, b;
  Picos now = 0;
  Picos delay = 5 * kMicro;
  // Returns true to lose a MAD: its attribute and how many of that attribute
  // went before it (0 for the first).
  std::function<bool(AttrId, int)> drop;
  std::map<uint16_t, int> seen;
  size_t dropped = 0;

  // Moves MADs and events out of both Managers.
  void pump() {
    for (Node* n : {a.get(), b.get()}) {
      OutMad out;
      while (n->m.pop_mad(&out)) {
        EXPECT_EQ(out.bytes.size(), kMadBytes);
        EXPECT_EQ(out.dqpn, kGsiQpn);
        n->sent.push_back(out.bytes);
        const auto attr = static_cast<AttrId>(wire::load_be16(out.bytes.data() + 16));
        const int k = seen[static_cast<uint16_t>(attr)]++;
        if (drop && drop(attr, k)) {
          ++dropped;
          continue;
        }
        Node* to = out.dgid == a->gid ? a.get() : out.dgid == b->gid ? b.get() : nullptr;
        if (!to) continue;
        inflight_.emplace(std::make_pair(now + delay, seq_++), Flight{to, n->gid, std::move(out.bytes)});
      }
      Event e;
      while (n->m.pop_event(&e)) n->events.push_back(std::move(e));
    }
  }

  // Runs until nothing is due before now + d; the clock ends there.
  void run_for(Picos d) {
    const Picos end = now + d;
    for (;;) {
      pump();
      Picos next = std::min(a->m.next_deadline(), b->m.next_deadline());
      if (!inflight_.empty()) next = std::min(next, inflight_.begin()->first.first);
      if (next > end) break;
      now = std::max(now, next);
      while (!inflight_.empty() && inflight_.begin()->first.first <= now) {
        Flight f = std::move(inflight_.begin()->second);
        inflight_.erase(inflight_.begin());
        f.to->m.on_mad(f.src, kGsiQpn, f.bytes, now);
      }
      a->m.on_timer(now);
      b->m.on_timer(now);
    }
    now = end;
  }

  // Runs in steps of 10 us (a prompt consumer) until done() or max elapsed.
  bool run_until(const std::function<bool()>& done, Picos max = 200 * kMilli) {
    const Picos end = now + max;
    while (!done()) {
      if (now >= end) return false;
      run_for(10 * kMicro);
    }
    return true;
  }
  // Until n has n events of type t.
  bool wait(Node& n, EventType t, size_t count = 1, Picos max = 200 * kMilli) {
    return run_until([&] { return n.count(t) >= count; }, max);
  }

  // Injects bytes into n as if from src (GSI).
  void inject(Node& n, const Gid& src, std::vector<uint8_t> bytes) {
    n.m.on_mad(src, kGsiQpn, bytes, now);
    pump();
  }

 private:
  struct Flight {
    Node* to;
    Gid src;
    std::vector<uint8_t> bytes;
  };
  std::map<std::pair<Picos, uint64_t>, Flight> inflight_;
  uint64_t seq_ = 0;
};

inline ConnectParams connect_params(const Gid& peer, uint64_t sid) {
  ConnectParams p;
  p.peer_gid = peer;
  p.service_id = sid;
  p.qpn = 0x11;
  p.starting_psn = 0x123456;
  p.responder_resources = 4;
  p.initiator_depth = 2;
  p.path_mtu = 3;
  p.retry_count = 6;
  p.rnr_retry_count = 5;
  p.remote_cm_response_timeout = Fabric::kTimeout;
  p.local_cm_response_timeout = Fabric::kTimeout;
  p.max_cm_retries = 3;
  p.private_data = {1, 2, 3, 4};
  return p;
}

inline AcceptParams accept_params() {
  AcceptParams p;
  p.qpn = 0x22;
  p.starting_psn = 0x654321;
  p.responder_resources = 2;
  p.initiator_depth = 4;
  p.rnr_retry_count = 6;
  p.private_data = {9, 8, 7};
  return p;
}

}  // namespace isoroce::cm::test
