#include "ctrl/wire_json.h"

#include <arpa/inet.h>

#include <cstring>

#include "ctrl/protocol_limits.h"
#include "transport/verbs/mtu.h"

namespace isoroce::ctrl {
namespace {

using nlohmann::json;

struct NamedState {
  const char* name;
  ibv_qp_state state;
};
constexpr NamedState kStates[] = {{"RESET", IBV_QPS_RESET}, {"INIT", IBV_QPS_INIT}, {"RTR", IBV_QPS_RTR},
                                  {"RTS", IBV_QPS_RTS},     {"SQD", IBV_QPS_SQD},   {"SQE", IBV_QPS_SQE},
                                  {"ERR", IBV_QPS_ERR}};

bool parse_state(const json& v, ibv_qp_state* out) {
  if (!v.is_string()) return false;
  for (const auto& s : kStates)
    if (v.get<std::string>() == s.name) return *out = s.state, true;
  return false;
}

template <typename T>
bool read_uint(const json& j, const char* key, T* out, uint64_t max, std::string* error) {
  const json& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max) {
    *error = std::string("\"") + key + "\" must be an integer 0.." + std::to_string(max);
    return false;
  }
  *out = static_cast<T>(v.get<uint64_t>());
  return true;
}

bool mtu_from_bytes(uint64_t bytes, ibv_mtu* out) {
  const auto m = verbs::mtu_from_bytes(bytes);
  if (m) *out = *m;
  return m.has_value();
}

}  // namespace

std::string gid_text(const wire::IpAddr& gid) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, gid.data(), buf, sizeof buf);
  return buf;
}

bool parse_gid(const std::string& text, wire::IpAddr* gid) {
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    *gid = wire::ipv4_mapped(ntohl(v4.s_addr));
    return true;
  }
  return inet_pton(AF_INET6, text.c_str(), gid->data()) == 1;
}

std::string state_name(ibv_qp_state s) {
  for (const auto& n : kStates)
    if (n.state == s) return n.name;
  return "UNKNOWN";
}

std::string wc_status_name(int status) {
  static const char* const kNames[] = {
      "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
      "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR",
      "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR",
      "REM_ABORT_ERR", "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR",
      "GENERAL_ERR", "TM_ERR", "TM_RNDV_INCOMPLETE"};
  if (status < 0 || static_cast<size_t>(status) >= std::size(kNames)) return "UNKNOWN";
  return kNames[status];
}

json wc_to_json(const ibv_wc& wc) {
  return {{"wr_id", wc.wr_id},     {"status", static_cast<int>(wc.status)},
          {"status_name", wc_status_name(wc.status)},
          {"opcode", static_cast<int>(wc.opcode)}, {"vendor_err", wc.vendor_err},
          {"byte_len", wc.byte_len}, {"imm_data", ntohl(wc.imm_data)},  // host order in JSON
          {"qp_num", wc.qp_num},   {"src_qp", wc.src_qp},
          {"wc_flags", wc.wc_flags}, {"pkey_index", wc.pkey_index}, {"sl", wc.sl}};
}

json qp_attr_to_json(const ibv_qp_attr& a) {
  wire::IpAddr gid;
  std::memcpy(gid.data(), a.ah_attr.grh.dgid.raw, 16);
  const uint32_t mtu_bytes = verbs::mtu_bytes(a.path_mtu);
  return {{"qp_state", state_name(a.qp_state)},
          {"path_mtu", mtu_bytes},
          {"qkey", a.qkey},
          {"rq_psn", a.rq_psn},
          {"sq_psn", a.sq_psn},
          {"dest_qp_num", a.dest_qp_num},
          {"qp_access_flags", a.qp_access_flags},
          {"cap", {{"max_send_wr", a.cap.max_send_wr}, {"max_recv_wr", a.cap.max_recv_wr},
                   {"max_send_sge", a.cap.max_send_sge}, {"max_recv_sge", a.cap.max_recv_sge},
                   {"max_inline_data", a.cap.max_inline_data}}},
          {"ah_attr", {{"dgid", gid_text(gid)}, {"traffic_class", a.ah_attr.grh.traffic_class},
                       {"hop_limit", a.ah_attr.grh.hop_limit}, {"flow_label", a.ah_attr.grh.flow_label},
                       {"sl", a.ah_attr.sl}}},
          {"pkey_index", a.pkey_index},
          {"max_rd_atomic", a.max_rd_atomic},
          {"max_dest_rd_atomic", a.max_dest_rd_atomic},
          {"min_rnr_timer", a.min_rnr_timer},
          {"port_num", a.port_num},
          {"timeout", a.timeout},
          {"retry_cnt", a.retry_cnt},
          {"rnr_retry", a.rnr_retry}};
}

bool qp_attr_from_json(const json& j, ibv_qp_attr* a, uint32_t* mask, std::string* error) {
  if (!j.is_object()) return *error = "\"attr\" must be an object", false;
  *mask = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    bool ok = true;
    if (k == "qp_state") {
      ok = parse_state(*it, &a->qp_state);
      if (!ok) *error = "\"qp_state\" must be RESET, INIT, RTR, RTS, SQD, SQE or ERR";
      *mask |= IBV_QP_STATE;
    } else if (k == "cur_qp_state") {
      ok = parse_state(*it, &a->cur_qp_state);
      if (!ok) *error = "\"cur_qp_state\" must be a state name";
      *mask |= IBV_QP_CUR_STATE;
    } else if (k == "pkey_index") {
      ok = read_uint(j, "pkey_index", &a->pkey_index, UINT16_MAX, error), *mask |= IBV_QP_PKEY_INDEX;
    } else if (k == "port_num") {
      ok = read_uint(j, "port_num", &a->port_num, UINT8_MAX, error), *mask |= IBV_QP_PORT;
    } else if (k == "qp_access_flags") {
      ok = read_uint(j, "qp_access_flags", &a->qp_access_flags, UINT32_MAX, error), *mask |= IBV_QP_ACCESS_FLAGS;
    } else if (k == "qkey") {
      ok = read_uint(j, "qkey", &a->qkey, UINT32_MAX, error), *mask |= IBV_QP_QKEY;
    } else if (k == "path_mtu") {
      ok = it->is_number_unsigned() && mtu_from_bytes(it->get<uint64_t>(), &a->path_mtu);
      if (!ok) *error = "\"path_mtu\" must be 256, 512, 1024, 2048 or 4096 (bytes)";
      *mask |= IBV_QP_PATH_MTU;
    } else if (k == "dest_qp_num") {
      ok = read_uint(j, "dest_qp_num", &a->dest_qp_num, 0xffffff, error), *mask |= IBV_QP_DEST_QPN;
    } else if (k == "rq_psn") {
      ok = read_uint(j, "rq_psn", &a->rq_psn, 0xffffff, error), *mask |= IBV_QP_RQ_PSN;
    } else if (k == "sq_psn") {
      ok = read_uint(j, "sq_psn", &a->sq_psn, 0xffffff, error), *mask |= IBV_QP_SQ_PSN;
    } else if (k == "max_dest_rd_atomic") {
      ok = read_uint(j, "max_dest_rd_atomic", &a->max_dest_rd_atomic, UINT8_MAX, error), *mask |= IBV_QP_MAX_DEST_RD_ATOMIC;
    } else if (k == "max_rd_atomic") {
      ok = read_uint(j, "max_rd_atomic", &a->max_rd_atomic, UINT8_MAX, error), *mask |= IBV_QP_MAX_QP_RD_ATOMIC;
    } else if (k == "min_rnr_timer") {
      ok = read_uint(j, "min_rnr_timer", &a->min_rnr_timer, 31, error), *mask |= IBV_QP_MIN_RNR_TIMER;
    } else if (k == "timeout") {
      ok = read_uint(j, "timeout", &a->timeout, 31, error), *mask |= IBV_QP_TIMEOUT;
    } else if (k == "retry_cnt") {
      ok = read_uint(j, "retry_cnt", &a->retry_cnt, 7, error), *mask |= IBV_QP_RETRY_CNT;
    } else if (k == "rnr_retry") {
      ok = read_uint(j, "rnr_retry", &a->rnr_retry, 7, error), *mask |= IBV_QP_RNR_RETRY;
    } else if (k == "ah_attr") {
      transport::AhAttr ah;
      ok = ah_from_json(*it, &ah, error);
      if (ok) {
        a->ah_attr.is_global = 1;
        std::memcpy(a->ah_attr.grh.dgid.raw, ah.dgid.data(), 16);
        a->ah_attr.grh.traffic_class = ah.traffic_class;
        a->ah_attr.grh.hop_limit = ah.hop_limit;
        a->ah_attr.grh.flow_label = ah.flow_label;
        a->ah_attr.sl = ah.sl;
        a->ah_attr.port_num = 1;
      }
      *mask |= IBV_QP_AV;
    } else {
      *error = "unknown QP attribute \"" + k + "\"";
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

bool ah_from_json(const json& j, transport::AhAttr* ah, std::string* error) {
  if (!j.is_object() || !j.contains("dgid") || !j["dgid"].is_string() ||
      !parse_gid(j["dgid"].get<std::string>(), &ah->dgid)) {
    *error = "\"dgid\" must be an IPv4 or IPv6 address (GID)";
    return false;
  }
  if (j.contains("traffic_class") && !read_uint(j, "traffic_class", &ah->traffic_class, UINT8_MAX, error)) return false;
  if (j.contains("hop_limit") && !read_uint(j, "hop_limit", &ah->hop_limit, UINT8_MAX, error)) return false;
  if (j.contains("flow_label") && !read_uint(j, "flow_label", &ah->flow_label, 0xfffff, error)) return false;
  if (j.contains("sl") && !read_uint(j, "sl", &ah->sl, 15, error)) return false;
  return true;
}

bool sges_from_json(const json& wr, std::vector<transport::Sge>* out, std::string* error) {
  out->clear();
  if (!wr.is_object()) return *error = "\"wr\" must be an object", false;
  if (!wr.contains("sg")) return true;
  const json& sg = wr["sg"];
  if (!sg.is_array() || sg.size() > protocol::kMaxJsonSges)
    return *error = "\"sg\" must be an array of at most " + std::to_string(protocol::kMaxJsonSges) + " SGEs", false;
  for (const json& e : sg) {
    transport::Sge s;
    if (!e.is_object() || !e.contains("addr") || !e.contains("length") || !e.contains("lkey") ||
        !read_uint(e, "addr", &s.addr, UINT64_MAX, error) ||
        !read_uint(e, "length", &s.length, UINT32_MAX, error) ||
        !read_uint(e, "lkey", &s.lkey, UINT32_MAX, error)) {
      if (error->empty()) *error = "an SGE is {\"addr\", \"length\", \"lkey\"}";
      return false;
    }
    out->push_back(s);
  }
  return true;
}

bool send_wr_from_json(const json& wr, transport::SendWr* w, std::string* error) {
  static const std::pair<const char*, ibv_wr_opcode> kOps[] = {
      {"send", IBV_WR_SEND}, {"send_imm", IBV_WR_SEND_WITH_IMM}, {"write", IBV_WR_RDMA_WRITE},
      {"write_imm", IBV_WR_RDMA_WRITE_WITH_IMM}, {"read", IBV_WR_RDMA_READ},
      {"cmp_swap", IBV_WR_ATOMIC_CMP_AND_SWP}, {"fetch_add", IBV_WR_ATOMIC_FETCH_AND_ADD}};
  const std::string op = wr.value("opcode", "send");
  bool found = false;
  for (const auto& [name, code] : kOps)
    if (op == name) w->opcode = code, found = true;
  if (!found) return *error = "opcode '" + op + "' (send, send_imm, write, write_imm, read, cmp_swap, fetch_add)", false;
  auto num = [&](const char* key, auto* out, uint64_t max) {
    return !wr.contains(key) || read_uint(wr, key, out, max, error);
  };
  uint32_t imm_host = 0;
  if (!num("wr_id", &w->wr_id, UINT64_MAX) || !num("send_flags", &w->send_flags, UINT32_MAX) ||
      !num("imm_data", &imm_host, UINT32_MAX) || !num("remote_addr", &w->remote_addr, UINT64_MAX) ||
      !num("rkey", &w->rkey, UINT32_MAX) || !num("compare_add", &w->compare_add, UINT64_MAX) ||
      !num("swap", &w->swap, UINT64_MAX) || !num("ah", &w->ah, UINT32_MAX) ||
      !num("remote_qpn", &w->remote_qpn, 0xffffff) || !num("remote_qkey", &w->remote_qkey, UINT32_MAX))
    return false;
  w->imm_data = htonl(imm_host);  // network order, as in libibverbs
  return true;
}

}  // namespace isoroce::ctrl
