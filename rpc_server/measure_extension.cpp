#include "rpc_server/measure_extension.h"

namespace kiln::rpc {

ops::Registry extended_registry(const MeasureExtension &extension) {
  ops::Registry registry = ops::Registry::builtin();
  if (extension.add_templates) extension.add_templates(registry);
  return registry;
}

}  // namespace kiln::rpc
