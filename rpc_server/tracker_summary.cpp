#include "rpc_server/tracker_summary.h"

namespace kiln::rpc {

std::string runner_state_name(kiln::v1::RunnerState state) {
  // Not a switch: the generated enum's sentinel values differ between protobuf versions.
  if (state == kiln::v1::RUNNER_STATE_FREE) return "free";
  if (state == kiln::v1::RUNNER_STATE_BUSY) return "busy";
  if (state == kiln::v1::RUNNER_STATE_QUARANTINED) return "quarantined";
  return "unknown";
}

}  // namespace kiln::rpc
