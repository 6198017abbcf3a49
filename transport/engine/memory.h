// Registered memory as the engine touches it: the SGEs of a work request
// translated into pointers (gather for transmit, scatter for receive), and the
// region a RETH or AtomicETH names on the responder. Every access is checked
// against the MR table first (verbs::MrTable), so no peer or application can
// make the engine touch memory outside a region it may use.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "transport/engine/engine.h"
#include "transport/wire/crc32.h"

namespace isoroce::transport::detail {

// Where an iova inside mr is in this process.
inline uint8_t* mr_ptr(const verbs::Mr& mr, uint64_t iova) {
  return reinterpret_cast<uint8_t*>(mr.addr + (iova - mr.iova));
}

// Checks every SGE (needed: 0 to read, IBV_ACCESS_LOCAL_WRITE to write).
verbs::MrCheck check_sges(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges,
                          uint32_t needed);

// check_sges() that also writes, for each SGE, where its MR's iova 0 lies in
// this process (bias[i] = addr - iova of sges[i]'s MR, 0 for an empty SGE):
// bias has sges.size() entries. Used once per work request, at post.
verbs::MrCheck check_sges(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges,
                          uint32_t needed, uint64_t* bias);

// Where SGEs stand between their check and their use: what check_sges() found
// (bias) and MrTable::deregs() then. Valid only while that count is unchanged
// (no region was deregistered since, so each SGE still lies in a live MR of
// the PD with the access it was checked for).
struct CheckedSges {
  const uint64_t* bias = nullptr;
  bool valid = false;
};

// The pieces of [offset, offset + len) of the message the SGEs describe,
// appended to out. False if an SGE no longer names a valid region.
bool gather(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, uint64_t offset,
            uint64_t len, std::vector<std::span<const uint8_t>>& out);
// gather() with the SGEs' check already made (checked.valid): no table lookup;
// otherwise gather() itself.
bool gather(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, CheckedSges checked,
            uint64_t offset, uint64_t len, std::vector<std::span<const uint8_t>>& out);

// Copies data to [offset, offset + data.size()) of the message the SGEs
// describe. False if it does not fit or an SGE is not writable.
bool scatter(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, uint64_t offset,
             std::span<const uint8_t> data);
bool scatter(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, CheckedSges checked,
             uint64_t offset, std::span<const uint8_t> data);

// scatter() that also folds data into the CRC stream *crc as it copies it (each
// byte read once: the responder checks a SEND's ICRC this way). On false *crc is
// meaningless.
bool scatter_crc(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, uint64_t offset,
                 std::span<const uint8_t> data, wire::Crc32Fold* crc);
bool scatter_crc(const verbs::MrTable& mrs, PdHandle pd, std::span<const Sge> sges, CheckedSges checked,
                 uint64_t offset, std::span<const uint8_t> data, wire::Crc32Fold* crc);

}  // namespace isoroce::transport::detail
