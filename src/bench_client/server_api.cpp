#include "bench_client/server_api.h"

namespace tandem::bench {

using json = nlohmann::json;

namespace {

json get_json(const Endpoint& ep, const std::string& path) {
  const HttpResult r = http_get(ep, path);
  if (!r.ok()) return nullptr;
  json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json(nullptr) : j;
}

}  // namespace

std::optional<std::string> fetch_model_id(const Endpoint& ep) {
  const json j = get_json(ep, "/v1/models");
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty())
    return std::nullopt;
  const json& first = j["data"][0];
  if (first.is_object() && first.contains("id") && first["id"].is_string())
    return first["id"].get<std::string>();
  return std::nullopt;
}

std::optional<std::string> fetch_tokenizer_path(const Endpoint& ep) {
  const json j = get_json(ep, "/get_model_info");
  if (!j.is_object()) return std::nullopt;
  for (const char* key : {"tokenizer_path", "model_path"})
    if (j.contains(key) && j[key].is_string() && !j[key].get<std::string>().empty())
      return j[key].get<std::string>();
  return std::nullopt;
}

std::optional<SpecCounters> fetch_spec_counters(const Endpoint& ep) {
  const HttpResult r = http_get(ep, "/metrics");
  if (!r.ok()) return std::nullopt;
  return parse_spec_counters(r.body);
}

json fetch_server_info(const Endpoint& ep) {
  return get_json(ep, "/get_server_info");
}

std::optional<double> server_info_accept_length(const json& info) {
  if (!info.is_object()) return std::nullopt;
  const json* j = &info;
  // Prefill-decode disaggregation reports per role; acceptance happens on the decode side.
  if (info.contains("decode") && info["decode"].is_array() && !info["decode"].empty())
    j = &info["decode"][0];
  if (!j->contains("internal_states") || !(*j)["internal_states"].is_array() ||
      (*j)["internal_states"].empty())
    return std::nullopt;
  const json& s = (*j)["internal_states"][0];
  if (!s.is_object() || !s.contains("avg_spec_accept_length") ||
      !s["avg_spec_accept_length"].is_number())
    return std::nullopt;
  const double v = s["avg_spec_accept_length"].get<double>();
  if (!(v > 0)) return std::nullopt;
  return v;
}

std::optional<std::string> flush_cache(const Endpoint& ep) {
  HttpResult r = http_post_json(ep, "/flush_cache", "");
  if (r.status == 404 || r.status == 405) r = http_get(ep, "/flush_cache");
  if (r.ok()) return std::nullopt;
  return r.describe();
}

}  // namespace tandem::bench
