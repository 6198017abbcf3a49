// Event-list parsing for sched/trace.h.
#include "sched/trace.h"

namespace isoroce::trace {

bool parse_events(std::string_view list, EventMask* mask, std::string* error) {
  EventMask m = 0;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (item.empty()) continue;
    if (item == "all") {
      m |= kAllEvents;
      continue;
    }
    bool found = false;
    for (std::size_t i = 0; i < kEventCount; ++i) {
      if (kEventNames[i] == item) {
        m |= EventMask{1} << i;
        found = true;
        break;
      }
    }
    if (!found) {
      if (error) {
        *error = "unknown trace event '" + std::string(item) + "'; known: all";
        for (const auto n : kEventNames) *error += ", " + std::string(n);
      }
      return false;
    }
  }
  if (m == 0) {
    if (error) *error = "empty trace event list";
    return false;
  }
  *mask = m;
  return true;
}

}  // namespace isoroce::trace
