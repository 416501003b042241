#pragma once
// Json: a small JSON value for workload arguments, knob values and configs. Its text form is
// canonical: object keys sorted by byte order, no whitespace, integers without a decimal point,
// floating-point numbers in their shortest round-trip form (1.0 stays "1.0", so 1 and 1.0 are
// different values), strings in UTF-8 with only the escapes JSON requires. That text is what
// content keys (workload keys, space fingerprints) are computed from, so it is the same on every
// platform and matches the canonical JSON of the tuning database.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "contracts/error.h"

namespace kiln::contracts {

// Malformed JSON text, text nested too deep or too long, or a value of the wrong type where a
// given type was needed.
class JsonError : public UserError {
 public:
  using UserError::UserError;
};

// The deepest nesting of arrays and objects Kiln reads or writes as JSON ("[[1]]" is 2 deep). The
// readers and writers recurse once per level, so deeper values would exhaust the stack; no
// workload, knob or config comes near it.
constexpr int kJsonMaxDepth = 256;
// The longest JSON text Json::parse reads, in bytes.
constexpr size_t kJsonMaxBytes = size_t{16} << 20;

// Checks, without parsing, that `text` nests arrays and objects at most `max_depth` deep (brackets
// inside strings do not count). Throws JsonError "JSON nested deeper than 256 levels at byte N"
// (N counts from 1) at the first bracket past the limit. Cheap enough to run before any parser.
void check_json_depth(std::string_view text, int max_depth = kJsonMaxDepth);

class Json {
 public:
  enum class Type { Null, Bool, Int, Float, String, Array, Object };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;  // kept sorted by key, keys unique

  Json() = default;                           // null
  Json(std::nullptr_t) {}                     // NOLINT(google-explicit-constructor)
  Json(bool b) : type_(Type::Bool), b_(b) {}  // NOLINT(google-explicit-constructor)
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  Json(T v) : type_(Type::Int), i_(static_cast<int64_t>(v)) {}    // NOLINT(google-explicit-constructor)
  Json(double d) : type_(Type::Float), d_(d) {}                   // NOLINT(google-explicit-constructor)
  Json(const char *s) : type_(Type::String), s_(s) {}             // NOLINT(google-explicit-constructor)
  Json(std::string s) : type_(Type::String), s_(std::move(s)) {}  // NOLINT(google-explicit-constructor)
  Json(const Json &) = default;
  Json(Json &&) noexcept = default;
  Json &operator=(const Json &) = default;
  Json &operator=(Json &&) noexcept = default;
  // Frees nested arrays and objects without recursing, however deep a value built by code is.
  ~Json();

  static Json array(Array items = {});
  // Keys may come in any order; a repeated key keeps its last value.
  static Json object(std::vector<Member> members = {});
  template <typename T>
  static Json array_of(const std::vector<T> &items) {
    Array a;
    a.reserve(items.size());
    for (const auto &x : items) a.emplace_back(x);
    return array(std::move(a));
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_float() const { return type_ == Type::Float; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::Float; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Typed access; each throws JsonError naming the expected and the actual type.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // an int or a float
  const std::string &as_string() const;
  const Array &as_array() const;
  const Object &as_object() const;
  std::vector<int64_t> as_int_vector() const;

  // Arrays: size and elements. Objects: size is the number of members.
  size_t size() const;
  const Json &operator[](size_t i) const;
  void push_back(Json v);

  // Objects: lookup by key. operator[] and at() throw JsonError for a missing key; find() returns
  // null when absent; set() inserts or replaces.
  bool contains(const std::string &key) const;
  const Json *find(const std::string &key) const;
  const Json &operator[](const std::string &key) const { return at(key); }
  const Json &at(const std::string &key) const;
  Json &set(const std::string &key, Json value);
  // The value of `key`, or `fallback` when the object has no such member.
  Json get_or(const std::string &key, Json fallback) const;

  // The canonical text. Throws JsonError for a string that is not valid UTF-8, a non-finite
  // float, or a value nested deeper than kJsonMaxDepth.
  std::string dump() const;
  // Parses JSON text (RFC 8259); throws JsonError with the position of the first problem, and for
  // text longer than kJsonMaxBytes or nested deeper than kJsonMaxDepth.
  static Json parse(std::string_view text);

  static const char *type_name(Type t);

  bool operator==(const Json &o) const;
  bool operator!=(const Json &o) const { return !(*this == o); }

 private:
  Type type_ = Type::Null;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  Array a_;
  Object o_;
};

}  // namespace kiln::contracts
