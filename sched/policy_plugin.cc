#include "sched/policy_plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

namespace isoroce::sched {
namespace {

std::mutex loaded_mu;
std::map<std::string, std::string> loaded;  // canonical path -> policy name

bool is_elf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
}

}  // namespace

PluginLoad load_policy_plugin(const std::string& path, PolicyLog log) {
  PluginLoad out;
  auto fail = [&](const std::string& why) {
    out.error = "policy plugin " + path + ": " + why;
    return out;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file");
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return fail(std::strerror(errno));
  const std::string canonical = real;
  std::free(real);
  std::lock_guard lock(loaded_mu);
  if (auto it = loaded.find(canonical); it != loaded.end()) {
    out.name = it->second;
    return out;
  }
  if (!is_elf(canonical)) return fail("not a shared object (no ELF header)");
  // RTLD_LOCAL: two plugins may use the same symbol names; RTLD_NOW: an unresolved
  // symbol is an error here, not a crash at the first call.
  void* handle = ::dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    return fail(std::string("cannot load it: ") + (e ? e : "dlopen failed"));
  }
  ::dlerror();
  void* sym = ::dlsym(handle, ISOROCE_POLICY_ENTRY_SYMBOL);
  if (sym == nullptr) {
    ::dlclose(handle);
    return fail("no " ISOROCE_POLICY_ENTRY_SYMBOL
                " symbol: not an isoroce policy plugin (ISOROCE_POLICY_EXPORT in sched/policy_api.h defines it)");
  }
  auto entry = reinterpret_cast<isoroce_policy_entry_fn>(sym);
  const isoroce_policy_ops* ops = entry();
  if (std::string e = check_policy_ops(ops); !e.empty()) {
    ::dlclose(handle);
    return fail(e);
  }
  if (!log) log = [](std::string_view m) { std::fprintf(stderr, "isoroce: %.*s\n", static_cast<int>(m.size()), m.data()); };
  if (std::string e = register_policy_ops(*ops, canonical, std::move(log)); !e.empty()) {
    ::dlclose(handle);
    return fail(e);
  }
  out.name = ops->name;
  loaded.emplace(canonical, out.name);
  return out;  // the handle stays open for the life of the process
}

}  // namespace isoroce::sched
