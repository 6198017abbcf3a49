// A shared object without isoroce_policy_entry: load_policy_plugin must refuse it.
extern "C" __attribute__((visibility("default"))) int some_other_entry() { return 42; }
