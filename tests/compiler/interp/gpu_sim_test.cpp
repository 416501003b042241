// GPU kernels in the interpreter: thread blocks, shared and local memory, sync_threads barriers.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/codegen/c/codegen_c.h"
#include "compiler/interp/interpreter.h"
#include "tests/compiler/interp/both_backends.h"

namespace kiln {
namespace {

using deploy::Tensor;
using ir::Buffer;
using ir::Expr;
using ir::Float;
using ir::ForKind;
using ir::Stmt;
using ir::Var;
using test::alloc_buffer;
using test::expect_error;
using test::filled;
using test::load;
using test::loop;
using test::make_func;
using test::make_tensor;
using test::store;
using test::values;

Stmt sync_threads() {
  return ir::EvaluateNode::make(
      ir::CallNode::make(ir::Int(32), ir::intrinsic::kSyncThreads, {}, ir::CallNode::Kind::Intrinsic));
}

Stmt thread_loop(const Var &v, int extent, Stmt body, const std::string &tag) {
  return loop(v, extent, std::move(body), ForKind::ThreadBinding, tag);
}

std::vector<float> iota(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * i + 1;
  return v;
}

constexpr int kBlocks = 3;
constexpr int kThreads = 64;

// Each block reverses its slice of A through shared memory: thread t writes shared[t] and, after
// the barrier (if any), reads shared[N - 1 - t], which another thread wrote.
ir::LoweredFunc shared_reverse(bool barrier, bool alloc_inside_thread_loop) {
  Buffer A = ir::make_buffer("A", Float(32), {kBlocks * kThreads});
  Buffer B = ir::make_buffer("B", Float(32), {kBlocks * kThreads});
  Buffer sh = alloc_buffer("sh", Float(32), "shared");
  Var bx("bx"), tx("tx");
  std::vector<Stmt> steps = {store(sh, load(A, bx * kThreads + tx), tx)};
  if (barrier) steps.push_back(sync_threads());
  steps.push_back(store(B, load(sh, Expr(kThreads - 1) - tx), bx * kThreads + tx));
  Stmt per_thread = ir::BlockNode::make(steps);
  auto alloc = [&](Stmt body) { return ir::AllocateNode::make(sh.data, Float(32), {kThreads}, "shared", body); };
  Stmt block = alloc_inside_thread_loop ? thread_loop(tx, kThreads, alloc(per_thread), "threadIdx.x")
                                        : alloc(thread_loop(tx, kThreads, per_thread, "threadIdx.x"));
  return make_func("reverse", {A, B}, {}, loop(bx, kBlocks, block, ForKind::ThreadBinding, "blockIdx.x"));
}

void expect_reversed(const std::vector<float> &a, const std::vector<float> &b) {
  for (int blk = 0; blk < kBlocks; ++blk) {
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_EQ(b[blk * kThreads + t], a[blk * kThreads + kThreads - 1 - t]) << "block " << blk << " thread " << t;
    }
  }
}

TEST(GpuSimTest, SharedMemoryReversalWithBarrier) {
  const auto a = iota(kBlocks * kThreads, 0.5f);
  for (bool inside : {false, true}) {
    SCOPED_TRACE(inside ? "allocation inside the thread loop" : "allocation outside the thread loop");
    Tensor B = filled<float>({kBlocks * kThreads}, 0.0f);
    interp::run(shared_reverse(true, inside), {make_tensor<float>({kBlocks * kThreads}, a), B});
    expect_reversed(a, values<float>(B));
  }
}

TEST(GpuSimTest, SharedMemoryReversalWithoutBarrierGoesWrong) {
  // Threads that run ahead of the writer read memory that is not written yet: the barrier is what
  // makes the kernel above correct.
  const auto a = iota(kBlocks * kThreads, 0.5f);
  Tensor B = filled<float>({kBlocks * kThreads}, 0.0f);
  interp::run(shared_reverse(false, false), {make_tensor<float>({kBlocks * kThreads}, a), B});
  const auto b = values<float>(B);
  int wrong = 0;
  for (int i = 0; i < kBlocks * kThreads; ++i) {
    const int blk = i / kThreads, t = i % kThreads;
    if (!(b[i] == a[blk * kThreads + kThreads - 1 - t])) ++wrong;
  }
  EXPECT_GT(wrong, 0);
}

TEST(GpuSimTest, LocalMemoryIsPerThreadAcrossABarrier) {
  const int n = 32;
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Buffer sh = alloc_buffer("sh", Float(32), "shared");
  Buffer loc = alloc_buffer("loc", Float(32), "local");
  Var tx("tx");
  Stmt body = ir::AllocateNode::make(
      loc.data, Float(32), {1}, "local",
      ir::BlockNode::make({store(loc, load(A, tx) * 2.0f, 0), store(sh, load(A, tx), tx), sync_threads(),
                           store(B, load(loc, 0) + load(sh, Expr(n - 1) - tx), tx)}));
  auto f =
      make_func("local", {A, B}, {},
                ir::AllocateNode::make(sh.data, Float(32), {n}, "shared", thread_loop(tx, n, body, "threadIdx.x")));
  const auto a = iota(n, 1.0f);
  Tensor Bt = filled<float>({n}, 0.0f);
  interp::run(f, {make_tensor<float>({n}, a), Bt});
  const auto b = values<float>(Bt);
  for (int t = 0; t < n; ++t) EXPECT_EQ(b[t], 2 * a[t] + a[n - 1 - t]) << t;
}

TEST(GpuSimTest, TwoDimensionalBlockTransposeThroughSharedTile) {
  const int ty_n = 4, tx_n = 8;
  Buffer A = ir::make_buffer("A", Float(32), {ty_n, tx_n});
  Buffer B = ir::make_buffer("B", Float(32), {tx_n, ty_n});
  Buffer tile = alloc_buffer("tile", Float(32), "shared");
  Var tx("tx"), ty("ty");
  // Thread (ty, tx) loads A[ty][tx]; after the barrier thread number l = ty * 8 + tx writes
  // B[r][c] = A[c][r] for r = l / 4, c = l % 4: an element another thread loaded.
  Expr l = ty * tx_n + tx;
  Expr r = ir::floordiv(l, ty_n), c = ir::floormod(l, ty_n);
  Stmt body = ir::BlockNode::make({store(tile, load(A, ty * tx_n + tx), ty * tx_n + tx), sync_threads(),
                                   store(B, load(tile, c * tx_n + r), r * ty_n + c)});
  auto f = make_func(
      "transpose", {A, B}, {},
      ir::AllocateNode::make(tile.data, Float(32), {ty_n * tx_n}, "shared",
                             thread_loop(ty, ty_n, thread_loop(tx, tx_n, body, "threadIdx.x"), "threadIdx.y")));
  const auto a = iota(ty_n * tx_n, 1.0f);
  Tensor Bt = filled<float>({tx_n, ty_n}, 0.0f);
  interp::run(f, {make_tensor<float>({ty_n, tx_n}, a), Bt});
  const auto b = values<float>(Bt);
  for (int i = 0; i < tx_n; ++i) {
    for (int j = 0; j < ty_n; ++j) EXPECT_EQ(b[i * ty_n + j], a[j * tx_n + i]) << i << "," << j;
  }
}

TEST(GpuSimTest, BarriersInsideALoopWithUniformBounds) {
  const int n = 8, chunks = 5;
  Buffer A = ir::make_buffer("A", Float(32), {chunks * n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Buffer sh = alloc_buffer("sh", Float(32), "shared");
  Buffer acc = alloc_buffer("acc", Float(32), "local");
  Var tx("tx"), k("k");
  // Each round, thread t adds the value its neighbour t + 1 loaded; the second barrier keeps the
  // next round's loads from overwriting what a slow neighbour has not read yet.
  Stmt round = ir::BlockNode::make({store(sh, load(A, k * n + tx), tx), sync_threads(),
                                    store(acc, load(acc, 0) + load(sh, ir::floormod(tx + 1, n)), 0), sync_threads()});
  Stmt body = ir::AllocateNode::make(
      acc.data, Float(32), {1}, "local",
      ir::BlockNode::make({store(acc, Expr(0.0f), 0), loop(k, chunks, round), store(B, load(acc, 0), tx)}));
  auto f =
      make_func("rounds", {A, B}, {},
                ir::AllocateNode::make(sh.data, Float(32), {n}, "shared", thread_loop(tx, n, body, "threadIdx.x")));
  const auto a = iota(chunks * n, 0.25f);
  Tensor Bt = filled<float>({n}, 0.0f);
  interp::run(f, {make_tensor<float>({chunks * n}, a), Bt});
  const auto b = values<float>(Bt);
  for (int t = 0; t < n; ++t) {
    float want = 0;
    for (int kk = 0; kk < chunks; ++kk) want += a[kk * n + (t + 1) % n];
    EXPECT_EQ(b[t], want) << t;
  }
}

TEST(GpuSimTest, BarrierReachedByOnlySomeThreadsIsAnError) {
  Buffer A = ir::make_buffer("A", Float(32), {8});
  Var tx("tx"), k("k");
  auto in_if = make_func(
      "diverge", {A}, {},
      thread_loop(tx, 8,
                  ir::BlockNode::make({store(A, Expr(1.0f), tx), ir::IfThenElseNode::make(tx < 4, sync_threads())}),
                  "threadIdx.x"));
  expect_error<RuntimeError>([&] { interp::run(in_if, {filled<float>({8}, 0.0f)}); },
                             {"divergent barrier", "(tx < 4)", "threadIdx.x=0", "threadIdx.x=4"});
  auto in_loop = make_func("diverge_loop", {A}, {}, thread_loop(tx, 8, loop(k, tx, sync_threads()), "threadIdx.x"));
  expect_error<RuntimeError>([&] { interp::run(in_loop, {filled<float>({8}, 0.0f)}); },
                             {"divergent barrier", "loop k", "threadIdx.x=0", "threadIdx.x=1"});
}

TEST(GpuSimTest, ThreadLoopsWithoutBarriersRunInTheCBackEndToo) {
  const int n = 100, threads = 32;
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Var bx("bx"), tx("tx"), vt("vt");
  Expr i = (bx * 2 + vt) * threads + tx;
  Stmt body = ir::IfThenElseNode::make(ir::likely(i < n), store(B, load(A, i) * 3.0f, i));
  Stmt kernel =
      loop(bx, 2, thread_loop(tx, threads, loop(vt, 2, body, ForKind::ThreadBinding, "vthread"), "threadIdx.x"),
           ForKind::ThreadBinding, "blockIdx.x");
  auto f = make_func("scale", {A, B}, {}, kernel);
  const auto a = iota(n, 1.0f);
  auto r = test::run_both(f, {make_tensor<float>({n}, a), filled<float>({n}, 0.0f)});
  test::for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto b = values<float>(out[1]);
    for (int x = 0; x < n; ++x) EXPECT_EQ(b[x], 3 * a[x]) << x;
  });
}

TEST(GpuSimTest, TheCBackEndRejectsBarriersAsAUserError) {
  try {
    codegen::codegen_c(shared_reverse(true, false));
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("C back end cannot run thread loops with barriers"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
