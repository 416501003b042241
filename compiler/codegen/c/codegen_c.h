#pragma once
// The C back end: a lowered function as one self-contained C99 translation unit that is a Kiln
// module (deploy/c_abi.h), called the same way as a library the LLVM back end exports.
//
// The unit includes only standard headers and declares the structs of deploy/c_abi.h itself. It
// holds
//   static int32_t kiln_kernel(T* restrict <param>..., <int type> <size var>...);
//       the kernel: params in f.params order, then f.size_vars; returns 0, kKilnErrorAssert when
//       an AssertStmt fails or kKilnErrorAlloc when an allocation cannot be made;
//   static int32_t kiln_entry(const KilnArg *args, int32_t num_args);
//       the packed entry point: the argument checks of lower::make_packed_api (failures return
//       kKilnErrorArgument), then the kernel;
//   int32_t kiln_fn_<name>(const KilnArg *args, int32_t num_args);
//       the exported entry point (lower::PackedFunc::symbol), a call of kiln_entry;
//   const KilnModuleInfo kiln_module_info;
//       the module table; it refers to kiln_entry itself, so no other library's symbol can take
//       its place.
// Every other function and variable is static. float16 data is stored as uint16_t and computed in
// float (CodeGenC's float16 hooks); vectors are scalarized lane by lane; thread loops and
// parallel loops run as serial loops.
// The code assumes wrapping signed arithmetic (-fwrapv) to match the interpreter on overflow.
// Output is deterministic: the same IR gives the same text.
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/ir/function.h"

namespace kiln::codegen {

// Throws UserError for a function the C back end cannot run (one with a sync_threads barrier),
// ExprError for a size variable no argument gives, InternalError for IR that is not lowered loop
// IR.
std::string codegen_c(const ir::LoweredFunc &f);

// Writes C-like source for one lowered function. This class writes C99 for the host; a generator
// for another C-like language (CUDA C next) derives from it and overrides the hooks, each of which
// is one thing the languages do differently. The walk over statements and expressions, the naming
// of variables, the scalarization of vectors and the helper functions are shared.
class CodeGenC {
 public:
  explicit CodeGenC(const ir::LoweredFunc &f) : f_(f) {}
  virtual ~CodeGenC() = default;
  CodeGenC(const CodeGenC &) = delete;
  CodeGenC &operator=(const CodeGenC &) = delete;

  // The translation unit: preamble(), the helper functions the code uses, then functions().
  std::string generate();

 protected:
  // ------------------------------------------------------------------ hooks
  // The top of the unit: includes and declarations. C: the standard headers, the structs and
  // status codes of deploy/c_abi.h and the last-error variable.
  virtual std::string preamble();
  // The functions of the unit, after the helpers. C: the kernel, the packed entry point, the
  // exported entry point and the module table (see the top of this file).
  virtual std::string functions();
  // The kernel's declaration before its name. C: "static int32_t".
  virtual std::string kernel_qualifiers();
  // A kernel parameter pointing to elements stored as `elem`. C: "float* restrict A".
  virtual std::string pointer_param(ir::DataType elem, const std::string &name);
  // The type a scalar of type t is computed in (C: float16 as float, bool as bool, int8 as
  // int8_t), and the type an element of type t is stored as (C: float16 as uint16_t).
  virtual std::string type_name(ir::DataType t);
  virtual std::string storage_type_name(ir::DataType t);
  // The function that computes the math intrinsic `name` (exp, log, sqrt, tanh, erf, pow, fabs,
  // floor, ceil, round, fma) on scalars of float type t. C: libm's, "expf" for float32.
  virtual std::string math_function(const std::string &name, ir::DataType t);
  // The text of a call to an intrinsic this language treats specially, or "" to leave it to the
  // shared code. C: sync_threads is a UserError (the C back end runs thread loops serially).
  virtual std::string intrinsic_call(const ir::CallNode *op);
  // A loop bound to a thread index (ForKind::ThreadBinding, op->thread_tag). C: a serial loop.
  virtual void thread_loop(const ir::ForNode *op);
  // The qualifier that places an allocation of `scope` ("global", "shared", "local") in its memory,
  // "" for none. C: none (small allocations live on the stack, others on the heap).
  virtual std::string scope_qualifier(const std::string &scope);
  // The largest allocation, in bytes, written as an array; a larger one, or one whose size is not
  // constant, is allocated on the heap where heap_allocations() holds, and is a UserError where it
  // does not. C: 64 KiB of stack, and the heap beyond.
  virtual int64_t max_array_bytes(const std::string &scope);
  virtual bool heap_allocations() { return true; }

  // ------------------------------------------------------------------ float16
  // How float16 is computed. C computes it in float (these hooks' defaults): type_name(float16) is
  // float, a load converts the stored 16 bits to float (kiln_f16_to_f32), a store converts back
  // (kiln_f32_to_f16), a cast to float16 rounds (kiln_f16_round), arithmetic is float arithmetic
  // and an immediate is a float literal. A language with a half-precision type overrides them
  // together with type_name and storage_type_name.
  // The immediate v of type float16 (already the half nearest to it).
  virtual std::string half_literal(double v);
  // The computed value of the stored float16 element `access`, and the stored element of the
  // computed float16 `value`.
  virtual std::string half_load(const std::string &access);
  virtual std::string half_store(const std::string &value);
  // A cast of `x` from `from` to `to`, one of which is float16 (scalar types), or "" for the
  // shared code.
  virtual std::string half_cast(ir::DataType to, ir::DataType from, const std::string &x);
  // The binary operation `op` on float16 operands a and b, or "" for the shared code (the
  // operators and helpers of type_name(float16) values).
  virtual std::string half_binary(ir::NodeType op, const ir::Expr &a, const ir::Expr &b);

  // ------------------------------------------------------------------ building blocks
  // The kernel function `name` running `body`, with the parameters of f (its buffers' data
  // pointers, then its size variables) under the names they are bound to.
  std::string kernel_function(const std::string &name, const ir::Stmt &body);
  // A loop run serially, with `note` after its opening brace.
  void serial_loop(const ir::ForNode *op, const std::string &note);
  // A fresh C identifier from a hint; binds and unbinds IR variables to C text.
  std::string fresh(const std::string &hint);
  void push(const ir::Var &v, std::string text, bool lane_array = false) {
    bound_[v.get()].push_back(Binding{std::move(text), lane_array});
  }
  void pop(const ir::Var &v) { bound_[v.get()].pop_back(); }
  // Writes one line of the current function at the current indentation.
  void line(const std::string &s) { body_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << s << "\n"; }
  // Indents the lines that follow by `delta` more levels (less when negative).
  void indent_by(int delta) { indent_ += delta; }
  // The text of an expression (scalar, or one lane inside a lane loop) and of a statement.
  std::string expr(const ir::Expr &e);
  void stmt(const ir::Stmt &s);
  // A call of the helper `key` (emitted once, before the functions).
  std::string helper_call(const std::string &key, const std::vector<std::string> &args);
  // The text of the binary operation `op` on the texts a and b of operands of type t, and of a
  // call of the math intrinsic `name` on arguments of float type t.
  std::string binary_text(ir::NodeType op, const std::string &a, const std::string &b, ir::DataType t);
  std::string math_call(const std::string &name, ir::DataType t, const std::vector<std::string> &args);

  const ir::LoweredFunc &f_;
  // The status a failing AssertStmt returns where code is being written: kKilnErrorArgument in
  // the entry point, kKilnErrorAssert in the kernel.
  std::string assert_status_ = "kKilnErrorAssert";

 private:
  struct Binding {
    std::string text;
    bool lane_array = false;  // a vector held in a C array, read as text[lane]
  };

  const Binding &lookup(const ir::Var &v) const;
  void need(const std::string &key);

  // Opens `for (int32_t lane = 0; lane < lanes; ++lane) {`; close_lanes() ends it.
  void open_lanes(int lanes);
  void close_lanes();

  std::string binary(ir::NodeType op, const ir::Expr &a, const ir::Expr &b, ir::DataType t);
  std::string cast(ir::DataType t, const ir::Expr &v);
  std::string call(const ir::CallNode *op);
  std::string arg_field(const ir::CallNode *op);
  std::string load(const ir::LoadNode *op);

  void store(const ir::StoreNode *op);
  void allocate(const ir::AllocateNode *op);
  void loop(const ir::ForNode *op);
  void kernel_call(const ir::AttrStmtNode *op);
  void fail(const std::string &message, const std::string &status);

  std::ostringstream body_;
  int indent_ = 1;
  std::unordered_set<std::string> used_names_;
  std::unordered_map<const ir::VariableNode *, std::vector<Binding>> bound_;
  std::set<std::string> helpers_;
  std::string lane_;               // the lane variable while printing per-lane code, else empty
  std::string lane_name_;          // the name lane loops use, taken on first use
  int conditional_ = 0;            // > 0 inside a branch of if_then_else, where a Let is inlined, not hoisted
  std::vector<std::string> heap_;  // malloc'd buffers live here, innermost last
  std::string kernel_;             // the kernel function, written where the entry calls it
};

}  // namespace kiln::codegen
