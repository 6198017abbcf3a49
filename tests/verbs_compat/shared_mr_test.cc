// Memory registration of shared mappings: a MAP_SHARED file (here /dev/shm
// objects) is registered as the file itself, so nothing is remapped in the
// application, its writes keep reaching the file, and RDMA reads and writes
// meet every other mapping of it (another mapping, another process, the file's
// bytes). Ranges over several mappings, read-only mappings, private file
// mappings (still copied onto the library's memfd), a file truncated while
// registered, and registering without the capability /proc/self/map_files needs.
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tests/verbs_compat/verbs_fixture.h"

#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

namespace isoroce::test {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A file in /dev/shm (tmpfs), removed at the end.
struct ShmFile {
  std::string path;
  int fd = -1;
  explicit ShmFile(size_t size) {
    static int n = 0;
    path = "/dev/shm/isoroce-test-" + std::to_string(getpid()) + "-" + std::to_string(++n);
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0) << path << ": " << std::strerror(errno);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  }
  ~ShmFile() {
    if (fd >= 0) close(fd);
    unlink(path.c_str());
  }
  uint8_t* map(size_t len, int prot, int flags, off_t off = 0, void* at = nullptr, int use_fd = -1) const {
    void* p = mmap(at, len, prot, flags | (at ? MAP_FIXED : 0), use_fd >= 0 ? use_fd : fd, off);
    EXPECT_NE(p, MAP_FAILED) << std::strerror(errno);
    return static_cast<uint8_t*>(p);
  }
  std::vector<uint8_t> read(size_t off, size_t len) const {
    std::vector<uint8_t> out(len);
    EXPECT_EQ(pread(fd, out.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
    return out;
  }
};

// What backs addr in /proc/self/maps ("" for anonymous memory).
std::string backing_of(const void* addr) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (std::string line; std::getline(maps, line);) {
    unsigned long long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &start, &end) != 2 || a < start || a >= end) continue;
    std::istringstream in(line);
    std::string range, perms, off, dev, ino, path;
    in >> range >> perms >> off >> dev >> ino;
    std::getline(in >> std::ws, path);
    return path;
  }
  return "?";
}

// Whether addr's mapping is MAP_SHARED ('s' in /proc/self/maps).
bool is_shared(const void* addr) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (std::string line; std::getline(maps, line);) {
    unsigned long long start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &start, &end, perms) == 3 && a >= start && a < end)
      return perms[3] == 's';
  }
  return false;
}

std::vector<uint8_t> pattern(size_t len, uint32_t seed) {
  std::vector<uint8_t> v(len);
  for (size_t i = 0; i < len; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 17 + (i >> 8)) ^ seed);
  return v;
}

class SharedMr : public VerbsTest {
 protected:
  // a registered private buffer on side a, as source or destination.
  struct Local {
    std::vector<uint8_t> buf;
    ibv_mr* mr = nullptr;
  };
  static void local(VerbsDev& d, Local& l, size_t len) {
    l.buf.assign(len, 0);
    l.mr = ibv_reg_mr(d.pd, l.buf.data(), len, kAllAccess);
    ASSERT_NE(l.mr, nullptr);
    d.mrs.push_back(l.mr);
  }
};

TEST_F(SharedMr, SharedFileMappingIsRegisteredInPlace) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  const size_t len = 4 * kPage;
  ShmFile f(len);
  uint8_t* view = f.map(len, PROT_READ | PROT_WRITE, MAP_SHARED);  // registered
  uint8_t* other = f.map(len, PROT_READ | PROT_WRITE, MAP_SHARED);  // the application's second view
  std::memset(view, 0x11, len);
  ibv_mr* mr = ibv_reg_mr(b.pd, view + 100, 3 * kPage, kAllAccess);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  b.mrs.push_back(mr);
  // Nothing was remapped: the range is still the file, and the
  // application's writes keep reaching the file and its other mappings.
  EXPECT_EQ(backing_of(view + 100), f.path);
  EXPECT_EQ(backing_of(view + 3 * kPage), f.path);
  EXPECT_EQ(other[5000], 0x11) << "the bytes from before the registration are there";
  view[200] = 0x5a;
  EXPECT_EQ(other[200], 0x5a);
  EXPECT_EQ(f.read(200, 1)[0], 0x5a);

  // Expect: an RDMA WRITE into the range shows in the other mapping and in the file.
  Local src, dst;
  ASSERT_NO_FATAL_FAILURE(local(a, src, 5000));
  ASSERT_NO_FATAL_FAILURE(local(a, dst, 5000));
  const auto bytes = pattern(5000, 1);
  std::memcpy(src.buf.data(), bytes.data(), bytes.size());
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.buf.data(), 5000, src.mr->lkey, reinterpret_cast<uintptr_t>(view + 300),
                 mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(other + 300, bytes.data(), bytes.size()), 0);
  EXPECT_EQ(f.read(300, 5000), bytes);

  // Expect: an RDMA READ sees bytes written through the other mapping ...
  const auto mine = pattern(3000, 2);
  std::memcpy(other + 6000, mine.data(), mine.size());
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), 3000, dst.mr->lkey, reinterpret_cast<uintptr_t>(view + 6000),
                 mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(dst.buf.data(), mine.data(), mine.size()), 0);
  // ... and by another process through its own mapping of the file.
  const auto theirs = pattern(3000, 3);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(f.path.c_str(), O_RDWR);
    void* p = fd < 0 ? MAP_FAILED : mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) _exit(1);
    std::memcpy(static_cast<uint8_t*>(p) + 9000, theirs.data(), theirs.size());
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), 3000, dst.mr->lkey, reinterpret_cast<uintptr_t>(view + 9000),
                 mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(dst.buf.data(), theirs.data(), theirs.size()), 0);
  munmap(other, len);
  // The MR outlives nothing: dereg, then the mapping is the application's alone.
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  b.mrs.clear();
  view[201] = 0x6b;
  EXPECT_EQ(f.read(201, 1)[0], 0x6b);
  munmap(view, len);
}

TEST_F(SharedMr, ReadOnlySharedMappingTakesReadAccessOnly) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  ShmFile f(2 * kPage);
  const auto first = pattern(2 * kPage, 4);
  ASSERT_EQ(pwrite(f.fd, first.data(), first.size(), 0), static_cast<ssize_t>(first.size()));
  const int ro = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  uint8_t* view = f.map(2 * kPage, PROT_READ, MAP_SHARED, 0, nullptr, ro);
  close(ro);
  // Expect: any access that lets the device write is refused as the kernel
  // refuses pinning read-only memory for writing: EFAULT.
  for (int acc : {int{IBV_ACCESS_LOCAL_WRITE}, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, kAllAccess}) {
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(b.pd, view, 2 * kPage, acc), nullptr) << acc;
    EXPECT_EQ(errno, EFAULT) << acc;
  }
  ibv_mr* mr = ibv_reg_mr(b.pd, view, 2 * kPage, IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  b.mrs.push_back(mr);
  EXPECT_EQ(backing_of(view), f.path);
  Local dst;
  ASSERT_NO_FATAL_FAILURE(local(a, dst, 2 * kPage));
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), static_cast<uint32_t>(2 * kPage), dst.mr->lkey,
                 reinterpret_cast<uintptr_t>(view), mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(dst.buf, first);
  // The file changes under the MR: the next READ sees the new bytes.
  const auto second = pattern(100, 5);
  ASSERT_EQ(pwrite(f.fd, second.data(), second.size(), 50), 100);
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), 100, dst.mr->lkey, reinterpret_cast<uintptr_t>(view + 50),
                 mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(dst.buf.data(), second.data(), 100), 0);
  // A WRITE is a remote access error; the file keeps its bytes (and the daemon lives).
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, dst.buf.data(), 100, dst.mr->lkey, reinterpret_cast<uintptr_t>(view + 1000),
                 mr->rkey),
            IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(f.read(1000, 100), std::vector<uint8_t>(first.begin() + 1000, first.begin() + 1100));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  b.mrs.clear();
  munmap(view, 2 * kPage);
}

TEST_F(SharedMr, RangeOverSeveralMappingsIsSentAsPieces) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  ShmFile fa(4 * kPage), fb(2 * kPage);
  // [0,2) file A at page 2 | [2,3) private anonymous | [3,4) file B at page 1 | [4,5) file A at page 0
  auto* region = static_cast<uint8_t*>(mmap(nullptr, 5 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  fa.map(2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<off_t>(2 * kPage), region);
  ASSERT_NE(mmap(region + 2 * kPage, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            MAP_FAILED);
  fb.map(kPage, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<off_t>(kPage), region + 3 * kPage);
  fa.map(kPage, PROT_READ | PROT_WRITE, MAP_SHARED, 0, region + 4 * kPage);
  const auto priv = pattern(kPage, 6);
  std::memcpy(region + 2 * kPage, priv.data(), kPage);
  const size_t off = 50, len = 5 * kPage - 100;
  ibv_mr* mr = ibv_reg_mr(b.pd, region + off, len, kAllAccess);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  b.mrs.push_back(mr);
  // Only the private page moved onto the library's memfd, with its bytes.
  EXPECT_EQ(backing_of(region), fa.path);
  EXPECT_EQ(backing_of(region + 2 * kPage).rfind("/memfd:isoroce-mr", 0), 0u) << backing_of(region + 2 * kPage);
  EXPECT_EQ(std::memcmp(region + 2 * kPage, priv.data(), kPage), 0);
  EXPECT_EQ(backing_of(region + 3 * kPage), fb.path);
  EXPECT_EQ(backing_of(region + 4 * kPage), fa.path);

  Local src, dst;
  ASSERT_NO_FATAL_FAILURE(local(a, src, len));
  ASSERT_NO_FATAL_FAILURE(local(a, dst, len));
  const auto bytes = pattern(len, 7);
  std::memcpy(src.buf.data(), bytes.data(), len);
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.buf.data(), static_cast<uint32_t>(len), src.mr->lkey,
                 reinterpret_cast<uintptr_t>(region + off), mr->rkey),
            IBV_WC_SUCCESS);
  // Expect: each piece's bytes where its mapping keeps them.
  auto slice = [&](size_t from, size_t n) { return std::vector<uint8_t>(bytes.begin() + from, bytes.begin() + from + n); };
  const size_t p = kPage;
  EXPECT_EQ(fa.read(2 * p + off, 2 * p - off), slice(0, 2 * p - off)) << "file A, pages 2-3";
  EXPECT_EQ(std::memcmp(region + 2 * p, bytes.data() + 2 * p - off, p), 0) << "the private page";
  EXPECT_EQ(fb.read(p, p), slice(3 * p - off, p)) << "file B, page 1";
  EXPECT_EQ(fa.read(0, p - off), slice(4 * p - off, p - off)) << "file A, page 0";
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), static_cast<uint32_t>(len), dst.mr->lkey,
                 reinterpret_cast<uintptr_t>(region + off), mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(dst.buf, bytes);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  b.mrs.clear();
  munmap(region, 5 * kPage);
}

TEST_F(SharedMr, MoreRunsOfMappingsThanTheDaemonTakesIsEinvalAndKeepsTheBytes) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  // 70 pages alternating file / private: 70 pieces, the daemon takes 64.
  constexpr size_t kPages = 70;
  ShmFile f(kPages * kPage);
  auto* region = static_cast<uint8_t*>(
      mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  for (size_t i = 0; i < kPages; i += 2)
    f.map(kPage, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<off_t>(i * kPage), region + i * kPage);
  const auto bytes = pattern(kPages * kPage, 10);
  std::memcpy(region, bytes.data(), bytes.size());
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(b.pd, region, kPages * kPage, kAllAccess), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(std::memcmp(region, bytes.data(), bytes.size()), 0);
  EXPECT_EQ(backing_of(region), f.path);
  EXPECT_FALSE(is_shared(region + kPage)) << "the private pages stay private";
  // 64 runs are fine.
  ibv_mr* mr = ibv_reg_mr(b.pd, region, 64 * kPage, kAllAccess);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(region, kPages * kPage);
}

TEST_F(SharedMr, PrivateFileMappingStaysOnTheCopyPath) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  ShmFile f(2 * kPage);
  const auto content = pattern(2 * kPage, 8);
  ASSERT_EQ(pwrite(f.fd, content.data(), content.size(), 0), static_cast<ssize_t>(content.size()));
  uint8_t* view = f.map(2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE);
  ibv_mr* mr = ibv_reg_mr(b.pd, view, 2 * kPage, kAllAccess);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  b.mrs.push_back(mr);
  EXPECT_EQ(backing_of(view).rfind("/memfd:isoroce-mr", 0), 0u) << backing_of(view);
  EXPECT_EQ(std::memcmp(view, content.data(), content.size()), 0) << "copied before the remap";
  Local src;
  ASSERT_NO_FATAL_FAILURE(local(a, src, 100));
  std::memset(src.buf.data(), 0xee, 100);
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.buf.data(), 100, src.mr->lkey, reinterpret_cast<uintptr_t>(view + 10),
                 mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(view[10], 0xee);
  EXPECT_EQ(view[109], 0xee);
  EXPECT_EQ(f.read(0, 2 * kPage), content) << "a private mapping's writes never reach the file";
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  b.mrs.clear();
  munmap(view, 2 * kPage);
}

TEST_F(SharedMr, AFileTruncatedWhileRegisteredDoesNotCrashTheDaemon) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  ShmFile f(4 * kPage);
  uint8_t* view = f.map(4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED);
  std::memset(view, 1, 4 * kPage);
  ibv_mr* mr = ibv_reg_mr(b.pd, view, 4 * kPage, kAllAccess);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  munmap(view, 4 * kPage);  // the test's own view would fault too
  ASSERT_EQ(ftruncate(f.fd, 0), 0);
  Local src, dst;
  ASSERT_NO_FATAL_FAILURE(local(a, src, 3 * kPage));
  ASSERT_NO_FATAL_FAILURE(local(a, dst, 3 * kPage));
  // Expect: the daemon's next touch of those pages faults, the guard gives it
  // zero pages instead, and the operations complete.
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.buf.data(), static_cast<uint32_t>(3 * kPage), src.mr->lkey,
                 reinterpret_cast<uintptr_t>(view + 100), mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), static_cast<uint32_t>(3 * kPage), dst.mr->lkey,
                 reinterpret_cast<uintptr_t>(view + 100), mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(f.read(0, 0).size(), 0u);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  ASSERT_TRUE(daemon_->ok());
  EXPECT_NE(daemon_->log().find("shrank while registered"), std::string::npos) << daemon_->log();
  // The daemon goes on serving: a fresh registration and transfer work.
  Local more;
  ASSERT_NO_FATAL_FAILURE(local(b, more, 4096));
  EXPECT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.buf.data(), 4096, src.mr->lkey,
                 reinterpret_cast<uintptr_t>(more.buf.data()), more.mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(more.buf.data(), src.buf.data(), 4096), 0);
}

// Drops CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE (what opening
// /proc/self/map_files needs) from this process.
bool drop_map_files_caps() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  for (int cap : {CAP_SYS_ADMIN, CAP_CHECKPOINT_RESTORE}) {
    const uint32_t bit = 1u << (cap % 32);
    d[cap / 32].effective &= ~bit;
    d[cap / 32].permitted &= ~bit;
    d[cap / 32].inheritable &= ~bit;
  }
  return syscall(SYS_capset, &h, d) == 0;
}

TEST_F(SharedMr, WithoutTheCapabilityAFileIsOpenedByItsPathAndOtherwiseRefusedClearly) {
  ShmFile f(2 * kPage);
  const int mfd = memfd_create("isoroce-test-shared", MFD_CLOEXEC);
  ASSERT_GE(mfd, 0);
  ASSERT_EQ(ftruncate(mfd, static_cast<off_t>(2 * kPage)), 0);
  // In a child that cannot open /proc/self/map_files (the verbs calls are
  // its own; it reports by exit status).
  const pid_t pid = fork();
  if (pid == 0) {
    if (!drop_map_files_caps()) _exit(10);
    uint8_t* fview = static_cast<uint8_t*>(mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0));
    uint8_t* mview = static_cast<uint8_t*>(mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0));
    if (fview == MAP_FAILED || mview == MAP_FAILED) _exit(11);
    char link[64];
    std::snprintf(link, sizeof link, "/proc/self/map_files/%lx-%lx", reinterpret_cast<unsigned long>(fview),
                  reinterpret_cast<unsigned long>(fview + 2 * kPage));
    const int probe = ::open(link, O_RDONLY);
    if (probe >= 0 || errno != EPERM) _exit(12);  // the capabilities did not go: nothing to test
    ibv_context* ctx = open("isoroce1");
    ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
    if (pd == nullptr) _exit(13);
    // A file with a path: opened by it, and still not remapped.
    ibv_mr* mr = ibv_reg_mr(pd, fview, 2 * kPage, kAllAccess);
    if (mr == nullptr) _exit(14);
    if (backing_of(fview) != f.path) _exit(15);
    fview[7] = 0x77;
    // A memfd has no path: refused, with the open's errno, and left alone.
    errno = 0;
    if (ibv_reg_mr(pd, mview, 2 * kPage, kAllAccess) != nullptr) _exit(16);
    if (errno != EPERM) _exit(17);
    if (backing_of(mview).rfind("/memfd:isoroce-test-shared", 0) != 0) _exit(18);
    if (ibv_dereg_mr(mr) != 0 || ibv_dealloc_pd(pd) != 0 || ibv_close_device(ctx) != 0) _exit(19);
    _exit(0);
  }
  close(mfd);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child step " << WEXITSTATUS(status)
                                    << " failed (10-12: setup, 14-15: the file by its path, 16-18: the memfd refusal)";
  EXPECT_EQ(f.read(7, 1)[0], 0x77);
}

// Private memory the library moved onto its memfd for registration.
class PrivateMr : public SharedMr {};

TEST_F(PrivateMr, PagesGoBackToPrivateMemoryWhenTheLastMrOverThemGoes) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  auto* buf = static_cast<uint8_t*>(
      mmap(nullptr, 3 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buf, MAP_FAILED);
  const auto bytes = pattern(3 * kPage, 9);
  std::memcpy(buf, bytes.data(), bytes.size());
  ibv_mr* whole = ibv_reg_mr(b.pd, buf, 3 * kPage, kAllAccess);
  ibv_mr* middle = ibv_reg_mr(b.pd, buf + kPage + 10, 100, kAllAccess);
  ASSERT_TRUE(whole && middle);
  EXPECT_EQ(backing_of(buf).rfind("/memfd:isoroce-mr", 0), 0u);
  EXPECT_TRUE(is_shared(buf));
  // Expect: after the first dereg only the page the other MR still uses stays shared.
  ASSERT_EQ(ibv_dereg_mr(whole), 0);
  EXPECT_FALSE(is_shared(buf)) << "page 0: nobody holds it";
  EXPECT_TRUE(is_shared(buf + kPage)) << "page 1: the second MR";
  EXPECT_FALSE(is_shared(buf + 2 * kPage));
  // The second MR still works on the same pages.
  Local src;
  ASSERT_NO_FATAL_FAILURE(local(a, src, 100));
  std::memset(src.buf.data(), 0xab, 100);
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_WRITE, src.buf.data(), 100, src.mr->lkey,
                 reinterpret_cast<uintptr_t>(buf + kPage + 10), middle->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(buf[kPage + 10], 0xab);
  ASSERT_EQ(ibv_dereg_mr(middle), 0);
  EXPECT_FALSE(is_shared(buf + kPage));
  // The bytes are the same, and private: a forked child's writes stay its own.
  std::vector<uint8_t> expect = bytes;
  std::memset(expect.data() + kPage + 10, 0xab, 100);
  EXPECT_EQ(std::memcmp(buf, expect.data(), expect.size()), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    std::memset(buf, 0xcc, 3 * kPage);
    _exit(0);
  }
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  EXPECT_EQ(std::memcmp(buf, expect.data(), expect.size()), 0);
  // Registered again, the pages are shared again, with the bytes written since.
  buf[5] = 0x5e;
  ibv_mr* again = ibv_reg_mr(b.pd, buf, 3 * kPage, kAllAccess);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(is_shared(buf));
  Local dst;
  ASSERT_NO_FATAL_FAILURE(local(a, dst, 3 * kPage));
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), static_cast<uint32_t>(3 * kPage), dst.mr->lkey,
                 reinterpret_cast<uintptr_t>(buf), again->rkey),
            IBV_WC_SUCCESS);
  expect[5] = 0x5e;
  EXPECT_EQ(dst.buf, expect);
  EXPECT_EQ(ibv_dereg_mr(again), 0);
  munmap(buf, 3 * kPage);
}

TEST_F(PrivateMr, AForkedChildGetsPrivateCopiesOfRegisteredMemory) {
  VerbsDev a, b;
  ASSERT_NO_FATAL_FAILURE(pair(a, b));
  auto* buf = static_cast<uint8_t*>(
      mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buf, MAP_FAILED);
  std::memset(buf, 0x11, 2 * kPage);
  ibv_mr* mr = ibv_reg_mr(b.pd, buf, 2 * kPage, kAllAccess);
  ASSERT_NE(mr, nullptr);
  b.mrs.push_back(mr);
  // Expect: the child's writes stay in the child (the registered pages are
  // MAP_SHARED in the parent), and the child sees the bytes of the fork.
  const pid_t pid = fork();
  if (pid == 0) {
    if (buf[100] != 0x11) _exit(1);
    if (backing_of(buf) != "") _exit(2);
    std::memset(buf, 0xcc, 2 * kPage);
    std::vector<std::string> churn(1000, std::string(100, 'x'));  // the child's heap is its own too
    _exit(churn.size() == 1000 ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(buf[0], 0x11);
  EXPECT_EQ(buf[2 * kPage - 1], 0x11);
  // The parent's MR is intact: the daemon reads the parent's bytes.
  Local dst;
  ASSERT_NO_FATAL_FAILURE(local(a, dst, 2 * kPage));
  ASSERT_EQ(rdma(a, IBV_WR_RDMA_READ, dst.buf.data(), static_cast<uint32_t>(2 * kPage), dst.mr->lkey,
                 reinterpret_cast<uintptr_t>(buf), mr->rkey),
            IBV_WC_SUCCESS);
  EXPECT_EQ(dst.buf, std::vector<uint8_t>(2 * kPage, 0x11));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  b.mrs.clear();
  munmap(buf, 2 * kPage);
}

}  // namespace
}  // namespace isoroce::test
