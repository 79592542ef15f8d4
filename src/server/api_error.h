// Errors a route reports to its client: an HTTP status plus the OpenAI error object. Bad user
// input is a 400 naming the offending field (`param`), as SGLang and vLLM report it.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace tandem::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

inline ApiError bad_request(const std::string& message, std::string param = "") {
  return ApiError(400, message, std::move(param));
}

// "BadRequestError", "NotFoundError", ... as the OpenAI SDKs name them.
const char* error_type(int status);

// {"object": "error", "message", "type", "param", "code", "error": {"message", "type", "param",
// "code"}}: the nested OpenAI envelope that current SGLang/vLLM return, plus the flat fields of
// their older ErrorResponse so clients written against either find what they look for.
nlohmann::ordered_json error_json(int status, const std::string& message,
                                  const std::string& param = "");

}  // namespace tandem::server
