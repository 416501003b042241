#pragma once
// The loop IR: expressions and statements. Nodes are plain immutable structs with public fields,
// built only through their make() functions (which check arguments) and held by reference-counted
// handles (Expr, Stmt). The list of all node kinds is the X-macro below.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/error.h"
#include "compiler/ir/producer.h"
#include "compiler/ir/type.h"

namespace kiln::ir {

#define KILN_EXPR_NODES(X) \
  X(IntImm)                \
  X(FloatImm)              \
  X(StringImm)             \
  X(Variable)              \
  X(Cast)                  \
  X(Add)                   \
  X(Sub)                   \
  X(Mul)                   \
  X(Div)                   \
  X(Mod)                   \
  X(FloorDiv)              \
  X(FloorMod)              \
  X(Min)                   \
  X(Max)                   \
  X(EQ)                    \
  X(NE)                    \
  X(LT)                    \
  X(LE)                    \
  X(GT)                    \
  X(GE)                    \
  X(And)                   \
  X(Or)                    \
  X(Not)                   \
  X(Select)                \
  X(Ramp)                  \
  X(Broadcast)             \
  X(Let)                   \
  X(Call)                  \
  X(Load)                  \
  X(ProducerLoad)          \
  X(Reduce)

#define KILN_STMT_NODES(X) \
  X(LetStmt)               \
  X(AttrStmt)              \
  X(AssertStmt)            \
  X(Store)                 \
  X(ProducerStore)         \
  X(Allocate)              \
  X(For)                   \
  X(IfThenElse)            \
  X(Block)                 \
  X(Evaluate)              \
  X(ProducerRealize)

// The expression nodes with two operands `a` and `b` (a subset of the list above).
#define KILN_BINARY_NODES(X) \
  X(Add)                     \
  X(Sub) X(Mul) X(Div) X(Mod) X(FloorDiv) X(FloorMod) X(Min) X(Max) X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(And) X(Or)

enum class NodeType : uint8_t {
#define KILN_ENUM(n) n,
  KILN_EXPR_NODES(KILN_ENUM) KILN_STMT_NODES(KILN_ENUM)
#undef KILN_ENUM
};

const char *node_type_name(NodeType t);

struct IRNode {
  explicit IRNode(NodeType t) : node_type(t) {}
  virtual ~IRNode() = default;
  IRNode(const IRNode &) = delete;
  IRNode &operator=(const IRNode &) = delete;
  const NodeType node_type;
};

struct BaseExprNode : IRNode {
  BaseExprNode(NodeType t, DataType dt) : IRNode(t), type(dt) {}
  const DataType type;
};

struct BaseStmtNode : IRNode {
  explicit BaseStmtNode(NodeType t) : IRNode(t) {}
};

#define KILN_FWD(n) struct n##Node;
KILN_EXPR_NODES(KILN_FWD)
KILN_STMT_NODES(KILN_FWD)
#undef KILN_FWD

// Handle to an immutable expression node.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const BaseExprNode> n) : ptr_(std::move(n)) {}
  // Integer literals become int32 immediates, floating literals float32 immediates.
  Expr(int v);      // NOLINT(google-explicit-constructor)
  Expr(int64_t v);  // NOLINT(google-explicit-constructor)
  Expr(float v);    // NOLINT(google-explicit-constructor)
  Expr(double v);   // NOLINT(google-explicit-constructor)

  bool defined() const { return ptr_ != nullptr; }
  const BaseExprNode *get() const { return ptr_.get(); }
  const BaseExprNode *operator->() const { return ptr_.get(); }
  const std::shared_ptr<const BaseExprNode> &ptr() const { return ptr_; }
  DataType type() const;
  NodeType node_type() const;

  template <typename T>
  const T *as() const {
    if (ptr_ && ptr_->node_type == T::kNodeType) return static_cast<const T *>(ptr_.get());
    return nullptr;
  }
  // Identity comparison (same node).
  bool same_as(const Expr &o) const { return ptr_ == o.ptr_; }

 private:
  std::shared_ptr<const BaseExprNode> ptr_;
};

// Handle to an immutable statement node.
class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const BaseStmtNode> n) : ptr_(std::move(n)) {}
  bool defined() const { return ptr_ != nullptr; }
  const BaseStmtNode *get() const { return ptr_.get(); }
  const BaseStmtNode *operator->() const { return ptr_.get(); }
  NodeType node_type() const;
  template <typename T>
  const T *as() const {
    if (ptr_ && ptr_->node_type == T::kNodeType) return static_cast<const T *>(ptr_.get());
    return nullptr;
  }
  bool same_as(const Stmt &o) const { return ptr_ == o.ptr_; }

 private:
  std::shared_ptr<const BaseStmtNode> ptr_;
};

// A variable. Identity is the node, the name is only for printing.
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(const std::string &name, DataType t = Int(32));
  explicit Var(const Expr &e);  // e must be a Variable
  const VariableNode *get() const;
  const VariableNode *operator->() const { return get(); }
  const std::string &name() const;
};

// Half-open range [min, min + extent).
struct Range {
  Expr min, extent;
  Range() = default;
  Range(Expr min_, Expr extent_) : min(std::move(min_)), extent(std::move(extent_)) {}
  static Range from_min_extent(Expr min, Expr extent) { return Range(std::move(min), std::move(extent)); }
  bool defined() const { return min.defined() && extent.defined(); }
};

// The role of an iteration variable.
enum class IterVarType : uint8_t {
  DataPar,      // a data-parallel axis of a compute
  ThreadIndex,  // a GPU thread or block index
  CommReduce,   // a reduction axis
  Ordered,      // a sequential axis (e.g. a scan)
  Opaque,       // an axis that may not be reordered or parallelised
  Unrolled,
  Vectorized,
  Parallelized,
};

struct IterVarNode {
  Range dom;  // may be undefined for leaf variables of a schedule before bound inference
  Var var;
  IterVarType iter_type = IterVarType::DataPar;
  std::string thread_tag;
};

// An iteration variable: a variable with its domain and role. Identity is the node.
class IterVar {
 public:
  IterVar() = default;
  IterVar(Range dom, Var var, IterVarType type, std::string thread_tag = "");
  bool defined() const { return ptr_ != nullptr; }
  const IterVarNode *operator->() const { return ptr_.get(); }
  const IterVarNode *get() const { return ptr_.get(); }
  const Var &var() const { return ptr_->var; }
  const Range &dom() const { return ptr_->dom; }
  // An iteration variable reads as its variable in expressions: A(i, k).
  operator Expr() const { return ptr_->var; }  // NOLINT(google-explicit-constructor)
  bool same_as(const IterVar &o) const { return ptr_ == o.ptr_; }
  bool operator==(const IterVar &o) const { return ptr_ == o.ptr_; }
  bool operator!=(const IterVar &o) const { return ptr_ != o.ptr_; }
  bool operator<(const IterVar &o) const { return ptr_ < o.ptr_; }

 private:
  std::shared_ptr<const IterVarNode> ptr_;
};

// A commutative reducer: result(lhs, rhs) with an identity element, possibly over tuples.
struct CommReducerNode {
  std::vector<Var> lhs, rhs;
  std::vector<Expr> result, identity_element;
};
using CommReducer = std::shared_ptr<const CommReducerNode>;
CommReducer make_comm_reducer(std::vector<Var> lhs, std::vector<Var> rhs, std::vector<Expr> result,
                              std::vector<Expr> identity);

// ---------------------------------------------------------------------------------------------
// Expression nodes

#define KILN_NODE_HEADER(n) static constexpr NodeType kNodeType = NodeType::n;

struct IntImmNode : BaseExprNode {
  KILN_NODE_HEADER(IntImm)
  IntImmNode(DataType t, int64_t v) : BaseExprNode(kNodeType, t), value(v) {}
  const int64_t value;
  static Expr make(DataType t, int64_t value);
};

struct FloatImmNode : BaseExprNode {
  KILN_NODE_HEADER(FloatImm)
  FloatImmNode(DataType t, double v) : BaseExprNode(kNodeType, t), value(v) {}
  const double value;
  static Expr make(DataType t, double value);
};

struct StringImmNode : BaseExprNode {
  KILN_NODE_HEADER(StringImm)
  explicit StringImmNode(std::string v) : BaseExprNode(kNodeType, Handle()), value(std::move(v)) {}
  const std::string value;
  static Expr make(std::string value);
};

struct VariableNode : BaseExprNode {
  KILN_NODE_HEADER(Variable)
  VariableNode(DataType t, std::string n) : BaseExprNode(kNodeType, t), name(std::move(n)) {}
  const std::string name;
  // For handle variables that point to a buffer: the element type of the buffer.
  DataType pointee;
};

struct CastNode : BaseExprNode {
  KILN_NODE_HEADER(Cast)
  CastNode(DataType t, Expr v) : BaseExprNode(kNodeType, t), value(std::move(v)) {}
  const Expr value;
  static Expr make(DataType t, Expr value);
};

#define KILN_BINARY_NODE(n)                                                                                   \
  struct n##Node : BaseExprNode {                                                                             \
    KILN_NODE_HEADER(n)                                                                                       \
    n##Node(DataType t, Expr a_, Expr b_) : BaseExprNode(kNodeType, t), a(std::move(a_)), b(std::move(b_)) {} \
    const Expr a, b;                                                                                          \
    static Expr make(Expr a, Expr b);                                                                         \
  };
KILN_BINARY_NODES(KILN_BINARY_NODE)
#undef KILN_BINARY_NODE

struct NotNode : BaseExprNode {
  KILN_NODE_HEADER(Not)
  NotNode(DataType t, Expr a_) : BaseExprNode(kNodeType, t), a(std::move(a_)) {}
  const Expr a;
  static Expr make(Expr a);
};

struct SelectNode : BaseExprNode {
  KILN_NODE_HEADER(Select)
  SelectNode(DataType t, Expr c, Expr tv, Expr fv)
      : BaseExprNode(kNodeType, t), condition(std::move(c)), true_value(std::move(tv)), false_value(std::move(fv)) {}
  const Expr condition, true_value, false_value;
  static Expr make(Expr condition, Expr true_value, Expr false_value);
};

// A vector of lanes: base, base + stride, base + 2*stride, ...
struct RampNode : BaseExprNode {
  KILN_NODE_HEADER(Ramp)
  RampNode(DataType t, Expr b, Expr s, int l)
      : BaseExprNode(kNodeType, t), base(std::move(b)), stride(std::move(s)), lanes(l) {}
  const Expr base, stride;
  const int lanes;
  static Expr make(Expr base, Expr stride, int lanes);
};

struct BroadcastNode : BaseExprNode {
  KILN_NODE_HEADER(Broadcast)
  BroadcastNode(DataType t, Expr v, int l) : BaseExprNode(kNodeType, t), value(std::move(v)), lanes(l) {}
  const Expr value;
  const int lanes;
  static Expr make(Expr value, int lanes);
};

struct LetNode : BaseExprNode {
  KILN_NODE_HEADER(Let)
  LetNode(DataType t, Var v, Expr val, Expr b)
      : BaseExprNode(kNodeType, t), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Var var;
  const Expr value, body;
  static Expr make(Var var, Expr value, Expr body);
};

// A call to a named intrinsic. Pure intrinsics (exp, log, ...) have no side effects.
struct CallNode : BaseExprNode {
  KILN_NODE_HEADER(Call)
  enum class Kind : uint8_t { PureIntrinsic, Intrinsic, Extern };
  CallNode(DataType t, std::string n, std::vector<Expr> a, Kind k)
      : BaseExprNode(kNodeType, t), name(std::move(n)), args(std::move(a)), kind(k) {}
  const std::string name;
  const std::vector<Expr> args;
  const Kind kind;
  static Expr make(DataType t, std::string name, std::vector<Expr> args, Kind kind);
};

// A load from a flat buffer (after storage flattening). The result type has the index's lanes.
struct LoadNode : BaseExprNode {
  KILN_NODE_HEADER(Load)
  LoadNode(DataType t, Var buf, Expr idx, Expr pred)
      : BaseExprNode(kNodeType, t), buffer_var(std::move(buf)), index(std::move(idx)), predicate(std::move(pred)) {}
  const Var buffer_var;
  const Expr index;
  const Expr predicate;  // undefined means all lanes
  static Expr make(DataType t, Var buffer_var, Expr index, Expr predicate = Expr());
};

// A read of an element of output `value_index` of `producer` by multi-dimensional indices (before
// storage flattening).
struct ProducerLoadNode : BaseExprNode {
  KILN_NODE_HEADER(ProducerLoad)
  ProducerLoadNode(DataType t, ProducerRef p, int vi, std::vector<Expr> idx)
      : BaseExprNode(kNodeType, t), producer(std::move(p)), value_index(vi), indices(std::move(idx)) {}
  const ProducerRef producer;
  const int value_index;
  const std::vector<Expr> indices;
  static Expr make(ProducerRef producer, int value_index, std::vector<Expr> indices);
};

// A reduction of `source[value_index]` over `axis` with `combiner`, only where `condition` holds.
struct ReduceNode : BaseExprNode {
  KILN_NODE_HEADER(Reduce)
  ReduceNode(DataType t, CommReducer c, std::vector<Expr> s, std::vector<IterVar> ax, Expr cond, int vi)
      : BaseExprNode(kNodeType, t),
        combiner(std::move(c)),
        source(std::move(s)),
        axis(std::move(ax)),
        condition(std::move(cond)),
        value_index(vi) {}
  const CommReducer combiner;
  const std::vector<Expr> source;
  const std::vector<IterVar> axis;
  const Expr condition;
  const int value_index;
  static Expr make(CommReducer combiner, std::vector<Expr> source, std::vector<IterVar> axis, Expr condition,
                   int value_index);
};

// ---------------------------------------------------------------------------------------------
// Statement nodes

struct LetStmtNode : BaseStmtNode {
  KILN_NODE_HEADER(LetStmt)
  LetStmtNode(Var v, Expr val, Stmt b)
      : BaseStmtNode(kNodeType), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Var var;
  const Expr value;
  const Stmt body;
  static Stmt make(Var var, Expr value, Stmt body);
};

// Attribute keys used by AttrStmt.
namespace attr {
constexpr const char *kThreadExtent = "thread_extent";    // node: IterVar var; value: extent
constexpr const char *kVirtualThread = "virtual_thread";  // value: extent
constexpr const char *kRealizeScope = "realize_scope";    // string value: storage scope
constexpr const char *kStorageScope = "storage_scope";    // buffer var: scope
constexpr const char *kPragmaPrefix = "pragma_";          // pragma_<name>
constexpr const char *kAutoUnrollMaxStep = "pragma_auto_unroll_max_step";
constexpr const char *kPragmaFuseWithNext = "pragma_fuse_with_next";  // Stage::fuse_with_next
constexpr const char *kPragmaPipeline = "pragma_pipeline";            // Stage::pipeline
constexpr const char *kDoubleBuffer = "double_buffer_scope";
constexpr const char *kStorageAlign = "buffer_dim_align";
// node: ProducerLoad of a tensor at a region's first element; value: buffer_bind(data, offset,
// strides...) naming the variables of a region buffer that storage flattening binds.
constexpr const char *kBufferBindScope = "buffer_bind_scope";
}  // namespace attr

struct AttrStmtNode : BaseStmtNode {
  KILN_NODE_HEADER(AttrStmt)
  AttrStmtNode(Expr n, std::string k, Expr v, Stmt b)
      : BaseStmtNode(kNodeType), node(std::move(n)), key(std::move(k)), value(std::move(v)), body(std::move(b)) {}
  const Expr node;  // the object the attribute is about (a variable), may be undefined
  const std::string key;
  const Expr value;
  const Stmt body;
  static Stmt make(Expr node, std::string key, Expr value, Stmt body);
};

struct AssertStmtNode : BaseStmtNode {
  KILN_NODE_HEADER(AssertStmt)
  AssertStmtNode(Expr c, std::string m, Stmt b)
      : BaseStmtNode(kNodeType), condition(std::move(c)), message(std::move(m)), body(std::move(b)) {}
  const Expr condition;
  const std::string message;
  const Stmt body;
  static Stmt make(Expr condition, std::string message, Stmt body);
};

struct StoreNode : BaseStmtNode {
  KILN_NODE_HEADER(Store)
  StoreNode(Var buf, Expr v, Expr i, Expr p)
      : BaseStmtNode(kNodeType),
        buffer_var(std::move(buf)),
        value(std::move(v)),
        index(std::move(i)),
        predicate(std::move(p)) {}
  const Var buffer_var;
  const Expr value, index;
  const Expr predicate;  // undefined means all lanes
  static Stmt make(Var buffer_var, Expr value, Expr index, Expr predicate = Expr());
};

struct ProducerStoreNode : BaseStmtNode {
  KILN_NODE_HEADER(ProducerStore)
  ProducerStoreNode(ProducerRef p, int vi, Expr v, std::vector<Expr> idx)
      : BaseStmtNode(kNodeType),
        producer(std::move(p)),
        value_index(vi),
        value(std::move(v)),
        indices(std::move(idx)) {}
  const ProducerRef producer;
  const int value_index;
  const Expr value;
  const std::vector<Expr> indices;
  static Stmt make(ProducerRef producer, int value_index, Expr value, std::vector<Expr> indices);
};

// Allocates a buffer of `dtype` with the product of `extents` elements in `scope` for `body`.
struct AllocateNode : BaseStmtNode {
  KILN_NODE_HEADER(Allocate)
  AllocateNode(Var buf, DataType t, std::vector<Expr> e, std::string s, Stmt b)
      : BaseStmtNode(kNodeType),
        buffer_var(std::move(buf)),
        dtype(t),
        extents(std::move(e)),
        scope(std::move(s)),
        body(std::move(b)) {}
  const Var buffer_var;
  const DataType dtype;
  const std::vector<Expr> extents;
  const std::string scope;  // "global", "shared", "local"
  const Stmt body;
  static Stmt make(Var buffer_var, DataType dtype, std::vector<Expr> extents, std::string scope, Stmt body);
};

enum class ForKind : uint8_t { Serial, Parallel, Vectorized, Unrolled, ThreadBinding };
const char *for_kind_name(ForKind k);

struct ForNode : BaseStmtNode {
  KILN_NODE_HEADER(For)
  ForNode(Var v, Expr mn, Expr ext, ForKind k, Stmt b, std::string tag)
      : BaseStmtNode(kNodeType),
        loop_var(std::move(v)),
        min(std::move(mn)),
        extent(std::move(ext)),
        kind(k),
        body(std::move(b)),
        thread_tag(std::move(tag)) {}
  const Var loop_var;
  const Expr min, extent;
  const ForKind kind;
  const Stmt body;
  const std::string thread_tag;  // for ThreadBinding: blockIdx.x, threadIdx.y, vthread, ...
  static Stmt make(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body, std::string thread_tag = "");
};

struct IfThenElseNode : BaseStmtNode {
  KILN_NODE_HEADER(IfThenElse)
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : BaseStmtNode(kNodeType), condition(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  const Expr condition;
  const Stmt then_case, else_case;  // else_case may be undefined
  static Stmt make(Expr condition, Stmt then_case, Stmt else_case = Stmt());
};

// A sequence of statements.
struct BlockNode : BaseStmtNode {
  KILN_NODE_HEADER(Block)
  explicit BlockNode(std::vector<Stmt> s) : BaseStmtNode(kNodeType), stmts(std::move(s)) {}
  const std::vector<Stmt> stmts;
  // Flattens nested blocks; returns the single statement when there is one.
  static Stmt make(std::vector<Stmt> stmts);
  static Stmt make(Stmt a, Stmt b) { return make(std::vector<Stmt>{std::move(a), std::move(b)}); }
};

struct EvaluateNode : BaseStmtNode {
  KILN_NODE_HEADER(Evaluate)
  explicit EvaluateNode(Expr v) : BaseStmtNode(kNodeType), value(std::move(v)) {}
  const Expr value;
  static Stmt make(Expr value);
};

// Declares the region of a tensor that `body` produces and uses (before storage flattening).
struct ProducerRealizeNode : BaseStmtNode {
  KILN_NODE_HEADER(ProducerRealize)
  ProducerRealizeNode(ProducerRef p, int vi, std::vector<Range> b, std::string s, Stmt body_)
      : BaseStmtNode(kNodeType),
        producer(std::move(p)),
        value_index(vi),
        bounds(std::move(b)),
        scope(std::move(s)),
        body(std::move(body_)) {}
  const ProducerRef producer;
  const int value_index;
  const std::vector<Range> bounds;
  const std::string scope;
  const Stmt body;
  static Stmt make(ProducerRef producer, int value_index, std::vector<Range> bounds, std::string scope, Stmt body);
};

#undef KILN_NODE_HEADER

// A no-op statement.
Stmt make_nop();
bool is_nop(const Stmt &s);

}  // namespace kiln::ir
