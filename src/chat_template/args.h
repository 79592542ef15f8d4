// Binds a call's positional and keyword arguments to a built-in's parameter names (filters,
// tests, str/dict methods, globals), with Python's errors for too many or unknown arguments.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/value.h"

namespace tandem::jinja {

class Params {
 public:
  // `required` leading parameters must be given.
  Params(std::string_view fn, const CallArgs& args, std::initializer_list<std::string_view> names,
         size_t required = 0);

  bool has(size_t i) const { return present_[i]; }
  // Undefined when not passed.
  const Value& operator[](size_t i) const { return values_[i]; }
  const Value& get(size_t i, const Value& fallback) const {
    return present_[i] ? values_[i] : fallback;
  }
  bool get_bool(size_t i, bool fallback) const;
  int64_t get_int(size_t i, int64_t fallback) const;
  // A str argument; nullopt when absent or None.
  std::optional<std::string> get_str(size_t i) const;
  std::string get_str(size_t i, std::string_view fallback) const;

 private:
  std::string fn_;
  std::vector<std::string_view> names_;
  std::vector<Value> values_;
  std::vector<bool> present_;
};

// Argument checks shared by built-ins.
int64_t expect_int(std::string_view what, const Value& v);
const std::string& expect_str(std::string_view what, const Value& v);

}  // namespace tandem::jinja
