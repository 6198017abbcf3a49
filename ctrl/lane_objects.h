// The verbs objects of a port with lanes (docs/design.md, "Lanes"): PDs, MRs,
// CQs, SRQs and AHs exist in every lane's engine under the same handles and
// keys (lane 0 chooses them, the others take them: Engine::set_next_*), so a
// peer's WRITE to a QP of any lane finds the R_Key, and a QP of any lane may
// name any of them. A QP lives in one lane; a CQ or SRQ serves the QPs of one
// lane only: the lane of its first QP (place_qp), whose pump then moves its
// ring. With one lane each function is the engine call it wraps.
//
// Every function runs inside DeviceEntry::run (all the port's workers stopped).
#pragma once

#include <string>

#include "ctrl/device_entry.h"
#include "ctrl/session.h"

namespace isoroce::ctrl {

verbs::Result<transport::PdHandle> lanes_alloc_pd(DeviceEntry& d);
// 0, or the first lane's error (EBUSY: a lane still uses it; nothing changed).
int lanes_dealloc_pd(DeviceEntry& d, transport::PdHandle pd);
verbs::Result<verbs::MrKeys> lanes_reg_mr(DeviceEntry& d, transport::PdHandle pd, void* addr, uint64_t length,
                                          uint64_t iova, uint32_t access);
int lanes_dereg_mr(DeviceEntry& d, uint32_t lkey);
verbs::Result<transport::CqHandle> lanes_create_cq(DeviceEntry& d, int cqe);
int lanes_destroy_cq(DeviceEntry& d, transport::CqHandle cq);
// The CQ's lane decides (outside: its ring's unconsumed completions).
int lanes_resize_cq(DeviceEntry& d, transport::CqHandle cq, int cqe, uint32_t outside);
verbs::Result<transport::SrqHandle> lanes_create_srq(DeviceEntry& d, transport::PdHandle pd, const ibv_srq_attr& a);
int lanes_modify_srq(DeviceEntry& d, transport::SrqHandle srq, const ibv_srq_attr& a, uint32_t mask);
int lanes_destroy_srq(DeviceEntry& d, transport::SrqHandle srq);
verbs::Result<transport::AhHandle> lanes_create_ah(DeviceEntry& d, transport::PdHandle pd,
                                                   const transport::AhAttr& a);
int lanes_destroy_ah(DeviceEntry& d, transport::AhHandle ah);

// The lane for a new QP of these CQs and SRQ: theirs if one has a lane
// already, else the lane with the fewest QPs; -1 and *why when they are in
// different lanes (a CQ or SRQ serves one lane's QPs).
int place_qp(DeviceEntry& d, const transport::QpCreate& q, std::string* why);
// The QP's CQs and SRQ are in `lane` from now on: their rings join its pump.
void bind_queues(DeviceEntry& d, Session& s, const transport::QpCreate& q, size_t lane);
// An SRQ given receives through the socket before any QP: it takes the lane
// with the fewest QPs now (its QPs must then come to that lane).
size_t srq_lane_for_post(DeviceEntry& d, Session& s, transport::SrqHandle srq);

}  // namespace isoroce::ctrl
