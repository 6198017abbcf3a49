// Asynchronous events (ibv_get_async_event / ibv_ack_async_event) and the
// flow-class extension (isoroce/verbs_ext.h).
//
// The context's async_fd is an eventfd the daemon writes whenever it queues
// an event for this connection ("open" with async_events); reading it, the
// library takes the events ("get_async_events") and hands them out one by one
// with the application's own ibv_qp / ibv_cq / ibv_srq pointer, found in the
// context's registry. As in libibverbs, destroying an object waits until
// every event delivered for it has been acknowledged.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "verbs_compat/include/isoroce/verbs_ext.h"
#include "verbs_compat/internal.h"

namespace isoroce::vc {
namespace {

// Turns one daemon event into an ibv_async_event; false if it names nothing
// this context has (destroyed since) or is not a verbs event.
bool to_ibv_event(Context& c, const json& e, ibv_async_event* out) {
  const std::string type = e.value("type", std::string());
  const uint32_t id = e.value("id", 0u);
  std::lock_guard lock(c.objects_mu);
  if (type == "qp_fatal") {
    auto it = c.qps.find(id);
    if (it == c.qps.end()) return false;
    out->event_type = IBV_EVENT_QP_FATAL;
    out->element.qp = &it->second->qp;
    ++it->second->async_delivered;
    return true;
  }
  if (type == "cq_error") {
    auto it = c.cqs.find(id);
    if (it == c.cqs.end()) return false;
    out->event_type = IBV_EVENT_CQ_ERR;
    out->element.cq = &it->second->cq;
    ++it->second->async_delivered;
    return true;
  }
  if (type == "srq_limit_reached") {
    auto it = c.srqs.find(id);
    if (it == c.srqs.end()) return false;
    out->event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
    out->element.srq = &it->second->srq;
    ++it->second->async_delivered;
    return true;
  }
  if (type == "latency_target_missed") {
    // Justitia's soft admission has no verbs event type: say it, once per QP.
    log("justitia: latency-class QP %u admitted while the device misses its latency target (Current99 > Target99)",
        id);
    return false;
  }
  debug("async event '%s' on %u ignored", type.c_str(), id);
  return false;
}

template <typename Ibv>
void wait_acked(Ibv* obj, uint32_t delivered) {
  pthread_mutex_lock(&obj->mutex);
  while (obj->events_completed != delivered) pthread_cond_wait(&obj->cond, &obj->mutex);
  pthread_mutex_unlock(&obj->mutex);
}

}  // namespace

void track(Context& c, Qp* q) {
  std::lock_guard lock(c.objects_mu);
  c.qps[q->qp.qp_num] = q;
}
void track(Context& c, Cq* cq) {
  std::lock_guard lock(c.objects_mu);
  c.cqs[cq->cq.handle] = cq;
}
void track(Context& c, Srq* s) {
  std::lock_guard lock(c.objects_mu);
  c.srqs[s->srq.handle] = s;
}

void untrack(Context& c, Qp* q) {
  {
    std::lock_guard lock(c.objects_mu);
    c.qps.erase(q->qp.qp_num);
  }
  wait_acked(&q->qp, q->async_delivered);
}
void untrack(Context& c, Cq* cq) {
  {
    std::lock_guard lock(c.objects_mu);
    c.cqs.erase(cq->cq.handle);
  }
  pthread_mutex_lock(&cq->cq.mutex);
  while (cq->cq.async_events_completed != cq->async_delivered) pthread_cond_wait(&cq->cq.cond, &cq->cq.mutex);
  pthread_mutex_unlock(&cq->cq.mutex);
}
void untrack(Context& c, Srq* s) {
  {
    std::lock_guard lock(c.objects_mu);
    c.srqs.erase(s->srq.handle);
  }
  wait_acked(&s->srq, s->async_delivered);
}

}  // namespace isoroce::vc

using namespace isoroce::vc;

extern "C" {

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  Context& c = *context_of(context);
  for (;;) {
    {
      std::lock_guard lock(c.async_mu);
      while (!c.async_pending.empty()) {
        json e = std::move(c.async_pending.front());
        c.async_pending.pop_front();
        if (to_ibv_event(c, e, event)) return 0;
      }
    }
    // Blocks unless the application made async_fd non-blocking (then -1, EAGAIN).
    uint64_t n = 0;
    if (read(context->async_fd, &n, sizeof n) != sizeof n) return -1;
    json r = c.call({{"op", "get_async_events"}});
    if (!r.value("ok", false)) return errno = reply_errno(r), -1;
    std::lock_guard lock(c.async_mu);
    for (json& e : r["events"]) c.async_pending.push_back(std::move(e));
  }
}

void ibv_ack_async_event(ibv_async_event* event) {
  auto bump = [](auto* obj, unsigned int* counter) {
    pthread_mutex_lock(&obj->mutex);
    ++*counter;
    pthread_cond_signal(&obj->cond);
    pthread_mutex_unlock(&obj->mutex);
  };
  switch (event->event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      bump(event->element.qp, &event->element.qp->events_completed);
      break;
    case IBV_EVENT_CQ_ERR:
      bump(event->element.cq, &event->element.cq->async_events_completed);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      bump(event->element.srq, &event->element.srq->events_completed);
      break;
    default:
      break;  // port and device events carry no object
  }
}

int isoroce_qp_set_class(ibv_qp* qp, enum isoroce_flow_class cls) {
  const char* name = cls == ISOROCE_CLASS_LATENCY      ? "latency"
                     : cls == ISOROCE_CLASS_THROUGHPUT ? "throughput"
                     : cls == ISOROCE_CLASS_BANDWIDTH  ? "bandwidth"
                                                       : nullptr;
  if (qp == nullptr || name == nullptr) return EINVAL;
  json r = context_of(qp->context)->call({{"op", "set_class"}, {"qpn", qp->qp_num}, {"class", name}});
  return r.value("ok", false) ? 0 : reply_errno(r);
}

}  // extern "C"
