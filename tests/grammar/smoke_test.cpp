#include <gtest/gtest.h>

#include "grammars.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

TEST(Smoke, JsonBytes) {
  auto v = testing::byte_vocab();
  auto ids = testing::byte_ids(*v);
  auto g = compile(testing::kJson, v);
  Matcher m(g);
  for (char c : std::string("{\"a\": [1, 2, \"x\"]}")) {
    auto mask = testing::mask_of(m);
    ASSERT_TRUE(testing::bit(mask, ids[static_cast<uint8_t>(c)])) << c;
    ASSERT_TRUE(m.accept_token(ids[static_cast<uint8_t>(c)])) << c;
  }
  EXPECT_TRUE(m.can_terminate());
  EXPECT_FALSE(m.accept_token(ids['}']));
}

}  // namespace
}  // namespace tandem::grammar
