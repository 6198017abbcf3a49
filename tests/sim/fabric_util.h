// Test harness for the fabric alone: endpoints that record what reaches them,
// hand-built RoCEv2 frames (transport/wire/build.h), a loop that runs the
// fabric's events.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/sim/fabric.h"
#include "dataplane/sim/scenario.h"
#include "transport/wire/build.h"
#include "transport/wire/parse.h"

namespace isoroce::sim::testing {

struct Arrival {
  Picos time;
  std::vector<uint8_t> bytes;
};

class Recorder final : public Endpoint {
 public:
  void on_frame(Picos now, std::span<uint8_t> frame) override {
    got.push_back({now, std::vector<uint8_t>(frame.begin(), frame.end())});
  }
  std::vector<Arrival> got;
};

inline wire::IpAddr host_ip(size_t i) { return wire::ipv4_mapped(0x0a000001u + static_cast<uint32_t>(i)); }

// A SEND_ONLY frame from host `from` to host `to` whose payload starts with the
// 32-bit id (the PSN carries it too), ECT(0) unless told otherwise.
inline std::vector<uint8_t> make_frame(size_t from, size_t to, uint32_t id, size_t payload_len,
                                       uint8_t ecn = 2, bool ipv6 = false) {
  std::vector<uint8_t> payload(payload_len, 0);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(id * 31 + i);
  for (size_t i = 0; i < 4 && i < payload_len; ++i) payload[i] = static_cast<uint8_t>(id >> (24 - 8 * i));
  wire::FrameSpec s;
  s.dst_mac = host_mac(to);
  s.src_mac = host_mac(from);
  if (ipv6) {
    s.src_ip = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(from + 1)};
    s.dst_ip = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(to + 1)};
  } else {
    s.src_ip = host_ip(from);
    s.dst_ip = host_ip(to);
  }
  s.traffic_class = static_cast<uint8_t>(26 << 2 | ecn);
  s.opcode = 0x04;  // RC SEND_ONLY
  s.dest_qp = wire::Qpn(0x100 + static_cast<uint32_t>(to));
  s.psn = wire::Psn(id);
  s.payload = payload;
  std::vector<uint8_t> out(wire::frame_size(s));
  const auto r = wire::build_frame(s, out);
  EXPECT_TRUE(r.ok());
  out.resize(r.len);
  return out;
}

inline uint32_t frame_id(const std::vector<uint8_t>& f) {
  std::vector<uint8_t> copy = f;
  const auto r = wire::parse_frame(copy, {.verify_icrc = false, .verify_ip_checksum = false});
  return r.pkt.psn.value();
}

inline FabricConfig fabric_of(size_t n, uint64_t bps = 100'000'000'000, Picos delay = 1'000'000) {
  FabricConfig c;
  for (size_t i = 0; i < n; ++i) c.ports.push_back(PortConfig{bps, host_mac(i)});
  c.link_delay = delay;
  return c;
}

// A fabric of recorders.
struct Net {
  explicit Net(const FabricConfig& c) : fabric(events, c), rec(c.ports.size()) {
    EXPECT_TRUE(validate(c).empty()) << validate(c);
    for (size_t i = 0; i < rec.size(); ++i) fabric.attach(static_cast<uint32_t>(i), &rec[i]);
  }
  // Host `from` starts sending `frame` at `at` (call in non-decreasing `at`).
  void send(size_t from, Picos at, const std::vector<uint8_t>& frame) {
    const FrameId id = fabric.pool().alloc(frame.size());
    std::copy(frame.begin(), frame.end(), fabric.pool().bytes(id).begin());
    fabric.send(at, static_cast<uint32_t>(from), at, id);
  }
  void run() {
    while (!events.empty()) fabric.handle(events.pop());
  }
  EventQueue events;
  Fabric fabric;
  std::vector<Recorder> rec;
};

}  // namespace isoroce::sim::testing
