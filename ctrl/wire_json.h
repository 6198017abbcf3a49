// The verbs structures as the control protocol spells them in JSON
// (docs/control-protocol.md): work completions, QP attributes with the mask
// taken from the keys present, address handles, SGE lists and send WRs.
#pragma once

#include <infiniband/verbs.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "transport/engine/engine.h"

namespace isoroce::ctrl {

nlohmann::json wc_to_json(const ibv_wc& wc);
nlohmann::json qp_attr_to_json(const ibv_qp_attr& a);
// Fills *attr and *mask from the keys of j; false and *error on a bad key/value.
bool qp_attr_from_json(const nlohmann::json& j, ibv_qp_attr* attr, uint32_t* mask, std::string* error);
bool ah_from_json(const nlohmann::json& j, transport::AhAttr* ah, std::string* error);
bool sges_from_json(const nlohmann::json& wr, std::vector<transport::Sge>* out, std::string* error);
// Everything but sg_list.
bool send_wr_from_json(const nlohmann::json& wr, transport::SendWr* out, std::string* error);

std::string gid_text(const wire::IpAddr& gid);  // "::ffff:10.0.0.1" / "fd00::1"
bool parse_gid(const std::string& text, wire::IpAddr* gid);  // also accepts dotted IPv4
std::string state_name(ibv_qp_state s);
std::string wc_status_name(int status);

}  // namespace isoroce::ctrl
