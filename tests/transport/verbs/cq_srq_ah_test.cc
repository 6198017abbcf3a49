// CQ sizes and overrun, SRQ sizes, modify and limit event, AH checks.
#include <gtest/gtest.h>

#include <cerrno>

#include "transport/verbs/ah.h"
#include "transport/verbs/cq.h"
#include "transport/verbs/srq.h"

namespace isoroce::verbs {
namespace {

TEST(Cq, SizeLimits) {
  Device dev;
  EXPECT_EQ(Cq::create(dev, 0).err(), EINVAL);
  EXPECT_EQ(Cq::create(dev, -1).err(), EINVAL);
  EXPECT_EQ(Cq::create(dev, int(dev.max_cqe) + 1).err(), EINVAL);
  EXPECT_TRUE(Cq::create(dev, int(dev.max_cqe)).ok());
}

TEST(Cq, OverrunIsDetectedAndSticks) {
  Device dev;
  Cq cq = Cq::create(dev, 2).value();
  EXPECT_TRUE(cq.push());
  EXPECT_TRUE(cq.push());
  EXPECT_FALSE(cq.overflowed());
  EXPECT_FALSE(cq.push());
  EXPECT_TRUE(cq.overflowed());
  EXPECT_EQ(cq.count(), 2u);
  cq.pop(1);
  EXPECT_TRUE(cq.push());
  EXPECT_TRUE(cq.overflowed());
  cq.pop(10);
  EXPECT_EQ(cq.count(), 0u);
}

TEST(Cq, ResizeNotBelowQueued) {
  Device dev;
  Cq cq = Cq::create(dev, 4).value();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cq.push());
  EXPECT_EQ(cq.resize(dev, 2), EINVAL);
  EXPECT_EQ(cq.resize(dev, 0), EINVAL);
  EXPECT_EQ(cq.resize(dev, 3), 0);
  EXPECT_EQ(cq.capacity(), 3u);
  EXPECT_FALSE(cq.push());
  // Completions a driver holds outside the engine count too.
  cq.pop(1);
  EXPECT_EQ(cq.resize(dev, 4, 3), EINVAL);
  EXPECT_EQ(cq.resize(dev, 5, 3), 0);
}

ibv_srq_attr srq_attr(uint32_t max_wr, uint32_t max_sge, uint32_t limit) {
  ibv_srq_attr a{};
  a.max_wr = max_wr;
  a.max_sge = max_sge;
  a.srq_limit = limit;
  return a;
}

TEST(Srq, CreateLimits) {
  Device dev;
  EXPECT_TRUE(Srq::create(dev, srq_attr(16, 1, 0)).ok());
  EXPECT_EQ(Srq::create(dev, srq_attr(0, 1, 0)).err(), EINVAL);
  EXPECT_EQ(Srq::create(dev, srq_attr(dev.max_srq_wr + 1, 1, 0)).err(), EINVAL);
  EXPECT_EQ(Srq::create(dev, srq_attr(16, dev.max_srq_sge + 1, 0)).err(), EINVAL);
  EXPECT_EQ(Srq::create(dev, srq_attr(16, 0, 0)).err(), EINVAL);
  EXPECT_EQ(Srq::create(dev, srq_attr(16, 1, 17)).err(), EINVAL);
}

TEST(Srq, PostFullAndSges) {
  Device dev;
  Srq srq = Srq::create(dev, srq_attr(2, 2, 0)).value();
  EXPECT_EQ(srq.post(3), EINVAL);
  EXPECT_EQ(srq.post(2), 0);
  EXPECT_EQ(srq.post(1), 0);
  EXPECT_EQ(srq.post(1), ENOMEM);
}

TEST(Srq, LimitFiresOnceBelowTheLimitThenDisarms) {
  Device dev;
  Srq srq = Srq::create(dev, srq_attr(8, 1, 0)).value();
  for (int i = 0; i < 4; ++i) ASSERT_EQ(srq.post(1), 0);
  EXPECT_EQ(srq.modify(dev, srq_attr(0, 0, 3), IBV_SRQ_LIMIT), 0);
  EXPECT_TRUE(srq.armed());
  EXPECT_FALSE(srq.take());  // 3 left: not below 3
  EXPECT_TRUE(srq.take());   // 2 left: below, fires
  EXPECT_FALSE(srq.armed());
  EXPECT_FALSE(srq.take());
}

TEST(Srq, ModifyRules) {
  Device dev;
  Srq srq = Srq::create(dev, srq_attr(8, 1, 0)).value();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(srq.post(1), 0);
  EXPECT_EQ(srq.modify(dev, srq_attr(4, 0, 0), IBV_SRQ_MAX_WR), EINVAL);  // below posted
  EXPECT_EQ(srq.modify(dev, srq_attr(0, 0, 9), IBV_SRQ_LIMIT), EINVAL);   // above max_wr
  EXPECT_EQ(srq.modify(dev, srq_attr(16, 0, 12), IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
  EXPECT_EQ(srq.attr().max_wr, 16u);
  EXPECT_EQ(srq.attr().srq_limit, 12u);
  EXPECT_EQ(srq.modify(dev, srq_attr(10, 0, 0), IBV_SRQ_MAX_WR), EINVAL);  // below armed limit
  EXPECT_EQ(srq.modify(dev, srq_attr(16, 0, 0), 1u << 5), EINVAL);
  EXPECT_EQ(srq.attr().max_wr, 16u);
}

TEST(Ah, RoceNeedsGrhAndValidIndexes) {
  Device dev;
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 1;
  EXPECT_EQ(check_ah_attr(dev, ah), 0);
  ah.is_global = 0;
  EXPECT_EQ(check_ah_attr(dev, ah), EINVAL);
  ah.is_global = 1;
  ah.port_num = 0;
  EXPECT_EQ(check_ah_attr(dev, ah), EINVAL);
  ah.port_num = 1;
  dev.gid_tbl_len = 4;
  ah.grh.sgid_index = 4;
  EXPECT_EQ(check_ah_attr(dev, ah), EINVAL);
  ah.grh.sgid_index = 3;
  EXPECT_EQ(check_ah_attr(dev, ah), 0);
}

}  // namespace
}  // namespace isoroce::verbs
