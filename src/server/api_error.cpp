#include "server/api_error.h"

namespace tandem::server {

const char* error_type(int status) {
  switch (status) {
    case 400:
      return "BadRequestError";
    case 401:
      return "AuthenticationError";
    case 404:
      return "NotFoundError";
    case 405:
      return "MethodNotAllowedError";
    case 413:
      return "RequestTooLargeError";
    case 503:
      return "ServiceUnavailableError";
    default:
      return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

nlohmann::ordered_json error_json(int status, const std::string& message,
                                  const std::string& param) {
  const nlohmann::ordered_json p =
      param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param);
  nlohmann::ordered_json inner = {
      {"message", message}, {"type", error_type(status)}, {"param", p}, {"code", status}};
  nlohmann::ordered_json out = {{"object", "error"}};
  for (auto& [k, v] : inner.items()) out[k] = v;
  out["error"] = std::move(inner);
  return out;
}

}  // namespace tandem::server
