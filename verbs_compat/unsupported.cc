// What isoroce does not do, said out loud: every verbs_context operation the
// library does not implement is filled with a function that logs its name and
// fails with the documented error (an int verb returns EOPNOTSUPP, a verb that
// returns an object returns NULL with errno EOPNOTSUPP), so rdma-core's inline
// verbs (ibv_create_flow, ibv_open_xrcd, ibv_alloc_dm, ...) never find a NULL
// and never reach the system libibverbs; and the exported libibverbs names
// that have no meaning for a device behind a daemon (importing objects from a
// command fd, registering a provider).
#include <infiniband/verbs.h>

#include <cerrno>

#include "verbs_compat/internal.h"

namespace isoroce::vc {
namespace {

int fail_int(const char* verb) {
  log("%s: not supported (EOPNOTSUPP)", verb);
  return EOPNOTSUPP;
}
template <typename T>
T* fail_null(const char* verb) {
  log("%s: not supported (EOPNOTSUPP)", verb);
  errno = EOPNOTSUPP;
  return nullptr;
}

int advise_mr(ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t) { return fail_int("ibv_advise_mr"); }
ibv_mr* alloc_null_mr(ibv_pd*) { return fail_null<ibv_mr>("ibv_alloc_null_mr"); }
int read_counters(ibv_counters*, uint64_t*, uint32_t, uint32_t) { return fail_int("ibv_read_counters"); }
int attach_counters_point_flow(ibv_counters*, ibv_counter_attach_attr*, ibv_flow*) {
  return fail_int("ibv_attach_counters_point_flow");
}
ibv_counters* create_counters(ibv_context*, ibv_counters_init_attr*) {
  return fail_null<ibv_counters>("ibv_create_counters");
}
int destroy_counters(ibv_counters*) { return fail_int("ibv_destroy_counters"); }
ibv_mr* reg_dm_mr(ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned int) { return fail_null<ibv_mr>("ibv_reg_dm_mr"); }
ibv_dm* alloc_dm(ibv_context*, ibv_alloc_dm_attr*) { return fail_null<ibv_dm>("ibv_alloc_dm"); }
int free_dm(ibv_dm*) { return fail_int("ibv_free_dm"); }
int modify_flow_action_esp(ibv_flow_action*, ibv_flow_action_esp_attr*) {
  return fail_int("ibv_modify_flow_action_esp");
}
int destroy_flow_action(ibv_flow_action*) { return fail_int("ibv_destroy_flow_action"); }
ibv_flow_action* create_flow_action_esp(ibv_context*, ibv_flow_action_esp_attr*) {
  return fail_null<ibv_flow_action>("ibv_create_flow_action_esp");
}
int modify_qp_rate_limit(ibv_qp*, ibv_qp_rate_limit_attr*) { return fail_int("ibv_modify_qp_rate_limit"); }
ibv_pd* alloc_parent_domain(ibv_context*, ibv_parent_domain_init_attr*) {
  return fail_null<ibv_pd>("ibv_alloc_parent_domain");
}
int dealloc_td(ibv_td*) { return fail_int("ibv_dealloc_td"); }
ibv_td* alloc_td(ibv_context*, ibv_td_init_attr*) { return fail_null<ibv_td>("ibv_alloc_td"); }
int modify_cq(ibv_cq*, ibv_modify_cq_attr*) { return fail_int("ibv_modify_cq"); }
int post_srq_ops(ibv_srq*, ibv_ops_wr* op, ibv_ops_wr** bad_op) {
  *bad_op = op;
  return fail_int("ibv_post_srq_ops");
}
int destroy_rwq_ind_table(ibv_rwq_ind_table*) { return fail_int("ibv_destroy_rwq_ind_table"); }
ibv_rwq_ind_table* create_rwq_ind_table(ibv_context*, ibv_rwq_ind_table_init_attr*) {
  return fail_null<ibv_rwq_ind_table>("ibv_create_rwq_ind_table");
}
int destroy_wq(ibv_wq*) { return fail_int("ibv_destroy_wq"); }
int modify_wq(ibv_wq*, ibv_wq_attr*) { return fail_int("ibv_modify_wq"); }
ibv_wq* create_wq(ibv_context*, ibv_wq_init_attr*) { return fail_null<ibv_wq>("ibv_create_wq"); }
int query_rt_values(ibv_context*, ibv_values_ex*) { return fail_int("ibv_query_rt_values_ex"); }
int destroy_flow(ibv_flow*) { return fail_int("ibv_destroy_flow"); }
ibv_flow* create_flow(ibv_qp*, ibv_flow_attr*) { return fail_null<ibv_flow>("ibv_create_flow"); }
ibv_qp* open_qp(ibv_context*, ibv_qp_open_attr*) { return fail_null<ibv_qp>("ibv_open_qp (XRC)"); }
int get_srq_num(ibv_srq*, uint32_t*) { return fail_int("ibv_get_srq_num (XRC)"); }
ibv_srq* create_srq_ex(ibv_context*, ibv_srq_init_attr_ex*) {
  return fail_null<ibv_srq>("ibv_create_srq_ex (XRC, tag matching)");
}
ibv_xrcd* open_xrcd(ibv_context*, ibv_xrcd_init_attr*) { return fail_null<ibv_xrcd>("ibv_open_xrcd"); }
int close_xrcd(ibv_xrcd*) { return fail_int("ibv_close_xrcd"); }

}  // namespace

void fill_unsupported_ops(verbs_context& v) {
  v.advise_mr = advise_mr;
  v.alloc_null_mr = alloc_null_mr;
  v.read_counters = read_counters;
  v.attach_counters_point_flow = attach_counters_point_flow;
  v.create_counters = create_counters;
  v.destroy_counters = destroy_counters;
  v.reg_dm_mr = reg_dm_mr;
  v.alloc_dm = alloc_dm;
  v.free_dm = free_dm;
  v.modify_flow_action_esp = modify_flow_action_esp;
  v.destroy_flow_action = destroy_flow_action;
  v.create_flow_action_esp = create_flow_action_esp;
  v.modify_qp_rate_limit = modify_qp_rate_limit;
  v.alloc_parent_domain = alloc_parent_domain;
  v.dealloc_td = dealloc_td;
  v.alloc_td = alloc_td;
  v.modify_cq = modify_cq;
  v.post_srq_ops = post_srq_ops;
  v.destroy_rwq_ind_table = destroy_rwq_ind_table;
  v.create_rwq_ind_table = create_rwq_ind_table;
  v.destroy_wq = destroy_wq;
  v.modify_wq = modify_wq;
  v.create_wq = create_wq;
  v.query_rt_values = query_rt_values;
  v.ibv_destroy_flow = destroy_flow;
  v.ibv_create_flow = create_flow;
  v.open_qp = open_qp;
  v.get_srq_num = get_srq_num;
  v.create_srq_ex = create_srq_ex;
  v.open_xrcd = open_xrcd;
  v.close_xrcd = close_xrcd;
}

}  // namespace isoroce::vc

using isoroce::vc::log;

extern "C" {

// Importing objects shares them between processes through the kernel's
// command fd; an isoroce context has a daemon connection instead.
ibv_context* ibv_import_device(int) {
  log("ibv_import_device: not supported (EOPNOTSUPP)");
  return errno = EOPNOTSUPP, nullptr;
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  log("ibv_import_pd: not supported (EOPNOTSUPP)");
  return errno = EOPNOTSUPP, nullptr;
}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  log("ibv_import_mr: not supported (EOPNOTSUPP)");
  return errno = EOPNOTSUPP, nullptr;
}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  log("ibv_import_dm: not supported (EOPNOTSUPP)");
  return errno = EOPNOTSUPP, nullptr;
}
// Nothing can have been imported, so there is nothing to release.
void ibv_unimport_pd(ibv_pd*) { log("ibv_unimport_pd: no PD was imported (ibv_import_pd is not supported)"); }
void ibv_unimport_mr(ibv_mr*) { log("ibv_unimport_mr: no MR was imported (ibv_import_mr is not supported)"); }
void ibv_unimport_dm(ibv_dm*) { log("ibv_unimport_dm: no DM was imported (ibv_import_dm is not supported)"); }

// The pre-2017 provider registration (IBVERBS_1.1, not the default version):
// isoroce's device is no provider of the system library.
void isoroce_register_driver_1_1(const char* name, void*) {
  log("ibv_register_driver(%s): providers are not loaded by libisoroce-verbs", name ? name : "");
}
__asm__(".symver isoroce_register_driver_1_1, ibv_register_driver@IBVERBS_1.1");

}  // extern "C"
