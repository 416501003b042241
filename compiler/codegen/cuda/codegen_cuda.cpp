#include "compiler/codegen/cuda/codegen_cuda.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <functional>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "compiler/arith/analyzer.h"
#include "compiler/codegen/c/codegen_c.h"
#include "compiler/codegen/cuda/nvrtc_compiler.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/float16.h"
#include "compiler/ir/substitute.h"

namespace kiln::codegen {

using ir::DataType;

namespace {

// The axis (0, 1, 2) of a blockIdx.* or threadIdx.* tag; -1 for any other tag.
int tag_axis(const std::string &tag, const std::string &prefix) {
  if (tag.size() != prefix.size() + 2 || tag.compare(0, prefix.size(), prefix) != 0 || tag[prefix.size()] != '.') {
    return -1;
  }
  const char c = tag.back();
  return c >= 'x' && c <= 'z' ? c - 'x' : -1;
}

bool is_vthread(const std::string &tag) { return tag == "vthread" || tag.rfind("vthread.", 0) == 0; }

bool has_barrier(const ir::Stmt &s) {
  bool found = false;
  ir::post_order_visit(s, [&](const ir::IRNode *n) {
    if (n->node_type != ir::NodeType::Call) return;
    if (static_cast<const ir::CallNode *>(n)->name == ir::intrinsic::kSyncThreads) found = true;
  });
  return found;
}

// The kernel's symbol: f's name with every character that is not a letter, digit or '_' as '_'.
std::string kernel_symbol(const std::string &name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '_') s = "k" + s;
  return s;
}

bool is_barrier(const ir::Stmt &s) {
  const auto *e = s.as<ir::EvaluateNode>();
  const auto *c = e ? e->value.as<ir::CallNode>() : nullptr;
  return c && c->name == ir::intrinsic::kSyncThreads;
}

ir::Stmt barrier() {
  return ir::EvaluateNode::make(
      ir::CallNode::make(ir::Int(32), ir::intrinsic::kSyncThreads, {}, ir::CallNode::Kind::Intrinsic));
}

bool contains_thread_loop(const ir::Stmt &s) {
  bool found = false;
  ir::post_order_visit(s, [&](const ir::IRNode *n) {
    if (n->node_type != ir::NodeType::For) return;
    const auto *op = static_cast<const ir::ForNode *>(n);
    if (op->kind == ir::ForKind::ThreadBinding && tag_axis(op->thread_tag, "threadIdx") >= 0) found = true;
  });
  return found;
}

// Whether s writes memory or calls something: what must run as often as the interpreter runs it.
bool has_effect(const ir::Stmt &s) {
  bool found = false;
  ir::post_order_visit(s, [&](const ir::IRNode *n) {
    if (n->node_type == ir::NodeType::Store) found = true;
    if (n->node_type == ir::NodeType::Call &&
        static_cast<const ir::CallNode *>(n)->name != ir::intrinsic::kSyncThreads) {
      found = true;
    }
  });
  return found;
}

// The rewrite of make_block_phases: where a statement is, which thread axes enclosing threadIdx
// loops bind, and whether every thread of the block reaches it.
class BlockPhases {
 public:
  BlockPhases(const ir::LoweredFunc &f, const LaunchDims &dims) : f_(f), dims_(dims) {}

  ir::Stmt run(const ir::Stmt &body) { return sequence({body}, {}, true); }

 private:
  using Bound = std::array<bool, 3>;

  // The launched thread axes that no enclosing loop binds: the threads that would repeat work the
  // interpreter does once.
  std::vector<int> unbound(const Bound &bound) const {
    std::vector<int> axes;
    for (int a = 0; a < 3; ++a) {
      if (!bound[a] && dims_.block[a] > 1) axes.push_back(a);
    }
    return axes;
  }

  // A run of statements: work without thread loops goes to thread 0 of the unbound axes, and a
  // barrier separates each phase that threads share from the next.
  ir::Stmt sequence(const std::vector<ir::Stmt> &nested, const Bound &bound, bool uniform) {
    const std::vector<int> axes = unbound(bound);
    // Nested blocks are part of the same run.
    std::vector<ir::Stmt> stmts;
    std::function<void(const ir::Stmt &)> flatten = [&](const ir::Stmt &s) {
      if (const auto *b = s.as<ir::BlockNode>()) {
        for (const auto &c : b->stmts) flatten(c);
      } else {
        stmts.push_back(s);
      }
    };
    for (const auto &s : nested) flatten(s);
    std::vector<ir::Stmt> out;
    std::vector<ir::Stmt> single;  // consecutive work for thread 0, run under one guard
    auto flush = [&] {
      if (single.empty()) return;
      out.push_back(single_thread(single.size() == 1 ? single[0] : ir::BlockNode::make(single), bound, axes));
      single.clear();
    };
    bool prev_threads = false;  // the previous statement ran thread loops
    bool prev_any = false;
    bool prev_barrier = false;
    for (const ir::Stmt &s : stmts) {
      if (ir::is_nop(s)) continue;
      const bool barrier_here = is_barrier(s);
      const bool threads = contains_thread_loop(s);
      const bool alone = !barrier_here && !threads && !axes.empty() && has_effect(s);
      if (!alone) flush();
      if (!axes.empty() && prev_any && !prev_barrier && !barrier_here && (threads || prev_threads)) {
        if (!uniform) {
          throw UserError(detail::concat("function ", f_.name,
                                         ": the CUDA back end needs a barrier between phases of a block at a place "
                                         "only some of its threads reach"));
        }
        out.push_back(barrier());
      }
      if (alone) {
        single.push_back(s);
      } else {
        out.push_back(threads ? rewrite(s, bound, uniform) : s);
      }
      prev_any = true;
      prev_threads = threads;
      prev_barrier = barrier_here;
    }
    flush();
    if (out.empty()) return ir::make_nop();
    return out.size() == 1 ? out[0] : ir::BlockNode::make(out);
  }

  // s, which holds thread loops, with its runs of statements rewritten.
  ir::Stmt rewrite(const ir::Stmt &s, const Bound &bound, bool uniform) {
    switch (s.node_type()) {
      case ir::NodeType::For: {
        const auto *op = s.as<ir::ForNode>();
        Bound inner = bound;
        bool inner_uniform = uniform;
        const int axis = op->kind == ir::ForKind::ThreadBinding ? tag_axis(op->thread_tag, "threadIdx") : -1;
        if (axis >= 0) {
          inner[axis] = true;
          auto extent = ir::as_const_int(op->extent);
          if (!extent || *extent < dims_.block[axis]) inner_uniform = false;
        }
        std::vector<ir::Stmt> body{op->body};
        // The interpreter finishes one iteration's threads before the next iteration starts.
        if (axis < 0 && tag_axis(op->thread_tag, "blockIdx") < 0 && !unbound(bound).empty()) {
          body.push_back(barrier());
        }
        return ir::ForNode::make(op->loop_var, op->min, op->extent, op->kind, sequence(body, inner, inner_uniform),
                                 op->thread_tag);
      }
      case ir::NodeType::LetStmt: {
        const auto *op = s.as<ir::LetStmtNode>();
        return ir::LetStmtNode::make(op->var, op->value, sequence({op->body}, bound, uniform));
      }
      case ir::NodeType::Allocate: {
        const auto *op = s.as<ir::AllocateNode>();
        return ir::AllocateNode::make(op->buffer_var, op->dtype, op->extents, op->scope,
                                      sequence({op->body}, bound, uniform));
      }
      case ir::NodeType::AttrStmt: {
        const auto *op = s.as<ir::AttrStmtNode>();
        return ir::AttrStmtNode::make(op->node, op->key, op->value, sequence({op->body}, bound, uniform));
      }
      case ir::NodeType::AssertStmt: {
        const auto *op = s.as<ir::AssertStmtNode>();
        return ir::AssertStmtNode::make(op->condition, op->message, sequence({op->body}, bound, uniform));
      }
      case ir::NodeType::IfThenElse: {
        const auto *op = s.as<ir::IfThenElseNode>();
        // A condition inside a thread loop may differ between threads.
        const bool inner_uniform = uniform && bound == Bound{};
        ir::Stmt else_case = op->else_case.defined() ? sequence({op->else_case}, bound, inner_uniform) : ir::Stmt();
        return ir::IfThenElseNode::make(op->condition, sequence({op->then_case}, bound, inner_uniform), else_case);
      }
      case ir::NodeType::Block:
        return sequence(s.as<ir::BlockNode>()->stmts, bound, uniform);
      default:
        return s;
    }
  }

  // s run by thread 0 of each axis in `axes`: inside loops of extent 1 bound to them.
  ir::Stmt single_thread(const ir::Stmt &s, const Bound &bound, const std::vector<int> &axes) {
    ir::Stmt body = s;
    bool barriers = false;
    ir::post_order_visit(s, [&](const ir::IRNode *n) {
      if (n->node_type == ir::NodeType::Call &&
          static_cast<const ir::CallNode *>(n)->name == ir::intrinsic::kSyncThreads) {
        barriers = true;
      }
    });
    if (barriers) {
      if (bound != Bound{}) {
        throw UserError(
            detail::concat("function ", f_.name, ": a barrier in work that only one thread of the block does"));
      }
      // Outside every thread loop a barrier has nothing to wait for.
      body = strip_barriers(body);
    }
    for (int a : axes) {
      const char tag[] = {'t', 'h', 'r', 'e', 'a', 'd', 'I', 'd', 'x', '.', static_cast<char>('x' + a), '\0'};
      body = ir::ForNode::make(ir::Var(detail::concat("single_", static_cast<char>('x' + a))), 0, 1,
                               ir::ForKind::ThreadBinding, body, tag);
    }
    return body;
  }

  static ir::Stmt strip_barriers(const ir::Stmt &s) {
    class Strip : public ir::IRMutator {
     public:
      using ir::IRMutator::mutate;

     protected:
      ir::Stmt visit(const ir::EvaluateNode *op, const ir::Stmt &self) override {
        return is_barrier(self) ? ir::make_nop() : ir::IRMutator::visit(op, self);
      }
    };
    return Strip().mutate(s);
  }

  const ir::LoweredFunc &f_;
  const LaunchDims &dims_;
};

// The rewrite of inject_virtual_threads: each vthread loop pushed down to the innermost statements
// that depend on it, which are then written once per virtual thread, one after the other.
class VirtualThreads : public ir::IRMutator {
 public:
  using ir::IRMutator::mutate;

 protected:
  ir::Stmt visit(const ir::ForNode *op, const ir::Stmt &self) override {
    if (op->kind != ir::ForKind::ThreadBinding || !is_vthread(op->thread_tag)) return ir::IRMutator::visit(op, self);
    ir::Stmt body = mutate(op->body);  // inner virtual threads first
    const auto n = ir::as_const_int(op->extent);
    const ir::Stmt serial = ir::ForNode::make(op->loop_var, op->min, op->extent, op->kind, body, op->thread_tag);
    if (!n || !ir::is_zero(op->min)) return serial;
    Injection in{op->loop_var, *n, {}};
    // Every allocation inside the loop becomes n copies, one per virtual thread, where it is.
    bool ok = true;
    ir::post_order_visit(body, [&](const ir::IRNode *node) {
      if (node->node_type != ir::NodeType::Allocate) return;
      const auto *a = static_cast<const ir::AllocateNode *>(node);
      int64_t size = 1;
      if (a->dtype.lanes() != 1) ok = false;
      for (const auto &e : a->extents) {
        const auto c = ir::as_const_int(e);
        if (!c) ok = false;
        size *= c ? *c : 1;
      }
      in.sizes[a->buffer_var.get()] = size;
    });
    // A buffer of vectors, or one used other than by loads and stores (its address taken), keeps the
    // serial loop.
    ir::post_order_visit(body, [&](const ir::IRNode *node) {
      if (node->node_type == ir::NodeType::Variable &&
          in.sizes.count(static_cast<const ir::VariableNode *>(node)) != 0) {
        ok = false;
      }
    });
    if (!ok) return serial;
    ir::Stmt out = arith::simplify(push(offset_copies(body, in), in));
    return out;
  }

 private:
  struct Injection {
    ir::Var var;
    int64_t count;
    std::unordered_map<const ir::VariableNode *, int64_t> sizes;  // elements of each allocation
  };

  static bool uses(const ir::Expr &e, const ir::Var &v) {
    bool found = false;
    if (e.defined()) ir::post_order_visit(e, [&](const ir::IRNode *n) { found = found || n == v.get(); });
    return found;
  }
  static bool uses(const ir::Stmt &s, const ir::Var &v) {
    bool found = false;
    if (s.defined()) ir::post_order_visit(s, [&](const ir::IRNode *n) { found = found || n == v.get(); });
    return found;
  }

  // body without its allocations, each load and store of them offset to its virtual thread's copy.
  static ir::Stmt offset_copies(const ir::Stmt &body, const Injection &in) {
    class Offset : public ir::IRMutator {
     public:
      explicit Offset(const Injection &in) : in_(in) {}
      using ir::IRMutator::mutate;

     protected:
      ir::Expr index(const ir::Var &buf, const ir::Expr &i) {
        const auto it = in_.sizes.find(buf.get());
        if (it == in_.sizes.end()) return i;
        ir::Expr off = ir::cast(i.type().element_of(), in_.var) * ir::make_const(i.type().element_of(), it->second);
        if (i.type().lanes() > 1) off = ir::BroadcastNode::make(off, i.type().lanes());
        return off + i;
      }
      ir::Expr visit(const ir::LoadNode *op, const ir::Expr &) override {
        return ir::LoadNode::make(op->type, op->buffer_var, index(op->buffer_var, mutate(op->index)),
                                  op->predicate.defined() ? mutate(op->predicate) : op->predicate);
      }
      ir::Stmt visit(const ir::StoreNode *op, const ir::Stmt &) override {
        return ir::StoreNode::make(op->buffer_var, mutate(op->value), index(op->buffer_var, mutate(op->index)),
                                   op->predicate.defined() ? mutate(op->predicate) : op->predicate);
      }
      ir::Stmt visit(const ir::AllocateNode *op, const ir::Stmt &) override {
        return ir::AllocateNode::make(op->buffer_var, op->dtype,
                                      {ir::make_const(ir::Int(32), in_.sizes.at(op->buffer_var.get()) * in_.count)},
                                      op->scope, mutate(op->body));
      }

     private:
      const Injection &in_;
    };
    return Offset(in).mutate(body);
  }

  // s once per virtual thread, one after the other.
  static ir::Stmt unrolled(const ir::Stmt &s, const Injection &in) {
    std::vector<ir::Stmt> copies;
    for (int64_t i = 0; i < in.count; ++i) {
      copies.push_back(ir::copy_with_fresh_vars(s, {{in.var.get(), ir::make_const(in.var.type(), i)}}));
    }
    return copies.size() == 1 ? copies[0] : ir::BlockNode::make(copies);
  }

  // What `for v in [0, count): s` computes, with the loop moved inside every statement that does
  // not depend on v: the virtual threads' statements interleaved at the innermost level.
  static ir::Stmt push(const ir::Stmt &s, const Injection &in) {
    if (!uses(s, in.var)) {
      // A barrier or no-op once; other work that does not depend on v as often as before.
      return has_effect(s) ? unrolled(s, in) : s;
    }
    switch (s.node_type()) {
      case ir::NodeType::Block: {
        std::vector<ir::Stmt> out;
        for (const auto &c : s.as<ir::BlockNode>()->stmts) {
          // The barriers that ended each virtual thread's phase: one is enough.
          if (is_barrier(c) && !out.empty() && is_barrier(out.back())) continue;
          out.push_back(push(c, in));
        }
        return ir::BlockNode::make(out);
      }
      case ir::NodeType::For: {
        const auto *op = s.as<ir::ForNode>();
        if (uses(op->extent, in.var)) break;
        if (uses(op->min, in.var)) {
          // A loop whose start depends on v counts from 0 instead, so that it can be shared.
          if (op->kind == ir::ForKind::ThreadBinding) break;
          ir::Var i(op->loop_var.name(), op->loop_var.type());
          ir::Stmt body = ir::substitute(op->body, {{op->loop_var.get(), op->min + i}});
          return ir::ForNode::make(i, ir::make_zero(op->min.type()), op->extent, op->kind, push(body, in),
                                   op->thread_tag);
        }
        return ir::ForNode::make(op->loop_var, op->min, op->extent, op->kind, push(op->body, in), op->thread_tag);
      }
      case ir::NodeType::Allocate: {
        const auto *op = s.as<ir::AllocateNode>();
        return ir::AllocateNode::make(op->buffer_var, op->dtype, op->extents, op->scope, push(op->body, in));
      }
      case ir::NodeType::LetStmt: {
        const auto *op = s.as<ir::LetStmtNode>();
        if (uses(op->value, in.var)) break;
        return ir::LetStmtNode::make(op->var, op->value, push(op->body, in));
      }
      case ir::NodeType::AttrStmt: {
        const auto *op = s.as<ir::AttrStmtNode>();
        if (uses(op->value, in.var)) break;
        return ir::AttrStmtNode::make(op->node, op->key, op->value, push(op->body, in));
      }
      case ir::NodeType::IfThenElse: {
        const auto *op = s.as<ir::IfThenElseNode>();
        if (uses(op->condition, in.var) || (op->else_case.defined() && has_barrier(op->else_case)) ||
            has_barrier(op->then_case)) {
          break;
        }
        return ir::IfThenElseNode::make(op->condition, push(op->then_case, in),
                                        op->else_case.defined() ? push(op->else_case, in) : ir::Stmt());
      }
      default:
        break;
    }
    return unrolled(s, in);
  }
};

// The intrinsic a vector copy that CUDA does in one access becomes (see VectorAccesses):
// vector_copy(dst, dst_base, src, src_base, lanes, zero) copies `lanes` elements of zero's type
// from src[src_base] on to dst[dst_base] on.
constexpr const char *kVectorCopy = "kiln.cuda.vector_copy";

// The CUDA type that holds `lanes` elements of t in one aligned access (float4 for four float32),
// or "" where there is none: 2 or 4 lanes of a 32-bit type, 2, 4 or 8 of a 16-bit one.
std::string vector_access_type(DataType t, int lanes) {
  const int bytes = t.bits() / 8 * lanes;
  if (t.bits() == 32 && (lanes == 2 || lanes == 4)) {
    const std::string base = t.is_float() ? "float" : t.is_uint() ? "uint" : t.is_int() ? "int" : "";
    return base.empty() ? "" : detail::concat(base, lanes);
  }
  if (t.bits() == 16 && (lanes == 2 || lanes == 4 || lanes == 8)) {
    return bytes == 4 ? "uint32_t" : bytes == 8 ? "uint2" : "uint4";
  }
  return "";
}

// Whether e is a multiple of n for every value of its variables, as far as its form shows: a
// constant multiple of n, a sum, difference, min or max of multiples, a product with a multiple,
// a variable bound (by a let) to a multiple.
bool multiple_of(const ir::Expr &e, int64_t n, const std::unordered_map<const ir::VariableNode *, ir::Expr> &lets) {
  if (auto c = ir::as_const_int(e)) return *c % n == 0;
  auto both = [&](const auto *op) { return multiple_of(op->a, n, lets) && multiple_of(op->b, n, lets); };
  switch (e.node_type()) {
    case ir::NodeType::Add:
      return both(e.as<ir::AddNode>());
    case ir::NodeType::Sub:
      return both(e.as<ir::SubNode>());
    case ir::NodeType::Min:
      return both(e.as<ir::MinNode>());
    case ir::NodeType::Max:
      return both(e.as<ir::MaxNode>());
    case ir::NodeType::Mul: {
      const auto *op = e.as<ir::MulNode>();
      return multiple_of(op->a, n, lets) || multiple_of(op->b, n, lets);
    }
    case ir::NodeType::Cast: {
      const auto *op = e.as<ir::CastNode>();
      return op->type.is_int() && op->value.type().is_int() && op->type.bits() >= op->value.type().bits() &&
             multiple_of(op->value, n, lets);
    }
    case ir::NodeType::Variable: {
      const auto it = lets.find(e.as<ir::VariableNode>());
      return it != lets.end() && multiple_of(it->second, n, lets);
    }
    default:
      return false;
  }
}

// The tag of a loop that the kernel writes as a loop under `#pragma unroll` (see VectorAccesses).
constexpr const char *kUnrollTag = "kiln.cuda.unroll";

// The kernel's vector copies `dst[ramp(i, 1, n)] = src[ramp(j, 1, n)]` that one aligned CUDA
// vector access does (see vector_access_type) as vector_copy calls: both buffers aligned to 16
// bytes (a kernel parameter, whose memory the runtime allocates aligned, or a "shared" or "local"
// array, which the kernel declares __align__(16)), i and j multiples of n, no predicate. Every
// other vector access stays lane by lane. Also marks the loops under the unroll pragma.
class VectorAccesses : public ir::IRMutator {
 public:
  explicit VectorAccesses(const ir::LoweredFunc &f) {
    for (const auto &p : f.params) aligned_.insert(p.data.get());
  }
  using ir::IRMutator::mutate;

 protected:
  ir::Stmt visit(const ir::LetStmtNode *op, const ir::Stmt &self) override {
    lets_[op->var.get()] = op->value;
    return ir::IRMutator::visit(op, self);
  }
  ir::Stmt visit(const ir::AllocateNode *op, const ir::Stmt &self) override {
    if (op->scope == "shared" || op->scope == "local") aligned_.insert(op->buffer_var.get());
    return ir::IRMutator::visit(op, self);
  }
  // A serial loop under the unroll pragma: a loop bound to kUnrollTag, which thread_loop writes
  // under `#pragma unroll`.
  ir::Stmt visit(const ir::AttrStmtNode *op, const ir::Stmt &self) override {
    const auto *loop = op->body.as<ir::ForNode>();
    if (op->key != std::string(ir::attr::kPragmaPrefix) + kUnrollPragma || !loop || loop->kind != ir::ForKind::Serial ||
        !ir::as_const_int(loop->extent)) {
      return ir::IRMutator::visit(op, self);
    }
    return ir::ForNode::make(loop->loop_var, loop->min, loop->extent, ir::ForKind::ThreadBinding, mutate(loop->body),
                             kUnrollTag);
  }
  ir::Stmt visit(const ir::StoreNode *op, const ir::Stmt &self) override {
    const DataType t = op->value.type();
    const auto *load = op->value.as<ir::LoadNode>();
    if (t.is_scalar() || op->predicate.defined() || !load || load->predicate.defined() ||
        vector_access_type(t.element_of(), t.lanes()).empty()) {
      return self;
    }
    const ir::Expr dst = contiguous_base(op->buffer_var, op->index, t.lanes());
    const ir::Expr src = contiguous_base(load->buffer_var, load->index, t.lanes());
    if (!dst.defined() || !src.defined()) return self;
    return ir::EvaluateNode::make(
        ir::CallNode::make(ir::Int(32), kVectorCopy,
                           {op->buffer_var, dst, load->buffer_var, src, ir::make_const(ir::Int(32), int64_t{t.lanes()}),
                            ir::make_zero(t.element_of())},
                           ir::CallNode::Kind::Intrinsic));
  }

 private:
  // The first index of an aligned access of `lanes` contiguous elements of buf at `index`, or an
  // undefined Expr.
  ir::Expr contiguous_base(const ir::Var &buf, const ir::Expr &index, int lanes) const {
    const auto *ramp = index.as<ir::RampNode>();
    if (!ramp || aligned_.count(buf.get()) == 0) return ir::Expr();
    auto stride = ir::as_const_int(ramp->stride);
    if (!stride || *stride != 1 || ramp->lanes != lanes || !multiple_of(ramp->base, lanes, lets_)) return ir::Expr();
    return ramp->base;
  }

  std::unordered_set<const ir::VariableNode *> aligned_;
  std::unordered_map<const ir::VariableNode *, ir::Expr> lets_;
};

// The local memory of one CUDA thread (sm_20 and later).
constexpr int64_t kMaxLocalBytesPerThread = 512 * 1024;

// The preamble's own definitions of what the C back end's code takes from the C headers, which
// NVRTC does not have.
constexpr const char *kPreamble = R"(typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
#define INT64_C(c) c##LL
#define UINT64_C(c) c##ULL
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#define NULL 0
)";

// The bits of the float16 nearest to v, as a literal of cuda_fp16.h's __half.
std::string half_bits_literal(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "__ushort_as_half((unsigned short)0x%04xu)",
                static_cast<unsigned>(ir::float_to_half(static_cast<float>(v))));
  return buf;
}

bool is_float16_mul(const ir::Expr &e) { return e.node_type() == ir::NodeType::Mul && e.type().is_float16(); }

class CodeGenCuda : public CodeGenC {
 public:
  // With `half_compute`, float16 is stored as cuda_fp16.h's __half and computed in half precision;
  // otherwise as in the C back end (16 bits, computed in float).
  CodeGenCuda(const ir::LoweredFunc &f, LaunchDims launch, bool half_compute)
      : CodeGenC(f), launch_(launch), half_(half_compute) {}

 protected:
  std::string preamble() override {
    // cuda_fp16.h only where the kernel uses it: other kernels need no toolkit header.
    return "// Kiln CUDA back end: function " + f_.name + ".\n" + (uses_half_ ? "#include <cuda_fp16.h>\n" : "") +
           kPreamble + "\n";
  }

  std::string type_name(DataType t) override {
    if (!half_ || !t.is_float16()) return CodeGenC::type_name(t);
    uses_half_ = true;
    return "__half";
  }

  std::string storage_type_name(DataType t) override {
    if (!half_ || !t.is_float16()) return CodeGenC::storage_type_name(t);
    uses_half_ = true;
    return "__half";
  }

  std::string half_literal(double v) override {
    if (!half_) return CodeGenC::half_literal(v);
    uses_half_ = true;
    return half_bits_literal(v);
  }

  std::string half_load(const std::string &access) override { return half_ ? access : CodeGenC::half_load(access); }

  std::string half_store(const std::string &value) override { return half_ ? value : CodeGenC::half_store(value); }

  std::string half_cast(DataType to, DataType from, const std::string &x) override {
    if (!half_) return CodeGenC::half_cast(to, from, x);
    uses_half_ = true;
    if (to.is_float16()) {
      if (from.is_float16()) return x;
      return "__float2half_rn(" + (from.is_float() && from.bits() == 32 ? x : "(float)" + x) + ")";
    }
    const std::string f = "__half2float(" + x + ")";
    if (to.is_float() && to.bits() == 32) return f;
    if (to.is_bool()) return "(" + f + " != 0.0f)";
    return "((" + type_name(to) + ")" + f + ")";
  }

  // Addition, subtraction, multiplication, division, min, max and comparisons in half precision
  // (a product added to a value is one fused multiply-add, as the CUDA compiler contracts float
  // arithmetic); the other operations in float, rounded to half.
  std::string half_binary(ir::NodeType op, const ir::Expr &a, const ir::Expr &b) override {
    if (!half_) return CodeGenC::half_binary(op, a, b);
    uses_half_ = true;
    using ir::NodeType;
    if (op == NodeType::Add && (is_float16_mul(a) || is_float16_mul(b))) {
      const auto *m = (is_float16_mul(a) ? a : b).as<ir::MulNode>();
      const std::string x = expr(m->a);
      const std::string y = expr(m->b);
      const std::string c = expr(is_float16_mul(a) ? b : a);
      return "__hfma(" + x + ", " + y + ", " + c + ")";
    }
    const char *fn = nullptr;
    switch (op) {
      case NodeType::Add:
        fn = "__hadd";
        break;
      case NodeType::Sub:
        fn = "__hsub";
        break;
      case NodeType::Mul:
        fn = "__hmul";
        break;
      case NodeType::Div:
        fn = "__hdiv";
        break;
      case NodeType::Min:
        fn = "__hmin";
        break;
      case NodeType::Max:
        fn = "__hmax";
        break;
      case NodeType::EQ:
        fn = "__heq";
        break;
      case NodeType::NE:
        fn = "__hneu";
        break;  // true where either is NaN, as C's !=
      case NodeType::LT:
        fn = "__hlt";
        break;
      case NodeType::LE:
        fn = "__hle";
        break;
      case NodeType::GT:
        fn = "__hgt";
        break;
      case NodeType::GE:
        fn = "__hge";
        break;
      default:
        break;
    }
    const std::string x = expr(a);
    const std::string y = expr(b);
    if (fn) return std::string(fn) + "(" + x + ", " + y + ")";
    return "__float2half_rn(" + binary_text(op, "__half2float(" + x + ")", "__half2float(" + y + ")", ir::Float(32)) +
           ")";
  }

  std::string functions() override {
    const std::string entry = kernel_symbol(f_.name);
    fresh(entry);  // the kernel's name, which no variable may take
    for (const auto &p : f_.params) push(p.data, fresh(p.name));
    for (const auto &v : f_.size_vars) push(v, fresh(v.name()));
    std::string text = kernel_function(entry, f_.body);
    // kernel_function ends a C kernel with its status; a __global__ function returns nothing.
    const std::string c_end = "  return 0;\n}\n";
    KILN_CHECK(text.size() >= c_end.size() && text.compare(text.size() - c_end.size(), c_end.size(), c_end) == 0,
               "CUDA back end: unexpected end of kernel ", f_.name);
    text.replace(text.size() - c_end.size(), c_end.size(), "}\n");
    return text;
  }

  std::string kernel_qualifiers() override {
    return detail::concat("extern \"C\" __global__ void __launch_bounds__(", launch_.threads_per_block(), ")");
  }

  std::string pointer_param(DataType elem, const std::string &name) override {
    return storage_type_name(elem) + "* __restrict__ " + name;
  }

  std::string intrinsic_call(const ir::CallNode *op) override {
    if (op->name == ir::intrinsic::kSyncThreads) return "__syncthreads()";
    if (half_ && op->type.is_float16() && ir::is_math_intrinsic(op->name)) {
      // fma in half precision; the other math functions in float, rounded to half.
      std::vector<std::string> args;
      for (const auto &a : op->args) args.push_back(expr(a));
      uses_half_ = true;
      if (op->name == "fma" && args.size() == 3) return "__hfma(" + args[0] + ", " + args[1] + ", " + args[2] + ")";
      for (auto &a : args) a = "__half2float(" + a + ")";
      return "__float2half_rn(" + math_call(op->name, ir::Float(32), args) + ")";
    }
    if (op->name == kVectorCopy) {
      const int lanes = static_cast<int>(*ir::as_const_int(op->args[4]));
      const DataType t = op->args[5].type();
      const std::string vt = vector_access_type(t, lanes);
      return detail::concat("(*reinterpret_cast<", vt, "*>(&", expr(op->args[0]), "[", expr(op->args[1]),
                            "]) = *reinterpret_cast<const ", vt, "*>(&", expr(op->args[2]), "[", expr(op->args[3]),
                            "]))");
    }
    return "";
  }

  void thread_loop(const ir::ForNode *op) override {
    const std::string &tag = op->thread_tag;
    if (tag == kUnrollTag) {
      line("#pragma unroll");
      serial_loop(op, "");
      return;
    }
    if (is_vthread(tag)) {
      line("#pragma unroll");
      serial_loop(op, "  // " + tag);
      return;
    }
    int axis = tag_axis(tag, "threadIdx");
    const bool thread = axis >= 0;
    if (!thread) axis = tag_axis(tag, "blockIdx");
    KILN_CHECK(axis >= 0, "CUDA back end: thread tag ", tag);  // launch_dims() checked the tags
    const int64_t launched = thread ? launch_.block[axis] : launch_.grid[axis];
    const int64_t extent = *ir::as_const_int(op->extent);
    const std::string index = detail::concat(thread ? "threadIdx." : "blockIdx.", static_cast<char>('x' + axis));
    const bool guarded = extent < launched;
    if (guarded && has_barrier(op->body)) {
      throw UserError(detail::concat("function ", f_.name, ": a ", tag, " loop of extent ", extent,
                                     " holds a barrier but the block has ", launched,
                                     " threads there: only some of them would reach it"));
    }
    const std::string name = fresh(op->loop_var.name());
    const std::string ty = type_name(op->loop_var.type());
    line("{  // " + tag);
    indent_by(1);
    const std::string min = ir::is_zero(op->min) ? "" : expr(op->min) + " + ";
    line(ty + " " + name + " = " + min + "(" + ty + ")" + index + ";");
    if (guarded) {
      line(detail::concat("if (", index, " < ", extent, ") {"));
      indent_by(1);
    }
    push(op->loop_var, name);
    stmt(op->body);
    pop(op->loop_var);
    if (guarded) {
      indent_by(-1);
      line("}");
    }
    indent_by(-1);
    line("}");
  }

  // Shared and local arrays are aligned for the vector accesses of VectorAccesses.
  std::string scope_qualifier(const std::string &scope) override {
    if (scope == "shared") return "__shared__ __align__(16)";
    return scope == "local" ? "__align__(16)" : "";
  }

  // Every allocation of a kernel is an array: a thread has no heap to fall back on. A thread's
  // local memory holds up to 512 KiB (registers spill there); shared memory is checked against the
  // target's limit at launch (shared_memory_bytes).
  int64_t max_array_bytes(const std::string &scope) override {
    return scope == "shared" ? std::numeric_limits<int64_t>::max() : kMaxLocalBytesPerThread;
  }
  bool heap_allocations() override { return false; }

 private:
  LaunchDims launch_;
  bool half_;
  bool uses_half_ = false;  // the kernel uses __half: the preamble includes cuda_fp16.h
};

}  // namespace

std::string CudaTarget::arch() const { return detail::concat("sm_", compute_capability); }

CudaTarget parse_cuda_target(const std::string &text) {
  contracts::Target t = contracts::Target::parse(text);
  if (t.kind() != "cuda") {
    throw contracts::TargetError("target '" + t.str() + "' is not a CUDA target (expected 'cuda -arch=sm_XX')");
  }
  const auto arch = t.value("arch");
  if (!arch) throw contracts::TargetError("CUDA target '" + t.str() + "' has no -arch=sm_XX");
  int cc = 0;
  bool ok = arch->size() > 3 && arch->size() <= 6 && arch->compare(0, 3, "sm_") == 0;
  for (size_t i = 3; ok && i < arch->size(); ++i) {
    ok = std::isdigit(static_cast<unsigned char>((*arch)[i])) != 0;
    cc = cc * 10 + ((*arch)[i] - '0');
  }
  if (!ok || cc < 50) {
    throw contracts::TargetError("CUDA target '" + t.str() + "': -arch=" + *arch +
                                 " is not sm_XX with a compute capability of 5.0 or newer");
  }
  CudaTarget out{t, cc};
  return out;
}

LaunchDims launch_dims(const ir::LoweredFunc &f) {
  LaunchDims dims;
  ir::post_order_visit(f.body, [&](const ir::IRNode *n) {
    if (n->node_type != ir::NodeType::For) return;
    const auto *op = static_cast<const ir::ForNode *>(n);
    if (op->kind != ir::ForKind::ThreadBinding) return;
    const std::string &tag = op->thread_tag;
    int axis = tag_axis(tag, "threadIdx");
    std::array<int64_t, 3> *target = &dims.block;
    if (axis < 0) {
      axis = tag_axis(tag, "blockIdx");
      target = &dims.grid;
    }
    if (axis < 0 && !is_vthread(tag)) {
      throw UserError(detail::concat("function ", f.name, ": the CUDA back end cannot bind a loop to '", tag,
                                     "' (blockIdx.x/y/z, threadIdx.x/y/z or vthread)"));
    }
    auto extent = ir::as_const_int(op->extent);
    if (!extent || *extent < 1) {
      throw UserError(detail::concat("function ", f.name, ": the loop bound to ", tag,
                                     " needs a constant positive extent for the launch, not ",
                                     ir::to_string(op->extent)));
    }
    if (axis >= 0) (*target)[axis] = std::max((*target)[axis], *extent);
  });
  return dims;
}

int64_t shared_memory_bytes(const ir::LoweredFunc &f) {
  int64_t bytes = 0;
  ir::post_order_visit(inject_virtual_threads(f).body, [&](const ir::IRNode *n) {
    if (n->node_type != ir::NodeType::Allocate) return;
    const auto *op = static_cast<const ir::AllocateNode *>(n);
    if (op->scope != "shared") return;
    int64_t count = op->dtype.lanes();
    for (const auto &e : op->extents) {
      auto c = ir::as_const_int(e);
      if (!c) {
        throw UserError(detail::concat("function ", f.name, ": shared allocation ", op->buffer_var.name(),
                                       " needs a constant size"));
      }
      count *= *c;
    }
    bytes += count * op->dtype.element_of().bytes();
  });
  return bytes;
}

ir::LoweredFunc make_block_phases(const ir::LoweredFunc &f) {
  const LaunchDims dims = launch_dims(f);
  ir::LoweredFunc out = f;
  out.body = BlockPhases(f, dims).run(f.body);
  return out;
}

ir::LoweredFunc inject_virtual_threads(const ir::LoweredFunc &f) {
  ir::LoweredFunc out = f;
  out.body = VirtualThreads().mutate(f.body);
  return out;
}

ir::LoweredFunc cuda_kernel_ir(const ir::LoweredFunc &f) { return inject_virtual_threads(make_block_phases(f)); }

namespace {

// The kernel's source: cuda_kernel_ir(f) with its vector copies as single accesses.
std::string kernel_source(const ir::LoweredFunc &f, const LaunchDims &launch, bool half_compute) {
  ir::LoweredFunc k = cuda_kernel_ir(f);
  k.body = VectorAccesses(k).mutate(k.body);
  return CodeGenCuda(k, launch, half_compute).generate();
}

}  // namespace

bool CudaTarget::has_half_arithmetic() const { return compute_capability >= 53; }

std::string codegen_cuda(const ir::LoweredFunc &f, bool half_compute) {
  return kernel_source(f, launch_dims(f), half_compute);
}

std::vector<std::string> nvrtc_options(const CudaTarget &target) {
  std::vector<std::string> options = {detail::concat("--gpu-architecture=compute_", target.compute_capability),
                                      "-default-device", "--std=c++17"};
  for (const std::string &dir : nvrtc_include_dirs()) options.push_back("-I" + dir);
  return options;
}

CudaModule::CudaModule(const ir::LoweredFunc &f, const CudaTarget &target)
    : target_(target), entry_(kernel_symbol(f.name)), launch_(launch_dims(f)), shared_bytes_(shared_memory_bytes(f)) {
  if (launch_.threads_per_block() > target.max_threads_per_block) {
    throw UserError(detail::concat("function ", f.name, ": ", launch_.threads_per_block(),
                                   " threads per block, more than the ", target.max_threads_per_block, " of ",
                                   target.target.str()));
  }
  // CUDA's limits on each dimension (every architecture from sm_30 on): a block of at most
  // 1024 x 1024 x 64 threads, a grid of at most 2^31 - 1 x 65535 x 65535 blocks.
  static constexpr std::array<int64_t, 3> kMaxBlock{1024, 1024, 64}, kMaxGrid{2147483647, 65535, 65535};
  static constexpr std::array<char, 3> kAxis{'x', 'y', 'z'};
  for (size_t d = 0; d < 3; ++d) {
    if (launch_.block[d] > kMaxBlock[d]) {
      throw UserError(detail::concat("function ", f.name, ": ", launch_.block[d], " threads in threadIdx.", kAxis[d],
                                     ", more than the ", kMaxBlock[d], " a CUDA block has in ", kAxis[d]));
    }
    if (launch_.grid[d] > kMaxGrid[d]) {
      throw UserError(detail::concat("function ", f.name, ": ", launch_.grid[d], " blocks in blockIdx.", kAxis[d],
                                     ", more than the ", kMaxGrid[d], " a CUDA grid has in ", kAxis[d]));
    }
  }
  if (shared_bytes_ > target.max_shared_bytes_per_block) {
    throw UserError(detail::concat("function ", f.name, ": ", shared_bytes_,
                                   " bytes of shared memory per block, more than the ",
                                   target.max_shared_bytes_per_block, " of ", target.target.str()));
  }
  // Without the toolkit's cuda_fp16.h float16 stays computed in float, which needs no header.
  source_ = kernel_source(f, launch_, target.has_half_arithmetic() && nvrtc_has_fp16_header());
  const std::vector<int> archs = nvrtc_supported_archs();
  if (nvrtc_available() && std::find(archs.begin(), archs.end(), target.compute_capability) == archs.end()) {
    std::string list;
    for (int a : archs) list += detail::concat(list.empty() ? "" : ", ", "sm_", a);
    throw NvrtcError(
        detail::concat("nvrtc ", nvrtc_version(), " cannot compile for ", target.arch(), " (it supports ", list, ")"),
        "");
  }
  ptx_ = compile_cuda_to_ptx(source_, entry_ + ".cu", nvrtc_options(target));
}

}  // namespace kiln::codegen
