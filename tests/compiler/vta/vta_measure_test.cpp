// VTA through the farm's measurement path: the `vta` device back end (compile with the VTA code
// generator, run on the simulator, time by the cycle model, error classes), the local measurer's
// worker processes measuring VTA candidates against the CPU reference bit-exactly, and a small
// tuning job that records VTA results in the tuning log. This executable is its own measurement
// worker (--measure-worker).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "compiler/codegen/vta/vta_codegen.h"
#include "compiler/ops/registry.h"
#include "db/tuning_db.h"
#include "deploy/module.h"
#include "rpc_server/device_backend.h"
#include "rpc_server/measure_worker.h"
#include "rpc_server/time_evaluator.h"
#include "tests/temp_dir.h"
#include "tuner/measurer.h"
#include "tuner/tuner.h"

namespace kiln {
namespace {

using contracts::Json;

constexpr char kTarget[] = "vta -model=sim_1x16_i8w8a32";
constexpr char kDeviceKey[] = "vta-sim";

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", Json("int8")}});
}

Json conv_args() {
  return Json::object({{"data", tensor({1, 4, 8, 8, 1, 16})},
                       {"kernel", tensor({4, 4, 3, 3, 16, 16})},
                       {"padding", Json(int64_t{1})},
                       {"bias", Json(true)}});
}

ops::Task conv_task(const std::string &target = kTarget) {
  return ops::Task("conv2d_nchw_int8.vta", conv_args(), ops::Target(contracts::Target::parse(target), 128));
}

tuner::LocalMeasurerOptions local_options() {
  tuner::LocalMeasurerOptions o;
  o.measure = tuner::default_measure_options();
  o.measure.set_repeat(2);
  o.measure.set_number(1);
  o.measure.set_min_repeat_ms(0);
  o.measure.set_threads(1);
  o.build_workers = 1;
  o.runner_id = "vta-local";
  return o;
}

// conv_task()'s arguments (data, weight, bias, output), every byte set to `fill`.
std::vector<deploy::Tensor> conv_args(int fill) {
  std::vector<deploy::Tensor> args = {deploy::Tensor::empty({1, 4, 8, 8, 1, 16}, deploy::DType::of<int8_t>()),
                                      deploy::Tensor::empty({4, 4, 3, 3, 16, 16}, deploy::DType::of<int8_t>()),
                                      deploy::Tensor::empty({4, 16}, deploy::DType::of<int32_t>()),
                                      deploy::Tensor::empty({1, 4, 8, 8, 1, 16}, deploy::DType::of<int8_t>())};
  for (auto &t : args) std::memset(t.data(), fill, t.nbytes());
  return args;
}

TEST(VtaBackend, MeasuresTheModelledTimeOfACandidate) {
  std::unique_ptr<rpc::DeviceBackend> backend = rpc::make_device_backend(kTarget);
  EXPECT_EQ(backend->name(), "vta-sim");
  const ops::Task task = conv_task();
  const ir::LoweredFunc f = task.lower(task.default_config(), "conv");
  std::unique_ptr<rpc::DeviceKernel> kernel = backend->compile(f, kTarget);
  std::vector<deploy::Tensor> args = conv_args(1);
  const std::function<double()> clock = backend->clock();
  ASSERT_TRUE(clock);
  const double t0 = clock();
  kernel->bind(args)();
  const double one = clock() - t0;
  kernel->bind(args)();
  // The cycle model is deterministic: every call takes the same modelled time, at 100 MHz.
  EXPECT_GT(one, 0);
  EXPECT_DOUBLE_EQ(clock() - t0, 2 * one);
  kiln::vta::Runtime rt;
  codegen::vta::VtaProgram program(f, kiln::vta::VtaConfig{});
  std::vector<codegen::vta::HostArg> host;
  for (auto &t : args) host.push_back({t.data(), t.nbytes()});
  EXPECT_DOUBLE_EQ(one, static_cast<double>(program.run_host(rt, host).total_cycles) / 100e6);
}

TEST(VtaBackend, ATrialTakesOneSimulatorRunWhileTheCpuPathRepeats) {
  std::unique_ptr<rpc::DeviceBackend> backend = rpc::make_device_backend(kTarget);
  ASSERT_TRUE(backend->deterministic_clock());
  const ops::Task task = conv_task();
  const ir::LoweredFunc f = task.lower(task.default_config(), "conv");
  std::unique_ptr<rpc::DeviceKernel> kernel = backend->compile(f, kTarget);
  std::vector<deploy::Tensor> args = conv_args(3);
  kiln::vta::Runtime rt;
  codegen::vta::VtaProgram program(f, kiln::vta::VtaConfig{});
  std::vector<codegen::vta::HostArg> host;
  for (auto &t : args) host.push_back({t.data(), t.nbytes()});
  const double modelled = static_cast<double>(program.run_host(rt, host).total_cycles) / 100e6;

  // The options a measurement worker builds from the tuner's defaults (3 repeats, min_repeat_ms 10).
  rpc::TimeEvaluatorOptions o;
  o.number = 1;
  o.repeat = 3;
  o.min_repeat_ms = 10;
  int flushes = 0;
  o.before_repeat = [&] { ++flushes; };
  o.clock = backend->clock();
  o.deterministic = backend->deterministic_clock();
  const std::function<void()> call = kernel->bind(args);
  int runs = 0;
  const rpc::Timing t = rpc::time_evaluate(
      [&] {
        ++runs;
        call();
      },
      o);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(t.calls, 1u);
  EXPECT_EQ(t.number, 1u);
  EXPECT_EQ(flushes, 0);
  ASSERT_EQ(t.seconds.size(), 3u);
  for (double s : t.seconds) EXPECT_DOUBLE_EQ(s, modelled);

  // The CPU back end's clock is the host's: a warm-up, then repeats grown to min_repeat_ms.
  std::unique_ptr<rpc::DeviceBackend> cpu = rpc::make_device_backend("llvm -mcpu=native");
  EXPECT_FALSE(cpu->deterministic_clock());
  o.clock = cpu->clock();
  o.deterministic = cpu->deterministic_clock();
  flushes = 0;
  int cpu_calls = 0;
  const rpc::Timing c = rpc::time_evaluate([&] { ++cpu_calls; }, o);
  EXPECT_GT(c.number, 1u);
  EXPECT_EQ(static_cast<uint64_t>(cpu_calls), c.calls);
  EXPECT_GE(c.calls, 1 + 3 * c.number);
  EXPECT_GE(flushes, 3);
  EXPECT_EQ(c.seconds.size(), 3u);
}

TEST(VtaBackend, TilesBeyondTheBuffersAreADeviceCompileErrorNamingTheOverflow) {
  // Lowered for the reference design, compiled for a device with a quarter of its input buffer.
  const ops::Task task = conv_task();
  const ir::LoweredFunc f =
      task.lower(task.space().from_values({{"tile_ci", Json::array_of(std::vector<int64_t>{1, 4})},
                                           {"tile_h", Json::array_of(std::vector<int64_t>{1, 8})},
                                           {"oc_nthread", Json(int64_t{2})}}),
                 "conv");
  const std::string small = "vta -model=sim_1x16_i8w8a32_15_11_18_17";
  std::unique_ptr<rpc::DeviceBackend> backend = rpc::make_device_backend(small);
  try {
    backend->compile(f, small);
    FAIL() << "compiled";
  } catch (const rpc::DeviceCompileError &e) {
    EXPECT_NE(std::string(e.what()).find("VtaBufferOverflowError"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rpc::make_device_backend("vta -model=sim_2x3"), UserError);
}

TEST(VtaBackend, TheRunnerStartUpCheckRunsTheGoldenGemm) {
  EXPECT_NO_THROW(rpc::check_target_runs(kTarget));
  EXPECT_EQ(rpc::reference_target(kTarget), "llvm -mcpu=native");
}

TEST(VtaMeasurer, MeasuresVtaCandidatesBitExactlyAgainstTheCpuReference) {
  tuner::LocalMeasurer measurer(kTarget, local_options());
  const ops::Task task = conv_task();
  std::vector<autotune::Config> configs = {task.default_config()};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3; ++i) configs.push_back(task.space().sample(rng));
  const std::vector<tuner::MeasureOutcome> outcomes = measurer.measure(task, kDeviceKey, configs);
  ASSERT_EQ(outcomes.size(), configs.size());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    SCOPED_TRACE(configs[i].to_string());
    EXPECT_EQ(outcomes[i].error, db::ErrorClass::kOk) << outcomes[i].message;
    ASSERT_EQ(outcomes[i].costs.size(), 2u);
    // Modelled time: the same for both repeats.
    EXPECT_GT(outcomes[i].costs[0], 0);
    EXPECT_DOUBLE_EQ(outcomes[i].costs[0], outcomes[i].costs[1]);
  }
}

TEST(VtaMeasurer, ASmallTuningJobRecordsVtaResults) {
  test::TempDir dir("kiln_vta_tune");
  db::TuningDb log = db::TuningDb::open(dir.file("tune.db"));
  tuner::LocalMeasurer measurer(kTarget, local_options());
  tuner::Tuner tuner(log, measurer, kTarget, kDeviceKey);
  tuner::TuneOptions o;
  o.strategy = "random";
  o.trials = 8;
  o.batch_size = 4;
  const int64_t job = tuner.create_job("vta conv", {{"conv2d_nchw_int8.vta", conv_args(), 1, ""}}, o);
  const tuner::JobStatus st = tuner.run(job);
  EXPECT_EQ(st.state, "done");
  int records = 0, valid = 0;
  log.for_each_record({}, [&](const db::Record &r) {
    if (!r.job_id || *r.job_id != job) return;
    ++records;
    valid += r.valid() ? 1 : 0;
    EXPECT_EQ(r.target.device_key, kDeviceKey);
    EXPECT_EQ(r.target.model, "sim_1x16_i8w8a32");
  });
  EXPECT_EQ(records, 8);
  EXPECT_EQ(valid, 8);
  ASSERT_TRUE(st.tasks[0].best_s.has_value());
  ASSERT_TRUE(st.tasks[0].default_s.has_value());
  EXPECT_LE(*st.tasks[0].best_s, *st.tasks[0].default_s);
}

}  // namespace
}  // namespace kiln

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--measure-worker") return kiln::rpc::measure_worker_main();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
