// How isoroce-pcap shows a decoded frame: one JSON object, or one text line.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "transport/wire/parse.h"

namespace isoroce::tools {

// "10.0.0.1" for IPv4-mapped addresses, RFC 5952 text for IPv6.
std::string ip_to_string(const wire::IpAddr& a);

// With the frame's bytes, a MAD to QP1 (the CM) is decoded too: "cm" in
// JSON, its description (transport/cm/describe.h) after the line.
nlohmann::ordered_json packet_to_json(uint64_t frame_no, const wire::ParseResult& r,
                                      std::span<const uint8_t> frame = {});
std::string packet_to_line(uint64_t frame_no, const wire::ParseResult& r, std::span<const uint8_t> frame = {});

}  // namespace isoroce::tools
