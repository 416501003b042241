#include "deploy/vta/conv2d_program.h"

#include <algorithm>
#include <string>

namespace kiln::vta {

Conv2dResult run_conv2d(Runtime &rt, const Conv2dLayer &l, const Conv2dSchedule &s, const std::vector<int8_t> &input,
                        const std::vector<int8_t> &weight) {
  const VtaConfig &cfg = rt.config();
  const int bk = cfg.block();
  const int H = l.height, W = l.width, K = l.kernel, P = l.pad;
  if (cfg.batch() != 1 || cfg.inp_bits() != 8 || cfg.wgt_bits() != 8) {
    throw VtaRuntimeError("conv2d example: needs batch 1 and 8-bit inputs and weights");
  }
  if (l.in_channels % bk || l.out_channels % bk || H <= 0 || W <= 0 || K <= 0 || P < 0 || P > 15 || H + 2 * P < K ||
      W + 2 * P < K) {
    throw VtaRuntimeError("conv2d example: channels must be multiples of the block and the kernel fit the input");
  }
  const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1;
  const int T = s.oc_nthread;
  const int ICB = l.in_channels / bk, OCB = l.out_channels / bk;
  if ((T != 1 && T != 2) || OCB % T || s.tile_h <= 0 || OH % s.tile_h) {
    throw VtaRuntimeError("conv2d example: oc_nthread must be 1 or 2 and divide the output blocks; tile_h the height");
  }
  if (input.size() != static_cast<size_t>(l.in_channels) * H * W ||
      weight.size() != static_cast<size_t>(l.out_channels) * l.in_channels * K * K) {
    throw VtaRuntimeError("conv2d example: input or weight size does not match the layer");
  }
  const int th = s.tile_h, ocb_t = OCB / T;
  const int in_rows = th + K - 1, in_cols = W + 2 * P;
  const int inp_tile = ICB * in_rows * in_cols, wgt_tile = ocb_t * ICB * K * K, acc_tile = ocb_t * th * OW;
  if (inp_tile > cfg.inp_depth() / T || wgt_tile > cfg.wgt_depth() / T || acc_tile > cfg.acc_depth() / T) {
    throw VtaRuntimeError("conv2d example: a tile does not fit its share of the on-chip buffers; reduce tile_h");
  }

  // Pack and copy in.
  std::vector<int8_t> pin(input.size()), pw(weight.size());
  for (int c = 0; c < l.in_channels; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        pin[((static_cast<size_t>(c / bk) * H + y) * W + x) * bk + c % bk] =
            input[(static_cast<size_t>(c) * H + y) * W + x];
  for (int o = 0; o < l.out_channels; ++o)
    for (int i = 0; i < l.in_channels; ++i)
      for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) {
          const size_t e = ((static_cast<size_t>(o / bk) * ICB + i / bk) * K + ky) * K + kx;
          pw[(e * bk + o % bk) * bk + i % bk] =
              weight[((static_cast<size_t>(o) * l.in_channels + i) * K + ky) * K + kx];
        }
  const DramBuffer din = rt.alloc(pin.size()), dw = rt.alloc(pw.size());
  const DramBuffer dout = rt.alloc(static_cast<uint64_t>(l.out_channels) * OH * OW);
  rt.copy_to_device(din, pin.data(), pin.size());
  rt.copy_to_device(dw, pw.data(), pw.size());

  const int n_tiles = OH / th * T;
  for (int i = 0; i < n_tiles; ++i) {
    const int t = i % T, oh0 = i / T * th, ocb0 = t * ocb_t;
    const uint32_t inp_base = t * (cfg.inp_depth() / T), wgt_base = t * (cfg.wgt_depth() / T),
                   acc_base = t * (cfg.acc_depth() / T);
    const std::string tag = "." + std::to_string(t);
    // Load: wait until compute is done with this thread's buffers (the tile T before).
    if (i >= T) rt.dep_pop(Stage::Compute, Stage::Load);
    const int ih_lo = oh0 - P, ih_hi = oh0 - P + in_rows;  // [lo, hi) input rows, padding included
    const int y0 = std::max(0, -ih_lo), y1 = std::max(0, ih_hi - H);
    for (int icb = 0; icb < ICB; ++icb) {
      rt.load_2d(din, (static_cast<uint64_t>(icb) * H + std::max(ih_lo, 0)) * W, W, in_rows - y0 - y1, W, MemType::Inp,
                 inp_base + icb * in_rows * in_cols, Pad{uint32_t(y0), uint32_t(y1), uint32_t(P), uint32_t(P)});
    }
    rt.load_2d(dw, static_cast<uint64_t>(ocb0) * ICB * K * K, wgt_tile, 1, wgt_tile, MemType::Wgt, wgt_base);
    rt.dep_push(Stage::Load, Stage::Compute);
    // Compute: wait for the loads and for the store of the tile T before (its OUT rows).
    rt.dep_pop(Stage::Load, Stage::Compute);
    if (i >= T) rt.dep_pop(Stage::Store, Stage::Compute);
    rt.push_gemm(
        "conv.reset" + tag,
        [&](UopKernelBuilder &k) {
          k.loop_begin(ocb_t, th * OW, 0, 0);
          k.loop_begin(th, OW, 0, 0);
          for (int ow = 0; ow < OW; ++ow) k.push(acc_base + ow, 0, 0);
          k.loop_end();
          k.loop_end();
        },
        true);
    rt.push_gemm("conv.gemm" + tag, [&](UopKernelBuilder &k) {
      k.loop_begin(ocb_t, th * OW, 0, ICB * K * K);
      k.loop_begin(th, OW, in_cols, 0);
      for (int icb = 0; icb < ICB; ++icb)
        for (int ky = 0; ky < K; ++ky)
          for (int kx = 0; kx < K; ++kx)
            for (int ow = 0; ow < OW; ++ow)
              k.push(acc_base + ow, inp_base + (icb * in_rows + ky) * in_cols + ow + kx,
                     wgt_base + (icb * K + ky) * K + kx);
      k.loop_end();
      k.loop_end();
    });
    auto whole_tile = [&](UopKernelBuilder &k) {
      k.loop_begin(acc_tile, 1, 1);
      k.push(acc_base, acc_base);
      k.loop_end();
    };
    rt.push_alu("conv.epilogue" + tag, whole_tile, AluOp::Shr, l.shift);
    rt.push_alu("conv.epilogue" + tag, whole_tile, AluOp::Max, 0);
    rt.push_alu("conv.epilogue" + tag, whole_tile, AluOp::Min, 127);
    rt.dep_push(Stage::Compute, Stage::Load);
    rt.dep_push(Stage::Compute, Stage::Store);
    // Store.
    rt.dep_pop(Stage::Compute, Stage::Store);
    for (int o = 0; o < ocb_t; ++o) {
      rt.store_2d(dout, (static_cast<uint64_t>(ocb0 + o) * OH + oh0) * OW, th * OW, 1, th * OW, acc_base + o * th * OW);
    }
    rt.dep_push(Stage::Store, Stage::Compute);
  }
  // Drain the tokens of the last T tiles that no later tile consumed.
  for (int i = 0; i < std::min(n_tiles, T); ++i) {
    rt.dep_pop(Stage::Compute, Stage::Load);
    rt.dep_pop(Stage::Store, Stage::Compute);
  }
  Conv2dResult r;
  r.counters = rt.synchronize();
  std::vector<int8_t> packed(dout.bytes);
  rt.copy_from_device(packed.data(), dout, packed.size());
  r.output.resize(packed.size());
  for (int c = 0; c < l.out_channels; ++c)
    for (int y = 0; y < OH; ++y)
      for (int x = 0; x < OW; ++x)
        r.output[(static_cast<size_t>(c) * OH + y) * OW + x] =
            packed[((static_cast<size_t>(c / bk) * OH + y) * OW + x) * bk + c % bk];
  rt.free(din);
  rt.free(dw);
  rt.free(dout);
  return r;
}

}  // namespace kiln::vta
