// Engine behaviour the Jinja2 comparison cannot show: error messages and positions, the loader,
// thread safety and resource limits.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "chat_template/chat_template.h"
#include "core/error.h"
#include "test_util.h"

namespace tandem {
namespace {

using json = nlohmann::ordered_json;
using ::testing::HasSubstr;

std::string syntax_error(const std::string& source) {
  try {
    ChatTemplate t(source);
  } catch (const InvalidArgument& e) {
    ADD_FAILURE() << "syntax errors are load-time errors, not InvalidArgument: " << e.what();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no syntax error for: " << source;
  return "";
}

std::string render_error(const std::string& source, const json& context = json::object()) {
  ChatTemplate t(source);
  try {
    t.render(context);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no render error for: " << source;
  return "";
}

TEST(ChatTemplateErrors, SyntaxErrorsGiveLineColumnAndExpectation) {
  EXPECT_EQ(syntax_error("line 1\n{% if x %}\n  {{ 1 + }}{% endif %}"),
            "chat template syntax error at 3:10: expected an expression, found end of print "
            "statement '}}'");
  EXPECT_EQ(syntax_error("{% for m in messages %}\n{{ m }}"),
            "chat template syntax error at 2:8: unexpected end of template: expected 'endfor' or "
            "'else' to close the 'for' block opened at line 1");
  EXPECT_EQ(syntax_error("ab\ncd {{ x | nofilter }}"),
            "chat template syntax error at 2:11: no filter named 'nofilter'");
  EXPECT_EQ(syntax_error("{% if a %}{% endfor %}"),
            "chat template syntax error at 1:14: encountered unknown tag 'endfor'");
  EXPECT_EQ(syntax_error("é {{ 'abc }}"),
            "chat template syntax error at 1:6: unterminated string literal");
  EXPECT_EQ(syntax_error("{{ (1, 2 }}"), "chat template syntax error at 1:10: unexpected '}'");
  EXPECT_THAT(syntax_error("{% set x = 1 %}{% set %}"),
              HasSubstr("1:23: expected a variable name"));
  EXPECT_THAT(syntax_error("{% break %}"), HasSubstr("'break' is only allowed inside a loop"));
  EXPECT_THAT(syntax_error("{# never closed"), HasSubstr("1:1: missing end of comment tag"));
  EXPECT_THAT(syntax_error("{% include 'x' %}"), HasSubstr("not supported"));
}

TEST(ChatTemplateErrors, RaiseExceptionMessageIsVerbatim) {
  const char* src =
      "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
      "{{ raise_exception('Unsupported role: ' ~ m.role) }}{% endif %}{% endfor %}";
  EXPECT_EQ(render_error(src, {{"messages", {{{"role", "tool"}}}}}), "Unsupported role: tool");
}

TEST(ChatTemplateErrors, RenderErrorsNameTheLine) {
  EXPECT_EQ(render_error("a\n{{ 'x' + 1 }}"),
            "chat template error at line 2: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("{% set d = {} %}\n\n{{ d.x.y }}"),
            "chat template error at line 3: 'dict object' has no attribute 'x'");
  EXPECT_EQ(render_error("{{ messages[0].content }}"),
            "chat template error at line 1: 'messages' is undefined");
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(1) }}"),
            "chat template error at line 1: access to attribute 'append' of 'list' object is "
            "unsafe.");
  EXPECT_THAT(render_error("{{ x|wordwrap }}"), HasSubstr("not supported"));
  EXPECT_THAT(render_error("{{ 1 // 0 }}"), HasSubstr("division or modulo by zero"));
}

TEST(ChatTemplateErrors, ContextMustBeAnObject) {
  ChatTemplate t("x");
  EXPECT_THROW(t.render(json::array()), InvalidArgument);
}

TEST(ChatTemplateErrors, RunawayRecursionFailsCleanly) {
  EXPECT_THAT(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
              HasSubstr("maximum recursion depth"));
}

// Numbers beyond their C++ types (found by fuzz/chat_template.cpp): these used to escape as
// std::out_of_range instead of a template error. Floats overflow to inf and underflow to 0 as
// Python's float() does; integers and indexes beyond int64 are errors.
TEST(ChatTemplateErrors, NumbersBeyondTheirTypesAreTemplateErrors) {
  EXPECT_EQ(ChatTemplate("{{ 1.5e310 }} {{ 1e-400 }}").render(json::object()), "inf 0.0");
  EXPECT_THAT(syntax_error("{{ 0x1ffffffffffffffff }}"), HasSubstr("does not fit in 64 bits"));
  // found by fuzz/chat_template.cpp as well: a slice inside a tuple subscript was evaluated
  // without the object it slices.
  EXPECT_THAT(syntax_error("{{ 'abc'[1:, 2] }}"),
              HasSubstr("a slice cannot be part of a tuple subscript"));
  EXPECT_THAT(syntax_error("{{ x[0, ::2] }}"),
              HasSubstr("a slice cannot be part of a tuple subscript"));
  const json ctx = {{"x", {{1, 2}}}};
  EXPECT_THAT(render_error("{{ x | map(attribute='99999999999999999999') | list }}", ctx),
              HasSubstr("index 99999999999999999999 does not fit in 64 bits"));
  EXPECT_THAT(render_error("{{ '{0[99999999999999999999]}'.format(x) }}", ctx),
              HasSubstr("index 99999999999999999999 does not fit in 64 bits"));
  EXPECT_THAT(render_error("{{ '{99999999999999999999}'.format(x) }}", ctx),
              HasSubstr("Replacement index 99999999999999999999 out of range"));
  // A width or precision past int64 overflowed while it was read (UBSan; fuzz_chat_template's
  // 1M-run campaign); past a million it is refused before anything is allocated.
  EXPECT_THAT(render_error("{{ '{:>5555555555555555555555}'.format(1) }}", ctx),
              HasSubstr("Too many decimal digits in format string"));
  EXPECT_THAT(render_error("{{ '{:.99999999999999999999f}'.format(1.5) }}", ctx),
              HasSubstr("Too many decimal digits in format string"));
  EXPECT_THAT(render_error("{{ '{:>2000000}'.format(1) }}", ctx),
              HasSubstr("Too many decimal digits in format string"));
  EXPECT_EQ(ChatTemplate("{{ '{:>6}|{:.2f}'.format(1, 2.5) }}").render(json::object()),
            "     1|2.50");
  // A float beyond 64 bits converted to an integer was a cast past the range (UBSan; the same
  // campaign: a macro multiplying '88888...' strings, then |int); now an error, as NaN and
  // infinity already were. Within the range nothing changes.
  EXPECT_THAT(render_error("{{ 8.9e23 | int }}", ctx), HasSubstr("does not fit in 64 bits"));
  EXPECT_THAT(render_error("{{ '8.9e23' | int }}", ctx), HasSubstr("does not fit in 64 bits"));
  EXPECT_THAT(render_error("{{ '%d' % 1e300 }}", ctx), HasSubstr("does not fit in 64 bits"));
  EXPECT_THAT(render_error("{{ '%d' % (1e308 * 10) }}", ctx), HasSubstr("infinity"));
  EXPECT_THAT(render_error("{{ 9223372036854775807 | round(-1) }}", ctx),
              HasSubstr("does not fit in 64 bits"));
  EXPECT_EQ(
      ChatTemplate("{{ 2.9e18 | int }} {{ '%.3d' % -9223372036854775807 }}").render(json::object()),
      "2900000000000000000 -9223372036854775807");
  // A namespace holding itself prints its inner occurrence as Python prints a dict holding itself
  // ({...}); its repr recursed until the stack overflowed (the same campaign). (Python would also
  // print the list as [...] on its second visit; our lists are values, so it is printed again.)
  EXPECT_EQ(ChatTemplate("{% set ns = namespace(a=1) %}{% set ns.b = ns %}{{ ns }}|"
                         "{% set ns.c = [ns] %}{{ ns.c }}")
                .render(json::object()),
            "<Namespace {'a': 1, 'b': <Namespace {...}>}>|[<Namespace {'a': 1, 'b': <Namespace "
            "{...}>, 'c': [<Namespace {...}>]}>]");
}

TEST(ChatTemplate, ConcurrentRendersShareNothing) {
  // Namespaces and macros are per render, so one parsed template can serve many threads.
  ChatTemplate t(
      "{% set ns = namespace(n=0) %}{% macro item(x) %}<{{ x }}>{% endmacro %}"
      "{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ item(m.content) }}{% endfor %}"
      "{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      json msgs = json::array();
      for (int i = 0; i <= k; ++i) msgs.push_back({{"content", std::to_string(i)}});
      std::string want;
      for (int i = 0; i <= k; ++i) want += fmt::format("<{}>", i);
      want += std::to_string(k + 1);
      for (int r = 0; r < 300; ++r) ok[k] += t.render({{"messages", msgs}}) == want;
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(ok[k], 300) << "thread " << k;
}

TEST(ChatTemplate, GlmStyleTemplateRendersTheGlmFormat) {
  // A self-contained smoke test of the committed GLM-style template; the fixtures compare it
  // byte for byte against Jinja2.
  auto src = std::string(TANDEM_SOURCE_DIR) + "/tests/data/templates/glm5_style.jinja";
  std::ifstream in(src);
  ASSERT_TRUE(in) << src;
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ChatTemplate t(source);
  json ctx = {{"messages",
               {{{"role", "user"}, {"content", "Weather?"}},
                {{"role", "assistant"},
                 {"content", ""},
                 {"tool_calls",
                  {{{"type", "function"},
                    {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}}}},
                {{"role", "tool"}, {"content", "21C"}}}},
              {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
              {"add_generation_prompt", true},
              {"enable_thinking", false}};
  std::string out = t.render(ctx);
  EXPECT_EQ(out.rfind("[gMASK]<sop><|system|>\n# Tools", 0), 0u) << out;
  EXPECT_THAT(out, HasSubstr("<tools>\n{\"name\": \"get_weather\"}\n</tools>"));
  EXPECT_THAT(out, HasSubstr("<|user|>\nWeather?/nothink<|assistant|><think></think>\n"
                             "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris"
                             "</arg_value></tool_call><|observation|>\n<tool_response>21C"
                             "</tool_response><|assistant|></think>"));
}

class LoadChatTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = "tandem_chat_template_";
    name += std::to_string(::getpid());
    name += '_';
    name += ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(LoadChatTemplate, StringTemplateAndAddedTokenObjects) {
  write("tokenizer_config.json",
        R"({"chat_template": "{{ bos_token }}hi", "bos_token": {"__type": "AddedToken",
            "content": "<s>"}, "eos_token": "</s>"})");
  auto t = load_chat_template(dir_.string());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->source, "{{ bos_token }}hi");
  EXPECT_EQ(t->bos_token, "<s>");
  EXPECT_EQ(t->eos_token, "</s>");
}

TEST_F(LoadChatTemplate, JinjaFileWinsAndNullTokensAreEmpty) {
  write("tokenizer_config.json", R"({"chat_template": "old", "bos_token": null})");
  write("chat_template.jinja", "new\n");
  auto t = load_chat_template(dir_.string());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->source, "new\n");
  EXPECT_EQ(t->bos_token, "");
  EXPECT_EQ(t->eos_token, "");
}

TEST_F(LoadChatTemplate, NamedTemplateListPicksDefault) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"},
                              {"name": "default", "template": "D"}]})");
  auto t = load_chat_template(dir_.string());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->source, "D");
}

TEST_F(LoadChatTemplate, NamedTemplateListWithoutDefaultIsAnError) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "R"}]})");
  EXPECT_THROW(load_chat_template(dir_.string()), Error);
}

TEST_F(LoadChatTemplate, ChatTemplateJsonFallbackAndMissing) {
  EXPECT_FALSE(load_chat_template(dir_.string()));
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_FALSE(load_chat_template(dir_.string()));
  write("chat_template.json", R"({"chat_template": "J"})");
  auto t = load_chat_template(dir_.string());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->source, "J");
  EXPECT_EQ(t->eos_token, "</s>");
}

TEST_F(LoadChatTemplate, MalformedJsonIsAnError) {
  write("tokenizer_config.json", "{not json");
  EXPECT_THROW(load_chat_template(dir_.string()), Error);
}

}  // namespace
}  // namespace tandem
