#pragma once
// Schedules: how a tensor expression is computed. A schedule has one stage per operation; the
// primitives transform a stage's loop structure (split, fuse, reorder, ...), place it relative to
// other stages (compute_at, compute_inline, compute_root), annotate loops (unroll, vectorize,
// parallel, bind, pragma) and add stages (cache_read, cache_write, rfactor). An illegal request
// raises ScheduleError naming the stage and axis.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/te/tensor.h"

namespace kiln::te {

class Schedule;
class ScheduleOwner;
class StageNode;
struct TensorIntrinNode;
using TensorIntrin = std::shared_ptr<const TensorIntrinNode>;

// How an iteration variable of a stage was derived.
struct SplitRelation {
  IterVar parent, outer, inner;
  Expr factor;  // defined for split by factor
  Expr nparts;  // defined for split by nparts
};
struct FuseRelation {
  IterVar outer, inner, fused;
};
struct RebaseRelation {  // a loop that starts at zero for a root variable with another minimum
  IterVar parent, rebased;
};
struct IterVarRelation {
  enum class Kind { Split, Fuse, Rebase } kind;
  SplitRelation split;
  FuseRelation fuse;
  RebaseRelation rebase;
};

// Annotations of one loop.
struct IterVarAttr {
  ir::ForKind for_kind = ir::ForKind::Serial;
  std::string bind_thread;  // "blockIdx.x", "threadIdx.y", "vthread", ...
  std::vector<std::pair<std::string, Expr>> pragmas;
  TensorIntrin tensor_intrin;
  // prefetch(): at the start of each iteration, a prefetch of tensor[indices] (indices in the
  // stage's axis and reduction variables).
  struct Prefetch {
    Tensor tensor;
    std::vector<Expr> indices;
  };
  std::vector<Prefetch> prefetches;
};

enum class AttachType { Root, Inline, Scope };

struct StorageAlign {
  int axis;
  int factor;
  int offset;
};

class StageNode {
 public:
  Operation op;         // the operation computed now (cache_write and rfactor may replace it)
  Operation origin_op;  // the operation the stage was created for (what users' tensors point to)
  std::vector<IterVar> all_iter_vars;
  std::vector<IterVar> leaf_iter_vars;
  std::vector<IterVarRelation> relations;
  std::map<IterVar, IterVarAttr> iter_var_attrs;
  AttachType attach_type = AttachType::Root;
  IterVar attach_ivar;
  StageNode *attach_stage = nullptr;
  std::string scope = "global";
  bool is_output = false;
  bool double_buffer = false;
  std::vector<StorageAlign> storage_align;
  Schedule *schedule = nullptr;

  // The root iteration variables: the op's axes then its reduce axes.
  std::vector<IterVar> root_iter_vars() const;
  const IterVarAttr *attr(const IterVar &iv) const;
  bool is_placeholder() const { return op->kind == OperationNode::Kind::Placeholder; }
};

// The loops split() makes: auto [xo, xi] = s[C].split(C.axis(0), 32);
struct SplitResult {
  IterVar outer, inner;
};
// The loops tile() makes, in their loop order.
struct TileResult {
  IterVar x_outer, y_outer, x_inner, y_inner;
};
// The inner extents of tile(): s[C].tile(i, j, {.x = 32, .y = 8}).
struct TileFactors {
  Expr x, y;
};

// A handle to a stage; schedule primitives are its methods.
class Stage {
 public:
  Stage() = default;
  explicit Stage(StageNode *n) : node_(n) {}
  StageNode *operator->() const { return node_; }
  StageNode *get() const { return node_; }
  bool defined() const { return node_ != nullptr; }
  const std::string &name() const { return node_->op->name; }

  // Splits `parent` into (outer, inner) with inner extent `factor`.
  Stage &split(const IterVar &parent, Expr factor, IterVar *outer, IterVar *inner);
  // Splits `parent` into (outer, inner) with outer extent `nparts`.
  Stage &split_nparts(const IterVar &parent, Expr nparts, IterVar *outer, IterVar *inner);
  // Splits x and y and reorders to (x_outer, y_outer, x_inner, y_inner).
  Stage &tile(const IterVar &x, const IterVar &y, Expr x_factor, Expr y_factor, IterVar *x_outer, IterVar *y_outer,
              IterVar *x_inner, IterVar *y_inner);
  // Fuses two adjacent loops (outer directly before inner) into one.
  Stage &fuse(const IterVar &outer, const IterVar &inner, IterVar *fused);
  // Fuses a run of adjacent loops, outermost first.
  Stage &fuse(const std::vector<IterVar> &axes, IterVar *fused);
  // The same primitives returning the loops they make.
  SplitResult split(const IterVar &parent, Expr factor);
  SplitResult split_nparts(const IterVar &parent, Expr nparts);
  TileResult tile(const IterVar &x, const IterVar &y, TileFactors factors);
  IterVar fuse(const IterVar &outer, const IterVar &inner);
  IterVar fuse(const std::vector<IterVar> &axes);
  Stage &reorder(const std::vector<IterVar> &order);

  Stage &compute_at(Stage parent, const IterVar &scope);
  Stage &compute_inline();
  Stage &compute_root();

  Stage &unroll(const IterVar &iv);
  Stage &vectorize(const IterVar &iv);
  Stage &parallel(const IterVar &iv);
  Stage &bind(const IterVar &iv, const std::string &thread_tag);
  Stage &pragma(const IterVar &iv, const std::string &key, Expr value = Expr(1));
  Stage &storage_align(const IterVar &axis, int factor, int offset);
  Stage &double_buffer();
  Stage &set_scope(const std::string &scope);
  Stage &tensorize(const IterVar &iv, TensorIntrin intrin);
  // At the start of each iteration of loop iv, a software prefetch of the cache line that holds
  // element `indices` of tensor t, an input the stage reads; the indices are expressions in the
  // stage's axis and reduction variables (axis(i), reduce_axis(i)), so that they can name an
  // element ahead of the one the iteration reads; the loops inside iv count as at their first
  // iteration. A hint: values do not change, and an index
  // outside the tensor never faults (keep it inside all the same, so the line is one to be read).
  Stage &prefetch(const Tensor &t, const IterVar &iv, std::vector<Expr> indices);

  // Merges loop iv with the next loop of the same range at the same place in the lowered code
  // (in the spirit of Halide's compute_with): each iteration runs this loop's body, then the next
  // loop's. Meant for a producer computed at the loop of its consumer, whose loop over the same
  // elements follows: e.g. the stage that stores a row and the reduction that reads it back, one
  // pass instead of two. Lowering checks that the result is the same: the next loop may read,
  // of what this loop writes, only the element this loop's one store writes in the same iteration
  // (same loops inside, same index, one-to-one in the loops), and may write nothing this loop uses;
  // statements in between must be independent of this loop (they move before it). Otherwise
  // lowering throws a ScheduleError saying why.
  Stage &fuse_with_next(const IterVar &iv);

  // Software-pipelines serial loop iv (of the rows of a row-wise operation): what its body computes
  // up to and including its first serial loop (a stage computed at iv, e.g. a row's statistics) runs one
  // iteration early, that loop interleaved with the body's last loop (this stage's loop over the
  // previous row), so one loop body mixes the next row's reads with this row's arithmetic and
  // writes. Lowering checks that the two touch different buffers (but for reading the same ones)
  // and throws a ScheduleError saying why otherwise.
  Stage &pipeline(const IterVar &iv);

  // Leaf loop `i` of this stage, outermost first.
  IterVar leaf(size_t i) const;
  // Root axis i (data-parallel) and reduce axis i of the stage's operation.
  IterVar axis(size_t i) const;
  IterVar reduce_axis(size_t i) const;

 private:
  [[noreturn]] void fail(const std::string &what) const;
  size_t leaf_position(const IterVar &iv, const char *primitive) const;
  IterVarAttr &attr_of(const IterVar &iv);
  // Marks loop iv for a lowering pass: the pragma `key` (attribute pragma_<key>) set to 1, once.
  Stage &mark(const IterVar &iv, const std::string &key);
  StageNode *node_ = nullptr;
};

class Schedule {
 public:
  Schedule() = default;
  Schedule(const Schedule &) = delete;
  Schedule &operator=(const Schedule &) = delete;

  // The stage of an operation or tensor (by the operation the user created).
  Stage operator[](const Tensor &t) const;
  Stage operator[](const Operation &op) const;
  Stage stage_of(const OperationNode *op) const;  // by origin op or current op; null if none

  const std::vector<Operation> &outputs() const { return outputs_; }
  const std::vector<std::unique_ptr<StageNode>> &stages() const { return stages_; }

  // Adds a stage that copies `t` into `scope`; `readers` now read the copy. Returns the copy.
  Tensor cache_read(const Tensor &t, const std::string &scope, const std::vector<Operation> &readers);
  // The stage of `t` now computes into a new cache stage in `scope`; t's stage copies it out.
  // Returns the cache tensor.
  Tensor cache_write(const Tensor &t, const std::string &scope);
  std::vector<Tensor> cache_write(const std::vector<Tensor> &ts, const std::string &scope);
  // Factors the reduction of `t` over `axis` (a leaf reduce axis of t's stage) into a new stage
  // whose extra dimension (at position factor_axis) is `axis`; t then reduces over that
  // dimension. Returns the factored tensor.
  Tensor rfactor(const Tensor &t, const IterVar &axis, int factor_axis = 0);

  // Internal: replaces the stage list (used by primitives that add stages).
  friend Schedule *create_schedule_ptr(const std::vector<Operation> &outputs);
  friend ScheduleOwner create_schedule(const std::vector<Operation> &outputs);
  // Rewrites every read of `from` ops into reads of `to` in the bodies of all stages except those
  // in `skip`.
  void replace_dataflow(const std::unordered_map<const OperationNode *, Operation> &map,
                        const std::vector<StageNode *> &only_in = {});
  StageNode *insert_stage_before(StageNode *pos, Operation op);

 private:
  std::vector<Operation> outputs_;
  std::vector<std::unique_ptr<StageNode>> stages_;  // producers before consumers
};

// The schedule create_schedule() makes, owned; s[C] reads as (*s)[C].
class ScheduleOwner : public std::unique_ptr<Schedule> {
 public:
  using std::unique_ptr<Schedule>::unique_ptr;
  ScheduleOwner(std::unique_ptr<Schedule> s) : std::unique_ptr<Schedule>(std::move(s)) {}  // NOLINT
  Stage operator[](const Tensor &t) const { return (**this)[t]; }
  Stage operator[](const Operation &op) const { return (**this)[op]; }
};

ScheduleOwner create_schedule(const std::vector<Operation> &outputs);
inline ScheduleOwner create_schedule(const std::vector<Tensor> &outputs) {
  std::vector<Operation> ops;
  for (const auto &t : outputs) ops.push_back(t.op());
  return create_schedule(ops);
}

// ---------------------------------------------------------------------------------------------
// Tensorize: a hardware intrinsic declared by the computation it performs.

// The code an intrinsic stands for, given the buffers it works on. Each function returns a
// statement in the flat loop IR (Load/Store/Call); `reset` and `update` may be undefined when the
// intrinsic has no separate reduction phases.
struct TensorIntrinBuffers {
  std::vector<ir::Buffer> inputs;
  std::vector<ir::Buffer> outputs;
  // Offsets (in elements) of each buffer's region within the real buffer; the region is
  // addressed as offset + sum(index_d * stride_d) with the strides of the buffer.
  std::vector<Expr> input_offsets, output_offsets;
};
using FIntrinBody = std::function<ir::Stmt(const TensorIntrinBuffers &)>;

struct TensorIntrinNode {
  std::string name;
  Operation op;                // the compute pattern (a compute on placeholders)
  std::vector<Tensor> inputs;  // the placeholders it reads
  FIntrinBody body, reset, update;
};

TensorIntrin decl_tensor_intrin(const std::string &name, const Tensor &pattern, FIntrinBody body,
                                FIntrinBody reset = nullptr, FIntrinBody update = nullptr);

}  // namespace kiln::te
