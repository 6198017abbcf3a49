// DCQCN parameters: one plain struct shared by the engine, the simulator's
// scenarios ([host.dcqcn]), isoroce-dcqcn and (later) the daemon's config, with
// one name=value parser and one validation, so every front end spells and
// checks a parameter the same way. docs/dcqcn.md lists every parameter with its
// unit, default and mlx5 debugfs knob; param_table() is that list in code.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace isoroce::dcqcn {

struct Params {
  // Both halves on this port: CNPs for CE-marked packets (notification point)
  // and rate reaction to CNPs (reaction point).
  bool enabled = false;

  // ---- reaction point (sender) ----
  double alpha_update_us = 1.0;            // rp_dce_tcp_rtt
  double g = 5.0 / 1024;                   // rp_dce_tcp_g = 1019: g = (1024 - 1019) / 1024
  double initial_alpha = 1023.0 / 1024;    // rp_initial_alpha_value = 1023 (/1024)
  double rate_decrease_period_us = 4.0;    // rp_rate_reduce_monitor_period
  double rate_on_first_cnp_mbps = 0;       // rp_rate_to_set_on_first_cnp (0: keep the current rate)
  double min_rate_mbps = 1;                // rp_min_rate
  bool clamp_target = false;               // rp_clamp_tgt_rate
  double rp_timer_us = 300;                // rp_time_reset
  uint64_t byte_counter_bytes = 32767;     // rp_byte_reset (0: no byte counter)
  uint32_t fast_recovery_stages = 1;       // rp_threshold
  double ai_mbps = 5;                      // rp_ai_rate
  double hai_mbps = 50;                    // rp_hai_rate

  // ---- notification point (receiver) ----
  double min_time_between_cnps_us = 4;     // np_min_time_between_cnps
  uint32_t cnp_dscp = 48;                  // np_cnp_dscp
};

enum class ParamType : uint8_t { kBool, kDouble, kUint };

struct ParamInfo {
  std::string_view name;
  ParamType type;
  std::string_view unit;
  std::string_view mlx5_knob;    // /sys/kernel/debug/mlx5/<pci>/cc_params/<knob>
  std::string_view description;
};

// Every parameter, in the order docs/dcqcn.md lists them.
std::span<const ParamInfo> param_table();

// Sets one parameter from its text ("4", "0.5", "true"). Empty on success, else
// what is wrong ("unknown parameter \"x\" (known: ...)", "g: must be in (0, 1]").
// Ranges are checked here per parameter; validate() checks the combination.
std::string set_param(Params& p, std::string_view name, std::string_view value);
// "NAME=VALUE" (for command lines).
std::string set_param(Params& p, std::string_view name_eq_value);
// The parameter's value as text (round-trips through set_param); empty for an unknown name.
std::string get_param(const Params& p, std::string_view name);

// Empty if the parameters are usable, else the first problem, naming the parameter.
std::string validate(const Params& p);

}  // namespace isoroce::dcqcn
