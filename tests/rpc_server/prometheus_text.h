#pragma once
// A strict reader of the Prometheus text exposition format (0.0.4) for the daemons' /metrics
// tests: every line is "# HELP name text", "# TYPE name type" or a sample
// `name{label="value",...} value`; a family's TYPE comes before its samples and each family's
// samples are contiguous; label values use only the \\ \" \n escapes; a histogram's buckets per
// series rise in `le`, never fall in count, end with le="+Inf", and its _count equals the +Inf
// bucket. parse_exposition throws std::runtime_error naming the line that breaks a rule.
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram|summary|untyped
  std::vector<Sample> samples;

  // The samples named `name` whose labels include `labels`.
  std::vector<Sample> find(const std::string &name, const std::map<std::string, std::string> &labels = {}) const {
    std::vector<Sample> out;
    for (const Sample &s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto &[k, v] : labels) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) match = false;
      }
      if (match) out.push_back(s);
    }
    return out;
  }
  // The value of the one sample named `name` with exactly these labels; throws when absent.
  double value(const std::string &name, const std::map<std::string, std::string> &labels = {}) const {
    for (const Sample &s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    throw std::runtime_error("no sample " + name);
  }
};

namespace prometheus_detail {

inline bool metric_name(const std::string &s, bool colons = true) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colons && c == ':') ||
          (i > 0 && c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

inline double parse_value(const std::string &text) {
  if (text == "+Inf" || text == "Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  if (text.empty()) throw std::runtime_error("empty value");
  char *end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || text.find_first_of("xXiInN") != std::string::npos) {
    throw std::runtime_error("not a value: '" + text + "'");
  }
  return v;
}

// The family a sample name belongs to, given the declared types.
inline std::string family_of(const std::string &name, const std::map<std::string, std::string> &types) {
  if (types.count(name)) return name;
  for (const char *suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && (it->second == "histogram" || (it->second == "summary" && s != "_bucket"))) {
        return base;
      }
    }
  }
  return "";
}

}  // namespace prometheus_detail

inline Exposition parse_exposition(const std::string &text) {
  namespace d = prometheus_detail;
  Exposition out;
  std::set<std::string> helped, finished;
  std::string current;  // the family whose samples come now
  if (!text.empty() && text.back() != '\n') throw std::runtime_error("the exposition does not end with a newline");
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    auto fail = [&](const std::string &why) {
      throw std::runtime_error("line " + std::to_string(number) + ": " + why + ": '" + line + "'");
    };
    if (line.empty()) fail("empty line");
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, keyword, name;
      words >> hash >> keyword >> name;
      if (hash != "#") fail("a comment starts with '# '");
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a plain comment
      if (!d::metric_name(name)) fail("bad metric name");
      if (keyword == "HELP") {
        if (!helped.insert(name).second) fail("a second HELP");
        continue;
      }
      std::string type, extra;
      words >> type;
      if (words >> extra) fail("text after the type");
      if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" && type != "untyped") {
        fail("unknown type");
      }
      if (out.types.count(name)) fail("a second TYPE");
      if (finished.count(name)) fail("TYPE after the family's samples");
      out.types[name] = type;
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!d::metric_name(s.name)) fail("bad metric name");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) fail("label without '='");
        const std::string label = line.substr(i, eq - i);
        if (!d::metric_name(label, false) || label.rfind("__", 0) == 0) fail("bad label name '" + label + "'");
        if (eq + 1 >= line.size() || line[eq + 1] != '"') fail("label value not quoted");
        std::string value;
        size_t k = eq + 2;
        for (; k < line.size() && line[k] != '"'; ++k) {
          if (line[k] == '\\') {
            if (k + 1 >= line.size()) fail("escape at the end");
            const char e = line[++k];
            if (e == '\\')
              value += '\\';
            else if (e == '"')
              value += '"';
            else if (e == 'n')
              value += '\n';
            else
              fail("bad escape");
          } else {
            value += line[k];
          }
        }
        if (k >= line.size()) fail("unterminated label value");
        if (!s.labels.emplace(label, value).second) fail("label '" + label + "' twice");
        i = k + 1;
        if (i < line.size() && line[i] == ',') {
          ++i;
          if (i < line.size() && line[i] == '}') fail("trailing comma");
        } else if (i >= line.size() || line[i] != '}') {
          fail("expected ',' or '}'");
        }
      }
      if (i >= line.size()) fail("unterminated labels");
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') fail("no space before the value");
    std::istringstream rest(line.substr(i + 1));
    std::string value, timestamp, extra;
    rest >> value >> timestamp >> extra;
    if (!extra.empty()) fail("text after the timestamp");
    if (line.substr(i + 1).find("  ") != std::string::npos) fail("two spaces");
    try {
      s.value = d::parse_value(value);
      if (!timestamp.empty()) d::parse_value(timestamp);
    } catch (const std::exception &e) {
      fail(e.what());
    }
    const std::string family = d::family_of(s.name, out.types);
    if (family.empty()) fail("a sample without a TYPE before it");
    if (family != current) {
      if (finished.count(family)) fail("the samples of " + family + " are not contiguous");
      if (!current.empty()) finished.insert(current);
      current = family;
    }
    if (s.labels.count("le") && out.types[family] != "histogram") fail("'le' outside a histogram");
    if (out.types[family] == "histogram" && s.name == family + "_bucket" && !s.labels.count("le")) {
      fail("a bucket without 'le'");
    }
    if (out.types[family] == "counter" && !(s.value >= 0)) fail("a counter below zero");
    out.samples.push_back(std::move(s));
  }

  // Histograms: per series (labels without le), buckets rising, ending in +Inf == _count.
  for (const auto &[family, type] : out.types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const Sample &s : out.samples) {
      std::map<std::string, std::string> key = s.labels;
      if (s.name == family + "_bucket") {
        const std::string le = key.at("le");
        key.erase("le");
        buckets[key].emplace_back(d::parse_value(le), s.value);
      } else if (s.name == family + "_count") {
        counts[key] = s.value;
      } else if (s.name == family + "_sum") {
        sums[key] = s.value;
      }
    }
    for (const auto &[key, list] : buckets) {
      if (list.empty() || !std::isinf(list.back().first)) throw std::runtime_error(family + ": no +Inf bucket");
      for (size_t k = 1; k < list.size(); ++k) {
        if (!(list[k - 1].first < list[k].first)) throw std::runtime_error(family + ": le does not rise");
        if (list[k - 1].second > list[k].second) throw std::runtime_error(family + ": a bucket count falls");
      }
      if (!counts.count(key) || counts[key] != list.back().second) {
        throw std::runtime_error(family + ": _count is not the +Inf bucket");
      }
      if (!sums.count(key)) throw std::runtime_error(family + ": no _sum");
    }
    if (buckets.size() != counts.size()) throw std::runtime_error(family + ": a _count without buckets");
  }
  return out;
}

}  // namespace kiln::testing
