#include "ctrl/mr_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ctrl/fault_guard.h"
#include "ctrl/protocol_limits.h"

namespace isoroce::ctrl {
namespace {

using nlohmann::json;

uint64_t u64_or(const json& j, const char* key, uint64_t def) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return def;
  return it->get<uint64_t>();
}

struct Piece {
  int fd = -1;
  uint64_t offset = 0, length = 0;  // in the file, page-aligned
  bool file = false;
};

bool seal_shrink(int fd) {
  return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0 || (fcntl(fd, F_GET_SEALS) > 0 && (fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK));
}

}  // namespace

bool release_mapping(Mapping& m) {
  bool faulted = false;
  for (int g : m.guards) faulted |= fault_guard::remove(g);
  m.guards.clear();
  if (m.base != nullptr) munmap(m.base, m.len);
  m.base = nullptr;
  return faulted;
}

int map_mr_memory(const json& req, const std::vector<int>& fds, uint64_t length, uint64_t offset, uint32_t access,
                  Mapping* out, std::string* err) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  auto round_up = [&](uint64_t v) { return (v + page - 1) & ~(page - 1); };
  std::vector<Piece> pieces;
  uint64_t at = 0;  // the region's first byte in the pieces
  if (!req.contains("pieces")) {
    if (fds.size() != 1) return *err = "send the memory as one memfd (SCM_RIGHTS), or \"pieces\"", EINVAL;
    // The client must not be able to shrink the file under us (SIGBUS): seal it.
    if (!seal_shrink(fds[0])) return *err = "the memory must be a memfd made with MFD_ALLOW_SEALING", EINVAL;
    struct stat st{};
    if (fstat(fds[0], &st) != 0 || length > static_cast<uint64_t>(st.st_size) ||
        offset > static_cast<uint64_t>(st.st_size) - length)
      return *err = "offset + length beyond the memfd", EINVAL;
    const uint64_t start = offset & ~(page - 1);
    pieces.push_back({fds[0], start, round_up(offset - start + length), false});
    at = offset - start;
  } else {
    const json& list = req["pieces"];
    if (!list.is_array() || list.empty() || list.size() > protocol::kMaxPieces)
      return *err = "\"pieces\" is a list of 1.." + std::to_string(protocol::kMaxPieces) + " {fd, offset, length, kind}", EINVAL;
    for (const json& p : list) {
      const uint64_t none = UINT64_MAX;
      const uint64_t idx = p.is_object() ? u64_or(p, "fd", none) : none;
      const uint64_t off = p.is_object() ? u64_or(p, "offset", none) : none;
      const uint64_t len = p.is_object() ? u64_or(p, "length", 0) : 0;
      const std::string kind = p.is_object() && p.contains("kind") && p["kind"].is_string() ? p["kind"].get<std::string>() : "";
      if (idx >= fds.size() || off == none || len == 0 || off % page || len % page || len > (uint64_t{1} << 46) ||
          (kind != "memfd" && kind != "file"))
        return *err = "a piece is {fd: index of a descriptor sent, offset, length: page multiples, kind: memfd or file}",
               EINVAL;
      pieces.push_back({fds[idx], off, len, kind == "file"});
    }
    at = offset;
  }
  uint64_t total = 0;
  for (const Piece& p : pieces) total += p.length;  // at most 64 * 2^46
  if (length > total || at > total - length) return *err = "offset + length beyond the pieces", EINVAL;
  for (const Piece& p : pieces) {
    struct stat st{};
    if (fstat(p.fd, &st) != 0) return *err = "a piece's descriptor", EBADF;
    if (!p.file && !seal_shrink(p.fd)) return *err = "a memfd piece must be a memfd made with MFD_ALLOW_SEALING", EINVAL;
    if (p.file && !S_ISREG(st.st_mode))
      return *err = "a file piece must be a regular file (a file, /dev/shm object or memfd)", EINVAL;
    const uint64_t end = round_up(static_cast<uint64_t>(st.st_size));
    if (p.offset > end || p.length > end - p.offset)
      return *err = "a piece reaches past the end of its file", p.file ? EFAULT : EINVAL;
  }
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return *err = std::string("mmap: ") + std::strerror(errno), errno;
  out->base = base;
  out->len = total;
  uint64_t pos = 0;
  for (const Piece& p : pieces) {
    // A client's file is mapped as the MR needs it: a read-only descriptor
    // with write access fails here (EACCES).
    const int prot = !p.file || (access & protocol::kMrWriteAccess) ? PROT_READ | PROT_WRITE : PROT_READ;
    void* where = static_cast<uint8_t*>(base) + pos;
    if (mmap(where, p.length, prot, MAP_SHARED | MAP_FIXED, p.fd, static_cast<off_t>(p.offset)) == MAP_FAILED) {
      const int rc = errno;
      release_mapping(*out);
      return *err = std::string("mmap of a ") + (p.file ? "file" : "memfd") + " piece: " + std::strerror(rc), rc;
    }
    if (p.file) {
      const int g = fault_guard::add(where, p.length);
      if (g < 0) {
        release_mapping(*out);
        return *err = "too many registrations of files at once", ENOMEM;
      }
      out->guards.push_back(g);
    }
    pos += p.length;
  }
  out->addr = static_cast<uint8_t*>(base) + at;
  out->maps = pieces.size();
  return 0;
}

}  // namespace isoroce::ctrl
