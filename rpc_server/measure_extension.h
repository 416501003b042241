#pragma once
// MeasureExtension: what a build of the runner may add to its measurement: operator templates
// beyond the builtin library, and hooks that a measurement worker calls around the build and the
// run of a candidate. The production kiln-runner has none. A runner's pool and its workers must
// have the same extension (the pool refuses a workload whose template it does not know), which
// they do when the workers are the runner's own executable started with --measure-worker and
// that executable passes its extension to runner_daemon_main().
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/ops/registry.h"
#include "deploy/tensor.h"

namespace kiln::rpc {

// Hooks on one candidate inside a measurement worker, each called in the phase it names. Whatever
// a hook does (crash, hang, throw, sleep) the worker classifies as it would the candidate doing it.
class CandidateHooks {
 public:
  virtual ~CandidateHooks() = default;
  // Before the candidate is lowered and compiled; the build has `build_timeout_ms` in all.
  virtual void before_compile(uint32_t build_timeout_ms) { (void)build_timeout_ms; }
  // Right after the warm-up call of the kernel has returned.
  virtual void after_warmup_call() {}
  // On the warm-up call's outputs, copied to the host, before they are checked against the
  // reference.
  virtual void inspect_outputs(std::vector<deploy::Tensor> &outputs) { (void)outputs; }
};

struct MeasureExtension {
  // Adds templates to a registry that holds the builtin library.
  std::function<void(ops::Registry &)> add_templates;
  // The hooks for a candidate of `template_name` with `config`; null for none.
  std::function<std::unique_ptr<CandidateHooks>(const std::string &template_name, const autotune::Config &config)>
      hooks;
};

// The builtin operator library plus the extension's templates.
ops::Registry extended_registry(const MeasureExtension &extension);

}  // namespace kiln::rpc
