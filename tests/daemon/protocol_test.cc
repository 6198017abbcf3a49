// The control protocol's request parsing (ctrl/protocol.h): nesting bounded
// before nlohmann::json recurses over it.
#include <gtest/gtest.h>

#include <string>

#include "ctrl/client.h"
#include "ctrl/protocol.h"
#include "tests/daemon/harness.h"

namespace isoroce::test {
namespace {

std::string nested(size_t depth) {
  return "{\"op\":\"hello\",\"id\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
}

TEST(Protocol, JsonDepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(ctrl::json_depth("1"), 0u);
  EXPECT_EQ(ctrl::json_depth("{\"a\":[1,{\"b\":[]}]}"), 4u);
  EXPECT_EQ(ctrl::json_depth("{\"a\":\"[[[[{{{{\"}"), 1u) << "inside a string";
  EXPECT_EQ(ctrl::json_depth("{\"a\":\"\\\"[[[[\"}"), 1u) << "an escaped quote does not end the string";
  EXPECT_EQ(ctrl::json_depth("]]]][[", 100), 2u);
  EXPECT_EQ(ctrl::json_depth(nested(100000)), ctrl::kMaxDepth + 1) << "stops counting past the limit";
}

// Regression: 100,000 levels of brackets in "id" overflowed the stack of
// whatever copied, dumped or destroyed the parsed request (the daemon echoes
// "id"). tests/fuzz/regressions/ctrl-deep-nesting-id is the fuzzer's input.
TEST(Protocol, ParseRequestRefusesDeepNestingAndParsesTheRest) {
  EXPECT_TRUE(ctrl::parse_request(nested(100000)).is_discarded());
  EXPECT_TRUE(ctrl::parse_request(nested(ctrl::kMaxDepth)).is_discarded());  // the object adds one
  const json ok = ctrl::parse_request(nested(ctrl::kMaxDepth - 1));
  ASSERT_FALSE(ok.is_discarded());
  EXPECT_EQ(ok["op"], "hello");
  EXPECT_TRUE(ctrl::parse_request("{\"op\":").is_discarded());
  const std::string req = R"({"op":"post_send","qpn":17,"wr":{"opcode":"write","sg":[{"addr":1,"length":2,"lkey":3}]}})";
  EXPECT_EQ(ctrl::parse_request(req), json::parse(req));
}

// The daemon itself with a 70,000-deep request: tests/daemon/hardening_test.cc.

}  // namespace
}  // namespace isoroce::test
