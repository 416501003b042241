#pragma once
// What a template kernel is tuned as, and the config the compiler builds it with from the tuning
// log. One contract for the graph passes that choose layouts from tuned configs, the executor and
// the compiler that build kernels with them, and the task extraction that tunes them.
//
// A kernel with an epilogue (a bias, an activation, a residual add fused into a conv or a dense) is
// tuned as its anchor's workload: the same template and arguments without the epilogue, so that
// conv+relu and conv+add+relu of one shape are one task and one record serves both.
//
// A blocked convolution (conv2d_nchwc.x86, depthwise_conv2d_nchwc.x86) is built with its blocks
// fixed by its arguments (ic_bn, oc_bn; c_bn), the blocks the layout pass chose, but tuned with the
// blocks as knobs, as AutoTVM tunes conv2d_NCHWc: its task is the convolution in NCHW terms, the
// tuner measures every block choice in its own layout, and the layout pass takes each convolution's
// blocks from the records of that task (graph/passes/alter_layout.cpp). The kernel then takes the
// fastest record whose blocks are its own. A record of the fixed-block workload (a log from when
// those were the tasks; a prepacked dense layer, whose block stays fixed) serves it too.
#include <optional>
#include <string>

#include "compiler/ops/config_lookup.h"
#include "compiler/ops/registry.h"

namespace kiln::ops {

// The task `kernel` is tuned and looked up as: the same template and arguments without the
// epilogue where that leaves the config space as it is (same fingerprint, so one config applies to
// both), and for a blocked convolution without its fixed blocks (free_blocks_when_tuned).
Task tuning_task(const Task &kernel);

// Whether `kernel`'s fixed blocks are knobs of its tuning task: a blocked convolution's (the layout
// pass chooses them from the tuning log), not a prepacked dense layer's.
bool free_blocks_when_tuned(const Task &kernel);

// `kernel` with the blocks its arguments fix (ic_bn, oc_bn, c_bn; a prepacked dense's bn) made
// knobs again: the template's own choice of blocks is this task's default config. `kernel` itself
// when it fixes none.
Task without_fixed_blocks(const Task &kernel);

// How many of a free-block task's best configs are read to find the fastest with given blocks (the
// layout pass's candidates, and a fixed-block kernel's record).
inline constexpr int64_t kBlockCandidates = 512;

// How much faster than the default config's own record a tuned record must be for the compiler to
// build the tuned config instead (and for the layout pass to change a convolution's blocks for it):
// records of one config on a loaded machine spread by 5-10 %, and a config that won the tuning by
// less than that can lose in the model. On a ResNet-18 log tuned for 3 minutes, 2 % winners (a
// 512-channel 3x3 layer with input blocks of 1) ran 1.6x slower than the default in the model and
// made the tuned model 0.86x the untuned one (docs/graph.md, "Tuned layouts").
inline constexpr double kTieMargin = 0.05;

// Whether a record of `tuned_s` seconds beats one of `default_s` by more than kTieMargin.
bool clearly_faster(double tuned_s, double default_s);

// The config `kernel` is built with, from `configs` (may be null): the faster of the record of its
// own workload without the epilogue (fixed blocks and all) and, for fixed blocks, the fastest record
// of the free-block task whose blocks are the fixed ones; but the default config (with its record)
// where the log has a record of it that the faster one does not beat clearly (clearly_faster), and
// where no record has the kernel's blocks but the free-block task's default config has one (the
// layout pass weighed the kernel's blocks by it: graph/passes/alter_layout.cpp).
struct TunedChoice {
  std::optional<autotune::Config> config;  // the tuned config; nullopt: the template's default
  std::optional<TunedConfig> record;       // the record it came from (or the stale one)
  bool found = false;                      // the lookup had a record for the kernel
  bool exact_target = false;               // ... measured on this exact target (else its device class)
  bool default_kept = false;               // config is the default: no record beat its own clearly
  std::string stale;                       // a record the kernel's space refuses: why (config unset)
};
TunedChoice choose_tuned_config(const ConfigLookup *configs, const Task &kernel);

}  // namespace kiln::ops
