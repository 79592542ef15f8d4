// Byte-identical rendering of real chat templates (Qwen3, DeepSeek-V3, Llama-3 from npm; GLM-4.5,
// GLM-4.7-Flash, DeepSeek-V3 / V3.1 / V3.2 tool templates committed in tests/data/templates; our
// GLM-5-style test template and the default model's template) against Python Jinja2 configured
// like transformers. The fixtures come from
// scripts/fetch_template_fixtures.sh DEST; point TANDEM_TEMPLATE_FIXTURES at DEST. Without them
// these tests fail, unless TANDEM_ALLOW_MISSING_FIXTURES=1 (then they are skipped).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "chat_template/chat_template.h"
#include "core/error.h"
#include "test_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// The fixtures folder; empty with `why` set when there is none.
std::string fixtures_dir(std::string& why) {
  const char* dir = std::getenv("TANDEM_TEMPLATE_FIXTURES");
  if (!dir || !*dir) {
    why = "TANDEM_TEMPLATE_FIXTURES is not set";
  } else if (!fs::exists(fs::path(dir) / "expected.json")) {
    why = std::string(dir) + "/expected.json does not exist";
  } else {
    return dir;
  }
  why += " (run scripts/fetch_template_fixtures.sh DEST and set TANDEM_TEMPLATE_FIXTURES=DEST)";
  return "";
}

bool missing_fixtures_allowed() {
  const char* allow = std::getenv("TANDEM_ALLOW_MISSING_FIXTURES");
  return allow && std::string(allow) == "1";
}

// Renders every case of one template from expected.json and compares with Jinja2's result.
void check_template(const std::string& name, size_t min_cases) {
  std::string why;
  std::string dir = fixtures_dir(why);
  if (dir.empty()) {
    if (missing_fixtures_allowed()) GTEST_SKIP() << "chat template fixtures missing: " << why;
    FAIL() << "chat template fixtures missing: " << why
           << "; set TANDEM_ALLOW_MISSING_FIXTURES=1 to skip instead";
  }
  auto expected = test::read_json_file(dir + "/expected.json");
  const nlohmann::ordered_json* entry = nullptr;
  for (const auto& t : expected["templates"]) {
    if (t["name"] == name) entry = &t;
  }
  ASSERT_NE(entry, nullptr) << name << " is not in " << dir << "/expected.json";

  auto loaded = load_chat_template(dir + "/" + (*entry)["dir"].get<std::string>());
  ASSERT_TRUE(loaded.has_value()) << "load_chat_template found no template for " << name;
  EXPECT_EQ(loaded->bos_token, (*entry)["bos_token"].get<std::string>());
  EXPECT_EQ(loaded->eos_token, (*entry)["eos_token"].get<std::string>());
  ChatTemplate tpl(loaded->source);

  const auto& cases = (*entry)["cases"];
  ASSERT_GE(cases.size(), min_cases);
  size_t identical = 0, raised = 0, want_errors = 0;
  for (const auto& c : cases) {
    const std::string conv = c["conversation"];
    SCOPED_TRACE(name + " x " + conv);
    if (c.contains("error")) {
      ++want_errors;
      // Jinja2 raised; the engine must refuse the same conversation. A raise_exception()
      // message must come through verbatim.
      try {
        std::string got = tpl.render(c["context"]);
        ADD_FAILURE() << "rendered, but Jinja2 raised " << c["error_type"].get<std::string>()
                      << ": " << c["error"].get<std::string>() << "\n  got: " << got;
      } catch (const InvalidArgument& e) {
        if (c["error_type"] == "TemplateError") {
          EXPECT_EQ(std::string(e.what()), c["error"].get<std::string>());
        }
        ++raised;
      }
      continue;
    }
    const std::string want = c["output"];
    try {
      std::string got = tpl.render(c["context"]);
      EXPECT_EQ(got, want) << test::first_difference(want, got);
      if (got == want) ++identical;
    } catch (const Error& e) {
      ADD_FAILURE() << "render threw: " << e.what();
    }
  }
  std::printf("[ chat template ] %s: %zu/%zu renders byte-identical, %zu/%zu errors raised too\n",
              name.c_str(), identical, cases.size() - want_errors, raised, want_errors);
}

TEST(ChatTemplateFixtures, Qwen3) {
  check_template("qwen3", 20);
}
TEST(ChatTemplateFixtures, DeepSeekV3) {
  check_template("deepseek_v3", 20);
}
TEST(ChatTemplateFixtures, Glm5Style) {
  check_template("glm5_style", 20);
}
TEST(ChatTemplateFixtures, Llama3) {
  check_template("llama3", 20);
}
TEST(ChatTemplateFixtures, Glm45) {
  check_template("glm45", 30);
}
TEST(ChatTemplateFixtures, Glm47Flash) {
  check_template("glm47_flash", 30);
}
TEST(ChatTemplateFixtures, DeepSeekV3Tools) {
  check_template("deepseek_v3_tools", 30);
}
TEST(ChatTemplateFixtures, DeepSeekV31) {
  check_template("deepseek_v31", 30);
}
TEST(ChatTemplateFixtures, DeepSeekV32) {
  check_template("deepseek_v32", 30);
}
TEST(ChatTemplateFixtures, TandemAusten) {
  check_template("tandem_austen", 30);
}

}  // namespace
}  // namespace tandem
