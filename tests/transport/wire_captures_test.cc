// Real captures (hardware RNIC, Linux rxe) and our generated traffic, checked
// against our parser and against tshark's InfiniBand dissector field by field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/transport/test_util.h"
#include "tools/pcap/generate.h"
#include "tools/pcap/generate_cm.h"
#include "tools/pcap/pcap_io.h"
#include "transport/cm/messages.h"
#include "transport/wire/parse.h"

namespace isoroce::wire {
namespace {

using test::run_command;

// tshark with the InfiniBand payload heuristics off (random payloads can look
// like RPC-over-RDMA or EoIB and be flagged as malformed otherwise) and TFTP
// off (it claims UDP source port 69, which the Huawei RNIC capture uses).
const char* kTshark =
    "tshark --disable-heuristic mellanox_eoib --disable-heuristic fc_infiniband "
    "--disable-heuristic sdp_infiniband --disable-heuristic iser_infiniband "
    "--disable-heuristic rpcrdma_infiniband --disable-heuristic smb_direct_infiniband "
    "--disable-heuristic smcr_infiniband --disable-heuristic nvme_rdma "
    "--disable-heuristic eth_over_ib --disable-heuristic lnet_ib --disable-protocol tftp";

const std::vector<std::string> kFields = {
    "frame.number", "udp.srcport", "udp.dstport", "infiniband.bth.opcode", "infiniband.bth.se",
    "infiniband.bth.m", "infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.p_key",
    "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn", "infiniband.reth.va",
    "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.aeth.syndrome",
    "infiniband.aeth.msn", "infiniband.deth.q_key", "infiniband.deth.srcqp", "infiniband.immdt",
    "infiniband.ieth", "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt", "infiniband.invariant.crc", "data.len", "_ws.malformed"};

using Row = std::map<std::string, std::string>;

std::map<uint64_t, Row> tshark_rows(const std::string& pcap) {
  std::string cmd = std::string(kTshark) + " -r '" + pcap + "' -T fields -E separator=/t -E occurrence=f";
  for (const auto& f : kFields) cmd += " -e " + f;
  cmd += " 2>/dev/null";
  const auto r = run_command(cmd);
  EXPECT_EQ(r.status, 0) << cmd;
  std::map<uint64_t, Row> rows;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    Row row;
    size_t start = 0;
    for (size_t i = 0; i < kFields.size(); ++i) {
      const size_t tab = line.find('\t', start);
      row[kFields[i]] = line.substr(start, tab == std::string::npos ? std::string::npos : tab - start);
      start = tab == std::string::npos ? line.size() : tab + 1;
    }
    rows[std::stoull(row["frame.number"])] = row;
  }
  return rows;
}

uint64_t num(const Row& row, const std::string& field) {
  const std::string& v = row.at(field);
  if (v == "True") return 1;
  if (v == "False") return 0;
  return std::strtoull(v.c_str(), nullptr, 0);
}

uint64_t hex_bytes(const Row& row, const std::string& field) {
  return std::strtoull(row.at(field).c_str(), nullptr, 16);
}

// Compares every field tshark shows for one RoCEv2 frame with our decode.
void expect_matches_tshark(const RocePacket& p, const Row& t, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_TRUE(t.at("_ws.malformed").empty()) << "tshark calls it malformed";
  EXPECT_EQ(num(t, "udp.srcport"), p.udp_sport);
  EXPECT_EQ(num(t, "udp.dstport"), p.udp_dport);
  EXPECT_EQ(num(t, "infiniband.bth.opcode"), p.opcode);
  EXPECT_EQ(num(t, "infiniband.bth.se"), p.solicited);
  EXPECT_EQ(num(t, "infiniband.bth.m"), p.mig_req);
  EXPECT_EQ(num(t, "infiniband.bth.padcnt"), p.pad);
  EXPECT_EQ(num(t, "infiniband.bth.tver"), p.tver);
  EXPECT_EQ(num(t, "infiniband.bth.p_key"), p.pkey);
  EXPECT_EQ(num(t, "infiniband.bth.destqp"), p.dest_qp.value());
  EXPECT_EQ(num(t, "infiniband.bth.a"), p.ack_req);
  EXPECT_EQ(num(t, "infiniband.bth.psn"), p.psn.value());
  if (p.opcode == op::kCnp) return;  // tshark does not know the CNP opcode's headers
  if (p.reth) {
    EXPECT_EQ(num(t, "infiniband.reth.va"), p.reth->va);
    EXPECT_EQ(num(t, "infiniband.reth.r_key"), p.reth->rkey);
    EXPECT_EQ(num(t, "infiniband.reth.dmalen"), p.reth->dma_len);
  }
  if (p.atomic) {  // tshark shows the AtomicETH VA and R_Key with the RETH's fields
    EXPECT_EQ(num(t, "infiniband.reth.va"), p.atomic->va);
    EXPECT_EQ(num(t, "infiniband.reth.r_key"), p.atomic->rkey);
    EXPECT_EQ(num(t, "infiniband.atomiceth.swapdt"), p.atomic->swap_add);
    EXPECT_EQ(num(t, "infiniband.atomiceth.cmpdt"), p.atomic->compare);
  }
  if (!p.reth && !p.atomic) {
    EXPECT_TRUE(t.at("infiniband.reth.va").empty());
  }
  if (p.aeth) {
    EXPECT_EQ(num(t, "infiniband.aeth.syndrome"), p.aeth->syndrome);
    EXPECT_EQ(num(t, "infiniband.aeth.msn"), p.aeth->msn);
  } else {
    EXPECT_TRUE(t.at("infiniband.aeth.syndrome").empty());
  }
  if (p.deth) {
    EXPECT_EQ(num(t, "infiniband.deth.q_key"), p.deth->qkey);
    EXPECT_EQ(num(t, "infiniband.deth.srcqp"), p.deth->src_qp);
  } else {
    EXPECT_TRUE(t.at("infiniband.deth.srcqp").empty());
  }
  if (p.imm) {
    EXPECT_EQ(hex_bytes(t, "infiniband.immdt"), *p.imm);
  }
  if (p.ieth) {
    EXPECT_EQ(hex_bytes(t, "infiniband.ieth"), *p.ieth);
  }
  if (p.atomic_ack) {
    EXPECT_EQ(num(t, "infiniband.atomicacketh.origremdt"), *p.atomic_ack);
  }
  // tshark reads the ICRC as a big-endian number; it is sent LSB first.
  EXPECT_EQ(num(t, "infiniband.invariant.crc"), __builtin_bswap32(p.icrc));
  // tshark's data covers payload and pad; on QP1 it decodes the CM MAD instead.
  if (p.dest_qp == Qpn(1)) return;
  const uint64_t data = t.at("data.len").empty() ? 0 : num(t, "data.len");
  EXPECT_EQ(data, p.payload_len + p.pad);
}

struct Decoded {
  uint64_t roce = 0;
  std::map<uint64_t, RocePacket> packets;
};

Decoded decode_file(const std::string& path) {
  std::vector<tools::CapturedFrame> frames;
  std::string err;
  EXPECT_TRUE(tools::read_capture(path, frames, err)) << err;
  Decoded d;
  for (auto& f : frames) {
    const ParseResult r = parse_frame(f.bytes);
    if (!r.pkt.has_udp || r.pkt.udp_dport != kRoceV2Port) continue;
    ++d.roce;
    EXPECT_TRUE(r.ok()) << path << " frame " << f.frame_no << ": " << parse_error_name(r.error);
    EXPECT_TRUE(r.pkt.icrc_ok) << path << " frame " << f.frame_no;
    d.packets[f.frame_no] = r.pkt;
  }
  return d;
}

TEST(Captures, EveryRocePacketDecodesWithValidIcrc) {
  const auto files = test::capture_files();
  ASSERT_GE(files.size(), 14u) << "captures missing from " << ISOROCE_CAPTURES_DIR;
  uint64_t total = 0;
  for (const auto& path : files) {
    const Decoded d = decode_file(path);
    EXPECT_GT(d.roce, 0u) << path;
    total += d.roce;
  }
  RecordProperty("roce_packets", static_cast<int>(total));
  EXPECT_GE(total, 591u);
}

void compare_file_with_tshark(const std::string& path, uint64_t min_packets) {
  ASSERT_TRUE(test::have_program("tshark")) << "tshark is required (scripts/install-deps.sh)";
  const Decoded d = decode_file(path);
  const auto rows = tshark_rows(path);
  ASSERT_GE(d.packets.size(), min_packets) << path;
  for (const auto& [frame, pkt] : d.packets) {
    auto it = rows.find(frame);
    ASSERT_NE(it, rows.end()) << path << " frame " << frame << " missing in tshark output";
    expect_matches_tshark(pkt, it->second, path + " frame " + std::to_string(frame));
  }
}

TEST(Captures, FieldsMatchTshark) {
  for (const auto& path : test::capture_files()) compare_file_with_tshark(path, 1);
}

TEST(Generated, FieldsMatchTshark) {
  for (bool v6 : {false, true}) {
    const auto gen = tools::generate_frames(v6, 3);
    std::vector<std::vector<uint8_t>> frames;
    for (const auto& g : gen) frames.push_back(g.bytes);
    const std::string path = test::temp_path(v6 ? "gen6.pcap" : "gen4.pcap");
    std::string err;
    ASSERT_TRUE(tools::write_capture(path, frames, err)) << err;
    compare_file_with_tshark(path, gen.size());
  }
}

// Our CM MADs (two cm::Managers' whole exchange, as UD SENDs to QP1): tshark
// decodes each as the CM message it is, with our field values, nothing
// malformed; the transport headers match as for every other frame; and
// `isoroce-pcap decode` names them too.
TEST(Generated, CmMadsAreCmToTshark) {
  const char* kNames[] = {"ConnectRequest",    "MsgRcptAck",     "ConnectReply",    "ReadyToUse",
                          "DisconnectRequest", "DisconnectReply", "ConnectRequest", "ConnectReject",
                          "ServiceIDResReq",   "ServiceIDResReqResp"};
  for (bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
    const auto gen = tools::generate_cm_frames(v6, 5);
    ASSERT_EQ(gen.size(), std::size(kNames));
    std::vector<std::vector<uint8_t>> frames;
    for (const auto& g : gen) frames.push_back(g.bytes);
    const std::string path = test::temp_path(v6 ? "cm6.pcap" : "cm4.pcap");
    std::string err;
    ASSERT_TRUE(tools::write_capture(path, frames, err)) << err;
    compare_file_with_tshark(path, gen.size());
    const std::string cmd = std::string(kTshark) + " -r '" + path +
                            "' -T fields -E separator=/t -E occurrence=f -e frame.number -e _ws.col.Info"
                            " -e infiniband.mad.attributeid -e infiniband.mad.transactionid"
                            " -e infiniband.cm.req.localqpn -e infiniband.cm.req.startpsn"
                            " -e infiniband.cm.req.ip_cm.sport -e infiniband.cm.rep.localqpn"
                            " -e infiniband.cm.rep.startpsn -e infiniband.cm.rej.reason -e _ws.malformed 2>/dev/null";
    const auto r = run_command(cmd);
    ASSERT_EQ(r.status, 0);
    std::istringstream in(r.out);
    std::string line;
    size_t i = 0;
    while (std::getline(in, line)) {
      ASSERT_LT(i, gen.size());
      SCOPED_TRACE(line);
      std::vector<std::string> f;
      std::istringstream ls(line);
      for (std::string x; std::getline(ls, x, '\t');) f.push_back(x);
      f.resize(11);
      const auto& mad = gen[i].payload;
      const auto* h = reinterpret_cast<const cm::MadHeader*>(mad.data());
      EXPECT_EQ(f[1], std::string("CM: ") + kNames[i]);
      EXPECT_EQ(std::strtoull(f[2].c_str(), nullptr, 0), h->attr_id());
      EXPECT_EQ(std::strtoull(f[3].c_str(), nullptr, 0), h->tid());
      if (h->attr_id() == static_cast<uint16_t>(cm::AttrId::kReq)) {
        const auto* m = cm::msg_cast<cm::ReqMsg>(mad.data());
        EXPECT_EQ(std::strtoull(f[4].c_str(), nullptr, 0), m->local_qpn());
        EXPECT_EQ(std::strtoull(f[5].c_str(), nullptr, 0), m->starting_psn());
        EXPECT_EQ(std::strtoull(f[6].c_str(), nullptr, 0), 0xc001u);  // the rdma_cm header's port
      }
      if (h->attr_id() == static_cast<uint16_t>(cm::AttrId::kRep)) {
        const auto* m = cm::msg_cast<cm::RepMsg>(mad.data());
        EXPECT_EQ(std::strtoull(f[7].c_str(), nullptr, 0), m->local_qpn());
        EXPECT_EQ(std::strtoull(f[8].c_str(), nullptr, 0), m->starting_psn());
      }
      if (h->attr_id() == static_cast<uint16_t>(cm::AttrId::kRej)) {
        EXPECT_EQ(std::strtoull(f[9].c_str(), nullptr, 0), 28u);  // consumer reject
      }
      EXPECT_TRUE(f[10].empty()) << "tshark calls it malformed";
      ++i;
    }
    EXPECT_EQ(i, gen.size());
    const auto dec = run_command(std::string(ISOROCE_PCAP_TOOL) + " decode " + path);
    ASSERT_EQ(dec.status, 0);
    for (const char* n : kNames) EXPECT_NE(dec.out.find(std::string("| CM ") + n), std::string::npos) << n;
    EXPECT_NE(dec.out.find("reason=28 (consumer reject)"), std::string::npos);
    EXPECT_NE(dec.out.find("(rdma_cm tcp port 18515)"), std::string::npos);
  }
}

}  // namespace
}  // namespace isoroce::wire
