#include "compiler/lower/make_packed_api.h"

#include <cctype>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"
#include "deploy/c_abi.h"
#include "deploy/tensor.h"

namespace kiln::lower {

namespace {

using ir::DataType;
using ir::Expr;
using ir::Stmt;
using ir::Var;

// The statements that run before the kernel, in order; each one encloses everything after it.
class Prologue {
 public:
  void check(Expr ok, std::string message) {
    if (ir::is_one(ok)) return;
    items_.push_back({Item::Assert, std::move(ok), std::move(message), Var(), Stmt()});
  }
  void let(Var v, Expr value) { items_.push_back({Item::Let, std::move(value), "", std::move(v), Stmt()}); }
  void run(Stmt s) { items_.push_back({Item::Run, Expr(), "", Var(), std::move(s)}); }

  // The statements around `body`.
  Stmt wrap(Stmt body) const {
    for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
      switch (it->kind) {
        case Item::Assert:
          body = ir::AssertStmtNode::make(it->value, it->message, body);
          break;
        case Item::Let:
          body = ir::LetStmtNode::make(it->var, it->value, body);
          break;
        case Item::Run:
          body = ir::BlockNode::make(it->stmt, body);
          break;
      }
    }
    return body;
  }
  bool empty() const { return items_.empty(); }

 private:
  struct Item {
    enum Kind { Assert, Let, Run } kind;
    Expr value;
    std::string message;
    Var var;
    Stmt stmt;
  };
  std::vector<Item> items_;
};

Expr int32(int64_t v) { return ir::make_const(ir::Int(32), v); }
Expr int64(int64_t v) { return ir::make_const(ir::Int(64), v); }

// a * b, folded where both are constants.
Expr product(const Expr &a, const Expr &b) {
  auto x = ir::as_const_int(a), y = ir::as_const_int(b);
  if (x && y) return int64(*x * *y);
  if (x && *x == 1) return b;
  return a * b;
}

bool equal_constants(const Expr &a, const Expr &b) {
  auto x = ir::as_const_int(a), y = ir::as_const_int(b);
  return x && y && *x == *y;
}

Expr arg_field(const Var &args, size_t i, ArgField field, DataType t) {
  return ir::CallNode::make(t, intrinsic::kArgField,
                            {args, int32(static_cast<int64_t>(i)), int32(static_cast<int>(field))},
                            ir::CallNode::Kind::Intrinsic);
}

Expr arg_element(const Var &args, size_t i, ArgField field, size_t d) {
  return ir::CallNode::make(
      ir::Int(64), intrinsic::kArgField,
      {args, int32(static_cast<int64_t>(i)), int32(static_cast<int>(field)), int32(static_cast<int64_t>(d))},
      ir::CallNode::Kind::Intrinsic);
}

Expr is_null(Expr h) {
  return ir::CallNode::make(ir::Bool(), intrinsic::kIsNull, {std::move(h)}, ir::CallNode::Kind::Intrinsic);
}

Expr is_aligned(Expr h, int64_t bytes) {
  return ir::CallNode::make(ir::Bool(), intrinsic::kIsAligned, {std::move(h), int64(bytes)},
                            ir::CallNode::Kind::Intrinsic);
}

std::string symbol_of(const std::string &name) {
  std::string s = KILN_FUNCTION_SYMBOL_PREFIX;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  return s;
}

std::string signature_of(const ir::LoweredFunc &f) {
  std::string sig = f.name + "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    const ir::Buffer &p = f.params[i];
    sig += (i ? ", " : "") + p.name + ": " + p.dtype.to_string() + "[";
    for (size_t d = 0; d < p.shape.size(); ++d) sig += (d ? ", " : "") + ir::to_string(p.shape[d]);
    sig += "]";
  }
  return sig + ")";
}

}  // namespace

PackedFunc make_packed_api(const ir::LoweredFunc &f) {
  PackedFunc r;
  r.args = Var("args", ir::Handle());
  r.num_args = Var("num_args", ir::Int(32));
  r.symbol = symbol_of(f.name);
  r.signature = signature_of(f);
  const Var &args = r.args;
  const std::string fn = f.name + ": ";
  auto arg_name = [&](size_t i) { return detail::concat("argument ", i + 1, " (", f.params[i].name, ")"); };
  const size_t np = f.params.size();

  Prologue pro;
  std::string names;
  for (size_t i = 0; i < np; ++i) names += (i ? ", " : "") + f.params[i].name;
  pro.check(r.num_args == int32(static_cast<int64_t>(np)),
            detail::concat(fn, "expected ", np, " arguments (", names, ")"));
  if (np > 0) pro.check(!is_null(args), fn + "the argument list is null");

  // Pointers, rank, dtype and the extents of every argument.
  std::vector<std::vector<Var>> dims(np);
  for (size_t i = 0; i < np; ++i) {
    const ir::Buffer &p = f.params[i];
    const std::string an = fn + arg_name(i);
    const Expr data = arg_field(args, i, ArgField::Data, ir::Handle());
    pro.check(!is_null(data), an + ": the data pointer is null");
    pro.check(is_aligned(data, static_cast<int64_t>(deploy::kTensorAlignment)),
              detail::concat(an, ": the data pointer is not ", deploy::kTensorAlignment, "-byte aligned"));
    const size_t rank = p.shape.size();
    pro.check(arg_field(args, i, ArgField::NDim, ir::Int(32)) == int32(static_cast<int64_t>(rank)),
              detail::concat(an, ": expected ", rank, " dimensions"));
    const DataType dt = p.dtype;
    auto field_is = [&](ArgField field, DataType t, int64_t v) {
      return arg_field(args, i, field, t) == ir::make_const(t, v);
    };
    pro.check(field_is(ArgField::DTypeCode, ir::UInt(8), static_cast<int64_t>(dt.code())) &&
                  field_is(ArgField::DTypeBits, ir::UInt(8), dt.bits()) &&
                  field_is(ArgField::DTypeLanes, ir::UInt(16), dt.lanes()),
              an + ": expected dtype " + dt.to_string());
    if (rank == 0) continue;
    pro.check(!is_null(arg_field(args, i, ArgField::Shape, ir::Handle())), an + ": the shape pointer is null");
    for (size_t d = 0; d < rank; ++d) {
      Var x(detail::concat(p.name, ".shape", d), ir::Int(64));
      pro.let(x, arg_element(args, i, ArgField::Shape, d));
      pro.check(x >= int64(0), detail::concat(an, ": dimension ", d, " is negative"));
      dims[i].push_back(x);
    }
  }

  // Size variables: each from the first whole dimension that names it.
  struct Source {
    size_t arg, dim;
    std::string text;  // "dimension 0 of argument 1 (A)"
  };
  std::unordered_map<const ir::VariableNode *, Source> source;
  for (const Var &v : f.size_vars) {
    bool found = false;
    for (size_t i = 0; i < np && !found; ++i) {
      for (size_t d = 0; d < f.params[i].shape.size() && !found; ++d) {
        if (f.params[i].shape[d].as<ir::VariableNode>() != v.get()) continue;
        source[v.get()] = {i, d, detail::concat("dimension ", d, " of ", arg_name(i))};
        found = true;
      }
    }
    if (!found) {
      throw ExprError(detail::concat("function ", f.name, ": size ", v.name(),
                                     " is not a whole dimension of any argument, so no call can give its value"));
    }
    const Source &s = source[v.get()];
    const DataType vt = v.type();
    KILN_CHECK(vt.is_integer_like() && vt.is_scalar() && !vt.is_bool(), "function ", f.name, ": size ", v.name(),
               " has type ", vt.to_string());
    if (vt.bits() < 64) {
      const int64_t hi = vt.is_int() ? (int64_t{1} << (vt.bits() - 1)) - 1 : (int64_t{1} << vt.bits()) - 1;
      pro.check(dims[s.arg][s.dim] <= int64(hi),
                detail::concat(fn, "size ", v.name(), " (", s.text, ") does not fit ", vt.to_string()));
    }
    pro.let(v, ir::cast(vt, dims[s.arg][s.dim]));
  }

  // Every other extent, then the strides.
  for (size_t i = 0; i < np; ++i) {
    const ir::Buffer &p = f.params[i];
    const std::string an = fn + arg_name(i);
    const size_t rank = p.shape.size();
    for (size_t d = 0; d < rank; ++d) {
      const Expr &e = p.shape[d];
      const auto *v = e.as<ir::VariableNode>();
      auto src = v ? source.find(v) : source.end();
      if (src != source.end() && src->second.arg == i && src->second.dim == d) continue;
      std::string want;
      if (auto c = ir::as_const_int(e)) {
        want = std::to_string(*c);
      } else if (src != source.end()) {
        want = detail::concat(v->name, " (", src->second.text, ")");
      } else {
        want = ir::to_string(e);
      }
      pro.check(dims[i][d] == ir::cast(ir::Int(64), e), detail::concat(an, ": dimension ", d, " must be ", want));
    }
    if (rank == 0) continue;
    // The extents are checked by now, so the compact strides follow from the declared shape.
    const bool declared = p.strides.size() == rank;
    std::vector<Expr> compact(rank), expected(rank);
    Expr running = int64(1);
    for (size_t d = rank; d-- > 0;) {
      compact[d] = running;
      expected[d] = declared ? ir::cast(ir::Int(64), p.strides[d]) : running;
      running = product(running, ir::cast(ir::Int(64), p.shape[d]));
    }
    const Expr strides = arg_field(args, i, ArgField::Strides, ir::Handle());
    Prologue given;
    for (size_t d = 0; d < rank; ++d) {
      given.check(dims[i][d] <= int64(1) || arg_element(args, i, ArgField::Strides, d) == expected[d],
                  declared ? detail::concat(an, ": stride of dimension ", d, " must be ", ir::to_string(p.strides[d]))
                           : an + ": the tensor must be compact (row-major)");
    }
    // Without strides the tensor is compact; that must agree with the declared strides.
    Expr compact_ok;
    for (size_t d = 0; declared && d < rank; ++d) {
      if (equal_constants(compact[d], expected[d])) continue;
      Expr ok = dims[i][d] <= int64(1) || compact[d] == expected[d];
      compact_ok = compact_ok.defined() ? (compact_ok && ok) : ok;
    }
    if (compact_ok.defined()) {
      Prologue when_compact;
      when_compact.check(compact_ok, an + ": the tensor is compact but the function expects other strides");
      pro.run(
          ir::IfThenElseNode::make(is_null(strides), when_compact.wrap(ir::make_nop()), given.wrap(ir::make_nop())));
    } else if (!given.empty()) {
      pro.run(ir::IfThenElseNode::make(!is_null(strides), given.wrap(ir::make_nop())));
    }
  }

  for (const auto &p : f.params) {
    KILN_CHECK(p.data.defined() && p.data.type().is_handle(), "function ", f.name, ": parameter ", p.name,
               " has no data handle");
  }
  for (size_t i = 0; i < np; ++i) pro.let(f.params[i].data, arg_field(args, i, ArgField::Data, ir::Handle()));

  r.func = f;
  r.func.body = pro.wrap(ir::AttrStmtNode::make(Expr(), kKernelBody, int32(0), f.body));
  return r;
}

}  // namespace kiln::lower
