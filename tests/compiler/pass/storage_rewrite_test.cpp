#include <gtest/gtest.h>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/pass/passes.h"
#include "tests/compiler/ir/ir_equal.h"
#include "tests/compiler/pass/ir_builders.h"
#include "tests/compiler/pass/stmt_runner.h"

namespace kiln::ir::testing {
namespace {

using pass::storage_rewrite;

int allocations(const Stmt &s) {
  int n = 0;
  post_order_visit(s, [&](const IRNode *node) { n += node->node_type == NodeType::Allocate; });
  return n;
}

// A[i] -> T1 -> T2 -> T3 -> B, each stage one loop over 16 elements.
struct Chain {
  Var a = buffer_var("A"), b = buffer_var("B"), t1 = buffer_var("T1"), t2 = buffer_var("T2"), t3 = buffer_var("T3");
  Var i0{"i"}, i1{"i"}, i2{"i"}, i3{"i"};
  Stmt s0 = loop(i0, 0, 16, store(t1, load(a, i0) + 1.0f, i0));
  Stmt s1 = loop(i1, 0, 16, store(t2, load(t1, i1) * 2.0f, i1));
  Stmt s2 = loop(i2, 0, 16, store(t3, load(t2, i2) - 3.0f, i2));
  Stmt s3 = loop(i3, 0, 16, store(b, load(t3, i3), i3));

  Stmt alloc(const Var &v, Stmt body, int size = 16, const std::string &scope = "local") const {
    return AllocateNode::make(v, Float(32), {size}, scope, std::move(body));
  }
};

std::vector<double> run(const Stmt &s, const Chain &c) {
  StmtRunner e;
  auto &a = e.buffer(c.a, 16);
  for (int k = 0; k < 16; ++k) a[k] = k;
  e.buffer(c.b, 16);
  e.run(s);
  return e.buffers[c.b.get()];
}

TEST(StorageRewrite, ChainReusesTheFirstTemporaryForTheThird) {
  Chain c;
  Stmt s = c.alloc(c.t1, c.alloc(c.t2, c.alloc(c.t3, block({c.s0, c.s1, c.s2, c.s3}))));
  Stmt out = storage_rewrite(s);
  EXPECT_EQ(allocations(out), 2);
  Stmt s2 = loop(c.i2, 0, 16, store(c.t1, load(c.t2, c.i2) - 3.0f, c.i2));
  Stmt s3 = loop(c.i3, 0, 16, store(c.b, load(c.t1, c.i3), c.i3));
  EXPECT_TRUE(ir_equal(out, c.alloc(c.t1, c.alloc(c.t2, block({c.s0, c.s1, s2, s3})))));
  EXPECT_EQ(run(out, c), run(s, c));
}

TEST(StorageRewrite, NestedRealizeShapeIsFlattenedToOneLevel) {
  Chain c;
  Stmt s = c.alloc(c.t1, block({c.s0, c.alloc(c.t2, block({c.s1, c.alloc(c.t3, block({c.s2, c.s3}))}))}));
  Stmt out = storage_rewrite(s);
  EXPECT_EQ(allocations(out), 2);
  EXPECT_EQ(run(out, c), run(s, c));
}

TEST(StorageRewrite, SharedSlotGrowsToTheLargestSize) {
  Chain c;
  Stmt s = c.alloc(c.t1, c.alloc(c.t2, c.alloc(c.t3, block({c.s0, c.s1, c.s2, c.s3}), 32)));
  Stmt out = storage_rewrite(s);
  const auto *outer = out.as<AllocateNode>();
  ASSERT_NE(outer, nullptr);
  EXPECT_TRUE(outer->buffer_var.same_as(c.t1));
  ASSERT_EQ(outer->extents.size(), 1u);
  EXPECT_TRUE(is_const_int(outer->extents[0], 32));
  EXPECT_EQ(allocations(out), 2);
  EXPECT_EQ(run(out, c), run(s, c));
}

TEST(StorageRewrite, DifferentDtypesDoNotShare) {
  Chain c;
  Stmt s = AllocateNode::make(c.t1, Float(32), {16}, "local",
                              AllocateNode::make(c.t3, Float(16), {16}, "local", block({c.s0, c.s1, c.s2, c.s3})));
  s = c.alloc(c.t2, s);
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
}

TEST(StorageRewrite, OverlappingLifetimesDoNotShare) {
  Chain c;
  Var i("i");
  Stmt use_both = loop(i, 0, 16, store(c.b, load(c.t1, i) + load(c.t3, i), i));
  Stmt s = c.alloc(c.t1, c.alloc(c.t2, c.alloc(c.t3, block({c.s0, c.s1, c.s2, use_both}))));
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
}

TEST(StorageRewrite, SharedScopeIsLeftAlone) {
  Chain c;
  Stmt s = c.alloc(c.t1, c.alloc(c.t2, c.alloc(c.t3, block({c.s0, c.s1, c.s2, c.s3}), 16, "shared"), 16, "shared"), 16,
                   "shared");
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
}

TEST(StorageRewrite, BufferPassedToACallKeepsItsMemory) {
  Chain c;
  Stmt escape = EvaluateNode::make(CallNode::make(Int(32), "consume", {c.t3}, CallNode::Kind::Extern));
  Stmt s = c.alloc(c.t1, c.alloc(c.t2, c.alloc(c.t3, block({c.s0, c.s1, c.s2, escape}))));
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
}

TEST(StorageRewrite, AccessesInsideOneLoopAreOneLifetime) {
  Chain c;
  Var i("i");
  Stmt fused = loop(i, 0, 16,
                    block({store(c.t1, load(c.a, i), i), store(c.t2, load(c.t1, i), i), store(c.t3, load(c.t2, i), i),
                           store(c.b, load(c.t3, i), i)}));
  Stmt s = c.alloc(c.t1, c.alloc(c.t2, c.alloc(c.t3, fused)));
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
}

// Buffers read and written only at constant indices (a reduction tree's partial results) are
// register candidates: sharing memory with another buffer would keep both in memory.
TEST(StorageRewrite, BuffersAtConstantIndicesKeepTheirOwnMemory) {
  Chain c;
  Stmt s0 = store(c.t1, load(c.a, 0) + 1.0f, 0);
  Stmt s1 = store(c.t2, load(c.t1, 0) * 2.0f, 0);
  Stmt s2 = store(c.t3, load(c.t2, 0) - 3.0f, 0);
  Stmt s3 = store(c.b, load(c.t3, 0), 0);
  Stmt s = c.alloc(c.t1, c.alloc(c.t2, c.alloc(c.t3, block({s0, s1, s2, s3}))));
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
  // A variable index anywhere makes a buffer shareable again: T1 and T3 share.
  Var i("i");
  Stmt v0 = loop(i, 0, 1, store(c.t1, load(c.a, i) + 1.0f, i));
  Stmt shared = c.alloc(
      c.t1, c.alloc(c.t2, c.alloc(c.t3, block({v0, s1, loop(c.i2, 0, 1, store(c.t3, load(c.t2, 0), c.i2)), s3}))));
  EXPECT_EQ(allocations(storage_rewrite(shared)), 2);
}

TEST(StorageRewrite, UntouchedIrIsReturnedAsIs) {
  Chain c;
  Stmt s = c.alloc(c.t1, block({c.s0, loop(c.i1, 0, 16, store(c.b, load(c.t1, c.i1), c.i1))}));
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
}

}  // namespace
}  // namespace kiln::ir::testing
