// CUDA candidates through the runner's measurement pool, as the CPU fault tests of
// measure_pool_test.cpp run theirs. Everywhere: a pool for a CUDA target on a host without a
// driver answers every candidate with the driver's absence and survives. On a GPU: a good
// candidate measures; planted faults (an illegal address, a wrong output, a launch beyond the
// block's thread limit) yield their error class, a worker whose context an illegal address lost is
// replaced, and the next good candidate measures. The device tests skip, saying why, without a GPU.
// This executable is its own measurement worker (--measure-worker), with the CUDA fault template.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/driver/target.h"
#include "compiler/ir/error.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"
#include "rpc_server/cuda_backend.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/wire.h"

namespace kiln::rpc {
namespace {

using autotune::Config;
using autotune::ConfigSpace;
using contracts::Json;

const char *const kFaultTemplate = "test.cuda_fault";
const int64_t kLength = 4096;

// out[i] = a[i] + b[i] over blocks of threads, with a choice knob "fault":
//   off               a correct kernel, 128 threads a block;
//   illegal_address   reads 16 GB past the input (CUDA_ERROR_ILLEGAL_ADDRESS, or
//                     CUDA_ERROR_INVALID_ADDRESS_SPACE on an H200). A worker computes a
//                     workload's reference from the first candidate of it that it builds, on the
//                     host, where this compute would read out of bounds too: a good candidate of
//                     the same workload goes first in its worker;
//   wrong_answer      correct on the device; the hook changes an output element before the check;
//   too_many_threads  2048 threads a block, beyond every GPU's limit of 1024.
ops::Template fault_template() {
  ops::Template t;
  t.name = kFaultTemplate;
  t.version = 1;
  t.summary = "fault injection on a GPU";
  t.canonicalize = [](const Json &a) { return Json::object({{"n", a["n"]}}); };
  t.flop = [](const Json &a) { return static_cast<double>(a["n"].as_int()); };
  t.define_space = [](ConfigSpace &s, const Json &, const ops::Target &) {
    s.define_choice("fault", std::vector<std::string>{"off", "illegal_address", "wrong_answer", "too_many_threads"});
  };
  t.default_config = [](const ConfigSpace &s, const Json &, const ops::Target &) {
    return s.from_values({{"fault", Json("off")}});
  };
  t.compute = [](const Json &a, const Config &cfg) {
    const int64_t n = a["n"].as_int();
    const int64_t scale = cfg.choice_string("fault") == "illegal_address" ? int64_t{1} << 22 : 1;
    ops::Compute c;
    te::Tensor x = te::placeholder({ir::Expr(n)}, ir::Float(32), "a");
    te::Tensor y = te::placeholder({ir::Expr(n)}, ir::Float(32), "b");
    te::Tensor out = te::compute(
        {ir::Expr(n)}, [x, y, scale](ir::Var i) { return x(i * ir::Expr(scale)) + y(i); }, "out");
    c.inputs = {x, y};
    c.outputs = {out};
    c.parts["anchor"] = out;
    return c;
  };
  t.schedule = [](te::Schedule &s, const ops::Compute &c, const Config &cfg, const ops::Target &) {
    te::Stage so = s[c.outputs[0]];
    te::IterVar bx, tx;
    so.split(so.axis(0), cfg.choice_string("fault") == "too_many_threads" ? 2048 : 128, &bx, &tx);
    so.bind(bx, "blockIdx.x");
    so.bind(tx, "threadIdx.x");
  };
  return t;
}

class WrongAnswerHooks final : public CandidateHooks {
 public:
  void inspect_outputs(std::vector<deploy::Tensor> &outputs) override {
    if (outputs.empty() || outputs[0].numel() == 0) return;
    outputs[0].data_as<float>()[outputs[0].numel() / 2] += 1.0f;
  }
};

MeasureExtension cuda_fault_extension() {
  MeasureExtension e;
  e.add_templates = [](ops::Registry &r) { r.add(fault_template()); };
  e.hooks = [](const std::string &name, const Config &cfg) -> std::unique_ptr<CandidateHooks> {
    if (name == kFaultTemplate && cfg.choice_string("fault") == "wrong_answer") {
      return std::make_unique<WrongAnswerHooks>();
    }
    return nullptr;
  };
  return e;
}

const ops::Registry &fault_registry() {
  static const ops::Registry r = extended_registry(cuda_fault_extension());
  return r;
}

Candidate fault_candidate(const std::string &target, const std::string &fault) {
  ops::Task task(kFaultTemplate, Json::object({{"n", kLength}}), driver::resolve_target(target), fault_registry());
  Candidate c;
  c.workload.set_template_name(kFaultTemplate);
  c.workload.set_args_json(task.workload().args_json);
  c.workload.set_key(task.key());
  c.target.set_target(target);
  c.config = config_to_proto(task.space().from_values({{"fault", Json(fault)}}));
  return c;
}

MeasurePoolOptions pool_options(const std::string &target) {
  MeasurePoolOptions o;
  o.build_workers = 1;
  o.target = target;
  o.runner_id = "cuda-runner-test";
  o.extension = cuda_fault_extension();
  return o;
}

v1::MeasureOptions quick_options() {
  v1::MeasureOptions o;
  o.set_number(1);
  o.set_repeat(3);
  o.set_min_repeat_ms(1);
  o.set_build_timeout_ms(30000);
  o.set_run_timeout_ms(10000);
  o.set_threads(1);
  return o;
}

std::vector<v1::MeasureResult> measure(MeasurePool &pool, const std::vector<Candidate> &batch,
                                       const v1::MeasureOptions &options) {
  std::vector<v1::MeasureResult> at(batch.size());
  std::vector<int> calls(batch.size(), 0);
  std::optional<MeasureRejection> rejection = pool.measure(batch, options, [&](size_t i, const v1::MeasureResult &r) {
    at.at(i) = r;
    ++calls.at(i);
  });
  EXPECT_FALSE(rejection) << rejection->message;
  for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(calls[i], rejection ? 0 : 1) << "position " << i;
  return at;
}

void expect_ok(const v1::MeasureResult &r, const v1::MeasureOptions &o, const std::string &what) {
  EXPECT_EQ(r.error(), v1::OK) << what << ": " << v1::ErrorClass_Name(r.error()) << " " << r.message();
  EXPECT_EQ(r.seconds_size(), static_cast<int>(o.repeat())) << what;
  for (double s : r.seconds()) EXPECT_GT(s, 0) << what;
}

void expect_error(const v1::MeasureResult &r, v1::ErrorClass want, const std::string &message_part,
                  const std::string &what) {
  EXPECT_EQ(r.error(), want) << what << ": got " << v1::ErrorClass_Name(r.error()) << " " << r.message();
  EXPECT_NE(r.message().find(message_part), std::string::npos) << what << ": " << r.message();
  EXPECT_EQ(r.seconds_size(), 0) << what;
}

bool driver_present() {
  void *handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

// The target of this host's GPU ("cuda -arch=sm_90"), or nullopt with the reason in *why.
std::optional<std::string> gpu_target(std::string *why) {
  if (!driver_present()) {
    *why = "no CUDA driver on this host";
    return std::nullopt;
  }
  try {
    return "cuda -arch=sm_" + std::to_string(cuda_device_info(*load_cuda_driver()).compute_capability);
  } catch (const UserError &e) {
    *why = std::string("no CUDA device: ") + e.what();
    return std::nullopt;
  }
}

#define KILN_REQUIRE_GPU(target)                                     \
  std::string why_no_gpu;                                            \
  const std::optional<std::string> target = gpu_target(&why_no_gpu); \
  if (!target) GTEST_SKIP() << why_no_gpu

// --- everywhere ---

TEST(CudaMeasurePool, WithoutADriverEveryCandidateNamesItsAbsence) {
  if (driver_present()) GTEST_SKIP() << "this host has a CUDA driver (libcuda.so.1); the refusal is not exercised";
  const std::string target = "cuda -arch=sm_90";
  MeasurePool pool(pool_options(target));
  const v1::MeasureOptions o = quick_options();
  const std::vector<v1::MeasureResult> r =
      measure(pool, {fault_candidate(target, "off"), fault_candidate(target, "illegal_address")}, o);
  ASSERT_EQ(r.size(), 2u);
  for (const auto &res : r) {
    // The worker cannot make the back end the candidate is to be compiled for.
    expect_error(res, v1::COMPILE_DEVICE, "no CUDA driver on this host: libcuda.so.1 not found", "without a driver");
  }
  // The pool goes on: the next batch is answered the same way.
  const std::vector<v1::MeasureResult> again = measure(pool, {fault_candidate(target, "off")}, o);
  expect_error(again.at(0), v1::COMPILE_DEVICE, "no CUDA driver on this host: libcuda.so.1 not found", "again");
}

// --- on a GPU ---

TEST(CudaMeasurePoolDevice, AGoodCandidateMeasures) {
  KILN_REQUIRE_GPU(target);
  MeasurePool pool(pool_options(*target));
  const v1::MeasureOptions o = quick_options();
  expect_ok(measure(pool, {fault_candidate(*target, "off")}, o).at(0), o, "fault=off");
}

TEST(CudaMeasurePoolDevice, AnIllegalAddressIsRuntimeDeviceAndTheWorkerIsReplaced) {
  KILN_REQUIRE_GPU(target);
  MeasurePool pool(pool_options(*target));
  const v1::MeasureOptions o = quick_options();
  // The one worker (build_workers 1) takes its reference from this good candidate.
  expect_ok(measure(pool, {fault_candidate(*target, "off")}, o).at(0), o, "before the fault");
  const int started = pool.workers_started();
  // The driver names the read CUDA_ERROR_ILLEGAL_ADDRESS, or CUDA_ERROR_INVALID_ADDRESS_SPACE where
  // 16 GB past the input lies outside the global address space (an H200's 141 GB).
  const v1::MeasureResult fault = measure(pool, {fault_candidate(*target, "illegal_address")}, o).at(0);
  const bool address_space = fault.message().find("CUDA_ERROR_INVALID_ADDRESS_SPACE") != std::string::npos;
  expect_error(fault, v1::RUNTIME_DEVICE, address_space ? "CUDA_ERROR_INVALID_ADDRESS_SPACE" : "CUDA_ERROR_ILLEGAL_ADDRESS",
               "illegal_address");
  expect_ok(measure(pool, {fault_candidate(*target, "off")}, o).at(0), o, "after the illegal address");
  EXPECT_GT(pool.workers_started(), started) << "the worker whose context was lost was not replaced";
  EXPECT_GT(pool.worker_restarts(), 0);
}

TEST(CudaMeasurePoolDevice, AWrongOutputIsWrongAnswer) {
  KILN_REQUIRE_GPU(target);
  MeasurePool pool(pool_options(*target));
  const v1::MeasureOptions o = quick_options();
  const std::vector<v1::MeasureResult> r =
      measure(pool, {fault_candidate(*target, "wrong_answer"), fault_candidate(*target, "off")}, o);
  expect_error(r.at(0), v1::WRONG_ANSWER, "differs from the reference at index", "wrong_answer");
  expect_ok(r.at(1), o, "after the wrong answer");
}

// 2048 threads a block is the device compiler's refusal, before anything reaches the device; the
// candidate fails alone.
TEST(CudaMeasurePoolDevice, TooManyThreadsFailsAloneAndTheNextMeasures) {
  KILN_REQUIRE_GPU(target);
  MeasurePool pool(pool_options(*target));
  const v1::MeasureOptions o = quick_options();
  const std::vector<v1::MeasureResult> r =
      measure(pool, {fault_candidate(*target, "too_many_threads"), fault_candidate(*target, "off")}, o);
  expect_error(r.at(0), v1::COMPILE_DEVICE, "2048 threads per block, more than the 1024", "too_many_threads");
  expect_ok(r.at(1), o, "after too many threads");
}

}  // namespace
}  // namespace kiln::rpc

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--measure-worker") {
    return kiln::rpc::measure_worker_main(kiln::rpc::cuda_fault_extension());
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
