#include "bench_client/prometheus.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace tandem::bench {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

enum class Kind { kNone, kVerify, kAccepted, kAcceptedPerPosition };

// The value of label `key` (unescaped quotes aside), or nullopt.
std::optional<std::string_view> label_value(std::string_view labels, std::string_view key) {
  for (size_t at = labels.find(key); at != std::string_view::npos; at = labels.find(key, at + 1)) {
    const bool starts = at == 0 || labels[at - 1] == ',' || labels[at - 1] == ' ';
    const size_t q = at + key.size();
    if (!starts || labels.substr(q, 2) != "=\"") continue;
    const size_t end = labels.find('"', q + 2);
    if (end == std::string_view::npos) return std::nullopt;
    return labels.substr(q + 2, end - q - 2);
  }
  return std::nullopt;
}

Kind classify(std::string_view name, std::string_view labels) {
  if (const size_t colon = name.rfind(':'); colon != std::string_view::npos)
    name.remove_prefix(colon + 1);
  if (ends_with(name, "_created") || ends_with(name, "_bucket") || ends_with(name, "_sum") ||
      ends_with(name, "_count"))
    return Kind::kNone;
  if (ends_with(name, "_total")) name.remove_suffix(6);
  if (!contains(name, "spec")) return Kind::kNone;
  if (contains(name, "per_pos") || contains(labels, "position="))
    return contains(name, "accepted") && label_value(labels, "position")
               ? Kind::kAcceptedPerPosition
               : Kind::kNone;
  if (contains(name, "accepted")) return Kind::kAccepted;
  if (contains(name, "verify") || ends_with(name, "num_drafts")) return Kind::kVerify;
  return Kind::kNone;
}

}  // namespace

std::optional<SpecCounters> parse_spec_counters(std::string_view text) {
  struct Family {
    std::string name;
    std::string ns;  // the part before ':', "" without one
    Kind kind;
    double sum = 0;
    std::vector<double> by_position = {};  // kAcceptedPerPosition: sums per `position` label
  };
  std::vector<Family> families;  // in order of first appearance
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    // name{label="value",...} value [timestamp]
    size_t i = line.find_first_of("{ \t");
    if (i == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, i);
    std::string_view labels;
    if (line[i] == '{') {
      // Label values are quoted and may hold '}' or escaped quotes.
      size_t j = i + 1;
      bool quoted = false;
      for (; j < line.size(); ++j) {
        if (quoted && line[j] == '\\') {
          ++j;
        } else if (line[j] == '"') {
          quoted = !quoted;
        } else if (!quoted && line[j] == '}') {
          break;
        }
      }
      if (j >= line.size()) continue;
      labels = line.substr(i + 1, j - i - 1);
      i = j + 1;
    }
    const Kind kind = classify(name, labels);
    if (kind == Kind::kNone) continue;
    const std::string value(line.substr(i));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str()) continue;
    auto it = std::find_if(families.begin(), families.end(),
                           [&](const Family& f) { return f.name == name; });
    if (it == families.end()) {
      const size_t colon = name.rfind(':');
      families.push_back(
          {std::string(name),
           colon == std::string_view::npos ? std::string() : std::string(name.substr(0, colon)),
           kind});
      it = families.end() - 1;
    }
    it->sum += v;  // series of one family differ only in labels (engine, rank, model)
    if (kind == Kind::kAcceptedPerPosition) {
      const std::string pos(*label_value(labels, "position"));
      char* pos_end = nullptr;
      const long p = std::strtol(pos.c_str(), &pos_end, 10);
      // Positions are small draft indices; anything else is not this counter.
      if (pos_end != pos.c_str() && *pos_end == '\0' && p >= 0 && p < 1024) {
        if (it->by_position.size() <= static_cast<size_t>(p)) it->by_position.resize(p + 1, 0);
        it->by_position[p] += v;
      }
    }
  }
  // A server may publish the same counters under several names (Tandem also writes vLLM's);
  // take both counters from one namespace, Tandem's when present, never a mix.
  std::vector<std::string> namespaces;
  for (const Family& f : families)
    if (std::find(namespaces.begin(), namespaces.end(), f.ns) == namespaces.end())
      namespaces.push_back(f.ns);
  std::stable_partition(namespaces.begin(), namespaces.end(),
                        [](const std::string& ns) { return ns == "tandem"; });
  for (const std::string& ns : namespaces) {
    const Family *verify = nullptr, *accepted = nullptr, *per_position = nullptr;
    for (const Family& f : families) {
      if (f.ns != ns) continue;
      if (f.kind == Kind::kVerify && !verify) verify = &f;
      if (f.kind == Kind::kAccepted && !accepted) accepted = &f;
      if (f.kind == Kind::kAcceptedPerPosition && !per_position) per_position = &f;
    }
    if (verify && accepted)
      return SpecCounters{verify->sum, accepted->sum,
                          per_position ? per_position->by_position : std::vector<double>{}};
  }
  return std::nullopt;
}

std::optional<double> accept_length_delta(const SpecCounters& before, const SpecCounters& after) {
  const double rounds = after.verify_steps - before.verify_steps;
  if (!(rounds > 0)) return std::nullopt;
  return (after.accepted_tokens - before.accepted_tokens + rounds) / rounds;
}

std::vector<double> acceptance_per_position_delta(const SpecCounters& before,
                                                  const SpecCounters& after) {
  const double rounds = after.verify_steps - before.verify_steps;
  std::vector<double> out;
  if (!(rounds > 0)) return out;
  for (size_t i = 0; i < after.accepted_per_position.size(); ++i) {
    const double was =
        i < before.accepted_per_position.size() ? before.accepted_per_position[i] : 0;
    out.push_back((after.accepted_per_position[i] - was) / rounds);
  }
  return out;
}

}  // namespace tandem::bench
