#include "ctrl/log.h"

namespace isoroce::ctrl {

LogLevel& log_threshold() {
  static LogLevel level = LogLevel::kInfo;
  return level;
}

LogLevel parse_log_level(std::string_view s) {
  if (s == "error") return LogLevel::kError;
  if (s == "warning") return LogLevel::kWarning;
  if (s == "debug") return LogLevel::kDebug;
  return LogLevel::kInfo;
}

}  // namespace isoroce::ctrl
