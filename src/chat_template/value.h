// The values templates compute with: Python's None/bool/int/float/str/list/tuple/dict plus Jinja's
// Undefined, callables (built-ins, bound methods, macros) and attribute objects (namespace, loop).
// Lists, dicts and strings are immutable and shared, because the sandbox HF renders in forbids
// mutating them; only namespace objects change, through {% set ns.attr = ... %}.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tandem::jinja {

class Value;
class Interp;

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // only changes how it prints: (1, 2) instead of [1, 2]
  // Field names of a namedtuple (groupby's (grouper, list)), readable as attributes.
  std::vector<std::string> fields;
};

// Insertion-ordered like a Python dict; lookups scan linearly, which beats hashing for the
// handful of keys a chat message or JSON schema has.
struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

// What a lazy Python iterable became: a generator (|select, |map, |items, ...: always true, no
// len(), single-use) or a dict view (.items(), .keys(): has len(), not subscriptable). Jinja
// templates observe the difference (`{% if xs|select(...) %}` is always true), so it is kept.
struct IterData {
  enum class Kind { kGenerator, kView };
  std::vector<Value> items;
  Kind kind = Kind::kGenerator;
  std::string name;  // Python type name: "generator", "dict_items", ...
  // Generators are consumed by iteration; every copy of the value shares this position, as
  // every reference to a Python generator does. Values are per render, so no other thread sees it.
  mutable size_t consumed = 0;
  // Python runs a generator's body only when it is consumed, so an error raised while producing
  // the items is kept here and raised once iteration gets past the items made before it.
  std::string deferred_error;
  bool has_deferred_error = false;
};

struct Callable {
  std::string name;
  std::function<Value(Interp&, CallArgs&)> fn;
};

// Something with attributes that is not a dict: namespace(), the loop variable, cycler().
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  // Undefined when there is no such attribute.
  virtual Value attr(std::string_view name) const = 0;
  virtual std::string repr() const;
};

namespace detail {
struct Undef {
  std::shared_ptr<const std::string> hint;
  bool unsafe = false;  // the sandbox refused the attribute; calling it is a SecurityError
};
struct Str {
  std::shared_ptr<const std::string> s;
  bool markup = false;  // markupsafe.Markup, from |safe or |escape
};
}  // namespace detail

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kCallable,
    kObject,
    kIter,
  };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {}, bool unsafe = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s, bool markup = false);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value named_tuple(std::vector<Value> items, std::vector<std::string> fields);
  static Value dict(DictData d);
  static Value callable(std::string name, std::function<Value(Interp&, CallArgs&)> fn);
  static Value object(std::shared_ptr<Object> o);
  static Value generator(std::vector<Value> items, std::string name = "generator");
  // A generator whose production failed after `items`: consuming past them raises `error`.
  static Value failing_generator(std::vector<Value> items, std::string error);
  static Value view(std::vector<Value> items, std::string name);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // bool counts as a number, as in Python (bool subclasses int).
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_integral() const { return is_bool() || is_int(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_tuple() const { return is_list() && list_data().tuple; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_callable() const { return kind() == Kind::kCallable; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_iter() const { return kind() == Kind::kIter; }
  bool is_generator() const { return is_iter() && iter().kind == IterData::Kind::kGenerator; }

  bool as_bool() const { return std::get<bool>(data_); }
  // Integral value of an int or a bool.
  int64_t as_int() const;
  // Any number as a double.
  double as_double() const;
  const std::string& str() const { return *std::get<Str>(data_).s; }
  bool is_markup() const { return is_string() && std::get<Str>(data_).markup; }
  const std::vector<Value>& items() const { return list_data().items; }
  const ListData& list_data() const { return *std::get<ListPtr>(data_); }
  const DictData& dict() const { return *std::get<DictPtr>(data_); }
  const Callable& callable() const { return *std::get<CallablePtr>(data_); }
  const std::shared_ptr<Object>& object() const { return std::get<ObjectPtr>(data_); }
  const IterData& iter() const { return *std::get<IterPtr>(data_); }
  // What to say when an undefined value is used: "'x' is undefined" and the like.
  const std::string& undefined_hint() const;
  bool undefined_is_unsafe() const;

 private:
  using Undef = detail::Undef;
  using Str = detail::Str;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const DictData>;
  using CallablePtr = std::shared_ptr<const Callable>;
  using ObjectPtr = std::shared_ptr<Object>;
  using IterPtr = std::shared_ptr<const IterData>;
  std::variant<Undef, std::nullptr_t, bool, int64_t, double, Str, ListPtr, DictPtr, CallablePtr,
               ObjectPtr, IterPtr>
      data_;
};

// Python truthiness; undefined is false.
bool truthy(const Value& v);
// Python ==, including 1 == 1.0 == True and deep list/dict comparison. Undefined equals only
// undefined.
bool equals(const Value& a, const Value& b);
// Python's type name, for error messages ("'int' object is not iterable").
std::string type_name(const Value& v);
// Whether v can be a dict key (Python hashability).
bool hashable(const Value& v);

// Throws RenderError for an array or object inside kChatTemplateMaxJsonDepth or more
// arrays/objects (chat_template.h).
Value from_json(const nlohmann::ordered_json& j);

}  // namespace tandem::jinja
