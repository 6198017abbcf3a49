// The parameters of the rnic policy (sched/rnic.h): a hardware RNIC's transmit
// arbitration as three numbers, and the presets calibrated to the NIC families of the
// Justitia paper's anomaly figures (docs/isolation.md, "A baseline that behaves like
// the hardware"). Like JustitiaParams: one plain struct that `[host.rnic]`, the
// daemon's configuration and `isoroce-lab` sweeps fill; validate() says what is wrong,
// set() assigns one parameter from "name=value" text.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

namespace isoroce::sched {

// message_burst_bytes meaning "the whole message": with batch_packets 1 and
// pipeline_packets 0 the policy is exactly fifo (one whole message per turn).
inline constexpr std::uint64_t kWholeMessage = std::numeric_limits<std::uint64_t>::max();

struct RnicParams {
  // WQE fetch batch: packets a QP sends per turn of the round robin (>= 1).
  std::uint32_t batch_packets = 1;
  // Transmit pipeline depth: arbitration runs this many data packets ahead of the
  // link, so a QP that becomes ready is seen only after that many more packets of the
  // QPs already served (a QP with nobody ahead of it is seen at once).
  std::uint32_t pipeline_packets = 0;
  // The pipeline's occupancy varies (DMA reads in flight): each QP that becomes ready
  // waits for pipeline_packets plus a uniform 0 .. pipeline_jitter_packets more,
  // drawn from a generator seeded with `seed` (deterministic per seed).
  std::uint32_t pipeline_jitter_packets = 0;
  std::uint64_t seed = 1;
  // A QP that starts a message keeps its turn until this many bytes of the message
  // have been granted (the NIC's first read of a new WQE's payload), then the batch
  // rule applies. 0: none; kWholeMessage: the whole message.
  std::uint64_t message_burst_bytes = 0;
  // The NIC's message processor, messages per second (0: Config::max_msgs_per_sec).
  std::uint64_t max_msgs_per_sec = 0;
};

// Empty if `p` is usable, else what is wrong (naming the parameter).
std::string_view validate(const RnicParams& p);

// Sets `name` (batch_packets, pipeline_packets, pipeline_jitter_packets, seed,
// message_burst_bytes (a number or "whole"), max_mops, preset (a preset's name: every parameter but the seed)) from text.
// False if the name or the value is bad; `p` is then unchanged.
bool set(RnicParams& p, std::string_view name, std::string_view value);
bool set(RnicParams& p, std::string_view assignment);  // "name=value"

// A NIC family's calibrated parameters: false if `name` is not a preset.
bool rnic_preset(std::string_view name, RnicParams* out);
// The presets' names: cx4-roce, cx3-ib, t6-iwarp, fifo (whole-message round robin).
std::span<const std::string_view> rnic_preset_names();

}  // namespace isoroce::sched
