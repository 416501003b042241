#pragma once
// A hand-written Kiln schedule for fp32 GEMM, C[M, N] = A[M, K] · B[K, N], on CPUs with SIMD:
//  - B is packed by a stage of its own into panels of `nr` columns, packedB[N / nr][K][nr], so the
//    inner loop reads it contiguously;
//  - C is computed in register tiles of mr x nr: an accumulator ("local" cache of C) that stays in
//    vector registers for the whole reduction over K, unrolled over its rows and vectors;
//  - tiles are visited in blocks of mb rows (A's block and B's panel stay in L2), and the blocks
//    of (rows, panels) run in parallel;
//  - columns are padded to whole panels when nr does not divide N, and C is copied out of the
//    padded product.
#include <algorithm>

#include "compiler/ir/op.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"

namespace kiln::bench {

struct GemmConfig {
  int lanes = 16;        // floats per vector register
  int mr = 8;            // rows of a register tile
  int nr = 32;           // columns of a register tile (a multiple of lanes)
  int mb = 64;           // rows of a block (a multiple of mr)
  int ku = 4;            // unrolling of the reduction
  bool pack_b = true;    // pack B into panels (pays off when many row tiles reuse each panel)
  bool parallel = true;  // run blocks in parallel (not worth waking threads for tiny problems)
};

// A configuration for the target's vector width and the problem's shape. Tile sizes divide M:
// a row tile that does not (a guarded tail) keeps the accumulator out of registers.
inline GemmConfig gemm_config(int vector_bits, int m, int n, int k) {
  GemmConfig c;
  c.lanes = std::max(4, vector_bits / 32);
  c.nr = 2 * c.lanes;
  // mr * nr / lanes accumulators: 16 of the 32 registers with AVX-512, 8 of the 16 otherwise.
  c.mr = 1;
  for (int r : {8, 6, 4, 3, 2}) {
    if (r <= (vector_bits >= 512 ? 8 : 4) && m % r == 0) {
      c.mr = r;
      break;
    }
  }
  int blocks = 1;
  for (int b = 8; b >= 1; --b) {
    if ((m / c.mr) % b == 0) {
      blocks = b;
      break;
    }
  }
  c.mb = c.mr * blocks;
  // Few rows: B is streamed once, so packing it would only add traffic; wider tiles keep more
  // accumulators busy.
  c.pack_b = m >= 32;
  c.parallel = 2.0 * m * n * k >= 8e6;
  if (c.mr == 1) c.nr = 4 * c.lanes;
  return c;
}

inline ir::LoweredFunc gemm_function(int M, int N, int K, const GemmConfig &c, const std::string &name = "gemm") {
  using namespace ir;
  auto A = te::placeholder({M, K}, Float(32), "A");
  auto B = te::placeholder({K, N}, Float(32), "B");
  // Columns are padded to whole panels: a tile never has a guarded tail, which would keep its
  // accumulator out of registers. The padding is zero in packedB and dropped when C is copied out.
  const int panels = (N + c.nr - 1) / c.nr;
  const int padded = panels * c.nr;
  auto packed = te::compute(
      {panels, K, c.nr},
      [&](Var j, Var k, Var jj) -> Expr {
        Expr n = j * c.nr + jj;
        if (N == padded) return B(k, n);
        return if_then_else(n < N, B(k, n), make_zero(Float(32)));
      },
      "packedB");
  auto k = te::reduce_axis(K, "k");
  auto P = te::compute(
      {M, padded},
      [&](Var i, Var j) {
        Expr b = packed(floordiv(j, c.nr), k, floormod(j, c.nr));
        if (!c.pack_b) b = N == padded ? B(k, j) : if_then_else(j < N, B(k, j), make_zero(Float(32)));
        return te::sum(A(i, k) * b, {k});
      },
      N == padded ? "C" : "C.padded");
  te::Tensor C = P;
  if (N != padded)
    C = te::compute(
        {M, N}, [&](Var i, Var j) { return P(i, j); }, "C");
  auto s = te::create_schedule({C});
  auto CC = s->cache_write(P, "local");

  // The padded product: blocks of mb rows by one panel, in parallel; register tiles inside.
  te::Stage sc = (*s)[P];
  IterVar mo, no, mi, ni, mio, mii, nio, nii, fused;
  sc.tile(sc.axis(0), sc.axis(1), c.mb, c.nr, &mo, &no, &mi, &ni);
  sc.split(mi, c.mr, &mio, &mii);
  sc.split(ni, c.lanes, &nio, &nii);
  sc.reorder({mo, no, mio, mii, nio, nii});
  sc.unroll(mii);
  sc.unroll(nio);
  sc.vectorize(nii);
  sc.fuse(mo, no, &fused);
  if (c.parallel) sc.parallel(fused);

  // The register tile: mr x nr accumulators over the whole reduction.
  te::Stage scc = (*s)[CC];
  scc.compute_at(sc, mio);
  IterVar mc = scc.axis(0), nc = scc.axis(1), kk = scc.reduce_axis(0), ko, ki, nco, nci;
  scc.split(kk, c.ku, &ko, &ki);
  scc.split(nc, c.lanes, &nco, &nci);
  scc.reorder({ko, ki, mc, nco, nci});
  scc.unroll(ki);
  scc.unroll(mc);
  scc.unroll(nco);
  scc.vectorize(nci);

  if (c.pack_b) {
    te::Stage sp = (*s)[packed];
    IterVar pj = sp.axis(0), pjj = sp.axis(2), pjo, pji;
    sp.split(pjj, c.lanes, &pjo, &pji);
    sp.unroll(pjo);
    sp.vectorize(pji);
    if (c.parallel) sp.parallel(pj);
  }

  if (N != padded) {
    te::Stage so = (*s)[C];
    IterVar jo, ji;
    so.split(so.axis(1), c.lanes, &jo, &ji);
    so.vectorize(ji);
    if (c.parallel) so.parallel(so.axis(0));
  }
  return lower::lower(*s, {A, B, C}, name);
}

}  // namespace kiln::bench
