#include "compiler/driver/task_extraction.h"

#include <map>

#include "compiler/driver/target.h"
#include "compiler/graph/op_def.h"

namespace kiln::driver {

using ::kiln::detail::concat;

ops::Task tuning_task(const ops::Task &kernel) {
  const contracts::Json &args = kernel.workload().args;
  const contracts::Json *epilogue = args.is_object() ? args.find("epilogue") : nullptr;
  if (!epilogue || !epilogue->is_array() || epilogue->size() == 0) return kernel;
  contracts::Json anchor = args;
  anchor.set("epilogue", contracts::Json::array());
  ops::Task task(kernel.workload().template_name, anchor, kernel.target());
  if (task.space().fingerprint() != kernel.space().fingerprint()) return kernel;
  return task;
}

TaskExtraction extract_tasks(const graph::Graph &g, const std::string &target) {
  const ops::Target resolved = resolve_target(target);
  TaskExtraction x;
  std::map<std::string, size_t> by_key;
  for (const graph::Node &n : g.nodes()) {
    const graph::OpDef *def = graph::find_op(n.op);
    if (!def) throw graph::GraphError(concat(n.describe(), ": unknown op type '", n.op, "'"));
    if (def->view || def->evaluate) continue;
    bool empty = false;
    for (graph::ValueId o : n.outputs) empty = empty || g.value(o).type.numel() == 0;
    if (empty) continue;
    const double flops = graph::node_flops(g, n);
    graph::Kernel kernel;
    std::optional<ops::Task> task;
    try {
      kernel = def->kernel(graph::OpContext(g, n));
      if (!kernel.template_name.empty())
        task = tuning_task(ops::Task(kernel.template_name, kernel.template_args, resolved));
    } catch (const graph::GraphError &) {
      throw;
    } catch (const UserError &e) {
      throw graph::GraphError(concat(n.describe(), ": ", e.what()));
    }
    if (!task) {
      ++x.other_nodes;
      x.other_flops += flops;
      continue;
    }
    ++x.template_nodes;
    x.template_flops += flops;
    auto [it, added] = by_key.emplace(task->key(), x.tasks.size());
    if (added) {
      ExtractedTask t;
      t.template_name = task->workload().template_name;
      t.args = task->workload().args;
      t.workload_key = task->key();
      x.tasks.push_back(std::move(t));
    }
    ExtractedTask &t = x.tasks[it->second];
    ++t.weight;
    t.flops += flops;
    t.nodes.push_back(n.name);
  }
  return x;
}

}  // namespace kiln::driver
