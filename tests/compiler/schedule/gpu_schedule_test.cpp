// GPU-style schedules (blocks, threads, shared memory, barriers, double buffering) checked through
// the interpreter's thread simulation against the unscheduled operator.
#include <gtest/gtest.h>

#include "compiler/ir/ir_visitor.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln {
namespace {

using namespace ir;

// The statement without its sync_threads barriers.
Stmt ir_transform_stmt_remove_sync(const Stmt &s) {
  class Remover : public IRMutator {
   public:
    using IRMutator::mutate;

   protected:
    Stmt visit(const EvaluateNode *op, const Stmt &self) override {
      const auto *c = op->value.as<CallNode>();
      if (c && c->name == intrinsic::kSyncThreads) return make_nop();
      return self;
    }
  };
  return Remover().mutate(s);
}

struct Matmul {
  te::Tensor A, B, C;
  Matmul(int m, int n, int k) {
    A = te::placeholder({m, k}, Float(32), "A");
    B = te::placeholder({k, n}, Float(32), "B");
    auto r = te::reduce_axis(k, "k");
    C = te::compute(
        {m, n}, [&](Var i, Var j) { return te::sum(A(i, r) * B(r, j), {r}); }, "C");
  }
};

// Tiles C over blocks and threads and stages tiles of A and B through shared memory, fetched by
// all threads of a block together.
void schedule_shared_matmul(te::Schedule &s, const Matmul &mm, bool double_buffer) {
  auto AS = s.cache_read(mm.A, "shared", {mm.C.op()});
  auto BS = s.cache_read(mm.B, "shared", {mm.C.op()});
  auto sc = s[mm.C];
  IterVar io, jo, ii, ji, ko, ki;
  sc.tile(sc.axis(0), sc.axis(1), 8, 8, &io, &jo, &ii, &ji);
  sc.split(sc.reduce_axis(0), 4, &ko, &ki);
  sc.reorder({io, jo, ii, ji, ko, ki});
  sc.bind(io, "blockIdx.y");
  sc.bind(jo, "blockIdx.x");
  sc.bind(ii, "threadIdx.y");
  sc.bind(ji, "threadIdx.x");
  for (const auto &t : {AS, BS}) {
    auto st = s[t];
    st.compute_at(sc, ko);
    IterVar f, fo, fi;
    st.fuse(st.axis(0), st.axis(1), &f);
    st.split(f, 8, &fo, &fi);
    st.bind(fi, "threadIdx.x");
    if (double_buffer) st.double_buffer();
  }
  (void)double_buffer;
}

TEST(GpuSchedules, SharedMemoryMatmulWithBarriers) {
  Matmul mm(16, 24, 12);
  auto s = te::create_schedule({mm.C});
  schedule_shared_matmul(*s, mm, false);
  auto f = testing::check_against_unscheduled(*s, {mm.A, mm.B, mm.C}, {{16, 12}, {12, 24}, {16, 24}}, 1e-4, 7,
                                              /*with_c=*/false);
  std::string text = to_string(f.body);
  EXPECT_NE(text.find("sync_threads()"), std::string::npos) << text;
  EXPECT_NE(text.find("scope shared"), std::string::npos) << text;
}

TEST(GpuSchedules, BarriersAreNeeded) {
  // The same kernel without its barriers computes something else in the simulation: the
  // barriers the compiler inserts are what makes it right.
  Matmul mm(16, 24, 12);
  auto s = te::create_schedule({mm.C});
  schedule_shared_matmul(*s, mm, false);
  LoweredFunc f = lower::lower(*s, {mm.A, mm.B, mm.C}, "mm");
  LoweredFunc nosync = f;
  nosync.body = ir_transform_stmt_remove_sync(f.body);
  auto ref = te::create_schedule({mm.C});
  LoweredFunc r = lower::lower(*ref, {mm.A, mm.B, mm.C}, "ref");
  auto args = testing::make_args(r, {{16, 12}, {12, 24}, {16, 24}}, 11);
  auto expect = testing::run_interp(r, args);
  auto got = testing::run_interp(nosync, args);
  EXPECT_GT(testing::max_diff(expect[2], got[2]), 1e-3);
}

TEST(GpuSchedules, DoubleBufferedSharedTiles) {
  Matmul mm(16, 24, 12);
  auto s = te::create_schedule({mm.C});
  schedule_shared_matmul(*s, mm, true);
  auto f = testing::check_against_unscheduled(*s, {mm.A, mm.B, mm.C}, {{16, 12}, {12, 24}, {16, 24}}, 1e-4, 9,
                                              /*with_c=*/false);
  std::string text = to_string(f.body);
  EXPECT_NE(text.find("floormod"), std::string::npos) << text;
}

TEST(CpuSchedules, DoubleBufferedLocalCache) {
  Matmul mm(16, 16, 32);
  auto s = te::create_schedule({mm.C});
  auto AL = s->cache_read(mm.A, "local", {mm.C.op()});
  auto sc = (*s)[mm.C];
  IterVar ko, ki;
  sc.split(sc.reduce_axis(0), 8, &ko, &ki);
  sc.reorder({sc.axis(0), ko, sc.axis(1), ki});
  (*s)[AL].compute_at(sc, ko);
  (*s)[AL].double_buffer();
  auto f = testing::check_against_unscheduled(*s, {mm.A, mm.B, mm.C}, {{16, 32}, {32, 16}, {16, 16}}, 1e-4);
  std::string text = to_string(f.body);
  EXPECT_NE(text.find("allocate A.local[float32 * 16]"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
