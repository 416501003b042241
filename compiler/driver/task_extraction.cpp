#include "compiler/driver/task_extraction.h"

#include <map>

#include "compiler/driver/node_kernel.h"
#include "compiler/driver/target.h"
#include "compiler/graph/op_def.h"
#include "compiler/ops/tuning_task.h"

namespace kiln::driver {

using ::kiln::detail::concat;

TaskExtraction extract_tasks(const graph::Graph &g, const std::string &target) {
  const ops::Target resolved = resolve_target(target);
  TaskExtraction x;
  std::map<std::string, size_t> by_key;
  for (const graph::Node &n : g.nodes()) {
    const graph::OpDef *def = graph::find_op(n.op);
    if (!def) throw graph::GraphError(concat(n.describe(), ": unknown op type '", n.op, "'"));
    if (!needs_kernel(g, n, *def)) continue;
    const double flops = graph::node_flops(g, n);
    graph::Kernel kernel;
    std::optional<ops::Task> task;
    try {
      kernel = def->kernel(graph::OpContext(g, n));
      if (tuned_as_task(n, kernel))
        task = ops::tuning_task(ops::Task(kernel.template_name, kernel.template_args, resolved));
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
