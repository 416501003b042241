#pragma once
// Graph passes: each takes a graph and returns the rewritten graph (graphs are values; a pass never
// edits its input). The pipeline that runs them in order is driver::optimize_graph
// (compiler/driver/graph_pipeline.h). One pass per source file in this folder.
#include <functional>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/ops/config_lookup.h"
#include "compiler/ops/target.h"

namespace kiln::graph::passes {

// Evaluates node `n` of `g`, whose inputs are all constants, returning its outputs' data. The
// pipeline passes the executor's kernels (driver::evaluate_node).
using Evaluator = std::function<std::vector<deploy::Tensor>(const Graph &g, const Node &n)>;

// Replaces every node whose inputs are all constants by constants (through `evaluate`), except
// nodes whose outputs together exceed `max_bytes`, which stay nodes so the model file does not grow.
Graph fold_constants(const Graph &g, const Evaluator &evaluate, int64_t max_bytes = int64_t{64} << 20);

// Removes what computes nothing: Identity and inference Dropout (whose optional mask output nothing
// reads; a Dropout whose mask is read stays, its mask all true); Add/Sub of a constant zero and
// Mul/Div by a constant one (when broadcasting does not change the shape); Reshape of a Reshape or
// Flatten (one Reshape to the final shape); Reshape/Flatten/Squeeze/Unsqueeze to the same shape;
// Transpose of a Transpose (one Transpose, or nothing when the permutations cancel); Cast to the
// same dtype.
Graph simplify(const Graph &g);

// BatchNormalization at inference (float32, constant statistics) whose input nothing else reads and
// is no graph output, folded into the weights and bias of its producer: a Conv with a constant
// weight (and bias), a Gemm with a constant 2-D weight (and bias; the scale multiplies the weight's
// output columns, its rows under transB; alpha and beta are folded in, a bias is created if there is
// none), or a MatMul of two matrices with a constant weight (it becomes such a Gemm); for the dense
// layers the BatchNormalization is over the [N, F] output's feature axis F. Any other
// BatchNormalization with constant statistics becomes y = x * scale + shift (one Mul and one Add
// over the channel axis). ConvTranspose is not folded.
Graph fold_batch_norm(const Graph &g);

// Common-subexpression elimination: nodes with the same op, attributes and inputs computed once;
// constants with the same type and data stored once.
Graph eliminate_common_subexpressions(const Graph &g);

// Operator fusion: a 2-D float32 Conv with the chain of elementwise consumers after it (Relu,
// Clip with constant bounds, LeakyRelu, HardSigmoid, HardSwish, Sigmoid, Tanh, Add or Mul of a
// scalar constant or of a tensor of the output's shape, e.g. a residual) becomes one FusedConv node,
// one kernel: the conv template with that chain as its epilogue. Likewise a float32 MatMul or Gemm
// with a constant 2-D weight becomes FusedDense (the dense template on the [M, K] view of the
// activations, the weight transposed to [N, K] once here), and a float32 batched MatMul of rank 3
// or more whose b has a's batch axes or none becomes FusedMatMul (the batch_matmul template on
// rank-3 views; a Transpose of b's last two axes read only there is absorbed); their chains also
// take a bias (a constant of N elements over the last axis), GELU as exported (the erf form or the
// tanh approximation), and Sub and Div by a scalar constant. Where a value is read by more than
// one node, or its reader has no named step, the elementwise region up to the value's immediate
// post-dominator joins as one {"op":"expr"} step when every node of it can (fuse_ops.h: diamonds
// such as x -> {a, b} -> add); a graph output ends the group, as do the caps of 32 nodes and 13
// epilogue inputs.
Graph fuse_epilogues(const Graph &g);

// MobileNetV2's expansion and depthwise layers as one kernel: a 1x1 ConvNCHWc (stride 1, no
// padding) whose output only a depthwise ConvNCHWc reads, and is no graph output, becomes one
// ExpandDepthwiseNCHWc node with both epilogues (conv1x1_depthwise_nchwc.x86), where neither
// epilogue reads an extra tensor and the expanded tensor has at least `min_expanded_bytes` (every
// pair of MobileNetV2, the smallest 960 channels at 7x7 = 188 KB, measured at parity or faster
// fused at 1 and 2 threads; smaller tensors stay in cache between the two kernels, unmeasured).
inline constexpr int64_t kMinExpandedBytes = int64_t{128} << 10;
Graph fuse_expand_depthwise(const Graph &g, int64_t min_expanded_bytes = kMinExpandedBytes);

// Injective producers inlined into their consumer where legal: a constant Pad of
// zeros over H and W of a rank-4 tensor read only by a 2-D Conv (auto_pad NOTSET) becomes the
// conv's padding. (Reshape, Flatten, Squeeze and Unsqueeze are views already: no kernel runs, and
// FusedDense / FusedMatMul read their inputs through such views.)
Graph inline_injective_producers(const Graph &g);

// Layout transformation to the blocked NCHW[x]c layout of the CPU convolution templates. Every 2-D
// float32 Conv or FusedConv with groups 1 (or depthwise with multiplier 1) and a constant weight
// becomes a ConvNCHWc node (op_layout.cpp) whose weight is packed at compile time, its blocks fixed
// in its workload. With a tuning log (`configs`), a conv whose tuning task (its workload with the
// blocks as knobs) has records takes the blocks of the record that costs least with the transforms
// it needs into it (its data in its input block, a residual in its output block); an expansion that
// fuse_expand_depthwise may fuse with the depthwise conv after it keeps its blocks and theirs, and a
// conv whose output it reads its output block (that kernel's task fixes them). Otherwise the
// blocks are chosen for the graph: a conv's input block is its producer's output block where that
// divides its channels (a depthwise conv's output block is its input block), its output block that
// of a residual it adds where legal, else the template's default (two vectors where the channels
// allow), else the widest block of whole vectors or part of one that divides the channels. A conv
// whose output block would be neither whole vectors nor part of one stays NCHW.
// Elementwise ops, pools and channel Concats whose inputs are blocked stay blocked; constants they
// read are re-laid out at compile time. A LayoutTransform node is inserted where a producer and a
// consumer disagree, once per (tensor, layout); graph outputs keep their layout and their names.
Graph alter_layout(const Graph &g, const ops::Target &target, const ops::ConfigLookup *configs = nullptr);

// Dense weights packed at compile time: every FusedDense with a constant weight [N, K] reads it
// packed once as [ceil(N/bn), K, bn] (the last block zero-padded) and builds dense_pack.x86 with
// "prepacked" and the block bn fixed in its workload (the template's default block for the
// shape), so the kernel has no packing stage and no tuned config changes the layout.
Graph prepack_dense(const Graph &g, const ops::Target &target);

// Layer normalization over the last axis as exported before opset 17 (ReduceMean, Sub, Pow 2,
// ReduceMean, Add epsilon, Sqrt, Div, Mul by a scale, Add of a bias, the scale and bias float32
// constants) becomes one LayerNormalization node when none of its intermediate values is read
// elsewhere.
Graph fuse_layer_norms(const Graph &g);

// Elementwise groups: fusable elementwise nodes (op_fused.cpp's list: Add, Sub, Mul, Div, Pow,
// Sqrt, Erf, Relu, Sigmoid, Tanh, Where, Cast, ...) grouped by the post-dominator rule of
// fuse_ops.h (a node joins its immediate post-dominator's group when every node between them is in
// it, so the group's values other than the last one are read only inside it and are no graph
// outputs) become one FusedElementwise node, one kernel. At most 32 nodes and 16 tensor inputs per
// group (scalar constants are inlined); a group of one node stays as it is.
Graph fuse_elementwise(const Graph &g);

// Injective groups (TVM's kInjective rule): Transpose, Slice, Pad (any mode), Gather, Expand, Tile,
// DepthToSpace and SpaceToDepth (compile-time inputs constant integers, no float16 or bool data)
// and the elementwise ops of fuse_elementwise, grouped by the same post-dominator rule; views
// (Reshape, Flatten, Squeeze, Unsqueeze) join a group inside it but never end one. A group with at
// least two nodes that are no views, one of them injective, becomes one FusedInjective node, one
// kernel that builds each member's compute through its own op (intermediate stages inlined).
// Elementwise-only groups are left to fuse_elementwise, and views outside a group stay views.
// Concat (its inputs may be written in place), Split (several outputs) and LayoutTransform (an
// operator template) end a group. A reduction (ReduceSum, ReduceMean, ReduceMax, ..., constant
// axes) starts a group and joins none, so it takes the elementwise and injective nodes before it
// (ReduceSum(x * x) is one kernel). Caps as fuse_elementwise's.
Graph fuse_injective(const Graph &g);

// Dead-code elimination: nodes and constants no graph output needs.
Graph eliminate_dead_code(const Graph &g);

}  // namespace kiln::graph::passes
