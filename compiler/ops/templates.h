#pragma once
// Internal to the operator library: the registration function of each template family and the
// helpers their argument parsing and schedules share.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "compiler/autotune/apply.h"
#include "contracts/json.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"

namespace kiln::ops {

void register_gemm_templates(Registry &r);        // dense_pack, dense_nopack, matmul, batch_matmul
void register_conv2d_templates(Registry &r);      // conv2d_nchw, conv2d_nchwc, depthwise, transpose
void register_fused_conv_templates(Registry &r);  // conv1x1_depthwise_nchwc (conv_fused.cpp)
void register_pool_templates(Registry &r);        // pool2d, global_pool2d
void register_norm_templates(Registry &r);        // softmax, layer_norm
void register_injective_templates(Registry &r);   // elemwise, broadcast, reduce
void register_layout_templates(Registry &r);      // layout_transform
void register_cuda_templates(Registry &r);        // elemwise.cuda, matmul.cuda, dense.cuda, ... (after the x86 ones)
void register_vta_templates(Registry &r);         // dense_int8.vta (vta_templates.cpp)

namespace detail {

// --- arguments ---

struct TensorArg {
  std::vector<int64_t> shape;
  ir::DataType dtype;
  int64_t numel() const;
  std::vector<ir::Expr> shape_exprs() const;
};

// Throws OpError("workload <tmpl>: <msg>").
[[noreturn]] void bad_args(const std::string &tmpl, const std::string &msg);
// Rejects keys outside `allowed`.
void check_keys(const std::string &tmpl, const contracts::Json &args, std::initializer_list<const char *> allowed);
// A tensor argument {"shape":[...],"dtype":"..."} (dtype defaults to float32); rank < 0: any.
TensorArg tensor_arg(const std::string &tmpl, const contracts::Json &args, const std::string &key, int rank);
contracts::Json tensor_json(const TensorArg &t);
ir::DataType dtype_arg(const std::string &tmpl, const contracts::Json &args, const std::string &key,
                       ir::DataType fallback);
// An integer list of length n; a single integer is repeated; absent: the fallback.
std::vector<int64_t> ints_arg(const std::string &tmpl, const contracts::Json &args, const std::string &key, size_t n,
                              std::vector<int64_t> fallback);
// "padding" as [top, left, bottom, right]; [h, w] means the same on both sides; default none.
std::vector<int64_t> padding_arg(const std::string &tmpl, const contracts::Json &args);
int64_t int_arg(const std::string &tmpl, const contracts::Json &args, const std::string &key, int64_t fallback);
bool bool_arg(const std::string &tmpl, const contracts::Json &args, const std::string &key, bool fallback);
std::string string_arg(const std::string &tmpl, const contracts::Json &args, const std::string &key,
                       const std::string &fallback);
// The accumulation dtype for inputs of dtype `in`: int32 for integers of 8/16 bits, else `in`.
ir::DataType default_accumulator(ir::DataType in);

// Argument specs shared by the templates (ArgumentSpec in registry.h).
// A required tensor {"shape": [...], "dtype": ...} of `rank` dimensions (rank < 0: any).
ArgumentSpec tensor_spec(const std::string &name, int rank, const std::string &description);
// "epilogue": a list of epilogue op descriptors, default [] (epilogue.h).
ArgumentSpec epilogue_spec(const std::string &description = "elementwise ops fused after the operator");
// "out_dtype": the accumulation and output dtype, by default default_accumulator of the inputs.
ArgumentSpec out_dtype_spec();

// --- compute helpers ---

std::vector<ir::Expr> exprs(const std::vector<ir::Var> &v);
// `x` with zero padding of `pad_before`/`pad_after` on each dimension (a stage named `name`), or
// `x` itself when there is no padding. `value` is the padding value (default zero).
te::Tensor pad(const te::Tensor &x, const std::vector<int64_t> &pad_before, const std::vector<int64_t> &pad_after,
               const std::string &name, ir::Expr value = ir::Expr());

// --- schedule helpers ---

// The stage that writes the output, and the stage that computes the anchor's values into it: the
// epilogue's intermediate stages are inlined; when there is no epilogue the anchor is the output
// and a cache_write stage is made to accumulate in.
struct OutputAndAcc {
  te::Tensor out;
  te::Tensor acc;
};
OutputAndAcc prepare_anchor(te::Schedule &s, const Compute &c, const std::string &anchor_role = "anchor");
// Inlines every epilogue stage but the last.
void inline_epilogue(te::Schedule &s, const Compute &c);
// A generic schedule for an injective stage: all loops fused, split by `vector_block` (a multiple
// of the vector width), the outer part parallel, the inner vectorized.
void schedule_injective_stage(te::Schedule &s, const te::Tensor &t, int64_t vector_block);
// The same for rows: the axes from `first_inner` on are fused into a row, split by `vector_block`
// and the block vectorized; the axes before it are fused and parallel.
// first_inner <= 0 is schedule_injective_stage.
void schedule_rows(te::Schedule &s, const te::Tensor &t, int first_inner, int64_t vector_block);

int64_t largest_divisor_at_most(int64_t n, int64_t cap);
int64_t ceil_div(int64_t a, int64_t b);

}  // namespace detail
}  // namespace kiln::ops
