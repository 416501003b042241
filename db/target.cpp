#include "db/target.h"

#include "db/error.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace kiln::db {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

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

[[noreturn]] void bad_target(std::string_view target, const std::string &why) {
  throw TuningDbError(TuningDbError::Kind::kBadInput,
                      "target \"" + std::string(target) + "\": " + why);
}

// (name, "=value" or "") of each option, in the order given.
std::vector<std::pair<std::string, std::string>> parse_options(std::string_view target) {
  std::vector<std::string_view> words = split_words(target);
  std::vector<std::pair<std::string, std::string>> options;
  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view word = words[i];
    if (word.size() < 2 || word[0] != '-') {
      bad_target(target, "\"" + std::string(word) + "\" is not an option (-name or -name=value)");
    }
    word.remove_prefix(word[1] == '-' ? 2 : 1);
    size_t eq = word.find('=');
    std::string name(word.substr(0, eq));
    if (name.empty() || name[0] == '-') {
      bad_target(target, "\"" + std::string(words[i]) + "\" has no option name");
    }
    std::string value = eq == std::string_view::npos ? std::string() : std::string(word.substr(eq));
    options.emplace_back(std::move(name), std::move(value));
  }
  return options;
}

}  // namespace

std::string canonical_target(std::string_view target) {
  std::vector<std::string_view> words = split_words(target);
  if (words.empty()) bad_target(target, "empty target");
  if (words[0][0] == '-') bad_target(target, "it must start with its kind (llvm, cuda, vta, ...)");
  auto options = parse_options(target);
  std::stable_sort(options.begin(), options.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (size_t i = 1; i < options.size(); ++i) {
    if (options[i].first == options[i - 1].first) {
      bad_target(target, "option -" + options[i].first + " is given twice");
    }
  }
  std::string canonical(words[0]);
  for (const auto &[name, value] : options) {
    canonical += " -";
    canonical += name;
    canonical += value;
  }
  return canonical;
}

Target Target::make(std::string_view target, std::string device_key, std::string model) {
  Target t;
  t.target = canonical_target(target);
  if (device_key.empty()) {
    bad_target(target,
               "a device key (the class of identical devices, e.g. x86-znver4) is required");
  }
  if (std::any_of(device_key.begin(), device_key.end(), is_space)) {
    bad_target(target, "device key \"" + device_key + "\" contains whitespace");
  }
  if (model.empty()) {
    for (const char *name : {"model", "mcpu", "arch"}) {
      for (const auto &[option, value] : parse_options(t.target)) {
        if (option == name && !value.empty()) {
          model = value.substr(1);
          break;
        }
      }
      if (!model.empty()) break;
    }
  }
  t.device_key = std::move(device_key);
  t.model = std::move(model);
  return t;
}

}  // namespace kiln::db
