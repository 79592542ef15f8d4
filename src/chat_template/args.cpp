#include "chat_template/args.h"

#include "chat_template/errors.h"

namespace tandem::jinja {

Params::Params(std::string_view fn, const CallArgs& args,
               std::initializer_list<std::string_view> names, size_t required)
    : fn_(fn), names_(names), values_(names.size()), present_(names.size(), false) {
  if (args.args.size() > names_.size()) {
    render_fail("{}() takes at most {} argument(s) ({} given)", fn_, names_.size(),
                args.args.size());
  }
  for (size_t i = 0; i < args.args.size(); ++i) {
    values_[i] = args.args[i];
    present_[i] = true;
  }
  for (const auto& [name, value] : args.kwargs) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != name) ++i;
    if (i == names_.size()) render_fail("{}() got an unexpected keyword argument '{}'", fn_, name);
    if (present_[i]) render_fail("{}() got multiple values for argument '{}'", fn_, name);
    values_[i] = value;
    present_[i] = true;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!present_[i]) render_fail("{}() missing required argument '{}'", fn_, names_[i]);
  }
}

bool Params::get_bool(size_t i, bool fallback) const {
  return present_[i] ? truthy(values_[i]) : fallback;
}

int64_t Params::get_int(size_t i, int64_t fallback) const {
  if (!present_[i] || values_[i].is_none()) return fallback;
  return expect_int(fn_ + "() argument '" + std::string(names_[i]) + "'", values_[i]);
}

std::optional<std::string> Params::get_str(size_t i) const {
  if (!present_[i] || values_[i].is_none()) return std::nullopt;
  return expect_str(fn_ + "() argument '" + std::string(names_[i]) + "'", values_[i]);
}

std::string Params::get_str(size_t i, std::string_view fallback) const {
  auto s = get_str(i);
  return s ? *s : std::string(fallback);
}

int64_t expect_int(std::string_view what, const Value& v) {
  if (!v.is_integral()) render_fail("{} must be an integer, not '{}'", what, type_name(v));
  return v.as_int();
}

const std::string& expect_str(std::string_view what, const Value& v) {
  if (!v.is_string()) render_fail("{} must be str, not '{}'", what, type_name(v));
  return v.str();
}

}  // namespace tandem::jinja
