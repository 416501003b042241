#include "compiler/ops/tuning_task.h"

namespace kiln::ops {

Task tuning_task(const Task &kernel) {
  const contracts::Json &args = kernel.workload().args;
  const contracts::Json *epilogue = args.is_object() ? args.find("epilogue") : nullptr;
  if (!epilogue || !epilogue->is_array() || epilogue->size() == 0) return kernel;
  contracts::Json anchor = args;
  anchor.set("epilogue", contracts::Json::array());
  Task task(kernel.workload().template_name, anchor, kernel.target());
  if (task.space().fingerprint() != kernel.space().fingerprint()) return kernel;
  return task;
}

namespace {

const char *const kBlockArgs[] = {"ic_bn", "oc_bn", "c_bn", "bn"};

// A config of the free-block task `free` in the space of `kernel` (the same knobs, the blocks
// restricted to the fixed ones); nullopt when its blocks are others.
std::optional<autotune::Config> with_fixed_blocks(const Task &kernel, const Task &free,
                                                  const contracts::ConfigRecord &record) {
  try {
    const autotune::Config f = free.space().from_record(record);
    std::vector<std::pair<std::string, contracts::Json>> values;
    for (const autotune::Knob &k : kernel.space().knobs()) {
      if (!f.has(k.name)) return std::nullopt;
      values.emplace_back(k.name, f.value(k.name));
    }
    return kernel.space().from_values(values);
  } catch (const UserError &) {
    return std::nullopt;
  }
}

}  // namespace

Task without_fixed_blocks(const Task &kernel) {
  const contracts::Json &args = kernel.workload().args;
  if (!args.is_object()) return kernel;
  contracts::Json free = contracts::Json::object();
  bool fixed = false;
  for (const auto &[k, v] : args.as_object()) {
    bool block = false;
    for (const char *b : kBlockArgs) block = block || k == b;
    if (block) {
      fixed = true;
    } else {
      free.set(k, v);
    }
  }
  if (!fixed) return kernel;
  return Task(kernel.workload().template_name, free, kernel.target());
}

TunedChoice choose_tuned_config(const ConfigLookup *configs, const Task &kernel) {
  TunedChoice c;
  if (!configs) return c;
  std::optional<TunedConfig> tuned = configs->best(tuning_task(kernel).workload(), kernel.target().str());
  if (!tuned) {
    // An older record with the blocks as knobs, where they are the fixed ones.
    const Task free = without_fixed_blocks(kernel);
    if (free.key() == kernel.key()) return c;
    const std::optional<TunedConfig> old = configs->best(tuning_task(free).workload(), kernel.target().str());
    if (!old) return c;
    const std::optional<autotune::Config> cfg = with_fixed_blocks(kernel, tuning_task(free), old->config);
    if (!cfg) return c;
    c.found = true;
    c.exact_target = old->exact_target;
    c.config = cfg;
    return c;
  }
  c.found = true;
  c.exact_target = tuned->exact_target;
  try {
    c.config = kernel.space().from_record(tuned->config);
  } catch (const UserError &e) {
    c.stale = e.what();
  }
  return c;
}

}  // namespace kiln::ops
