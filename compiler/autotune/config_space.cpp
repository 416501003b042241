#include "compiler/autotune/config_space.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "contracts/sha256.h"

namespace kiln::autotune {

namespace detail {

struct Constraint {
  std::string name;
  std::vector<int> knobs;                  // positions of the knobs it reads, ascending
  ConfigSpace::Predicate predicate;        // a predicate constraint, or
  std::vector<std::pair<int, int>> parts;  // a product limit: (knob position, part)
  int64_t lo = 0, hi = 0;

  Json definition(const std::vector<Knob> &all) const {
    Json::Array names;
    for (int k : knobs) names.emplace_back(all[static_cast<size_t>(k)].name);
    if (predicate) {
      return Json::object({{"kind", "predicate"}, {"knobs", Json::array(names)}, {"name", name}});
    }
    Json::Array ps;
    for (const auto &[k, p] : parts) ps.push_back(Json::array({all[static_cast<size_t>(k)].name, p}));
    return Json::object(
        {{"hi", hi}, {"kind", "product_limit"}, {"lo", lo}, {"name", name}, {"parts", Json::array(ps)}});
  }
};

struct SpaceData {
  std::string template_name;
  int version = 0;
  std::vector<Knob> knobs;
  std::vector<Constraint> constraints;
  std::vector<int64_t> weight;  // weight[i] = product of the sizes of knobs before i
  int64_t size = 1;

  // Caches, filled on first use.
  mutable std::mutex mu;
  mutable std::string fingerprint;
  mutable bool counted = false;
  mutable int64_t valid_count = 0;
  mutable bool tabled = false;
  mutable std::vector<std::vector<int64_t>> valid_constrained;  // digits of the constrained knobs

  SpaceData() = default;
  SpaceData(const SpaceData &o)
      : template_name(o.template_name),
        version(o.version),
        knobs(o.knobs),
        constraints(o.constraints),
        weight(o.weight),
        size(o.size) {}
};

}  // namespace detail

using detail::Constraint;
using detail::SpaceData;

namespace {

int64_t checked_mul(int64_t a, int64_t b, const std::string &what) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) {
    throw ConfigError(what + ": the space has more than 2^63 configs");
  }
  return a * b;
}

std::string fingerprint_of(const SpaceData &d);

const std::string &cached_fingerprint(const SpaceData &d) {
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.fingerprint.empty()) d.fingerprint = fingerprint_of(d);
  return d.fingerprint;
}

Json definition_of(const SpaceData &d) {
  Json::Array knobs;
  for (const auto &k : d.knobs) {
    knobs.push_back(
        Json::object({{"kind", knob_kind_name(k.kind)}, {"name", k.name}, {"values", Json::array(k.entities)}}));
  }
  Json::Array cons;
  for (const auto &c : d.constraints) cons.push_back(c.definition(d.knobs));
  return Json::object({{"constraints", Json::array(cons)},
                       {"knobs", Json::array(knobs)},
                       {"template", d.template_name},
                       {"version", d.version}});
}

std::string fingerprint_of(const SpaceData &d) { return contracts::sha256_hex(definition_of(d).dump()); }

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i == 0) {
      small.push_back(i);
      if (i != n / i) large.push_back(n / i);
    }
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

std::vector<int64_t> powers_of_two(int64_t n) {
  std::vector<int64_t> r;
  for (int64_t p = 1; p <= n; p *= 2) r.push_back(p);
  return r;
}

const char *policy_name(SplitPolicy::Kind k) {
  switch (k) {
    case SplitPolicy::Kind::Factors:
      return "factors";
    case SplitPolicy::Kind::Power2:
      return "power2";
    case SplitPolicy::Kind::Verbose:
      return "verbose";
    case SplitPolicy::Kind::Candidate:
      return "candidate";
  }
  return "?";
}

// Does the predicate/limit hold on a config whose knobs of `c` are all set?
bool holds(const Constraint &c, const Config &cfg, const std::vector<Knob> &knobs) {
  if (c.predicate) return c.predicate(cfg);
  int64_t prod = 1;
  for (const auto &[k, part] : c.parts) {
    const Json &v = knobs[static_cast<size_t>(k)].entities[static_cast<size_t>(cfg.digits()[static_cast<size_t>(k)])];
    int64_t n = static_cast<int64_t>(v.size());
    int64_t p = part < 0 ? n + part : part;
    int64_t s = v[static_cast<size_t>(p)].as_int();
    prod = (prod > std::numeric_limits<int64_t>::max() / std::max<int64_t>(s, 1)) ? std::numeric_limits<int64_t>::max()
                                                                                  : prod * s;
  }
  return prod >= c.lo && prod <= c.hi;
}

std::string join_names(const std::vector<Knob> &knobs) {
  std::string s;
  for (const auto &k : knobs) s += (s.empty() ? "" : ", ") + k.name;
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

const char *knob_kind_name(KnobKind k) {
  switch (k) {
    case KnobKind::Split:
      return "split";
    case KnobKind::Reorder:
      return "reorder";
    case KnobKind::Annotate:
      return "annotate";
    case KnobKind::Choice:
      return "choice";
  }
  return "?";
}

const char *annotation_name(Annotation a) {
  switch (a) {
    case Annotation::None:
      return "none";
    case Annotation::Unroll:
      return "unroll";
    case Annotation::Vectorize:
      return "vec";
  }
  return "?";
}

SplitPolicy SplitPolicy::factors(int64_t max_innermost) {
  SplitPolicy p;
  p.kind = Kind::Factors;
  p.max_innermost = max_innermost;
  return p;
}

SplitPolicy SplitPolicy::power2(int64_t max_innermost) {
  SplitPolicy p;
  p.kind = Kind::Power2;
  p.max_innermost = max_innermost;
  return p;
}

SplitPolicy SplitPolicy::verbose(int64_t max_innermost) {
  SplitPolicy p;
  p.kind = Kind::Verbose;
  p.max_innermost = max_innermost;
  return p;
}

SplitPolicy SplitPolicy::candidate(std::vector<std::vector<int64_t>> inner_sizes) {
  SplitPolicy p;
  p.kind = Kind::Candidate;
  p.candidates = std::move(inner_sizes);
  return p;
}

int64_t Knob::find(const Json &value) const {
  for (size_t i = 0; i < entities.size(); ++i) {
    if (entities[i] == value) return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t uniform_index(std::mt19937_64 &rng, int64_t n) {
  if (n <= 0) throw ConfigError("uniform_index of an empty range");
  const uint64_t un = static_cast<uint64_t>(n);
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % un;
  uint64_t r;
  do {
    r = rng();
  } while (r >= limit);
  return static_cast<int64_t>(r % un);
}

// ---------------------------------------------------------------------------------------------
// Config

int Config::knob_position(const std::string &knob, const char *want) const {
  if (!data_) throw ConfigError("reading knob " + knob + " of an undefined config");
  const auto &knobs = data_->knobs;
  for (size_t i = 0; i < knobs.size(); ++i) {
    if (knobs[i].name != knob) continue;
    if (want && std::string(knob_kind_name(knobs[i].kind)) != want) {
      throw ConfigError("knob " + knob + " of template " + data_->template_name + " is a " +
                        knob_kind_name(knobs[i].kind) + " knob, not a " + want + " knob");
    }
    if (digits_[i] < 0) {
      throw ConfigError("knob " + knob +
                        " is not set in this partial config (a constraint must list every knob it reads)");
    }
    return static_cast<int>(i);
  }
  throw ConfigError("template " + data_->template_name + " has no knob '" + knob + "' (knobs: " + join_names(knobs) +
                    ")");
}

int64_t Config::index() const {
  if (!data_) throw ConfigError("index of an undefined config");
  int64_t idx = 0;
  for (size_t i = 0; i < digits_.size(); ++i) {
    if (digits_[i] < 0) throw ConfigError("index of a partial config");
    idx += digits_[i] * data_->weight[i];
  }
  return idx;
}

const std::string &Config::template_name() const {
  if (!data_) throw ConfigError("template of an undefined config");
  return data_->template_name;
}

const std::string &Config::fingerprint() const {
  if (!data_) throw ConfigError("fingerprint of an undefined config");
  return cached_fingerprint(*data_);
}

bool Config::has(const std::string &knob) const {
  if (!data_) return false;
  for (const auto &k : data_->knobs) {
    if (k.name == knob) return true;
  }
  return false;
}

const Json &Config::value(const std::string &knob) const {
  int p = knob_position(knob, nullptr);
  return data_->knobs[static_cast<size_t>(p)].entities[static_cast<size_t>(digits_[static_cast<size_t>(p)])];
}

std::vector<int64_t> Config::split(const std::string &knob) const {
  int p = knob_position(knob, "split");
  return data_->knobs[static_cast<size_t>(p)]
      .entities[static_cast<size_t>(digits_[static_cast<size_t>(p)])]
      .as_int_vector();
}

std::vector<int> Config::reorder(const std::string &knob) const {
  int p = knob_position(knob, "reorder");
  std::vector<int> r;
  for (int64_t v : data_->knobs[static_cast<size_t>(p)]
                       .entities[static_cast<size_t>(digits_[static_cast<size_t>(p)])]
                       .as_int_vector()) {
    r.push_back(static_cast<int>(v));
  }
  return r;
}

std::vector<Annotation> Config::annotate(const std::string &knob) const {
  int p = knob_position(knob, "annotate");
  std::vector<Annotation> r;
  for (const auto &s :
       data_->knobs[static_cast<size_t>(p)].entities[static_cast<size_t>(digits_[static_cast<size_t>(p)])].as_array()) {
    const std::string &n = s.as_string();
    r.push_back(n == "unroll" ? Annotation::Unroll : n == "vec" ? Annotation::Vectorize : Annotation::None);
  }
  return r;
}

int64_t Config::choice_int(const std::string &knob) const {
  int p = knob_position(knob, "choice");
  const Json &v = data_->knobs[static_cast<size_t>(p)].entities[static_cast<size_t>(digits_[static_cast<size_t>(p)])];
  if (!v.is_int()) throw ConfigError("knob " + knob + " is not an integer choice");
  return v.as_int();
}

std::string Config::choice_string(const std::string &knob) const {
  int p = knob_position(knob, "choice");
  const Json &v = data_->knobs[static_cast<size_t>(p)].entities[static_cast<size_t>(digits_[static_cast<size_t>(p)])];
  if (!v.is_string()) throw ConfigError("knob " + knob + " is not a string choice");
  return v.as_string();
}

bool Config::choice_bool(const std::string &knob) const { return choice_int(knob) != 0; }

std::string Config::to_json() const {
  if (!data_) throw ConfigError("to_json of an undefined config");
  contracts::ConfigRecord r = record();
  return Json::object({{"index", r.index}, {"knobs", r.knobs_value()}, {"space", r.space}}).dump();
}

contracts::ConfigRecord Config::record() const {
  if (!data_) throw ConfigError("record of an undefined config");
  contracts::ConfigRecord r;
  r.index = index();
  r.space = fingerprint();
  r.knobs.reserve(digits_.size());
  for (size_t i = 0; i < digits_.size(); ++i) {
    r.knobs.emplace_back(data_->knobs[i].name, data_->knobs[i].entities[static_cast<size_t>(digits_[i])]);
  }
  return r;
}

std::string Config::to_string() const {
  if (!data_) return "(undefined config)";
  std::string s;
  for (size_t i = 0; i < digits_.size(); ++i) {
    if (!s.empty()) s += ' ';
    s += data_->knobs[i].name + "=" +
         (digits_[i] < 0 ? std::string("?") : data_->knobs[i].entities[static_cast<size_t>(digits_[i])].dump());
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// ConfigSpace: definition

ConfigSpace::ConfigSpace(std::string template_name, int version) : data_(std::make_shared<SpaceData>()) {
  if (template_name.empty()) throw ConfigError("a config space needs a template name");
  data_->template_name = std::move(template_name);
  data_->version = version;
}

SpaceData &ConfigSpace::mutable_data() {
  // Configs keep the definition they were made from: a later definition works on a copy.
  if (data_.use_count() > 1) data_ = std::make_shared<SpaceData>(*data_);
  std::lock_guard<std::mutex> lock(data_->mu);
  data_->fingerprint.clear();
  data_->counted = false;
  data_->tabled = false;
  data_->valid_constrained.clear();
  return *data_;
}

void ConfigSpace::add_knob(Knob k) {
  if (k.name.empty()) throw ConfigError("template " + data_->template_name + ": a knob needs a name");
  if (has_knob(k.name)) throw ConfigError("template " + data_->template_name + " defines knob " + k.name + " twice");
  if (k.entities.empty()) {
    throw ConfigError("template " + data_->template_name + ", knob " + k.name + " (" + k.description +
                      ") has no values");
  }
  int64_t size = checked_mul(data_->size, k.size(), "template " + data_->template_name + ", knob " + k.name);
  SpaceData &d = mutable_data();
  d.weight.push_back(d.size);
  d.size = size;
  d.knobs.push_back(std::move(k));
}

void ConfigSpace::define_split(const std::string &name, int64_t extent, int parts, const SplitPolicy &policy,
                               const std::function<bool(const std::vector<int64_t> &)> &filter) {
  const std::string where = "template " + data_->template_name + ", split knob " + name;
  if (extent < 1) throw ConfigError(kiln::detail::concat(where, ": extent must be positive, got ", extent));
  if (parts < 1) throw ConfigError(kiln::detail::concat(where, ": needs at least one part, got ", parts));
  Knob k;
  k.name = name;
  k.kind = KnobKind::Split;
  k.description = kiln::detail::concat("split of ", extent, " in ", parts, " parts, ", policy_name(policy.kind));
  std::vector<std::vector<int64_t>> inners;  // inner sizes, outermost first (n-1 each)
  if (policy.kind == SplitPolicy::Kind::Candidate) {
    for (const auto &c : policy.candidates) {
      if (static_cast<int>(c.size()) != parts - 1) {
        throw ConfigError(
            kiln::detail::concat(where, ": a candidate has ", c.size(), " inner sizes, expected ", parts - 1));
      }
      int64_t prod = 1;
      for (int64_t f : c) {
        if (f < 1) throw ConfigError(kiln::detail::concat(where, ": candidate sizes must be positive, got ", f));
        prod *= f;
        if (prod > extent) break;
      }
      if (prod <= extent) inners.push_back(c);
    }
  } else {
    std::vector<int64_t> cands;
    if (policy.kind == SplitPolicy::Kind::Factors) {
      cands = divisors(extent);
    } else if (policy.kind == SplitPolicy::Kind::Power2) {
      cands = powers_of_two(extent);
    } else {
      std::set<int64_t> u;
      for (int64_t f : divisors(extent)) u.insert(f);
      for (int64_t f : powers_of_two(extent)) u.insert(f);
      cands.assign(u.begin(), u.end());
    }
    const bool exact = policy.kind == SplitPolicy::Kind::Factors;
    // Inner sizes are chosen innermost first, so the innermost varies slowest (AutoTVM's order).
    std::vector<int64_t> stack(static_cast<size_t>(parts - 1));
    std::function<void(int, int64_t)> rec = [&](int depth, int64_t prod) {
      if (depth == parts - 1) {
        if (exact && extent % prod != 0) return;
        inners.emplace_back(stack.begin(), stack.end());
        return;
      }
      for (int64_t f : cands) {
        if (prod * f > extent) break;
        if (exact && extent % (prod * f) != 0) continue;
        stack[static_cast<size_t>(parts - 2 - depth)] = f;
        rec(depth + 1, prod * f);
      }
    };
    rec(0, 1);
  }
  for (const auto &in : inners) {
    int64_t prod = 1;
    for (int64_t f : in) prod *= f;
    std::vector<int64_t> sizes;
    sizes.push_back((extent + prod - 1) / prod);
    sizes.insert(sizes.end(), in.begin(), in.end());
    int64_t innermost = sizes.back();
    if (policy.max_innermost > 0 && innermost > policy.max_innermost) continue;
    if (policy.min_innermost > 0 && innermost < policy.min_innermost) continue;
    if (filter && !filter(sizes)) continue;
    k.entities.push_back(Json::array_of(sizes));
  }
  add_knob(std::move(k));
}

std::vector<std::vector<int>> ConfigSpace::all_permutations(int n) {
  std::vector<int> p(static_cast<size_t>(std::max(n, 0)));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  std::vector<std::vector<int>> r;
  do {
    r.push_back(p);
  } while (std::next_permutation(p.begin(), p.end()));
  return r;
}

void ConfigSpace::define_reorder(const std::string &name, int n, std::vector<std::vector<int>> permutations) {
  const std::string where = "template " + data_->template_name + ", reorder knob " + name;
  Knob k;
  k.name = name;
  k.kind = KnobKind::Reorder;
  k.description = kiln::detail::concat("reorder of ", n, " axes, ", permutations.size(), " orders");
  for (const auto &p : permutations) {
    std::vector<int> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    bool ok = static_cast<int>(p.size()) == n;
    for (int i = 0; ok && i < n; ++i) ok = sorted[static_cast<size_t>(i)] == i;
    if (!ok)
      throw ConfigError(where + ": " + Json::array_of(p).dump() + " is not a permutation of " + std::to_string(n) +
                        " axes");
    Json v = Json::array_of(p);
    if (k.find(v) >= 0) throw ConfigError(where + ": permutation " + v.dump() + " is listed twice");
    k.entities.push_back(v);
  }
  add_knob(std::move(k));
}

void ConfigSpace::define_annotate(const std::string &name, const std::vector<std::vector<Annotation>> &per_axis) {
  const std::string where = "template " + data_->template_name + ", annotate knob " + name;
  Knob k;
  k.name = name;
  k.kind = KnobKind::Annotate;
  k.description = kiln::detail::concat("annotation of ", per_axis.size(), " axes");
  for (const auto &opts : per_axis) {
    if (opts.empty()) throw ConfigError(where + ": an axis has no annotation to choose from");
  }
  int64_t total = 1;
  for (const auto &opts : per_axis) total = checked_mul(total, static_cast<int64_t>(opts.size()), where);
  for (int64_t idx = 0; idx < total; ++idx) {
    // The last axis varies fastest.
    Json::Array v(per_axis.size());
    int64_t rest = idx;
    for (size_t i = per_axis.size(); i-- > 0;) {
      const int64_t n = static_cast<int64_t>(per_axis[i].size());
      v[i] = Json(annotation_name(per_axis[i][static_cast<size_t>(rest % n)]));
      rest /= n;
    }
    k.entities.push_back(Json::array(std::move(v)));
  }
  add_knob(std::move(k));
}

void ConfigSpace::define_choice(const std::string &name, const std::vector<int64_t> &values) {
  Knob k;
  k.name = name;
  k.kind = KnobKind::Choice;
  k.description = kiln::detail::concat("choice among ", values.size(), " integers");
  for (int64_t v : values) {
    if (k.find(Json(v)) >= 0) {
      throw ConfigError(kiln::detail::concat("template ", data_->template_name, ", choice knob ", name, ": value ", v,
                                             " is listed twice"));
    }
    k.entities.emplace_back(v);
  }
  add_knob(std::move(k));
}

void ConfigSpace::define_choice(const std::string &name, const std::vector<std::string> &values) {
  Knob k;
  k.name = name;
  k.kind = KnobKind::Choice;
  k.description = kiln::detail::concat("choice among ", values.size(), " strings");
  for (const auto &v : values) {
    if (k.find(Json(v)) >= 0) {
      throw ConfigError("template " + data_->template_name + ", choice knob " + name + ": value \"" + v +
                        "\" is listed twice");
    }
    k.entities.emplace_back(v);
  }
  add_knob(std::move(k));
}

void ConfigSpace::add_constraint(const std::string &name, const std::vector<std::string> &knobs, Predicate predicate) {
  const std::string where = "template " + data_->template_name + ", constraint " + name;
  if (!predicate) throw ConfigError(where + ": no predicate");
  if (knobs.empty()) throw ConfigError(where + ": lists no knobs");
  Constraint c;
  c.name = name;
  std::set<int> pos;
  for (const auto &n : knobs) {
    bool found = false;
    for (size_t i = 0; i < data_->knobs.size(); ++i) {
      if (data_->knobs[i].name == n) {
        pos.insert(static_cast<int>(i));
        found = true;
      }
    }
    if (!found) throw ConfigError(where + ": no knob named " + n + " (define knobs before their constraints)");
  }
  c.knobs.assign(pos.begin(), pos.end());
  c.predicate = std::move(predicate);
  for (const auto &o : data_->constraints) {
    if (o.name == name) throw ConfigError(where + " is defined twice");
  }
  mutable_data().constraints.push_back(std::move(c));
}

void ConfigSpace::add_product_limit(const std::string &name, const std::vector<std::pair<std::string, int>> &parts,
                                    int64_t lo, int64_t hi) {
  const std::string where = "template " + data_->template_name + ", product limit " + name;
  if (parts.empty()) throw ConfigError(where + ": lists no split parts");
  if (lo > hi) throw ConfigError(kiln::detail::concat(where, ": empty range [", lo, ", ", hi, "]"));
  Constraint c;
  c.name = name;
  c.lo = lo;
  c.hi = hi;
  std::set<int> pos;
  for (const auto &[n, part] : parts) {
    int idx = -1;
    for (size_t i = 0; i < data_->knobs.size(); ++i) {
      if (data_->knobs[i].name == n) idx = static_cast<int>(i);
    }
    if (idx < 0) throw ConfigError(where + ": no knob named " + n);
    const Knob &k = data_->knobs[static_cast<size_t>(idx)];
    if (k.kind != KnobKind::Split) throw ConfigError(where + ": knob " + n + " is not a split");
    int64_t nparts = static_cast<int64_t>(k.entities[0].size());
    if (part >= nparts || part < -nparts) {
      throw ConfigError(kiln::detail::concat(where, ": knob ", n, " has ", nparts, " parts, no part ", part));
    }
    pos.insert(idx);
    c.parts.emplace_back(idx, part);
  }
  c.knobs.assign(pos.begin(), pos.end());
  for (const auto &o : data_->constraints) {
    if (o.name == name) throw ConfigError(where + " is defined twice");
  }
  mutable_data().constraints.push_back(std::move(c));
}

// ---------------------------------------------------------------------------------------------
// ConfigSpace: queries

const std::string &ConfigSpace::template_name() const { return data_->template_name; }
int ConfigSpace::version() const { return data_->version; }
const std::vector<Knob> &ConfigSpace::knobs() const { return data_->knobs; }
bool ConfigSpace::has_constraints() const { return !data_->constraints.empty(); }
int64_t ConfigSpace::size() const { return data_->size; }

bool ConfigSpace::has_knob(const std::string &name) const {
  for (const auto &k : data_->knobs) {
    if (k.name == name) return true;
  }
  return false;
}

const Knob &ConfigSpace::knob(const std::string &name) const {
  for (const auto &k : data_->knobs) {
    if (k.name == name) return k;
  }
  throw ConfigError("template " + data_->template_name + " has no knob '" + name +
                    "' (knobs: " + join_names(data_->knobs) + ")");
}

const std::string &ConfigSpace::fingerprint() const { return cached_fingerprint(*data_); }

std::string ConfigSpace::definition_json() const { return definition_of(*data_).dump(); }

void ConfigSpace::validate_digits(const std::vector<int64_t> &digits, const char *what) const {
  if (digits.size() != data_->knobs.size()) {
    throw ConfigError(kiln::detail::concat(what, ": ", digits.size(), " digits for the ", data_->knobs.size(),
                                           " knobs of template ", data_->template_name));
  }
  for (size_t i = 0; i < digits.size(); ++i) {
    if (digits[i] < 0 || digits[i] >= data_->knobs[i].size()) {
      throw ConfigError(kiln::detail::concat(what, ": digit ", digits[i], " of knob ", data_->knobs[i].name,
                                             " is out of range [0, ", data_->knobs[i].size(), ")"));
    }
  }
}

Config ConfigSpace::get(int64_t index) const {
  if (index < 0 || index >= data_->size) {
    throw ConfigError(kiln::detail::concat("config index ", index, " is out of range [0, ", data_->size,
                                           ") of template ", data_->template_name));
  }
  std::vector<int64_t> digits(data_->knobs.size());
  for (size_t i = 0; i < digits.size(); ++i) {
    digits[i] = index % data_->knobs[i].size();
    index /= data_->knobs[i].size();
  }
  return Config(data_, std::move(digits));
}

Config ConfigSpace::from_digits(std::vector<int64_t> digits) const {
  validate_digits(digits, "from_digits");
  return Config(data_, std::move(digits));
}

Config ConfigSpace::from_values(const std::vector<std::pair<std::string, Json>> &values) const {
  std::vector<int64_t> digits(data_->knobs.size(), 0);
  for (const auto &[name, v] : values) {
    bool found = false;
    for (size_t i = 0; i < data_->knobs.size(); ++i) {
      const Knob &k = data_->knobs[i];
      if (k.name != name) continue;
      found = true;
      int64_t d = k.find(v);
      if (d < 0) {
        throw ConfigError("template " + data_->template_name + ": " + v.dump() + " is not a value of knob " + name +
                          " (" + k.description + ", " + std::to_string(k.size()) + " values)");
      }
      digits[i] = d;
    }
    if (!found) knob(name);  // throws, naming the knobs
  }
  Config c(data_, std::move(digits));
  check(c);
  return c;
}

bool ConfigSpace::satisfies(const Config &c) const {
  for (const auto &con : data_->constraints) {
    if (!holds(con, c, data_->knobs)) return false;
  }
  return true;
}

bool ConfigSpace::is_valid(const Config &c) const {
  if (!c.defined() || c.digits().size() != data_->knobs.size()) return false;
  if (c.data_ != data_ && c.fingerprint() != fingerprint()) return false;
  for (int64_t d : c.digits()) {
    if (d < 0) return false;
  }
  return satisfies(c);
}

void ConfigSpace::check(const Config &c) const {
  if (!c.defined()) throw ConfigError("undefined config for template " + data_->template_name);
  if (c.data_ != data_ && c.fingerprint() != fingerprint()) {
    throw ConfigError("config was made for another config space (template " + c.template_name() + ", fingerprint " +
                      c.fingerprint().substr(0, 16) + ") than this one (template " + data_->template_name +
                      ", fingerprint " + fingerprint().substr(0, 16) +
                      "): the template, its version or the workload changed since the config was recorded");
  }
  for (int64_t d : c.digits()) {
    if (d < 0) throw ConfigError("a partial config cannot be used as a config of template " + data_->template_name);
  }
  for (const auto &con : data_->constraints) {
    if (!holds(con, c, data_->knobs)) {
      throw ConfigError("config " + c.to_string() + " of template " + data_->template_name + " violates constraint " +
                        con.name);
    }
  }
}

namespace {

// Depth-first search over `order` (knob positions) with digits in `digits`; constraints are checked
// when their last knob in the order is set. Calls leaf() for every complete assignment of the
// ordered knobs; stops when it returns false.
class Search {
 public:
  Search(std::shared_ptr<const SpaceData> d, std::vector<int> order) : d_(std::move(d)), order_(std::move(order)) {
    checks_.resize(order_.size());
    for (size_t c = 0; c < d_->constraints.size(); ++c) {
      size_t last = 0;
      bool any = false;
      for (int k : d_->constraints[c].knobs) {
        auto it = std::find(order_.begin(), order_.end(), k);
        if (it == order_.end()) continue;
        any = true;
        last = std::max(last, static_cast<size_t>(it - order_.begin()));
      }
      if (any) checks_[last].push_back(c);
    }
  }

  template <typename Leaf>
  bool run(Config &cfg, std::vector<int64_t> &digits, size_t depth, const Leaf &leaf) {
    if (depth == order_.size()) return leaf();
    const size_t k = static_cast<size_t>(order_[depth]);
    for (int64_t v = 0; v < d_->knobs[k].size(); ++v) {
      digits[k] = v;
      cfg = make(digits);
      bool ok = true;
      for (size_t c : checks_[depth]) {
        if (!holds(d_->constraints[c], cfg, d_->knobs)) {
          ok = false;
          break;
        }
      }
      if (ok && !run(cfg, digits, depth + 1, leaf)) return false;
    }
    digits[k] = -1;
    return true;
  }

  std::function<Config(const std::vector<int64_t> &)> make;

 private:
  std::shared_ptr<const SpaceData> d_;
  std::vector<int> order_;
  std::vector<std::vector<size_t>> checks_;
};

std::vector<int> constrained_knobs(const SpaceData &d) {
  std::set<int> s;
  for (const auto &c : d.constraints) s.insert(c.knobs.begin(), c.knobs.end());
  // Most significant first, so that a search visits assignments in index order.
  return std::vector<int>(s.rbegin(), s.rend());
}

}  // namespace

int64_t ConfigSpace::count_valid() const {
  const SpaceData &d = *data_;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.counted) return d.valid_count;
  }
  int64_t count;
  if (d.constraints.empty()) {
    count = d.size;
  } else {
    std::vector<int> order = constrained_knobs(d);
    int64_t free = 1;
    for (size_t i = 0; i < d.knobs.size(); ++i) {
      if (std::find(order.begin(), order.end(), static_cast<int>(i)) == order.end()) free *= d.knobs[i].size();
    }
    Search search(data_, order);
    search.make = [&](const std::vector<int64_t> &digits) { return Config(data_, digits); };
    int64_t leaves = 0;
    std::vector<int64_t> digits(d.knobs.size(), -1);
    Config cfg;
    search.run(cfg, digits, 0, [&] {
      ++leaves;
      return true;
    });
    count = leaves * free;
  }
  std::lock_guard<std::mutex> lock(d.mu);
  d.counted = true;
  d.valid_count = count;
  return count;
}

void ConfigSpace::for_each_valid(const std::function<bool(const Config &)> &f) const {
  const SpaceData &d = *data_;
  std::vector<int> order;
  for (int i = static_cast<int>(d.knobs.size()) - 1; i >= 0; --i) order.push_back(i);
  if (d.constraints.empty()) {
    for (int64_t i = 0; i < d.size; ++i) {
      if (!f(get(i))) return;
    }
    return;
  }
  Search search(data_, order);
  search.make = [&](const std::vector<int64_t> &digits) { return Config(data_, digits); };
  std::vector<int64_t> digits(d.knobs.size(), -1);
  Config cfg;
  search.run(cfg, digits, 0, [&] { return f(cfg); });
}

std::vector<Config> ConfigSpace::enumerate(int64_t limit) const {
  std::vector<Config> r;
  if (limit == 0) return r;
  for_each_valid([&](const Config &c) {
    r.push_back(c);
    return limit < 0 || static_cast<int64_t>(r.size()) < limit;
  });
  return r;
}

Config ConfigSpace::sample(std::mt19937_64 &rng) const {
  const SpaceData &d = *data_;
  auto draw = [&] {
    std::vector<int64_t> digits(d.knobs.size());
    for (size_t i = 0; i < digits.size(); ++i) digits[i] = uniform_index(rng, d.knobs[i].size());
    return digits;
  };
  if (d.constraints.empty()) return Config(data_, draw());
  // Rejection sampling is uniform among the valid configs; when valid configs are rare, fall back
  // to a table of the valid assignments of the constrained knobs, which is uniform too.
  for (int attempt = 0; attempt < 256; ++attempt) {
    Config c(data_, draw());
    if (satisfies(c)) return c;
  }
  std::vector<int> order = constrained_knobs(d);
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.tabled) {
      Search search(data_, order);
      search.make = [&](const std::vector<int64_t> &digits) { return Config(data_, digits); };
      std::vector<int64_t> digits(d.knobs.size(), -1);
      Config cfg;
      search.run(cfg, digits, 0, [&] {
        std::vector<int64_t> row;
        for (int k : order) row.push_back(digits[static_cast<size_t>(k)]);
        d.valid_constrained.push_back(std::move(row));
        return true;
      });
      d.tabled = true;
    }
  }
  if (d.valid_constrained.empty()) {
    throw ConfigError("template " + d.template_name + ": no config satisfies the constraints");
  }
  std::vector<int64_t> digits = draw();
  const auto &row =
      d.valid_constrained[static_cast<size_t>(uniform_index(rng, static_cast<int64_t>(d.valid_constrained.size())))];
  for (size_t i = 0; i < order.size(); ++i) digits[static_cast<size_t>(order[i])] = row[i];
  return Config(data_, std::move(digits));
}

std::optional<Config> ConfigSpace::neighbour(const Config &c, std::mt19937_64 &rng) const {
  check(c);
  std::vector<std::pair<size_t, int64_t>> moves;
  std::vector<int64_t> digits = c.digits();
  for (size_t i = 0; i < digits.size(); ++i) {
    const int64_t orig = digits[i];
    for (int64_t v = 0; v < data_->knobs[i].size(); ++v) {
      if (v == orig) continue;
      if (!data_->constraints.empty()) {
        digits[i] = v;
        bool ok = satisfies(Config(data_, digits));
        digits[i] = orig;
        if (!ok) continue;
      }
      moves.emplace_back(i, v);
    }
  }
  if (moves.empty()) return std::nullopt;
  const auto &m = moves[static_cast<size_t>(uniform_index(rng, static_cast<int64_t>(moves.size())))];
  digits[m.first] = m.second;
  return Config(data_, std::move(digits));
}

Config ConfigSpace::parse_config(std::string_view text) const {
  const std::string where = "config for template " + data_->template_name;
  Json j;
  try {
    j = Json::parse(text);
  } catch (const JsonError &e) {
    throw ConfigError(where + ": " + e.what());
  }
  if (!j.is_object()) throw ConfigError(where + ": expected a JSON object, got " + Json::type_name(j.type()));
  for (const auto &[key, v] : j.as_object()) {
    (void)v;
    if (key != "index" && key != "knobs" && key != "space") {
      throw ConfigError(where + ": unknown field \"" + key + "\" (fields: index, knobs, space)");
    }
  }
  const Json *space = j.find("space");
  if (!space || !space->is_string()) throw ConfigError(where + ": field \"space\" (the space fingerprint) is missing");
  const Json *knobs = j.find("knobs");
  if (!knobs || !knobs->is_array())
    throw ConfigError(where + ": field \"knobs\" must be an array of [knob, value] pairs");
  const Json *idx = j.find("index");
  if (idx && !idx->is_int()) throw ConfigError(where + ": field \"index\" must be an integer");
  contracts::ConfigRecord record;
  try {
    record =
        contracts::ConfigRecord::make(idx ? idx->as_int() : 0, space->as_string(), contracts::knobs_from_value(*knobs));
  } catch (const contracts::ConfigRecordError &e) {
    throw ConfigError(where + ": " + e.what());
  }
  return from_record(record, idx != nullptr);
}

namespace {

// "a=1;b=[2, 3] c=x" -> {"a=1", "b=[2, 3]", "c=x"}: split at ';' and blanks outside brackets and
// quotes.
std::vector<std::string> split_assignments(std::string_view text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      current += c;
      if (c == '\\' && i + 1 < text.size()) {
        current += text[++i];
      } else if (c == '"') {
        quoted = false;
      }
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (depth <= 0 && (c == ';' || c == ' ' || c == '\t' || c == '\n')) {
      if (!current.empty()) parts.push_back(std::move(current));
      current.clear();
      continue;
    }
    current += c;
  }
  if (!current.empty()) parts.push_back(std::move(current));
  return parts;
}

}  // namespace

Config ConfigSpace::parse_config_text(std::string_view text, const Config &base) const {
  const std::string where = "config for template " + data_->template_name;
  if (!base.defined() || base.fingerprint() != fingerprint()) {
    throw ConfigError(where + ": the base config is not of this space");
  }
  const size_t first = text.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) throw ConfigError(where + ": the config is empty");
  std::vector<contracts::KnobValue> given;
  std::optional<int64_t> index;
  std::string space = fingerprint();
  try {
    if (text[first] == '{' || text[first] == '[') {
      const Json j = Json::parse(text);
      if (j.is_object() && j.contains("knobs")) {
        for (const auto &[key, v] : j.as_object()) {
          (void)v;
          if (key != "index" && key != "knobs" && key != "space") {
            throw ConfigError(where + ": unknown field \"" + key + "\" (fields: index, knobs, space)");
          }
        }
        if (const Json *s = j.find("space")) {
          if (!s->is_string()) throw ConfigError(where + ": field \"space\" must be the space fingerprint");
          space = s->as_string();
        }
        if (const Json *i = j.find("index")) {
          if (!i->is_int()) throw ConfigError(where + ": field \"index\" must be an integer");
          index = i->as_int();
        }
        given = contracts::knobs_from_value(j["knobs"]);
      } else {
        given = contracts::knobs_from_value(j);
      }
    } else {
      for (const std::string &part : split_assignments(text)) {
        const size_t eq = part.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == part.size()) {
          throw ConfigError(where + ": '" + part + "' is not knob=value (knobs: " + join_names(data_->knobs) + ")");
        }
        const std::string value = part.substr(eq + 1);
        Json v;
        try {
          v = Json::parse(value);
        } catch (const JsonError &) {
          v = Json(value);  // a bare string value
        }
        given.emplace_back(part.substr(0, eq), std::move(v));
      }
    }
  } catch (const JsonError &e) {
    throw ConfigError(where + ": " + e.what());
  } catch (const contracts::ConfigRecordError &e) {
    throw ConfigError(where + ": " + e.what());
  }
  std::vector<contracts::KnobValue> knobs;
  for (const Knob &k : data_->knobs) knobs.emplace_back(k.name, base.value(k.name));
  for (auto &entry : given) {
    // Not a structured binding: clang before 16 cannot capture one in a lambda.
    const std::string &name = entry.first;
    auto &value = entry.second;
    auto it =
        std::find_if(knobs.begin(), knobs.end(), [&](const contracts::KnobValue &kv) { return kv.first == name; });
    if (it == knobs.end()) {
      throw ConfigError(where + ": unknown knob '" + name + "' (knobs: " + join_names(data_->knobs) + ")");
    }
    for (const auto &[other, unused] : given) {
      (void)unused;
      if (&other != &name && other == name) throw ConfigError(where + ": knob " + name + " is given twice");
    }
    it->second = std::move(value);
  }
  contracts::ConfigRecord record;
  record.index = index.value_or(0);
  record.space = space;
  record.knobs = std::move(knobs);
  return from_record(record, index.has_value());
}

Config ConfigSpace::from_record(const contracts::ConfigRecord &record, bool check_index) const {
  const std::string where = "config for template " + data_->template_name;
  if (record.space != fingerprint()) {
    throw ConfigError(where + ": it was made for another config space (fingerprint " + record.space.substr(0, 16) +
                      ", this space " + fingerprint().substr(0, 16) +
                      "): the template, its version or the workload changed since it was recorded");
  }
  std::vector<int64_t> digits(data_->knobs.size(), -1);
  for (const auto &[name, value] : record.knobs) {
    size_t i = 0;
    while (i < data_->knobs.size() && data_->knobs[i].name != name) ++i;
    if (i == data_->knobs.size()) {
      throw ConfigError(where + ": unknown knob '" + name + "' (knobs: " + join_names(data_->knobs) + ")");
    }
    if (digits[i] >= 0) throw ConfigError(where + ": knob " + name + " is given twice");
    int64_t d = data_->knobs[i].find(value);
    if (d < 0) {
      throw ConfigError(where + ": " + value.dump() + " is not a value of knob " + name + " (" +
                        data_->knobs[i].description + ", " + std::to_string(data_->knobs[i].size()) + " values)");
    }
    digits[i] = d;
  }
  for (size_t i = 0; i < digits.size(); ++i) {
    if (digits[i] < 0) throw ConfigError(where + ": knob " + data_->knobs[i].name + " is missing");
  }
  Config c(data_, std::move(digits));
  if (check_index && record.index != c.index()) {
    throw ConfigError(
        kiln::detail::concat(where, ": index ", record.index, " does not match its knobs (index ", c.index(), ")"));
  }
  check(c);
  return c;
}

std::string ConfigSpace::to_string() const {
  std::ostringstream os;
  os << "config space of " << data_->template_name << " v" << data_->version << ": " << data_->size << " configs";
  if (!data_->constraints.empty()) os << " before constraints";
  os << "\n";
  for (const auto &k : data_->knobs) os << "  " << k.name << ": " << k.size() << " (" << k.description << ")\n";
  for (const auto &c : data_->constraints) os << "  constraint " << c.definition(data_->knobs).dump() << "\n";
  return os.str();
}

}  // namespace kiln::autotune
