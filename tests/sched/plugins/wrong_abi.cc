// A plugin built for another ABI version: load_policy_plugin must refuse it.
#include "sched/policy_api.h"

extern "C" __attribute__((visibility("default"))) const isoroce_policy_ops* isoroce_policy_entry() {
  static isoroce_policy_ops ops{};
  ops.abi_version = ISOROCE_POLICY_ABI_VERSION + 1;
  ops.size = sizeof ops;
  ops.name = "from_the_future";
  return &ops;
}
