#include "compiler/codegen/llvm/codegen_llvm.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalAlias.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "compiler/ir/float16.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"
#include "compiler/lower/make_packed_api.h"
#include "deploy/c_abi.h"

namespace kiln::codegen {

using ir::DataType;
using ir::Expr;
using ir::NodeType;
using ir::Stmt;
using ir::VariableNode;

namespace {

// Allocations of a constant size up to this many bytes live on the stack; others on the heap.
constexpr int64_t kMaxStackBytes = 64 * 1024;
// Strided loads and stores rearranged by shuffles (transposes): strides up to this, spans of up to
// this many elements (beyond, the vectors held at once would not fit in the registers anyway).
constexpr int64_t kMaxTransposeStride = 64;
constexpr int64_t kMaxTransposeElements = 1024;
// Every tensor argument and every allocation starts at a multiple of this many bytes.
constexpr int64_t kBufferAlign = 64;
// A heap allocation larger than this is reported as an error rather than attempted.
constexpr int64_t kMaxHeapBytes = int64_t{1} << 40;

int64_t gcd64(int64_t a, int64_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// The integers {coeff * k + base}: what is known about an index for alignment. coeff 0 means the
// single value base; {1, 0} means nothing is known.
struct ModSet {
  int64_t coeff = 1;
  int64_t base = 0;
};

ModSet normalize(ModSet m) {
  if (m.coeff < 0) m.coeff = -m.coeff;
  if (m.coeff > 0) {
    m.base %= m.coeff;
    if (m.base < 0) m.base += m.coeff;
  }
  return m;
}

// The largest power of two (up to 2^20) that divides every value of m.
int64_t pow2_factor(ModSet m) {
  const int64_t g = gcd64(m.coeff, m.base);
  if (g == 0) return int64_t{1} << 20;
  return std::min<int64_t>(g & -g, int64_t{1} << 20);
}

struct BufferInfo {
  llvm::Value *ptr = nullptr;  // the first element, as a pointer to the element's storage type
  DataType elem;               // the scalar element type it was declared with
  int64_t align = 1;           // bytes the base pointer is known to be aligned to
  int scope = -1;              // alias scope, -1 for none
};

// The function being emitted: the kernel or an outlined parallel loop body.
struct FunctionState {
  llvm::Function *fn = nullptr;
  llvm::BasicBlock *entry = nullptr;  // holds the allocas and ends with a branch to the code
  std::vector<llvm::Value *> heap;    // live heap allocations, innermost last
};

class CodeGenLLVM {
 public:
  CodeGenLLVM(llvm::LLVMContext &ctx, llvm::Module &m, const LLVMTarget &target, const LLVMCodegenOptions &opt)
      : ctx_(ctx), mod_(m), b_(ctx), target_(target), opt_(opt) {
    i8_ = b_.getInt8Ty();
    i16_ = b_.getInt16Ty();
    i32_ = b_.getInt32Ty();
    i64_ = b_.getInt64Ty();
    i8p_ = b_.getInt8PtrTy();
    const llvm::Triple triple(m.getTargetTriple());
    native_half_ = triple.isAArch64() || (triple.isX86() && target.has_feature("f16c"));
    scalef_ = triple.isX86() && target.has_feature("avx512f");
    scalef_vl_ = scalef_ && target.has_feature("avx512vl");
    declare_abi();
  }

  void add_function(const ir::LoweredFunc &f);
  void finish();

 private:
  // ------------------------------------------------------------------ types and constants
  llvm::Type *scalar_type(DataType t);
  llvm::Type *reg_type(DataType t);
  llvm::Type *mem_type(DataType t);
  llvm::Type *like(llvm::Type *scalar, llvm::Type *shape) {
    if (auto *v = llvm::dyn_cast<llvm::FixedVectorType>(shape))
      return llvm::FixedVectorType::get(scalar, v->getNumElements());
    return scalar;
  }
  llvm::Constant *int_const(llvm::Type *t, int64_t v) {
    return llvm::ConstantInt::get(t, static_cast<uint64_t>(v), true);
  }
  llvm::Constant *string_ptr(const std::string &s);
  void declare_abi();

  // ------------------------------------------------------------------ scopes
  void push_var(const ir::Var &v, llvm::Value *value) { vars_[v.get()].push_back(value); }
  void pop_var(const ir::Var &v) { vars_[v.get()].pop_back(); }
  llvm::Value *lookup_var(const VariableNode *v);
  void push_buf(const VariableNode *v, BufferInfo b) { bufs_[v].push_back(b); }
  void pop_buf(const VariableNode *v) { bufs_[v].pop_back(); }
  const BufferInfo *find_buf(const VariableNode *v) const {
    auto it = bufs_.find(v);
    return it == bufs_.end() || it->second.empty() ? nullptr : &it->second.back();
  }
  const BufferInfo &lookup_buf(const ir::Var &v);
  ModSet modset(const Expr &e);

  // ------------------------------------------------------------------ expressions
  llvm::Value *expr(const Expr &e);
  llvm::Value *binary(NodeType op, const Expr &a, const Expr &b);
  llvm::Value *int_div(NodeType op, llvm::Value *a, llvm::Value *b, DataType t);
  llvm::Value *cast(DataType to, const Expr &value);
  llvm::Value *ramp(const ir::RampNode *op);
  llvm::Value *call(const ir::CallNode *op);
  llvm::Value *math(const std::string &name, const std::vector<llvm::Value *> &args);
  llvm::Value *libm(const std::string &name, llvm::Value *x);
  llvm::Value *fconst(llvm::Value *like_value, double v) { return llvm::ConstantFP::get(like_value->getType(), v); }
  llvm::Value *horner(llvm::Value *x, const std::vector<double> &coeffs);
  llvm::Value *approx_exp(llvm::Value *x);
  llvm::Value *scalef_intrinsic(llvm::Type *t);
  llvm::Value *approx_log(llvm::Value *x);
  llvm::Value *approx_tanh(llvm::Value *x);
  llvm::Value *approx_erf(llvm::Value *x);
  llvm::Value *if_then_else(const ir::CallNode *op);
  llvm::Value *arg_field(const ir::CallNode *op);
  llvm::Value *load(const ir::LoadNode *op);
  llvm::Value *contract(llvm::Value *v) {
    if (opt_.fp_contract) {
      if (auto *i = llvm::dyn_cast<llvm::Instruction>(v)) i->setHasAllowContract(true);
    }
    return v;
  }
  llvm::Value *to_i64(llvm::Value *v, bool is_signed) {
    return b_.CreateIntCast(v, like(i64_, v->getType()), is_signed);
  }
  // An index of a load or store, as int64. Signed arithmetic inside it may not overflow (an index
  // that wraps around is out of bounds anyway), which lets LLVM fold it into addressing.
  // The address of element `e` of `base` (elements of type mt). A constant added last to the index
  // is a GEP of its own, so that it becomes the address's displacement and the accesses of an
  // unrolled body share one address computation (in the index, x + c may become an `or` of
  // disjoint bits, which costs instructions per access).
  llvm::Value *address(llvm::Type *mt, llvm::Value *base, const Expr &e) {
    int64_t offset = 0;
    Expr rest = e;
    while (rest.type().is_int() && rest.type().lanes() == 1) {
      const auto *a = rest.as<ir::AddNode>();
      auto c = a ? ir::as_const_int(a->b) : std::nullopt;
      if (!c) break;
      offset += *c;
      rest = a->a;
    }
    if (offset == 0) return b_.CreateInBoundsGEP(mt, base, index(e));
    return b_.CreateGEP(mt, b_.CreateGEP(mt, base, index(rest)),
                        llvm::ConstantInt::get(i64_, static_cast<uint64_t>(offset), true));
  }
  llvm::Value *index(const Expr &e) {
    ++index_depth_;
    llvm::Value *v = expr(e);
    --index_depth_;
    return to_i64(v, e.type().is_int());
  }
  llvm::Value *all_lanes(llvm::Value *v) { return v->getType()->isVectorTy() ? b_.CreateAndReduce(v) : v; }

  // float16: storage <-> float registers
  llvm::Value *from_memory(llvm::Value *v, DataType elem);
  llvm::Value *to_memory(llvm::Value *v, DataType elem);
  llvm::Value *round_to_half(llvm::Value *f);
  llvm::Value *half_bits_to_float(llvm::Value *h);
  llvm::Value *float_to_half_bits(llvm::Value *f);

  // memory
  llvm::Value *element_ptr(const BufferInfo &buf, llvm::Type *mt);
  llvm::Align access_align(const BufferInfo &buf, const Expr &offset, llvm::Type *mt);
  // llvm.masked.load / llvm.masked.store of a vector of any width, as power-of-two pieces where the
  // width is not one (LLVM 14's x86 back end drops the mask of the last lane of a <9 x float>
  // masked load on AVX2: it loads the lane, and a masked-off padding lane reads memory).
  // Each piece is annotated with buf's alias scopes.
  llvm::Value *masked_load(llvm::FixedVectorType *vt, llvm::Value *ptr, llvm::Align align, llvm::Value *mask,
                           const BufferInfo &buf);
  llvm::Instruction *masked_store(llvm::Value *value, llvm::Value *ptr, llvm::Align align, llvm::Value *mask,
                                  const BufferInfo &buf);
  void annotate(llvm::Value *access, const BufferInfo &buf);

  // ------------------------------------------------------------------ statements
  void stmt(const Stmt &s);
  void store(const ir::StoreNode *op);
  void allocate(const ir::AllocateNode *op);
  void let_stmt(const ir::LetStmtNode *op);
  void loop(const ir::ForNode *op);
  void parallel_loop(const ir::ForNode *op);
  void serial_loop(llvm::Value *begin, llvm::Value *end, bool is_signed,
                   const std::function<void(llvm::Value *)> &body);
  void if_stmt(const ir::IfThenElseNode *op);

  // Branches on `ok`; where it is false, records `message` and returns `code` from the function.
  void check(llvm::Value *ok, const std::string &message, int32_t code);
  void check_status(llvm::Value *status);
  void emit_return(llvm::Value *code, llvm::Constant *message);
  llvm::BasicBlock *block(const char *name) { return llvm::BasicBlock::Create(ctx_, name, state_->fn); }
  llvm::Function *new_function(llvm::FunctionType *type, llvm::GlobalValue::LinkageTypes linkage,
                               const std::string &name);
  void begin_function(FunctionState *state);

  // ------------------------------------------------------------------ entry point and metadata
  llvm::Function *emit_kernel(const ir::LoweredFunc &f, const Stmt &body);
  void kernel_call(const ir::AttrStmtNode *op);
  void emit_entry(const lower::PackedFunc &packed);
  void emit_info(const lower::PackedFunc &packed, llvm::Function *entry);

  llvm::LLVMContext &ctx_;
  llvm::Module &mod_;
  llvm::IRBuilder<> b_;
  const LLVMTarget &target_;
  LLVMCodegenOptions opt_;
  llvm::Type *i8_, *i16_, *i32_, *i64_;
  llvm::PointerType *i8p_;
  bool native_half_ = false;
  bool scalef_ = false, scalef_vl_ = false;  // AVX-512's vscalefps (VL: on 128/256-bit vectors)

  // The C ABI.
  llvm::StructType *arg_type_ = nullptr, *api_type_ = nullptr, *param_info_type_ = nullptr,
                   *function_info_type_ = nullptr, *module_info_type_ = nullptr;
  llvm::FunctionType *body_type_ = nullptr, *entry_type_ = nullptr;
  llvm::GlobalVariable *runtime_api_ = nullptr, *last_error_ = nullptr;
  llvm::Function *last_error_fn_ = nullptr;
  llvm::FunctionCallee aligned_alloc_, free_;
  std::map<std::string, llvm::Constant *> strings_;
  std::vector<llvm::Constant *> function_infos_;

  // The function being generated.
  const ir::LoweredFunc *f_ = nullptr;
  std::string name_;  // the function's name as a C identifier, for the names of its internals
  std::map<std::string, std::string> exported_;  // symbol -> the function exported under it
  FunctionState *state_ = nullptr;
  std::unordered_map<const VariableNode *, std::vector<llvm::Value *>> vars_;
  std::unordered_map<const VariableNode *, std::vector<BufferInfo>> bufs_;
  std::unordered_map<const VariableNode *, std::vector<ModSet>> mods_;
  std::unordered_map<const VariableNode *, int> scope_of_;
  std::vector<llvm::MDNode *> scope_md_, noalias_md_;
  llvm::Value *mask_ = nullptr;  // lanes still active inside a vector if_then_else
  // The short-stride loads of the stores being emitted that read whole strides together with
  // others of their values (see find_whole_strides): the load -> the start of the unmasked
  // contiguous span it is picked out of, and how many elements its ramp starts after it.
  struct WholeStrides {
    Expr start;
    unsigned from;
  };
  std::unordered_map<const ir::LoadNode *, WholeStrides> whole_strides_;
  // The independent parts of a rearrangement (see rearrange_parts): the indices of its vectors in
  // and out, and their ids renumbered to those of a rearrangement of its own.
  struct RearrangePart {
    std::vector<unsigned> in, out;
    std::vector<std::vector<int>> ids, want;
  };
  // Transposed loads (see find_whole_strides): s loads of stride s >= 5 and `lanes` lanes at
  // consecutive offsets read every element of [start, start + s * lanes): the span is loaded as
  // s contiguous vectors and rearranged into the s loads' values by shuffles (a transpose), once,
  // at the first of them the stores evaluate.
  struct TransposedLoads {
    Expr start;
    int64_t stride = 0;
    unsigned lanes = 0;
    std::vector<llvm::Value *> values;  // in offset order, each once its part is emitted
    std::vector<RearrangePart> parts;   // the transpose's independent parts (see rearrange_parts)
    std::vector<int> part_of;           // offset -> its part
    std::vector<bool> emitted;          // per part
  };
  std::vector<TransposedLoads> transposed_groups_;
  std::unordered_map<const ir::LoadNode *, std::pair<size_t, unsigned>> transposed_loads_;
  bool in_store_run_ = false;  // whole_strides_ was found over a run of stores
  void find_whole_strides(const std::vector<const ir::StoreNode *> &stores);
  void clear_whole_strides() {
    whole_strides_.clear();
    transposed_groups_.clear();
    transposed_loads_.clear();
  }
  llvm::Value *transposed_load(const BufferInfo &buf, llvm::Type *mt, llvm::Value *base, size_t group, unsigned k);
  // Transposed stores: s stores of one run, of stride s and `lanes` lanes at consecutive offsets,
  // that together write every element of [start, start + s * lanes) (and nothing else of the run
  // writes or reads that buffer): their values are rearranged by shuffles into s contiguous vectors,
  // stored where the last of them was. The run's store index -> (group, offset in it).
  struct TransposedStores {
    Expr start;
    int64_t stride = 0;
    unsigned lanes = 0;
    std::vector<llvm::Value *> values;
    std::vector<RearrangePart> parts;  // stored each once its values are all there
    std::vector<int> part_of;          // offset -> its part
    std::vector<size_t> missing;       // per part: values still to come
  };
  std::vector<TransposedStores> find_transposed_stores(const std::vector<const ir::StoreNode *> &run,
                                                       std::vector<std::pair<int, unsigned>> *member);
  void emit_transposed_stores(const ir::StoreNode *member, const TransposedStores &g, const RearrangePart &part);
  // Vectors whose elements (named by ids[r][lane]) are rearranged into vectors of the elements
  // want[k][lane], by two-operand shuffles: a butterfly (swaps of a register bit and a lane bit)
  // where both arrangements are permutations of the bits of (register, lane), else per vector a
  // chain over the vectors its elements come from.
  static std::vector<RearrangePart> rearrange_parts(const std::vector<std::vector<int>> &ids,
                                                    const std::vector<std::vector<int>> &want);
  std::vector<llvm::Value *> rearrange(std::vector<llvm::Value *> regs, std::vector<std::vector<int>> ids,
                                       const std::vector<std::vector<int>> &want);
  // The status a failing AssertStmt returns: kKilnErrorArgument in the entry point's checks,
  // kKilnErrorAssert in the kernel.
  int32_t assert_status_ = kKilnErrorAssert;
  llvm::Value *kernel_status_ = nullptr;  // the entry's call of the kernel, once emitted
  int parallel_depth_ = 0;
  int index_depth_ = 0;
  int outlined_ = 0;
  int vector_bits_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Types, constants, the ABI

llvm::Type *CodeGenLLVM::scalar_type(DataType t) {
  if (t.is_handle()) return i8p_;
  if (t.is_bool()) return b_.getInt1Ty();
  if (t.is_float()) {
    if (t.bits() == 64) return b_.getDoubleTy();
    if (t.bits() == 32 || t.bits() == 16) return b_.getFloatTy();
    throw InternalError(detail::concat("LLVM back end: unsupported type ", t.to_string()));
  }
  if (t.bits() != 8 && t.bits() != 16 && t.bits() != 32 && t.bits() != 64) {
    throw InternalError(detail::concat("LLVM back end: unsupported type ", t.to_string()));
  }
  return b_.getIntNTy(static_cast<unsigned>(t.bits()));
}

llvm::Type *CodeGenLLVM::reg_type(DataType t) {
  llvm::Type *s = scalar_type(t.element_of());
  return t.lanes() == 1 ? s : llvm::FixedVectorType::get(s, static_cast<unsigned>(t.lanes()));
}

llvm::Type *CodeGenLLVM::mem_type(DataType t) {
  if (t.is_bool()) return i8_;
  if (t.is_float16()) return native_half_ ? b_.getHalfTy() : i16_;
  return scalar_type(t.element_of());
}

llvm::Constant *CodeGenLLVM::string_ptr(const std::string &s) {
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  llvm::Constant *data = llvm::ConstantDataArray::getString(ctx_, s, true);
  auto *gv = new llvm::GlobalVariable(mod_, data->getType(), true, llvm::GlobalValue::PrivateLinkage, data, ".str");
  gv->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  gv->setAlignment(llvm::Align(1));
  llvm::Constant *ptr = llvm::ConstantExpr::getBitCast(gv, i8p_);
  strings_[s] = ptr;
  return ptr;
}

void CodeGenLLVM::declare_abi() {
  // Field for field the structs of deploy/c_abi.h.
  arg_type_ = llvm::StructType::create(ctx_, {i8p_, i32_, i64_->getPointerTo(), i64_->getPointerTo(), i8_, i8_, i16_},
                                       "KilnArg");
  body_type_ = llvm::FunctionType::get(i32_, {i64_, i64_, i8p_}, false);
  entry_type_ = llvm::FunctionType::get(i32_, {arg_type_->getPointerTo(), i32_}, false);
  auto *parallel_for_type = llvm::FunctionType::get(i32_, {body_type_->getPointerTo(), i64_, i8p_}, false);
  api_type_ = llvm::StructType::create(ctx_, {i32_, parallel_for_type->getPointerTo()}, "KilnRuntimeApi");
  param_info_type_ =
      llvm::StructType::create(ctx_, {i8p_, i32_, i8_, i8_, i16_, i64_->getPointerTo()}, "KilnParamInfo");
  function_info_type_ = llvm::StructType::create(
      ctx_, {i8p_, i8p_, entry_type_->getPointerTo(), i32_, param_info_type_->getPointerTo()}, "KilnFunctionInfo");
  auto *error_fn_type = llvm::FunctionType::get(i8p_, {}, false);
  module_info_type_ =
      llvm::StructType::create(ctx_,
                               {i32_, i32_, function_info_type_->getPointerTo()->getPointerTo(),
                                error_fn_type->getPointerTo(), api_type_->getPointerTo()->getPointerTo(), i8p_},
                               "KilnModuleInfo");
  static_assert(sizeof(KilnArg) == 40 && sizeof(KilnParamInfo) == 24 && sizeof(KilnFunctionInfo) == 40 &&
                    sizeof(KilnModuleInfo) == 40 && sizeof(KilnRuntimeApi) == 16,
                "deploy/c_abi.h changed: update the LLVM back end's copy of its structs");

  runtime_api_ =
      new llvm::GlobalVariable(mod_, api_type_->getPointerTo(), false, llvm::GlobalValue::InternalLinkage,
                               llvm::ConstantPointerNull::get(api_type_->getPointerTo()), "kiln_runtime_api");
  runtime_api_->setAlignment(llvm::Align(8));
  last_error_ = new llvm::GlobalVariable(mod_, i8p_, false, llvm::GlobalValue::InternalLinkage, string_ptr(""),
                                         "kiln_last_error");
  last_error_->setAlignment(llvm::Align(8));
  last_error_fn_ =
      llvm::Function::Create(error_fn_type, llvm::GlobalValue::InternalLinkage, "kiln_module_last_error", mod_);
  last_error_fn_->addFnAttr(llvm::Attribute::NoUnwind);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", last_error_fn_));
  llvm::LoadInst *msg = b_.CreateAlignedLoad(i8p_, last_error_, llvm::Align(8));
  msg->setAtomic(llvm::AtomicOrdering::Monotonic);
  b_.CreateRet(msg);

  aligned_alloc_ = mod_.getOrInsertFunction("aligned_alloc", llvm::FunctionType::get(i8p_, {i64_, i64_}, false));
  free_ = mod_.getOrInsertFunction("free", llvm::FunctionType::get(b_.getVoidTy(), {i8p_}, false));
}

llvm::Function *CodeGenLLVM::new_function(llvm::FunctionType *type, llvm::GlobalValue::LinkageTypes linkage,
                                          const std::string &name) {
  if (linkage == llvm::GlobalValue::ExternalLinkage && mod_.getNamedValue(name)) {
    throw UserError("LLVM back end: function name " + name + " is used twice or clashes with a symbol of the module");
  }
  llvm::Function *fn = llvm::Function::Create(type, linkage, name, mod_);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr("target-cpu", target_.cpu);
  const std::string features = target_.feature_string();
  if (!features.empty()) fn->addFnAttr("target-features", features);
  if (vector_bits_ > 0) fn->addFnAttr("min-legal-vector-width", std::to_string(vector_bits_));
  return fn;
}

void CodeGenLLVM::begin_function(FunctionState *state) {
  state_ = state;
  state->entry = llvm::BasicBlock::Create(ctx_, "entry", state->fn);
  llvm::BasicBlock *body = llvm::BasicBlock::Create(ctx_, "body", state->fn);
  b_.SetInsertPoint(state->entry);
  b_.CreateBr(body);
  b_.SetInsertPoint(body);
}

// ---------------------------------------------------------------------------------------------
// Scopes and alignment facts

llvm::Value *CodeGenLLVM::lookup_var(const VariableNode *v) {
  auto it = vars_.find(v);
  if (it != vars_.end() && !it->second.empty()) return it->second.back();
  if (const BufferInfo *b = find_buf(v)) return b_.CreateBitCast(b->ptr, i8p_);
  throw InternalError(detail::concat("LLVM back end: variable ", v->name, " is not bound in function ", f_->name));
}

const BufferInfo &CodeGenLLVM::lookup_buf(const ir::Var &v) {
  if (const BufferInfo *b = find_buf(v.get())) return *b;
  throw InternalError(detail::concat("LLVM back end: buffer ", v.name(), " is not bound in function ", f_->name));
}

ModSet CodeGenLLVM::modset(const Expr &e) {
  const ModSet unknown{1, 0};
  auto mul = [](int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); };
  switch (e.node_type()) {
    case NodeType::IntImm:
      return {0, e.as<ir::IntImmNode>()->value};
    case NodeType::Variable: {
      auto it = mods_.find(e.as<VariableNode>());
      return it != mods_.end() && !it->second.empty() ? it->second.back() : unknown;
    }
    case NodeType::Add:
    case NodeType::Sub: {
      const Expr &ea = e.node_type() == NodeType::Add ? e.as<ir::AddNode>()->a : e.as<ir::SubNode>()->a;
      const Expr &eb = e.node_type() == NodeType::Add ? e.as<ir::AddNode>()->b : e.as<ir::SubNode>()->b;
      const ModSet a = modset(ea), b = modset(eb);
      const int64_t base = e.node_type() == NodeType::Add ? a.base + b.base : a.base - b.base;
      return normalize({gcd64(a.coeff, b.coeff), base});
    }
    case NodeType::Mul: {
      const auto *op = e.as<ir::MulNode>();
      const ModSet a = modset(op->a), b = modset(op->b);
      int64_t x, y, z, base;
      if (!mul(a.base, b.base, &base)) return unknown;
      if (a.coeff == 0) return mul(a.base, b.coeff, &x) ? normalize({x, base}) : unknown;
      if (b.coeff == 0) return mul(b.base, a.coeff, &x) ? normalize({x, base}) : unknown;
      if (!mul(a.coeff, b.coeff, &x) || !mul(a.coeff, b.base, &y) || !mul(b.coeff, a.base, &z)) return unknown;
      return normalize({gcd64(gcd64(x, y), z), base});
    }
    case NodeType::Div:
    case NodeType::FloorDiv: {
      const Expr &ea = e.node_type() == NodeType::Div ? e.as<ir::DivNode>()->a : e.as<ir::FloorDivNode>()->a;
      const Expr &eb = e.node_type() == NodeType::Div ? e.as<ir::DivNode>()->b : e.as<ir::FloorDivNode>()->b;
      auto c = ir::as_const_int(eb);
      const ModSet a = modset(ea);
      if (c && *c > 0 && a.coeff % *c == 0 && a.base % *c == 0) return normalize({a.coeff / *c, a.base / *c});
      return unknown;
    }
    case NodeType::Min:
    case NodeType::Max: {
      const Expr &ea = e.node_type() == NodeType::Min ? e.as<ir::MinNode>()->a : e.as<ir::MaxNode>()->a;
      const Expr &eb = e.node_type() == NodeType::Min ? e.as<ir::MinNode>()->b : e.as<ir::MaxNode>()->b;
      const ModSet a = modset(ea), b = modset(eb);
      return normalize({gcd64(gcd64(a.coeff, b.coeff), a.base - b.base), a.base});
    }
    case NodeType::Cast: {
      const auto *op = e.as<ir::CastNode>();
      if (op->type.is_integer_like() && op->value.type().is_integer_like() && !op->type.is_bool()) {
        return modset(op->value);
      }
      return unknown;
    }
    case NodeType::Let: {
      const auto *op = e.as<ir::LetNode>();
      mods_[op->var.get()].push_back(modset(op->value));
      const ModSet r = modset(op->body);
      mods_[op->var.get()].pop_back();
      return r;
    }
    default:
      return unknown;  // what other nodes compute is not tracked
  }
}

llvm::Value *CodeGenLLVM::element_ptr(const BufferInfo &buf, llvm::Type *mt) {
  if (buf.ptr->getType() == mt->getPointerTo()) return buf.ptr;
  return b_.CreateBitCast(buf.ptr, mt->getPointerTo());
}

llvm::Align CodeGenLLVM::access_align(const BufferInfo &buf, const Expr &offset, llvm::Type *mt) {
  const int64_t elem = static_cast<int64_t>(mod_.getDataLayout().getTypeAllocSize(mt));
  int64_t bytes = pow2_factor(modset(offset)) * elem;
  bytes = std::min(bytes, buf.align);
  bytes = std::max<int64_t>(bytes, 1);
  // Never claim less than the natural alignment of the element (buffers hold whole elements).
  if (bytes < elem && (elem & (elem - 1)) == 0) bytes = elem;
  return llvm::Align(static_cast<uint64_t>(bytes));
}

void CodeGenLLVM::annotate(llvm::Value *access, const BufferInfo &buf) {
  auto *inst = llvm::dyn_cast<llvm::Instruction>(access);
  if (!inst || !inst->mayReadOrWriteMemory() || buf.scope < 0) return;
  inst->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_md_[static_cast<size_t>(buf.scope)]);
  inst->setMetadata(llvm::LLVMContext::MD_noalias, noalias_md_[static_cast<size_t>(buf.scope)]);
}

// ---------------------------------------------------------------------------------------------
// float16

llvm::Value *CodeGenLLVM::half_bits_to_float(llvm::Value *h) {
  llvm::Type *t32 = like(i32_, h->getType());
  llvm::Value *x = b_.CreateZExt(h, t32);
  auto c = [&](int64_t v) { return int_const(t32, v); };
  llvm::Value *sign = b_.CreateShl(b_.CreateAnd(x, c(0x8000)), c(16));
  llvm::Value *exp = b_.CreateAnd(b_.CreateLShr(x, c(10)), c(0x1f));
  llvm::Value *mant = b_.CreateAnd(x, c(0x3ff));
  llvm::Value *mant13 = b_.CreateShl(mant, c(13));
  llvm::Value *normal = b_.CreateOr(b_.CreateOr(sign, b_.CreateShl(b_.CreateAdd(exp, c(112)), c(23))), mant13);
  llvm::Value *inf_nan = b_.CreateOr(b_.CreateOr(sign, c(0x7f800000)), mant13);
  llvm::Type *tf = like(b_.getFloatTy(), h->getType());
  llvm::Value *sub = b_.CreateFMul(b_.CreateUIToFP(mant, tf), llvm::ConstantFP::get(tf, 5.9604644775390625e-8));
  llvm::Value *sub_bits = b_.CreateOr(b_.CreateBitCast(sub, t32), sign);
  llvm::Value *bits = b_.CreateSelect(b_.CreateICmpEQ(exp, c(0x1f)), inf_nan,
                                      b_.CreateSelect(b_.CreateICmpEQ(exp, c(0)), sub_bits, normal));
  return b_.CreateBitCast(bits, tf);
}

llvm::Value *CodeGenLLVM::float_to_half_bits(llvm::Value *f) {
  llvm::Type *t32 = like(i32_, f->getType());
  auto c = [&](int64_t v) { return int_const(t32, v); };
  llvm::Value *x = b_.CreateBitCast(f, t32);
  llvm::Value *sign = b_.CreateAnd(b_.CreateLShr(x, c(16)), c(0x8000));
  llvm::Value *mant = b_.CreateAnd(x, c(0x7fffff));
  llvm::Value *exp = b_.CreateAnd(b_.CreateLShr(x, c(23)), c(0xff));
  llvm::Value *nan_payload =
      b_.CreateSelect(b_.CreateICmpNE(mant, c(0)), b_.CreateOr(c(0x200), b_.CreateLShr(mant, c(13))), c(0));
  llvm::Value *inf_nan = b_.CreateOr(b_.CreateOr(sign, c(0x7c00)), nan_payload);
  llvm::Value *e = b_.CreateSub(exp, c(112));
  llvm::Value *overflow = b_.CreateOr(sign, c(0x7c00));
  // Normal halves: round the 13 dropped bits to nearest, ties to even (a carry may reach infinity).
  llvm::Value *half = b_.CreateOr(b_.CreateShl(e, c(10)), b_.CreateLShr(mant, c(13)));
  llvm::Value *rem = b_.CreateAnd(mant, c(0x1fff));
  llvm::Value *up =
      b_.CreateOr(b_.CreateICmpUGT(rem, c(0x1000)),
                  b_.CreateAnd(b_.CreateICmpEQ(rem, c(0x1000)), b_.CreateICmpNE(b_.CreateAnd(half, c(1)), c(0))));
  llvm::Value *normal = b_.CreateOr(sign, b_.CreateAdd(half, b_.CreateZExt(up, t32)));
  // Subnormal halves: shift the mantissa with its implicit bit right by 14 - e (14 to 24).
  llvm::Value *in_range = b_.CreateAnd(b_.CreateICmpSLE(e, c(0)), b_.CreateICmpSGE(e, c(-10)));
  llvm::Value *shift = b_.CreateSelect(in_range, b_.CreateSub(c(14), e), c(14));
  llvm::Value *m = b_.CreateOr(mant, c(0x800000));
  llvm::Value *hs = b_.CreateLShr(m, shift);
  llvm::Value *srem = b_.CreateAnd(m, b_.CreateSub(b_.CreateShl(c(1), shift), c(1)));
  llvm::Value *mid = b_.CreateShl(c(1), b_.CreateSub(shift, c(1)));
  llvm::Value *sup =
      b_.CreateOr(b_.CreateICmpUGT(srem, mid),
                  b_.CreateAnd(b_.CreateICmpEQ(srem, mid), b_.CreateICmpNE(b_.CreateAnd(hs, c(1)), c(0))));
  llvm::Value *subnormal = b_.CreateOr(sign, b_.CreateAdd(hs, b_.CreateZExt(sup, t32)));
  llvm::Value *r = b_.CreateSelect(b_.CreateICmpSGE(e, c(-10)), subnormal, sign);
  r = b_.CreateSelect(b_.CreateICmpSGT(e, c(0)), normal, r);
  r = b_.CreateSelect(b_.CreateICmpSGE(e, c(31)), overflow, r);
  r = b_.CreateSelect(b_.CreateICmpEQ(exp, c(0xff)), inf_nan, r);
  return b_.CreateTrunc(r, like(i16_, f->getType()));
}

llvm::Value *CodeGenLLVM::round_to_half(llvm::Value *f) {
  if (native_half_) {
    llvm::Value *h = b_.CreateFPTrunc(f, like(b_.getHalfTy(), f->getType()));
    return b_.CreateFPExt(h, f->getType());
  }
  return half_bits_to_float(float_to_half_bits(f));
}

llvm::Value *CodeGenLLVM::from_memory(llvm::Value *v, DataType elem) {
  if (elem.is_bool()) return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  if (elem.is_float16()) {
    if (native_half_) return b_.CreateFPExt(v, like(b_.getFloatTy(), v->getType()));
    return half_bits_to_float(v);
  }
  return v;
}

llvm::Value *CodeGenLLVM::to_memory(llvm::Value *v, DataType elem) {
  if (elem.is_bool()) return b_.CreateZExt(v, like(i8_, v->getType()));
  if (elem.is_float16()) {
    if (native_half_) return b_.CreateFPTrunc(v, like(b_.getHalfTy(), v->getType()));
    return float_to_half_bits(v);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Expressions

llvm::Value *CodeGenLLVM::expr(const Expr &e) {
  const DataType t = e.type();
  switch (e.node_type()) {
    case NodeType::IntImm:
      return int_const(reg_type(t), e.as<ir::IntImmNode>()->value);
    case NodeType::FloatImm: {
      double v = e.as<ir::FloatImmNode>()->value;
      if (t.bits() != 64) v = t.is_float16() ? ir::round_to_half(static_cast<float>(v)) : static_cast<float>(v);
      return llvm::ConstantFP::get(reg_type(t), v);
    }
    case NodeType::StringImm:
      return string_ptr(e.as<ir::StringImmNode>()->value);
    case NodeType::Variable:
      return lookup_var(e.as<VariableNode>());
    case NodeType::Cast:
      return cast(t, e.as<ir::CastNode>()->value);
#define KILN_BINARY_CASE(n)                                     \
  case NodeType::n: {                                           \
    const auto *op = static_cast<const ir::n##Node *>(e.get()); \
    return binary(NodeType::n, op->a, op->b);                   \
  }
      KILN_BINARY_NODES(KILN_BINARY_CASE)
#undef KILN_BINARY_CASE
    case NodeType::Not:
      return b_.CreateNot(expr(e.as<ir::NotNode>()->a));
    case NodeType::Select: {
      const auto *op = e.as<ir::SelectNode>();
      llvm::Value *c = expr(op->condition);
      llvm::Value *a = expr(op->true_value);
      llvm::Value *b = expr(op->false_value);
      return b_.CreateSelect(c, a, b);
    }
    case NodeType::Ramp:
      return ramp(e.as<ir::RampNode>());
    case NodeType::Broadcast: {
      const auto *op = e.as<ir::BroadcastNode>();
      return b_.CreateVectorSplat(static_cast<unsigned>(op->lanes), expr(op->value));
    }
    case NodeType::Let: {
      const auto *op = e.as<ir::LetNode>();
      llvm::Value *v = expr(op->value);
      push_var(op->var, v);
      mods_[op->var.get()].push_back(op->var.type().is_integer_like() ? modset(op->value) : ModSet{});
      llvm::Value *r = expr(op->body);
      mods_[op->var.get()].pop_back();
      pop_var(op->var);
      return r;
    }
    case NodeType::Call:
      return call(e.as<ir::CallNode>());
    case NodeType::Load:
      return load(e.as<ir::LoadNode>());
    case NodeType::ProducerLoad:
    case NodeType::Reduce:
      throw InternalError(detail::concat("LLVM back end: ", ir::node_type_name(e.node_type()),
                                         " cannot appear in lowered IR (lower the function first)"));
#define KILN_STMT_CASE(n) case NodeType::n:
      KILN_STMT_NODES(KILN_STMT_CASE)
#undef KILN_STMT_CASE
      break;  // statement kinds, which no expression has
  }
  throw InternalError(detail::concat("LLVM back end: unexpected expression ", ir::node_type_name(e.node_type())));
}

llvm::Value *CodeGenLLVM::binary(NodeType op, const Expr &ea, const Expr &eb) {
  const DataType t = ea.type();
  llvm::Value *a = expr(ea);
  llvm::Value *b = expr(eb);
  if (t.is_float()) {
    switch (op) {
      case NodeType::Add:
        return contract(b_.CreateFAdd(a, b));
      case NodeType::Sub:
        return contract(b_.CreateFSub(a, b));
      case NodeType::Mul:
        return contract(b_.CreateFMul(a, b));
      case NodeType::Div:
        return b_.CreateFDiv(a, b);
      case NodeType::Mod:
        return b_.CreateFRem(a, b);
      case NodeType::FloorDiv:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
      case NodeType::FloorMod: {
        llvm::Value *q = b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
        return b_.CreateFSub(a, b_.CreateFMul(q, b));
      }
      case NodeType::Min:
        return b_.CreateSelect(b_.CreateFCmpOLT(a, b), a, b);
      case NodeType::Max:
        return b_.CreateSelect(b_.CreateFCmpOGT(a, b), a, b);
      case NodeType::EQ:
        return b_.CreateFCmpOEQ(a, b);
      case NodeType::NE:
        return b_.CreateFCmpUNE(a, b);
      case NodeType::LT:
        return b_.CreateFCmpOLT(a, b);
      case NodeType::LE:
        return b_.CreateFCmpOLE(a, b);
      case NodeType::GT:
        return b_.CreateFCmpOGT(a, b);
      case NodeType::GE:
        return b_.CreateFCmpOGE(a, b);
      default:
        break;  // only the binary nodes reach here; And and Or take no floats
    }
  } else {
    const bool s = t.is_int();
    switch (op) {
      case NodeType::Add:
        return b_.CreateAdd(a, b, "", false, s && index_depth_ > 0);
      case NodeType::Sub:
        return b_.CreateSub(a, b, "", false, s && index_depth_ > 0);
      case NodeType::Mul:
        return b_.CreateMul(a, b, "", false, s && index_depth_ > 0);
      case NodeType::Div:
      case NodeType::Mod:
      case NodeType::FloorDiv:
      case NodeType::FloorMod:
        return int_div(op, a, b, t);
      case NodeType::Min:
        return b_.CreateSelect(s ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b), a, b);
      case NodeType::Max:
        return b_.CreateSelect(s ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b), a, b);
      case NodeType::EQ:
        return b_.CreateICmpEQ(a, b);
      case NodeType::NE:
        return b_.CreateICmpNE(a, b);
      case NodeType::LT:
        return s ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b);
      case NodeType::LE:
        return s ? b_.CreateICmpSLE(a, b) : b_.CreateICmpULE(a, b);
      case NodeType::GT:
        return s ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b);
      case NodeType::GE:
        return s ? b_.CreateICmpSGE(a, b) : b_.CreateICmpUGE(a, b);
      case NodeType::And:
        return b_.CreateAnd(a, b);
      case NodeType::Or:
        return b_.CreateOr(a, b);
      default:
        break;  // only the binary nodes reach here
    }
  }
  throw InternalError(detail::concat("LLVM back end: ", ir::node_type_name(op), " on ", t.to_string()));
}

// Integer division with the IR's semantics: x / -1 is -x (wrapping), and a zero divisor gives an
// unspecified value instead of a trap. Constant divisors take the direct instructions, which
// LLVM turns into multiplications and shifts.
llvm::Value *CodeGenLLVM::int_div(NodeType op, llvm::Value *a, llvm::Value *b, DataType t) {
  llvm::Type *ty = a->getType();
  llvm::ConstantInt *cb = nullptr;
  if (auto *c = llvm::dyn_cast<llvm::Constant>(b)) {
    cb = llvm::dyn_cast_or_null<llvm::ConstantInt>(ty->isVectorTy() ? c->getSplatValue() : c);
  }
  const bool floor = op == NodeType::FloorDiv || op == NodeType::FloorMod;
  const bool is_div = op == NodeType::Div || op == NodeType::FloorDiv;
  if (!t.is_int()) {
    llvm::Value *d = b;
    if (!cb || cb->isZero()) d = b_.CreateSelect(b_.CreateICmpEQ(b, int_const(ty, 0)), int_const(ty, 1), b);
    return is_div ? b_.CreateUDiv(a, d) : b_.CreateURem(a, d);
  }
  llvm::Value *zero = int_const(ty, 0);
  if (cb && !cb->isZero()) {
    const int64_t d = cb->getSExtValue();
    if (d == -1) return is_div ? b_.CreateSub(zero, a) : zero;
    if (!floor) return is_div ? b_.CreateSDiv(a, b) : b_.CreateSRem(a, b);
    if (d > 0 && (d & (d - 1)) == 0) {
      int shift = 0;
      while ((int64_t{1} << shift) != d) ++shift;
      return is_div ? b_.CreateAShr(a, int_const(ty, shift)) : b_.CreateAnd(a, int_const(ty, d - 1));
    }
    llvm::Value *r = b_.CreateSRem(a, b);
    llvm::Value *adjust = d > 0 ? b_.CreateICmpSLT(r, zero) : b_.CreateICmpSGT(r, zero);
    if (is_div) return b_.CreateSub(b_.CreateSDiv(a, b), b_.CreateZExt(adjust, ty));
    return b_.CreateAdd(r, b_.CreateSelect(adjust, b, zero));
  }
  llvm::Value *minus_one = b_.CreateICmpEQ(b, int_const(ty, -1));
  llvm::Value *bad = b_.CreateOr(minus_one, b_.CreateICmpEQ(b, zero));
  llvm::Value *d = b_.CreateSelect(bad, int_const(ty, 1), b);
  llvm::Value *r = b_.CreateSRem(a, d);  // 0 when b is -1
  if (op == NodeType::Mod) return r;
  llvm::Value *adjust = b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
  if (op == NodeType::FloorMod) return b_.CreateAdd(r, b_.CreateSelect(adjust, b, zero));
  llvm::Value *q = b_.CreateSDiv(a, d);
  if (op == NodeType::FloorDiv) q = b_.CreateSub(q, b_.CreateZExt(adjust, ty));
  return b_.CreateSelect(minus_one, b_.CreateSub(zero, a), q);
}

llvm::Value *CodeGenLLVM::cast(DataType to, const Expr &value) {
  const DataType from = value.type();
  llvm::Value *v = expr(value);
  if (from == to) return v;
  KILN_CHECK(!to.is_handle() && !from.is_handle(), "LLVM back end: cast of ", from.to_string(), " to ", to.to_string());
  llvm::Type *dst = reg_type(to);
  if (to.is_bool()) {
    if (from.is_float()) return b_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
    return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (to.is_float()) {
    if (from.is_float()) {
      if (v->getType() != dst) {
        // float64 -> float16 rounds to float first, as the interpreter does.
        v = to.bits() == 64 ? b_.CreateFPExt(v, dst) : b_.CreateFPTrunc(v, dst);
      }
    } else {
      v = from.is_int() ? b_.CreateSIToFP(v, dst) : b_.CreateUIToFP(v, dst);
    }
    if (to.is_float16() && !from.is_float16()) v = round_to_half(v);
    return v;
  }
  if (from.is_float()) {
    const auto id = to.is_int() ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
    return b_.CreateIntrinsic(id, {dst, v->getType()}, {v});
  }
  return b_.CreateIntCast(v, dst, from.is_int());
}

llvm::Value *CodeGenLLVM::ramp(const ir::RampNode *op) {
  const DataType et = op->base.type();
  llvm::Value *base = expr(op->base);
  llvm::Value *stride = expr(op->stride);
  const unsigned lanes = static_cast<unsigned>(op->lanes);
  std::vector<llvm::Constant *> idx;
  for (unsigned l = 0; l < lanes; ++l) {
    idx.push_back(et.is_float() ? llvm::ConstantFP::get(base->getType(), static_cast<double>(l))
                                : int_const(base->getType(), static_cast<int64_t>(l)));
  }
  llvm::Value *offsets = llvm::ConstantVector::get(idx);
  llvm::Value *vb = b_.CreateVectorSplat(lanes, base);
  if (et.is_float()) {
    return b_.CreateFAdd(vb, b_.CreateFMul(offsets, b_.CreateVectorSplat(lanes, stride)));
  }
  if (auto c = ir::as_const_int(op->stride); c && *c == 1) return b_.CreateAdd(vb, offsets);
  return b_.CreateAdd(vb, b_.CreateMul(offsets, b_.CreateVectorSplat(lanes, stride)));
}

llvm::Value *CodeGenLLVM::libm(const std::string &name, llvm::Value *x) {
  llvm::Type *st = x->getType()->getScalarType();
  if (st->isHalfTy()) {
    // libm has no half functions: compute in float and round back.
    llvm::Type *ft = x->getType()->isVectorTy()
                         ? static_cast<llvm::Type *>(llvm::FixedVectorType::get(
                               b_.getFloatTy(), llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements()))
                         : b_.getFloatTy();
    return b_.CreateFPTrunc(libm(name, b_.CreateFPExt(x, ft)), x->getType());
  }
  const std::string fname = st->isDoubleTy() ? name : name + "f";
  llvm::FunctionCallee fn = mod_.getOrInsertFunction(fname, llvm::FunctionType::get(st, {st}, false));
  if (auto *f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->addFnAttr(llvm::Attribute::WillReturn);
  }
  auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
  if (!vt) return b_.CreateCall(fn, {x});
  llvm::Value *r = llvm::UndefValue::get(vt);
  for (unsigned l = 0; l < vt->getNumElements(); ++l) {
    r = b_.CreateInsertElement(r, b_.CreateCall(fn, {b_.CreateExtractElement(x, l)}), l);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Approximations of float32 math functions: straight-line code on scalars or vectors. The
// polynomials are Cephes's (log, tanh) and fits made for Kiln (exp, erf); constants are rounded
// to float. With fp_contract, the polynomials' multiply-adds may become fmas (one rounding instead
// of two: at most as far from the exact result, and half the instructions); the bounds of
// docs/compiler.md hold either way.

llvm::Value *CodeGenLLVM::horner(llvm::Value *x, const std::vector<double> &coeffs) {
  llvm::Value *y = fconst(x, coeffs[0]);
  for (size_t i = 1; i < coeffs.size(); ++i)
    y = contract(b_.CreateFAdd(contract(b_.CreateFMul(y, x)), fconst(x, coeffs[i])));
  return y;
}

namespace {

bool power_of_two(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

// The power-of-two pieces of a vector of n lanes, largest first: (first lane, lanes).
std::vector<std::pair<unsigned, unsigned>> power_of_two_pieces(unsigned n) {
  std::vector<std::pair<unsigned, unsigned>> pieces;
  unsigned at = 0;
  while (at < n) {
    unsigned w = 1;
    while (w * 2 <= n - at) w *= 2;
    pieces.emplace_back(at, w);
    at += w;
  }
  return pieces;
}

// Shuffle lanes from, from + 1, ..., from + count - 1.
std::vector<int> lane_range(unsigned from, unsigned count) {
  std::vector<int> lanes(count);
  for (unsigned j = 0; j < count; ++j) lanes[j] = static_cast<int>(from + j);
  return lanes;
}

}  // namespace

// exp(x) = 2^n * e^r with n = round(x / ln 2) and |r| <= ln(2) / 2. 2^n is applied by AVX-512's
// vscalefps where the vector has a width it takes (one instruction that rounds near the overflow
// and subnormal limits, gives inf and 0 beyond them and passes NaN through), else as two
// multiplications by powers of two, 2^(n/2) and 2^(n - n/2), built in the exponent bits: the second
// rounds the result once, to inf past the overflow limit and to a subnormal or 0 below the normal
// range, so no limit needs a select. A wider vector (a block of several) is split into vscalefps's
// width.
llvm::Value *CodeGenLLVM::approx_exp(llvm::Value *x) {
  llvm::Type *it = like(i32_, x->getType());
  llvm::Value *scalef = scalef_intrinsic(x->getType());
  auto *xv = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
  const unsigned width = xv ? xv->getNumElements() : 1;
  if (!scalef && width > 16 && power_of_two(width) &&
      scalef_intrinsic(llvm::FixedVectorType::get(xv->getElementType(), 16))) {
    // A vector wider than vscalefps's (a block of several vectors): the exp of each 16-lane part,
    // each with vscalefps, then the parts joined again (lowering keeps the parts in registers).
    std::vector<llvm::Value *> parts;
    for (unsigned i = 0; i < width; i += 16) parts.push_back(approx_exp(b_.CreateShuffleVector(x, lane_range(i, 16))));
    while (parts.size() > 1) {
      const unsigned w = llvm::cast<llvm::FixedVectorType>(parts[0]->getType())->getNumElements();
      std::vector<llvm::Value *> joined;
      for (size_t k = 0; k < parts.size(); k += 2)
        joined.push_back(b_.CreateShuffleVector(parts[k], parts[k + 1], lane_range(0, 2 * w)));
      parts = std::move(joined);
    }
    return parts[0];
  }
  // The clamp only keeps n in range (|n| <= 150, so each half of it is a normal power of two): past
  // 89 the result is inf, below -104 it is 0, either way, and NaN passes the selects (an unordered
  // compare is false) and every step after them (NaN times any power of two is NaN).
  const double chi = 89.0, clo = -104.0;
  llvm::Value *xc = b_.CreateSelect(b_.CreateFCmpOGT(x, fconst(x, chi)), fconst(x, chi), x);
  xc = b_.CreateSelect(b_.CreateFCmpOLT(xc, fconst(x, clo)), fconst(x, clo), xc);
  // n = x * log2(e) rounded to the nearest integer by adding and subtracting 1.5 * 2^23 (a float
  // that large has no fraction bits, so the add rounds; the integer is then in the low bits of
  // the sum), without a round instruction (SSE2 has none) or a float-int-float round trip.
  const double magic = 12582912.0;
  llvm::Value *v =
      contract(b_.CreateFAdd(contract(b_.CreateFMul(xc, fconst(x, 1.44269504088896341))), fconst(x, magic)));
  llvm::Value *n = b_.CreateFSub(v, fconst(x, magic));
  llvm::Value *r = contract(b_.CreateFSub(xc, contract(b_.CreateFMul(n, fconst(x, 0.693359375)))));
  r = contract(b_.CreateFSub(r, contract(b_.CreateFMul(n, fconst(x, -2.12194440e-4)))));
  // e^r on |r| <= ln(2) / 2: a degree-6 polynomial with 1 + r fixed, the other coefficients a
  // minimax fit of the relative error rounded to float one at a time (3.2e-9, 0.05 ULP), by Horner:
  // six fmas. Over every float input the result is within 1 ULP of the correctly rounded exp.
  llvm::Value *y =
      horner(r, {1.381893875e-3, 8.368703537e-3, 4.166828841e-2, 1.666652113e-1, 4.999999404e-1, 1.0, 1.0});
  if (scalef) {
    auto *vt = llvm::cast<llvm::FixedVectorType>(x->getType());
    std::vector<llvm::Value *> args = {y, n, llvm::UndefValue::get(vt),
                                       llvm::ConstantInt::get(b_.getIntNTy(std::max(8u, vt->getNumElements())), -1)};
    if (vt->getNumElements() == 16) args.push_back(b_.getInt32(4));  // the current rounding mode
    return b_.CreateCall(llvm::cast<llvm::Function>(scalef), args);
  }
  // v's bits are magic's plus n (|n| <= 150 keeps v in magic's binade, where the step is 1), and
  // magic's bits end in 22 zeros: shifted to the exponent field they vanish. So n << 23 is v's
  // bits << 23 and (n >> 1) << 23 is (v's bits >> 1) << 23, with no subtraction of magic.
  llvm::Value *vb = b_.CreateBitCast(v, it);
  llvm::Value *e1 = b_.CreateShl(b_.CreateLShr(vb, int_const(it, 1)), int_const(it, 23));  // floor(n / 2)
  llvm::Value *e2 = b_.CreateSub(b_.CreateShl(vb, int_const(it, 23)), e1);                 // n - floor(n / 2)
  auto pow2 = [&](llvm::Value *e) { return b_.CreateBitCast(b_.CreateAdd(e, int_const(it, 127 << 23)), x->getType()); };
  // y * 2^(n/2) is exact (a normal float); the second product is the one rounding.
  return b_.CreateFMul(b_.CreateFMul(y, pow2(e1)), pow2(e2));
}

llvm::Value *CodeGenLLVM::masked_load(llvm::FixedVectorType *vt, llvm::Value *ptr, llvm::Align align, llvm::Value *mask,
                                      const BufferInfo &buf) {
  const unsigned n = vt->getNumElements();
  if (power_of_two(n)) {
    llvm::Value *ld = b_.CreateMaskedLoad(vt, ptr, align, mask, llvm::Constant::getNullValue(vt));
    annotate(ld, buf);
    return ld;
  }
  llvm::Type *et = vt->getElementType();
  const uint64_t esize = mod_.getDataLayout().getTypeAllocSize(et);
  llvm::Value *elems = b_.CreateBitCast(ptr, et->getPointerTo());
  llvm::Value *result = llvm::Constant::getNullValue(vt);
  for (const auto &[at, w] : power_of_two_pieces(n)) {
    auto *pt = llvm::FixedVectorType::get(et, w);
    llvm::Value *p = b_.CreateBitCast(b_.CreateConstInBoundsGEP1_64(et, elems, at), pt->getPointerTo());
    llvm::Value *piece = b_.CreateMaskedLoad(pt, p, llvm::commonAlignment(align, at * esize),
                                             b_.CreateShuffleVector(mask, lane_range(at, w)),
                                             llvm::Constant::getNullValue(pt));
    annotate(piece, buf);
    // The piece widened to n lanes, then its lanes taken into the result.
    std::vector<int> widen(n, -1), take(n);
    for (unsigned j = 0; j < w; ++j) widen[j] = static_cast<int>(j);
    for (unsigned j = 0; j < n; ++j) take[j] = static_cast<int>(j >= at && j < at + w ? n + j - at : j);
    result = b_.CreateShuffleVector(result, b_.CreateShuffleVector(piece, widen), take);
  }
  return result;
}

llvm::Instruction *CodeGenLLVM::masked_store(llvm::Value *value, llvm::Value *ptr, llvm::Align align, llvm::Value *mask,
                                             const BufferInfo &buf) {
  auto *vt = llvm::cast<llvm::FixedVectorType>(value->getType());
  const unsigned n = vt->getNumElements();
  if (power_of_two(n)) {
    llvm::Instruction *st = b_.CreateMaskedStore(value, ptr, align, mask);
    annotate(st, buf);
    return st;
  }
  llvm::Type *et = vt->getElementType();
  const uint64_t esize = mod_.getDataLayout().getTypeAllocSize(et);
  llvm::Value *elems = b_.CreateBitCast(ptr, et->getPointerTo());
  llvm::Instruction *last = nullptr;
  for (const auto &[at, w] : power_of_two_pieces(n)) {
    auto *pt = llvm::FixedVectorType::get(et, w);
    llvm::Value *p = b_.CreateBitCast(b_.CreateConstInBoundsGEP1_64(et, elems, at), pt->getPointerTo());
    last = b_.CreateMaskedStore(b_.CreateShuffleVector(value, lane_range(at, w)), p,
                                llvm::commonAlignment(align, at * esize), b_.CreateShuffleVector(mask, lane_range(at, w)));
    annotate(last, buf);
  }
  return last;
}

// AVX-512's scalef (x * 2^floor(n)) for float vectors of `t`'s width, or null where the target or
// the width has none (a scalar, a vector of another element type or width).
llvm::Value *CodeGenLLVM::scalef_intrinsic(llvm::Type *t) {
  auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(t);
  if (!scalef_ || !vt || !vt->getElementType()->isFloatTy()) return nullptr;
  llvm::Intrinsic::ID id;
  switch (vt->getNumElements()) {
    case 16:
      id = llvm::Intrinsic::x86_avx512_mask_scalef_ps_512;
      break;
    case 8:
      id = llvm::Intrinsic::x86_avx512_mask_scalef_ps_256;
      break;
    case 4:
      id = llvm::Intrinsic::x86_avx512_mask_scalef_ps_128;
      break;
    default:
      return nullptr;
  }
  if (vt->getNumElements() < 16 && !scalef_vl_) return nullptr;
  return llvm::Intrinsic::getDeclaration(&mod_, id);
}

// log(x) = e * ln 2 + log(m) with m in [sqrt(1/2), sqrt(2)); subnormal x is scaled by 2^23 first.
llvm::Value *CodeGenLLVM::approx_log(llvm::Value *x) {
  llvm::Type *it = like(i32_, x->getType());
  auto ic = [&](int64_t v) { return int_const(it, v); };
  llvm::Value *sub = b_.CreateFCmpOLT(x, fconst(x, 1.17549435e-38));
  llvm::Value *xs = b_.CreateSelect(sub, b_.CreateFMul(x, fconst(x, 8388608.0)), x);
  llvm::Value *bits = b_.CreateBitCast(xs, it);
  llvm::Value *e = b_.CreateSub(b_.CreateAnd(b_.CreateLShr(bits, ic(23)), ic(0xff)), ic(126));
  e = b_.CreateSub(e, b_.CreateSelect(sub, ic(23), ic(0)));
  llvm::Value *m = b_.CreateBitCast(b_.CreateOr(b_.CreateAnd(bits, ic(0x807fffff)), ic(0x3f000000)), x->getType());
  llvm::Value *small = b_.CreateFCmpOLT(m, fconst(x, 0.707106781186547524));
  llvm::Value *ef = b_.CreateSIToFP(b_.CreateSub(e, b_.CreateZExt(small, it)), x->getType());
  m = b_.CreateSelect(small, b_.CreateFSub(b_.CreateFAdd(m, m), fconst(x, 1.0)), b_.CreateFSub(m, fconst(x, 1.0)));
  llvm::Value *z = b_.CreateFMul(m, m);
  llvm::Value *y = horner(m, {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                              -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  y = b_.CreateFMul(b_.CreateFMul(y, m), z);
  y = b_.CreateFAdd(y, b_.CreateFMul(fconst(x, -2.12194440e-4), ef));
  y = b_.CreateFAdd(y, b_.CreateFMul(fconst(x, -0.5), z));
  llvm::Value *r = b_.CreateFAdd(m, y);
  r = b_.CreateFAdd(r, b_.CreateFMul(fconst(x, 0.693359375), ef));
  r = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(x, INFINITY)), x, r);
  r = b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(x, 0.0)), fconst(x, -INFINITY), r);
  return b_.CreateSelect(b_.CreateFCmpULT(x, fconst(x, 0.0)), fconst(x, NAN), r);
}

// tanh(x): an odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) with x's sign above.
llvm::Value *CodeGenLLVM::approx_tanh(llvm::Value *x) {
  llvm::Value *a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value *z = b_.CreateFMul(x, x);
  llvm::Value *p =
      horner(z, {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1, -3.33332819422E-1});
  llvm::Value *small = b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(p, z), x), x);
  llvm::Value *e = approx_exp(b_.CreateFAdd(a, a));
  llvm::Value *big = b_.CreateFSub(fconst(x, 1.0), b_.CreateFDiv(fconst(x, 2.0), b_.CreateFAdd(e, fconst(x, 1.0))));
  big = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, big, x);
  return b_.CreateSelect(b_.CreateFCmpOLT(a, fconst(x, 0.625)), small, big);
}

// erf(x): x * P(x^2) below |x| = 1; above, 1 - exp(-x^2) * Q(1/|x|) with x's sign, Q fitted to
// erfc(x) * exp(x^2) on [1, 4] (beyond 4, erf rounds to +-1).
llvm::Value *CodeGenLLVM::approx_erf(llvm::Value *x) {
  llvm::Value *a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value *z = b_.CreateFMul(x, x);
  llvm::Value *small = b_.CreateFMul(
      x, horner(z, {7.875875062685488e-05, -0.000801686428716587, 0.005189087423433974, -0.026854212010626412,
                    0.11283594715160218, -0.37612626666720334, 1.1283791658483509}));
  llvm::Value *ac = b_.CreateSelect(b_.CreateFCmpOGT(a, fconst(x, 1.0)), a, fconst(x, 1.0));
  llvm::Value *t = b_.CreateFDiv(fconst(x, 1.0), ac);
  t = b_.CreateSelect(b_.CreateFCmpOLT(t, fconst(x, 0.25)), fconst(x, 0.25), t);
  llvm::Value *q = horner(
      t, {0.02503254318653564, -0.14789844462513763, 0.3608618604048329, -0.42983374861601875, 0.14547734763553957,
          0.2825897937336853, -0.3948595879487394, 0.024847521258800558, 0.5612146379895168, 0.00015165568581170205});
  llvm::Value *erfc = b_.CreateFMul(approx_exp(b_.CreateFNeg(b_.CreateFMul(a, a))), q);
  llvm::Value *big = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, b_.CreateFSub(fconst(x, 1.0), erfc), x);
  llvm::Value *r = b_.CreateSelect(b_.CreateFCmpOLT(a, fconst(x, 1.0)), small, big);
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, r);
}

llvm::Value *CodeGenLLVM::math(const std::string &name, const std::vector<llvm::Value *> &args) {
  llvm::Value *x = args[0];
  llvm::Type *t = x->getType();
  auto one = [&] { return llvm::ConstantFP::get(t, 1.0); };
  if (opt_.approx_math && t->getScalarType()->isFloatTy() && args.size() == 1) {
    if (name == "exp") return approx_exp(x);
    if (name == "log") return approx_log(x);
    if (name == "tanh") return approx_tanh(x);
    if (name == "erf") return approx_erf(x);
    if (name == "sigmoid") {
      // 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below, so that e never overflows.
      llvm::Value *e = approx_exp(b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
      llvm::Value *num = b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(x, 0.0)), e, one());
      return b_.CreateFDiv(num, b_.CreateFAdd(one(), e));
    }
  }
  static const std::map<std::string, llvm::Intrinsic::ID> unary = {
      {"exp", llvm::Intrinsic::exp},     {"log", llvm::Intrinsic::log},
      {"sqrt", llvm::Intrinsic::sqrt},   {"fabs", llvm::Intrinsic::fabs},
      {"floor", llvm::Intrinsic::floor}, {"ceil", llvm::Intrinsic::ceil},
      {"round", llvm::Intrinsic::round}, {"nearbyint", llvm::Intrinsic::nearbyint},
      {"sin", llvm::Intrinsic::sin},     {"cos", llvm::Intrinsic::cos}};
  if (auto it = unary.find(name); it != unary.end() && args.size() == 1) return b_.CreateUnaryIntrinsic(it->second, x);
  if (name == "pow" && args.size() == 2) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, args[1]);
  if (name == "fma" && args.size() == 3) return b_.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {x, args[1], args[2]});
  if (name == "rsqrt" && args.size() == 1)
    return b_.CreateFDiv(one(), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
  if (name == "sigmoid" && args.size() == 1) {
    llvm::Value *e = b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, b_.CreateFNeg(x));
    return b_.CreateFDiv(one(), b_.CreateFAdd(one(), e));
  }
  static const std::set<std::string> libm_unary = {"tanh", "erf",  "tan",   "asin",  "acos", "atan",
                                                   "sinh", "cosh", "asinh", "acosh", "atanh"};
  if (libm_unary.count(name) && args.size() == 1) return libm(name, x);
  throw InternalError(detail::concat("LLVM back end: math intrinsic ", name, " with ", args.size(), " arguments"));
}

llvm::Value *CodeGenLLVM::call(const ir::CallNode *op) {
  const std::string &name = op->name;
  if (name == ir::intrinsic::kIfThenElse) return if_then_else(op);
  if (name == ir::intrinsic::kLikely) {
    KILN_CHECK(op->args.size() == 1, "LLVM back end: likely takes 1 argument");
    return expr(op->args[0]);
  }
  if (name == ir::intrinsic::kPrefetch) {
    // A hint, so the read's predicate does not matter: a prefetch never faults.
    const auto *ld = op->args.size() == 1 ? op->args[0].as<ir::LoadNode>() : nullptr;
    KILN_CHECK(ld && ld->type.is_scalar(), "LLVM back end: prefetch takes one scalar load");
    llvm::Type *mt = mem_type(ld->type);
    llvm::Value *ptr = address(mt, element_ptr(lookup_buf(ld->buffer_var), mt), ld->index);
    // Read (0), kept in every cache level (locality 3), data cache (1).
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr->getType()},
                       {ptr, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
    return llvm::ConstantInt::get(reg_type(op->type), 0);
  }
  if (name == lower::intrinsic::kArgField) return arg_field(op);
  if (name == lower::intrinsic::kIsNull) {
    KILN_CHECK(op->args.size() == 1, "LLVM back end: isnull takes 1 argument");
    return b_.CreateIsNull(expr(op->args[0]));
  }
  if (name == lower::intrinsic::kIsAligned) {
    KILN_CHECK(op->args.size() == 2, "LLVM back end: is_aligned takes 2 arguments");
    auto bytes = ir::as_const_int(op->args[1]);
    KILN_CHECK(bytes && *bytes > 0, "LLVM back end: is_aligned needs a positive constant");
    llvm::Value *address = b_.CreatePtrToInt(expr(op->args[0]), i64_);
    return b_.CreateICmpEQ(b_.CreateURem(address, b_.getInt64(static_cast<uint64_t>(*bytes))), b_.getInt64(0));
  }
  if (ir::is_math_intrinsic(name)) {
    KILN_CHECK(op->type.is_float(), "LLVM back end: ", name, " of ", op->type.to_string());
    std::vector<llvm::Value *> args;
    for (const auto &a : op->args) {
      KILN_CHECK(a.type() == op->type, "LLVM back end: ", name, " argument of type ", a.type().to_string());
      args.push_back(expr(a));
    }
    return math(name, args);
  }
  throw InternalError(detail::concat("LLVM back end: unsupported call ", name, " in function ", f_->name));
}

// args[i].field of the KilnArg array `args` (pointers as i8*), or the int64 args[i].shape[d] /
// args[i].strides[d].
llvm::Value *CodeGenLLVM::arg_field(const ir::CallNode *op) {
  KILN_CHECK(op->args.size() == 3 || op->args.size() == 4, "LLVM back end: arg_field takes 3 or 4 arguments");
  auto i = ir::as_const_int(op->args[1]);
  auto field = ir::as_const_int(op->args[2]);
  KILN_CHECK(i && field && *field >= 0 && *field < static_cast<int64_t>(arg_type_->getNumElements()),
             "LLVM back end: arg_field needs a constant index and field");
  const unsigned k = static_cast<unsigned>(*field);
  llvm::Value *args = b_.CreateBitCast(expr(op->args[0]), arg_type_->getPointerTo());
  llvm::Value *arg = b_.CreateInBoundsGEP(arg_type_, args, b_.getInt64(static_cast<uint64_t>(*i)));
  llvm::Type *type = arg_type_->getElementType(k);
  llvm::Value *v = b_.CreateLoad(type, b_.CreateStructGEP(arg_type_, arg, k));
  if (op->args.size() == 4) {
    KILN_CHECK(type == i64_->getPointerTo(),
               "LLVM back end: arg_field reads elements of the shape or the strides only");
    return b_.CreateLoad(i64_, b_.CreateInBoundsGEP(i64_, v, index(op->args[3])));
  }
  return type->isPointerTy() ? b_.CreateBitCast(v, i8p_) : v;
}

llvm::Value *CodeGenLLVM::if_then_else(const ir::CallNode *op) {
  KILN_CHECK(op->args.size() == 3, "LLVM back end: if_then_else takes 3 arguments");
  const Expr &cond = op->args[0];
  if (cond.type().is_scalar()) {
    llvm::Value *c = expr(cond);
    if (auto *k = llvm::dyn_cast<llvm::ConstantInt>(c)) return expr(op->args[k->isOne() ? 1 : 2]);
    llvm::BasicBlock *then_bb = block("ite.then"), *else_bb = block("ite.else"), *merge = block("ite.end");
    b_.CreateCondBr(c, then_bb, else_bb);
    b_.SetInsertPoint(then_bb);
    llvm::Value *a = expr(op->args[1]);
    llvm::BasicBlock *then_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(else_bb);
    llvm::Value *b = expr(op->args[2]);
    llvm::BasicBlock *else_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    llvm::PHINode *phi = b_.CreatePHI(a->getType(), 2);
    phi->addIncoming(a, then_end);
    phi->addIncoming(b, else_end);
    return phi;
  }
  // Per lane: each side is evaluated with its memory accesses masked to the lanes that take it.
  llvm::Value *c = expr(cond);
  llvm::Value *outer = mask_;
  mask_ = outer ? b_.CreateAnd(outer, c) : c;
  llvm::Value *a = expr(op->args[1]);
  llvm::Value *not_c = b_.CreateNot(c);
  mask_ = outer ? b_.CreateAnd(outer, not_c) : not_c;
  llvm::Value *b = expr(op->args[2]);
  mask_ = outer;
  return b_.CreateSelect(c, a, b);
}

llvm::Value *CodeGenLLVM::load(const ir::LoadNode *op) {
  const BufferInfo &buf = lookup_buf(op->buffer_var);
  const DataType t = op->type;
  const DataType et = t.element_of();
  const unsigned lanes = static_cast<unsigned>(t.lanes());
  llvm::Type *mt = mem_type(et);
  llvm::Value *base = element_ptr(buf, mt);
  llvm::Value *mask = op->predicate.defined() ? expr(op->predicate) : nullptr;
  if (lanes > 1) {
    if (mask && !mask->getType()->isVectorTy()) mask = b_.CreateVectorSplat(lanes, mask);
    auto *mv = mask_ ? llvm::dyn_cast<llvm::FixedVectorType>(mask_->getType()) : nullptr;
    if (mv && mv->getNumElements() == lanes) mask = mask ? b_.CreateAnd(mask, mask_) : mask_;
  }
  if (lanes == 1) {
    llvm::Value *ptr = address(mt, base, op->index);
    const llvm::Align align = access_align(buf, op->index, mt);
    if (!mask) {
      llvm::LoadInst *ld = b_.CreateAlignedLoad(mt, ptr, align);
      annotate(ld, buf);
      return from_memory(ld, et);
    }
    llvm::BasicBlock *yes = block("load.pred"), *merge = block("load.end");
    llvm::BasicBlock *from = b_.GetInsertBlock();
    b_.CreateCondBr(mask, yes, merge);
    b_.SetInsertPoint(yes);
    llvm::LoadInst *ld = b_.CreateAlignedLoad(mt, ptr, align);
    annotate(ld, buf);
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    llvm::PHINode *phi = b_.CreatePHI(mt, 2);
    phi->addIncoming(ld, yes);
    phi->addIncoming(llvm::Constant::getNullValue(mt), from);
    return from_memory(phi, et);
  }
  if (auto tr = transposed_loads_.find(op); !mask && tr != transposed_loads_.end())
    return from_memory(transposed_load(buf, mt, base, tr->second.first, tr->second.second), et);
  auto *vt = llvm::FixedVectorType::get(mt, lanes);
  llvm::Value *result = nullptr;
  const auto *r = op->index.as<ir::RampNode>();
  auto stride = r ? ir::as_const_int(r->stride) : std::nullopt;
  if (r && stride && *stride == 1 && static_cast<unsigned>(r->lanes) == lanes) {
    llvm::Value *ptr = address(mt, base, r->base);
    ptr = b_.CreateBitCast(ptr, vt->getPointerTo());
    const llvm::Align align = access_align(buf, r->base, mt);
    if (mask) {
      result = masked_load(vt, ptr, align, mask, buf);
    } else {
      result = b_.CreateAlignedLoad(vt, ptr, align);
    }
  } else {
    const Expr *scalar_index = nullptr;
    if (const auto *bc = op->index.as<ir::BroadcastNode>()) scalar_index = &bc->value;
    if (r && stride && *stride == 0) scalar_index = &r->base;
    if (scalar_index && !mask) {
      llvm::Value *ptr = address(mt, base, *scalar_index);
      llvm::LoadInst *ld = b_.CreateAlignedLoad(mt, ptr, access_align(buf, *scalar_index, mt));
      annotate(ld, buf);
      return from_memory(b_.CreateVectorSplat(lanes, ld), et);
    }
    if (scalar_index) {
      // One scalar load when any lane is active, repeated over the active lanes.
      llvm::Value *any = b_.CreateOrReduce(mask);
      llvm::BasicBlock *yes = block("load.pred"), *merge = block("load.end");
      llvm::BasicBlock *from = b_.GetInsertBlock();
      b_.CreateCondBr(any, yes, merge);
      b_.SetInsertPoint(yes);
      llvm::Value *ptr = address(mt, base, *scalar_index);
      llvm::LoadInst *ld = b_.CreateAlignedLoad(mt, ptr, access_align(buf, *scalar_index, mt));
      annotate(ld, buf);
      llvm::BasicBlock *loaded = b_.GetInsertBlock();
      b_.CreateBr(merge);
      b_.SetInsertPoint(merge);
      llvm::PHINode *phi = b_.CreatePHI(mt, 2);
      phi->addIncoming(ld, loaded);
      phi->addIncoming(llvm::Constant::getNullValue(mt), from);
      llvm::Value *splat = b_.CreateVectorSplat(lanes, phi);
      return from_memory(b_.CreateSelect(mask, splat, llvm::Constant::getNullValue(vt)), et);
    }
    if (r && stride && *stride >= 2 && *stride <= 4 && static_cast<unsigned>(r->lanes) == lanes) {
      // A short constant stride: the span as one masked contiguous load (lanes between the
      // elements read only when no lane is masked off), then the elements picked out of it.
      const unsigned s = static_cast<unsigned>(*stride), wide = lanes * s, span = (lanes - 1) * s + 1;
      auto *wt = llvm::FixedVectorType::get(mt, wide);
      if (auto whole = whole_strides_.find(op); !mask && whole != whole_strides_.end()) {
        // Other loads of the store run read the rest of the strides: the whole span unmasked, from
        // `from` elements before the ramp's base.
        const unsigned from = whole->second.from;
        const Expr &start = whole->second.start;
        llvm::Value *ptr = address(mt, base, start);
        ptr = b_.CreateBitCast(ptr, wt->getPointerTo());
        llvm::LoadInst *all = b_.CreateAlignedLoad(wt, ptr, access_align(buf, start, mt));
        annotate(all, buf);
        const bool shifted = from >= s;  // a span shifted by one stride (from == s)
        std::vector<int> pick;
        for (unsigned j = 0; j < lanes; ++j) pick.push_back(static_cast<int>((shifted ? 0 : from) + j * s));
        llvm::Value *picked = b_.CreateShuffleVector(all, pick);
        if (shifted) {
          // The span's elements 0, s, 2s, ... (the first load's value) moved down a lane, the
          // element just past the span in the last: one two-operand shuffle of whole vectors.
          const Expr past = start + ir::make_const(start.type(), static_cast<int64_t>(wide));
          llvm::LoadInst *last = b_.CreateAlignedLoad(mt, address(mt, base, past), access_align(buf, past, mt));
          annotate(last, buf);
          std::vector<int> down;
          for (unsigned j = 1; j <= lanes; ++j) down.push_back(static_cast<int>(j));
          picked = b_.CreateShuffleVector(picked, b_.CreateVectorSplat(lanes, last), down);
        }
        return from_memory(picked, et);
      }
      llvm::Value *wide_mask;
      if (mask) {
        std::vector<int> spread;
        std::vector<llvm::Constant *> picked;
        for (unsigned j = 0; j < wide; ++j) {
          spread.push_back(static_cast<int>(j / s));
          picked.push_back(llvm::ConstantInt::getBool(ctx_, j % s == 0));
        }
        wide_mask = b_.CreateAnd(b_.CreateShuffleVector(mask, spread), llvm::ConstantVector::get(picked));
      } else {
        std::vector<llvm::Constant *> in_span;
        for (unsigned j = 0; j < wide; ++j) in_span.push_back(llvm::ConstantInt::getBool(ctx_, j < span));
        wide_mask = llvm::ConstantVector::get(in_span);
      }
      llvm::Value *ptr = address(mt, base, r->base);
      ptr = b_.CreateBitCast(ptr, wt->getPointerTo());
      llvm::Value *all = masked_load(wt, ptr, access_align(buf, r->base, mt), wide_mask, buf);
      std::vector<int> pick;
      for (unsigned j = 0; j < lanes; ++j) pick.push_back(static_cast<int>(j * s));
      return from_memory(b_.CreateShuffleVector(all, pick), et);
    }
    llvm::Value *ptrs = address(mt, base, op->index);
    const llvm::Align align(mod_.getDataLayout().getABITypeAlign(mt));
    result = b_.CreateMaskedGather(vt, ptrs, align, mask, llvm::Constant::getNullValue(vt));
  }
  annotate(result, buf);
  return from_memory(result, et);
}

// ---------------------------------------------------------------------------------------------
// Statements

void CodeGenLLVM::emit_return(llvm::Value *code, llvm::Constant *message) {
  if (message) {
    llvm::StoreInst *st = b_.CreateAlignedStore(message, last_error_, llvm::Align(8));
    st->setAtomic(llvm::AtomicOrdering::Monotonic);
  }
  for (auto it = state_->heap.rbegin(); it != state_->heap.rend(); ++it) b_.CreateCall(free_, {*it});
  b_.CreateRet(code);
}

void CodeGenLLVM::check(llvm::Value *ok, const std::string &message, int32_t code) {
  if (auto *k = llvm::dyn_cast<llvm::ConstantInt>(ok); k && k->isOne()) return;
  llvm::BasicBlock *fail = block("fail"), *next = block("ok");
  llvm::MDBuilder md(ctx_);
  b_.CreateCondBr(ok, next, fail, md.createBranchWeights(1 << 20, 1));
  b_.SetInsertPoint(fail);
  emit_return(b_.getInt32(static_cast<uint32_t>(code)), string_ptr(message));
  b_.SetInsertPoint(next);
}

void CodeGenLLVM::check_status(llvm::Value *status) {
  llvm::BasicBlock *fail = block("fail"), *next = block("ok");
  llvm::MDBuilder md(ctx_);
  b_.CreateCondBr(b_.CreateICmpEQ(status, b_.getInt32(0)), next, fail, md.createBranchWeights(1 << 20, 1));
  b_.SetInsertPoint(fail);
  emit_return(status, nullptr);
  b_.SetInsertPoint(next);
}

void CodeGenLLVM::stmt(const Stmt &s) {
  switch (s.node_type()) {
    case NodeType::LetStmt:
      let_stmt(s.as<ir::LetStmtNode>());
      return;
    case NodeType::AttrStmt: {
      const auto *op = s.as<ir::AttrStmtNode>();
      if (op->key == lower::kKernelBody) {
        kernel_call(op);
      } else {
        stmt(op->body);
      }
      return;
    }
    case NodeType::AssertStmt: {
      const auto *op = s.as<ir::AssertStmtNode>();
      check(all_lanes(expr(op->condition)), op->message, assert_status_);
      stmt(op->body);
      return;
    }
    case NodeType::Store:
      store(s.as<ir::StoreNode>());
      return;
    case NodeType::Allocate:
      allocate(s.as<ir::AllocateNode>());
      return;
    case NodeType::For:
      loop(s.as<ir::ForNode>());
      return;
    case NodeType::IfThenElse:
      if_stmt(s.as<ir::IfThenElseNode>());
      return;
    case NodeType::Block: {
      // Runs of consecutive stores together, for the loads that read whole strides across them.
      const std::vector<Stmt> &stmts = s.as<ir::BlockNode>()->stmts;
      for (size_t i = 0; i < stmts.size();) {
        std::vector<const ir::StoreNode *> run;
        for (size_t j = i; j < stmts.size() && stmts[j].as<ir::StoreNode>(); ++j) {
          run.push_back(stmts[j].as<ir::StoreNode>());
        }
        if (run.size() < 2) {
          stmt(stmts[i++]);
          continue;
        }
        find_whole_strides(run);
        std::vector<std::pair<int, unsigned>> member;
        std::vector<TransposedStores> groups = find_transposed_stores(run, &member);
        in_store_run_ = true;
        for (size_t r = 0; r < run.size(); ++r) {
          if (member[r].first < 0) {
            store(run[r]);
            continue;
          }
          // A member of a transposed group: its value now, its part's stores after the part's last.
          TransposedStores &g = groups[static_cast<size_t>(member[r].first)];
          g.values[member[r].second] = to_memory(expr(run[r]->value), run[r]->value.type().element_of());
          const size_t q = static_cast<size_t>(g.part_of[member[r].second]);
          if (--g.missing[q] == 0) emit_transposed_stores(run[r], g, g.parts[q]);
        }
        in_store_run_ = false;
        clear_whole_strides();
        i += run.size();
      }
      return;
    }
    case NodeType::Evaluate: {
      const auto *op = s.as<ir::EvaluateNode>();
      if (!ir::is_const(op->value)) expr(op->value);
      return;
    }
    case NodeType::ProducerStore:
    case NodeType::ProducerRealize:
      throw InternalError(detail::concat("LLVM back end: ", ir::node_type_name(s.node_type()),
                                         " cannot appear in lowered IR (lower the function first)"));
#define KILN_EXPR_CASE(n) case NodeType::n:
      KILN_EXPR_NODES(KILN_EXPR_CASE)
#undef KILN_EXPR_CASE
      break;  // expression kinds, which no statement has
  }
  throw InternalError(detail::concat("LLVM back end: unexpected statement ", ir::node_type_name(s.node_type())));
}

void CodeGenLLVM::let_stmt(const ir::LetStmtNode *op) {
  const DataType t = op->var.type();
  if (t.is_handle()) {
    // A second name for a buffer (or a pointer computed some other way).
    BufferInfo info;
    const auto *src = op->value.as<VariableNode>();
    const BufferInfo *from = src ? find_buf(src) : nullptr;
    if (from) {
      info = *from;
    } else {
      const DataType pointee = op->var->pointee;
      info.elem = pointee.is_handle() ? ir::UInt(8) : pointee.element_of();
      info.align = 1;
    }
    llvm::Value *raw = from ? from->ptr : expr(op->value);
    info.ptr = b_.CreateBitCast(raw, mem_type(info.elem)->getPointerTo());
    push_buf(op->var.get(), info);
    stmt(op->body);
    pop_buf(op->var.get());
    return;
  }
  llvm::Value *v = expr(op->value);
  v->setName(op->var.name());
  push_var(op->var, v);
  mods_[op->var.get()].push_back(t.is_integer_like() ? modset(op->value) : ModSet{});
  stmt(op->body);
  mods_[op->var.get()].pop_back();
  pop_var(op->var);
}

// Short-stride vector loads that read whole strides together: loads of one buffer with the same
// stride s (2 to 4) and lanes, unpredicated, evaluated unconditionally in a run of consecutive
// stores (every store of the run is executed once the first is; the loads reached from the stored
// values only through arithmetic, casts and broadcasts), at ramp bases b + o and b + o + s - 1,
// read between them every element of [b + o, b + o + lanes * s). Any such load at b + o + k
// (0 <= k < s) may then read that span as one unmasked contiguous load: no element outside what
// the run's loads read anyway. (The pair x[2j], x[2j + 1] of a stride-2 window is the common
// case, whether its taps are added in one value or accumulated by one store each.) A load at
// b + o + s, whose own stride is not read whole, takes the span's elements s, 2s, ... and the one
// element past it (k = s).
void CodeGenLLVM::find_whole_strides(const std::vector<const ir::StoreNode *> &stores) {
  clear_whole_strides();
  struct Strided {
    const ir::LoadNode *load;
    Expr base, rest;  // the ramp base, and it less its constant offset
    int64_t offset, stride;
  };
  std::vector<Strided> found;
  std::function<void(const Expr &)> walk;
  auto both = [&](const auto *op) {
    walk(op->a);
    walk(op->b);
  };
  walk = [&](const Expr &e) {
    switch (e.node_type()) {
      case NodeType::Add:
        return both(e.as<ir::AddNode>());
      case NodeType::Sub:
        return both(e.as<ir::SubNode>());
      case NodeType::Mul:
        return both(e.as<ir::MulNode>());
      case NodeType::Div:
        return both(e.as<ir::DivNode>());
      case NodeType::Min:
        return both(e.as<ir::MinNode>());
      case NodeType::Max:
        return both(e.as<ir::MaxNode>());
      case NodeType::Cast:
        walk(e.as<ir::CastNode>()->value);
        return;
      case NodeType::Broadcast:
        walk(e.as<ir::BroadcastNode>()->value);
        return;
      case NodeType::Load: {
        const auto *ld = e.as<ir::LoadNode>();
        const auto *r = ld->index.as<ir::RampNode>();
        auto stride = r ? ir::as_const_int(r->stride) : std::nullopt;
        if (ld->predicate.defined() || !stride || *stride < 2 || *stride > kMaxTransposeStride ||
            r->lanes != ld->type.lanes())
          return;
        Expr rest = r->base;
        int64_t offset = 0;
        if (auto c = ir::as_const_int(r->base)) {
          rest = ir::make_const(r->base.type(), static_cast<int64_t>(0));
          offset = *c;
        } else if (const auto *add = r->base.as<ir::AddNode>()) {
          if (auto c = ir::as_const_int(add->b)) {
            rest = add->a;
            offset = *c;
          }
        } else if (const auto *sub = r->base.as<ir::SubNode>()) {
          if (auto c = ir::as_const_int(sub->b)) {
            rest = sub->a;
            offset = -*c;
          }
        }
        found.push_back({ld, r->base, rest, offset, *stride});
        return;
      }
      default:
        return;
    }
  };
  for (const ir::StoreNode *st : stores) {
    if (st->value.type().lanes() > 1) walk(st->value);
  }
  auto alike = [](const Strided &g, const Strided &of) {
    return g.stride == of.stride && g.load->buffer_var.same_as(of.load->buffer_var) && g.load->type == of.load->type &&
           ir::structural_equal(g.rest, of.rest);
  };
  auto at = [&](const Strided &of, int64_t offset) -> const Strided * {
    for (const Strided &g : found) {
      if (g.offset == offset && alike(g, of)) return &g;
    }
    return nullptr;
  };
  for (const Strided &l : found) {
    if (l.stride > 4) continue;
    // First the groups of whole strides tiled from the lowest offset of the loads like l, so that
    // loads share spans: the taps x[2j], x[2j + 1], x[2j + 2] of a window of three at stride 2
    // read one span, the third its elements 2, 4, ... and the one element past it, rather than a
    // second span one element later (unaligned where the first is aligned, its loads straddling
    // the stores that wrote a row buffer). Else any group of whole strides that holds l.
    int64_t lowest = l.offset;
    for (const Strided &m : found) {
      if (alike(m, l)) lowest = std::min(lowest, m.offset);
    }
    const int64_t group = lowest + (l.offset - lowest) / l.stride * l.stride;
    const Strided *own = at(l, group);
    if (own && at(l, group + l.stride - 1)) {
      whole_strides_[l.load] = {own->base, static_cast<unsigned>(l.offset - group)};
      continue;
    }
    if (group == l.offset && group - l.stride >= lowest) {
      const Strided *first = at(l, group - l.stride);
      if (first && at(l, group - 1)) {
        whole_strides_[l.load] = {first->base, static_cast<unsigned>(l.stride)};
        continue;
      }
    }
    for (int64_t k = 0; k < l.stride; ++k) {
      const Strided *first = at(l, l.offset - k);
      if (first && at(l, l.offset - k + l.stride - 1)) {
        whole_strides_[l.load] = {first->base, static_cast<unsigned>(k)};
        break;
      }
    }
  }
  // Longer strides: a group is every offset of one whole stride, each read by some load.
  // A group's loads are all made at its first: no store of the run may write their buffer.
  std::set<const VariableNode *> stored;
  for (const ir::StoreNode *st : stores) stored.insert(st->buffer_var.get());
  std::vector<bool> seen(found.size(), false);
  for (size_t a = 0; a < found.size(); ++a) {
    const Strided &l = found[a];
    const unsigned lanes = static_cast<unsigned>(l.load->type.lanes());
    if (seen[a] || l.stride <= 4 || lanes < 2 || l.stride * lanes > kMaxTransposeElements ||
        stored.count(l.load->buffer_var.get()))
      continue;
    // The loads like l (buffer, stride, type, base but for the offset), by offset.
    std::map<int64_t, std::vector<size_t>> like;
    for (size_t b = a; b < found.size(); ++b) {
      const Strided &m = found[b];
      if (!seen[b] && m.stride == l.stride && m.load->buffer_var.same_as(l.load->buffer_var) &&
          m.load->type == l.load->type && ir::structural_equal(m.rest, l.rest)) {
        like[m.offset].push_back(b);
        seen[b] = true;
      }
    }
    // Groups of one whole stride each, from the lowest offset up.
    for (auto it = like.begin(); it != like.end();) {
      const int64_t from = it->first;
      bool whole = true;
      for (int64_t j = 1; j < l.stride && whole; ++j) whole = like.count(from + j) != 0;
      if (!whole) {
        ++it;
        continue;
      }
      const size_t g = transposed_groups_.size();
      transposed_groups_.push_back({found[it->second[0]].base, l.stride, lanes, {}, {}, {}, {}});
      for (int64_t j = 0; j < l.stride; ++j, ++it) {
        for (size_t b : it->second) transposed_loads_[found[b].load] = {g, static_cast<unsigned>(j)};
      }
    }
  }
}

// The span is loaded and transposed one independent part at a time, when the first of the part's
// loads is evaluated: a stride of 32 with 16 lanes is two 16 x 16 transposes, the second's loads
// and shuffles after the stores of the first's values, so that 16 vectors are live, not 32 (which
// spilled: 32 vectors and the butterfly's temporaries do not fit in AVX-512's 32 registers).
llvm::Value *CodeGenLLVM::transposed_load(const BufferInfo &buf, llvm::Type *mt, llvm::Value *base, size_t group,
                                          unsigned k) {
  TransposedLoads &g = transposed_groups_[group];
  const unsigned s = static_cast<unsigned>(g.stride), lanes = g.lanes;
  if (g.values.empty()) {
    std::vector<std::vector<int>> ids(s), want(s);
    for (unsigned v = 0; v < s; ++v) {
      for (unsigned p = 0; p < lanes; ++p) {
        ids[v].push_back(static_cast<int>(v * lanes + p));
        want[v].push_back(static_cast<int>(p * s + v));  // load v reads start + v + p * s
      }
    }
    g.parts = rearrange_parts(ids, want);
    g.values.assign(s, nullptr);
    g.part_of.assign(s, 0);
    g.emitted.assign(g.parts.size(), false);
    for (size_t q = 0; q < g.parts.size(); ++q) {
      for (unsigned o : g.parts[q].out) g.part_of[o] = static_cast<int>(q);
    }
  }
  const size_t q = static_cast<size_t>(g.part_of[k]);
  if (!g.emitted[q]) {
    const RearrangePart &part = g.parts[q];
    auto *vt = llvm::FixedVectorType::get(mt, lanes);
    std::vector<llvm::Value *> chunks;
    for (unsigned v : part.in) {
      const Expr at = g.start + ir::make_const(g.start.type(), static_cast<int64_t>(v * lanes));
      llvm::Value *ptr = b_.CreateBitCast(address(mt, base, at), vt->getPointerTo());
      llvm::LoadInst *ld = b_.CreateAlignedLoad(vt, ptr, access_align(buf, at, mt));
      annotate(ld, buf);
      chunks.push_back(ld);
    }
    const std::vector<llvm::Value *> values = rearrange(std::move(chunks), part.ids, part.want);
    for (size_t i = 0; i < part.out.size(); ++i) g.values[part.out[i]] = values[i];
    g.emitted[q] = true;
  }
  return g.values[k];
}

std::vector<CodeGenLLVM::TransposedStores> CodeGenLLVM::find_transposed_stores(
    const std::vector<const ir::StoreNode *> &run, std::vector<std::pair<int, unsigned>> *member) {
  member->assign(run.size(), {-1, 0});
  std::vector<TransposedStores> groups;
  if (mask_) return groups;
  // The buffers the run's values read.
  std::set<const VariableNode *> read;
  for (const ir::StoreNode *st : run) {
    for (const Expr &e : {st->value, st->index, st->predicate}) {
      if (!e.defined()) continue;
      ir::post_order_visit(e, [&](const ir::IRNode *n) {
        if (n->node_type == NodeType::Load) read.insert(static_cast<const ir::LoadNode *>(n)->buffer_var.get());
      });
    }
  }
  struct Strided {
    size_t at;
    Expr rest;
    int64_t offset, stride;
  };
  std::map<const VariableNode *, std::vector<Strided>> by_buffer;
  std::set<const VariableNode *> other;  // buffers the run also writes otherwise
  for (size_t i = 0; i < run.size(); ++i) {
    const ir::StoreNode *st = run[i];
    const VariableNode *buf = st->buffer_var.get();
    const auto *r = st->index.as<ir::RampNode>();
    const int64_t stride = r ? ir::as_const_int(r->stride).value_or(0) : 0;
    const int lanes = st->value.type().lanes();
    if (st->predicate.defined() || stride < 2 || stride > kMaxTransposeStride || r->lanes != lanes || lanes < 2 ||
        stride * lanes > kMaxTransposeElements) {
      other.insert(buf);
      continue;
    }
    Expr rest = r->base;
    int64_t offset = 0;
    if (const auto *add = r->base.as<ir::AddNode>()) {
      if (auto c = ir::as_const_int(add->b)) {
        rest = add->a;
        offset = *c;
      }
    }
    by_buffer[buf].push_back({i, rest, offset, stride});
  }
  for (auto &[buf, stores] : by_buffer) {
    if (read.count(buf) || other.count(buf)) continue;
    std::vector<bool> used(stores.size(), false);
    for (size_t a = 0; a < stores.size(); ++a) {
      if (used[a]) continue;
      const Strided &l = stores[a];
      const DataType t = run[l.at]->value.type();
      // The stores of l's stride and base, by offset; a group is one of each offset of a stride.
      std::map<int64_t, size_t> at;
      bool clash = false;
      for (size_t b = 0; b < stores.size(); ++b) {
        const Strided &m = stores[b];
        if (used[b] || m.stride != l.stride || run[m.at]->value.type() != t || !ir::structural_equal(m.rest, l.rest))
          continue;
        clash = clash || !at.emplace(m.offset, b).second;
      }
      const int64_t from = at.begin()->first;
      if (clash || static_cast<int64_t>(at.size()) != l.stride || at.rbegin()->first != from + l.stride - 1) continue;
      TransposedStores g;
      g.stride = l.stride;
      g.lanes = static_cast<unsigned>(t.lanes());
      g.values.assign(static_cast<size_t>(l.stride), nullptr);
      for (const auto &[offset, b] : at) {
        used[b] = true;
        const size_t i = stores[b].at;
        if (offset == from) g.start = run[i]->index.as<ir::RampNode>()->base;
        (*member)[i] = {static_cast<int>(groups.size()), static_cast<unsigned>(offset - from)};
      }
      // The values (store j writes start + j + p * s) rearranged into the contiguous vectors of the
      // span, one independent part at a time: a stride of 32 with 16 lanes is two 16 x 16
      // transposes, the first's shuffles and stores as soon as its 16 values are there.
      const unsigned s = static_cast<unsigned>(g.stride), lanes = g.lanes;
      std::vector<std::vector<int>> ids(s), want(s);
      for (unsigned j = 0; j < s; ++j) {
        for (unsigned p = 0; p < lanes; ++p) {
          ids[j].push_back(static_cast<int>(p * s + j));
          want[j].push_back(static_cast<int>(j * lanes + p));
        }
      }
      g.parts = rearrange_parts(ids, want);
      g.part_of.assign(s, 0);
      for (size_t q = 0; q < g.parts.size(); ++q) {
        for (unsigned j : g.parts[q].in) g.part_of[j] = static_cast<int>(q);
        g.missing.push_back(g.parts[q].in.size());
      }
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

void CodeGenLLVM::emit_transposed_stores(const ir::StoreNode *member, const TransposedStores &g,
                                         const RearrangePart &part) {
  const BufferInfo &buf = lookup_buf(member->buffer_var);
  llvm::Type *mt = mem_type(member->value.type().element_of());
  llvm::Value *base = element_ptr(buf, mt);
  std::vector<llvm::Value *> values;
  for (unsigned j : part.in) values.push_back(g.values[j]);
  const std::vector<llvm::Value *> chunks = rearrange(std::move(values), part.ids, part.want);
  auto *vt = llvm::FixedVectorType::get(mt, g.lanes);
  for (size_t i = 0; i < part.out.size(); ++i) {
    const Expr at = g.start + ir::make_const(g.start.type(), static_cast<int64_t>(part.out[i] * g.lanes));
    llvm::Value *ptr = b_.CreateBitCast(address(mt, base, at), vt->getPointerTo());
    annotate(b_.CreateAlignedStore(chunks[i], ptr, access_align(buf, at, mt)), buf);
  }
}

namespace {

int log2_exact(size_t n) {
  int b = 0;
  while ((size_t{1} << b) < n) ++b;
  return b;
}

// Where each bit of the element ids lives (true: the register's index; its bit position), when
// ids[r][lane] is a permutation of the bits of (r, lane); nullopt otherwise.
std::optional<std::vector<std::pair<bool, int>>> bit_homes(const std::vector<std::vector<int>> &ids) {
  const size_t regs = ids.size(), lanes = ids.empty() ? 0 : ids[0].size();
  if (!power_of_two(regs) || !power_of_two(lanes) || ids[0][0] != 0) return std::nullopt;
  const int rb = log2_exact(regs), lb = log2_exact(lanes);
  std::vector<std::pair<bool, int>> home(static_cast<size_t>(rb + lb), {false, -1});
  auto place = [&](int id, bool reg, int pos) {
    if (id <= 0 || !power_of_two(static_cast<size_t>(id))) return false;
    const size_t b = static_cast<size_t>(log2_exact(static_cast<size_t>(id)));
    if (b >= home.size() || home[b].second >= 0) return false;
    home[b] = {reg, pos};
    return true;
  };
  for (int k = 0; k < lb; ++k) {
    if (!place(ids[0][size_t{1} << k], false, k)) return std::nullopt;
  }
  for (int k = 0; k < rb; ++k) {
    if (!place(ids[size_t{1} << k][0], true, k)) return std::nullopt;
  }
  for (size_t r = 0; r < regs; ++r) {
    for (size_t l = 0; l < lanes; ++l) {
      int id = 0;
      for (size_t b = 0; b < home.size(); ++b) {
        const size_t from = home[b].first ? r : l;
        if ((from >> home[b].second) & 1) id |= 1 << b;
      }
      if (ids[r][l] != id) return std::nullopt;
    }
  }
  return home;
}

}  // namespace

// The independent parts of a rearrangement: where a bit of the element ids is a register bit both
// of the vectors in and of the vectors out, the butterfly never shuffles two vectors that differ
// in it, so the vectors in and out with one value of every such bit are a rearrangement of their
// own (those id bits taken out, so that its ids run from 0). One part (everything) where there is
// no such bit or the arrangements are not permutations of the bits of (register, lane).
std::vector<CodeGenLLVM::RearrangePart> CodeGenLLVM::rearrange_parts(const std::vector<std::vector<int>> &ids,
                                                                     const std::vector<std::vector<int>> &want) {
  std::vector<unsigned> all_in(ids.size()), all_out(want.size());
  for (unsigned i = 0; i < all_in.size(); ++i) all_in[i] = i;
  for (unsigned i = 0; i < all_out.size(); ++i) all_out[i] = i;
  const std::vector<RearrangePart> whole = {{all_in, all_out, ids, want}};
  const auto from = bit_homes(ids), to = bit_homes(want);
  if (!from || !to || from->size() != to->size() || ids.size() != want.size()) return whole;
  std::vector<std::pair<int, int>> kept;  // (register bit in, register bit out) of each such id bit
  int cleared = 0;
  for (size_t b = 0; b < from->size(); ++b) {
    if ((*from)[b].first && (*to)[b].first) {
      kept.emplace_back((*from)[b].second, (*to)[b].second);
      cleared |= 1 << b;
    }
  }
  if (kept.empty()) return whole;
  // An id with the kept bits taken out (the bits above them move down).
  auto squeeze = [cleared](int id) {
    int out = 0, at = 0;
    for (int b = 0; (id >> b) != 0; ++b) {
      if ((cleared >> b) & 1) continue;
      out |= ((id >> b) & 1) << at++;
    }
    return out;
  };
  auto key = [&](unsigned r, bool in) {
    unsigned k = 0;
    for (size_t i = 0; i < kept.size(); ++i) k |= ((r >> (in ? kept[i].first : kept[i].second)) & 1u) << i;
    return k;
  };
  std::vector<RearrangePart> parts(size_t{1} << kept.size());
  for (unsigned r = 0; r < ids.size(); ++r) {
    RearrangePart &p = parts[key(r, true)];
    p.in.push_back(r);
    p.ids.push_back(ids[r]);
    for (int &id : p.ids.back()) id = squeeze(id);
  }
  for (unsigned r = 0; r < want.size(); ++r) {
    RearrangePart &p = parts[key(r, false)];
    p.out.push_back(r);
    p.want.push_back(want[r]);
    for (int &id : p.want.back()) id = squeeze(id);
  }
  for (const RearrangePart &p : parts) {
    if (p.in.size() != p.out.size() || !bit_homes(p.ids) || !bit_homes(p.want)) return whole;
  }
  return parts;
}

std::vector<llvm::Value *> CodeGenLLVM::rearrange(std::vector<llvm::Value *> regs, std::vector<std::vector<int>> ids,
                                                  const std::vector<std::vector<int>> &want) {
  const size_t lanes = ids[0].size();
  const auto from = bit_homes(ids), to = bit_homes(want);
  if (from && to && from->size() == to->size()) {
    // Each id bit in a lane that must end in a register's index swaps places with one in a
    // register's index that must end in a lane: for every pair of registers that differ in that
    // register bit, two shuffles.
    std::vector<int> up, down;  // id bits: lane -> register, register -> lane
    for (size_t b = 0; b < from->size(); ++b) {
      if (!(*from)[b].first && (*to)[b].first) up.push_back(static_cast<int>(b));
      if ((*from)[b].first && !(*to)[b].first) down.push_back(static_cast<int>(b));
    }
    for (size_t i = 0; i < up.size() && i < down.size(); ++i) {
      const size_t a = size_t{1} << (*from)[static_cast<size_t>(down[i])].second;  // the register bit
      const size_t lb = size_t{1} << (*from)[static_cast<size_t>(up[i])].second;   // the lane bit
      std::vector<int> m0(lanes), m1(lanes);
      for (size_t l = 0; l < lanes; ++l) {
        m0[l] = static_cast<int>((l & lb) ? lanes + (l & ~lb) : l);
        m1[l] = static_cast<int>((l & lb) ? lanes + l : (l | lb));
      }
      for (size_t r = 0; r < regs.size(); ++r) {
        if (r & a) continue;
        const size_t r1 = r | a;
        llvm::Value *n0 = b_.CreateShuffleVector(regs[r], regs[r1], m0);
        llvm::Value *n1 = b_.CreateShuffleVector(regs[r], regs[r1], m1);
        std::vector<int> i0(lanes), i1(lanes);
        for (size_t l = 0; l < lanes; ++l) {
          i0[l] = m0[l] < static_cast<int>(lanes) ? ids[r][static_cast<size_t>(m0[l])]
                                                  : ids[r1][static_cast<size_t>(m0[l]) - lanes];
          i1[l] = m1[l] < static_cast<int>(lanes) ? ids[r][static_cast<size_t>(m1[l])]
                                                  : ids[r1][static_cast<size_t>(m1[l]) - lanes];
        }
        regs[r] = n0;
        regs[r1] = n1;
        ids[r] = std::move(i0);
        ids[r1] = std::move(i1);
      }
    }
  }
  // Each wanted vector from the vectors that hold its elements: the first two shuffled together,
  // then each further one shuffled into the result (its lanes already in place kept).
  std::unordered_map<int, std::pair<size_t, size_t>> where;
  for (size_t r = 0; r < ids.size(); ++r) {
    for (size_t l = 0; l < lanes; ++l) where[ids[r][l]] = {r, l};
  }
  std::vector<llvm::Value *> out;
  for (const std::vector<int> &w : want) {
    std::vector<size_t> sources;
    for (int id : w) {
      const size_t r = where.at(id).first;
      if (std::find(sources.begin(), sources.end(), r) == sources.end()) sources.push_back(r);
    }
    auto lane_in = [&](size_t l, size_t r) { return where.at(w[l]).first == r ? static_cast<int>(where.at(w[l]).second) : -1; };
    std::vector<int> mask(lanes);
    bool identity = sources.size() == 1;
    for (size_t l = 0; l < lanes; ++l) {
      mask[l] = lane_in(l, sources[0]);
      identity = identity && mask[l] == static_cast<int>(l);
    }
    if (identity) {
      out.push_back(regs[sources[0]]);
      continue;
    }
    if (sources.size() == 1) {
      out.push_back(b_.CreateShuffleVector(regs[sources[0]], mask));
      continue;
    }
    for (size_t l = 0; l < lanes; ++l) {
      if (mask[l] < 0 && lane_in(l, sources[1]) >= 0) mask[l] = static_cast<int>(lanes) + lane_in(l, sources[1]);
    }
    llvm::Value *acc = b_.CreateShuffleVector(regs[sources[0]], regs[sources[1]], mask);
    std::vector<bool> placed(lanes);
    for (size_t l = 0; l < lanes; ++l) placed[l] = mask[l] >= 0;
    for (size_t k = 2; k < sources.size(); ++k) {
      for (size_t l = 0; l < lanes; ++l) {
        const int in = lane_in(l, sources[k]);
        mask[l] = placed[l] ? static_cast<int>(l) : in >= 0 ? static_cast<int>(lanes) + in : -1;
        placed[l] = placed[l] || in >= 0;
      }
      acc = b_.CreateShuffleVector(acc, regs[sources[k]], mask);
    }
    out.push_back(acc);
  }
  return out;
}

void CodeGenLLVM::store(const ir::StoreNode *op) {
  const BufferInfo &buf = lookup_buf(op->buffer_var);
  const DataType t = op->value.type();
  const DataType et = t.element_of();
  const unsigned lanes = static_cast<unsigned>(t.lanes());
  llvm::Type *mt = mem_type(et);
  llvm::Value *base = element_ptr(buf, mt);
  if (!in_store_run_) find_whole_strides({op});
  llvm::Value *value = to_memory(expr(op->value), et);
  if (!in_store_run_) clear_whole_strides();
  llvm::Value *mask = op->predicate.defined() ? expr(op->predicate) : nullptr;
  if (lanes == 1) {
    llvm::Value *ptr = address(mt, base, op->index);
    const llvm::Align align = access_align(buf, op->index, mt);
    llvm::BasicBlock *merge = nullptr;
    if (mask) {
      llvm::BasicBlock *yes = block("store.pred");
      merge = block("store.end");
      b_.CreateCondBr(mask, yes, merge);
      b_.SetInsertPoint(yes);
    }
    annotate(b_.CreateAlignedStore(value, ptr, align), buf);
    if (merge) {
      b_.CreateBr(merge);
      b_.SetInsertPoint(merge);
    }
    return;
  }
  if (mask && !mask->getType()->isVectorTy()) mask = b_.CreateVectorSplat(lanes, mask);
  auto *vt = llvm::FixedVectorType::get(mt, lanes);
  const auto *r = op->index.as<ir::RampNode>();
  auto stride = r ? ir::as_const_int(r->stride) : std::nullopt;
  if (r && stride && *stride == 1 && static_cast<unsigned>(r->lanes) == lanes) {
    llvm::Value *ptr = address(mt, base, r->base);
    ptr = b_.CreateBitCast(ptr, vt->getPointerTo());
    const llvm::Align align = access_align(buf, r->base, mt);
    llvm::Instruction *st = mask ? masked_store(value, ptr, align, mask, buf)
                                 : static_cast<llvm::Instruction *>(b_.CreateAlignedStore(value, ptr, align));
    annotate(st, buf);
    return;
  }
  // Lanes are written in order, so the last of several lanes with one index wins, as in the
  // interpreter.
  llvm::Value *ptrs = address(mt, base, op->index);
  const llvm::Align align(mod_.getDataLayout().getABITypeAlign(mt));
  annotate(b_.CreateMaskedScatter(value, ptrs, align, mask), buf);
}

void CodeGenLLVM::allocate(const ir::AllocateNode *op) {
  const DataType et = op->dtype.element_of();
  llvm::Type *mt = mem_type(et);
  const int64_t elem_bytes = static_cast<int64_t>(mod_.getDataLayout().getTypeAllocSize(mt));
  int64_t count = op->dtype.lanes();
  bool constant = true;
  for (const auto &e : op->extents) {
    auto c = ir::as_const_int(e);
    if (!c || *c < 0 || __builtin_mul_overflow(count, *c, &count)) {
      constant = false;
      break;
    }
  }
  BufferInfo info;
  info.elem = et;
  info.align = kBufferAlign;
  auto it = scope_of_.find(op->buffer_var.get());
  info.scope = it == scope_of_.end() ? -1 : it->second;
  if (constant && count <= kMaxStackBytes / elem_bytes) {
    llvm::IRBuilder<> entry(state_->entry->getTerminator());
    auto *array = llvm::ArrayType::get(mt, static_cast<uint64_t>(std::max<int64_t>(count, 1)));
    llvm::AllocaInst *a = entry.CreateAlloca(array, nullptr, op->buffer_var.name());
    a->setAlignment(llvm::Align(kBufferAlign));
    info.ptr = entry.CreateBitCast(a, mt->getPointerTo());
    push_buf(op->buffer_var.get(), info);
    stmt(op->body);
    pop_buf(op->buffer_var.get());
    return;
  }
  const std::string what = "allocation " + op->buffer_var.name() + " in " + f_->name;
  llvm::Value *n = int_const(i64_, op->dtype.lanes());
  llvm::Value *ok = b_.getTrue();
  for (const auto &e : op->extents) {
    llvm::Value *x = to_i64(expr(e), e.type().is_int());
    ok = b_.CreateAnd(ok, b_.CreateICmpSGE(x, int_const(i64_, 0)));
    // Saturate instead of overflowing; the size check below then fails.
    llvm::Value *prod = b_.CreateIntrinsic(llvm::Intrinsic::smul_with_overflow, {i64_}, {n, x});
    n = b_.CreateSelect(b_.CreateExtractValue(prod, 1), int_const(i64_, kMaxHeapBytes), b_.CreateExtractValue(prod, 0));
  }
  check(ok, what + " has a negative extent", kKilnErrorAlloc);
  check(b_.CreateICmpSLE(n, int_const(i64_, kMaxHeapBytes / elem_bytes)), what + " is too large", kKilnErrorAlloc);
  llvm::Value *bytes = b_.CreateMul(n, int_const(i64_, elem_bytes));
  bytes = b_.CreateAnd(b_.CreateAdd(bytes, int_const(i64_, kBufferAlign - 1)), int_const(i64_, -kBufferAlign));
  bytes = b_.CreateSelect(b_.CreateICmpEQ(bytes, int_const(i64_, 0)), int_const(i64_, kBufferAlign), bytes);
  llvm::Value *raw = b_.CreateCall(aligned_alloc_, {int_const(i64_, kBufferAlign), bytes});
  check(b_.CreateICmpNE(raw, llvm::ConstantPointerNull::get(i8p_)), "out of memory in " + what, kKilnErrorAlloc);
  state_->heap.push_back(raw);
  info.ptr = b_.CreateBitCast(raw, mt->getPointerTo());
  push_buf(op->buffer_var.get(), info);
  stmt(op->body);
  pop_buf(op->buffer_var.get());
  state_->heap.pop_back();
  b_.CreateCall(free_, {raw});
}

void CodeGenLLVM::serial_loop(llvm::Value *begin, llvm::Value *end, bool is_signed,
                              const std::function<void(llvm::Value *)> &body) {
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  llvm::BasicBlock *loop_bb = block("for.body"), *exit = block("for.end");
  b_.CreateCondBr(is_signed ? b_.CreateICmpSLT(begin, end) : b_.CreateICmpULT(begin, end), loop_bb, exit);
  b_.SetInsertPoint(loop_bb);
  llvm::PHINode *i = b_.CreatePHI(begin->getType(), 2);
  i->addIncoming(begin, pre);
  body(i);
  llvm::Value *next = b_.CreateAdd(i, llvm::ConstantInt::get(begin->getType(), 1), "", false, is_signed);
  i->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(is_signed ? b_.CreateICmpSLT(next, end) : b_.CreateICmpULT(next, end), loop_bb, exit);
  b_.SetInsertPoint(exit);
}

void CodeGenLLVM::loop(const ir::ForNode *op) {
  if (op->kind == ir::ForKind::Parallel && parallel_depth_ == 0) {
    parallel_loop(op);
    return;
  }
  const bool is_signed = op->loop_var.type().is_int();
  llvm::Type *t = reg_type(op->loop_var.type());
  llvm::Value *min = b_.CreateIntCast(expr(op->min), t, op->min.type().is_int());
  llvm::Value *extent = b_.CreateIntCast(expr(op->extent), t, op->extent.type().is_int());
  serial_loop(min, b_.CreateAdd(min, extent), is_signed, [&](llvm::Value *i) {
    i->setName(op->loop_var.name());
    push_var(op->loop_var, i);
    stmt(op->body);
    pop_var(op->loop_var);
  });
}

// The body of an outermost parallel loop becomes a function
//   int32_t <name>__parallel_<k>(int64_t begin, int64_t end, void *closure)
// that runs iterations [begin, end) with the variables it uses loaded from `closure`, a struct on
// the caller's stack. The caller hands it to the runtime's parallel_for, or calls it once for the
// whole range when no runtime is installed.
void CodeGenLLVM::parallel_loop(const ir::ForNode *op) {
  const bool is_signed = op->loop_var.type().is_int();
  llvm::Type *t = reg_type(op->loop_var.type());
  llvm::Value *min = b_.CreateIntCast(expr(op->min), t, op->min.type().is_int());
  llvm::Value *extent = b_.CreateIntCast(expr(op->extent), t, op->extent.type().is_int());

  // What the body uses from outside: scalars and buffers, in order of first use.
  std::vector<const VariableNode *> scalars, buffers;
  std::unordered_set<const VariableNode *> seen;
  auto use = [&](const VariableNode *v) {
    if (!seen.insert(v).second || v == op->loop_var.get()) return;
    if (find_buf(v)) {
      buffers.push_back(v);
    } else if (auto it = vars_.find(v); it != vars_.end() && !it->second.empty()) {
      scalars.push_back(v);
    }
  };
  ir::post_order_visit(op->body, [&](const ir::IRNode *n) {
    switch (n->node_type) {
      case NodeType::Variable:
        use(static_cast<const VariableNode *>(n));
        break;
      case NodeType::Load:
        use(static_cast<const ir::LoadNode *>(n)->buffer_var.get());
        break;
      case NodeType::Store:
        use(static_cast<const ir::StoreNode *>(n)->buffer_var.get());
        break;
      default:
        break;  // the nodes that name no variable or buffer
    }
  });
  std::vector<llvm::Type *> fields = {min->getType()};
  std::vector<llvm::Value *> values = {min};
  for (const auto *v : scalars) values.push_back(vars_[v].back());
  for (const auto *v : buffers) values.push_back(find_buf(v)->ptr);
  for (size_t i = 1; i < values.size(); ++i) fields.push_back(values[i]->getType());
  auto *closure_type = llvm::StructType::get(ctx_, fields);
  llvm::Value *closure;
  {
    llvm::IRBuilder<> entry(state_->entry->getTerminator());
    closure = entry.CreateAlloca(closure_type, nullptr, "closure");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    b_.CreateStore(values[i], b_.CreateStructGEP(closure_type, closure, static_cast<unsigned>(i)));
  }

  // The outlined body.
  const llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
  FunctionState *parent = state_;
  FunctionState child;
  child.fn =
      new_function(body_type_, llvm::GlobalValue::InternalLinkage, detail::concat(name_, "__parallel_", outlined_++));
  begin_function(&child);
  {
    llvm::Function *fn = child.fn;
    llvm::Value *cl = b_.CreateBitCast(fn->getArg(2), closure_type->getPointerTo());
    auto field = [&](size_t i) {
      return b_.CreateLoad(fields[i], b_.CreateStructGEP(closure_type, cl, static_cast<unsigned>(i)));
    };
    llvm::Value *inner_min = field(0);
    size_t k = 1;
    for (const auto *v : scalars) vars_[v].push_back(field(k++));
    for (const auto *v : buffers) {
      BufferInfo info = *find_buf(v);
      info.ptr = field(k++);
      bufs_[v].push_back(info);
    }
    ++parallel_depth_;
    serial_loop(fn->getArg(0), fn->getArg(1), true, [&](llvm::Value *i) {
      llvm::Value *iv =
          b_.CreateAdd(inner_min, b_.CreateIntCast(i, inner_min->getType(), is_signed), op->loop_var.name());
      push_var(op->loop_var, iv);
      stmt(op->body);
      pop_var(op->loop_var);
    });
    --parallel_depth_;
    b_.CreateRet(b_.getInt32(0));
    for (const auto *v : scalars) vars_[v].pop_back();
    for (const auto *v : buffers) bufs_[v].pop_back();
  }
  state_ = parent;
  b_.restoreIP(saved_ip);

  // The call: through the runtime when one is installed, else serially.
  llvm::Value *n = to_i64(extent, is_signed);
  llvm::Value *raw_closure = b_.CreateBitCast(closure, i8p_);
  llvm::LoadInst *api = b_.CreateAlignedLoad(api_type_->getPointerTo(), runtime_api_, llvm::Align(8));
  llvm::BasicBlock *direct = block("par.serial"), *pooled = block("par.pool"), *merge = block("par.end");
  b_.CreateCondBr(b_.CreateIsNull(api), direct, pooled);
  b_.SetInsertPoint(direct);
  llvm::Value *rc_direct = b_.CreateCall(body_type_, child.fn, {int_const(i64_, 0), n, raw_closure});
  b_.CreateBr(merge);
  b_.SetInsertPoint(pooled);
  auto *pf_type = llvm::cast<llvm::PointerType>(api_type_->getElementType(1));
  llvm::Value *pf = b_.CreateLoad(pf_type, b_.CreateStructGEP(api_type_, api, 1));
  auto *pf_fn_type = llvm::FunctionType::get(i32_, {body_type_->getPointerTo(), i64_, i8p_}, false);
  llvm::Value *rc_pool = b_.CreateCall(pf_fn_type, pf, {child.fn, n, raw_closure});
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  llvm::PHINode *rc = b_.CreatePHI(i32_, 2);
  rc->addIncoming(rc_direct, direct);
  rc->addIncoming(rc_pool, pooled);
  check_status(rc);
}

void CodeGenLLVM::if_stmt(const ir::IfThenElseNode *op) {
  llvm::Value *c = expr(op->condition);
  KILN_CHECK(!c->getType()->isVectorTy(), "LLVM back end: IfThenElse with a vector condition");
  const bool has_else = op->else_case.defined() && !ir::is_nop(op->else_case);
  llvm::BasicBlock *then_bb = block("if.then"), *merge = block("if.end");
  llvm::BasicBlock *else_bb = has_else ? block("if.else") : merge;
  const auto *likely = op->condition.as<ir::CallNode>();
  if (likely && likely->name == ir::intrinsic::kLikely) {
    llvm::MDBuilder md(ctx_);
    b_.CreateCondBr(c, then_bb, else_bb, md.createBranchWeights(2000, 1));
  } else {
    b_.CreateCondBr(c, then_bb, else_bb);
  }
  b_.SetInsertPoint(then_bb);
  stmt(op->then_case);
  b_.CreateBr(merge);
  if (has_else) {
    b_.SetInsertPoint(else_bb);
    stmt(op->else_case);
    b_.CreateBr(merge);
  }
  b_.SetInsertPoint(merge);
}

// ---------------------------------------------------------------------------------------------
// Functions, the entry point, metadata

// The kernel: `body` as a function of the parameters' data pointers (noalias, aligned) and the
// size variables, as f declares them. Assertions in it fail with kKilnErrorAssert.
llvm::Function *CodeGenLLVM::emit_kernel(const ir::LoweredFunc &f, const Stmt &body) {
  std::vector<llvm::Type *> types;
  for (const auto &p : f.params) types.push_back(mem_type(p.dtype.element_of())->getPointerTo());
  for (const auto &v : f.size_vars) types.push_back(reg_type(v.type()));
  auto *type = llvm::FunctionType::get(i32_, types, false);
  FunctionState state;
  state.fn = new_function(type, llvm::GlobalValue::InternalLinkage, name_ + "__kernel");
  for (size_t i = 0; i < f.params.size(); ++i) {
    const unsigned a = static_cast<unsigned>(i);
    state.fn->addParamAttr(a, llvm::Attribute::NoAlias);
    state.fn->addParamAttr(a, llvm::Attribute::getWithAlignment(ctx_, llvm::Align(kBufferAlign)));
    state.fn->getArg(a)->setName(f.params[i].name);
    BufferInfo info;
    info.ptr = state.fn->getArg(a);
    info.elem = f.params[i].dtype.element_of();
    info.align = kBufferAlign;
    info.scope = scope_of_.at(f.params[i].data.get());
    push_buf(f.params[i].data.get(), info);
  }
  for (size_t k = 0; k < f.size_vars.size(); ++k) {
    llvm::Value *arg = state.fn->getArg(static_cast<unsigned>(f.params.size() + k));
    arg->setName(f.size_vars[k].name());
    push_var(f.size_vars[k], arg);
  }
  const int32_t outer_status = assert_status_;
  assert_status_ = kKilnErrorAssert;
  begin_function(&state);
  stmt(body);
  b_.CreateRet(b_.getInt32(0));
  assert_status_ = outer_status;
  for (const auto &p : f.params) pop_buf(p.data.get());
  for (const auto &v : f.size_vars) pop_var(v);
  return state.fn;
}

// The kernel body of the entry point: compiled as a function of its own and called with the data
// pointers and size variables the entry has bound; the entry returns its status.
void CodeGenLLVM::kernel_call(const ir::AttrStmtNode *op) {
  KILN_CHECK(kernel_status_ == nullptr, "LLVM back end: function ", f_->name, " has two kernel bodies");
  std::vector<llvm::Value *> values;
  for (const auto &p : f_->params) values.push_back(lookup_buf(p.data).ptr);
  for (const auto &v : f_->size_vars) values.push_back(lookup_var(v.get()));
  const llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
  FunctionState *entry = state_;
  llvm::Function *kernel = emit_kernel(*f_, op->body);
  state_ = entry;
  b_.restoreIP(saved_ip);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = b_.CreateBitCast(values[i], kernel->getArg(static_cast<unsigned>(i))->getType());
  }
  kernel_status_ = b_.CreateCall(kernel, values);
}

// The packed entry point: the argument checks of lower::make_packed_api, then the kernel. It is
// internal to the module, which exports it under packed.symbol, an alias: the module table refers
// to the definition itself, so no other library's symbol can take its place.
void CodeGenLLVM::emit_entry(const lower::PackedFunc &packed) {
  FunctionState state;
  state.fn = new_function(entry_type_, llvm::GlobalValue::InternalLinkage, name_ + "__entry");
  KILN_CHECK(!mod_.getNamedValue(packed.symbol), "LLVM back end: symbol ", packed.symbol, " is defined twice");
  llvm::GlobalAlias::create(entry_type_, 0, llvm::GlobalValue::ExternalLinkage, packed.symbol, state.fn, &mod_);
  llvm::Value *args = state.fn->getArg(0);
  llvm::Value *num_args = state.fn->getArg(1);
  args->setName("args");
  num_args->setName("num_args");
  begin_function(&state);
  push_var(packed.args, b_.CreateBitCast(args, i8p_));
  push_var(packed.num_args, num_args);
  assert_status_ = kKilnErrorArgument;
  kernel_status_ = nullptr;
  stmt(packed.func.body);
  KILN_CHECK(kernel_status_ != nullptr, "LLVM back end: the entry of ", f_->name, " has no kernel body");
  b_.CreateRet(kernel_status_);
  kernel_status_ = nullptr;
  pop_var(packed.args);
  pop_var(packed.num_args);
  state_ = nullptr;
  emit_info(packed, state.fn);
}

void CodeGenLLVM::emit_info(const lower::PackedFunc &packed, llvm::Function *entry) {
  const ir::LoweredFunc &f = packed.func;
  std::vector<llvm::Constant *> params;
  for (size_t i = 0; i < f.params.size(); ++i) {
    const ir::Buffer &p = f.params[i];
    std::vector<uint64_t> shape;
    for (size_t d = 0; d < p.shape.size(); ++d) {
      auto c = ir::as_const_int(p.shape[d]);
      shape.push_back(static_cast<uint64_t>(c ? *c : -1));
    }
    llvm::Constant *shape_ptr = llvm::ConstantPointerNull::get(i64_->getPointerTo());
    if (!shape.empty()) {
      llvm::Constant *arr = llvm::ConstantDataArray::get(ctx_, shape);
      auto *gv = new llvm::GlobalVariable(mod_, arr->getType(), true, llvm::GlobalValue::PrivateLinkage, arr,
                                          name_ + ".shape");
      shape_ptr = llvm::ConstantExpr::getBitCast(gv, i64_->getPointerTo());
    }
    params.push_back(llvm::ConstantStruct::get(
        param_info_type_,
        {string_ptr(p.name), b_.getInt32(static_cast<uint32_t>(p.shape.size())),
         b_.getInt8(static_cast<uint8_t>(p.dtype.code())), b_.getInt8(static_cast<uint8_t>(p.dtype.bits())),
         b_.getInt16(static_cast<uint16_t>(p.dtype.lanes())), shape_ptr}));
  }
  llvm::Constant *params_ptr = llvm::ConstantPointerNull::get(param_info_type_->getPointerTo());
  if (!params.empty()) {
    auto *arr_type = llvm::ArrayType::get(param_info_type_, params.size());
    auto *gv = new llvm::GlobalVariable(mod_, arr_type, true, llvm::GlobalValue::PrivateLinkage,
                                        llvm::ConstantArray::get(arr_type, params), name_ + ".params");
    params_ptr = llvm::ConstantExpr::getBitCast(gv, param_info_type_->getPointerTo());
  }
  llvm::Constant *info =
      llvm::ConstantStruct::get(function_info_type_, {string_ptr(f.name), string_ptr(packed.signature), entry,
                                                      b_.getInt32(static_cast<uint32_t>(f.params.size())), params_ptr});
  auto *gv = new llvm::GlobalVariable(mod_, function_info_type_, true, llvm::GlobalValue::PrivateLinkage, info,
                                      name_ + ".info");
  function_infos_.push_back(gv);
}

void CodeGenLLVM::add_function(const ir::LoweredFunc &f) {
  ir::post_order_visit(f.body, [&](const ir::IRNode *n) {
    if (n->node_type == NodeType::Call && static_cast<const ir::CallNode *>(n)->name == ir::intrinsic::kSyncThreads) {
      throw UserError(detail::concat("function ", f.name,
                                     ": the LLVM back end cannot run thread loops with barriers; use CUDA "
                                     "(or the interpreter)"));
    }
  });
  const lower::PackedFunc packed = lower::make_packed_api(f);
  auto [other, fresh] = exported_.emplace(packed.symbol, f.name);
  if (!fresh) {
    throw UserError(detail::concat("LLVM back end: functions \"", other->second, "\" and \"", f.name,
                                   "\" would both be exported as ", packed.symbol));
  }
  f_ = &f;
  name_ = packed.symbol.substr(std::string(KILN_FUNCTION_SYMBOL_PREFIX).size());
  outlined_ = 0;
  parallel_depth_ = 0;
  mask_ = nullptr;

  // The widest vector decides the registers LLVM may use (min-legal-vector-width).
  vector_bits_ = 0;
  ir::post_order_visit(f.body, [&](const ir::IRNode *n) {
    if (n->node_type > NodeType::Reduce) return;  // statements
    const DataType t = static_cast<const ir::BaseExprNode *>(n)->type;
    if (t.is_vector()) vector_bits_ = std::max(vector_bits_, t.lanes() * (t.is_float16() ? 32 : t.bits()));
  });

  // One alias scope per buffer: the parameters and every allocation.
  scope_of_.clear();
  scope_md_.clear();
  noalias_md_.clear();
  std::vector<const VariableNode *> roots;
  for (const auto &p : f.params) roots.push_back(p.data.get());
  ir::post_order_visit(f.body, [&](const ir::IRNode *n) {
    if (n->node_type == NodeType::Allocate) roots.push_back(static_cast<const ir::AllocateNode *>(n)->buffer_var.get());
  });
  llvm::MDBuilder md(ctx_);
  llvm::MDNode *domain = md.createAnonymousAliasScopeDomain(name_);
  std::vector<llvm::Metadata *> scopes;
  for (const auto *r : roots) {
    if (scope_of_.count(r)) continue;
    scope_of_[r] = static_cast<int>(scopes.size());
    scopes.push_back(md.createAnonymousAliasScope(domain, r->name));
  }
  for (size_t i = 0; i < scopes.size(); ++i) {
    scope_md_.push_back(llvm::MDNode::get(ctx_, {scopes[i]}));
    std::vector<llvm::Metadata *> others;
    for (size_t j = 0; j < scopes.size(); ++j) {
      if (j != i) others.push_back(scopes[j]);
    }
    noalias_md_.push_back(llvm::MDNode::get(ctx_, others));
  }

  emit_entry(packed);
  f_ = nullptr;
}

void CodeGenLLVM::finish() {
  auto *info_ptr_type = function_info_type_->getPointerTo();
  auto *arr_type = llvm::ArrayType::get(info_ptr_type, function_infos_.size());
  auto *table = new llvm::GlobalVariable(mod_, arr_type, true, llvm::GlobalValue::PrivateLinkage,
                                         llvm::ConstantArray::get(arr_type, function_infos_), "kiln_functions");
  llvm::Constant *info = llvm::ConstantStruct::get(
      module_info_type_, {b_.getInt32(KILN_ABI_VERSION), b_.getInt32(static_cast<uint32_t>(function_infos_.size())),
                          llvm::ConstantExpr::getBitCast(table, info_ptr_type->getPointerTo()), last_error_fn_,
                          runtime_api_, string_ptr(target_.str)});
  new llvm::GlobalVariable(mod_, module_info_type_, true, llvm::GlobalValue::ExternalLinkage, info,
                           KILN_MODULE_INFO_SYMBOL);
}

}  // namespace

std::unique_ptr<llvm::Module> codegen_llvm(const std::vector<ir::LoweredFunc> &funcs, const LLVMTarget &target,
                                           llvm::TargetMachine &tm, llvm::LLVMContext &context,
                                           const LLVMCodegenOptions &options) {
  auto module = std::make_unique<llvm::Module>("kiln", context);
  module->setTargetTriple(tm.getTargetTriple().str());
  module->setDataLayout(tm.createDataLayout());
  CodeGenLLVM cg(context, *module, target, options);
  for (const auto &f : funcs) cg.add_function(f);
  cg.finish();
  return module;
}

}  // namespace kiln::codegen
