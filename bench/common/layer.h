#pragma once
// One layer (dense, conv2d or depthwise conv2d, float32, batch 1) timed in this process as Kiln's
// JIT-compiled kernel for a config and as oneDNN's primitive on the same data: the comparison the
// sweep and tuner benchmarks make. Layouts, packed outside the timed region for both sides, as a
// deployed model packs its constant weights once:
//   - dense: Kiln's dense_pack.x86 takes its weight prepacked ([ceil(N/bn), K, bn], bn the innermost
//     x tile, the last block zero-padded); oneDNN's matmul runs with the plain [N, K] weight and
//     with the weight in the layout it picks (format any), and the faster is the peer;
//   - conv2d_nchwc.x86 and depthwise_conv2d_nchwc.x86 take blocked data/kernel (the block sizes are
//     knobs) and oneDNN picks its own blocked layouts (format any).
// Both run on one thread: deploy::set_num_threads(1) for Kiln, and OMP_NUM_THREADS=1 for oneDNN,
// whose OpenMP runtime reads it when it loads (set_onednn_single_thread_env, then re-execute).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"

namespace kiln::bench {

struct Layer {
  enum Kind { Dense, Conv, Depthwise } kind = Dense;
  std::string tmpl;   // the Kiln template
  std::string shape;  // compact spelling for output lines
  // dense: M, N, K; conv: N, C, H, W, OC, KH, KW, stride, pad, OH, OW
  int64_t M = 0, Nn = 0, K = 0;
  int64_t N = 1, C = 0, H = 0, W = 0, OC = 0, KH = 0, KW = 0, S = 1, P = 0, OH = 0, OW = 0;
};

// Sets OMP_NUM_THREADS=1 unless it is set so; returns whether it changed it, in which case the
// caller must execute itself again (execv) before oneDNN runs.
bool set_onednn_single_thread_env();
// Sets OMP_WAIT_POLICY=passive unless OMP_WAIT_POLICY is set (to any value): oneDNN's idle OpenMP
// threads then sleep instead of spinning on cores that Kiln's threads or other programs need.
// Returns whether it changed the environment, in which case the caller must execute itself again
// (execv) before oneDNN runs. onednn_wait_policy() is the value in effect ("default" when unset or
// empty: OMP_WAIT_POLICY= leaves the OpenMP runtime's own default).
bool set_onednn_passive_wait_env();
std::string onednn_wait_policy();

// data [m, k] x weight [n, k]^T with dense_pack.x86 (weight prepacked).
Layer dense_layer(int64_t m, int64_t n, int64_t k);
// data [1, c, hw, hw], kernel [oc, c, k, k] (depthwise: [c, 1, k, k], oc = c), square stride and
// padding, with conv2d_nchwc.x86 or depthwise_conv2d_nchwc.x86.
Layer conv_layer(int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t stride, int64_t pad, bool depthwise = false);
// The template's arguments for the layer.
contracts::Json layer_args(const Layer &layer);
// The layer a template and its arguments describe (the inverse of layer_args); throws UserError for
// another template or arguments the benchmarks do not use (dilation, uneven strides or padding).
Layer layer_of(const std::string &template_name, const contracts::Json &args);

// Seconds per call: a warm-up call sets the repetition count so that one measurement takes about
// 20 ms; the figure is the smallest of the medians of 3 measurements. When the warm-up alone is
// slower than `give_up_above` seconds, the warm-up time is returned (the config cannot be the best).
double time_call(const std::function<void()> &f, double give_up_above = 1e30);

// Plain inputs (NCHW / row major), uniform in [-1, 1], seeded.
struct PlainInputs {
  std::vector<float> x, w;
};
PlainInputs plain_inputs(const Layer &layer, uint64_t seed);

// oneDNN's primitive for the layer, created once with its inputs reordered; time() times it.
// dense: the matmul with the plain [N, K] weight and with the weight in the layout oneDNN picks
// (format any); time() times both and answers the faster.
class OneDnnKernel {
 public:
  OneDnnKernel(const Layer &layer, const PlainInputs &p);
  ~OneDnnKernel();
  OneDnnKernel(const OneDnnKernel &) = delete;
  OneDnnKernel &operator=(const OneDnnKernel &) = delete;
  double time();
  const char *weights() const;   // dense: the layout of the faster run ("plain" or "packed"), else ""
  double plain_seconds() const;  // dense: the plain layout's time at the last time()
  std::vector<float> output();   // the plain layout, after a time()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One config of the layer's task, lowered and JIT-compiled once, its inputs packed from the plain
// data in the layouts the config asks for. A config that fails to build or run is !ok() with the
// error.
class KilnKernel {
 public:
  KilnKernel(const ops::Task &task, const Layer &layer, const autotune::Config &config, const PlainInputs &p,
             const codegen::LLVMBuildOptions &options);
  ~KilnKernel();
  KilnKernel(const KilnKernel &) = delete;
  KilnKernel &operator=(const KilnKernel &) = delete;
  bool ok() const;
  const std::string &error() const;
  // Seconds per call (time_call); a failing call makes the kernel !ok().
  double time(double give_up_above = 1e30);
  std::vector<float> output() const;  // the plain layout, after a time()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One measurement each, for callers that time a config once.
struct OneDnnResult {
  double seconds = 0;
  std::vector<float> out;  // plain layout
  const char *weights = "";
  double plain_seconds = 0;
};
OneDnnResult onednn_run(const Layer &layer, const PlainInputs &p);

struct KilnResult {
  bool ok = false;
  double seconds = 0;
  std::string error;
  std::vector<float> out;  // plain layout, when asked for
};
KilnResult kiln_run(const ops::Task &task, const Layer &layer, const autotune::Config &config, const PlainInputs &p,
                    const codegen::LLVMBuildOptions &options, bool keep_output, double give_up_above = 1e30);

// Whether `out` matches oneDNN's `ref`: the tolerance grows with the largest output and the square
// root of the reduction length. Sets *max_diff and *max_abs when given.
bool matches(const std::vector<float> &out, const std::vector<float> &ref, double flop, double *max_diff = nullptr,
             double *max_abs = nullptr);

}  // namespace kiln::bench
