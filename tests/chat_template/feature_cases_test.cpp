// Language-feature cases from tests/data/templates/feature_cases.json. Their expectations were
// produced by Python Jinja2 configured like transformers (scripts/chat_template_oracle/render.py
// check-features re-verifies them), so each case checks this engine against Jinja2 itself.
#include <gtest/gtest.h>

#include <string>

#include "chat_template/chat_template.h"
#include "core/error.h"
#include "test_util.h"

namespace tandem {
namespace {

TEST(ChatTemplateFeatures, MatchJinja2) {
  auto cases = test::read_json_file(std::string(TANDEM_SOURCE_DIR) +
                                    "/tests/data/templates/feature_cases.json");
  ASSERT_TRUE(cases.is_array()) << "feature_cases.json is missing";
  ASSERT_GT(cases.size(), 100u);
  int passed = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    const std::string source = c["template"];
    SCOPED_TRACE("case " + name + ": " + source);
    nlohmann::ordered_json context = c.value("context", nlohmann::ordered_json::object());
    if (c.value("syntax_error", false)) {
      EXPECT_THROW(ChatTemplate{source}, Error) << "Jinja2 rejects this template at compile time";
      ++passed;
      continue;
    }
    std::optional<ChatTemplate> tpl;
    try {
      tpl.emplace(source);
    } catch (const Error& e) {
      ADD_FAILURE() << "unexpected syntax error: " << e.what();
      continue;
    }
    if (c.value("error", false)) {
      EXPECT_THROW(tpl->render(context), InvalidArgument) << "Jinja2 raises while rendering this";
      ++passed;
      continue;
    }
    const std::string want = c["expected"];
    try {
      std::string got = tpl->render(context);
      EXPECT_EQ(got, want) << test::first_difference(want, got);
      if (got == want) ++passed;
    } catch (const Error& e) {
      ADD_FAILURE() << "render threw: " << e.what();
    }
  }
  std::printf("[ chat template ] %d/%zu feature cases match Jinja2\n", passed, cases.size());
}

}  // namespace
}  // namespace tandem
