#include "compiler/interp/interpreter.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "compiler/interp/value.h"
#include "compiler/ir/float16.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"
#include "compiler/lower/make_packed_api.h"
#include "deploy/c_abi.h"
#include "deploy/module.h"

namespace kiln::interp {

using ir::DataType;
using ir::Expr;
using ir::NodeType;
using ir::Stmt;
using ir::VariableNode;

namespace {

// A flat region of memory the IR loads from and stores to: an argument's storage or the memory of
// an Allocate statement.
struct Memory {
  std::string name;
  DataType elem;  // scalar element type
  uint8_t *data = nullptr;
  int64_t size = 0;  // in elements
  std::unique_ptr<uint8_t[]> owned;
};

using VarMap = std::unordered_map<const VariableNode *, Value>;
using BufferMap = std::unordered_map<const VariableNode *, std::shared_ptr<Memory>>;
using SharedMap = std::unordered_map<const ir::AllocateNode *, std::shared_ptr<Memory>>;

// What one logical thread sees: its variables and the buffers in scope.
struct ThreadState {
  VarMap vars;
  BufferMap buffers;
  std::string coords;  // "threadIdx.x=3 threadIdx.y=0" inside thread loops, for messages
};

// Binds a key of a map for a scope and restores what was there before.
template <typename Map>
class ScopedEntry {
 public:
  ScopedEntry(Map &m, typename Map::key_type k, typename Map::mapped_type v) : map_(&m), key_(k) {
    auto it = m.find(k);
    if (it != m.end()) {
      had_ = true;
      old_ = std::move(it->second);
      it->second = std::move(v);
    } else {
      m.emplace(k, std::move(v));
    }
  }
  ScopedEntry(ScopedEntry &&o) noexcept : map_(o.map_), key_(o.key_), had_(o.had_), old_(std::move(o.old_)) {
    o.map_ = nullptr;
  }
  ScopedEntry(const ScopedEntry &) = delete;
  ScopedEntry &operator=(const ScopedEntry &) = delete;
  ScopedEntry &operator=(ScopedEntry &&) = delete;
  ~ScopedEntry() {
    if (!map_) return;
    if (had_) {
      (*map_)[key_] = std::move(old_);
    } else {
      map_->erase(key_);
    }
  }

 private:
  Map *map_;
  typename Map::key_type key_;
  bool had_ = false;
  typename Map::mapped_type old_{};
};

bool is_sync_threads(const Stmt &s) {
  const auto *e = s.as<ir::EvaluateNode>();
  if (!e) return false;
  const auto *c = e->value.as<ir::CallNode>();
  return c && c->name == ir::intrinsic::kSyncThreads;
}

// Adds to `out` every statement that contains a sync_threads barrier; returns whether s does.
bool find_barriers(const Stmt &s, std::unordered_set<const ir::IRNode *> &out) {
  if (!s.defined()) return false;
  bool has = false;
  switch (s.node_type()) {
    case NodeType::LetStmt:
      has = find_barriers(s.as<ir::LetStmtNode>()->body, out);
      break;
    case NodeType::AttrStmt:
      has = find_barriers(s.as<ir::AttrStmtNode>()->body, out);
      break;
    case NodeType::AssertStmt:
      has = find_barriers(s.as<ir::AssertStmtNode>()->body, out);
      break;
    case NodeType::Allocate:
      has = find_barriers(s.as<ir::AllocateNode>()->body, out);
      break;
    case NodeType::For:
      has = find_barriers(s.as<ir::ForNode>()->body, out);
      break;
    case NodeType::IfThenElse: {
      const auto *op = s.as<ir::IfThenElseNode>();
      const bool a = find_barriers(op->then_case, out);
      const bool b = find_barriers(op->else_case, out);
      has = a || b;
      break;
    }
    case NodeType::Block:
      for (const auto &c : s.as<ir::BlockNode>()->stmts) has = find_barriers(c, out) || has;
      break;
    case NodeType::Evaluate:
      has = is_sync_threads(s);
      break;
    case NodeType::Store:
      break;
    case NodeType::ProducerStore:
    case NodeType::ProducerRealize:
      break;  // not lowered IR, which exec reports
#define KILN_EXPR_CASE(n) case NodeType::n:
      KILN_EXPR_NODES(KILN_EXPR_CASE)
#undef KILN_EXPR_CASE
      break;  // expression kinds, which no statement has
  }
  if (has) out.insert(s.get());
  return has;
}

// A handle: the address in the lane's integer.
Value handle_value(const void *p) {
  Value v(ir::Handle());
  v[0].u = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  return v;
}

const void *handle_of(const Value &v) { return reinterpret_cast<const void *>(static_cast<uintptr_t>(v[0].u)); }

// The memory of a tensor argument that the entry's checks accepted: the elements its shape and
// strides reach (a null strides pointer means compact row-major).
std::shared_ptr<Memory> argument_memory(const ir::Var &data, const KilnArg &a) {
  auto m = std::make_shared<Memory>();
  const DataType t = data->pointee;
  m->name = data.name();
  m->elem = t.element_of();
  int64_t numel = 1;
  for (int32_t d = 0; d < a.ndim; ++d) numel *= a.shape[d];
  int64_t span = numel;
  if (numel > 0 && a.strides) {
    span = 1;
    for (int32_t d = 0; d < a.ndim; ++d) span += (a.shape[d] - 1) * a.strides[d];
  }
  m->size = span * t.lanes();
  m->data = static_cast<uint8_t *>(a.data);
  return m;
}

[[noreturn]] void not_lowered(NodeType t) {
  throw InternalError(detail::concat("interpreter: ", ir::node_type_name(t),
                                     " cannot appear in lowered IR (lower the function first)"));
}

Lane read_elem(const Memory &m, int64_t i) {
  const uint8_t *p = m.data + i * m.elem.bytes();
  Lane v;
  v.u = 0;
  switch (m.elem.code()) {
    case DataType::Code::Int:
      switch (m.elem.bits()) {
        case 8: {
          int8_t x;
          std::memcpy(&x, p, 1);
          v.i = x;
          break;
        }
        case 16: {
          int16_t x;
          std::memcpy(&x, p, 2);
          v.i = x;
          break;
        }
        case 32: {
          int32_t x;
          std::memcpy(&x, p, 4);
          v.i = x;
          break;
        }
        default:
          std::memcpy(&v.i, p, 8);
          break;
      }
      break;
    case DataType::Code::UInt:
      switch (m.elem.bits()) {
        case 1:
          v.u = *p != 0;
          break;
        case 8:
          v.u = *p;
          break;
        case 16: {
          uint16_t x;
          std::memcpy(&x, p, 2);
          v.u = x;
          break;
        }
        case 32: {
          uint32_t x;
          std::memcpy(&x, p, 4);
          v.u = x;
          break;
        }
        default:
          std::memcpy(&v.u, p, 8);
          break;
      }
      break;
    case DataType::Code::Float:
      switch (m.elem.bits()) {
        case 16: {
          uint16_t x;
          std::memcpy(&x, p, 2);
          v.f = ir::half_to_float(x);
          break;
        }
        case 32: {
          float x;
          std::memcpy(&x, p, 4);
          v.f = x;
          break;
        }
        default:
          std::memcpy(&v.f, p, 8);
          break;
      }
      break;
    case DataType::Code::Handle:
      throw InternalError("interpreter: load of a handle from buffer " + m.name);
  }
  return v;
}

void write_elem(Memory &m, int64_t i, Lane v) {
  uint8_t *p = m.data + i * m.elem.bytes();
  if (m.elem.is_float()) {
    switch (m.elem.bits()) {
      case 16: {
        const uint16_t x = ir::float_to_half(static_cast<float>(v.f));
        std::memcpy(p, &x, 2);
        break;
      }
      case 32: {
        const float x = static_cast<float>(v.f);
        std::memcpy(p, &x, 4);
        break;
      }
      default:
        std::memcpy(p, &v.f, 8);
        break;
    }
  } else if (m.elem.is_bool()) {
    *p = v.u != 0;
  } else {
    std::memcpy(p, &v.u, static_cast<size_t>(m.elem.bytes()));  // little-endian: the low bytes
  }
}

void poison(Memory &m) {
  const int bytes = m.elem.bytes();
  if (m.elem.is_float()) {
    Lane nan;
    nan.f = std::numeric_limits<double>::quiet_NaN();
    for (int64_t i = 0; i < m.size; ++i) write_elem(m, i, nan);
  } else {
    std::memset(m.data, 0xCD, static_cast<size_t>(m.size * bytes));
  }
}

class Interpreter {
 public:
  Interpreter(const ir::LoweredFunc &f, const RunOptions &opt) : f_(f), opt_(opt) {}

  ThreadState &root() { return root_; }

  void run() {
    find_barriers(f_.body, barriers_);
    exec(f_.body);
  }

  Value eval(const Expr &e);

 private:
  void step() {
    if (++steps_ > opt_.max_steps && opt_.max_steps > 0) {
      throw RuntimeError(detail::concat("function ", f_.name, ": step limit of ", opt_.max_steps,
                                        " statements and loop iterations exceeded (a runaway loop?)"));
    }
  }

  const Memory &buffer(const ir::Var &v) const {
    auto it = ts_->buffers.find(v.get());
    if (it == ts_->buffers.end()) {
      throw InternalError(detail::concat("interpreter: buffer ", v.name(), " is not bound in function ", f_.name));
    }
    return *it->second;
  }

  [[noreturn]] void out_of_bounds(const char *what, const Memory &m, int64_t index) const {
    throw RuntimeError(detail::concat("function ", f_.name, ": out-of-bounds ", what, " buffer ", m.name, ": index ",
                                      index, " is outside [0, ", m.size, ")"));
  }

  Value eval_binary(NodeType t, const Expr &a, const Expr &b, const Expr &self);
  Value eval_call(const ir::CallNode *op);
  Value eval_load(const ir::LoadNode *op);
  Value eval_if_then_else(const ir::CallNode *op);
  const KilnArg &kiln_arg(const ir::CallNode *op);
  Value eval_arg_field(const ir::CallNode *op);

  void exec(const Stmt &s);
  void exec_store(const ir::StoreNode *op);
  void exec_allocate(const ir::AllocateNode *op);
  void exec_for(const ir::ForNode *op);
  void exec_thread_loop(const ir::ForNode *op, int64_t min, int64_t extent);
  void exec_group(const Stmt &s, std::vector<ThreadState> &threads);
  void exec_group_for(const ir::ForNode *op, std::vector<ThreadState> &threads);
  std::shared_ptr<Memory> allocate(const ir::AllocateNode *op, int64_t elems);
  int64_t allocation_size(const ir::AllocateNode *op);

  const ir::LoweredFunc &f_;
  const RunOptions &opt_;
  ThreadState root_;
  ThreadState *ts_ = &root_;
  int64_t steps_ = 0;
  // Lanes of the vector expression being evaluated that are live (if_then_else evaluates each
  // branch only for the lanes that take it). Scalars are always live.
  uint64_t mask_ = ~uint64_t{0};
  std::unordered_set<const ir::IRNode *> barriers_;
  // The 'shared' allocations of the thread block being run, made once per block; null outside
  // thread loops.
  SharedMap *block_shared_ = nullptr;
};

// Sets a member for a scope.
template <typename T>
class ScopedSet {
 public:
  ScopedSet(T &ref, T v) : ref_(ref), old_(ref) { ref_ = v; }
  ~ScopedSet() { ref_ = old_; }
  ScopedSet(const ScopedSet &) = delete;
  ScopedSet &operator=(const ScopedSet &) = delete;

 private:
  T &ref_;
  T old_;
};

Value Interpreter::eval(const Expr &e) {
  switch (e.node_type()) {
    case NodeType::IntImm: {
      const auto *op = e.as<ir::IntImmNode>();
      return Value::make_int(op->type, op->value);
    }
    case NodeType::FloatImm: {
      const auto *op = e.as<ir::FloatImmNode>();
      // A float16 immediate stands for the half nearest to its value.
      return Value::make_float(op->type,
                               op->type.is_float16() ? ir::round_to_half(static_cast<float>(op->value)) : op->value);
    }
    case NodeType::StringImm:
      throw InternalError("interpreter: a string immediate has no value: " + ir::to_string(e));
    case NodeType::Variable: {
      auto it = ts_->vars.find(static_cast<const VariableNode *>(e.get()));
      if (it == ts_->vars.end()) {
        throw InternalError(detail::concat("interpreter: variable ", e.as<VariableNode>()->name,
                                           " is not bound in function ", f_.name));
      }
      return it->second;
    }
    case NodeType::Cast: {
      const auto *op = e.as<ir::CastNode>();
      try {
        return cast_value(op->type, eval(op->value), mask_);
      } catch (const RuntimeError &err) {
        throw RuntimeError(detail::concat("function ", f_.name, ": ", err.what(), " in ", ir::to_string(e)));
      }
    }
#define KILN_BINARY_CASE(n)                                     \
  case NodeType::n: {                                           \
    const auto *op = static_cast<const ir::n##Node *>(e.get()); \
    return eval_binary(NodeType::n, op->a, op->b, e);           \
  }
      KILN_BINARY_NODES(KILN_BINARY_CASE)
#undef KILN_BINARY_CASE
    case NodeType::Not: {
      Value v = eval(e.as<ir::NotNode>()->a);
      for (int l = 0; l < v.lanes(); ++l) v[l].u = v[l].u == 0;
      return v;
    }
    case NodeType::Select: {
      // Both values are evaluated, as a vector select does: a guarded read belongs in if_then_else.
      const auto *op = e.as<ir::SelectNode>();
      const Value c = eval(op->condition);
      Value t = eval(op->true_value);
      const Value f = eval(op->false_value);
      for (int l = 0; l < t.lanes(); ++l) {
        if (!c[c.lanes() == 1 ? 0 : l].u) t[l] = f[l];
      }
      return t;
    }
    case NodeType::Ramp: {
      const auto *op = e.as<ir::RampNode>();
      const Value base = eval(op->base);
      const Value stride = eval(op->stride);
      const DataType et = op->base.type();
      Value r(op->type);
      for (int l = 0; l < op->lanes; ++l) {
        if (et.is_float()) {
          if (et.bits() == 64) {
            r[l].f = base[0].f + static_cast<double>(l) * stride[0].f;
          } else {
            const float m = static_cast<float>(l) * static_cast<float>(stride[0].f);
            r[l].f = static_cast<float>(static_cast<float>(base[0].f) + m);
          }
        } else {
          r[l].u = wrap_int(et, base[0].u + static_cast<uint64_t>(l) * stride[0].u);
        }
      }
      return r;
    }
    case NodeType::Broadcast: {
      const auto *op = e.as<ir::BroadcastNode>();
      const Value v = eval(op->value);
      Value r(op->type);
      for (int l = 0; l < op->lanes; ++l) r[l] = v[0];
      return r;
    }
    case NodeType::Let: {
      const auto *op = e.as<ir::LetNode>();
      ScopedEntry<VarMap> bind(ts_->vars, op->var.get(), eval(op->value));
      return eval(op->body);
    }
    case NodeType::Call:
      return eval_call(e.as<ir::CallNode>());
    case NodeType::Load:
      return eval_load(e.as<ir::LoadNode>());
    case NodeType::ProducerLoad:
    case NodeType::Reduce:
      not_lowered(e.node_type());
#define KILN_STMT_CASE(n) case NodeType::n:
      KILN_STMT_NODES(KILN_STMT_CASE)
#undef KILN_STMT_CASE
      break;  // statement kinds, which no expression has
  }
  throw InternalError(detail::concat("interpreter: unexpected expression ", ir::node_type_name(e.node_type())));
}

Value Interpreter::eval_binary(NodeType t, const Expr &a, const Expr &b, const Expr &self) {
  const Value x = eval(a);
  const Value y = eval(b);
  try {
    return binary_op(t, x, y, mask_);
  } catch (const RuntimeError &err) {
    throw RuntimeError(detail::concat("function ", f_.name, ": ", err.what(), " in ", ir::to_string(self),
                                      " with operands ", x.to_string(), " and ", y.to_string()));
  }
}

Value Interpreter::eval_if_then_else(const ir::CallNode *op) {
  KILN_CHECK(op->args.size() == 3, "interpreter: if_then_else takes 3 arguments, got ", op->args.size());
  const Value c = eval(op->args[0]);
  const int lanes = op->type.lanes();
  if (lanes == 1) return c.as_bool() ? eval(op->args[1]) : eval(op->args[2]);
  const uint64_t all = all_lanes(lanes) & mask_;
  const uint64_t cond = c.lanes() == 1 ? (c.as_bool() ? ~uint64_t{0} : 0) : c.true_mask();
  Value r(op->type);
  const uint64_t take[2] = {all & cond, all & ~cond};
  for (int branch = 0; branch < 2; ++branch) {
    if (!take[branch]) continue;
    ScopedSet<uint64_t> live(mask_, take[branch]);
    const Value v = eval(op->args[1 + branch]);
    for (int l = 0; l < lanes; ++l) {
      if ((take[branch] >> l) & 1) r[l] = v[l];
    }
  }
  return r;
}

Value Interpreter::eval_call(const ir::CallNode *op) {
  const std::string &name = op->name;
  if (name == ir::intrinsic::kIfThenElse) return eval_if_then_else(op);
  if (name == ir::intrinsic::kLikely) {
    KILN_CHECK(op->args.size() == 1, "interpreter: likely takes 1 argument");
    return eval(op->args[0]);
  }
  if (name == ir::intrinsic::kPrefetch) return Value::make_int(op->type, 0);  // a hint: nothing to do
  if (name == ir::intrinsic::kSyncThreads) return Value::make_int(op->type.is_handle() ? ir::Int(32) : op->type, 0);
  if (name == lower::intrinsic::kArgField) return eval_arg_field(op);
  if (name == lower::intrinsic::kIsNull) {
    KILN_CHECK(op->args.size() == 1, "interpreter: isnull takes 1 argument");
    return Value::make_int(ir::Bool(), handle_of(eval(op->args[0])) == nullptr);
  }
  if (name == lower::intrinsic::kIsAligned) {
    KILN_CHECK(op->args.size() == 2, "interpreter: is_aligned takes 2 arguments");
    const uint64_t address = eval(op->args[0])[0].u;
    const int64_t bytes = eval(op->args[1]).as_int();
    return Value::make_int(ir::Bool(), bytes > 0 && address % static_cast<uint64_t>(bytes) == 0);
  }
  if (ir::is_math_intrinsic(name)) {
    std::vector<Value> args;
    args.reserve(op->args.size());
    for (const auto &a : op->args) args.push_back(eval(a));
    return math_intrinsic(name, args);
  }
  throw InternalError(detail::concat("interpreter: unsupported call ", name, " in function ", f_.name));
}

// The KilnArg an arg_field call reads: args[i].
const KilnArg &Interpreter::kiln_arg(const ir::CallNode *op) {
  KILN_CHECK(op->args.size() == 3 || op->args.size() == 4, "interpreter: arg_field takes 3 or 4 arguments");
  const auto *args = static_cast<const KilnArg *>(handle_of(eval(op->args[0])));
  return args[eval(op->args[1]).as_int()];
}

Value Interpreter::eval_arg_field(const ir::CallNode *op) {
  const KilnArg &a = kiln_arg(op);
  const auto field = static_cast<lower::ArgField>(eval(op->args[2]).as_int());
  if (op->args.size() == 4) {
    KILN_CHECK(field == lower::ArgField::Shape || field == lower::ArgField::Strides,
               "interpreter: arg_field reads elements of the shape or the strides only");
    const int64_t *array = field == lower::ArgField::Shape ? a.shape : a.strides;
    return Value::make_int(ir::Int(64), array[eval(op->args[3]).as_int()]);
  }
  switch (field) {
    case lower::ArgField::Data:
      return handle_value(a.data);
    case lower::ArgField::NDim:
      return Value::make_int(op->type, a.ndim);
    case lower::ArgField::Shape:
      return handle_value(a.shape);
    case lower::ArgField::Strides:
      return handle_value(a.strides);
    case lower::ArgField::DTypeCode:
      return Value::make_int(op->type, a.dtype_code);
    case lower::ArgField::DTypeBits:
      return Value::make_int(op->type, a.dtype_bits);
    case lower::ArgField::DTypeLanes:
      return Value::make_int(op->type, a.dtype_lanes);
  }
  throw InternalError(detail::concat("interpreter: arg_field of field ", static_cast<int>(field)));
}

Value Interpreter::eval_load(const ir::LoadNode *op) {
  const Memory &m = buffer(op->buffer_var);
  if (op->type.element_of() != m.elem) {
    throw InternalError(detail::concat("interpreter: load of ", op->type.to_string(), " from buffer ", m.name, " of ",
                                       m.elem.to_string()));
  }
  const int lanes = op->type.lanes();
  const Value idx = eval(op->index);
  uint64_t live = lanes == 1 ? 1 : all_lanes(lanes) & mask_;
  if (op->predicate.defined()) {
    const Value p = eval(op->predicate);
    live &= p.lanes() == 1 ? (p.as_bool() ? ~uint64_t{0} : 0) : p.true_mask();
  }
  Value r(op->type);
  for (int l = 0; l < lanes; ++l) {
    if (!((live >> l) & 1)) continue;
    const int64_t i = idx[l].i;
    if (i < 0 || i >= m.size) out_of_bounds("load from", m, i);
    r[l] = read_elem(m, i);
  }
  return r;
}

void Interpreter::exec(const Stmt &s) {
  step();
  switch (s.node_type()) {
    case NodeType::LetStmt: {
      const auto *op = s.as<ir::LetStmtNode>();
      if (op->var.type().is_handle()) {
        // A parameter's data pointer, read from its KilnArg.
        if (const auto *c = op->value.as<ir::CallNode>(); c && c->name == lower::intrinsic::kArgField) {
          KILN_CHECK(c->args.size() == 3 && eval(c->args[2]).as_int() == static_cast<int>(lower::ArgField::Data),
                     "interpreter: handle ", op->var.name(), " must be an argument's data pointer");
          ScopedEntry<BufferMap> bind(ts_->buffers, op->var.get(), argument_memory(op->var, kiln_arg(c)));
          exec(op->body);
          return;
        }
        const auto *src = op->value.as<VariableNode>();
        auto it = src ? ts_->buffers.find(src) : ts_->buffers.end();
        if (it == ts_->buffers.end()) {
          throw InternalError(detail::concat("interpreter: handle ", op->var.name(), " must alias a bound buffer, got ",
                                             ir::to_string(op->value)));
        }
        ScopedEntry<BufferMap> bind(ts_->buffers, op->var.get(), it->second);
        exec(op->body);
      } else {
        ScopedEntry<VarMap> bind(ts_->vars, op->var.get(), eval(op->value));
        exec(op->body);
      }
      return;
    }
    case NodeType::AttrStmt:
      exec(s.as<ir::AttrStmtNode>()->body);
      return;
    case NodeType::AssertStmt: {
      const auto *op = s.as<ir::AssertStmtNode>();
      const Value c = eval(op->condition);
      if (c.true_mask() != all_lanes(c.lanes())) throw RuntimeError(op->message);
      exec(op->body);
      return;
    }
    case NodeType::Store:
      exec_store(s.as<ir::StoreNode>());
      return;
    case NodeType::Allocate:
      exec_allocate(s.as<ir::AllocateNode>());
      return;
    case NodeType::For:
      exec_for(s.as<ir::ForNode>());
      return;
    case NodeType::IfThenElse: {
      const auto *op = s.as<ir::IfThenElseNode>();
      if (eval(op->condition).as_bool()) {
        exec(op->then_case);
      } else if (op->else_case.defined()) {
        exec(op->else_case);
      }
      return;
    }
    case NodeType::Block:
      for (const auto &c : s.as<ir::BlockNode>()->stmts) exec(c);
      return;
    case NodeType::Evaluate: {
      const auto *op = s.as<ir::EvaluateNode>();
      // A barrier reached outside a thread loop, or by a block of one thread, has nothing to wait for.
      if (is_sync_threads(s) || op->value.as<ir::IntImmNode>()) return;
      eval(op->value);
      return;
    }
    case NodeType::ProducerStore:
    case NodeType::ProducerRealize:
      not_lowered(s.node_type());
#define KILN_EXPR_CASE(n) case NodeType::n:
      KILN_EXPR_NODES(KILN_EXPR_CASE)
#undef KILN_EXPR_CASE
      break;  // expression kinds, which no statement has
  }
  throw InternalError(detail::concat("interpreter: unexpected statement ", ir::node_type_name(s.node_type())));
}

void Interpreter::exec_store(const ir::StoreNode *op) {
  auto it = ts_->buffers.find(op->buffer_var.get());
  if (it == ts_->buffers.end()) {
    throw InternalError(
        detail::concat("interpreter: buffer ", op->buffer_var.name(), " is not bound in function ", f_.name));
  }
  Memory &m = *it->second;
  const DataType vt = op->value.type();
  if (vt.element_of() != m.elem) {
    throw InternalError(
        detail::concat("interpreter: store of ", vt.to_string(), " to buffer ", m.name, " of ", m.elem.to_string()));
  }
  const int lanes = vt.lanes();
  const Value v = eval(op->value);
  const Value idx = eval(op->index);
  uint64_t live = all_lanes(lanes);
  if (op->predicate.defined()) {
    const Value p = eval(op->predicate);
    live &= p.lanes() == 1 ? (p.as_bool() ? ~uint64_t{0} : 0) : p.true_mask();
  }
  for (int l = 0; l < lanes; ++l) {
    if (((live >> l) & 1) && (idx[l].i < 0 || idx[l].i >= m.size)) out_of_bounds("store to", m, idx[l].i);
  }
  for (int l = 0; l < lanes; ++l) {
    if ((live >> l) & 1) write_elem(m, idx[l].i, v[l]);
  }
}

int64_t Interpreter::allocation_size(const ir::AllocateNode *op) {
  int64_t n = op->dtype.lanes();
  for (const auto &e : op->extents) {
    const int64_t x = eval(e).as_int();
    if (x < 0) {
      throw RuntimeError(detail::concat("function ", f_.name, ": allocation ", op->buffer_var.name(),
                                        " has a negative extent ", x, " (", ir::to_string(e), ")"));
    }
    if (__builtin_mul_overflow(n, x, &n) || n > (int64_t{1} << 32) / op->dtype.bytes()) {
      throw RuntimeError(
          detail::concat("function ", f_.name, ": allocation ", op->buffer_var.name(), " is too large (over 4 GiB)"));
    }
  }
  return n;
}

std::shared_ptr<Memory> Interpreter::allocate(const ir::AllocateNode *op, int64_t elems) {
  auto m = std::make_shared<Memory>();
  m->name = op->buffer_var.name();
  m->elem = op->dtype.element_of();
  m->size = elems;
  m->owned = std::make_unique<uint8_t[]>(static_cast<size_t>(std::max<int64_t>(elems, 1) * m->elem.bytes()));
  m->data = m->owned.get();
  if (opt_.poison_allocations) poison(*m);
  return m;
}

void Interpreter::exec_allocate(const ir::AllocateNode *op) {
  const int64_t n = allocation_size(op);
  std::shared_ptr<Memory> m;
  if (op->scope == "shared" && block_shared_) {
    auto it = block_shared_->find(op);
    if (it == block_shared_->end()) {
      m = allocate(op, n);
      block_shared_->emplace(op, m);
    } else {
      m = it->second;
      if (m->size != n) {
        throw RuntimeError(detail::concat("function ", f_.name, ": shared allocation ", m->name, " has ", m->size,
                                          " elements in one thread and ", n, " in another"));
      }
    }
  } else {
    m = allocate(op, n);
  }
  ScopedEntry<BufferMap> bind(ts_->buffers, op->buffer_var.get(), std::move(m));
  exec(op->body);
}

bool is_thread_index(const ir::ForNode *op) {
  return op->kind == ir::ForKind::ThreadBinding && op->thread_tag.rfind("threadIdx.", 0) == 0;
}

void Interpreter::exec_for(const ir::ForNode *op) {
  const int64_t min = eval(op->min).as_int();
  const int64_t extent = eval(op->extent).as_int();
  if (is_thread_index(op)) {
    exec_thread_loop(op, min, extent);
    return;
  }
  const DataType t = op->loop_var.type();
  ScopedEntry<VarMap> bind(ts_->vars, op->loop_var.get(), Value::make_int(t, min));
  Lane &slot = ts_->vars.find(op->loop_var.get())->second[0];
  for (int64_t i = 0; i < extent; ++i) {
    step();
    slot.u = wrap_int(t, static_cast<uint64_t>(min + i));
    exec(op->body);
  }
}

void Interpreter::exec_thread_loop(const ir::ForNode *op, int64_t min, int64_t extent) {
  // The outermost thread loop of a block owns the block's shared allocations.
  std::unique_ptr<SharedMap> block;
  if (!block_shared_) block = std::make_unique<SharedMap>();
  ScopedSet<SharedMap *> in_block(block_shared_, block ? block.get() : block_shared_);
  const DataType t = op->loop_var.type();
  if (!barriers_.count(op->body.get())) {
    // Without a barrier, running the threads one after the other is a valid schedule.
    ScopedEntry<VarMap> bind(ts_->vars, op->loop_var.get(), Value::make_int(t, min));
    Lane &slot = ts_->vars.find(op->loop_var.get())->second[0];
    for (int64_t i = 0; i < extent; ++i) {
      step();
      slot.u = wrap_int(t, static_cast<uint64_t>(min + i));
      exec(op->body);
    }
    return;
  }
  std::vector<ThreadState> threads;
  threads.reserve(static_cast<size_t>(std::max<int64_t>(extent, 0)));
  for (int64_t i = 0; i < extent; ++i) {
    ThreadState th = *ts_;
    th.vars[op->loop_var.get()] = Value::make_int(t, min + i);
    th.coords += detail::concat(th.coords.empty() ? "" : " ", op->thread_tag, "=", min + i);
    threads.push_back(std::move(th));
  }
  exec_group(op->body, threads);
}

// Runs `s` for every thread of `threads`. A statement without a barrier runs for each thread in
// turn; one with a barrier is taken apart so that all threads go through it in step.
void Interpreter::exec_group(const Stmt &s, std::vector<ThreadState> &threads) {
  ScopedSet<ThreadState *> restore(ts_, ts_);
  if (!barriers_.count(s.get())) {
    for (auto &th : threads) {
      ts_ = &th;
      exec(s);
    }
    return;
  }
  step();
  auto divergent = [&](const std::string &what, size_t a, size_t b) {
    throw RuntimeError(detail::concat("function ", f_.name, ": divergent barrier: ", what, " in thread (",
                                      threads[a].coords, ") but not in thread (", threads[b].coords,
                                      "); every thread of a block must reach each sync_threads"));
  };
  switch (s.node_type()) {
    case NodeType::Block:
      for (const auto &c : s.as<ir::BlockNode>()->stmts) exec_group(c, threads);
      return;
    case NodeType::Evaluate:
      return;  // sync_threads: every thread has arrived
    case NodeType::AttrStmt:
      exec_group(s.as<ir::AttrStmtNode>()->body, threads);
      return;
    case NodeType::AssertStmt: {
      const auto *op = s.as<ir::AssertStmtNode>();
      for (auto &th : threads) {
        ts_ = &th;
        const Value c = eval(op->condition);
        if (c.true_mask() != all_lanes(c.lanes())) throw RuntimeError(op->message);
      }
      exec_group(op->body, threads);
      return;
    }
    case NodeType::LetStmt: {
      const auto *op = s.as<ir::LetStmtNode>();
      KILN_CHECK(!op->var.type().is_handle(), "interpreter: handle LetStmt around a barrier");
      std::vector<ScopedEntry<VarMap>> binds;
      binds.reserve(threads.size());
      for (auto &th : threads) {
        ts_ = &th;
        binds.emplace_back(th.vars, op->var.get(), eval(op->value));
      }
      exec_group(op->body, threads);
      return;
    }
    case NodeType::Allocate: {
      const auto *op = s.as<ir::AllocateNode>();
      std::vector<int64_t> sizes;
      for (auto &th : threads) {
        ts_ = &th;
        sizes.push_back(allocation_size(op));
      }
      for (size_t i = 1; i < threads.size(); ++i) {
        if (sizes[i] != sizes[0]) {
          divergent(detail::concat("allocation ", op->buffer_var.name(), " has ", sizes[0], " elements"), 0, i);
        }
      }
      std::shared_ptr<Memory> shared;
      if (op->scope == "shared") {
        auto it = block_shared_->find(op);
        if (it != block_shared_->end()) {
          shared = it->second;
        } else {
          shared = allocate(op, sizes.empty() ? 0 : sizes[0]);
          block_shared_->emplace(op, shared);
        }
      }
      std::vector<ScopedEntry<BufferMap>> binds;
      binds.reserve(threads.size());
      for (auto &th : threads) {
        binds.emplace_back(th.buffers, op->buffer_var.get(), shared ? shared : allocate(op, sizes[0]));
      }
      exec_group(op->body, threads);
      return;
    }
    case NodeType::IfThenElse: {
      const auto *op = s.as<ir::IfThenElseNode>();
      std::vector<bool> conds;
      for (auto &th : threads) {
        ts_ = &th;
        conds.push_back(eval(op->condition).as_bool());
      }
      for (size_t i = 1; i < threads.size(); ++i) {
        if (conds[i] != conds[0]) {
          divergent(detail::concat("the condition ", ir::to_string(op->condition),
                                   " of an if containing sync_threads is ", conds[0] ? "true" : "false"),
                    0, i);
        }
      }
      if (threads.empty()) return;
      if (conds[0]) {
        exec_group(op->then_case, threads);
      } else if (op->else_case.defined()) {
        exec_group(op->else_case, threads);
      }
      return;
    }
    case NodeType::For: {
      const auto *op = s.as<ir::ForNode>();
      std::vector<std::pair<int64_t, int64_t>> bounds;
      for (auto &th : threads) {
        ts_ = &th;
        bounds.emplace_back(eval(op->min).as_int(), eval(op->extent).as_int());
      }
      for (size_t i = 1; i < threads.size(); ++i) {
        if (bounds[i] != bounds[0]) {
          divergent(detail::concat("loop ", op->loop_var.name(), " (containing sync_threads) runs from ",
                                   bounds[0].first, " for ", bounds[0].second, " iterations"),
                    0, i);
        }
      }
      if (threads.empty()) return;
      const auto [min, extent] = bounds[0];
      const DataType t = op->loop_var.type();
      if (is_thread_index(op)) {
        // A nested thread dimension: every thread so far splits into `extent` threads.
        std::vector<ThreadState> inner;
        inner.reserve(threads.size() * static_cast<size_t>(std::max<int64_t>(extent, 0)));
        for (const auto &th : threads) {
          for (int64_t i = 0; i < extent; ++i) {
            ThreadState x = th;
            x.vars[op->loop_var.get()] = Value::make_int(t, min + i);
            x.coords += detail::concat(x.coords.empty() ? "" : " ", op->thread_tag, "=", min + i);
            inner.push_back(std::move(x));
          }
        }
        exec_group(op->body, inner);
        return;
      }
      std::vector<ScopedEntry<VarMap>> binds;
      binds.reserve(threads.size());
      for (auto &th : threads) binds.emplace_back(th.vars, op->loop_var.get(), Value::make_int(t, min));
      for (int64_t i = 0; i < extent; ++i) {
        step();
        for (auto &th : threads)
          th.vars.find(op->loop_var.get())->second[0].u = wrap_int(t, static_cast<uint64_t>(min + i));
        exec_group(op->body, threads);
      }
      return;
    }
    case NodeType::Store:  // holds no statement, so no barrier
    case NodeType::ProducerStore:
    case NodeType::ProducerRealize:
      break;
#define KILN_EXPR_CASE(n) case NodeType::n:
      KILN_EXPR_NODES(KILN_EXPR_CASE)
#undef KILN_EXPR_CASE
      break;  // expression kinds, which no statement has
  }
  throw InternalError(detail::concat("interpreter: a barrier inside ", ir::node_type_name(s.node_type())));
}

}  // namespace

void run(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args, const RunOptions &opt) {
  const lower::PackedFunc packed = lower::make_packed_api(f);
  const std::vector<KilnArg> c_args = deploy::to_kiln_args(args);
  Interpreter in(packed.func, opt);
  ThreadState &root = in.root();
  root.vars[packed.args.get()] = handle_value(c_args.data());
  root.vars[packed.num_args.get()] = Value::make_int(ir::Int(32), static_cast<int64_t>(c_args.size()));
  in.run();
}

Value eval_closed(const ir::Expr &e) {
  static const ir::LoweredFunc kNoFunction{"expression", {}, {}, Stmt()};
  const RunOptions opt;
  return Interpreter(kNoFunction, opt).eval(e);
}

}  // namespace kiln::interp
