#include "transport/engine/memory.h"

#include <algorithm>
#include <cstring>

#include "transport/wire/crc32.h"

namespace isoroce::transport::detail {

verbs::MrCheck check_sges(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges,
                          uint32_t needed) {
  for (const Sge& s : sges) {
    if (s.length == 0) continue;
    const verbs::MrCheck c = mrs.check_local(pd, s.lkey, s.addr, s.length, needed);
    if (c != verbs::MrCheck::kOk) return c;
  }
  return verbs::MrCheck::kOk;
}

verbs::MrCheck check_sges(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges,
                          uint32_t needed, uint64_t* bias) {
  for (size_t i = 0; i < sges.size(); ++i) {
    const Sge& s = sges[i];
    bias[i] = 0;
    if (s.length == 0) continue;
    const verbs::Mr* mr = nullptr;
    const verbs::MrCheck c = mrs.check_local(pd, s.lkey, s.addr, s.length, needed, &mr);
    if (c != verbs::MrCheck::kOk) return c;
    bias[i] = mr->addr - mr->iova;
  }
  return verbs::MrCheck::kOk;
}

namespace {

// Calls f(pointer, bytes) for each piece of [offset, offset+len); false if an
// SGE fails its check (the pieces before it were visited).
template <typename F>
bool walk(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, uint64_t offset,
          uint64_t len, uint32_t needed, F&& f) {
  for (const Sge& s : sges) {
    if (len == 0) return true;
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(s.length - offset, len);
    if (mrs.check_local(pd, s.lkey, s.addr + offset, n, needed) != verbs::MrCheck::kOk) return false;
    const verbs::Mr* mr = mrs.find_lkey(s.lkey);
    f(mr_ptr(*mr, s.addr + offset), n);
    len -= n;
    offset = 0;
  }
  return len == 0;
}

// walk() over SGEs checked whole by check_sges(): each piece lies inside its
// SGE, so inside the MR the check found; bias[i] translates it.
template <typename F>
bool walk_checked(std::span<const Sge> sges, const uint64_t* bias, uint64_t offset, uint64_t len, F&& f) {
  for (size_t i = 0; i < sges.size(); ++i) {
    const Sge& s = sges[i];
    if (len == 0) return true;
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(s.length - offset, len);
    f(reinterpret_cast<uint8_t*>(s.addr + offset + bias[i]), n);
    len -= n;
    offset = 0;
  }
  return len == 0;
}

}  // namespace

bool gather(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, uint64_t offset,
            uint64_t len, std::vector<std::span<const uint8_t>>& out) {
  return walk(mrs, pd, sges, offset, len, 0, [&](uint8_t* p, uint64_t n) {
    out.emplace_back(p, static_cast<size_t>(n));
  });
}

bool gather(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, CheckedSges checked,
            uint64_t offset, uint64_t len, std::vector<std::span<const uint8_t>>& out) {
  if (!checked.valid) return gather(mrs, pd, sges, offset, len, out);
  return walk_checked(sges, checked.bias, offset, len, [&](uint8_t* p, uint64_t n) {
    out.emplace_back(p, static_cast<size_t>(n));
  });
}

bool scatter(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, uint64_t offset,
             std::span<const uint8_t> data) {
  const uint8_t* src = data.data();
  return walk(mrs, pd, sges, offset, data.size(), IBV_ACCESS_LOCAL_WRITE,
              [&](uint8_t* p, uint64_t n) {
                std::memcpy(p, src, n);
                src += n;
              });
}

bool scatter_crc(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, uint64_t offset,
                 std::span<const uint8_t> data, wire::Crc32Fold* crc) {
  const uint8_t* src = data.data();
  return walk(mrs, pd, sges, offset, data.size(), IBV_ACCESS_LOCAL_WRITE, [&](uint8_t* p, uint64_t n) {
    wire::crc32_fold_copy(*crc, p, src, n);
    src += n;
  });
}

}  // namespace isoroce::transport::detail

namespace isoroce::transport::detail {

bool scatter(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, CheckedSges checked,
             uint64_t offset, std::span<const uint8_t> data) {
  if (!checked.valid) return scatter(mrs, pd, sges, offset, data);
  const uint8_t* src = data.data();
  return walk_checked(sges, checked.bias, offset, data.size(), [&](uint8_t* p, uint64_t n) {
    std::memcpy(p, src, n);
    src += n;
  });
}

bool scatter_crc(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, CheckedSges checked,
                 uint64_t offset, std::span<const uint8_t> data, wire::Crc32Fold* crc) {
  if (!checked.valid) return scatter_crc(mrs, pd, sges, offset, data, crc);
  const uint8_t* src = data.data();
  return walk_checked(sges, checked.bias, offset, data.size(), [&](uint8_t* p, uint64_t n) {
    wire::crc32_fold_copy(*crc, p, src, n);
    src += n;
  });
}

}  // namespace isoroce::transport::detail
