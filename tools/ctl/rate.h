// Rates as people write them: "10G", "2.5g", "500M", "100K", "1000" (bits per
// second); "0" or "none" is no limit.
#pragma once

#include <cstdint>
#include <string_view>

namespace isoroce::tools {

bool parse_rate(std::string_view text, uint64_t* bps);

}  // namespace isoroce::tools
