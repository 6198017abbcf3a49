// dcqcn::Params: the name=value parser every front end shares.
#include <gtest/gtest.h>

#include "transport/dcqcn/params.h"

namespace isoroce::dcqcn {
namespace {

TEST(DcqcnParams, DefaultsAreValidAndPublishedFirmwareValues) {
  Params p;
  EXPECT_EQ(validate(p), "");
  EXPECT_FALSE(p.enabled);
  EXPECT_DOUBLE_EQ(p.alpha_update_us, 1);
  EXPECT_DOUBLE_EQ(p.rate_decrease_period_us, 4);
  EXPECT_DOUBLE_EQ(p.min_time_between_cnps_us, 4);
  EXPECT_EQ(p.cnp_dscp, 48u);
  EXPECT_EQ(p.fast_recovery_stages, 1u);
}

TEST(DcqcnParams, SetsEveryParameterAndRoundTrips) {
  Params p;
  for (const auto& info : param_table()) {
    const std::string v = get_param(p, info.name);
    ASSERT_FALSE(v.empty()) << info.name;
    EXPECT_EQ(set_param(p, info.name, v), "") << info.name;
    EXPECT_FALSE(info.mlx5_knob.empty()) << info.name;
  }
  EXPECT_EQ(set_param(p, "g=0.00390625"), "");
  EXPECT_DOUBLE_EQ(p.g, 1.0 / 256);
  EXPECT_EQ(get_param(p, "g"), "0.00390625");
  EXPECT_EQ(get_param(p, "rp_timer_us"), "300");
  EXPECT_EQ(get_param(p, "hai_mbps"), "50");
  EXPECT_EQ(set_param(p, "byte_counter_bytes", "0"), "");
  EXPECT_EQ(p.byte_counter_bytes, 0u);
  EXPECT_EQ(set_param(p, "enabled", "true"), "");
  EXPECT_TRUE(p.enabled);
  EXPECT_EQ(set_param(p, "clamp_target=1"), "");
  EXPECT_TRUE(p.clamp_target);
  EXPECT_EQ(set_param(p, "cnp_dscp=46"), "");
  EXPECT_EQ(p.cnp_dscp, 46u);
}

TEST(DcqcnParams, RejectsBadInputNamingTheParameter) {
  Params p;
  EXPECT_NE(set_param(p, "nope", "1").find("unknown parameter \"nope\""), std::string::npos);
  EXPECT_NE(set_param(p, "g", "0").find("g: must be in (0, 1]"), std::string::npos);
  EXPECT_NE(set_param(p, "g", "1.5").find("g: must be in"), std::string::npos);
  EXPECT_NE(set_param(p, "g", "abc").find("is not a number"), std::string::npos);
  EXPECT_NE(set_param(p, "g", "nan").find("is not a number"), std::string::npos);
  EXPECT_NE(set_param(p, "cnp_dscp", "64").find("cnp_dscp: must be in [0, 63]"), std::string::npos);
  EXPECT_NE(set_param(p, "cnp_dscp", "-1").find("not a non-negative integer"), std::string::npos);
  EXPECT_NE(set_param(p, "enabled", "yes").find("not true or false"), std::string::npos);
  EXPECT_NE(set_param(p, "rp_timer_us", "0").find("rp_timer_us: must be in (0"), std::string::npos);
  EXPECT_NE(set_param(p, "ai_mbps").find("is not NAME=VALUE"), std::string::npos);
  EXPECT_NE(set_param(p, "=3").find("is not NAME=VALUE"), std::string::npos);
  // Failed sets leave the value alone.
  EXPECT_DOUBLE_EQ(p.g, Params{}.g);
  EXPECT_EQ(p.cnp_dscp, 48u);
}

TEST(DcqcnParams, ValidateChecksTheWhole) {
  Params p;
  p.hai_mbps = 1;
  p.ai_mbps = 5;
  EXPECT_NE(validate(p).find("hai_mbps"), std::string::npos);
  p = Params{};
  p.g = 2;
  EXPECT_NE(validate(p).find("g: must be in"), std::string::npos);
  p = Params{};
  p.alpha_update_us = -1;
  EXPECT_NE(validate(p).find("alpha_update_us"), std::string::npos);
}

}  // namespace
}  // namespace isoroce::dcqcn
