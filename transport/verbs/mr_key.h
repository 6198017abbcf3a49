// L_Key / R_Key generation. A key is a keyed 32-bit permutation of a
// registration counter: a bijection, so no key repeats before 2^32 keys have
// been handed out (a stale key held by a peer does not come back soon), and
// without the seed consecutive keys look unrelated (a peer cannot guess the
// next or a neighbouring key; rxe only varies the low 8 bits). The seed comes from the caller: this
// layer does no I/O, so it cannot read /dev/urandom itself.
#pragma once

#include <cstdint>

namespace isoroce::verbs {

class MrKeyGen {
 public:
  explicit MrKeyGen(uint64_t seed);
  // The next key, never 0 (0 marks "no key" in WQEs and tests).
  uint32_t next();

 private:
  uint32_t permute(uint32_t x) const;
  uint32_t round_key_[4];
  uint32_t counter_ = 0;
};

}  // namespace isoroce::verbs
