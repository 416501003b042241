#include "compiler/te/schedule.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"

namespace kiln::te {

using namespace ir;

std::vector<IterVar> StageNode::root_iter_vars() const {
  std::vector<IterVar> r;
  if (const auto *c = dynamic_cast<const ComputeOpNode *>(op.get())) {
    r = c->axis;
    r.insert(r.end(), c->reduce_axis.begin(), c->reduce_axis.end());
  }
  return r;
}

const IterVarAttr *StageNode::attr(const IterVar &iv) const {
  auto it = iter_var_attrs.find(iv);
  return it == iter_var_attrs.end() ? nullptr : &it->second;
}

namespace {

std::string iv_name(const IterVar &iv) { return iv.defined() ? iv->var.name() : "(undefined axis)"; }

bool is_reduce(const IterVar &iv) { return iv->iter_type == IterVarType::CommReduce; }

void init_stage(StageNode *s, Operation op) {
  s->op = op;
  s->origin_op = op;
  s->all_iter_vars.clear();
  s->leaf_iter_vars.clear();
  s->relations.clear();
  s->iter_var_attrs.clear();
  s->all_iter_vars = s->root_iter_vars();
  s->leaf_iter_vars = s->all_iter_vars;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Stage primitives

void Stage::fail(const std::string &what) const { throw ScheduleError("in stage " + node_->op->name + ", " + what); }

size_t Stage::leaf_position(const IterVar &iv, const char *primitive) const {
  if (!node_) throw ScheduleError(std::string(primitive) + " on an undefined stage");
  if (!iv.defined()) fail(std::string("cannot ") + primitive + " an undefined axis");
  auto &leaves = node_->leaf_iter_vars;
  auto it = std::find(leaves.begin(), leaves.end(), iv);
  if (it != leaves.end()) return static_cast<size_t>(it - leaves.begin());
  auto &all = node_->all_iter_vars;
  if (std::find(all.begin(), all.end(), iv) != all.end()) {
    // Name what happened to it.
    for (const auto &rel : node_->relations) {
      if (rel.kind == IterVarRelation::Kind::Split && rel.split.parent == iv) {
        fail(std::string("cannot ") + primitive + " axis " + iv_name(iv) + ": it was split into " +
             iv_name(rel.split.outer) + " and " + iv_name(rel.split.inner));
      }
      if (rel.kind == IterVarRelation::Kind::Fuse && (rel.fuse.outer == iv || rel.fuse.inner == iv)) {
        fail(std::string("cannot ") + primitive + " axis " + iv_name(iv) + ": it was fused into " +
             iv_name(rel.fuse.fused));
      }
    }
    fail(std::string("cannot ") + primitive + " axis " + iv_name(iv) + ": it is no longer a loop of this stage");
  }
  fail(std::string("cannot ") + primitive + " axis " + iv_name(iv) + ": it does not belong to this stage");
}

IterVarAttr &Stage::attr_of(const IterVar &iv) { return node_->iter_var_attrs[iv]; }

namespace {

void check_factor(const Stage &st, const IterVar &parent, const Expr &f, const char *what) {
  if (!f.defined()) {
    throw ScheduleError("in stage " + st.name() + ", split of axis " + iv_name(parent) + ": undefined " + what);
  }
  if (!f.type().is_int() || !f.type().is_scalar()) {
    throw ScheduleError("in stage " + st.name() + ", split of axis " + iv_name(parent) + ": " + what +
                        " must be an integer, got " + f.type().to_string());
  }
  if (auto c = as_const_int(f); c && *c <= 0) {
    throw ScheduleError(detail::concat("in stage ", st.name(), ", split of axis ", iv_name(parent), ": ", what,
                                       " must be positive, got ", *c));
  }
}

}  // namespace

Stage &Stage::split(const IterVar &parent, Expr factor, IterVar *outer, IterVar *inner) {
  size_t pos = leaf_position(parent, "split");
  check_factor(*this, parent, factor, "factor");
  if (node_->attr(parent) && !node_->attr(parent)->bind_thread.empty()) {
    fail("cannot split axis " + iv_name(parent) + ": it is bound to " + node_->attr(parent)->bind_thread);
  }
  factor = cast(Int(32), factor);
  IterVar o(Range(), Var(parent->var.name() + ".outer"), parent->iter_type);
  IterVar i(Range(), Var(parent->var.name() + ".inner"), parent->iter_type);
  IterVarRelation rel{IterVarRelation::Kind::Split, {parent, o, i, factor, Expr()}, {}, {}};
  node_->relations.push_back(rel);
  node_->all_iter_vars.push_back(o);
  node_->all_iter_vars.push_back(i);
  auto &leaves = node_->leaf_iter_vars;
  leaves.erase(leaves.begin() + pos);
  leaves.insert(leaves.begin() + pos, {o, i});
  if (outer) *outer = o;
  if (inner) *inner = i;
  return *this;
}

Stage &Stage::split_nparts(const IterVar &parent, Expr nparts, IterVar *outer, IterVar *inner) {
  size_t pos = leaf_position(parent, "split");
  check_factor(*this, parent, nparts, "nparts");
  if (node_->attr(parent) && !node_->attr(parent)->bind_thread.empty()) {
    fail("cannot split axis " + iv_name(parent) + ": it is bound to " + node_->attr(parent)->bind_thread);
  }
  nparts = cast(Int(32), nparts);
  IterVar o(Range(), Var(parent->var.name() + ".outer"), parent->iter_type);
  IterVar i(Range(), Var(parent->var.name() + ".inner"), parent->iter_type);
  IterVarRelation rel{IterVarRelation::Kind::Split, {parent, o, i, Expr(), nparts}, {}, {}};
  node_->relations.push_back(rel);
  node_->all_iter_vars.push_back(o);
  node_->all_iter_vars.push_back(i);
  auto &leaves = node_->leaf_iter_vars;
  leaves.erase(leaves.begin() + pos);
  leaves.insert(leaves.begin() + pos, {o, i});
  if (outer) *outer = o;
  if (inner) *inner = i;
  return *this;
}

Stage &Stage::tile(const IterVar &x, const IterVar &y, Expr x_factor, Expr y_factor, IterVar *x_outer, IterVar *y_outer,
                   IterVar *x_inner, IterVar *y_inner) {
  if (x == y) fail("cannot tile axis " + iv_name(x) + " with itself");
  IterVar xo, xi, yo, yi;
  split(x, std::move(x_factor), &xo, &xi);
  split(y, std::move(y_factor), &yo, &yi);
  reorder({xo, yo, xi, yi});
  if (x_outer) *x_outer = xo;
  if (y_outer) *y_outer = yo;
  if (x_inner) *x_inner = xi;
  if (y_inner) *y_inner = yi;
  return *this;
}

Stage &Stage::fuse(const IterVar &outer, const IterVar &inner, IterVar *fused) {
  size_t po = leaf_position(outer, "fuse");
  size_t pi = leaf_position(inner, "fuse");
  if (outer == inner) fail("cannot fuse axis " + iv_name(outer) + " with itself");
  if (pi != po + 1) {
    fail("cannot fuse " + iv_name(outer) + " and " + iv_name(inner) +
         ": they are not adjacent loops with the first outside the second (reorder them first)");
  }
  if (is_reduce(outer) != is_reduce(inner)) {
    fail("cannot fuse " + iv_name(outer) + " and " + iv_name(inner) + ": one is a reduction axis and the other is not");
  }
  for (const auto &iv : {outer, inner}) {
    const IterVarAttr *a = node_->attr(iv);
    if (a && !a->bind_thread.empty()) fail("cannot fuse axis " + iv_name(iv) + ": it is bound to " + a->bind_thread);
    if (a && a->for_kind != ForKind::Serial) {
      fail("cannot fuse axis " + iv_name(iv) + ": it is already " + for_kind_name(a->for_kind) +
           " (fuse first, then annotate the fused loop)");
    }
    if (a && a->tensor_intrin) fail("cannot fuse axis " + iv_name(iv) + ": it is tensorized");
  }
  IterVar f(Range(), Var(outer->var.name() + "." + inner->var.name() + ".fused"), outer->iter_type);
  IterVarRelation rel{IterVarRelation::Kind::Fuse, {}, {outer, inner, f}, {}};
  node_->relations.push_back(rel);
  node_->all_iter_vars.push_back(f);
  auto &leaves = node_->leaf_iter_vars;
  leaves.erase(leaves.begin() + po, leaves.begin() + po + 2);
  leaves.insert(leaves.begin() + po, f);
  if (fused) *fused = f;
  return *this;
}

SplitResult Stage::split(const IterVar &parent, Expr factor) {
  SplitResult r;
  split(parent, std::move(factor), &r.outer, &r.inner);
  return r;
}

SplitResult Stage::split_nparts(const IterVar &parent, Expr nparts) {
  SplitResult r;
  split_nparts(parent, std::move(nparts), &r.outer, &r.inner);
  return r;
}

TileResult Stage::tile(const IterVar &x, const IterVar &y, TileFactors factors) {
  TileResult r;
  tile(x, y, std::move(factors.x), std::move(factors.y), &r.x_outer, &r.y_outer, &r.x_inner, &r.y_inner);
  return r;
}

IterVar Stage::fuse(const IterVar &outer, const IterVar &inner) {
  IterVar fused;
  fuse(outer, inner, &fused);
  return fused;
}

IterVar Stage::fuse(const std::vector<IterVar> &axes) {
  IterVar fused;
  fuse(axes, &fused);
  return fused;
}

Stage &Stage::fuse(const std::vector<IterVar> &axes, IterVar *fused) {
  if (axes.empty()) fail("fuse of an empty list of axes");
  IterVar acc = axes[0];
  leaf_position(acc, "fuse");
  for (size_t i = 1; i < axes.size(); ++i) fuse(acc, axes[i], &acc);
  if (fused) *fused = acc;
  return *this;
}

Stage &Stage::reorder(const std::vector<IterVar> &order) {
  std::vector<size_t> pos;
  std::set<IterVar> seen;
  for (const auto &iv : order) {
    if (!seen.insert(iv).second) fail("reorder lists axis " + iv_name(iv) + " twice");
    pos.push_back(leaf_position(iv, "reorder"));
  }
  std::vector<size_t> sorted = pos;
  std::sort(sorted.begin(), sorted.end());
  auto &leaves = node_->leaf_iter_vars;
  for (size_t i = 0; i < order.size(); ++i) leaves[sorted[i]] = order[i];
  return *this;
}

namespace {

// Does `consumer` read `producer` through any chain of stages?
bool depends_on(const Schedule &sch, const OperationNode *consumer, const OperationNode *producer) {
  std::vector<const OperationNode *> work{consumer};
  std::set<const OperationNode *> seen;
  while (!work.empty()) {
    const OperationNode *op = work.back();
    work.pop_back();
    for (const auto &t : op->input_tensors()) {
      if (t.op().get() == producer) return true;
      if (seen.insert(t.op().get()).second) work.push_back(t.op().get());
    }
  }
  (void)sch;
  return false;
}

}  // namespace

Stage &Stage::compute_at(Stage parent, const IterVar &scope) {
  if (!parent.defined()) fail("compute_at an undefined stage");
  if (parent.get() == node_) fail("cannot compute_at itself");
  if (node_->is_placeholder()) fail("cannot compute_at: it is an input placeholder");
  if (node_->is_output) fail("cannot compute_at stage " + parent.name() + ": this stage is an output of the schedule");
  auto &pl = parent->leaf_iter_vars;
  if (std::find(pl.begin(), pl.end(), scope) == pl.end()) {
    fail("cannot compute_at axis " + iv_name(scope) + " of stage " + parent.name() +
         ": it is not a loop of that stage");
  }
  // The parent must depend on this stage, directly or through other stages; that every consumer
  // then lies inside the attach point is checked when lowering (attachments may come in any order).
  if (!depends_on(*node_->schedule, parent->op.get(), node_->op.get())) {
    fail("cannot compute_at stage " + parent.name() + ": " + parent.name() + " does not read " + name());
  }
  node_->attach_type = AttachType::Scope;
  node_->attach_stage = parent.get();
  node_->attach_ivar = scope;
  return *this;
}

Stage &Stage::compute_inline() {
  if (node_->is_placeholder()) fail("cannot compute_inline: it is an input placeholder");
  if (node_->is_output) fail("cannot compute_inline: it is an output of the schedule");
  const auto *c = dynamic_cast<const ComputeOpNode *>(node_->op.get());
  if (!c || c->is_reduction()) fail("cannot compute_inline: it is a reduction");
  if (node_->leaf_iter_vars.size() != node_->root_iter_vars().size() || !node_->relations.empty()) {
    fail("cannot compute_inline: its loops were already transformed (split/fuse)");
  }
  node_->attach_type = AttachType::Inline;
  node_->attach_stage = nullptr;
  node_->attach_ivar = IterVar();
  return *this;
}

Stage &Stage::compute_root() {
  if (node_->is_placeholder()) fail("cannot compute_root: it is an input placeholder");
  node_->attach_type = AttachType::Root;
  node_->attach_stage = nullptr;
  node_->attach_ivar = IterVar();
  return *this;
}

namespace {

void set_kind(Stage &st, StageNode *n, const IterVar &iv, ForKind kind, const char *what) {
  auto &a = n->iter_var_attrs[iv];
  if (!a.bind_thread.empty()) {
    throw ScheduleError("in stage " + st.name() + ", cannot " + what + " axis " + iv_name(iv) + ": it is bound to " +
                        a.bind_thread);
  }
  if (a.for_kind != ForKind::Serial && a.for_kind != kind) {
    throw ScheduleError("in stage " + st.name() + ", cannot " + what + " axis " + iv_name(iv) + ": it is already " +
                        for_kind_name(a.for_kind));
  }
  a.for_kind = kind;
}

}  // namespace

Stage &Stage::unroll(const IterVar &iv) {
  leaf_position(iv, "unroll");
  set_kind(*this, node_, iv, ForKind::Unrolled, "unroll");
  return *this;
}

Stage &Stage::vectorize(const IterVar &iv) {
  leaf_position(iv, "vectorize");
  if (is_reduce(iv)) fail("cannot vectorize axis " + iv_name(iv) + ": it is a reduction axis");
  set_kind(*this, node_, iv, ForKind::Vectorized, "vectorize");
  return *this;
}

Stage &Stage::parallel(const IterVar &iv) {
  leaf_position(iv, "parallel");
  if (is_reduce(iv)) fail("cannot parallelize axis " + iv_name(iv) + ": it is a reduction axis (use rfactor)");
  set_kind(*this, node_, iv, ForKind::Parallel, "parallelize");
  return *this;
}

Stage &Stage::bind(const IterVar &iv, const std::string &tag) {
  leaf_position(iv, "bind");
  static const std::set<std::string> tags = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
                                             "threadIdx.y", "threadIdx.z", "vthread"};
  if (!tags.count(tag)) fail("cannot bind axis " + iv_name(iv) + " to unknown thread tag '" + tag + "'");
  if (is_reduce(iv) && tag.rfind("blockIdx", 0) == 0) {
    fail("cannot bind reduction axis " + iv_name(iv) + " to " + tag + " (use rfactor, or bind it to threadIdx)");
  }
  auto &a = attr_of(iv);
  if (!a.bind_thread.empty()) {
    fail("cannot bind axis " + iv_name(iv) + " to " + tag + ": it is already bound to " + a.bind_thread);
  }
  if (a.for_kind != ForKind::Serial) {
    fail("cannot bind axis " + iv_name(iv) + ": it is already " + for_kind_name(a.for_kind));
  }
  if (tag != "vthread") {
    for (const auto &[other, oa] : node_->iter_var_attrs) {
      if (other != iv && oa.bind_thread == tag) {
        fail("cannot bind axis " + iv_name(iv) + " to " + tag + ": axis " + iv_name(other) + " is already bound to it");
      }
    }
  }
  a.bind_thread = tag;
  return *this;
}

Stage &Stage::prefetch(const Tensor &t, const IterVar &iv, std::vector<Expr> indices) {
  leaf_position(iv, "prefetch");
  const auto *c = dynamic_cast<const ComputeOpNode *>(node_->op.get());
  if (!c) fail("prefetch needs a compute stage");
  if (!t.defined()) fail("prefetch of an undefined tensor");
  const auto inputs = c->input_tensors();
  if (std::find(inputs.begin(), inputs.end(), t) == inputs.end()) {
    fail("prefetch of " + t.name() + ", which the stage does not read");
  }
  if (static_cast<int>(indices.size()) != t.ndim()) {
    fail(detail::concat("prefetch of ", t.name(), " with ", indices.size(), " indices; it has ", t.ndim(),
                        " dimensions"));
  }
  std::unordered_set<const ir::VariableNode *> own;
  for (const auto &v : c->axis) own.insert(v->var.get());
  for (const auto &v : c->reduce_axis) own.insert(v->var.get());
  for (auto &e : indices) {
    if (!e.defined() || !e.type().is_int() || !e.type().is_scalar()) {
      fail("prefetch of " + t.name() + " needs scalar integer indices");
    }
    ir::post_order_visit(e, [&](const ir::IRNode *n) {
      if (n->node_type == ir::NodeType::Variable && !own.count(static_cast<const ir::VariableNode *>(n))) {
        fail("prefetch index " + to_string(e) + " uses " + static_cast<const ir::VariableNode *>(n)->name +
             ", which is not an axis or reduction variable of the stage");
      }
    });
  }
  attr_of(iv).prefetches.push_back({t, std::move(indices)});
  return *this;
}

Stage &Stage::pragma(const IterVar &iv, const std::string &key, Expr value) {
  leaf_position(iv, "pragma");
  if (key.empty()) fail("pragma with an empty key on axis " + iv_name(iv));
  if (!value.defined()) fail("pragma " + key + " on axis " + iv_name(iv) + " has an undefined value");
  if (key == "auto_unroll_max_step" && !as_const_int(value)) {
    fail("pragma auto_unroll_max_step on axis " + iv_name(iv) + " needs a constant integer");
  }
  attr_of(iv).pragmas.emplace_back(key, value);
  return *this;
}

Stage &Stage::fuse_with_next(const IterVar &iv) {
  leaf_position(iv, "fuse_with_next");
  const IterVarAttr *a = node_->attr(iv);
  if (a && (a->for_kind == ForKind::Vectorized || a->for_kind == ForKind::ThreadBinding)) {
    fail("cannot fuse axis " + iv_name(iv) + " with the next loop: it is vectorized or bound to a thread");
  }
  // The pragma's attribute (attr::kPragmaFuseWithNext) marks the loop for the lowering pass.
  return mark(iv, "fuse_with_next");
}

Stage &Stage::mark(const IterVar &iv, const std::string &key) {
  for (const auto &p : attr_of(iv).pragmas) {
    if (p.first == key) return *this;
  }
  attr_of(iv).pragmas.emplace_back(key, Expr(1));
  return *this;
}

Stage &Stage::pipeline(const IterVar &iv) {
  leaf_position(iv, "pipeline");
  const IterVarAttr *a = node_->attr(iv);
  if (a && a->for_kind != ForKind::Serial) {
    fail("cannot pipeline axis " + iv_name(iv) + ": it is not a serial loop");
  }
  // The pragma's attribute (attr::kPragmaPipeline) marks the loop for the lowering pass.
  return mark(iv, "pipeline");
}

Stage &Stage::storage_align(const IterVar &axis, int factor, int offset) {
  if (!axis.defined()) fail("storage_align of an undefined axis");
  const auto *c = dynamic_cast<const ComputeOpNode *>(node_->op.get());
  int dim = -1;
  if (c) {
    for (size_t i = 0; i < c->axis.size(); ++i) {
      if (c->axis[i] == axis) dim = static_cast<int>(i);
    }
  }
  if (dim < 0) fail("cannot storage_align axis " + iv_name(axis) + ": it is not an original data axis of this stage");
  if (factor <= 0 || offset < 0 || offset >= factor) {
    fail(detail::concat("storage_align of axis ", iv_name(axis), ": need factor > 0 and 0 <= offset < factor, got ",
                        factor, ", ", offset));
  }
  node_->storage_align.push_back({dim, factor, offset});
  return *this;
}

Stage &Stage::double_buffer() {
  if (node_->is_placeholder() || node_->is_output) fail("double_buffer needs an intermediate stage");
  node_->double_buffer = true;
  return *this;
}

namespace {
// global, shared, local, or local.<tag>: a special on-chip memory of an accelerator
// (local.inp_buffer, ...), local to a thread.
bool known_scope(const std::string &scope) {
  return scope == "global" || scope == "shared" || scope == "local" || scope.rfind("local.", 0) == 0;
}
}  // namespace

Stage &Stage::set_scope(const std::string &scope) {
  if (!known_scope(scope)) {
    fail("unknown storage scope '" + scope + "' (global, shared, local, local.<tag>)");
  }
  if (node_->is_output && scope != "global") fail("an output stage must stay in global memory");
  node_->scope = scope;
  return *this;
}

Stage &Stage::tensorize(const IterVar &iv, TensorIntrin intrin) {
  leaf_position(iv, "tensorize");
  if (!intrin) fail("tensorize axis " + iv_name(iv) + " with a null intrinsic");
  attr_of(iv).tensor_intrin = std::move(intrin);
  return *this;
}

IterVar Stage::leaf(size_t i) const {
  if (i >= node_->leaf_iter_vars.size()) fail(detail::concat("has no loop ", i));
  return node_->leaf_iter_vars[i];
}

IterVar Stage::axis(size_t i) const {
  const auto *c = dynamic_cast<const ComputeOpNode *>(node_->op.get());
  if (!c || i >= c->axis.size()) fail(detail::concat("has no axis ", i));
  return c->axis[i];
}

IterVar Stage::reduce_axis(size_t i) const {
  const auto *c = dynamic_cast<const ComputeOpNode *>(node_->op.get());
  if (!c || i >= c->reduce_axis.size()) fail(detail::concat("has no reduce axis ", i));
  return c->reduce_axis[i];
}

// ---------------------------------------------------------------------------------------------
// Schedule

ScheduleOwner create_schedule(const std::vector<Operation> &outputs) {
  auto sch = std::make_unique<Schedule>();
  for (const auto &o : outputs) {
    if (!o) throw ScheduleError("create_schedule: an output is undefined");
  }
  sch->outputs_ = outputs;
  for (const auto &op : post_dfs_order(outputs)) {
    auto s = std::make_unique<StageNode>();
    init_stage(s.get(), op);
    s->schedule = sch.get();
    s->is_output = std::find(outputs.begin(), outputs.end(), op) != outputs.end();
    sch->stages_.push_back(std::move(s));
  }
  return sch;
}

Stage Schedule::stage_of(const OperationNode *op) const {
  for (const auto &s : stages_) {
    if (s->origin_op.get() == op || s->op.get() == op) return Stage(s.get());
  }
  return Stage();
}

Stage Schedule::operator[](const Operation &op) const {
  if (!op) throw ScheduleError("schedule lookup of an undefined operation");
  Stage s = stage_of(op.get());
  if (!s.defined()) throw ScheduleError("operation " + op->name + " is not part of this schedule");
  return s;
}

Stage Schedule::operator[](const Tensor &t) const {
  if (!t.defined()) throw ScheduleError("schedule lookup of an undefined tensor");
  return (*this)[t.op()];
}

StageNode *Schedule::insert_stage_before(StageNode *pos, Operation op) {
  auto s = std::make_unique<StageNode>();
  init_stage(s.get(), std::move(op));
  s->schedule = this;
  StageNode *raw = s.get();
  auto it = std::find_if(stages_.begin(), stages_.end(), [&](const auto &p) { return p.get() == pos; });
  stages_.insert(it, std::move(s));
  return raw;
}

namespace {

// Rewrites ProducerLoads of mapped operations.
class DataflowReplacer : public IRMutator {
 public:
  explicit DataflowReplacer(const std::unordered_map<const OperationNode *, Operation> &m) : map_(m) {}
  using IRMutator::mutate;
  bool changed = false;

 protected:
  Expr visit(const ProducerLoadNode *op, const Expr &self) override {
    Expr e = IRMutator::visit(op, self);
    const auto *l = e.as<ProducerLoadNode>();
    auto it = map_.find(operation_of(l->producer.get()));
    if (it == map_.end()) return e;
    changed = true;
    return ProducerLoadNode::make(it->second, l->value_index, l->indices);
  }

 private:
  const std::unordered_map<const OperationNode *, Operation> &map_;
};

// A copy of a compute op with new bodies (same axes).
Operation with_body(const ComputeOpNode *c, std::vector<Expr> body) {
  auto n = std::make_shared<ComputeOpNode>();
  n->name = c->name;
  n->tag = c->tag;
  n->axis = c->axis;
  n->reduce_axis = c->reduce_axis;
  n->body = std::move(body);
  return n;
}

}  // namespace

void Schedule::replace_dataflow(const std::unordered_map<const OperationNode *, Operation> &map,
                                const std::vector<StageNode *> &only_in) {
  // Rewriting a stage's op creates a new op; every later reader of it is rewritten in turn.
  // Stages outside `only_in` keep reading the original producers of `map`.
  std::unordered_map<const OperationNode *, Operation> consequences;
  for (auto &s : stages_) {
    const auto *c = dynamic_cast<const ComputeOpNode *>(s->op.get());
    if (!c) continue;
    bool selected = only_in.empty() || std::find(only_in.begin(), only_in.end(), s.get()) != only_in.end();
    std::unordered_map<const OperationNode *, Operation> m = consequences;
    if (selected) m.insert(map.begin(), map.end());
    if (m.empty()) continue;
    DataflowReplacer r(m);
    std::vector<Expr> body;
    for (const auto &b : c->body) body.push_back(r.mutate(b));
    if (!r.changed) continue;
    Operation n = with_body(c, std::move(body));
    consequences[s->op.get()] = n;
    if (s->origin_op != s->op) consequences[s->origin_op.get()] = n;
    s->op = n;
  }
}

Tensor Schedule::cache_read(const Tensor &t, const std::string &scope, const std::vector<Operation> &readers) {
  if (!t.defined()) throw ScheduleError("cache_read of an undefined tensor");
  Stage src = stage_of(t.op().get());
  if (!src.defined()) throw ScheduleError("cache_read: tensor " + t.name() + " is not part of this schedule");
  if (!known_scope(scope)) {
    throw ScheduleError("cache_read of " + t.name() + ": unknown scope '" + scope +
                        "' (global, shared, local, local.<tag>)");
  }
  if (readers.empty()) throw ScheduleError("cache_read of " + t.name() + ": no readers given");
  std::vector<StageNode *> reader_stages;
  for (const auto &r : readers) {
    Stage rs = stage_of(r.get());
    if (!rs.defined())
      throw ScheduleError("cache_read of " + t.name() + ": reader " + r->name + " is not in this schedule");
    bool found = false;
    for (const auto &in : rs->op->input_tensors()) {
      if (in.op() == src->op || in.op() == t.op()) found = true;
    }
    if (!found) throw ScheduleError("cache_read of " + t.name() + ": stage " + r->name + " does not read it");
    reader_stages.push_back(rs.get());
  }
  Tensor source = src->op->output(t.value_index());
  std::vector<Expr> shape = source.shape();
  Tensor cache =
      compute(shape, FCompute([&](const std::vector<Var> &i) { return source(std::vector<Expr>(i.begin(), i.end())); }),
              t.name() + "." + scope);
  // Insert after the source stage: before the first reader.
  StageNode *first_reader = nullptr;
  for (auto &s : stages_) {
    if (std::find(reader_stages.begin(), reader_stages.end(), s.get()) != reader_stages.end()) {
      first_reader = s.get();
      break;
    }
  }
  StageNode *cs = insert_stage_before(first_reader, cache.op());
  cs->scope = scope;
  std::unordered_map<const OperationNode *, Operation> m{{src->op.get(), cache.op()}};
  if (t.op() != src->op) m[t.op().get()] = cache.op();
  replace_dataflow(m, reader_stages);
  return cache;
}

std::vector<Tensor> Schedule::cache_write(const std::vector<Tensor> &ts, const std::string &scope) {
  if (ts.empty()) throw ScheduleError("cache_write of no tensors");
  Stage st = stage_of(ts[0].op().get());
  if (!st.defined()) throw ScheduleError("cache_write: tensor " + ts[0].name() + " is not part of this schedule");
  const auto *c = dynamic_cast<const ComputeOpNode *>(st->op.get());
  if (!c) throw ScheduleError("cache_write of " + ts[0].name() + ": it is not computed (a placeholder)");
  if (static_cast<int>(ts.size()) != c->num_outputs()) {
    throw ScheduleError("cache_write of " + ts[0].name() + ": give all outputs of a multi-output stage");
  }
  if (scope != "global" && scope != "shared" && scope != "local") {
    throw ScheduleError("cache_write of " + ts[0].name() + ": unknown scope '" + scope + "'");
  }
  if (st->leaf_iter_vars.size() != st->root_iter_vars().size() || !st->relations.empty()) {
    throw ScheduleError(
        "in stage " + st.name() +
        ", cannot cache_write: its loops were already transformed (call cache_write before split/fuse)");
  }
  if (st->attach_type == AttachType::Inline) {
    throw ScheduleError("in stage " + st.name() + ", cannot cache_write an inlined stage");
  }
  // The cache stage computes the original body with fresh axes.
  auto cache = std::make_shared<ComputeOpNode>();
  cache->name = c->name + "." + scope;
  cache->tag = c->tag;
  std::unordered_map<const VariableNode *, Expr> vmap;
  for (const auto &iv : c->axis) {
    IterVar n(iv->dom, Var(iv->var.name() + ".c"), iv->iter_type);
    cache->axis.push_back(n);
    vmap[iv->var.get()] = n->var;
  }
  std::vector<IterVar> new_reduce;
  for (const auto &iv : c->reduce_axis) {
    IterVar n(iv->dom, Var(iv->var.name() + ".c"), iv->iter_type);
    new_reduce.push_back(n);
    vmap[iv->var.get()] = n->var;
  }
  auto subst = [&](const Expr &e) {
    return ir_transform(e, [&](const Expr &x) -> Expr {
      if (const auto *v = x.as<VariableNode>()) {
        auto it = vmap.find(v);
        if (it != vmap.end()) return it->second;
      }
      return Expr();
    });
  };
  for (const auto &b : c->body) {
    if (const auto *r = b.as<ReduceNode>()) {
      std::vector<Expr> src;
      for (const auto &s : r->source) src.push_back(subst(s));
      cache->body.push_back(ReduceNode::make(r->combiner, src, new_reduce, subst(r->condition), r->value_index));
    } else {
      cache->body.push_back(subst(b));
    }
  }
  cache->reduce_axis = new_reduce;
  Operation cache_op = cache;
  // The original stage now copies from the cache.
  auto copy = std::make_shared<ComputeOpNode>();
  copy->name = c->name;
  copy->tag = c->tag;
  copy->axis = c->axis;
  std::vector<Expr> idx;
  for (const auto &iv : c->axis) idx.push_back(iv->var);
  for (int i = 0; i < c->num_outputs(); ++i) copy->body.push_back(ProducerLoadNode::make(cache_op, i, idx));
  Operation old = st->op;
  StageNode *cs = insert_stage_before(st.get(), cache_op);
  cs->scope = scope;
  st->op = copy;
  st->all_iter_vars = st->root_iter_vars();
  st->leaf_iter_vars = st->all_iter_vars;
  st->iter_var_attrs.clear();
  std::unordered_map<const OperationNode *, Operation> m{{old.get(), Operation(copy)}};
  if (st->origin_op != old) m[st->origin_op.get()] = copy;
  std::vector<StageNode *> others;
  for (auto &s : stages_) {
    if (s.get() != st.get() && s.get() != cs) others.push_back(s.get());
  }
  replace_dataflow(m, others);
  std::vector<Tensor> out;
  for (int i = 0; i < cache_op->num_outputs(); ++i) out.push_back(cache_op->output(i));
  return out;
}

Tensor Schedule::cache_write(const Tensor &t, const std::string &scope) {
  if (!t.defined()) throw ScheduleError("cache_write of an undefined tensor");
  if (t.op()->num_outputs() != 1) {
    throw ScheduleError("cache_write of " + t.name() + ": a multi-output stage needs all its outputs");
  }
  return cache_write(std::vector<Tensor>{t}, scope)[0];
}

TensorIntrin decl_tensor_intrin(const std::string &name, const Tensor &pattern, FIntrinBody body, FIntrinBody reset,
                                FIntrinBody update) {
  if (!pattern.defined()) throw ExprError("tensor intrinsic " + name + ": undefined pattern");
  const auto *c = dynamic_cast<const ComputeOpNode *>(pattern.op().get());
  if (!c) throw ExprError("tensor intrinsic " + name + ": the pattern must be a compute");
  if (!body) throw ExprError("tensor intrinsic " + name + ": no body function");
  for (const auto &in : c->input_tensors()) {
    if (in.op()->kind != OperationNode::Kind::Placeholder) {
      throw ExprError("tensor intrinsic " + name + ": the pattern must read placeholders only, not " + in.name());
    }
  }
  auto n = std::make_shared<TensorIntrinNode>();
  n->name = name;
  n->op = pattern.op();
  n->inputs = c->input_tensors();
  n->body = std::move(body);
  n->reset = std::move(reset);
  n->update = std::move(update);
  return n;
}

}  // namespace kiln::te

// ---------------------------------------------------------------------------------------------
// rfactor

namespace kiln::te {

namespace {

Expr ceil_div_expr(const Expr &a, const Expr &b) { return floordiv(a + b - 1, b); }

}  // namespace

Tensor Schedule::rfactor(const Tensor &t, const IterVar &axis, int factor_axis) {
  if (!t.defined()) throw ScheduleError("rfactor of an undefined tensor");
  Stage st = stage_of(t.op().get());
  if (!st.defined()) throw ScheduleError("rfactor: tensor " + t.name() + " is not part of this schedule");
  const auto *c = dynamic_cast<const ComputeOpNode *>(st->op.get());
  if (!c || !c->is_reduction())
    throw ScheduleError("in stage " + st.name() + ", cannot rfactor: it is not a reduction");
  auto &leaves = st->leaf_iter_vars;
  if (!axis.defined() || std::find(leaves.begin(), leaves.end(), axis) == leaves.end()) {
    throw ScheduleError("in stage " + st.name() + ", cannot rfactor axis " + iv_name(axis) +
                        ": it is not a loop of this stage");
  }
  if (axis->iter_type != IterVarType::CommReduce) {
    throw ScheduleError("in stage " + st.name() + ", cannot rfactor axis " + iv_name(axis) +
                        ": it is not a reduction axis");
  }
  if (factor_axis < 0 || factor_axis > static_cast<int>(c->axis.size())) {
    throw ScheduleError(detail::concat("in stage ", st.name(), ", rfactor: factor_axis ", factor_axis,
                                       " is out of range [0, ", c->axis.size(), "]"));
  }
  // Extents of every reduce variable, from the reduce roots' domains through the relations.
  std::unordered_map<const IterVarNode *, Range> dom;
  for (const auto &iv : c->reduce_axis) dom[iv.get()] = iv->dom;
  for (const auto &iv : c->axis) dom[iv.get()] = iv->dom;
  for (const auto &rel : st->relations) {
    if (rel.kind == IterVarRelation::Kind::Split) {
      const auto &s = rel.split;
      Range p = dom.at(s.parent.get());
      if (s.factor.defined()) {
        dom[s.outer.get()] = Range(0, ceil_div_expr(p.extent, s.factor));
        dom[s.inner.get()] = Range(0, s.factor);
      } else {
        dom[s.outer.get()] = Range(0, s.nparts);
        dom[s.inner.get()] = Range(0, ceil_div_expr(p.extent, s.nparts));
      }
    } else if (rel.kind == IterVarRelation::Kind::Fuse) {
      dom[rel.fuse.fused.get()] = Range(0, dom.at(rel.fuse.outer.get()).extent * dom.at(rel.fuse.inner.get()).extent);
    } else {
      dom[rel.rebase.rebased.get()] = Range(0, dom.at(rel.rebase.parent.get()).extent);
    }
  }
  // The factored stage: data axes plus the rfactored axis as a data axis; it reduces over the
  // other reduce leaves.
  auto rf = std::make_shared<ComputeOpNode>();
  rf->name = c->name + ".rf";
  rf->tag = c->tag;
  std::unordered_map<const VariableNode *, Expr> vmap;
  std::vector<IterVar> data_axes;
  for (const auto &iv : c->axis) {
    IterVar n(iv->dom, Var(iv->var.name()), IterVarType::DataPar);
    data_axes.push_back(n);
    vmap[iv->var.get()] = n->var;
  }
  IterVar v(Range(0, dom.at(axis.get()).extent), Var(axis->var.name() + ".v"), IterVarType::DataPar);
  data_axes.insert(data_axes.begin() + factor_axis, v);
  rf->axis = data_axes;
  // Leaf values: the rfactored axis is the new data axis, other reduce leaves new reduce axes.
  std::unordered_map<const IterVarNode *, Expr> values;
  std::vector<IterVar> new_reduce;
  for (const auto &iv : leaves) {
    if (iv == axis) {
      values[iv.get()] = v->var;
    } else if (iv->iter_type == IterVarType::CommReduce) {
      IterVar n(dom.at(iv.get()), Var(iv->var.name()), IterVarType::CommReduce);
      new_reduce.push_back(n);
      values[iv.get()] = n->var;
    } else {
      values[iv.get()] = iv->var;
    }
  }
  std::vector<Expr> conds;
  for (auto it = st->relations.rbegin(); it != st->relations.rend(); ++it) {
    const auto &rel = *it;
    if (rel.kind == IterVarRelation::Kind::Split) {
      const auto &s = rel.split;
      if (!values.count(s.outer.get()) || !values.count(s.inner.get())) continue;
      Expr val = values[s.outer.get()] * dom.at(s.inner.get()).extent + values[s.inner.get()];
      Range p = dom.at(s.parent.get());
      if (s.parent->iter_type == IterVarType::CommReduce) {
        auto oe = as_const_int(dom.at(s.outer.get()).extent), ie = as_const_int(dom.at(s.inner.get()).extent),
             pe = as_const_int(p.extent);
        if (!(oe && ie && pe && *oe * *ie == *pe)) conds.push_back(val < p.extent);
      }
      values[s.parent.get()] = is_zero(p.min) ? val : val + p.min;
    } else if (rel.kind == IterVarRelation::Kind::Fuse) {
      const auto &f = rel.fuse;
      if (!values.count(f.fused.get())) continue;
      Expr ie = dom.at(f.inner.get()).extent;
      values[f.outer.get()] = floordiv(values[f.fused.get()], ie) + dom.at(f.outer.get()).min;
      values[f.inner.get()] = floormod(values[f.fused.get()], ie) + dom.at(f.inner.get()).min;
    } else {
      if (!values.count(rel.rebase.rebased.get())) continue;
      values[rel.rebase.parent.get()] = values[rel.rebase.rebased.get()] + dom.at(rel.rebase.parent.get()).min;
    }
  }
  for (const auto &iv : c->reduce_axis) vmap[iv->var.get()] = values.at(iv.get());
  auto subst = [&](const Expr &e) {
    return ir_transform(e, [&](const Expr &x) -> Expr {
      if (const auto *var = x.as<VariableNode>()) {
        auto it = vmap.find(var);
        if (it != vmap.end()) return it->second;
      }
      return Expr();
    });
  };
  const auto *r0 = c->body[0].as<ReduceNode>();
  std::vector<Expr> src;
  for (const auto &s : r0->source) src.push_back(subst(s));
  Expr cond = subst(r0->condition);
  for (const auto &cc : conds) cond = cond && cc;
  if (new_reduce.empty()) {
    // Nothing left to reduce: the factored stage is the source itself.
    for (size_t i = 0; i < c->body.size(); ++i)
      rf->body.push_back(select(cond, src[i], r0->combiner->identity_element[i]));
  } else {
    for (size_t i = 0; i < c->body.size(); ++i) {
      rf->body.push_back(ReduceNode::make(r0->combiner, src, new_reduce, cond, static_cast<int>(i)));
    }
    rf->reduce_axis = new_reduce;
  }
  Operation rf_op = rf;
  // The original stage now reduces the factored dimension.
  IterVar k(Range(0, dom.at(axis.get()).extent), Var(axis->var.name() + ".v"), IterVarType::CommReduce);
  auto fin = std::make_shared<ComputeOpNode>();
  fin->name = c->name;
  fin->tag = c->tag;
  fin->axis = c->axis;
  fin->reduce_axis = {k};
  std::vector<Expr> idx;
  for (const auto &iv : c->axis) idx.push_back(iv->var);
  idx.insert(idx.begin() + factor_axis, k->var);
  std::vector<Expr> fsrc;
  for (int i = 0; i < rf_op->num_outputs(); ++i) fsrc.push_back(ProducerLoadNode::make(rf_op, i, idx));
  for (size_t i = 0; i < c->body.size(); ++i) {
    fin->body.push_back(ReduceNode::make(r0->combiner, fsrc, {k}, Expr(), static_cast<int>(i)));
  }
  Operation old = st->op;
  StageNode *rs = insert_stage_before(st.get(), rf_op);
  (void)rs;
  st->op = fin;
  st->relations.clear();
  st->iter_var_attrs.clear();
  st->all_iter_vars = st->root_iter_vars();
  st->leaf_iter_vars = st->all_iter_vars;
  std::unordered_map<const OperationNode *, Operation> m{{old.get(), Operation(fin)}};
  if (st->origin_op != old) m[st->origin_op.get()] = fin;
  std::vector<StageNode *> others;
  for (auto &s : stages_) {
    if (s.get() != st.get() && s.get() != rs) others.push_back(s.get());
  }
  replace_dataflow(m, others);
  return rf_op->output(t.value_index());
}

}  // namespace kiln::te
