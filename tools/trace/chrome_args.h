// Helpers of tools/trace/chrome_trace.cc: exact microsecond text and each event's
// decoded args (the fields of sched/trace.h under readable names).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sched/trace.h"

namespace isoroce::tools::chrome {

// Picoseconds as microseconds with six decimals ("12.000345"), exact.
std::string us(sched::Picos ps);
// A signed difference in the same form.
std::string us_diff(sched::Picos later, sched::Picos earlier);
// A JSON string literal (quoted, escaped).
std::string quote(std::string_view s);
// The ibv_wr_opcode's name ("WRITE", "SEND", ...).
std::string_view wr_name(uint64_t opcode);
// The record's args object: raw fields, then the decoded ones.
std::string args(const trace::Record& r);

}  // namespace isoroce::tools::chrome
