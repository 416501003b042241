#pragma once
// The tracker's summary (kiln.v1.Tracker/Summary) as its readers show it: `kiln farm status` and
// the dashboard name a runner's state the same way.
#include <string>

#include "kiln/v1/tracker.pb.h"

namespace kiln::rpc {

// "free", "busy", "quarantined", or "unknown" for a state this build does not know (a newer
// tracker's).
std::string runner_state_name(kiln::v1::RunnerState state);

}  // namespace kiln::rpc
