#pragma once
// What a template kernel is tuned as, and the config the compiler builds it with from the tuning
// log. One contract for the graph passes that choose layouts from tuned configs, the executor and
// the compiler that build kernels with them, and the task extraction that tunes them.
//
// A kernel with an epilogue (a bias, an activation, a residual add fused into a conv or a dense) is
// tuned as its anchor's workload: the same template and arguments without the epilogue, so that
// conv+relu and conv+add+relu of one shape are one task and one record serves both.
//
// A blocked convolution (conv2d_nchwc.x86, depthwise_conv2d_nchwc.x86) is built and tuned with its
// blocks fixed by its arguments (ic_bn, oc_bn; c_bn), the blocks the layout pass chose for the whole
// graph: its space tunes the rest of the schedule, and no tuned config changes the layout. A record
// of the same workload with the blocks as knobs (a log from before the blocks were fixed) still
// serves it when its blocks are the fixed ones.
#include <optional>
#include <string>

#include "compiler/ops/config_lookup.h"
#include "compiler/ops/registry.h"

namespace kiln::ops {

// The task `kernel` is tuned and looked up as: the same template and arguments without the
// epilogue where that leaves the config space as it is (same fingerprint, so one config applies to
// both); otherwise `kernel` itself.
Task tuning_task(const Task &kernel);

// `kernel` with the blocks its arguments fix (ic_bn, oc_bn, c_bn; a prepacked dense's bn) made
// knobs again: the template's own choice of blocks is this task's default config. `kernel` itself
// when it fixes none.
Task without_fixed_blocks(const Task &kernel);

// The config `kernel` is built with, from `configs` (may be null): the record of its tuning task,
// else for fixed blocks the record of the free-block tuning task when its blocks are the fixed ones.
struct TunedChoice {
  std::optional<autotune::Config> config;  // the tuned config; nullopt: the template's default
  bool found = false;                      // the lookup had a record for the tuning task
  bool exact_target = false;               // ... measured on this exact target (else its device class)
  std::string stale;                       // a record the kernel's space refuses: why (config unset)
};
TunedChoice choose_tuned_config(const ConfigLookup *configs, const Task &kernel);

}  // namespace kiln::ops
