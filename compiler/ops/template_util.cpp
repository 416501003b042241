#include <algorithm>

#include "compiler/ir/error.h"
#include "compiler/ir/op.h"
#include "compiler/ops/templates.h"

namespace kiln::ops::detail {

using contracts::Json;
using namespace ir;

int64_t TensorArg::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<Expr> TensorArg::shape_exprs() const {
  std::vector<Expr> r;
  for (int64_t d : shape) r.emplace_back(static_cast<int>(d));
  return r;
}

ArgumentSpec tensor_spec(const std::string &name, int rank, const std::string &description) {
  const std::string shape = rank < 0 ? "any rank" : "rank " + std::to_string(rank);
  return {name, "tensor {\"shape\": [...], \"dtype\": ...} (" + shape + "; dtype default float32)", "", description};
}

ArgumentSpec epilogue_spec(const std::string &description) {
  return {"epilogue", "list of epilogue ops (see the epilogue format)", "[]", description};
}

ArgumentSpec out_dtype_spec() {
  return {"out_dtype", "dtype", "int32 for 8- and 16-bit integer inputs, else the inputs' dtype",
          "the dtype the operator accumulates and returns in"};
}

void bad_args(const std::string &tmpl, const std::string &msg) { throw OpError("workload " + tmpl + ": " + msg); }

void check_keys(const std::string &tmpl, const Json &args, std::initializer_list<const char *> allowed) {
  if (!args.is_object()) bad_args(tmpl, "arguments must be a JSON object, got " + args.dump());
  for (const auto &[k, v] : args.as_object()) {
    (void)v;
    bool ok = false;
    std::string list;
    for (const char *a : allowed) {
      ok = ok || k == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!ok) bad_args(tmpl, "unknown argument \"" + k + "\" (arguments: " + list + ")");
  }
}

namespace {

DataType parse_dtype(const std::string &tmpl, const std::string &s, const std::string &what) {
  try {
    DataType t = DataType::parse(s);
    if (t.lanes() != 1 || t.is_handle() || t.is_bool()) throw ExprError(s);
    return t;
  } catch (const ExprError &) {
    bad_args(tmpl, what + ": '" + s + "' is not a scalar numeric dtype");
  }
}

}  // namespace

TensorArg tensor_arg(const std::string &tmpl, const Json &args, const std::string &key, int rank) {
  const Json *t = args.find(key);
  if (!t) bad_args(tmpl, "missing tensor argument \"" + key + "\"");
  if (!t->is_object() || !t->contains("shape")) {
    bad_args(tmpl, "argument \"" + key + "\" must be {\"shape\": [...], \"dtype\": \"...\"}");
  }
  for (const auto &[k, v] : t->as_object()) {
    (void)v;
    if (k != "shape" && k != "dtype") bad_args(tmpl, "argument \"" + key + "\" has an unknown field \"" + k + "\"");
  }
  TensorArg r;
  const Json &shape = (*t)["shape"];
  if (!shape.is_array()) bad_args(tmpl, "\"" + key + ".shape\" must be a list of integers");
  int64_t elements = 1;
  bool overflow = false;
  for (const auto &d : shape.as_array()) {
    if (!d.is_int() || d.as_int() < 1 || d.as_int() > kMaxDimension) {
      bad_args(tmpl, "\"" + key + ".shape\" must hold integers from 1 to " + std::to_string(kMaxDimension) + ", got " +
                         shape.dump());
    }
    r.shape.push_back(d.as_int());
    overflow = overflow || __builtin_mul_overflow(elements, d.as_int(), &elements);
  }
  if (overflow || elements > kMaxTensorElements) {
    bad_args(tmpl, "\"" + key + "\" has " + (overflow ? std::string("more than 2^63") : std::to_string(elements)) +
                       " elements (shape " + shape.dump() + "); a tensor may have at most " +
                       std::to_string(kMaxTensorElements) + " (2^31 - 1: tensors are indexed with 32-bit integers)");
  }
  if (rank >= 0 && static_cast<int>(r.shape.size()) != rank) {
    bad_args(tmpl, "\"" + key + "\" must have rank " + std::to_string(rank) + ", got shape " + shape.dump());
  }
  if (r.shape.empty()) bad_args(tmpl, "\"" + key + "\" must have rank at least 1");
  r.dtype = Float(32);
  if (const Json *d = t->find("dtype")) {
    if (!d->is_string()) bad_args(tmpl, "\"" + key + ".dtype\" must be a dtype name");
    r.dtype = parse_dtype(tmpl, d->as_string(), key + ".dtype");
  }
  return r;
}

Json tensor_json(const TensorArg &t) {
  return Json::object({{"dtype", t.dtype.to_string()}, {"shape", Json::array_of(t.shape)}});
}

DataType dtype_arg(const std::string &tmpl, const Json &args, const std::string &key, DataType fallback) {
  const Json *d = args.find(key);
  if (!d) return fallback;
  if (!d->is_string()) bad_args(tmpl, "\"" + key + "\" must be a dtype name");
  return parse_dtype(tmpl, d->as_string(), key);
}

std::vector<int64_t> ints_arg(const std::string &tmpl, const Json &args, const std::string &key, size_t n,
                              std::vector<int64_t> fallback) {
  const Json *v = args.find(key);
  if (!v) return fallback;
  if (v->is_int()) return std::vector<int64_t>(n, v->as_int());
  if (!v->is_array() || v->size() != n) {
    bad_args(tmpl, "\"" + key + "\" must be an integer or a list of " + std::to_string(n) + " integers");
  }
  std::vector<int64_t> r;
  for (const auto &x : v->as_array()) {
    if (!x.is_int()) bad_args(tmpl, "\"" + key + "\" must hold integers, got " + v->dump());
    r.push_back(x.as_int());
  }
  return r;
}

std::vector<int64_t> padding_arg(const std::string &tmpl, const Json &args) {
  const Json *p = args.find("padding");
  if (p && p->is_array() && p->size() == 2) {
    auto hw = ints_arg(tmpl, args, "padding", 2, {});
    return {hw[0], hw[1], hw[0], hw[1]};
  }
  return ints_arg(tmpl, args, "padding", 4, {0, 0, 0, 0});
}

int64_t int_arg(const std::string &tmpl, const Json &args, const std::string &key, int64_t fallback) {
  const Json *v = args.find(key);
  if (!v) return fallback;
  if (!v->is_int()) bad_args(tmpl, "\"" + key + "\" must be an integer");
  return v->as_int();
}

bool bool_arg(const std::string &tmpl, const Json &args, const std::string &key, bool fallback) {
  const Json *v = args.find(key);
  if (!v) return fallback;
  if (!v->is_bool()) bad_args(tmpl, "\"" + key + "\" must be true or false");
  return v->as_bool();
}

std::string string_arg(const std::string &tmpl, const Json &args, const std::string &key, const std::string &fallback) {
  const Json *v = args.find(key);
  if (!v) return fallback;
  if (!v->is_string()) bad_args(tmpl, "\"" + key + "\" must be a string");
  return v->as_string();
}

DataType default_accumulator(DataType in) {
  if ((in.is_int() || in.is_uint()) && in.bits() <= 16) return Int(32);
  return in;
}

std::vector<Expr> exprs(const std::vector<Var> &v) { return std::vector<Expr>(v.begin(), v.end()); }

te::Tensor pad(const te::Tensor &x, const std::vector<int64_t> &pad_before, const std::vector<int64_t> &pad_after,
               const std::string &name, Expr value) {
  bool any = false;
  for (int64_t p : pad_before) any = any || p != 0;
  for (int64_t p : pad_after) any = any || p != 0;
  if (!any) return x;
  std::vector<Expr> in_shape = x.shape();
  std::vector<Expr> shape;
  for (size_t i = 0; i < in_shape.size(); ++i) {
    shape.push_back(in_shape[i] + static_cast<int>(pad_before[i] + pad_after[i]));
  }
  if (!value.defined()) value = make_zero(x.dtype());
  return te::compute(shape, te::FCompute([=](const std::vector<Var> &i) {
                       Expr cond;
                       std::vector<Expr> idx;
                       for (size_t d = 0; d < i.size(); ++d) {
                         Expr e = i[d] - static_cast<int>(pad_before[d]);
                         idx.push_back(e);
                         if (pad_before[d] > 0)
                           cond = cond.defined() ? (cond && (i[d] >= static_cast<int>(pad_before[d])))
                                                 : (i[d] >= static_cast<int>(pad_before[d]));
                         if (pad_after[d] > 0) cond = cond.defined() ? (cond && (e < in_shape[d])) : (e < in_shape[d]);
                       }
                       if (!cond.defined()) return x(idx);
                       return if_then_else(cond, x(idx), value);
                     }),
                     name, "pad");
}

void inline_epilogue(te::Schedule &s, const Compute &c) {
  for (size_t i = 0; i + 1 < c.epilogue.size(); ++i) s[c.epilogue[i]].compute_inline();
}

OutputAndAcc prepare_anchor(te::Schedule &s, const Compute &c, const std::string &anchor_role) {
  inline_epilogue(s, c);
  const te::Tensor &anchor = c.part(anchor_role);
  if (c.epilogue.empty()) {
    te::Tensor cache = s.cache_write(anchor, "global");
    return {anchor, cache};
  }
  return {c.epilogue.back(), anchor};
}

void schedule_injective_stage(te::Schedule &s, const te::Tensor &t, int64_t vector_block) {
  te::Stage st = s[t];
  std::vector<IterVar> axes;
  for (int i = 0; i < t.ndim(); ++i) axes.push_back(st.axis(static_cast<size_t>(i)));
  IterVar fused;
  st.fuse(axes, &fused);
  int64_t total = 1;
  for (const auto &d : t.shape()) total *= as_const_int(d).value_or(1);
  if (total <= vector_block) {
    st.vectorize(fused);
    return;
  }
  IterVar outer, inner;
  st.split(fused, static_cast<int>(vector_block), &outer, &inner);
  st.parallel(outer);
  st.vectorize(inner);
}

void schedule_rows(te::Schedule &s, const te::Tensor &t, int first_inner, int64_t vector_block) {
  if (first_inner <= 0) return schedule_injective_stage(s, t, vector_block);
  te::Stage st = s[t];
  const int nd = t.ndim();
  std::vector<IterVar> outer, inner;
  int64_t row = 1;
  for (int i = 0; i < nd; ++i) {
    (i < first_inner ? outer : inner).push_back(st.axis(static_cast<size_t>(i)));
    if (i >= first_inner) row *= as_const_int(t.shape()[static_cast<size_t>(i)]).value_or(1);
  }
  IterVar in = inner.front();
  if (inner.size() > 1) st.fuse(inner, &in);
  IterVar par = outer.front();
  if (outer.size() > 1) st.fuse(outer, &par);
  st.parallel(par);
  if (row > vector_block) {
    // The blocks of a row stay a loop of their own, so that a partial last block is peeled off.
    IterVar io, ii;
    st.split(in, static_cast<int>(vector_block), &io, &ii);
    in = ii;
  }
  st.vectorize(in);
}

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d >= 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kiln::ops::detail
