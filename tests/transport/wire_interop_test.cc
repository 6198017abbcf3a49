// Interop with scapy's RoCE layer (IPv4): its packets parse to the fields it
// was given, and scapy computes the same ICRC for every packet we build. Also
// the isoroce-pcap tool's command line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/transport/test_util.h"
#include "tools/pcap/pcap_io.h"
#include "transport/wire/parse.h"

namespace isoroce::wire {
namespace {

using test::run_command;
const std::string kPython = "/usr/bin/python3 ";  // Debian's python3 has python3-scapy

TEST(Scapy, ItsPacketsParseToTheSameFields) {
  const std::string pcap = test::temp_path("scapy.pcap");
  const auto made = run_command(kPython + ISOROCE_SCAPY_SCRIPT + " make " + pcap + " 2>&1");
  ASSERT_EQ(made.status, 0) << made.out;
  std::vector<tools::CapturedFrame> frames;
  std::string err;
  ASSERT_TRUE(tools::read_capture(pcap, frames, err)) << err;
  std::istringstream expected(made.out);
  std::string line;
  size_t i = 0;
  while (std::getline(expected, line)) {
    ASSERT_LT(i, frames.size());
    const auto want = nlohmann::json::parse(line);
    const ParseResult r = parse_frame(frames[i].bytes);
    SCOPED_TRACE("scapy packet " + std::to_string(i + 1) + ": " + line);
    ASSERT_TRUE(r.ok()) << parse_error_name(r.error);
    const RocePacket& p = r.pkt;
    EXPECT_EQ(p.opcode, want["opcode"].get<int>());
    EXPECT_EQ(p.dest_qp.value(), want["dest_qp"].get<uint32_t>());
    EXPECT_EQ(p.psn.value(), want["psn"].get<uint32_t>());
    EXPECT_EQ(p.payload_len, want["payload_len"].get<size_t>());
    EXPECT_EQ(p.udp_sport, want["udp_sport"].get<uint16_t>());
    if (want.contains("pad")) {
      EXPECT_EQ(p.pad, want["pad"].get<int>());
    }
    if (want.contains("ack_req")) {
      EXPECT_EQ(p.ack_req, want["ack_req"].get<bool>());
    }
    if (want.contains("solicited")) {
      EXPECT_EQ(p.solicited, want["solicited"].get<bool>());
    }
    if (want.contains("becn")) {
      EXPECT_EQ(p.becn, want["becn"].get<bool>());
    }
    if (want.contains("aeth")) {
      ASSERT_TRUE(p.aeth);
      EXPECT_EQ(p.aeth->syndrome, want["aeth"]["syndrome"].get<int>());
      EXPECT_EQ(p.aeth->msn, want["aeth"]["msn"].get<uint32_t>());
    }
    if (want.contains("reth")) {
      ASSERT_TRUE(p.reth);
      EXPECT_EQ(p.reth->va, want["reth"]["va"].get<uint64_t>());
      EXPECT_EQ(p.reth->rkey, want["reth"]["rkey"].get<uint32_t>());
      EXPECT_EQ(p.reth->dma_len, want["reth"]["len"].get<uint32_t>());
    }
    ++i;
  }
  EXPECT_EQ(i, frames.size());
  EXPECT_GE(i, 18u);
}

TEST(Scapy, AgreesWithOurIcrcOnEveryGeneratedPacket) {
  const std::string pcap = test::temp_path("ours4.pcap");
  const auto gen = run_command(std::string(ISOROCE_PCAP_TOOL) + " gen --seed 11 --out " + pcap + " 2>&1");
  ASSERT_EQ(gen.status, 0) << gen.out;
  const auto chk = run_command(kPython + ISOROCE_SCAPY_SCRIPT + " check " + pcap + " 2>&1");
  EXPECT_EQ(chk.status, 0) << chk.out;
  EXPECT_NE(chk.out.find("bad 0"), std::string::npos) << chk.out;
}

TEST(PcapTool, DecodeJsonHasTheDocumentedKeys) {
  const std::string file = std::string(ISOROCE_CAPTURES_DIR) + "/linlinw5_rdma_atomic_bw.pcap";
  const auto r = run_command(std::string(ISOROCE_PCAP_TOOL) + " decode --json " + file);
  ASSERT_EQ(r.status, 0);
  std::istringstream in(r.out);
  std::string line;
  size_t roce = 0, other = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* k : {"frame", "ip_version", "src", "dst", "udp_sport", "payload_len", "icrc_ok", "error"}) {
      EXPECT_TRUE(j.contains(k)) << k << " missing in " << line;
    }
    if (j["error"].is_null()) {
      ++roce;
      for (const char* k : {"opcode", "opcode_name", "dest_qp", "psn", "ack_req", "solicited", "pad", "pkey", "becn"}) {
        EXPECT_TRUE(j.contains(k)) << k << " missing in " << line;
      }
      EXPECT_TRUE(j.contains("atomic") || j.contains("atomic_ack")) << line;
      if (j.contains("atomic")) {
        EXPECT_TRUE(j["atomic"].contains("swap_add") && j["atomic"].contains("compare"));
      }
      if (j.contains("atomic_ack")) {
        EXPECT_TRUE(j["atomic_ack"].contains("orig"));
      }
    } else {
      ++other;  // TCP connection setup of perftest: listed, never skipped
      EXPECT_EQ(j["error"], "not_udp");
    }
  }
  EXPECT_EQ(roce, 10u);
  EXPECT_EQ(other, 38u);
}

TEST(PcapTool, BadArgumentsFailClearly) {
  const std::string tool = ISOROCE_PCAP_TOOL;
  auto r = run_command(tool + " decode /nonexistent.pcap 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("nonexistent"), std::string::npos) << r.out;
  r = run_command(tool + " frobnicate 2>&1");
  EXPECT_NE(r.status, 0);
  r = run_command(tool + " gen 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
  const std::string notpcap = test::temp_path("not-a-pcap.txt");
  run_command("echo hello > " + notpcap);
  r = run_command(tool + " decode " + notpcap + " 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("cannot read"), std::string::npos) << r.out;
  r = run_command(tool + " gen --out /nonexistent-dir/x.pcap 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("cannot write"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace isoroce::wire
