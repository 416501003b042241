#include "contracts/target.h"

#include <algorithm>
#include <utility>

namespace kiln::contracts {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

[[noreturn]] void bad_target(std::string_view text, const std::string &why) {
  throw TargetError("target \"" + std::string(text) + "\": " + why);
}

}  // namespace

Target Target::parse(std::string_view text) {
  std::vector<std::string_view> words = split_words(text);
  if (words.empty()) bad_target(text, "empty target");
  if (words[0][0] == '-') bad_target(text, "it must start with its kind (llvm, cuda, vta, ...)");
  Target t;
  t.kind_ = std::string(words[0]);
  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view word = words[i];
    if (word.size() < 2 || word[0] != '-') {
      bad_target(text, "\"" + std::string(word) + "\" is not an option (-name or -name=value)");
    }
    word.remove_prefix(word[1] == '-' ? 2 : 1);
    size_t eq = word.find('=');
    TargetOption option;
    option.name = std::string(word.substr(0, eq));
    if (option.name.empty() || option.name[0] == '-') {
      bad_target(text, "\"" + std::string(words[i]) + "\" has no option name");
    }
    if (eq != std::string_view::npos) option.value = std::string(word.substr(eq + 1));
    t.options_.push_back(std::move(option));
  }
  std::stable_sort(t.options_.begin(), t.options_.end(),
                   [](const TargetOption &a, const TargetOption &b) { return a.name < b.name; });
  for (size_t i = 1; i < t.options_.size(); ++i) {
    if (t.options_[i].name == t.options_[i - 1].name) {
      bad_target(text, "option -" + t.options_[i].name + " is given twice");
    }
  }
  t.canonical_ = t.kind_;
  for (const TargetOption &o : t.options_) {
    t.canonical_ += " -" + o.name;
    if (o.value) t.canonical_ += "=" + *o.value;
  }
  return t;
}

const TargetOption *Target::find(std::string_view name) const {
  for (const TargetOption &o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::optional<std::string> Target::value(std::string_view name) const {
  const TargetOption *o = find(name);
  return o ? o->value : std::nullopt;
}

std::string canonical_target(std::string_view text) { return Target::parse(text).str(); }

bool same_target(std::string_view a, std::string_view b) { return Target::parse(a) == Target::parse(b); }

void check_device_key(std::string_view key) {
  auto bad = [&](const std::string &why) { throw TargetError("device key \"" + std::string(key) + "\" " + why); };
  if (key.empty()) {
    throw TargetError("a device key (the class of identical devices, e.g. x86-znver4) is required");
  }
  if (key.size() > kMaxDeviceKeyBytes) bad("is longer than " + std::to_string(kMaxDeviceKeyBytes) + " bytes");
  for (char c : key) {
    auto u = static_cast<unsigned char>(c);
    if (is_space(c)) bad("contains whitespace");
    if (u < 0x20 || u == 0x7f) bad("contains a control character");
  }
}

std::string target_model(const Target &target) {
  for (const char *name : {"model", "mcpu", "arch"}) {
    if (auto v = target.value(name); v && !v->empty()) return *v;
  }
  return "";
}

}  // namespace kiln::contracts
