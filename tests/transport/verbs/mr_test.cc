// Memory regions: access flag rules, bounds with overflow near UINT64_MAX,
// keys (unique, not sequential, not reused soon), PD use counts, dereg.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <unordered_set>

#include "transport/verbs/access.h"
#include "transport/verbs/mr_table.h"

namespace isoroce::verbs {
namespace {

constexpr uint32_t kLw = IBV_ACCESS_LOCAL_WRITE;
constexpr uint32_t kRw = IBV_ACCESS_REMOTE_WRITE;
constexpr uint32_t kRr = IBV_ACCESS_REMOTE_READ;
constexpr uint32_t kRa = IBV_ACCESS_REMOTE_ATOMIC;

TEST(MrAccess, RemoteWriteOrAtomicNeedLocalWrite) {
  EXPECT_EQ(check_mr_access(0), 0);
  EXPECT_EQ(check_mr_access(kLw), 0);
  EXPECT_EQ(check_mr_access(kRr), 0);
  EXPECT_EQ(check_mr_access(kRw), EINVAL);
  EXPECT_EQ(check_mr_access(kRa), EINVAL);
  EXPECT_EQ(check_mr_access(kRw | kRr), EINVAL);
  EXPECT_EQ(check_mr_access(kLw | kRw | kRr | kRa), 0);
  EXPECT_EQ(check_mr_access(kLw | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_MW_BIND), 0);
  EXPECT_EQ(check_mr_access(kLw | IBV_ACCESS_RELAXED_ORDERING), 0);
  EXPECT_EQ(check_mr_access(kLw | IBV_ACCESS_ON_DEMAND), EOPNOTSUPP);
  EXPECT_EQ(check_mr_access(kLw | (1u << 12)), EINVAL);  // not an rdma-core flag
}

class MrTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = pds_.alloc(dev_);
    ASSERT_TRUE(p.ok());
    pd_ = p.value();
  }
  MrKeys reg(uint64_t addr, uint64_t len, uint32_t access) {
    auto r = mrs_.reg(dev_, pds_, pd_, addr, len, addr, access);
    EXPECT_TRUE(r.ok()) << r.err();
    return r.ok() ? r.value() : MrKeys{0, 0};
  }
  Device dev_;
  PdTable pds_;
  MrTable mrs_{0x1234};
  PdHandle pd_ = 0;
};

TEST_F(MrTest, RegRejectsBadArguments) {
  EXPECT_EQ(mrs_.reg(dev_, pds_, pd_, 0x1000, 4096, 0x1000, kRw).err(), EINVAL);
  EXPECT_EQ(mrs_.reg(dev_, pds_, pd_ + 7, 0x1000, 4096, 0x1000, kLw).err(), EINVAL);
  EXPECT_EQ(mrs_.reg(dev_, pds_, pd_, 0x1000, 0, 0x1000, kLw).err(), EINVAL);
  // Wraps past 2^64.
  EXPECT_EQ(mrs_.reg(dev_, pds_, pd_, UINT64_MAX - 4095, 4097, UINT64_MAX - 4095, kLw).err(),
            EINVAL);
  // Ends exactly at 2^64: fine.
  EXPECT_TRUE(mrs_.reg(dev_, pds_, pd_, UINT64_MAX - 4095, 4096, UINT64_MAX - 4095, kLw).ok());
  // iova and addr must share the page offset.
  EXPECT_EQ(mrs_.reg(dev_, pds_, pd_, 0x1010, 64, 0x2020, kLw).err(), EINVAL);
  EXPECT_TRUE(mrs_.reg(dev_, pds_, pd_, 0x1010, 64, 0x7010, kLw).ok());
  Device small = dev_;
  small.max_mr_size = 1 << 20;
  EXPECT_EQ(mrs_.reg(small, pds_, pd_, 0, (1 << 20) + 1, 0, kLw).err(), EINVAL);
  small.max_mr = mrs_.size();
  EXPECT_EQ(mrs_.reg(small, pds_, pd_, 0, 64, 0, kLw).err(), ENOMEM);
}

TEST_F(MrTest, LocalChecks) {
  MrKeys k = reg(0x10000, 0x1000, 0);  // read-only locally
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, 0x10000, 0x1000, 0), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, 0x10000, 0x1000, kLw), MrCheck::kAccessViolation);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, 0x10001, 0x1000, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, 0xffff, 2, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, 0x10fff, 1, 0), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, 0x11000, 0, 0), MrCheck::kOk);  // empty, at the end
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey ^ 1, 0x10000, 1, 0), MrCheck::kInvalidKey);
  EXPECT_EQ(mrs_.check_local(pd_, k.rkey, 0x10000, 1, 0), MrCheck::kInvalidKey);
  MrKeys w = reg(0x20000, 0x1000, kLw);
  EXPECT_EQ(mrs_.check_local(pd_, w.lkey, 0x20000, 0x1000, kLw), MrCheck::kOk);
}

// check_local() with `found`: the MR the check found on kOk (the engine's post
// translates an SGE with it), untouched on every refusal.
TEST_F(MrTest, LocalCheckHandsBackTheMrItFoundOnlyWhenItPasses) {
  MrKeys a = reg(0x10000, 0x1000, 0);
  MrKeys b = reg(0x20000, 0x1000, kLw);
  const Mr* found = nullptr;
  EXPECT_EQ(mrs_.check_local(pd_, a.lkey, 0x10010, 16, 0, &found), MrCheck::kOk);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->lkey, a.lkey);
  EXPECT_EQ(mrs_.check_local(pd_, b.lkey, 0x20000, 0x1000, kLw, &found), MrCheck::kOk);
  EXPECT_EQ(found->lkey, b.lkey);
  const Mr* const before = found;
  EXPECT_EQ(mrs_.check_local(pd_, a.lkey, 0x10000, 16, kLw, &found), MrCheck::kAccessViolation);
  EXPECT_EQ(mrs_.check_local(pd_, a.lkey, 0x10ff8, 16, 0, &found), MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_local(pd_, a.lkey ^ 1, 0x10000, 1, 0, &found), MrCheck::kInvalidKey);
  EXPECT_EQ(found, before);
  // The last-key fast path answers for the right key after another lookup.
  EXPECT_EQ(mrs_.check_local(pd_, a.lkey, 0x10000, 1, 0, &found), MrCheck::kOk);
  EXPECT_EQ(found->lkey, a.lkey);
  EXPECT_EQ(mrs_.find_lkey(b.lkey)->lkey, b.lkey);
  EXPECT_EQ(mrs_.find_lkey(a.lkey)->lkey, a.lkey);
  ASSERT_EQ(mrs_.dereg(pds_, b.lkey), 0);
  EXPECT_EQ(mrs_.find_lkey(b.lkey), nullptr);
  EXPECT_EQ(mrs_.find_rkey(b.rkey), nullptr);
  EXPECT_EQ(mrs_.check_local(pd_, b.lkey, 0x20000, 1, 0, &found), MrCheck::kInvalidKey);
}

TEST_F(MrTest, RemoteChecksNeedTheRightRemoteAccess) {
  MrKeys r = reg(0x10000, 0x1000, kRr);
  EXPECT_EQ(mrs_.check_remote(pd_, r.rkey, 0x10000, 16, kRr), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_remote(pd_, r.rkey, 0x10000, 16, kRw), MrCheck::kAccessViolation);
  EXPECT_EQ(mrs_.check_remote(pd_, r.rkey, 0x10000, 8, kRa), MrCheck::kAccessViolation);
  EXPECT_EQ(mrs_.check_remote(pd_, r.lkey, 0x10000, 16, kRr), MrCheck::kInvalidKey);
  MrKeys local_only = reg(0x30000, 0x1000, kLw);
  EXPECT_EQ(mrs_.check_remote(pd_, local_only.rkey, 0x30000, 16, kRr), MrCheck::kAccessViolation);
  // Local write on an MR does not let a peer write.
  EXPECT_EQ(mrs_.check_remote(pd_, local_only.rkey, 0x30000, 16, kLw), MrCheck::kAccessViolation);
  MrKeys all = reg(0x40000, 0x1000, kLw | kRw | kRr | kRa);
  EXPECT_EQ(mrs_.check_remote(pd_, all.rkey, 0x40ff0, 16, kRw), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_remote(pd_, all.rkey, 0x40ff0, 17, kRw), MrCheck::kOutOfBounds);
}

TEST_F(MrTest, OtherPdIsInvalidKey) {
  MrKeys k = reg(0x10000, 0x1000, kLw | kRw);
  PdHandle other = pds_.alloc(dev_).value();
  EXPECT_EQ(mrs_.check_local(other, k.lkey, 0x10000, 1, 0), MrCheck::kInvalidKey);
  EXPECT_EQ(mrs_.check_remote(other, k.rkey, 0x10000, 1, kRw), MrCheck::kInvalidKey);
}

TEST_F(MrTest, BoundsNeverOverflowNearUint64Max) {
  const uint64_t base = UINT64_MAX - 0xfff;  // last page of the address space
  MrKeys k = reg(base, 0x1000, kLw | kRw | kRr | kRa);
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, base, 0x1000, kRr), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, UINT64_MAX, 1, kRr), MrCheck::kOk);
  // va + len wraps to a small number: a naive "va + len <= end" would pass.
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, UINT64_MAX, 2, kRr), MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, base + 8, UINT64_MAX, kRr), MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, base, UINT64_MAX, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, base + 1, 0x1000, 0), MrCheck::kOutOfBounds);
  // A region low in memory, asked about a range that wraps around to it.
  MrKeys low = reg(0x1000, 0x1000, kLw | kRr);
  EXPECT_EQ(mrs_.check_remote(pd_, low.rkey, UINT64_MAX - 0x10, 0x1100, kRr),
            MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_remote(pd_, low.rkey, 0x1800, UINT64_MAX - 0x100, kRr),
            MrCheck::kOutOfBounds);
  // va far above the region with va + len wrapping to just past 0: a naive
  // "va + len <= iova + length" sees 7 <= 0x2000 and lets it through.
  EXPECT_EQ(mrs_.check_remote(pd_, low.rkey, UINT64_MAX - 8, 16, kRr), MrCheck::kOutOfBounds);
  EXPECT_EQ(mrs_.check_local(pd_, low.lkey, UINT64_MAX - 8, 16, 0), MrCheck::kOutOfBounds);
  // Inside the top page, not touching its end: iova + length itself wraps to 0.
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, base + 8, 16, kRr), MrCheck::kOk);
}

TEST_F(MrTest, AtomicsAreEightAlignedBytes) {
  MrKeys k = reg(0x10000, 0x1000, kLw | kRa);
  EXPECT_EQ(mrs_.check_atomic(pd_, k.rkey, 0x10008), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_atomic(pd_, k.rkey, 0x10004), MrCheck::kMisaligned);
  EXPECT_EQ(mrs_.check_atomic(pd_, k.rkey, 0x10ff8), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_atomic(pd_, k.rkey, 0x11000), MrCheck::kOutOfBounds);
  MrKeys no = reg(0x20000, 0x1000, kLw | kRw);
  EXPECT_EQ(mrs_.check_atomic(pd_, no.rkey, 0x20000), MrCheck::kAccessViolation);
}

TEST_F(MrTest, ZeroBasedRegionsStartAtZero) {
  MrKeys k = reg(0x7f0000001000, 0x2000, kLw | kRr | IBV_ACCESS_ZERO_BASED);
  EXPECT_EQ(mrs_.find_lkey(k.lkey)->iova, 0u);
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, 0x1ff0, 16, kRr), MrCheck::kOk);
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, 0x7f0000001000, 16, kRr), MrCheck::kOutOfBounds);
}

TEST_F(MrTest, DeregThenUseIsInvalidKeyAndPdCounts) {
  MrKeys k = reg(0x10000, 0x1000, kLw | kRw);
  EXPECT_EQ(pds_.uses(pd_), 1u);
  EXPECT_EQ(pds_.dealloc(pd_), EBUSY);
  EXPECT_EQ(mrs_.dereg(pds_, k.lkey), 0);
  EXPECT_EQ(mrs_.check_local(pd_, k.lkey, 0x10000, 1, 0), MrCheck::kInvalidKey);
  EXPECT_EQ(mrs_.check_remote(pd_, k.rkey, 0x10000, 1, kRw), MrCheck::kInvalidKey);
  EXPECT_EQ(mrs_.dereg(pds_, k.lkey), EINVAL);
  EXPECT_EQ(pds_.uses(pd_), 0u);
  EXPECT_EQ(pds_.dealloc(pd_), 0);
  EXPECT_EQ(pds_.dealloc(pd_), EINVAL);
}

TEST_F(MrTest, KeysAreUniqueNotReusedSoonAndNotSequential) {
  std::unordered_set<uint32_t> seen;
  int sequential = 0;
  uint32_t prev = 0;
  for (int i = 0; i < 100000; ++i) {
    MrKeys k = reg(0x10000, 0x1000, kLw);
    ASSERT_NE(k.lkey, 0u);
    ASSERT_NE(k.lkey, k.rkey);
    ASSERT_TRUE(seen.insert(k.lkey).second) << "lkey reused after " << i;
    ASSERT_TRUE(seen.insert(k.rkey).second) << "rkey reused after " << i;
    if (k.lkey - prev <= 256 || prev - k.lkey <= 256) ++sequential;
    prev = k.rkey;
    ASSERT_EQ(mrs_.dereg(pds_, k.lkey), 0);
  }
  EXPECT_LT(sequential, 10);
  // Another seed, other keys.
  MrTable other(0x5678);
  PdTable pds;
  PdHandle pd = pds.alloc(dev_).value();
  MrKeys a = other.reg(dev_, pds, pd, 0, 64, 0, kLw).value();
  MrTable same(0x1234);
  MrKeys b = same.reg(dev_, pds, pd, 0, 64, 0, kLw).value();
  MrTable again(0x1234);
  MrKeys c = again.reg(dev_, pds, pd, 0, 64, 0, kLw).value();
  EXPECT_NE(a.lkey, b.lkey);
  EXPECT_EQ(b.lkey, c.lkey);  // deterministic for one seed (the simulator needs that)
}

TEST_F(MrTest, EveryRegistrationHasItsOwnId) {
  // The responder holds (rkey, id) across the packets of a WRITE: a region
  // registered again, even over the same bytes, is another registration.
  MrKeys a = reg(0x10000, 0x1000, kLw | IBV_ACCESS_REMOTE_WRITE);
  const uint64_t id = mrs_.find_rkey(a.rkey)->id;
  EXPECT_NE(id, 0u);
  ASSERT_EQ(mrs_.dereg(pds_, a.lkey), 0);
  EXPECT_EQ(mrs_.find_rkey(a.rkey), nullptr);
  MrKeys b = reg(0x10000, 0x1000, kLw | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_GT(mrs_.find_rkey(b.rkey)->id, id);
  EXPECT_EQ(mrs_.find_lkey(b.lkey)->id, mrs_.find_rkey(b.rkey)->id);
}

}  // namespace
}  // namespace isoroce::verbs
