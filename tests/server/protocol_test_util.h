// Helpers shared by the request-parsing tests: a chat body with extra fields, and the check
// that a call fails with a 400 naming one parameter.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace tandem::server {

inline Json chat_body(Json extra = Json::object()) {
  Json b = {{"model", "x"}, {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

// Expects f() to throw a 400 naming `param`.
template <typename F>
void expect_400(F&& f, const std::string& param) {
  try {
    f();
    ADD_FAILURE() << "no error for " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), param) << e.what();
  }
}

}  // namespace tandem::server
