// A sim::SimReport for people (a table) and for machines (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dataplane/sim/report.h"

namespace isoroce::tools {

struct ReportOptions {
  bool wall_time = true;  // false: leave sim.wall_ms out (byte-identical runs)
  bool live = false;      // isoroce-ctl run: no simulated fabric, times are wall clock
};

nlohmann::ordered_json report_to_json(const sim::SimReport& r, const ReportOptions& opts = {});
std::string report_to_table(const sim::SimReport& r, const ReportOptions& opts = {});

}  // namespace isoroce::tools
