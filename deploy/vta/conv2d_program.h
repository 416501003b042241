#pragma once
// A packed int8 conv2d layer (batch 1, stride 1) built by hand through the runtime, with the
// epilogue of the reference conv benchmark: (conv >> shift), clipped to [0, 127], as int8. It is
// the worked example of the runtime API (DMA with padding, cached micro-op kernels, token
// ping-pong between virtual threads) and the workload of the VTA benchmark.
//
// Layouts in DRAM: input [IC/16][H][W][16], weights [OC/16][IC/16][K][K][16 oc][16 ic], output
// [OC/16][H][W][16]. The output is cut into tiles of tile_h rows; with oc_nthread = 2 the output
// channels are split between two virtual threads, each with its own half of the input, weight and
// accumulator buffers, and tokens let one thread load while the other computes.
#include <cstdint>
#include <vector>

#include "deploy/vta/runtime.h"

namespace kiln::vta {

struct Conv2dLayer {
  int height = 56;
  int width = 56;
  int in_channels = 64;
  int out_channels = 64;
  int kernel = 3;
  int pad = 1;
  int shift = 8;
};

struct Conv2dSchedule {
  int tile_h = 2;      // output rows per tile (must divide the height)
  int oc_nthread = 1;  // 1 or 2 virtual threads over the output channels
};

struct Conv2dResult {
  std::vector<int8_t> output;  // NCHW, batch 1
  SimCounters counters;
};

// Runs the layer on `rt` with inputs in NCHW (batch 1) and weights in OIHW. Throws
// VtaRuntimeError when the shapes are not multiples of the block, or a tile does not fit its share
// of the buffers.
Conv2dResult run_conv2d(Runtime &rt, const Conv2dLayer &layer, const Conv2dSchedule &schedule,
                        const std::vector<int8_t> &input, const std::vector<int8_t> &weight);

}  // namespace kiln::vta
