// Work requests over the socket (the shared-memory rings carry them in the
// data path; ctrl/shm_pump.h). Handles are checked by ctrl/client_handles.h,
// as the pump's are.
#include <cerrno>

#include "ctrl/control.h"
#include "ctrl/lane_objects.h"
#include "ctrl/wire_json.h"

namespace isoroce::ctrl {
namespace {

json post_send(OpContext& c) {
  DeviceEntry& d = c.dev();
  auto qp = own_handle(c.s.objs.qps, c.req, "qpn");
  if (!qp) return op_fail(EINVAL, "post_send: not a QP of this client");
  const json& wr = c.req.value("wr", json::object());
  std::vector<transport::Sge> sges;
  std::string err;
  if (!sges_from_json(wr, &sges, &err)) return op_fail(EINVAL, "post_send: " + err);
  transport::SendWr w;
  if (!send_wr_from_json(wr, &w, &err)) return op_fail(EINVAL, "post_send: " + err);
  const char* why = "";
  if (int rc = check_send_wr(c.s.objs, *qp, w, sges, InlineSource::kClientMemory, &why))
    return op_fail(rc, std::string("post_send: ") + why);
  int rc = 0;
  d.run([&](sched::Picos now) { rc = d.qp_engine(*qp).post_send(now, wire::Qpn(*qp), w); });
  return rc ? op_fail(rc, "post_send") : op_ok();
}

json post_recv(OpContext& c) {
  DeviceEntry& d = c.dev();
  const bool to_srq = c.op == "post_srq_recv";
  std::optional<uint32_t> srq, qp;
  if (to_srq) {
    srq = own_handle(c.s.objs.srqs, c.req, "srq");
    if (!srq) return op_fail(EINVAL, "post_srq_recv: not an SRQ of this client");
  } else {
    qp = own_handle(c.s.objs.qps, c.req, "qpn");
    if (!qp) return op_fail(EINVAL, c.op + ": not a QP of this client");
  }
  const json& wr = c.req.value("wr", json::object());
  std::vector<transport::Sge> sges;
  std::string err;
  if (!sges_from_json(wr, &sges, &err)) return op_fail(EINVAL, c.op + ": " + err);
  const char* why = "";
  if (int rc = check_recv_wr(c.s.objs, qp.value_or(0), srq, &why)) return op_fail(rc, c.op + ": " + why);
  transport::RecvWr w;
  w.wr_id = field_u64_or(wr, "wr_id", 0);
  w.sg_list = sges;
  int rc = 0;
  d.run([&](sched::Picos) {
    rc = srq ? d.lane_engine(srq_lane_for_post(d, c.s, *srq)).post_srq_recv(*srq, w)
             : d.qp_engine(*qp).post_recv(wire::Qpn(*qp), w);
  });
  return rc ? op_fail(rc, c.op) : op_ok();
}

}  // namespace

void register_post_ops(OpTable& t) {
  t.add({"post_send", post_send, true, "qpn, wr {opcode, wr_id, send_flags, sg, remote_addr, rkey, ah, ...}"});
  t.add({"post_recv", post_recv, true, "qpn, wr {wr_id, sg}"});
  t.add({"post_srq_recv", post_recv, true, "srq, wr {wr_id, sg}"});
}

}  // namespace isoroce::ctrl
