#include "verbs_compat/memreg.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "verbs_compat/internal.h"

namespace isoroce::vc {
namespace {

constexpr const char* kMemfdName = "isoroce-mr";
// A segment's file offset 0 is the start of a 1 GiB-aligned window of the
// address space, so later registrations anywhere after it in the window (in
// front of or behind earlier ones) land on the same file; tmpfs files are sparse.
constexpr uintptr_t kWindow = uintptr_t{1} << 30;

struct Segment {
  int fd = -1;
  uintptr_t base = 0;  // address of file offset 0
  uint64_t size = 0;
  ino_t ino = 0;
};

struct Vma {
  uintptr_t start = 0, end = 0;
  char perms[5] = {};
  uint64_t offset = 0;
  ino_t ino = 0;
  std::string path;
};

std::mutex g_mu;
std::map<uintptr_t, Segment>& segments() {  // by base
  static auto* m = new std::map<uintptr_t, Segment>;
  return *m;
}

std::vector<Vma> read_maps() {
  std::vector<Vma> out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    Vma v;
    unsigned long long start, end, off, ino;
    char perms[8], dev[32];
    int pos = 0;
    if (std::sscanf(line, "%llx-%llx %7s %llx %31s %llu %n", &start, &end, perms, &off, dev, &ino, &pos) < 6) continue;
    v.start = start, v.end = end, v.offset = off, v.ino = static_cast<ino_t>(ino);
    std::memcpy(v.perms, perms, 4);
    std::string path = pos > 0 ? std::string(line + pos) : std::string();
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    v.path = path;
    out.push_back(std::move(v));
  }
  std::fclose(f);
  return out;
}

bool is_ours(const Vma& v) { return v.path.rfind(std::string("/memfd:") + kMemfdName, 0) == 0; }

struct Part {
  uintptr_t start, end;
  int prot;
};

struct Job {
  const Segment* seg;
  const std::vector<Part>* parts;
  int err = 0;
  size_t failed_part = 0;
};

// Runs in a child that shares our address space while we are suspended in
// the kernel (CLONE_VFORK): nothing writes the pages between their copy and
// the mmap over them, not even our own stack frames when the application
// registers memory on its stack.
int remap_child(void* arg) {
  auto* job = static_cast<Job*>(arg);
  for (size_t i = 0; i < job->parts->size(); ++i) {
    const Part& p = (*job->parts)[i];
    const uint64_t off = p.start - job->seg->base;
    size_t done = 0;
    const size_t len = p.end - p.start;
    while (done < len) {
      ssize_t n = pwrite(job->seg->fd, reinterpret_cast<const void*>(p.start + done), len - done,
                         static_cast<off_t>(off + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        job->err = n < 0 ? errno : EIO;
        job->failed_part = i;
        return 0;
      }
      done += static_cast<size_t>(n);
    }
    void* m = mmap(reinterpret_cast<void*>(p.start), len, p.prot, MAP_SHARED | MAP_FIXED, job->seg->fd,
                   static_cast<off_t>(off));
    if (m == MAP_FAILED) {
      job->err = errno;
      job->failed_part = i;
      return 0;
    }
  }
  return 0;
}

int run_remap(const Segment& seg, const std::vector<Part>& parts) {
  constexpr size_t kStack = 256 * 1024;
  void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return errno;
  Job job{&seg, &parts};
  // Exit signal 0: no SIGCHLD for the application; reaped with __WCLONE.
  pid_t pid = clone(remap_child, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK, &job);
  int rc = 0;
  if (pid < 0) {
    rc = errno;
  } else {
    while (waitpid(pid, nullptr, __WCLONE) < 0 && errno == EINTR) {
    }
    rc = job.err;
    if (rc)
      log("reg_mr: remapping [%#" PRIxPTR ", %#" PRIxPTR ") onto a memfd failed: %s", parts[job.failed_part].start,
          parts[job.failed_part].end, std::strerror(rc));
  }
  munmap(stack, kStack);
  return rc;
}

Segment* segment_by_ino(ino_t ino) {
  for (auto& [base, s] : segments())
    if (s.ino == ino) return &s;
  return nullptr;
}

}  // namespace

int remap_for_mr(void* addr, size_t length, Remapped* out) {
  if (addr == nullptr || length == 0) return EINVAL;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (a + length < a) return EINVAL;
  const uintptr_t s = a & ~(page - 1);
  const uintptr_t e = (a + length + page - 1) & ~(page - 1);

  std::lock_guard lock(g_mu);
  const std::vector<Vma> maps = read_maps();
  // The VMAs covering [s, e), clipped; no holes.
  std::vector<Vma> cover;
  uintptr_t at = s;
  for (const Vma& v : maps) {
    if (v.end <= at || v.start >= e) continue;
    if (v.start > at) break;
    Vma c = v;
    c.offset += at - v.start;
    c.start = at;
    c.end = std::min(v.end, e);
    cover.push_back(c);
    at = c.end;
    if (at >= e) break;
  }
  if (at < e) {
    log("reg_mr: [%p, +%zu) is not all mapped memory", addr, length);
    return EFAULT;
  }
  // Which segment: the one these pages are already on, else the window's.
  Segment* seg = nullptr;
  for (const Vma& v : cover) {
    if (!is_ours(v)) continue;
    Segment* sv = segment_by_ino(v.ino);
    if (sv == nullptr || sv->base != v.start - v.offset) continue;  // not (or no longer) a segment of ours
    if (seg != nullptr && seg != sv) {
      log("reg_mr: [%p, +%zu) spans pages remapped for two earlier registrations in different windows; "
          "not supported yet",
          addr, length);
      return EINVAL;
    }
    seg = sv;
  }
  if (seg != nullptr && seg->base > s) {
    log("reg_mr: [%p, +%zu) starts before the memfd window of an earlier registration it overlaps; not supported yet",
        addr, length);
    return EINVAL;
  }
  if (seg == nullptr) {
    const uintptr_t base = s & ~(kWindow - 1);
    auto it = segments().find(base);
    if (it == segments().end()) {
      Segment n;
      n.fd = memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (n.fd < 0) {
        const int err = errno;
        log("reg_mr: memfd_create: %s", std::strerror(err));
        return err;
      }
      struct stat st{};
      fstat(n.fd, &st);
      n.base = base;
      n.ino = st.st_ino;
      it = segments().emplace(base, n).first;
    }
    seg = &it->second;
  }
  // The pages not on the segment yet.
  std::vector<Part> parts;
  for (const Vma& v : cover) {
    if (is_ours(v) && v.ino == seg->ino && v.start - v.offset == seg->base) continue;
    if (v.perms[3] == 's') {
      log("reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") is a shared mapping (%s); registering shared file mappings is "
          "not supported yet",
          v.start, v.end, v.path.empty() ? "anonymous" : v.path.c_str());
      return EINVAL;
    }
    if (v.perms[0] != 'r') {
      log("reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") is not readable", v.start, v.end);
      return EFAULT;
    }
    int prot = PROT_READ;
    if (v.perms[1] == 'w') prot |= PROT_WRITE;
    if (v.perms[2] == 'x') prot |= PROT_EXEC;
    if (!parts.empty() && parts.back().end == v.start && parts.back().prot == prot)
      parts.back().end = v.end;
    else
      parts.push_back({v.start, v.end, prot});
  }
  const uint64_t need = e - seg->base;
  if (need > seg->size) {
    if (ftruncate(seg->fd, static_cast<off_t>(need)) != 0) {
      const int err = errno;
      log("reg_mr: growing the memfd to %" PRIu64 " bytes: %s", need, std::strerror(err));
      return err;
    }
    seg->size = need;
  }
  if (!parts.empty()) {
    if (int rc = run_remap(*seg, parts)) return rc;
    debug("reg_mr: remapped %zu range(s) of [%p, +%zu) onto memfd window %#" PRIxPTR, parts.size(), addr, length,
          seg->base);
  }
  out->fd = seg->fd;
  out->offset = a - seg->base;
  return 0;
}

}  // namespace isoroce::vc
