/* The policy plugin interface: all a transmit-scheduling policy written outside
 * isoroce includes. A plugin is a shared object that exports one function,
 * isoroce_policy_entry(), returning its ops table (struct isoroce_policy_ops: a
 * name, a version, capability flags and the callbacks), as Linux's struct
 * Qdisc_ops describes a qdisc. isoroce checks abi_version on load and refuses
 * anything else. docs/policy-tutorial.md walks through writing one.
 *
 * The division of work. isoroce (the host) keeps the link model (a packet departs
 * once the previous one has left), sends control packets (ACK, NAK, CNP) first,
 * remembers each QP's ready packet, asks the QP's owner for its following packet
 * and checks every answer. The policy decides only which QP's ready packet departs
 * next, and when:
 *
 *   activate(now, qp, bytes, ends_message)   qp has a packet of `bytes` ready
 *   pick(slot)                               which ready packet departs next?
 *   granted(now, qp, bytes, departure, next) it did; qp's following packet (0: idle)
 *   deactivate(now, qp)                      qp's ready packet is gone (QP reset)
 *   next_deadline(&at)                       after pick declined: when it may have one
 *
 * and is told, when it wants to know (optional callbacks): per-QP rate limits
 * (set_rate, from DCQCN or the operator), the flow class and application of a QP
 * and the application's weight (set_class), send completions (completion), and
 * the latencies of the driver's reference flow (reference_latency). Time is in
 * picoseconds and never read from a clock: every call brings "now".
 *
 * The contract of pick: fill slot->qp, slot->bytes (the QP's ready packet: the
 * size activate or granted's next_bytes gave) and slot->departure, in
 * [max(slot->now, slot->link_free), slot->horizon], and return 1; or return 0
 * when no packet departs by slot->horizon, and then next_deadline must say a time
 * after slot->horizon. Anything else (a QP out of range or not ready, a wrong
 * size, a departure outside the window, a negative return from any callback, an
 * exception) is a fault: isoroce logs it, destroys the policy and carries on with
 * fifo for that port. Control packets and the host's checks cost the policy
 * nothing; the policy can never corrupt a QP.
 *
 * C and C++. Under C++, isoroce::policy::Policy is a base class with the same
 * events as virtual functions, and ISOROCE_POLICY_EXPORT(Class, name,
 * description, version, flags) defines isoroce_policy_entry() for it (every
 * exception is caught at the boundary and becomes a fault with its what()).
 *
 * Stability: the layout of everything here is frozen for an ABI version; new
 * callbacks are appended and announced by a larger `size`, and a change that
 * breaks a plugin bumps ISOROCE_POLICY_ABI_VERSION. */
#ifndef ISOROCE_SCHED_POLICY_API_H_
#define ISOROCE_SCHED_POLICY_API_H_

#include <stddef.h>
#include <stdint.h>

#define ISOROCE_POLICY_ABI_VERSION 1u
/* The one symbol isoroce looks up in a plugin. */
#define ISOROCE_POLICY_ENTRY_SYMBOL "isoroce_policy_entry"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t isoroce_picos; /* picoseconds */
#define ISOROCE_NEVER UINT64_MAX

/* Capability flags (isoroce_policy_ops.flags): what drivers must know. */
#define ISOROCE_POLICY_ENFORCES_RATES 1u     /* set_rate limits hold (DCQCN needs this) */
#define ISOROCE_POLICY_REFERENCE_LATENCY 2u  /* wants reference_latency: the driver runs its probe */
#define ISOROCE_POLICY_MESSAGE_RATE 4u       /* honours config.max_msgs_per_sec */

/* Flow classes (Justitia's), as set_class gives them. */
#define ISOROCE_CLASS_LATENCY 0u
#define ISOROCE_CLASS_THROUGHPUT 1u
#define ISOROCE_CLASS_BANDWIDTH 2u /* a QP never classified */
#define ISOROCE_CLASS_REFERENCE 3u /* the driver's reference probe: serve it like latency */
#define ISOROCE_OWN_APP 0xffffffffu /* set_class's app for a QP that is an application alone */

struct isoroce_policy_config {
  uint32_t size;              /* sizeof(struct isoroce_policy_config) of the host */
  uint32_t max_qps;           /* QP ids are 0 .. max_qps - 1 */
  uint64_t link_bps;          /* the port's link rate */
  uint64_t max_msgs_per_sec;  /* the NIC's message rate to model; 0: none */
  isoroce_picos lookahead;    /* how far past "now" the host grants in one call */
};

/* One decision: the host fills the first three, pick the last three. */
struct isoroce_policy_slot {
  isoroce_picos now;
  isoroce_picos link_free;  /* the link is busy until then */
  isoroce_picos horizon;    /* the latest departure granted in this call */
  uint32_t qp;
  uint32_t bytes;
  isoroce_picos departure;
};

/* Callbacks return 0 on success and a negative number on failure (a fault), except
 * pick (1, 0 or negative). `p` is what create returned. Optional ones may be NULL. */
struct isoroce_policy_ops {
  uint32_t abi_version;     /* ISOROCE_POLICY_ABI_VERSION */
  uint32_t size;            /* sizeof(struct isoroce_policy_ops) */
  const char* name;         /* 1 to 32 of [A-Za-z0-9_.-]; the name scenarios and --policy use */
  const char* description;  /* one line */
  uint32_t version;         /* the policy's own version */
  uint32_t flags;           /* ISOROCE_POLICY_* */

  void* (*create)(const struct isoroce_policy_config* config); /* NULL: refused */
  void (*destroy)(void* p);
  int (*activate)(void* p, isoroce_picos now, uint32_t qp, uint32_t bytes, int ends_message);
  int (*deactivate)(void* p, isoroce_picos now, uint32_t qp);
  int (*pick)(void* p, struct isoroce_policy_slot* slot);
  int (*granted)(void* p, isoroce_picos now, uint32_t qp, uint32_t bytes, isoroce_picos departure,
                 uint32_t next_bytes, int next_ends_message);
  int (*next_deadline)(void* p, isoroce_picos* at); /* optional: NULL is "as soon as the link is free" */
  int (*set_rate)(void* p, isoroce_picos now, uint32_t qp, uint64_t bps);                /* optional */
  int (*set_class)(void* p, isoroce_picos now, uint32_t qp, uint32_t cls, uint32_t app,
                   uint32_t weight);                                                      /* optional */
  int (*completion)(void* p, isoroce_picos now, uint32_t qp, uint64_t bytes);            /* optional */
  int (*reference_latency)(void* p, isoroce_picos now, isoroce_picos latency);           /* optional */
  const char* (*last_error)(void* p); /* optional: why the last call failed */
};

/* What a plugin exports. */
typedef const struct isoroce_policy_ops* (*isoroce_policy_entry_fn)(void);

#ifdef __cplusplus
}  /* extern "C" */

#include <algorithm>
#include <exception>
#include <optional>
#include <string>

namespace isoroce::policy {

using Picos = isoroce_picos;
inline constexpr Picos kNever = ISOROCE_NEVER;

enum class FlowClass : std::uint32_t {
  kLatency = ISOROCE_CLASS_LATENCY,
  kThroughput = ISOROCE_CLASS_THROUGHPUT,
  kBandwidth = ISOROCE_CLASS_BANDWIDTH,
  kReference = ISOROCE_CLASS_REFERENCE,
};

using Config = isoroce_policy_config;

struct Slot {
  Picos now;
  Picos link_free;
  Picos horizon;
  // The earliest departure possible: the link is free and it is "now".
  Picos earliest() const { return std::max(now, link_free); }
};

struct Choice {
  std::uint32_t qp;
  std::uint32_t bytes;      // the QP's ready packet
  Picos departure;          // in [slot.earliest(), slot.horizon]
};

// Derive from Policy, give it a constructor from `const Config&`, and export it
// with ISOROCE_POLICY_EXPORT. Throwing from any of these disables the policy.
class Policy {
 public:
  virtual ~Policy() = default;
  virtual void activate(Picos now, std::uint32_t qp, std::uint32_t bytes, bool ends_message) = 0;
  virtual void deactivate(Picos now, std::uint32_t qp) = 0;
  // The packet that departs next; nullopt if none departs by slot.horizon.
  virtual std::optional<Choice> pick(const Slot& slot) = 0;
  // `qp`'s packet left at `departure`; its following packet is next_bytes (0: none,
  // the QP is idle until activated again).
  virtual void granted(Picos now, std::uint32_t qp, std::uint32_t bytes, Picos departure,
                       std::uint32_t next_bytes, bool next_ends_message) = 0;
  // When pick may next return something (when it returned nullopt): kNever if only
  // an activation can change that.
  virtual Picos next_deadline() const { return 0; }
  virtual void set_rate(Picos /*now*/, std::uint32_t /*qp*/, std::uint64_t /*bps*/) {}
  virtual void set_class(Picos /*now*/, std::uint32_t /*qp*/, FlowClass /*cls*/, std::uint32_t /*app*/,
                         std::uint32_t /*weight*/) {}
  virtual void completion(Picos /*now*/, std::uint32_t /*qp*/, std::uint64_t /*bytes*/) {}
  virtual void reference_latency(Picos /*now*/, Picos /*latency*/) {}
};

namespace detail {

// One instance behind the C table: the policy and the message of its last failure.
template <class P>
struct Holder {
  explicit Holder(const Config& c) : policy(c) {}
  P policy;
  std::string error;
};

// Runs f() on the policy; an exception becomes -1 and its message last_error's.
template <class P, class F>
int guard(void* h, F&& f) {
  auto* holder = static_cast<Holder<P>*>(h);
  try {
    return f(holder->policy);
  } catch (const std::exception& e) {
    holder->error = e.what();
  } catch (...) {
    holder->error = "an exception that is not a std::exception";
  }
  return -1;
}

template <class P>
isoroce_policy_ops make_ops(const char* name, const char* description, std::uint32_t version, std::uint32_t flags) {
  isoroce_policy_ops o{};
  o.abi_version = ISOROCE_POLICY_ABI_VERSION;
  o.size = sizeof(isoroce_policy_ops);
  o.name = name;
  o.description = description;
  o.version = version;
  o.flags = flags;
  o.create = [](const isoroce_policy_config* c) -> void* {
    try {
      return new Holder<P>(*c);
    } catch (...) {
      return nullptr;
    }
  };
  o.destroy = [](void* h) {
    try {
      delete static_cast<Holder<P>*>(h);
    } catch (...) {
    }
  };
  o.activate = [](void* h, Picos now, std::uint32_t qp, std::uint32_t bytes, int ends) {
    return guard<P>(h, [&](P& p) { return p.activate(now, qp, bytes, ends != 0), 0; });
  };
  o.deactivate = [](void* h, Picos now, std::uint32_t qp) {
    return guard<P>(h, [&](P& p) { return p.deactivate(now, qp), 0; });
  };
  o.pick = [](void* h, isoroce_policy_slot* s) {
    return guard<P>(h, [&](P& p) {
      const std::optional<Choice> c = p.pick(Slot{s->now, s->link_free, s->horizon});
      if (!c) return 0;
      s->qp = c->qp;
      s->bytes = c->bytes;
      s->departure = c->departure;
      return 1;
    });
  };
  o.granted = [](void* h, Picos now, std::uint32_t qp, std::uint32_t bytes, Picos departure, std::uint32_t next,
                 int next_ends) {
    return guard<P>(h, [&](P& p) { return p.granted(now, qp, bytes, departure, next, next_ends != 0), 0; });
  };
  o.next_deadline = [](void* h, Picos* at) {
    return guard<P>(h, [&](P& p) { return *at = p.next_deadline(), 0; });
  };
  o.set_rate = [](void* h, Picos now, std::uint32_t qp, std::uint64_t bps) {
    return guard<P>(h, [&](P& p) { return p.set_rate(now, qp, bps), 0; });
  };
  o.set_class = [](void* h, Picos now, std::uint32_t qp, std::uint32_t cls, std::uint32_t app, std::uint32_t w) {
    return guard<P>(h, [&](P& p) { return p.set_class(now, qp, static_cast<FlowClass>(cls), app, w), 0; });
  };
  o.completion = [](void* h, Picos now, std::uint32_t qp, std::uint64_t bytes) {
    return guard<P>(h, [&](P& p) { return p.completion(now, qp, bytes), 0; });
  };
  o.reference_latency = [](void* h, Picos now, Picos latency) {
    return guard<P>(h, [&](P& p) { return p.reference_latency(now, latency), 0; });
  };
  o.last_error = [](void* h) -> const char* { return static_cast<Holder<P>*>(h)->error.c_str(); };
  return o;
}

}  // namespace detail
}  // namespace isoroce::policy

// Defines the plugin's entry point for class `Class` (derived from
// isoroce::policy::Policy, constructible from const isoroce::policy::Config&).
#define ISOROCE_POLICY_EXPORT(Class, name, description, version, flags)                              \
  extern "C" __attribute__((visibility("default"))) const isoroce_policy_ops* isoroce_policy_entry() { \
    static const isoroce_policy_ops ops =                                                            \
        ::isoroce::policy::detail::make_ops<Class>(name, description, version, flags);               \
    return &ops;                                                                                     \
  }

#endif /* __cplusplus */

#endif /* ISOROCE_SCHED_POLICY_API_H_ */
