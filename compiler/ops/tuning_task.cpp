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

TunedChoice choose_tuned_config(const ConfigLookup *configs, const Task &kernel) {
  TunedChoice c;
  if (!configs) return c;
  const std::optional<TunedConfig> tuned = configs->best(tuning_task(kernel).workload(), kernel.target().str());
  if (!tuned) return c;
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
