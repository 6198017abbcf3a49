#include "tools/ctl/rate.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace isoroce::tools {

bool parse_rate(std::string_view text, uint64_t* bps) {
  if (text == "none" || text == "0") {
    *bps = 0;
    return true;
  }
  std::string s(text);
  double scale = 1;
  if (!s.empty()) {
    switch (std::tolower(static_cast<unsigned char>(s.back()))) {
      case 'k': scale = 1e3; break;
      case 'm': scale = 1e6; break;
      case 'g': scale = 1e9; break;
      case 't': scale = 1e12; break;
      default: break;
    }
    if (scale != 1) s.pop_back();
  }
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return false;
  size_t used = 0;
  double v;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    return false;
  }
  if (used != s.size() || !std::isfinite(v) || v < 0) return false;
  const double r = std::round(v * scale);
  if (r > 1e15) return false;  // a petabit per second: a typo
  *bps = static_cast<uint64_t>(r);
  return true;
}

}  // namespace isoroce::tools
