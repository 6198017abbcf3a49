// isoroced's log: one line per event on stderr, "isoroced: LEVEL: message".
#pragma once

#include <fmt/core.h>

#include <cstdio>
#include <string_view>

namespace isoroce::ctrl {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

LogLevel& log_threshold();
LogLevel parse_log_level(std::string_view s);  // defaults to kInfo

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level > log_threshold()) return;
  static constexpr const char* kNames[] = {"error", "warning", "info", "debug"};
  std::fputs(fmt::format("isoroced: {}: {}\n", kNames[static_cast<int>(level)],
                         fmt::format(f, std::forward<Args>(args)...))
                 .c_str(),
             stderr);
}

}  // namespace isoroce::ctrl
