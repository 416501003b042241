#pragma once
// The op families of the op table, one file each; op_def.cpp registers them all once.
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/op_def.h"

namespace kiln::graph::detail {
void register_elementwise_ops();  // op_elementwise.cpp: unary, binary with broadcasting, Where, Cast, Clip
void register_tensor_ops();       // op_tensor.cpp: shapes and data movement (Reshape, Transpose, Concat, Gather, ...)
void register_reduce_ops();       // op_reduce.cpp: Reduce*, ArgMax/ArgMin, Softmax, TopK, ...
void register_nn_ops();           // op_nn.cpp: Conv, ConvTranspose, Gemm, MatMul, pooling, BatchNormalization
void register_norm_ops();         // op_norm.cpp: LayerNormalization, InstanceNormalization, LRN
void register_resize_ops();       // op_resize.cpp: Resize
void register_extra_ops();        // op_extra.cpp: losses, Einsum, quantization, scatter, OneHot, windows, ...
void register_layout_ops();       // op_layout.cpp: ConvNCHWc, LayoutTransform, PoolNCHWc (the NCHW[x]c layout)
void register_fused_ops();        // op_fused.cpp: FusedDense, FusedMatMul, FusedElementwise (made by passes)

// A template argument describing a tensor: {"shape": [...], "dtype": "float32"} (op_nn.cpp).
contracts::Json tensor_json(const TensorType &t);
// The epilogue list of a fused node (its JSON attribute `epilogue`) and how many extra inputs its
// descriptors read (op_nn.cpp).
contracts::Json fused_epilogue(const OpContext &ctx);
int epilogue_inputs(const contracts::Json &list);
// Fails (ctx.fail) unless the node's inputs from `first` on are the extra tensors its epilogue reads:
// as many as epilogue_inputs() says, each of the output's dtype (op_nn.cpp).
void check_epilogue_inputs(const OpContext &ctx, int first, const TensorType &out);
// How many operands an op of a FusedElementwise subgraph takes, or -1 for an op it may not hold
// (op_fused.cpp).
int fused_elementwise_arity(const std::string &op);
// An attribute as a FusedInjective subgraph holds it, or nullopt for a tensor attribute (op_fused.cpp).
std::optional<contracts::Json> injective_attribute_json(const Attribute &a);
}  // namespace kiln::graph::detail
