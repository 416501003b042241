// Config spaces: knob values, the mixed-radix index, constraints (counting, enumeration, sampling,
// neighbours), the fingerprint, config JSON, and applying knob values to a schedule.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "compiler/autotune/apply.h"
#include "compiler/autotune/config_space.h"
#include "compiler/te/schedule.h"

namespace kiln::autotune {
namespace {

std::vector<std::vector<int64_t>> values(const Knob &k) {
  std::vector<std::vector<int64_t>> r;
  for (const auto &e : k.entities) r.push_back(e.as_int_vector());
  return r;
}

TEST(SplitKnob, Policies) {
  ConfigSpace s("t", 1);
  s.define_split("f", 12, 2);
  EXPECT_EQ(values(s.knob("f")), (std::vector<std::vector<int64_t>>{{12, 1}, {6, 2}, {4, 3}, {3, 4}, {2, 6}, {1, 12}}));
  // Ordered factorizations of 2^3 * 3 into 3 parts: C(5,2) * C(3,2) = 30.
  s.define_split("f3", 24, 3);
  EXPECT_EQ(s.knob("f3").size(), 30);
  for (const auto &v : values(s.knob("f3"))) EXPECT_EQ(v[0] * v[1] * v[2], 24);
  // Powers of two with tails: the outer size is the ceiling.
  s.define_split("p", 10, 2, SplitPolicy::power2());
  EXPECT_EQ(values(s.knob("p")), (std::vector<std::vector<int64_t>>{{10, 1}, {5, 2}, {3, 4}, {2, 8}}));
  s.define_split("v", 12, 2, SplitPolicy::verbose(8));
  EXPECT_EQ(values(s.knob("v")), (std::vector<std::vector<int64_t>>{{12, 1}, {6, 2}, {4, 3}, {3, 4}, {2, 6}, {2, 8}}));
  s.define_split("c", 100, 3, SplitPolicy::candidate({{4, 16}, {2, 8}, {200, 1}}));
  EXPECT_EQ(values(s.knob("c")), (std::vector<std::vector<int64_t>>{{2, 4, 16}, {7, 2, 8}}));
  s.define_split("filtered", 16, 2, SplitPolicy::factors(), [](const std::vector<int64_t> &v) { return v[1] >= 4; });
  EXPECT_EQ(values(s.knob("filtered")), (std::vector<std::vector<int64_t>>{{4, 4}, {2, 8}, {1, 16}}));
  EXPECT_THROW(
      s.define_split("empty", 16, 2, SplitPolicy::factors(), [](const std::vector<int64_t> &) { return false; }),
      ConfigError);
  EXPECT_THROW(s.define_split("f", 4, 2), ConfigError);  // duplicate name
  EXPECT_THROW(s.define_split("bad", 0, 2), ConfigError);
}

TEST(OtherKnobs, ReorderAnnotateChoice) {
  ConfigSpace s("t", 1);
  s.define_reorder("r", 3, ConfigSpace::all_permutations(3));
  EXPECT_EQ(s.knob("r").size(), 6);
  EXPECT_THROW(s.define_reorder("r2", 3, {{0, 1, 1}}), ConfigError);
  s.define_annotate(
      "a", {{Annotation::None, Annotation::Unroll}, {Annotation::None, Annotation::Unroll, Annotation::Vectorize}});
  EXPECT_EQ(s.knob("a").size(), 6);
  EXPECT_EQ(s.knob("a").entities[5].dump(), "[\"unroll\",\"vec\"]");
  s.define_choice("n", std::vector<int64_t>{0, 512, 1500});
  s.define_choice("s", std::vector<std::string>{"global", "local"});
  Config c = s.from_values({{"r", Json::array_of(std::vector<int64_t>{2, 0, 1})},
                            {"a", Json::array({"unroll", "vec"})},
                            {"n", 1500},
                            {"s", "local"}});
  EXPECT_EQ(c.reorder("r"), (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(c.annotate("a"), (std::vector<Annotation>{Annotation::Unroll, Annotation::Vectorize}));
  EXPECT_EQ(c.choice_int("n"), 1500);
  EXPECT_EQ(c.choice_string("s"), "local");
  EXPECT_THROW(c.split("n"), ConfigError);  // wrong kind
  EXPECT_THROW(c.value("nope"), ConfigError);
  EXPECT_THROW(s.from_values({{"n", 7}}), ConfigError);
}

TEST(Index, MixedRadixRoundTripsWithTheFirstKnobLeastSignificant) {
  ConfigSpace s("t", 1);
  s.define_split("x", 8, 2);                   // 4 values
  s.define_choice("u", {0, 1, 2});             // 3 values
  s.define_reorder("r", 2, {{0, 1}, {1, 0}});  // 2 values
  ASSERT_EQ(s.size(), 24);
  for (int64_t i = 0; i < s.size(); ++i) {
    Config c = s.get(i);
    EXPECT_EQ(c.index(), i);
    EXPECT_EQ(s.from_digits(c.digits()).index(), i);
    EXPECT_EQ(c.digits()[0], i % 4);
    EXPECT_EQ(c.digits()[1], (i / 4) % 3);
    EXPECT_EQ(c.digits()[2], i / 12);
    EXPECT_EQ(s.parse_config(c.to_json()), c);
  }
  EXPECT_THROW(s.get(24), ConfigError);
  EXPECT_THROW(s.get(-1), ConfigError);
  EXPECT_THROW(s.from_digits({0, 3, 0}), ConfigError);
  std::vector<Config> all = s.enumerate();
  ASSERT_EQ(all.size(), 24u);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(all[static_cast<size_t>(i)].index(), i);
}

TEST(Index, SpaceTooLargeIsAnError) {
  ConfigSpace s("t", 1);
  std::vector<int64_t> v(1000);
  for (int i = 0; i < 1000; ++i) v[static_cast<size_t>(i)] = i;
  for (int k = 0; k < 6; ++k) s.define_choice("k" + std::to_string(k), v);
  EXPECT_THROW(s.define_choice("k6", v), ConfigError);
}

// A space with both kinds of constraint, and brute force to compare with.
ConfigSpace constrained() {
  ConfigSpace s("toy", 3);
  s.define_split("tile_x", 8, 2);
  s.define_split("tile_y", 6, 2);
  s.define_choice("unroll", {0, 1});
  s.define_split("tile_z", 16, 2);
  s.add_product_limit("regs", {{"tile_x", 1}, {"tile_y", -1}}, 1, 8);
  s.add_constraint("unroll_small", {"unroll", "tile_z"},
                   [](const Config &c) { return c.choice_int("unroll") == 0 || c.split("tile_z")[1] <= 4; });
  return s;
}

bool brute_valid(const Config &c) {
  return c.split("tile_x")[1] * c.split("tile_y")[1] <= 8 && (c.choice_int("unroll") == 0 || c.split("tile_z")[1] <= 4);
}

TEST(Constraints, CountEnumerateAndCheck) {
  ConfigSpace s = constrained();
  EXPECT_TRUE(s.has_constraints());
  std::vector<int64_t> valid;
  for (int64_t i = 0; i < s.size(); ++i) {
    if (brute_valid(s.get(i))) valid.push_back(i);
    EXPECT_EQ(s.is_valid(s.get(i)), brute_valid(s.get(i)));
  }
  EXPECT_EQ(s.size(), 4 * 4 * 2 * 5);
  EXPECT_EQ(s.count_valid(), static_cast<int64_t>(valid.size()));
  std::vector<int64_t> got;
  s.for_each_valid([&](const Config &c) {
    got.push_back(c.index());
    return true;
  });
  EXPECT_EQ(got, valid);  // in index order
  EXPECT_EQ(s.enumerate(3).size(), 3u);
  Config bad = s.get(0);
  for (int64_t i = 0; i < s.size(); ++i) {
    if (!brute_valid(s.get(i))) {
      bad = s.get(i);
      break;
    }
  }
  EXPECT_THROW(s.check(bad), ConfigError);
  EXPECT_THROW(s.parse_config(bad.to_json()), ConfigError);
}

TEST(Constraints, PredicatesSeeOnlyTheirKnobs) {
  ConfigSpace s("t", 1);
  s.define_choice("a", {1, 2});
  s.define_choice("b", {1, 2});
  s.add_constraint("reads_b", {"a"}, [](const Config &c) { return c.choice_int("b") > 0; });
  EXPECT_THROW(s.count_valid(), ConfigError);
}

TEST(Sampling, UniformAmongValidConfigs) {
  ConfigSpace s = constrained();
  std::mt19937_64 rng(5);
  std::map<int64_t, int> hits;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    Config c = s.sample(rng);
    ASSERT_TRUE(brute_valid(c));
    ++hits[c.index()];
  }
  EXPECT_EQ(static_cast<int64_t>(hits.size()), s.count_valid());
  const double expect = static_cast<double>(draws) / static_cast<double>(s.count_valid());
  for (const auto &[idx, n] : hits) {
    EXPECT_NEAR(n, expect, 5 * std::sqrt(expect)) << idx;
  }
}

TEST(Sampling, RareValidConfigsAreStillFound) {
  ConfigSpace s("t", 1);
  std::vector<int64_t> v(100);
  for (int i = 0; i < 100; ++i) v[static_cast<size_t>(i)] = i;
  s.define_choice("a", v);
  s.define_choice("b", v);
  s.define_choice("c", {0, 1});
  s.add_constraint("one", {"a", "b"},
                   [](const Config &c) { return c.choice_int("a") == 7 && c.choice_int("b") == 42; });
  EXPECT_EQ(s.count_valid(), 2);
  std::mt19937_64 rng(1);
  std::set<int64_t> seen;
  for (int i = 0; i < 50; ++i) {
    Config c = s.sample(rng);
    EXPECT_EQ(c.choice_int("a"), 7);
    EXPECT_EQ(c.choice_int("b"), 42);
    seen.insert(c.choice_int("c"));
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Sampling, NeighboursDifferInOneKnobAndStayValid) {
  ConfigSpace s = constrained();
  std::mt19937_64 rng(9);
  for (int i = 0; i < 200; ++i) {
    Config c = s.sample(rng);
    auto n = s.neighbour(c, rng);
    ASSERT_TRUE(n.has_value());
    int changed = 0;
    for (size_t k = 0; k < c.digits().size(); ++k) changed += c.digits()[k] != n->digits()[k];
    EXPECT_EQ(changed, 1);
    EXPECT_TRUE(s.is_valid(*n));
  }
  ConfigSpace single("t", 1);
  single.define_choice("only", {3});
  EXPECT_FALSE(single.neighbour(single.get(0), rng).has_value());
}

TEST(Fingerprint, StableAndSensitiveToTheDefinition) {
  ConfigSpace s("toy", 3);
  s.define_split("tile_x", 8, 2);
  s.define_split("tile_y", 6, 2);
  s.define_choice("unroll", {0, 1});
  s.add_product_limit("regs", {{"tile_x", 1}, {"tile_y", -1}}, 1, 8);
  EXPECT_EQ(
      s.definition_json(),
      "{\"constraints\":[{\"hi\":8,\"kind\":\"product_limit\",\"lo\":1,\"name\":\"regs\",\"parts\":[[\"tile_x\",1],"
      "[\"tile_y\",-1]]}],\"knobs\":[{\"kind\":\"split\",\"name\":\"tile_x\",\"values\":[[8,1],[4,2],[2,4],[1,8]]},"
      "{\"kind\":\"split\",\"name\":\"tile_y\",\"values\":[[6,1],[3,2],[2,3],[1,6]]},{\"kind\":\"choice\",\"name\":"
      "\"unroll\",\"values\":[0,1]}],\"template\":\"toy\",\"version\":3}");
  // The same value on every platform.
  EXPECT_EQ(s.fingerprint(), "41baf555498fa66f7c5dbd7f3ba89a8409dcea9dfbef014704273cbc2d0a291d");

  auto variant = [](int version, int64_t extent, int64_t hi) {
    ConfigSpace v("toy", version);
    v.define_split("tile_x", extent, 2);
    v.define_split("tile_y", 6, 2);
    v.define_choice("unroll", {0, 1});
    v.add_product_limit("regs", {{"tile_x", 1}, {"tile_y", -1}}, 1, hi);
    return v.fingerprint();
  };
  EXPECT_EQ(variant(3, 8, 8), s.fingerprint());
  EXPECT_NE(variant(4, 8, 8), s.fingerprint());
  EXPECT_NE(variant(3, 16, 8), s.fingerprint());
  EXPECT_NE(variant(3, 8, 16), s.fingerprint());
}

TEST(ConfigJson, CanonicalAndValidated) {
  ConfigSpace s("toy", 3);
  s.define_split("tile_x", 8, 2);
  s.define_choice("unroll", {0, 1});
  s.define_choice("layout", std::vector<std::string>{"a", "b"});
  Config c = s.from_values({{"tile_x", Json::array_of(std::vector<int64_t>{2, 4})}, {"unroll", 1}, {"layout", "b"}});
  const std::string fp = s.fingerprint();
  EXPECT_EQ(c.to_json(),
            "{\"index\":14,\"knobs\":[[\"tile_x\",[2,4]],[\"unroll\",1],[\"layout\",\"b\"]],\"space\":\"" + fp + "\"}");
  EXPECT_EQ(s.parse_config(c.to_json()), c);
  // Key order and whitespace do not matter on input; the index is optional.
  EXPECT_EQ(s.parse_config(" { \"space\": \"" + fp +
                           "\", \"knobs\": [[\"layout\",\"b\"],[\"unroll\",1],[\"tile_x\",[2,4]]] }"),
            c);

  auto error_of = [&](const std::string &text) {
    try {
      s.parse_config(text);
    } catch (const ConfigError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string knobs = "\"knobs\":[[\"tile_x\",[2,4]],[\"unroll\",1],[\"layout\",\"b\"]]";
  EXPECT_NE(error_of("{\"index\":14,").find("JSON"), std::string::npos);
  EXPECT_NE(error_of("[1,2]").find("object"), std::string::npos);
  EXPECT_NE(error_of("{" + knobs + "}").find("space"), std::string::npos);
  EXPECT_NE(error_of("{" + knobs + ",\"space\":\"" + std::string(64, '0') + "\"}").find("another config space"),
            std::string::npos);
  EXPECT_NE(error_of("{\"knobs\":[[\"tile_x\",[2,4]],[\"unroll\",1],[\"layout\",\"b\"],[\"vec\",1]],\"space\":\"" + fp +
                     "\"}")
                .find("unknown knob 'vec'"),
            std::string::npos);
  EXPECT_NE(
      error_of("{\"knobs\":[[\"tile_x\",[2,4]],[\"unroll\",1]],\"space\":\"" + fp + "\"}").find("layout is missing"),
      std::string::npos);
  EXPECT_NE(error_of("{\"knobs\":[[\"tile_x\",[3,3]],[\"unroll\",1],[\"layout\",\"b\"]],\"space\":\"" + fp + "\"}")
                .find("is not a value of knob tile_x"),
            std::string::npos);
  EXPECT_NE(error_of("{\"knobs\":[[\"tile_x\",[2,4]],[\"unroll\",2],[\"layout\",\"b\"]],\"space\":\"" + fp + "\"}")
                .find("knob unroll"),
            std::string::npos);
  EXPECT_NE(error_of("{\"index\":3," + knobs + ",\"space\":\"" + fp + "\"}").find("does not match"), std::string::npos);
  EXPECT_NE(error_of("{\"extra\":1," + knobs + ",\"space\":\"" + fp + "\"}").find("unknown field"), std::string::npos);
  EXPECT_NE(
      error_of("{\"knobs\":[[\"tile_x\",[2,4]],[\"tile_x\",[2,4]],[\"unroll\",1],[\"layout\",\"b\"]],\"space\":\"" +
               fp + "\"}")
          .find("twice"),
      std::string::npos);
}

TEST(ConfigText, EveryFormAUserWritesAndKnobsLeftOutFromTheBase) {
  ConfigSpace s("t", 1);
  s.define_split("tile_y", 64, 3);
  s.define_split("tile_x", 16, 2);
  s.define_choice("fault", std::vector<std::string>{"off", "on"});
  s.define_annotate("ann", {{Annotation::None, Annotation::Unroll}});
  const Config base = s.from_values({{"tile_x", Json::array_of(std::vector<int64_t>{4, 4})}});
  const Config want = s.from_values({{"tile_y", Json::array_of(std::vector<int64_t>{4, 2, 8})},
                                     {"tile_x", Json::array_of(std::vector<int64_t>{4, 4})},
                                     {"fault", "on"}});
  for (const char *text : {"tile_y=[4,2,8];fault=\"on\"", "tile_y=[4,2,8]; fault=on;", " tile_y=[4, 2, 8]  fault=on",
                           "[[\"tile_y\",[4,2,8]],[\"fault\",\"on\"]]", "{\"fault\":\"on\",\"tile_y\":[4,2,8]}",
                           "{\"knobs\":[[\"tile_y\",[4,2,8]],[\"fault\",\"on\"]]}"}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(s.parse_config_text(text, base), want);
  }
  // What results print, and the canonical JSON with or without its fingerprint and index.
  EXPECT_EQ(s.parse_config_text(want.to_string(), base), want);
  EXPECT_EQ(s.parse_config_text(want.to_json(), base), want);
  const Json full = Json::parse(want.to_json());
  EXPECT_EQ(s.parse_config_text(Json::object({{"index", full["index"]}, {"knobs", full["knobs"]}}).dump(), base), want);
  EXPECT_EQ(s.parse_config_text(Json::object({{"knobs", full["knobs"]}}).dump(), base), want);
}

TEST(ConfigText, MistakesAreConfigErrorsSayingWhat) {
  ConfigSpace s("t", 1);
  s.define_split("tile_y", 64, 3);
  s.define_choice("fault", std::vector<std::string>{"off", "on"});
  const Config base = s.get(0);
  auto error = [&](const std::string &text) {
    try {
      s.parse_config_text(text, base);
    } catch (const ConfigError &e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "accepted: " << text;
    return std::string();
  };
  EXPECT_NE(error("").find("empty"), std::string::npos);
  EXPECT_NE(error("tile_z=[4,2,8]").find("unknown knob 'tile_z' (knobs: tile_y, fault)"), std::string::npos);
  EXPECT_NE(error("tile_y").find("'tile_y' is not knob=value"), std::string::npos);
  EXPECT_NE(error("tile_y=[3,3,3]").find("is not a value of knob tile_y"), std::string::npos);
  EXPECT_NE(error("fault=on;fault=off").find("given twice"), std::string::npos);
  EXPECT_NE(error("{\"knobs\":[],\"space\":\"" + std::string(64, '0') + "\"}").find("another config space"),
            std::string::npos);
  EXPECT_NE(error("{\"knobs\":[],\"index\":7}").find("does not match its knobs"), std::string::npos);
  EXPECT_NE(error("{\"knobs\":[],\"extra\":1}").find("unknown field \"extra\""), std::string::npos);
  EXPECT_NE(error("[1,2").find("config for template t"), std::string::npos);
}

TEST(ConfigSpace, ConfigsKeepTheirDefinition) {
  ConfigSpace s("t", 1);
  s.define_choice("a", {1, 2});
  Config c = s.get(1);
  const std::string fp = c.fingerprint();
  s.define_choice("b", {3, 4});  // a later definition does not change existing configs
  EXPECT_EQ(c.fingerprint(), fp);
  EXPECT_EQ(c.choice_int("a"), 2);
  EXPECT_NE(s.fingerprint(), fp);
  EXPECT_FALSE(s.is_valid(c));
  EXPECT_THROW(s.check(c), ConfigError);
}

TEST(Apply, SplitReorderAnnotateOnAStage) {
  auto A = te::placeholder({24, 10}, ir::Float(32), "A");
  auto B = te::compute(
      {24, 10}, [&](ir::Var i, ir::Var j) { return A(i, j) + 1.0f; }, "B");
  auto s = te::create_schedule({B});
  te::Stage st = (*s)[B];
  auto loops = apply_split(st, st.axis(0), {2, 3, 4});
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(st->leaf_iter_vars.size(), 4u);
  apply_reorder(st, {loops[0], loops[1], loops[2], st.axis(1)}, {3, 0, 2, 1});
  EXPECT_EQ(st->leaf_iter_vars[0], st.axis(1));
  apply_annotate(st, {loops[2], loops[1]}, {Annotation::Vectorize, Annotation::Unroll});
  // Illegal requests are schedule errors.
  EXPECT_THROW(apply_split(st, st.axis(0), {2, 12}), ScheduleError);
  EXPECT_THROW(apply_reorder(st, {loops[0]}, {1}), ScheduleError);
  EXPECT_THROW(apply_annotate(st, {loops[0]}, {}), ScheduleError);
}

}  // namespace
}  // namespace kiln::autotune
