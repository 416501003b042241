#pragma once
// Config spaces: the knobs a template exposes to the tuner, and configs (one value per knob).
//
// A space is a list of knobs, each with a finite list of values (its "entities"). A config picks
// one entity per knob; its index is the mixed-radix number whose digits are the entity positions,
// the first-defined knob being the least significant digit (AutoTVM's convention), so
// index = d0 + n0 * (d1 + n1 * (d2 + ...)).
//
// Knob kinds and their values (as JSON):
//   split    [s0, s1, ..., s(n-1)]  sizes of the n loops an axis is split into, outermost first;
//                                   s0 = ceil(extent / (s1 * ... * s(n-1))) is derived.
//   reorder  [p0, p1, ...]          a permutation: position i runs axis p_i
//   annotate ["none"|"unroll"|"vec", ...] one annotation per axis
//   choice   an integer or a string
//
// Filters. A knob's own values can be filtered when it is defined (split policies, a maximum
// innermost factor, an entity predicate): the filtered values are simply not in the knob. Cross-knob
// constraints prune combinations without enumerating the space:
//   - add_constraint(name, knobs, predicate): the predicate sees a partial config in which only
//     the listed knobs are set; it is evaluated as soon as they all are;
//   - add_product_limit(name, parts, lo, hi): lo <= product of chosen split sizes <= hi.
// With constraints, an index may denote an invalid config. size() stays the raw mixed-radix range
// (an upper bound); count_valid() is exact: knobs that no constraint mentions contribute their
// size as a factor, and the constrained knobs are counted by a depth-first search that abandons a
// branch as soon as a constraint whose knobs are all set fails.
//
// The fingerprint is the SHA-256 of the canonical JSON of the template name, its version, every
// knob (name, kind, all its values) and every constraint (its name and knobs; a product limit also
// its bounds). A predicate's code cannot be hashed: change its name, or the template version, when
// its logic changes.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "contracts/config.h"
#include "contracts/json.h"

namespace kiln::autotune {

// Knob values and configs are canonical JSON values (contracts/json.h).
using contracts::Json;
using contracts::JsonError;

// A config that does not belong to a space, or a knob definition or lookup that is wrong: unknown
// knob, value out of range, stale fingerprint, malformed config JSON, duplicate knob name.
class ConfigError : public UserError {
 public:
  using UserError::UserError;
};

enum class KnobKind { Split, Reorder, Annotate, Choice };
const char *knob_kind_name(KnobKind k);

// How the sizes of a split are chosen. Each of the n-1 inner sizes is drawn from a set of
// candidates; the outermost size is derived.
//   factors:   divisors of the extent, and the product of the inner sizes divides the extent
//              (no tails);
//   power2:    powers of two, product <= extent (tails allowed);
//   verbose:   divisors and powers of two, product <= extent (tails allowed);
//   candidate: an explicit list of inner-size tuples (n-1 each), product <= extent.
// max_innermost > 0 drops entries whose innermost size exceeds it; min_innermost likewise.
struct SplitPolicy {
  enum class Kind { Factors, Power2, Verbose, Candidate };
  Kind kind = Kind::Factors;
  int64_t max_innermost = 0;
  int64_t min_innermost = 0;
  std::vector<std::vector<int64_t>> candidates;

  static SplitPolicy factors(int64_t max_innermost = 0);
  static SplitPolicy power2(int64_t max_innermost = 0);
  static SplitPolicy verbose(int64_t max_innermost = 0);
  static SplitPolicy candidate(std::vector<std::vector<int64_t>> inner_sizes);
};

enum class Annotation { None, Unroll, Vectorize };
const char *annotation_name(Annotation a);  // "none", "unroll", "vec"

struct Knob {
  std::string name;
  KnobKind kind = KnobKind::Choice;
  std::vector<Json> entities;  // the values, in digit order
  std::string description;     // how it was defined, for messages ("split of 56 in 2 parts, verbose")

  int64_t size() const { return static_cast<int64_t>(entities.size()); }
  // Position of `value` among the entities, or -1.
  int64_t find(const Json &value) const;
};

namespace detail {
struct SpaceData;
}

class ConfigSpace;

// One value per knob of a space. Cheap to copy; it keeps its space's definition alive. A partial
// config (given to constraint predicates) has some digits unset (-1); reading such a knob throws.
class Config {
 public:
  Config() = default;

  bool defined() const { return data_ != nullptr; }
  // The mixed-radix index (throws ConfigError for a partial config).
  int64_t index() const;
  // The entity position of each knob, in definition order (-1: unset).
  const std::vector<int64_t> &digits() const { return digits_; }
  const std::string &template_name() const;
  // The fingerprint of the space this config belongs to.
  const std::string &fingerprint() const;

  bool has(const std::string &knob) const;
  // The value of a knob. Throws ConfigError for an unknown or unset knob, or a knob of another kind.
  const Json &value(const std::string &knob) const;
  std::vector<int64_t> split(const std::string &knob) const;
  std::vector<int> reorder(const std::string &knob) const;
  std::vector<Annotation> annotate(const std::string &knob) const;
  int64_t choice_int(const std::string &knob) const;
  std::string choice_string(const std::string &knob) const;
  bool choice_bool(const std::string &knob) const;  // an int choice, non-zero

  // The canonical JSON of the config: {"index":i,"knobs":[[name,value],...],"space":fingerprint}
  // with the knobs in definition order (the tuning database's config form).
  std::string to_json() const;
  // The config as every component exchanges it: index, space fingerprint and knobs in definition
  // order. Throws ConfigError for an undefined or partial config.
  contracts::ConfigRecord record() const;
  // "tile_x=[4,4,8] unroll_kw=1" for messages and logs.
  std::string to_string() const;

  bool operator==(const Config &o) const { return data_ == o.data_ && digits_ == o.digits_; }
  bool operator!=(const Config &o) const { return !(*this == o); }

 private:
  friend class ConfigSpace;
  Config(std::shared_ptr<const detail::SpaceData> data, std::vector<int64_t> digits)
      : data_(std::move(data)), digits_(std::move(digits)) {}
  int knob_position(const std::string &knob, const char *want) const;

  std::shared_ptr<const detail::SpaceData> data_;
  std::vector<int64_t> digits_;
};

class ConfigSpace {
 public:
  using Predicate = std::function<bool(const Config &)>;

  ConfigSpace(std::string template_name, int version);

  // --- definition (names must be unique; each throws ConfigError for a bad definition) ---

  // Splits an axis of `extent` into `parts` loops. `filter`, when given, keeps only the split
  // values (sizes, outermost first) for which it returns true.
  void define_split(const std::string &name, int64_t extent, int parts, const SplitPolicy &policy = {},
                    const std::function<bool(const std::vector<int64_t> &)> &filter = nullptr);
  // One of the given permutations of `n` axes.
  void define_reorder(const std::string &name, int n, std::vector<std::vector<int>> permutations);
  // All n! permutations, in lexicographic order (the identity first).
  static std::vector<std::vector<int>> all_permutations(int n);
  // One annotation per axis; axis i may take any of per_axis[i]. The values are the cartesian
  // product, the first axis varying slowest.
  void define_annotate(const std::string &name, const std::vector<std::vector<Annotation>> &per_axis);
  void define_choice(const std::string &name, const std::vector<int64_t> &values);
  void define_choice(const std::string &name, const std::vector<std::string> &values);
  void define_choice(const std::string &name, std::initializer_list<int64_t> values) {
    define_choice(name, std::vector<int64_t>(values));
  }
  void define_bool(const std::string &name) { define_choice(name, std::vector<int64_t>{0, 1}); }

  // Cross-knob constraints (see the file comment).
  void add_constraint(const std::string &name, const std::vector<std::string> &knobs, Predicate predicate);
  // lo <= product over `parts` of split(knob)[part] <= hi (part may be negative: from the end).
  void add_product_limit(const std::string &name, const std::vector<std::pair<std::string, int>> &parts, int64_t lo,
                         int64_t hi);

  // --- queries ---
  const std::string &template_name() const;
  int version() const;
  const std::vector<Knob> &knobs() const;
  const Knob &knob(const std::string &name) const;  // throws ConfigError for an unknown knob
  bool has_knob(const std::string &name) const;
  bool has_constraints() const;

  // The raw mixed-radix range: the product of the knob sizes. Exact when there are no
  // constraints, an upper bound otherwise.
  int64_t size() const;
  // The number of configs that satisfy every constraint (computed once, then cached).
  int64_t count_valid() const;

  // The config with this index (valid or not). Throws ConfigError when out of [0, size()).
  Config get(int64_t index) const;
  // The config with these entity positions (one per knob). Throws ConfigError when out of range.
  Config from_digits(std::vector<int64_t> digits) const;
  // The config with the given knob values; knobs not listed take their first value. Throws
  // ConfigError for an unknown knob, a value the knob does not have, or a violated constraint.
  Config from_values(const std::vector<std::pair<std::string, Json>> &values) const;
  // Does `c` belong to this space (same fingerprint) and satisfy every constraint?
  bool is_valid(const Config &c) const;
  // Throws ConfigError (naming both fingerprints, or the failed constraint) unless is_valid(c).
  void check(const Config &c) const;

  // Calls f on every valid config in index order until it returns false.
  void for_each_valid(const std::function<bool(const Config &)> &f) const;
  // The first `limit` valid configs in index order (all of them when limit < 0).
  std::vector<Config> enumerate(int64_t limit = -1) const;
  // A config drawn uniformly among the valid ones. Throws ConfigError when there is none.
  Config sample(std::mt19937_64 &rng) const;
  // A valid config that differs from `c` in exactly one knob, uniformly among all such; nullopt
  // when there is none.
  std::optional<Config> neighbour(const Config &c, std::mt19937_64 &rng) const;

  // The content hash identifying this space (see the file comment); 64 hex digits.
  const std::string &fingerprint() const;
  // The canonical JSON the fingerprint is computed from.
  std::string definition_json() const;

  // Parses a config's JSON (Config::to_json's form) and validates it against this space: the
  // fingerprint must match, every knob must be given once with one of its values, the index (when
  // given) must agree, constraints must hold. Throws ConfigError saying what is wrong.
  Config parse_config(std::string_view json) const;
  // A config as a user writes it on a command line, in any of these forms:
  //   knob=value pairs separated by ';' or spaces, as Config::to_string() prints them
  //     (tile_y=[4,2,8];tile_x=[16,8];fault="off"; a string value may go without quotes);
  //   the knobs as JSON: the list [["knob",value],...] or the object {"knob":value,...};
  //   the config JSON {"index":i,"knobs":[...],"space":fingerprint}, with index and space optional
  //     (the space, when given, must be this one).
  // Knobs not given take their value in `base`, a config of this space. Validated as parse_config
  // does; throws ConfigError saying what is wrong.
  Config parse_config_text(std::string_view text, const Config &base) const;
  // The config a record denotes, validated as parse_config does; with check_index false the
  // record's index is not compared (a wire config that leaves it unset). Throws ConfigError.
  Config from_record(const contracts::ConfigRecord &record, bool check_index = true) const;

  // Readable listing of the knobs and their sizes.
  std::string to_string() const;

 private:
  void add_knob(Knob k);
  detail::SpaceData &mutable_data();
  void validate_digits(const std::vector<int64_t> &digits, const char *what) const;
  bool satisfies(const Config &c) const;

  std::shared_ptr<detail::SpaceData> data_;
};

// A uniform integer in [0, n) from rng, the same on every platform (rejection sampling on the
// generator's 64-bit output).
int64_t uniform_index(std::mt19937_64 &rng, int64_t n);

}  // namespace kiln::autotune
