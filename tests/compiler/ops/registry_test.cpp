// The workload registry: template names, canonical arguments and workload keys, targets, configs
// of another space, illegal configs, and a sweep that lowers many configs of every template.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "contracts/sha256.h"
#include "compiler/ops/epilogue.h"
#include "tests/compiler/ops/example_workloads.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using autotune::Config;
using contracts::Json;
using testing::tensor;

const ops::Target kTarget = driver::resolve_target("llvm -mcpu=znver4");

TEST(Registry, BuiltinTemplates) {
  std::vector<std::string> want = {"batch_matmul.cuda",
                                   "batch_matmul.x86",
                                   "broadcast.cuda",
                                   "broadcast.x86",
                                   "conv1x1_depthwise_nchwc.x86",
                                   "conv2d_nchw.cuda",
                                   "conv2d_nchw.x86",
                                   "conv2d_nchw_implicit_gemm.cuda",
                                   "conv2d_nchw_int8.vta",
                                   "conv2d_nchwc.x86",
                                   "conv2d_transpose_nchw.x86",
                                   "dense.cuda",
                                   "dense_int8.vta",
                                   "dense_nopack.x86",
                                   "dense_pack.x86",
                                   "depthwise_conv2d_nchw.cuda",
                                   "depthwise_conv2d_nchw.x86",
                                   "depthwise_conv2d_nchwc.x86",
                                   "elemwise.cuda",
                                   "elemwise.x86",
                                   "global_pool2d.x86",
                                   "layer_norm.cuda",
                                   "layer_norm.x86",
                                   "layout_transform.x86",
                                   "matmul.cuda",
                                   "matmul.x86",
                                   "pool2d.cuda",
                                   "pool2d.x86",
                                   "reduce.cuda",
                                   "reduce.x86",
                                   "softmax.cuda",
                                   "softmax.x86"};
  EXPECT_EQ(ops::Registry::builtin().names(), want);
  EXPECT_THROW(ops::Registry::builtin().get("conv3d.x86"), ops::OpError);
}

// The names listed after "(arguments: " in an unknown-argument error: what the template accepts.
std::set<std::string> accepted_arguments(const std::string &name, const Json &example) {
  Json args = example;
  args.set("no_such_argument", 1);
  try {
    ops::Registry::builtin().workload(name, args);
  } catch (const ops::OpError &e) {
    const std::string message = e.what();
    const size_t at = message.find("(arguments: ");
    EXPECT_NE(at, std::string::npos) << message;
    if (at == std::string::npos) return {};
    std::set<std::string> names;
    std::string list = message.substr(at + 12, message.find(')', at) - at - 12);
    for (size_t start = 0; start <= list.size();) {
      size_t end = list.find(", ", start);
      if (end == std::string::npos) end = list.size();
      names.insert(list.substr(start, end - start));
      start = end + 2;
    }
    return names;
  }
  ADD_FAILURE() << name << " accepted an unknown argument";
  return {};
}

TEST(Registry, EveryTemplateDescribesTheArgumentsItAccepts) {
  const ops::Registry &registry = ops::Registry::builtin();
  for (const std::string &name : registry.names()) {
    SCOPED_TRACE(name);
    const ops::Template &t = *registry.get(name);
    EXPECT_FALSE(t.summary.empty());
    ASSERT_FALSE(t.arguments.empty());
    std::set<std::string> described;
    for (const ops::ArgumentSpec &a : t.arguments) {
      EXPECT_TRUE(described.insert(a.name).second) << a.name << " is described twice";
      EXPECT_FALSE(a.type.empty()) << a.name;
      EXPECT_FALSE(a.description.empty()) << a.name;
    }
    EXPECT_EQ(described, accepted_arguments(name, t.example));
    // The example is a workload, lowered with its default config; every key of its canonical form
    // is described, and the required arguments are in it.
    contracts::Workload w = registry.workload(name, t.example);
    for (const auto &[key, value] : w.args.as_object()) {
      (void)value;
      EXPECT_TRUE(described.count(key)) << key << " is in the canonical form but not described";
    }
    for (const ops::ArgumentSpec &a : t.arguments) {
      if (a.required()) {
        EXPECT_TRUE(t.example.contains(a.name)) << a.name << " is required but not in the example";
      }
    }
    ops::Task task(name, t.example, kTarget);
    EXPECT_NO_THROW(task.lower(task.default_config()));
  }
}

TEST(Registry, EveryEpilogueFormatIsAcceptedAsShown) {
  std::set<std::string> ops_listed;
  for (const ops::EpilogueOpFormat &f : ops::epilogue_formats()) {
    SCOPED_TRACE(f.descriptor);
    EXPECT_FALSE(f.meaning.empty());
    const Json d = Json::parse(f.descriptor);
    ops_listed.insert(d["op"].as_string());
    const Json canonical = ops::canonical_epilogue(Json::array({d}), ir::Float(32), "test");
    EXPECT_EQ(canonical[0].dump(), d.dump()) << "the format is not shown in canonical form";
  }
  EXPECT_EQ(ops_listed.size(), ops::epilogue_formats().size());
  EXPECT_EQ(ops_listed.size(), 23u);
}

TEST(Registry, WorkloadKeyIsAFixedContentHash) {
  Json args = Json::object({{"data", tensor({1, 512})}, {"weight", tensor({1000, 512})}});
  contracts::Workload w = ops::Registry::builtin().workload("dense_pack.x86", args);
  EXPECT_EQ(w.args_json,
            "{\"data\":{\"dtype\":\"float32\",\"shape\":[1,512]},\"epilogue\":[],\"out_dtype\":\"float32\","
            "\"weight\":{\"dtype\":\"float32\",\"shape\":[1000,512]}}");
  // The same value on every platform (and the same as the tuning database computes).
  EXPECT_EQ(w.key, "462a1ddaeae7d682cd55943536841b6e848fa4c0e17e64e3c068426963deb6d0");
  EXPECT_EQ(w.key, contracts::sha256_hex("dense_pack.x86\n" + w.args_json));
}

TEST(Registry, EquivalentArgumentsGiveTheSameKey) {
  Json a = Json::object({{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{1, 3, 8, 8})}})},
                         {"kernel", tensor({4, 3, 3, 3})},
                         {"padding", 1}});
  Json b = Json::object({{"kernel", tensor({4, 3, 3, 3})},
                         {"data", tensor({1, 3, 8, 8})},
                         {"padding", Json::array_of(std::vector<int64_t>{1, 1, 1, 1})},
                         {"strides", Json::array_of(std::vector<int64_t>{1, 1})},
                         {"groups", 1},
                         {"epilogue", Json::array()}});
  ops::Task ta("conv2d_nchw.x86", a, kTarget), tb("conv2d_nchw.x86", b, kTarget);
  EXPECT_EQ(ta.key(), tb.key());
  Json c = b;
  c.set("epilogue", Json::array({ops::epilogue::relu()}));
  EXPECT_NE(ops::Task("conv2d_nchw.x86", c, kTarget).key(), ta.key());
  // Clip bounds are canonical floats: 0 and 0.0 are the same bound.
  Json d1 = b, d2 = b;
  d1.set("epilogue", Json::array({Json::object({{"op", "clip"}, {"min", 0}, {"max", 6}})}));
  d2.set("epilogue", Json::array({ops::epilogue::clip(0.0, 6.0)}));
  EXPECT_EQ(ops::Task("conv2d_nchw.x86", d1, kTarget).key(), ops::Task("conv2d_nchw.x86", d2, kTarget).key());
}

// The message of the OpError that making the task throws, or "" when it is made.
std::string task_error(const std::string &name, const Json &args) {
  try {
    ops::Task task(name, args, kTarget);
  } catch (const ops::OpError &e) {
    return e.what();
  }
  return "";
}

TEST(Registry, TensorsBeyondTheIndexLimitAreClearErrors) {
  const Json relu = Json::array({ops::epilogue::relu()});
  const std::string limit = "a tensor may have at most 2147483647 (2^31 - 1: tensors are indexed with 32-bit integers)";
  // Just below the limit, and just above it.
  EXPECT_EQ(task_error("elemwise.x86", Json::object({{"data", tensor({3, 715827882})}, {"epilogue", relu}})), "");
  std::string e = task_error("elemwise.x86", Json::object({{"data", tensor({2, 1073741824})}, {"epilogue", relu}}));
  EXPECT_NE(e.find("workload elemwise.x86: \"data\" has 2147483648 elements (shape [2,1073741824]); " + limit),
            std::string::npos)
      << e;
  // An element count beyond 64 bits.
  e = task_error("elemwise.x86",
                 Json::object({{"data", tensor({1073741824, 1073741824, 1073741824})}, {"epilogue", relu}}));
  EXPECT_NE(e.find("\"data\" has more than 2^63 elements"), std::string::npos) << e;
  EXPECT_EQ(e.find("extent must be positive"), std::string::npos) << e;
  // A dimension beyond its own limit names it.
  e = task_error("elemwise.x86", Json::object({{"data", tensor({2147483648})}, {"epilogue", relu}}));
  EXPECT_NE(e.find("must hold integers from 1 to 1073741824, got [2147483648]"), std::string::npos) << e;
  // Outputs larger than their inputs.
  e = task_error("matmul.x86", Json::object({{"a", tensor({1048576, 1})}, {"b", tensor({1, 1048576})}}));
  EXPECT_NE(e.find("workload matmul.x86: tensor \"matmul\" would have 1099511627776 elements (shape [1048576, "
                   "1048576]); " +
                   limit),
            std::string::npos)
      << e;
  e = task_error("broadcast.x86", Json::object({{"lhs", tensor({65536, 1})}, {"rhs", tensor({65536})}}));
  EXPECT_NE(e.find("would have 4294967296 elements"), std::string::npos) << e;
  e = task_error(
      "conv2d_transpose_nchw.x86",
      Json::object({{"data", tensor({1, 1, 40000, 40000})}, {"kernel", tensor({1, 1, 3, 3})}, {"strides", 2}}));
  EXPECT_NE(e.find("would have 6400160001 elements"), std::string::npos) << e;
}

TEST(Registry, BadWorkloadsAreUserErrors) {
  EXPECT_THROW(ops::Task("dense_pack.x86", Json::object({{"data", tensor({4, 8})}}), kTarget), ops::OpError);
  EXPECT_THROW(
      ops::Task("dense_pack.x86", Json::object({{"data", tensor({4, 8})}, {"weight", tensor({4, 9})}}), kTarget),
      ops::OpError);
  EXPECT_THROW(ops::Task("dense_pack.x86",
                         Json::object({{"data", tensor({4, 8})},
                                       {"weight", tensor({4, 8})},
                                       {"epilogue", Json::array({Json::object({{"op", "gelu_tanh_fancy"}})})}}),
                         kTarget),
               ops::OpError);
  EXPECT_THROW(ops::Task("dense_pack.x86", Json::array(), kTarget), ops::OpError);
  EXPECT_THROW(ops::Task("dense_pack.x86", Json::object({{"data", tensor({4, 8})}, {"weight", tensor({4, 8})}}),
                         driver::resolve_target("")),
               UserError);
}

TEST(Registry, TargetsGiveTheVectorWidth) {
  EXPECT_EQ(driver::resolve_target("llvm -mcpu=znver4").float_lanes(), 16);
  EXPECT_EQ(driver::resolve_target("llvm -mcpu=skylake-avx512").float_lanes(), 16);
  EXPECT_EQ(driver::resolve_target("llvm -mcpu=znver3").float_lanes(), 8);
  EXPECT_EQ(driver::resolve_target("llvm -mattr=+avx2,+fma").float_lanes(), 8);
  EXPECT_EQ(driver::resolve_target("llvm").float_lanes(), 4);
  EXPECT_EQ(driver::resolve_target("llvm -mcpu=znver4").lanes(ir::Int(8)), 64);
  EXPECT_THROW(driver::resolve_target("-mcpu=znver4"), UserError);
}

TEST(Registry, ConfigsOfAnotherSpaceAreRecognised) {
  Json small = Json::object({{"data", tensor({8, 16})}, {"weight", tensor({32, 16})}});
  Json big = Json::object({{"data", tensor({8, 32})}, {"weight", tensor({32, 32})}});
  ops::Task a("dense_pack.x86", small, kTarget), b("dense_pack.x86", big, kTarget);
  Config ca = a.default_config();
  EXPECT_THROW(b.instantiate(ca), autotune::ConfigError);
  EXPECT_THROW(b.parse_config(ca.to_json()), autotune::ConfigError);
  // A record made by an older version of the template: same knobs, another fingerprint.
  ops::Registry old;
  ops::Template t = *ops::Registry::builtin().get("dense_pack.x86");
  t.version = 0;
  old.add(t);
  ops::Task stale("dense_pack.x86", small, kTarget, old);
  try {
    a.parse_config(stale.default_config().to_json());
    FAIL() << "a config of version 0 was accepted";
  } catch (const autotune::ConfigError &e) {
    EXPECT_NE(std::string(e.what()).find("another config space"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a.instantiate(stale.default_config()), autotune::ConfigError);
  // Its own configs round-trip through JSON.
  EXPECT_EQ(a.parse_config(ca.to_json()), ca);
}

TEST(Registry, IllegalConfigsRaiseScheduleError) {
  // A template whose schedule makes an illegal request for one value of a knob.
  ops::Registry reg;
  ops::Template t = *ops::Registry::builtin().get("elemwise.x86");
  t.name = "bad_elemwise";
  auto base_space = t.define_space;
  auto base_schedule = t.schedule;
  t.define_space = [base_space](autotune::ConfigSpace &s, const Json &a, const ops::Target &tg) {
    base_space(s, a, tg);
    s.define_bool("illegal");
  };
  t.default_config = [](const autotune::ConfigSpace &s, const Json &, const ops::Target &) { return s.get(0); };
  t.schedule = [base_schedule](te::Schedule &s, const ops::Compute &c, const Config &cfg, const ops::Target &tg) {
    if (cfg.choice_bool("illegal")) s[c.outputs[0]].compute_inline();
    base_schedule(s, c, cfg, tg);
  };
  reg.add(t);
  ops::Task task("bad_elemwise",
                 Json::object({{"data", tensor({4, 64})}, {"epilogue", Json::array({ops::epilogue::relu()})}}), kTarget,
                 reg);
  Config good = task.space().from_values({{"illegal", 0}});
  Config bad = task.space().from_values({{"illegal", 1}});
  EXPECT_NO_THROW(task.lower(good));
  EXPECT_THROW(task.lower(bad), ScheduleError);
}

// Lowers an evenly spaced selection of the valid configs of each template (and the default):
// every one must lower, or fail with ScheduleError; never another error or a crash.
TEST(Registry, ManyConfigsOfEveryTemplateLower) {
  std::set<std::string> covered;
  for (const testing::ExampleWorkload &w : testing::example_workloads()) covered.insert(w.template_name);
  const std::vector<std::string> names = ops::Registry::builtin().names();
  EXPECT_EQ(covered, std::set<std::string>(names.begin(), names.end()))
      << "example_workloads() must hold every builtin template";
  for (const testing::ExampleWorkload &w : testing::example_workloads()) {
    ops::Task task(w.template_name, w.args, kTarget);
    const int64_t n = task.space().count_valid();
    const int64_t step = std::max<int64_t>(1, n / 40);
    std::vector<Config> configs = {task.default_config()};
    int64_t i = 0;
    task.space().for_each_valid([&](const Config &c) {
      if (i++ % step == 0) configs.push_back(c);
      return true;
    });
    int schedule_errors = 0;
    for (const auto &c : configs) {
      try {
        task.lower(c);
      } catch (const ScheduleError &) {
        ++schedule_errors;
      } catch (const std::exception &e) {
        ADD_FAILURE() << w.template_name << " " << c.to_string() << ": " << e.what();
      }
    }
    EXPECT_EQ(schedule_errors, 0) << w.template_name;
  }
}

}  // namespace
}  // namespace kiln
