// How isoroce-pcap shows a decoded frame: one JSON object, or one text line.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "transport/wire/parse.h"

namespace isoroce::tools {

// "10.0.0.1" for IPv4-mapped addresses, RFC 5952 text for IPv6.
std::string ip_to_string(const wire::IpAddr& a);

nlohmann::ordered_json packet_to_json(uint64_t frame_no, const wire::ParseResult& r);
std::string packet_to_line(uint64_t frame_no, const wire::ParseResult& r);

}  // namespace isoroce::tools
