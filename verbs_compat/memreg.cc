// Over the project's ~600 lines, and prepare() over 80: the three ways a
// registration reaches the daemon (remapped private pages, the client's own
// shared files, pages made private again at dereg and fork) share one table of
// held ranges and its lock, and prepare() walks a range's mappings once,
// choosing per mapping; split, each part would need that table's internals.
#include "verbs_compat/memreg.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "verbs_compat/internal.h"
#include "ctrl/protocol_limits.h"

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
  uintptr_t vma_start = 0, vma_end = 0;  // before clipping (/proc/self/map_files names)
  char perms[5] = {};
  uint64_t offset = 0;  // of start in the file
  dev_t dev = 0;
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
    unsigned major = 0, minor = 0;
    char perms[8];
    int pos = 0;
    if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &major, &minor, &ino, &pos) < 7)
      continue;
    v.start = v.vma_start = start, v.end = v.vma_end = end, v.offset = off, v.ino = static_cast<ino_t>(ino);
    v.dev = makedev(major, minor);
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
  const Segment* seg;  // forward: the segment the parts go onto
  const Part* parts;
  size_t count;
  bool back = false;  // back to private anonymous memory (the bytes kept)
  int err = 0;
  size_t failed_part = 0;
};

// The pages of p as private anonymous memory with the same bytes: a copy
// moved over them (mremap replaces the old mapping in one step).
int unremap_part(const Part& p) {
  const size_t len = p.end - p.start;
  void* tmp = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return errno;
  std::memcpy(tmp, reinterpret_cast<const void*>(p.start), len);
  if (p.prot != (PROT_READ | PROT_WRITE)) mprotect(tmp, len, p.prot);
  if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(p.start)) == MAP_FAILED) {
    const int err = errno;
    munmap(tmp, len);
    return err;
  }
  return 0;
}

// Runs in a child that shares our address space while we are suspended in
// the kernel (CLONE_VFORK): nothing writes the pages between their copy and
// the mmap over them, not even our own stack frames when the application
// registers memory on its stack.
int remap_child(void* arg) {
  auto* job = static_cast<Job*>(arg);
  for (size_t i = 0; i < job->count; ++i) {
    const Part& p = job->parts[i];
    if (job->back) {
      if ((job->err = unremap_part(p)) != 0) {
        job->failed_part = i;
        return 0;
      }
      continue;
    }
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

// Runs the job in the child; its error (0), *failed_part set. No allocation:
// also used in the child of fork() (privatize_after_fork).
int run_job(Job& job) {
  constexpr size_t kStack = 256 * 1024;
  void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return errno;
  // Exit signal 0: no SIGCHLD for the application; reaped with __WCLONE.
  pid_t pid = clone(remap_child, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK, &job);
  int rc = 0;
  if (pid < 0) {
    rc = errno;
  } else {
    while (waitpid(pid, nullptr, __WCLONE) < 0 && errno == EINTR) {
    }
    rc = job.err;
  }
  munmap(stack, kStack);
  return rc;
}

int run_remap(const Segment& seg, const std::vector<Part>& parts) {
  Job job{&seg, parts.data(), parts.size()};
  const int rc = run_job(job);
  if (rc && job.err)
    log("reg_mr: remapping [%#" PRIxPTR ", %#" PRIxPTR ") onto a memfd failed: %s", parts[job.failed_part].start,
        parts[job.failed_part].end, std::strerror(rc));
  return rc;
}

// ---- holds: which remapped pages registrations still use --------------------
//
// Pages stay on a segment while an MR over them lives; when the last one is
// deregistered they go back to private memory (and the memfd's pages are
// freed). Otherwise they would stay MAP_SHARED forever, and after fork() a
// child would share them with its parent: its malloc and its stack frames
// would write the parent's heap and stack.
struct Hold {
  uintptr_t end;
  uint32_t count;
};
std::map<uintptr_t, Hold>& holds() {  // disjoint [start, end) with count > 0
  static auto* m = new std::map<uintptr_t, Hold>;
  return *m;
}

void split_hold(uintptr_t x) {
  auto& h = holds();
  auto it = h.upper_bound(x);
  if (it == h.begin()) return;
  --it;
  if (it->first < x && x < it->second.end) {
    const Hold right{it->second.end, it->second.count};
    it->second.end = x;
    h.emplace(x, right);
  }
}

void hold(uintptr_t s, uintptr_t e) {
  split_hold(s);
  split_hold(e);
  auto& h = holds();
  auto it = h.lower_bound(s);
  for (uintptr_t at = s; at < e;) {
    if (it != h.end() && it->first == at) {
      ++it->second.count;
      at = it->second.end;
      ++it;
    } else {
      const uintptr_t gap_end = it != h.end() && it->first < e ? it->first : e;
      h.emplace_hint(it, at, Hold{gap_end, 1});
      at = gap_end;
    }
  }
}

// Drops one hold of [s, e); appends the ranges nobody holds any more.
void unhold(uintptr_t s, uintptr_t e, std::vector<Part>* freed) {
  split_hold(s);
  split_hold(e);
  auto& h = holds();
  for (auto it = h.lower_bound(s); it != h.end() && it->first < e;) {
    if (--it->second.count > 0) {
      ++it;
      continue;
    }
    if (!freed->empty() && freed->back().end == it->first)
      freed->back().end = it->second.end;
    else
      freed->push_back({it->first, it->second.end, 0});
    it = h.erase(it);
  }
}

Segment* segment_by_ino(ino_t ino) {
  for (auto& [base, s] : segments())
    if (s.ino == ino) return &s;
  return nullptr;
}

// The VMAs covering [s, e), clipped to it; EFAULT (logged) at a hole.
int cover_range(uintptr_t s, uintptr_t e, const void* addr, size_t length, std::vector<Vma>* cover) {
  uintptr_t at = s;
  for (const Vma& v : read_maps()) {
    if (v.end <= at || v.start >= e) continue;
    if (v.start > at) break;
    Vma c = v;
    c.offset += at - v.start;
    c.start = at;
    c.end = std::min(v.end, e);
    cover->push_back(c);
    at = c.end;
    if (at >= e) break;
  }
  if (at < e) {
    log("reg_mr: [%p, +%zu) is not all mapped memory", addr, length);
    return EFAULT;
  }
  return 0;
}

// The segment these pages are on: a MAP_SHARED mapping of one of our memfds
// at its window's offsets (a MAP_PRIVATE one is private memory: pages given
// back by release_mr_pages).
Segment* shared_segment_of(const Vma& v) {
  if (v.perms[3] != 's' || !is_ours(v)) return nullptr;
  Segment* seg = segment_by_ino(v.ino);
  return seg != nullptr && seg->base == v.start - v.offset ? seg : nullptr;
}

bool on_segment(const Vma& v, const Segment& seg) { return shared_segment_of(v) == &seg; }

// A shared mapping the daemon maps from its file; private memory goes onto a segment.
bool is_shared_file(const Vma& v) { return v.perms[3] == 's' && shared_segment_of(v) == nullptr; }

// The file behind a shared mapping, opened for the daemon: through
// /proc/self/map_files (any file, even deleted ones and memfds; needs
// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else by its path if that still
// names the same file. -errno (logged) if neither works.
int open_mapping_file(const Vma& v, bool writable) {
  const int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR, v.vma_start, v.vma_end);
  int fd = open(link, flags);
  if (fd >= 0) return fd;
  const int link_err = errno;
  const bool has_path = !v.path.empty() && v.path[0] == '/' &&
                        !(v.path.size() > 10 && v.path.compare(v.path.size() - 10, 10, " (deleted)") == 0);
  int path_err = 0;
  if (has_path) {
    fd = open(v.path.c_str(), flags);
    if (fd >= 0) {
      struct stat st{};
      if (fstat(fd, &st) == 0 && st.st_ino == v.ino && st.st_dev == v.dev) return fd;
      close(fd);
      path_err = ESTALE;  // another file has that name now
    } else {
      path_err = errno;
    }
  }
  log("reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") is a shared mapping of %s: the daemon needs the file, but %s: %s%s%s%s",
      v.start, v.end, v.path.empty() ? "anonymous memory" : v.path.c_str(), link, std::strerror(link_err),
      link_err == EPERM || link_err == EACCES ? " (needs root: CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE)" : "",
      has_path ? ", and by its path: " : ", and it has no path to open",
      has_path ? (path_err == ESTALE ? "another file has that name now" : std::strerror(path_err)) : "");
  return -(has_path && path_err != ESTALE ? path_err : link_err);
}

using protocol::kMaxPieces;  // what the daemon takes (ctrl/protocol_limits.h)
// The daemon's writable-access bits, and memory-window binds (kept writable here too).
constexpr unsigned kWriteAccess = protocol::kMrWriteAccess | IBV_ACCESS_MW_BIND;

int prepare(void* addr, size_t length, unsigned access, bool files, MrMemory* out) {
  if (addr == nullptr || length == 0) return EINVAL;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (a + length < a) return EINVAL;
  const uintptr_t s = a & ~(page - 1);
  const uintptr_t e = (a + length + page - 1) & ~(page - 1);
  const bool writable = (access & kWriteAccess) != 0;

  std::lock_guard lock(g_mu);
  std::vector<Vma> cover;
  if (int rc = cover_range(s, e, addr, length, &cover)) return rc;

  // Shared mappings: checked and their files opened first, so a refusal
  // leaves the application's memory as it was.
  struct FileRef {
    dev_t dev;
    ino_t ino;
    size_t fd_index;
  };
  std::vector<FileRef> files_open;
  std::vector<size_t> piece_fd(cover.size(), SIZE_MAX);  // per VMA: its file's index in out->fds
  uintptr_t first_private = 0;
  bool any_private = false;
  for (size_t i = 0; i < cover.size(); ++i) {
    const Vma& v = cover[i];
    if (!is_shared_file(v)) {
      if (!any_private) first_private = v.start;
      any_private = true;
      continue;
    }
    if (!files) {
      log("reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") is a shared mapping (%s); this path takes private memory only",
          v.start, v.end, v.path.empty() ? "anonymous" : v.path.c_str());
      return EINVAL;
    }
    if (v.perms[0] != 'r') {
      log("reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") is not readable", v.start, v.end);
      return EFAULT;
    }
    if (writable && v.perms[1] != 'w') {
      // As the kernel: pinning read-only memory for write access is EFAULT.
      log("reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") is a read-only shared mapping (%s), but the access flags %#x "
          "allow writes to it",
          v.start, v.end, v.path.empty() ? "anonymous" : v.path.c_str(), access & kWriteAccess);
      return EFAULT;
    }
    auto known = std::find_if(files_open.begin(), files_open.end(),
                              [&](const FileRef& f) { return f.dev == v.dev && f.ino == v.ino; });
    if (known != files_open.end()) {
      piece_fd[i] = known->fd_index;
      continue;
    }
    const int fd = open_mapping_file(v, writable);
    if (fd < 0) return -fd;
    out->fds.push_back(fd);
    out->owned.push_back(true);
    struct stat st{};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      // Device memory (VM_IO/VM_PFNMAP): the kernel's EFAULT too.
      log("reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") is a shared mapping of %s, not of a file", v.start, v.end,
          v.path.c_str());
      return EFAULT;
    }
    files_open.push_back({v.dev, v.ino, out->fds.size() - 1});
    piece_fd[i] = out->fds.size() - 1;
  }

  // Private memory: onto a segment, the one these pages are already on, else the window's.
  Segment* seg = nullptr;
  for (const Vma& v : cover) {
    Segment* sv = shared_segment_of(v);
    if (sv == nullptr) continue;
    if (seg != nullptr && seg != sv) {
      log("reg_mr: [%p, +%zu) spans pages remapped for two earlier registrations in different windows; "
          "not supported yet",
          addr, length);
      return EINVAL;
    }
    seg = sv;
  }
  if (any_private && seg != nullptr && seg->base > first_private) {
    log("reg_mr: [%p, +%zu) starts before the memfd window of an earlier registration it overlaps; not supported yet",
        addr, length);
    return EINVAL;
  }
  if (any_private && seg == nullptr) {
    const uintptr_t base = first_private & ~(kWindow - 1);
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
  // The private pages not on the segment yet.
  std::vector<Part> parts;
  uintptr_t seg_end = 0;
  for (const Vma& v : cover) {
    if (is_shared_file(v)) continue;
    seg_end = v.end;
    if (on_segment(v, *seg)) continue;
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
  if (seg != nullptr) {
    const uint64_t need = seg_end - seg->base;
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
    out->fds.push_back(seg->fd);
    out->owned.push_back(false);
    // This registration holds its private pages on the segment.
    auto& ranges = out->pages.ranges;
    for (size_t i = 0; i < cover.size(); ++i) {
      if (piece_fd[i] != SIZE_MAX) continue;
      if (!ranges.empty() && ranges.back().second == cover[i].start)
        ranges.back().second = cover[i].end;
      else
        ranges.emplace_back(cover[i].start, cover[i].end);
    }
    for (const auto& [rs, re] : ranges) hold(rs, re);
  }

  // The pieces, in address order; runs of one file at consecutive offsets merge.
  json pieces = json::array();
  size_t last_fd = SIZE_MAX;
  uint64_t last_end = 0;
  for (size_t i = 0; i < cover.size(); ++i) {
    const Vma& v = cover[i];
    const bool file = piece_fd[i] != SIZE_MAX;
    const size_t fd_index = file ? piece_fd[i] : out->fds.size() - 1;
    const uint64_t off = file ? v.offset : v.start - seg->base;
    const uint64_t len = v.end - v.start;
    if (!pieces.empty() && fd_index == last_fd && off == last_end) {
      pieces.back()["length"] = pieces.back()["length"].get<uint64_t>() + len;
    } else {
      pieces.push_back({{"fd", fd_index}, {"offset", off}, {"length", len}, {"kind", file ? "file" : "memfd"}});
    }
    last_fd = fd_index;
    last_end = off + len;
  }
  if (pieces.size() > kMaxPieces) {
    log("reg_mr: [%p, +%zu) spans %zu runs of different mappings; the daemon takes at most %zu", addr, length,
        pieces.size(), kMaxPieces);
    return EINVAL;
  }
  if (!files_open.empty())
    debug("reg_mr: [%p, +%zu): %zu piece(s), %zu shared file(s) mapped by the daemon as they are", addr, length,
          pieces.size(), files_open.size());
  out->fields = {{"offset", a - s}, {"pieces", std::move(pieces)}};
  return 0;
}

// ---- fork ---------------------------------------------------------------------
//
// In the child of fork(), pages still on a segment (registrations the parent
// holds) are MAP_SHARED: the child would share them with its parent. It gets
// private copies instead, as fork() gives of any private memory and the kernel
// gives of pinned pages. Until that is done nothing may allocate (the heap
// may be on a segment), so /proc/self/maps is read raw into static buffers.
// Not covered: the stack frames fork() itself writes in the child before its
// handlers run; do not fork while memory on the forking thread's stack is
// registered.

// The readable segment VMAs, at most max of them.
size_t scan_segment_vmas(Part* out, size_t max) {
  static char buf[1 << 16];
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const std::string_view prefix = "/memfd:isoroce-mr";
  size_t n = 0, have = 0;
  for (;;) {
    const ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += static_cast<size_t>(r);
    char* line = buf;
    for (char* nl; (nl = static_cast<char*>(std::memchr(line, '\n', static_cast<size_t>(buf + have - line))));
         line = nl + 1) {
      *nl = 0;
      char* p = line;
      const uintptr_t start = std::strtoull(p, &p, 16);
      const uintptr_t end = *p == '-' ? std::strtoull(p + 1, &p, 16) : 0;
      while (*p == ' ') ++p;
      const char* perms = p;
      if (std::strlen(perms) < 4) continue;
      p += 4;
      const uint64_t offset = std::strtoull(p, &p, 16);
      while (*p == ' ') ++p;
      while (*p && *p != ' ') ++p;  // device
      const ino_t ino = static_cast<ino_t>(std::strtoull(p, &p, 10));
      while (*p == ' ') ++p;
      if (std::string_view(p).substr(0, prefix.size()) != prefix || perms[0] != 'r' || perms[3] != 's' || n == max)
        continue;
      const Segment* seg = segment_by_ino(ino);
      if (seg == nullptr || seg->base != start - offset) continue;
      int prot = PROT_READ;
      if (perms[1] == 'w') prot |= PROT_WRITE;
      if (perms[2] == 'x') prot |= PROT_EXEC;
      out[n++] = {start, end, prot};
    }
    have = static_cast<size_t>(buf + have - line);
    std::memmove(buf, line, have);
    if (have == sizeof buf - 1) have = 0;  // a line longer than the buffer: not ours
  }
  close(fd);
  return n;
}

void before_fork() { g_mu.lock(); }
void after_fork_parent() { g_mu.unlock(); }
void after_fork_child() {
  static Part found[512];
  for (int round = 0; round < 64; ++round) {
    const size_t n = scan_segment_vmas(found, std::size(found));
    if (n == 0) break;
    Job job{nullptr, found, n, true};
    if (run_job(job) != 0 && job.failed_part == 0) break;  // no progress
  }
  // The parent's segments and holds are not the child's.
  for (auto& [base, seg] : segments()) close(seg.fd);
  segments().clear();
  holds().clear();
  g_mu.unlock();
}
[[maybe_unused]] const int g_atfork = pthread_atfork(before_fork, after_fork_parent, after_fork_child);

}  // namespace

MrMemory::~MrMemory() {
  for (size_t i = 0; i < fds.size(); ++i)
    if (i < owned.size() && owned[i]) close(fds[i]);
  release_mr_pages(pages);
}

void release_mr_pages(MrPages& pages) {
  if (pages.ranges.empty()) return;
  std::lock_guard lock(g_mu);
  std::vector<Part> freed;
  for (const auto& [s, e] : pages.ranges) unhold(s, e, &freed);
  pages.ranges.clear();
  if (freed.empty()) return;
  // What of that is still on a segment (the application may have unmapped or
  // replaced memory since) becomes a private mapping of the same memfd pages:
  // the same bytes, in one mmap, so a write from another thread lands either
  // in the file before it or in the private copy after it, never nowhere (a
  // copy would lose it). fork() copies them again; the memfd keeps the pages.
  size_t done = 0;
  for (const Vma& v : read_maps()) {
    const Segment* seg = shared_segment_of(v);
    if (seg == nullptr) continue;
    int prot = 0;
    if (v.perms[0] == 'r') prot |= PROT_READ;
    if (v.perms[1] == 'w') prot |= PROT_WRITE;
    if (v.perms[2] == 'x') prot |= PROT_EXEC;
    for (const Part& f : freed) {
      const uintptr_t s = std::max(v.start, f.start), e = std::min(v.end, f.end);
      if (s >= e) continue;
      if (mmap(reinterpret_cast<void*>(s), e - s, prot, MAP_PRIVATE | MAP_FIXED, seg->fd,
               static_cast<off_t>(s - seg->base)) == MAP_FAILED)
        log("dereg_mr: making [%#" PRIxPTR ", %#" PRIxPTR ") private again failed: %s; it stays shared", s, e,
            std::strerror(errno));
      else
        ++done;
    }
  }
  debug("dereg_mr: %zu range(s) private again", done);
}

int prepare_mr_memory(void* addr, size_t length, unsigned access, MrMemory* out) {
  return prepare(addr, length, access, true, out);
}

int remap_for_mr(void* addr, size_t length, Remapped* out) {
  MrMemory m;
  if (int rc = prepare(addr, length, 0, false, &m)) return rc;
  m.pages.ranges.clear();  // held for good
  const json& p = m.fields["pieces"];
  if (m.fds.size() != 1 || p.size() != 1) return EINVAL;  // private memory is on one segment
  out->fd = m.fds[0];
  out->offset = p[0]["offset"].get<uint64_t>() + m.fields["offset"].get<uint64_t>();
  return 0;
}

}  // namespace isoroce::vc
