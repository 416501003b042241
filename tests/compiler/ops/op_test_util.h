#pragma once
// Helpers for operator template tests: random inputs for a task's compute, running a config
// through the C back end or the LLVM back end, host-side tensors in double precision for the naive
// references, and element-wise comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/c/c_module.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/lower/lower.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "deploy/tensor.h"

#ifndef KILN_C_COMPILER
#define KILN_C_COMPILER "cc"
#endif

namespace kiln::testing {

// A tensor of doubles, row-major.
struct Host {
  std::vector<int64_t> shape;
  std::vector<double> data;

  Host() = default;
  explicit Host(std::vector<int64_t> s, double fill = 0.0) : shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.assign(static_cast<size_t>(n), fill);
  }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  // Row-major offset of an index.
  int64_t offset(const std::vector<int64_t> &idx) const {
    int64_t o = 0;
    for (size_t i = 0; i < shape.size(); ++i) o = o * shape[i] + idx[i];
    return o;
  }
  double &at(const std::vector<int64_t> &idx) { return data[static_cast<size_t>(offset(idx))]; }
  double at(const std::vector<int64_t> &idx) const { return data[static_cast<size_t>(offset(idx))]; }
};

inline std::vector<int64_t> const_shape(const te::Tensor &t) {
  std::vector<int64_t> s;
  for (const auto &d : t.shape()) {
    auto c = ir::as_const_int(d);
    EXPECT_TRUE(c.has_value()) << "tensor " << t.name() << " has a symbolic shape";
    s.push_back(c.value_or(1));
  }
  return s;
}

inline double get_elem(const deploy::Tensor &t, int64_t i) {
  auto dt = t.dtype();
  const void *p = t.data();
  if (dt.code == deploy::DType::Float && dt.bits == 32) return static_cast<const float *>(p)[i];
  if (dt.code == deploy::DType::Float && dt.bits == 64) return static_cast<const double *>(p)[i];
  if (dt.code == deploy::DType::Int && dt.bits == 32) return static_cast<const int32_t *>(p)[i];
  if (dt.code == deploy::DType::Int && dt.bits == 8) return static_cast<const int8_t *>(p)[i];
  if (dt.code == deploy::DType::UInt && dt.bits == 8) return static_cast<const uint8_t *>(p)[i];
  if (dt.code == deploy::DType::Int && dt.bits == 64) return static_cast<double>(static_cast<const int64_t *>(p)[i]);
  ADD_FAILURE() << "unsupported dtype in test";
  return 0;
}

inline void set_elem(deploy::Tensor &t, int64_t i, double v) {
  auto dt = t.dtype();
  void *p = t.data();
  if (dt.code == deploy::DType::Float && dt.bits == 32)
    static_cast<float *>(p)[i] = static_cast<float>(v);
  else if (dt.code == deploy::DType::Float && dt.bits == 64)
    static_cast<double *>(p)[i] = v;
  else if (dt.code == deploy::DType::Int && dt.bits == 32)
    static_cast<int32_t *>(p)[i] = static_cast<int32_t>(v);
  else if (dt.code == deploy::DType::Int && dt.bits == 8)
    static_cast<int8_t *>(p)[i] = static_cast<int8_t>(v);
  else if (dt.code == deploy::DType::UInt && dt.bits == 8)
    static_cast<uint8_t *>(p)[i] = static_cast<uint8_t>(v);
  else if (dt.code == deploy::DType::Int && dt.bits == 64)
    static_cast<int64_t *>(p)[i] = static_cast<int64_t>(v);
  else
    ADD_FAILURE() << "unsupported dtype in test";
}

inline Host to_host(const deploy::Tensor &t) {
  Host h(t.shape());
  for (int64_t i = 0; i < h.numel(); ++i) h.data[static_cast<size_t>(i)] = get_elem(t, i);
  return h;
}

// Random values: floats in [-2, 2) on a 1/256 grid (so products and sums stay exact for a while),
// int8 in [-8, 8), uint8 in [0, 16), int32 in [-64, 64).
inline void fill(deploy::Tensor &t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto dt = t.dtype();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t r = rng();
    double v;
    if (dt.code == deploy::DType::Float)
      v = static_cast<double>(r % 1024) / 256.0 - 2.0;
    else if (dt.code == deploy::DType::UInt)
      v = static_cast<double>(r % 16);
    else if (dt.bits == 8)
      v = static_cast<double>(static_cast<int64_t>(r % 16) - 8);
    else
      v = static_cast<double>(static_cast<int64_t>(r % 128) - 64);
    set_elem(t, i, v);
  }
}

// Random values over the whole range of 8-bit integers (uint8 in [0, 256), int8 in [-128, 128)),
// where widening them with the wrong extension changes the result; other dtypes as fill().
inline void fill_full_range(deploy::Tensor &t, uint64_t seed) {
  const auto dt = t.dtype();
  if (dt.bits != 8 || dt.code == deploy::DType::Float) return fill(t, seed);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t r = static_cast<int64_t>(rng() % 256);
    set_elem(t, i, static_cast<double>(dt.code == deploy::DType::UInt ? r : r - 128));
  }
}

// Random inputs for the compute's inputs; outputs filled with NaN (floats) or a marker value.
inline std::vector<deploy::Tensor> make_inputs(const ops::Compute &c, uint64_t seed) {
  std::vector<deploy::Tensor> r;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    deploy::Tensor t = deploy::Tensor::empty(const_shape(c.inputs[i]), ir::to_deploy_dtype(c.inputs[i].dtype()));
    fill(t, seed * 131 + i);
    r.push_back(t);
  }
  return r;
}

// The compute's outputs, filled with NaN (floats) or 77, so that what a kernel does not write shows.
inline std::vector<deploy::Tensor> marked_outputs(const ops::Compute &c) {
  std::vector<deploy::Tensor> outs;
  for (const auto &o : c.outputs) {
    deploy::Tensor t = deploy::Tensor::empty(const_shape(o), ir::to_deploy_dtype(o.dtype()));
    for (int64_t i = 0; i < t.numel(); ++i) set_elem(t, i, t.dtype().code == deploy::DType::Float ? NAN : 77);
    outs.push_back(t);
  }
  return outs;
}

// Compiles `f` (lowered from `c`, named "op") with the LLVM back end for `target` (this host by
// default; any target this host can run), runs it on `inputs` and returns the outputs, filled with
// NaN (floats) or 77 before the call.
inline std::vector<deploy::Tensor> run_lowered_llvm(const ir::LoweredFunc &f, const ops::Compute &c,
                                                    const std::vector<deploy::Tensor> &inputs,
                                                    const std::string &target = "llvm -mcpu=native") {
  std::vector<deploy::Tensor> args = inputs;
  const std::vector<deploy::Tensor> outs = marked_outputs(c);
  args.insert(args.end(), outs.begin(), outs.end());
  codegen::LLVMBuildOptions options;
  options.target = target;
  codegen::LLVMModule m(f, options);
  const int32_t rc = m.call_status("op", args);
  EXPECT_EQ(rc, 0) << m.last_error();
  return outs;
}

// Lowers the task's schedule for `cfg`, compiles it with the LLVM back end for `target` (this host
// by default, whatever the task's target), runs it on `inputs` and returns the outputs.
inline std::vector<deploy::Tensor> run_config_llvm(const ops::Task &task, const autotune::Config &cfg,
                                                   const std::vector<deploy::Tensor> &inputs,
                                                   const std::string &target = "llvm -mcpu=native") {
  ops::Instance inst = task.instantiate(cfg);
  return run_lowered_llvm(lower::lower(*inst.schedule, inst.compute.args(), "op"), inst.compute, inputs, target);
}

// The part of `cfg`'s outputs that the first of `threads` threads writes: the pool cuts each
// parallel loop of n iterations into chunks of ceil(n / threads), the first thread running the first
// (deploy/thread_pool.h). Every parallel loop of the lowered kernel is cut to that chunk and the
// kernel run with the LLVM back end on random inputs; the outputs hold NaN where nothing was written.
inline std::vector<deploy::Tensor> first_thread_share(const ops::Task &task, const autotune::Config &cfg,
                                                      int threads) {
  ops::Instance inst = task.instantiate(cfg);
  ir::LoweredFunc f = lower::lower(*inst.schedule, inst.compute.args(), "op");
  int cut = 0;
  ir::post_order_visit(f.body, [&](const ir::IRNode *n) {
    if (n->node_type == ir::NodeType::For) cut += static_cast<const ir::ForNode *>(n)->kind == ir::ForKind::Parallel;
  });
  EXPECT_GT(cut, 0) << "the kernel has no parallel loop";
  struct FirstChunk : ir::IRMutator {
    int threads;
    using ir::IRMutator::visit;
    ir::Stmt visit(const ir::ForNode *op, const ir::Stmt &self) override {
      ir::Stmt body = mutate(op->body);
      if (op->kind != ir::ForKind::Parallel) {
        return body.same_as(op->body) ? self
                                      : ir::ForNode::make(op->loop_var, op->min, op->extent, op->kind, body, op->thread_tag);
      }
      auto n = ir::as_const_int(op->extent);
      EXPECT_TRUE(n.has_value()) << "a parallel loop of symbolic extent";
      const int64_t chunk = (n.value_or(1) + threads - 1) / threads;
      return ir::ForNode::make(op->loop_var, op->min, ir::Expr(static_cast<int>(chunk)), ir::ForKind::Serial, body);
    }
  } first;
  first.threads = threads;
  f.body = first.mutate(f.body);
  return run_lowered_llvm(f, inst.compute, make_inputs(inst.compute, 7));
}

// Of a blocked output [1, blocks, rows, columns, block] from first_thread_share: for each channel
// block, a string with one character per row: '#' where every element of the row was written, '.'
// where none was, '~' where some were.
inline std::vector<std::string> written_rows(const deploy::Tensor &out) {
  const std::vector<int64_t> s = out.shape();
  EXPECT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0], 1);
  std::vector<std::string> r;
  if (s.size() != 5) return r;
  const int64_t per_row = s[3] * s[4];
  for (int64_t b = 0; b < s[1]; ++b) {
    std::string rows;
    for (int64_t y = 0; y < s[2]; ++y) {
      int64_t written = 0;
      for (int64_t i = 0; i < per_row; ++i) written += !std::isnan(get_elem(out, (b * s[2] + y) * per_row + i));
      rows += written == per_row ? '#' : written == 0 ? '.' : '~';
    }
    r.push_back(rows);
  }
  return r;
}

// The rows every channel block of written_rows would show if the first thread wrote rows [0, k) of
// every block and nothing else.
inline std::vector<std::string> first_rows_of_every_block(int64_t blocks, int64_t rows, int64_t k) {
  return std::vector<std::string>(static_cast<size_t>(blocks),
                                  std::string(static_cast<size_t>(k), '#') + std::string(static_cast<size_t>(rows - k), '.'));
}

// Lowers the task's schedule for `cfg`, compiles it with the C back end, runs it on `inputs` and
// returns the outputs.
inline std::vector<deploy::Tensor> run_config(const ops::Task &task, const autotune::Config &cfg,
                                              const std::vector<deploy::Tensor> &inputs) {
  ops::Instance inst = task.instantiate(cfg);
  ir::LoweredFunc f = lower::lower(*inst.schedule, inst.compute.args(), "op");
  std::vector<deploy::Tensor> args = inputs;
  const std::vector<deploy::Tensor> outs = marked_outputs(inst.compute);
  args.insert(args.end(), outs.begin(), outs.end());
  codegen::CModule m(f, KILN_C_COMPILER);
  int32_t rc = m.call(args);
  EXPECT_EQ(rc, 0) << m.last_error();
  return outs;
}

// Largest |got - want| relative to max(1, |want|); +inf on a shape mismatch or NaN.
inline double rel_error(const Host &want, const deploy::Tensor &got) {
  if (want.shape != got.shape()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.data[static_cast<size_t>(i)], g = get_elem(got, i);
    if (std::isnan(g) || std::isnan(w)) return INFINITY;
    worst = std::max(worst, std::fabs(g - w) / std::max(1.0, std::fabs(w)));
  }
  return worst;
}

// Iterates over every index of `shape` in row-major order.
inline void for_each_index(const std::vector<int64_t> &shape,
                           const std::function<void(const std::vector<int64_t> &)> &f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Naive epilogue on a reference output: applies the descriptors in order; `extra` holds the
// epilogue inputs in order; `channel` maps an output index to its bias channel.
inline Host apply_epilogue(Host x, const contracts::Json &list, const std::vector<Host> &extra,
                           const std::function<int64_t(const std::vector<int64_t> &)> &channel) {
  size_t next = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    const auto &d = list[k];
    std::string op = d["op"].as_string();
    if (op == "bias_add" || op == "add" || op == "multiply" || op == "prelu") {
      const Host &e = extra.at(next++);
      for_each_index(x.shape, [&](const std::vector<int64_t> &i) {
        double v = op == "bias_add" || op == "prelu" ? e.data[static_cast<size_t>(channel(i))] : e.at(i);
        if (op == "prelu")
          x.at(i) = x.at(i) >= 0 ? x.at(i) : x.at(i) * v;
        else
          x.at(i) = op == "multiply" ? x.at(i) * v : x.at(i) + v;
      });
      continue;
    }
    for (auto &v : x.data) {
      if (op == "relu")
        v = std::max(v, 0.0);
      else if (op == "clip")
        v = std::min(std::max(v, d["min"].as_double()), d["max"].as_double());
      else if (op == "scale")
        v = v * d["value"].as_double();
      else if (op == "sigmoid")
        v = 1.0 / (1.0 + std::exp(-v));
      else if (op == "tanh")
        v = std::tanh(v);
      else if (op == "add_scalar")
        v = v + d["value"].as_double();
      else if (op == "subtract_scalar")
        v = v - d["value"].as_double();
      else if (op == "multiply_scalar")
        v = v * d["value"].as_double();
      else if (op == "divide_scalar")
        v = v / d["value"].as_double();
      else if (op == "maximum_scalar")
        v = std::max(v, d["value"].as_double());
      else if (op == "minimum_scalar")
        v = std::min(v, d["value"].as_double());
      else if (op == "leaky_relu")
        v = v >= 0 ? v : v * d["alpha"].as_double();
      else if (op == "hard_sigmoid")
        v = std::max(0.0, std::min(1.0, d["alpha"].as_double() * v + d["beta"].as_double()));
      else if (op == "hard_swish")
        v = v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0;
      else if (op == "silu")
        v = v / (1.0 + std::exp(-v));
      else if (op == "gelu")
        v = d["approximate"].as_string() == "tanh"
                ? 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      else if (op == "cast")
        v = v;
      else if (op == "requantize") {
        std::string t = d["out_dtype"].as_string();
        double lo = t == "uint8" ? 0 : t == "int8" ? -128 : -2147483648.0;
        double hi = t == "uint8" ? 255 : t == "int8" ? 127 : 2147483647.0;
        double r = std::round(static_cast<float>(static_cast<float>(v) * static_cast<float>(d["scale"].as_double())));
        v = std::min(std::max(r + static_cast<double>(d["zero_point"].as_int()), lo), hi);
      }
    }
  }
  return x;
}

}  // namespace kiln::testing

namespace kiln::testing {

// The configs a template test runs: the default config and `n` configs sampled with `seed`.
inline std::vector<autotune::Config> test_configs(const ops::Task &task, int n, uint64_t seed) {
  std::vector<autotune::Config> r{task.default_config()};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) r.push_back(task.space().sample(rng));
  return r;
}

// Whether two computes take inputs of the same shapes and give outputs of the same shapes.
inline bool same_signature(const ops::Compute &a, const ops::Compute &b) {
  auto shapes = [](const std::vector<te::Tensor> &ts) {
    std::vector<std::vector<int64_t>> r;
    for (const auto &t : ts) r.push_back(const_shape(t));
    return r;
  };
  return shapes(a.inputs) == shapes(b.inputs) && shapes(a.outputs) == shapes(b.outputs);
}

// The targets a template test also schedules and compiles for with the LLVM back end: this host,
// and AVX2 (Haswell) where the host has wider vectors, so that on every machine the tests run the
// code of both vector widths (16 lanes and 32 registers, 8 lanes and 16 registers) through LLVM's
// x86 lowering, which differs between them.
inline const std::vector<ops::Target> &llvm_test_targets() {
  static const std::vector<ops::Target> targets = [] {
    std::vector<ops::Target> r{driver::resolve_target("llvm -mcpu=native")};
    if (r[0].vector_bits > 256) r.push_back(driver::resolve_target("llvm -mcpu=haswell"));
    return r;
  }();
  return targets;
}

// Runs every config of `configs` through the C back end on the same random inputs and compares the
// output with `reference(inputs)`, a naive implementation. Then the same workload is scheduled for
// each of llvm_test_targets() and its default config and `llvm_samples` sampled configs are compiled
// with the LLVM back end for that target, run here and checked too: the code a user's build runs. A
// config whose tensors have other shapes than the test's (a layout that follows the vector width)
// is left out of that second part; the test's own configs never are.
inline void check_against_reference(const ops::Task &task, const std::vector<autotune::Config> &configs,
                                    const std::function<Host(const std::vector<Host> &)> &reference, double tol,
                                    uint64_t seed = 7, int llvm_samples = 2) {
  ops::Compute c = task.compute(configs.at(0));
  std::vector<deploy::Tensor> inputs = make_inputs(c, seed);
  std::vector<Host> host;
  for (const auto &t : inputs) host.push_back(to_host(t));
  Host want = reference(host);
  for (const auto &cfg : configs) {
    SCOPED_TRACE(task.workload().template_name + " config " + cfg.to_string());
    std::vector<deploy::Tensor> outs = run_config(task, cfg, inputs);
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_LE(rel_error(want, outs[0]), tol);
  }
  for (const ops::Target &target : llvm_test_targets()) {
    const ops::Task for_target(task.workload().template_name, task.workload().args, target);
    for (const auto &cfg : test_configs(for_target, llvm_samples, seed + 1)) {
      SCOPED_TRACE(task.workload().template_name + " scheduled for and compiled by LLVM for " + target.str() +
                   ", config " + cfg.to_string());
      if (!same_signature(for_target.compute(cfg), c)) continue;
      std::vector<deploy::Tensor> outs = run_config_llvm(for_target, cfg, inputs, target.str());
      ASSERT_EQ(outs.size(), 1u);
      EXPECT_LE(rel_error(want, outs[0]), tol);
    }
  }
}

inline contracts::Json tensor(std::vector<int64_t> shape, const std::string &dtype = "float32") {
  return contracts::Json::object({{"shape", contracts::Json::array_of(shape)}, {"dtype", dtype}});
}

}  // namespace kiln::testing
