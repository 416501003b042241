#include "contracts/json.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace kiln::contracts {

namespace {

[[noreturn]] void type_mismatch(const char *want, Json::Type got) {
  throw JsonError(std::string("expected a JSON ") + want + ", got " + Json::type_name(got));
}

[[noreturn]] void too_deep_to_write() {
  throw JsonError("cannot write JSON nested deeper than " + std::to_string(kJsonMaxDepth) + " levels");
}

// nlohmann's writer is the one the tuning database uses for its canonical JSON, so converting to
// it keeps the two byte-for-byte identical. `depth` counts the arrays and objects around `v`, so
// that neither this recursion nor nlohmann's writer goes deeper than kJsonMaxDepth.
nlohmann::json to_nlohmann(const Json &v, int depth = 0) {
  switch (v.type()) {
    case Json::Type::Null:
      return nullptr;
    case Json::Type::Bool:
      return v.as_bool();
    case Json::Type::Int:
      return v.as_int();
    case Json::Type::Float: {
      double d = v.as_double();
      if (!std::isfinite(d)) throw JsonError("JSON cannot hold a non-finite number");
      return d;
    }
    case Json::Type::String:
      return v.as_string();
    case Json::Type::Array: {
      if (depth >= kJsonMaxDepth) too_deep_to_write();
      nlohmann::json a = nlohmann::json::array();
      for (const auto &x : v.as_array()) a.push_back(to_nlohmann(x, depth + 1));
      return a;
    }
    case Json::Type::Object: {
      if (depth >= kJsonMaxDepth) too_deep_to_write();
      nlohmann::json o = nlohmann::json::object();
      for (const auto &[k, x] : v.as_object()) o[k] = to_nlohmann(x, depth + 1);
      return o;
    }
  }
  return nullptr;
}

Json from_nlohmann(const nlohmann::json &v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return Json();
    case nlohmann::json::value_t::boolean:
      return Json(v.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Json(v.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) throw JsonError("JSON integer " + std::to_string(u) + " is too large");
      return Json(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Json(v.get<double>());
    case nlohmann::json::value_t::string:
      return Json(v.get<std::string>());
    case nlohmann::json::value_t::array: {
      Json::Array a;
      for (const auto &x : v) a.push_back(from_nlohmann(x));
      return Json::array(std::move(a));
    }
    case nlohmann::json::value_t::object: {
      std::vector<Json::Member> m;
      for (auto it = v.begin(); it != v.end(); ++it) m.emplace_back(it.key(), from_nlohmann(it.value()));
      return Json::object(std::move(m));
    }
    default:
      throw JsonError("unsupported JSON value");
  }
}

}  // namespace

void check_json_depth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, which may be a quote
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        throw JsonError("JSON nested deeper than " + std::to_string(max_depth) + " levels at byte " +
                        std::to_string(i + 1));
      }
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's to report
    }
  }
}

const char *Json::type_name(Type t) {
  switch (t) {
    case Type::Null:
      return "null";
    case Type::Bool:
      return "boolean";
    case Type::Int:
      return "integer";
    case Type::Float:
      return "float";
    case Type::String:
      return "string";
    case Type::Array:
      return "array";
    case Type::Object:
      return "object";
  }
  return "?";
}

Json::~Json() {
  if (a_.empty() && o_.empty()) return;
  // Children with children of their own are moved here and freed one by one, each after its own
  // children were moved out, so no destructor runs more than one level deep.
  std::vector<Json> pending;
  auto take_children = [&pending](Json &j) {
    for (Json &child : j.a_) {
      if (!child.a_.empty() || !child.o_.empty()) pending.push_back(std::move(child));
    }
    for (Member &member : j.o_) {
      if (!member.second.a_.empty() || !member.second.o_.empty()) pending.push_back(std::move(member.second));
    }
    j.a_.clear();
    j.o_.clear();
  };
  take_children(*this);
  while (!pending.empty()) {
    Json j = std::move(pending.back());
    pending.pop_back();
    take_children(j);
  }
}

Json Json::array(Array items) {
  Json j;
  j.type_ = Type::Array;
  j.a_ = std::move(items);
  return j;
}

Json Json::object(std::vector<Member> members) {
  Json j;
  j.type_ = Type::Object;
  for (auto &m : members) j.set(m.first, std::move(m.second));
  return j;
}

bool Json::as_bool() const {
  if (type_ != Type::Bool) type_mismatch("boolean", type_);
  return b_;
}

int64_t Json::as_int() const {
  if (type_ != Type::Int) type_mismatch("integer", type_);
  return i_;
}

double Json::as_double() const {
  if (type_ == Type::Int) return static_cast<double>(i_);
  if (type_ != Type::Float) type_mismatch("number", type_);
  return d_;
}

const std::string &Json::as_string() const {
  if (type_ != Type::String) type_mismatch("string", type_);
  return s_;
}

const Json::Array &Json::as_array() const {
  if (type_ != Type::Array) type_mismatch("array", type_);
  return a_;
}

const Json::Object &Json::as_object() const {
  if (type_ != Type::Object) type_mismatch("object", type_);
  return o_;
}

std::vector<int64_t> Json::as_int_vector() const {
  std::vector<int64_t> r;
  for (const auto &x : as_array()) r.push_back(x.as_int());
  return r;
}

size_t Json::size() const {
  if (type_ == Type::Array) return a_.size();
  if (type_ == Type::Object) return o_.size();
  type_mismatch("array or object", type_);
}

const Json &Json::operator[](size_t i) const {
  const Array &a = as_array();
  if (i >= a.size()) {
    throw JsonError("JSON array index " + std::to_string(i) + " is out of range (size " + std::to_string(a.size()) +
                    ")");
  }
  return a[i];
}

void Json::push_back(Json v) {
  if (type_ == Type::Null) type_ = Type::Array;
  if (type_ != Type::Array) type_mismatch("array", type_);
  a_.push_back(std::move(v));
}

const Json *Json::find(const std::string &key) const {
  if (type_ != Type::Object) return nullptr;
  auto it =
      std::lower_bound(o_.begin(), o_.end(), key, [](const Member &m, const std::string &k) { return m.first < k; });
  if (it == o_.end() || it->first != key) return nullptr;
  return &it->second;
}

bool Json::contains(const std::string &key) const { return find(key) != nullptr; }

const Json &Json::at(const std::string &key) const {
  as_object();
  const Json *v = find(key);
  if (!v) throw JsonError("JSON object has no member \"" + key + "\"");
  return *v;
}

Json Json::get_or(const std::string &key, Json fallback) const {
  const Json *v = find(key);
  return v ? *v : fallback;
}

Json &Json::set(const std::string &key, Json value) {
  if (type_ == Type::Null) type_ = Type::Object;
  if (type_ != Type::Object) type_mismatch("object", type_);
  auto it =
      std::lower_bound(o_.begin(), o_.end(), key, [](const Member &m, const std::string &k) { return m.first < k; });
  if (it != o_.end() && it->first == key) {
    it->second = std::move(value);
    return it->second;
  }
  it = o_.insert(it, Member(key, std::move(value)));
  return it->second;
}

std::string Json::dump() const {
  try {
    return to_nlohmann(*this).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception &e) {
    throw JsonError(std::string("cannot write JSON: ") + e.what());
  }
}

Json Json::parse(std::string_view text) {
  if (text.size() > kJsonMaxBytes) {
    throw JsonError("JSON text of " + std::to_string(text.size()) + " bytes is longer than the limit of " +
                    std::to_string(kJsonMaxBytes) + " bytes");
  }
  check_json_depth(text);
  nlohmann::json v;
  try {
    v = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception &e) {
    throw JsonError(std::string("invalid JSON: ") + e.what());
  }
  return from_nlohmann(v);
}

bool Json::operator==(const Json &o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::Null:
      return true;
    case Type::Bool:
      return b_ == o.b_;
    case Type::Int:
      return i_ == o.i_;
    case Type::Float:
      return d_ == o.d_;
    case Type::String:
      return s_ == o.s_;
    case Type::Array:
      return a_ == o.a_;
    case Type::Object:
      return o_ == o.o_;
  }
  return false;
}

}  // namespace kiln::contracts
