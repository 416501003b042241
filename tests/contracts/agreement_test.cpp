// The components agree on the contracts: for the same inputs the compiler (ops, the LLVM back end,
// the driver), the tuning log, the wire form and the runner compute the same workload key and the
// same canonical target, whatever the spelling, carry the same config, and a runner accepts every
// spelling of its own target. This executable is also the measurement pool's worker (--measure-worker).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/llvm/llvm_target.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "contracts/config.h"
#include "contracts/target.h"
#include "contracts/workload.h"
#include "db/error.h"
#include "db/record_json.h"
#include "db/target.h"
#include "db/tuning_db.h"
#include "db/workload.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/measure_worker.h"
#include "rpc_server/wire.h"

namespace kiln {
namespace {

using contracts::Json;

// Spellings of one target: option order, spacing, tabs and `--name`.
const std::vector<std::string> kHaswellSpellings = {
    "llvm -mcpu=haswell -mattr=+avx2,+fma",       "llvm -mattr=+avx2,+fma -mcpu=haswell",
    "  llvm   -mcpu=haswell\t-mattr=+avx2,+fma ", "llvm --mcpu=haswell --mattr=+avx2,+fma",
    "llvm\n--mattr=+avx2,+fma\t\t-mcpu=haswell",
};
const char *const kHaswellCanonical = "llvm -mattr=+avx2,+fma -mcpu=haswell";

TEST(Agreement, EveryComponentPrintsTheSameCanonicalTarget) {
  for (const std::string &spelling : kHaswellSpellings) {
    SCOPED_TRACE(spelling);
    EXPECT_EQ(contracts::canonical_target(spelling), kHaswellCanonical);
    EXPECT_EQ(db::canonical_target(spelling), kHaswellCanonical);
    EXPECT_EQ(db::Target::make(spelling, "x86-haswell").target, kHaswellCanonical);
    EXPECT_EQ(db::Target::make(spelling, "x86-haswell").model, "haswell");
    EXPECT_EQ(codegen::LLVMTarget::parse(spelling).str, kHaswellCanonical);
    EXPECT_EQ(driver::resolve_target(spelling).str(), kHaswellCanonical);
    EXPECT_EQ(driver::resolve_target(spelling).vector_bits, 256);
    EXPECT_EQ(rpc::target_to_proto(contracts::Target::parse(spelling), "x86-haswell").target(), kHaswellCanonical);
  }
}

TEST(Agreement, EveryComponentRefusesTheSameMalformedTargets) {
  for (const char *bad :
       {"", "   ", "-mcpu=haswell llvm", "llvm mcpu=haswell", "llvm -mcpu=a -mcpu=b", "llvm --=x", "llvm -"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(contracts::canonical_target(bad), contracts::TargetError);
    EXPECT_THROW(db::canonical_target(bad), db::TuningDbError);
    EXPECT_THROW(codegen::LLVMTarget::parse(bad), UserError);
    EXPECT_THROW(driver::resolve_target(bad), UserError);
  }
}

TEST(Agreement, DeviceKeysFollowOneRule) {
  for (const char *good : {"x86-znver4", "cuda-sm90-h100", "vta.sim_1x16"}) {
    EXPECT_NO_THROW(contracts::check_device_key(good)) << good;
    EXPECT_NO_THROW(db::Target::make("llvm", good)) << good;
  }
  for (std::string bad : {std::string(), std::string("x86 znver4"), std::string("x86\tznver4"), std::string("x86\x01"),
                          std::string(contracts::kMaxDeviceKeyBytes + 1, 'k')}) {
    EXPECT_THROW(contracts::check_device_key(bad), contracts::TargetError) << bad;
    EXPECT_THROW(db::Target::make("llvm", bad), db::TuningDbError) << bad;
  }
}

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

TEST(Agreement, EveryComponentComputesTheSameWorkloadKey) {
  const ops::Target target = driver::resolve_target(kHaswellCanonical);
  struct Case {
    std::string name;
    Json args;
  };
  const std::vector<Case> cases = {
      {"dense_pack.x86", Json::object({{"data", tensor({1, 512})}, {"weight", tensor({1000, 512})}})},
      {"conv2d_nchw.x86",
       Json::object({{"data", tensor({1, 64, 56, 56})}, {"kernel", tensor({64, 64, 3, 3})}, {"padding", 1}})},
      {"softmax.x86", Json::object({{"data", tensor({4, 37})}, {"axis", 1}})},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const ops::Task task(c.name, c.args, target);
    const contracts::Workload &compiler = task.workload();
    EXPECT_EQ(task.key(), compiler.key);
    EXPECT_EQ(compiler.key, contracts::workload_key(c.name, compiler.args_json));

    // The tuning log, given the canonical arguments in another spelling: keys in reverse order,
    // whitespace, and a JSON text that is not canonical.
    const Json parsed = Json::parse(compiler.args_json);
    std::string respelled = "{ ";
    const auto &members = parsed.as_object();
    for (auto it = members.rbegin(); it != members.rend(); ++it) {
      respelled += "\n  \"" + it->first + "\" :  " + it->second.dump() + (std::next(it) == members.rend() ? "" : ",");
    }
    respelled += " }";
    ASSERT_NE(respelled, compiler.args_json);
    const db::Workload log = db::Workload::parse(c.name, respelled);
    EXPECT_EQ(log.key, compiler.key);
    EXPECT_EQ(log.args, compiler.args_json);
    EXPECT_EQ(db::Workload::make(c.name, nlohmann::json::parse(respelled)).key, compiler.key);
    EXPECT_EQ(contracts::Workload::parse(c.name, respelled).key, compiler.key);

    // The wire form and the runner's reading of it.
    const kiln::v1::Workload wire = rpc::workload_to_proto(compiler);
    EXPECT_EQ(wire.key(), compiler.key);
    const ops::Task runner(wire.template_name(), Json::parse(wire.args_json()), driver::resolve_target(target.str()));
    EXPECT_EQ(runner.key(), wire.key());
  }
}

// A config of a real task travels from the compiler to the tuning log (stored in a database and
// read back, and through its JSON lines) and to the wire with the same index, fingerprint and
// canonical knobs text, and each form turns back into the compiler's config.
TEST(Agreement, EveryComponentCarriesTheSameConfig) {
  const ops::Task task("dense_pack.x86", Json::object({{"data", tensor({8, 64})}, {"weight", tensor({32, 64})}}),
                       driver::resolve_target(kHaswellCanonical));
  std::string pattern = (std::filesystem::temp_directory_path() / "kiln_agreement_XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::filesystem::path dir = pattern;
  {
    db::TuningDb log = db::TuningDb::open((dir / "tuning.db").string());
    std::mt19937_64 rng(7);
    std::vector<autotune::Config> configs = {task.default_config(), task.space().sample(rng), task.space().sample(rng)};
    for (const autotune::Config &config : configs) {
      SCOPED_TRACE(config.to_string());
      const contracts::ConfigRecord compiler = config.record();
      EXPECT_EQ(compiler.index, config.index());
      EXPECT_EQ(compiler.space, task.space().fingerprint());
      ASSERT_EQ(compiler.knobs.size(), task.space().knobs().size());
      const std::string knobs = compiler.knobs_json();
      EXPECT_EQ(Json::parse(config.to_json()).at("knobs").dump(), knobs);

      // The tuning log: a record stored and read back, and its JSON line.
      db::Record record;
      record.workload = db::Workload::parse(task.templ().name, task.workload().args_json, task.flop());
      record.target = db::Target::make(kHaswellCanonical, "x86-haswell");
      record.config = compiler;
      record.costs = {1e-5};
      const int64_t id = log.insert(record);
      std::vector<db::Record> stored;
      log.for_each_record({}, [&](const db::Record &r) { stored.push_back(r); });
      auto it = std::find_if(stored.begin(), stored.end(), [&](const db::Record &r) { return r.id == id; });
      ASSERT_NE(it, stored.end());
      EXPECT_EQ(it->config, compiler);
      EXPECT_EQ(it->config.knobs_json(), knobs);
      EXPECT_EQ(task.space().from_record(it->config), config);
      const nlohmann::json line = nlohmann::json::parse(db::record_to_json(*it).dump());
      EXPECT_EQ(line["config"]["knobs"].dump(), knobs);
      const db::Record reread = db::record_from_json(line);
      EXPECT_EQ(reread.config, compiler);
      EXPECT_EQ(task.space().from_record(reread.config), config);

      // The wire form, and the runner's reading of it.
      const kiln::v1::Config wire = rpc::config_to_proto(config);
      EXPECT_EQ(wire.knobs_json(), knobs);
      EXPECT_EQ(wire.index(), static_cast<uint64_t>(config.index()));
      EXPECT_EQ(wire.space_fingerprint(), config.fingerprint());
      EXPECT_EQ(rpc::config_from_proto(wire), compiler);
      EXPECT_EQ(task.space().from_record(rpc::config_from_proto(wire)), config);
      EXPECT_EQ(task.parse_config(config.to_json()), config);
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// A pool whose runner was started with one spelling of its target measures candidates that name
// the target in every other spelling, and refuses another target.
TEST(Agreement, ARunnerAcceptsEverySpellingOfItsTarget) {
  if (!codegen::LLVMTarget::parse(kHaswellCanonical).runs_on_host()) {
    GTEST_SKIP() << "this host cannot run " << kHaswellCanonical;
  }
  rpc::MeasurePoolOptions options;
  options.build_workers = 1;
  options.target = "llvm   --mcpu=haswell -mattr=+avx2,+fma";
  options.memory_limit_bytes = 1ull << 30;
  rpc::MeasurePool pool(options);

  const ops::Task task("dense_pack.x86", Json::object({{"data", tensor({4, 16})}, {"weight", tensor({8, 16})}}),
                       driver::resolve_target(kHaswellCanonical));
  kiln::v1::MeasureOptions measure;
  measure.set_number(1);
  measure.set_repeat(1);
  measure.set_min_repeat_ms(0);
  measure.set_threads(1);

  std::vector<rpc::Candidate> batch;
  for (const std::string &spelling : kHaswellSpellings) {
    rpc::Candidate c;
    c.workload = rpc::workload_to_proto(task.workload());
    c.target.set_target(spelling);
    c.config = rpc::config_to_proto(task.default_config());
    batch.push_back(c);
  }
  std::vector<kiln::v1::MeasureResult> results(batch.size());
  std::optional<rpc::MeasureRejection> rejected =
      pool.measure(batch, measure, [&](size_t i, const kiln::v1::MeasureResult &r) { results[i] = r; });
  ASSERT_FALSE(rejected.has_value()) << rejected->message;
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].error(), kiln::v1::OK) << kHaswellSpellings[i] << ": " << results[i].message();
  }

  batch.resize(1);
  batch[0].target.set_target("llvm -mcpu=skylake-avx512");
  rejected = pool.measure(batch, measure, [](size_t, const kiln::v1::MeasureResult &) {});
  ASSERT_TRUE(rejected.has_value());
  EXPECT_NE(rejected->message.find("but this runner compiles for 'llvm -mattr=+avx2,+fma -mcpu=haswell'"),
            std::string::npos)
      << rejected->message;
}

}  // namespace
}  // namespace kiln

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--measure-worker") return kiln::rpc::measure_worker_main();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
