#include <gtest/gtest.h>

#include <memory>

#include "compiler/ir/function.h"
#include "compiler/pass/passes.h"
#include "compiler/te/tensor.h"
#include "tests/compiler/pass/ir_builders.h"

namespace kiln::ir::testing {
namespace {

// The message verify_ir throws for f, or "" when it accepts f.
std::string verify_error(const LoweredFunc &f) {
  try {
    pass::verify_ir(f);
  } catch (const InternalError &e) {
    return e.what();
  }
  return "";
}

struct Fixture {
  Var n{"n"};
  Buffer a = make_buffer("A", Float(32), {n});
  Buffer b = make_buffer("B", Float(32), {n});
  Var i{"i"};

  LoweredFunc func(Stmt body) const { return LoweredFunc{"f", {a, b}, {n}, std::move(body)}; }
};

TEST(VerifyIR, AcceptsWellFormedFunction) {
  Fixture f;
  Var t = buffer_var("T"), x("x", Float(32)), tx("tx");
  Stmt body = AllocateNode::make(
      t, Float(32), {4}, "local",
      loop(f.i, 0, f.n,
           block({store(t, load(f.a.data, f.i), 0), LetStmtNode::make(x, load(t, 0), store(f.b.data, x, f.i)),
                  loop(tx, 0, 32, store(f.b.data, load(f.a.data, ramp(tx * 4, 1, 4)), ramp(tx * 4, 1, 4)),
                       ForKind::ThreadBinding)})));
  EXPECT_EQ(verify_error(f.func(body)), "");
}

TEST(VerifyIR, LoopVariableUsedAfterItsLoop) {
  Fixture f;
  Stmt body = block({loop(f.i, 0, f.n, store(f.b.data, 0.0f, f.i)), store(f.b.data, 1.0f, f.i)});
  std::string err = verify_error(f.func(body));
  EXPECT_NE(err.find("function 'f'"), std::string::npos) << err;
  EXPECT_NE(err.find("variable 'i' is used outside its definition scope"), std::string::npos) << err;
  EXPECT_NE(err.find("in: B[i] = 1.0f"), std::string::npos) << err;
}

TEST(VerifyIR, UndeclaredSizeVariable) {
  Fixture f;
  Var m("m");
  std::string err = verify_error(f.func(loop(f.i, 0, m, store(f.b.data, 0.0f, f.i))));
  EXPECT_NE(err.find("variable 'm' is used outside"), std::string::npos) << err;
}

TEST(VerifyIR, LetVariableUsedOutsideItsLet) {
  Fixture f;
  Var x("x");
  Stmt body = block({LetStmtNode::make(x, 1, store(f.b.data, 0.0f, x)), store(f.b.data, 0.0f, x)});
  EXPECT_NE(verify_error(f.func(body)).find("variable 'x' is used outside"), std::string::npos);
}

TEST(VerifyIR, StoreToUndefinedBuffer) {
  Fixture f;
  Var t = buffer_var("T");
  std::string err = verify_error(f.func(store(t, 0.0f, 0)));
  EXPECT_NE(err.find("store to undefined buffer 'T'"), std::string::npos) << err;
}

TEST(VerifyIR, LoadFromBufferAfterItsAllocation) {
  Fixture f;
  Var t = buffer_var("T");
  Stmt body =
      block({AllocateNode::make(t, Float(32), {4}, "local", store(t, 0.0f, 0)), store(f.b.data, load(t, 0), 0)});
  std::string err = verify_error(f.func(body));
  EXPECT_NE(err.find("load from undefined buffer 'T'"), std::string::npos) << err;
}

TEST(VerifyIR, ProducerNodesLeftOver) {
  Fixture f;
  te::Tensor p = te::placeholder({f.n}, Float(32), "P");
  std::string err = verify_error(f.func(loop(f.i, 0, f.n, store(f.b.data, p(f.i), f.i))));
  EXPECT_NE(err.find("ProducerLoad of 'P' in lowered IR"), std::string::npos) << err;
  err = verify_error(f.func(ProducerStoreNode::make(p.op(), 0, 1.0f, {Expr(0)})));
  EXPECT_NE(err.find("ProducerStore to 'P'"), std::string::npos) << err;
  err = verify_error(f.func(ProducerRealizeNode::make(p.op(), 0, {Range(0, f.n)}, "global", make_nop())));
  EXPECT_NE(err.find("ProducerRealize of 'P'"), std::string::npos) << err;
}

TEST(VerifyIR, MismatchedLanes) {
  Fixture f;
  // Built without make(), which would refuse them.
  Stmt bad_store = Stmt(std::make_shared<StoreNode>(f.b.data, bcast(1.0f, 4), Expr(0), Expr()));
  std::string err = verify_error(f.func(bad_store));
  EXPECT_NE(err.find("mismatched lanes in store to 'B'"), std::string::npos) << err;
  Expr bad_add(std::make_shared<AddNode>(Int(32, 4), ramp(0, 1, 4), Expr(1)));
  err = verify_error(f.func(store(f.b.data, load(f.a.data, bad_add), ramp(0, 1, 4))));
  EXPECT_NE(err.find("mismatched lanes in Add: int32x4 and int32"), std::string::npos) << err;
}

TEST(VerifyIR, LoopWithVectorBounds) {
  Fixture f;
  Stmt bad =
      Stmt(std::make_shared<ForNode>(f.i, ramp(0, 1, 4), Expr(4), ForKind::Serial, store(f.b.data, 0.0f, 0), ""));
  std::string err = verify_error(f.func(bad));
  EXPECT_NE(err.find("loop over 'i' has vector bounds"), std::string::npos) << err;
}

TEST(VerifyIR, NestedThreadBindingsOfOneTagMustAgree) {
  Fixture f;
  Var tx("tx"), ty("ty");
  auto bind = [](const Var &v, int extent, Stmt body) {
    return ForNode::make(v, 0, extent, ForKind::ThreadBinding, std::move(body), "threadIdx.x");
  };
  std::string err = verify_error(f.func(bind(tx, 64, bind(ty, 32, store(f.b.data, 0.0f, tx + ty)))));
  EXPECT_NE(err.find("thread binding 'threadIdx.x' with extent 32 nested in a binding of the same tag with extent 64"),
            std::string::npos)
      << err;
  EXPECT_EQ(verify_error(f.func(bind(tx, 64, bind(ty, 64, store(f.b.data, 0.0f, tx + ty))))), "");
  EXPECT_EQ(
      verify_error(f.func(block({bind(tx, 64, store(f.b.data, 0.0f, tx)), bind(ty, 32, store(f.b.data, 0.0f, ty))}))),
      "");
}

TEST(VerifyIR, VariableRedefinedInsideItsOwnScope) {
  Fixture f;
  std::string err = verify_error(f.func(loop(f.i, 0, 4, loop(f.i, 0, 4, store(f.b.data, 0.0f, f.i)))));
  EXPECT_NE(err.find("variable 'i' is defined again inside its own scope"), std::string::npos) << err;
}

}  // namespace
}  // namespace kiln::ir::testing
