#pragma once
// Generic CPU schedules for operators that have no template of their own (the graph compiler's
// fallback): every intermediate elementwise stage is inlined into the output, whose loops are fused,
// split by a block of vector lanes, the outer part parallel and the block vectorized.
#include <cstdint>

#include "compiler/ops/target.h"
#include "compiler/te/schedule.h"

namespace kiln::ops {

// Inlines every stage still at the root that is a compute, not a reduction and not an output.
void inline_intermediate_stages(te::Schedule &s);
// Inlines every non-output, non-reduction stage still at the root and schedules `out` as above
// with `block` elements per vector block.
void schedule_injective(te::Schedule &s, const te::Tensor &out, int64_t block);
// As above with a block of four vectors of the target.
void schedule_injective(te::Schedule &s, const te::Tensor &out, const Target &target);

// layout_transform.x86's compute of `x`, NCHW (src_block 0) or NCHW[src_block]c, into NCHW[dst_block]c
// or NCHW (dst_block 0), for a kernel that computes the data otherwise (a fused group ending in a
// LayoutTransform). UserError where x's rank or block does not match, or dst_block does not divide
// the channels.
te::Tensor layout_transform(const te::Tensor &x, int64_t src_block, int64_t dst_block);
// Schedules `out`, a layout_transform() to or from NCHW, as layout_transform.x86's default (the
// transposed schedule), every other stage at the root inlined into it.
void schedule_layout_transform(te::Schedule &s, const te::Tensor &out, const Target &target);

// Schedules `t`, a reduction over the innermost data (its reduce axes, fused), at `par` of `at`
// (or at the root when `par` is undefined) as a vectorized row reduction: `block` (a vector of
// lanes) partial results in up to four independent accumulators, so that the adds of consecutive
// vectors do not wait on each other, and the partial results summed pairwise (a tree of halving
// vector adds) rather than one after the other. With `interleave_rows`, `t`'s loops over its rows
// (the rows one iteration of `par` computes) go inside each reduction loop and each level of the
// tree, unrolled: the rows' chains of dependent adds are then independent instructions of one loop
// body, which the processor overlaps, rather than one row's chain after another's.
// `max_accumulators` (1 to 4) caps the accumulators, e.g. where interleaved rows already give
// independent chains and registers are short.
void schedule_row_reduction(te::Schedule &s, const te::Tensor &t, te::Stage at, const te::IterVar &par, int64_t block,
                            bool interleave_rows = false, int64_t max_accumulators = 4);

// The elements of a row of `len` that one iteration of schedule_row_reduction's loop over the row
// reads (`block` times its accumulators): a stage that produces the row in loops of this width
// lines up with the reduction's loop (Stage::fuse_with_next).
int64_t row_reduction_width(int64_t len, int64_t block, int64_t max_accumulators = 4);

// te::sum with -0.0 as the identity of float types (0 for the others): -0.0 + v is v for every v
// (0.0 + -0.0 is 0.0, so 0.0 + v is not), so the code generator drops the addition of the identity
// that starts each accumulator and each level of a reduction tree. The result differs from
// te::sum's only where every value summed is -0.0 (then -0.0, as IEEE addition gives).
ir::Expr sum_from_negative_zero(ir::Expr source, std::vector<te::IterVar> axis);

// te::max with -infinity as the identity of float types (the lowest value of the others): the
// maximum of -infinity and v is v for every v, so the code generator drops the comparison with the
// identity that starts each accumulator and each level of a reduction tree (te::max's identity,
// the lowest finite value, is not the maximum's identity for -infinity, so it stays). The result
// differs from te::max's only where every value is -infinity (then -infinity, not the lowest
// finite value).
ir::Expr max_from_negative_infinity(ir::Expr source, std::vector<te::IterVar> axis);
// Its identity: -infinity for float types, the lowest value of the others (max pooling's padding).
ir::Expr negative_infinity_or_lowest(ir::DataType t);

// te::min with +infinity as the identity of float types (the highest value of the others), as
// max_from_negative_infinity: the minimum of values that are all +infinity is +infinity.
ir::Expr min_from_positive_infinity(ir::Expr source, std::vector<te::IterVar> axis);

}  // namespace kiln::ops
