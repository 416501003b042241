// Lowering time of a conv2d (ResNet-18 3x3, 64 -> 64 channels at 56x56) under a 7-primitive
// schedule. There is no other tensor compiler on this machine to run beside it, so the line also
// reports the unscheduled lowering of the same operator measured in the same run, and the ratio.
//   lower_conv2d ms=<median> unscheduled_ms=<median> ratio=<ms / unscheduled_ms> primitives=7
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "compiler/lower/lower.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

struct Conv {
  te::Tensor X, W, P, Y;
  Conv() {
    const int n = 1, c = 64, h = 56, w = 56, oc = 64, k = 3, pad = 1;
    X = te::placeholder({n, c, h, w}, Float(32), "X");
    W = te::placeholder({oc, c, k, k}, Float(32), "W");
    P = te::compute(
        {n, c, h + 2 * pad, w + 2 * pad},
        [&](Var b, Var ci, Var y, Var x) {
          Expr inside = y >= pad && y < h + pad && x >= pad && x < w + pad;
          return if_then_else(inside, X(b, ci, y - pad, x - pad), make_zero(Float(32)));
        },
        "pad");
    auto rc = te::reduce_axis(c, "rc"), ry = te::reduce_axis(k, "ry"), rx = te::reduce_axis(k, "rx");
    Y = te::compute(
        {n, oc, h, w},
        [&](Var b, Var o, Var y, Var x) {
          return te::sum(P(b, rc, y + ry, x + rx) * W(o, rc, ry, rx), {rc, ry, rx});
        },
        "conv");
  }
};

double lower_ms(bool scheduled) {
  Conv cv;
  auto s = te::create_schedule({cv.Y});
  auto t0 = std::chrono::steady_clock::now();
  if (scheduled) {
    auto sy = (*s)[cv.Y];
    IterVar oo, oi, xo, xi, rco, rci, f;
    sy.split(sy.axis(1), 16, &oo, &oi);                                  // 1 split
    sy.split(sy.axis(3), 8, &xo, &xi);                                   // 2 split
    sy.split(sy.reduce_axis(0), 8, &rco, &rci);                          // 3 split
    sy.reorder({sy.axis(0), oo, sy.axis(2), xo, rco, sy.reduce_axis(1),  // 4 reorder
                sy.reduce_axis(2), rci, oi, xi});
    sy.fuse(sy.axis(0), oo, &f);  // 5 fuse
    sy.parallel(f);               // 6 parallel
    sy.vectorize(xi);             // 7 vectorize
    sy.unroll(oi);
    (*s)[cv.P].compute_at(sy, xo);
  }
  auto fn = lower::lower(*s, {cv.X, cv.W, cv.Y}, "conv2d");
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  std::vector<double> sched, plain;
  for (int i = 0; i < 21; ++i) {
    sched.push_back(lower_ms(true));
    plain.push_back(lower_ms(false));
  }
  double ms = median(sched), base = median(plain);
  std::printf("lower_conv2d ms=%.3f unscheduled_ms=%.3f ratio=%.2f primitives=7\n", ms, base, ms / base);
  return 0;
}
