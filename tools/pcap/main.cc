// isoroce-pcap: decode RoCEv2 captures, and generate sample traffic.
//
//   isoroce-pcap decode [--json] [--summary] FILE...   (CM MADs on QP1 decoded too)
//   isoroce-pcap gen --out FILE [--ipv6] [--seed N]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tools/pcap/generate.h"
#include "tools/pcap/generate_cm.h"
#include "tools/pcap/packet_json.h"
#include "tools/pcap/pcap_io.h"

namespace {

using namespace isoroce;

struct Summary {
  uint64_t frames = 0, roce = 0, icrc_ok = 0;
  std::map<std::string, uint64_t> errors;
  std::map<std::string, uint64_t> opcodes;
};

wire::ParseResult decode(tools::CapturedFrame& f) {
  const int l3 = tools::l3_offset_for_linktype(f.linktype, f.bytes);
  if (l3 == -1) return wire::parse_frame(f.bytes);
  if (l3 >= 0) return wire::parse_ip(f.bytes, static_cast<size_t>(l3));
  wire::ParseResult r;
  r.error = wire::ParseError::kNotIp;
  return r;
}

int run_decode(const std::vector<std::string>& files, bool json, bool summary_only) {
  int status = 0;
  Summary total;
  for (const auto& path : files) {
    std::vector<tools::CapturedFrame> frames;
    std::string err;
    if (!tools::read_capture(path, frames, err)) {
      fmt::print(stderr, "isoroce-pcap: cannot read {}: {}\n", path, err);
      status = 1;
      continue;
    }
    Summary s;
    for (auto& f : frames) {
      const wire::ParseResult r = decode(f);
      ++s.frames;
      if (r.pkt.has_udp && r.pkt.udp_dport == wire::kRoceV2Port) ++s.roce;
      if (r.ok()) {
        ++s.icrc_ok;
        ++s.opcodes[std::string(r.pkt.op->name)];
      } else {
        ++s.errors[std::string(wire::parse_error_name(r.error))];
      }
      if (summary_only) continue;
      if (json) {
        auto j = tools::packet_to_json(f.frame_no, r, f.bytes);
        if (files.size() > 1) j["file"] = path;
        fmt::print("{}\n", j.dump());
      } else {
        fmt::print("{}\n", tools::packet_to_line(f.frame_no, r, f.bytes));
      }
    }
    if (summary_only) {
      std::string errs, ops;
      for (const auto& [k, v] : s.errors) errs += fmt::format(" {}={}", k, v);
      for (const auto& [k, v] : s.opcodes) ops += fmt::format(" {}={}", k, v);
      fmt::print("{}: {} frames, {} RoCEv2 (UDP 4791), {} valid with ICRC ok\n", path, s.frames,
                 s.roce, s.icrc_ok);
      if (!ops.empty()) fmt::print("  opcodes:{}\n", ops);
      if (!errs.empty()) fmt::print("  not decoded:{}\n", errs);
    }
    total.frames += s.frames;
    total.roce += s.roce;
    total.icrc_ok += s.icrc_ok;
  }
  if (summary_only && files.size() > 1) {
    fmt::print("total: {} files, {} frames, {} RoCEv2, {} valid with ICRC ok, {} RoCEv2 rejected\n",
               files.size(), total.frames, total.roce, total.icrc_ok, total.roce - total.icrc_ok);
  }
  return status;
}

int run_gen(const std::string& out, bool ipv6, uint64_t seed, bool cm) {
  const auto gen = cm ? tools::generate_cm_frames(ipv6, seed) : tools::generate_frames(ipv6, seed);
  std::vector<std::vector<uint8_t>> frames;
  frames.reserve(gen.size());
  for (const auto& g : gen) frames.push_back(g.bytes);
  std::string err;
  if (!tools::write_capture(out, frames, err)) {
    fmt::print(stderr, "isoroce-pcap: cannot write {}: {}\n", out, err);
    return 1;
  }
  fmt::print(stderr, "isoroce-pcap: wrote {} frames to {}\n", frames.size(), out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"isoroce-pcap: decode RoCEv2 captures and generate sample RoCEv2 traffic"};
  app.require_subcommand(1);

  auto* dec = app.add_subcommand("decode", "print every frame of one or more pcap/pcapng files");
  std::vector<std::string> files;
  bool json = false, summary = false;
  dec->add_option("files", files, "capture files")->required()->check(CLI::ExistingFile);
  dec->add_flag("--json", json, "one JSON object per frame");
  dec->add_flag("--summary", summary, "per-file counts instead of one line per frame");

  auto* gen = app.add_subcommand("gen", "write a pcap with frames of every supported opcode");
  std::string out;
  bool ipv6 = false;
  uint64_t seed = 1;
  gen->add_option("--out", out, "output pcap file")->required();
  gen->add_flag("--ipv6", ipv6, "IPv6 instead of IPv4");
  gen->add_option("--seed", seed, "seed for field values and payloads");
  bool cm = false;
  gen->add_flag("--cm", cm, "IB CM MADs on QP1 instead (REQ, MRA, REP, RTU, DREQ, DREP, REJ, SIDR_REQ, SIDR_REP)");

  CLI11_PARSE(app, argc, argv);
  if (dec->parsed()) return run_decode(files, json, summary);
  return run_gen(out, ipv6, seed, cm);
}
