// The deterministic simulator: a Scenario's hosts (one transport::Engine each),
// its fabric (dataplane/sim/fabric.h) and its flows (applications that post
// work requests, check every byte and atomic result, and measure latency), all
// driven by one event queue in virtual time (picoseconds). Single-threaded; the
// same scenario and seed give the same SimReport, wall_ms aside.
#pragma once

#include <memory>

#include "dataplane/sim/report.h"
#include "dataplane/sim/scenario.h"

namespace isoroce::sim {

namespace detail {
struct World;
}

class Simulator {
 public:
  // Validates the scenario and builds everything (engines, QPs in RTS, memory).
  // nullptr and *error filled if the scenario is invalid or setup fails.
  static std::unique_ptr<Simulator> create(const Scenario& scenario, ScenarioError* error);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs until duration, or until every flow has finished and the fabric is
  // empty. Call once.
  SimReport run();

 private:
  explicit Simulator(std::unique_ptr<detail::World> world);
  std::unique_ptr<detail::World> world_;
};

// "IBV_WC_RETRY_EXC_ERR" for IBV_WC_RETRY_EXC_ERR, and so on.
std::string_view wc_status_name(int status);

}  // namespace isoroce::sim
