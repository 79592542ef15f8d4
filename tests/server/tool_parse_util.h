// Helpers of the tool-call parser tests: running a parser over text cut into pieces, and the
// calls it returned, put together.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace tandem::server {

struct ParsedCall {
  std::string id, name, arguments;
};

// Everything a choice's output became.
struct Parsed {
  std::string reasoning, content;
  std::vector<ParsedCall> calls;
  bool ids_ok = true;  // every call's first delta had an id and no arguments, later ones no id
};

// Runs `text` cut at `cuts` (byte offsets, increasing) through an optional reasoning parser and
// then the tool-call parser `format`, as Generation chains them.
inline Parsed parse_pieces(const std::string& format, std::shared_ptr<const ToolSet> tools,
                           const std::string& text, const std::vector<size_t>& cuts,
                           std::optional<ReasoningParser::Options> reasoning = std::nullopt,
                           ToolCallParser::Options o = {}) {
  auto parser = make_tool_call_parser(format, std::move(tools), o);
  std::optional<ReasoningParser> rp;
  if (reasoning) rp.emplace(*reasoning);
  Parsed p;
  auto add = [&](ToolParseResult r) {
    p.content += r.content;
    for (const ToolCallDelta& d : r.calls) {
      if (d.index == p.calls.size()) {
        p.ids_ok =
            p.ids_ok && d.id.rfind("call_", 0) == 0 && d.id.size() == 29 && d.arguments.empty();
        p.calls.push_back({d.id, d.name, ""});
      } else {
        p.ids_ok = p.ids_ok && d.id.empty() && d.name.empty() && d.index + 1 == p.calls.size();
      }
      p.calls[d.index].arguments += d.arguments;
    }
  };
  auto feed = [&](const std::string& piece) {
    if (!rp) return add(parser->push(piece));
    ReasoningParser::Delta d = rp->push(piece);
    p.reasoning += d.reasoning;
    add(parser->push(d.content));
  };
  size_t at = 0;
  for (size_t cut : cuts) {
    feed(text.substr(at, cut - at));
    at = cut;
  }
  feed(text.substr(at));
  if (rp) {
    ReasoningParser::Delta d = rp->flush();
    p.reasoning += d.reasoning;
    add(parser->push(d.content));
  }
  add(parser->flush());
  return p;
}

// The same result, call ids aside (they are random).
inline void expect_same(const Parsed& a, const Parsed& b, const std::string& where) {
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << where;
  }
  EXPECT_TRUE(b.ids_ok) << where;
}

// Parses `text` whole, then cut at every byte boundary in two, then one byte at a time, and
// expects the same result every time; returns the whole-text result.
inline Parsed parse_at_every_cut(const std::string& format, std::shared_ptr<const ToolSet> tools,
                                 const std::string& text,
                                 std::optional<ReasoningParser::Options> reasoning = std::nullopt,
                                 ToolCallParser::Options o = {}) {
  const Parsed whole = parse_pieces(format, tools, text, {}, reasoning, o);
  EXPECT_TRUE(whole.ids_ok);
  for (size_t k = 0; k <= text.size(); ++k)
    expect_same(whole, parse_pieces(format, tools, text, {k}, reasoning, o),
                "cut at byte " + std::to_string(k));
  std::vector<size_t> bytes;
  for (size_t k = 1; k < text.size(); ++k) bytes.push_back(k);
  expect_same(whole, parse_pieces(format, tools, text, bytes, reasoning, o), "byte by byte");
  return whole;
}

}  // namespace tandem::server
