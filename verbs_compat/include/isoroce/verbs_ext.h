/* isoroce extensions to libibverbs, for applications that want to say what
 * kind of traffic a QP carries (the justitia policy isolates the classes; see
 * docs/isolation.md). Without changing a program, ISOROCE_FLOW_CLASS=latency|
 * throughput|bandwidth in its environment sets the class of every QP it
 * creates, and ISOROCE_TENANT=NAME their tenant (docs/isoroced.md, "Tenants").
 *
 * The function lives in libisoroce-verbs.so. A program that may run without
 * isoroce calls isoroce_qp_set_class_if_present(), which looks the symbol up
 * at run time and returns ENOSYS when the library is not loaded, so the
 * program needs no link against it. */
#ifndef ISOROCE_VERBS_EXT_H
#define ISOROCE_VERBS_EXT_H

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

enum isoroce_flow_class {
  ISOROCE_CLASS_LATENCY = 0,    /* never paced; its tail latency is protected */
  ISOROCE_CLASS_THROUGHPUT = 1, /* small messages: tokens count messages */
  ISOROCE_CLASS_BANDWIDTH = 2,  /* the default: tokens count bytes, messages are split */
};

/* Sets the QP's class on its device: 0, or an errno value (EINVAL for an
 * unknown class or QP). The QP's application (its device context) and class
 * form one logical flow: more QPs of one class buy no extra share. */
int isoroce_qp_set_class(struct ibv_qp *qp, enum isoroce_flow_class cls);

static inline int isoroce_qp_set_class_if_present(struct ibv_qp *qp, enum isoroce_flow_class cls) {
  typedef int (*set_class_fn)(struct ibv_qp *, enum isoroce_flow_class);
  set_class_fn fn = (set_class_fn)dlsym(RTLD_DEFAULT, "isoroce_qp_set_class");
  return fn ? fn(qp, cls) : ENOSYS;
}

#ifdef __cplusplus
}
#endif

#endif /* ISOROCE_VERBS_EXT_H */
