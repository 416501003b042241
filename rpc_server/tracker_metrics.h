#pragma once
// The tracker's metrics, read from the Tracker at every scrape:
//   kiln_tracker_runners{device_key,state}      gauge: registered runners, state free|busy|quarantined
//   kiln_tracker_queue_length{device_key}       gauge: acquire requests waiting for a runner
//   kiln_tracker_leases_active                  gauge: leases held now
//   kiln_tracker_leases_granted_total           counter
//   kiln_tracker_leases_released_total          counter: given back by their holder
//   kiln_tracker_leases_expired_total           counter: revoked (unused too long, runner lost)
//   kiln_tracker_runners_registered_total       counter
//   kiln_tracker_runners_lost_total             counter: dropped for a heartbeat timeout
namespace kiln::rpc {

class MetricsRegistry;
class Tracker;

// Registers the metrics above in `registry`; `tracker` must outlive the registry's renders.
void add_tracker_metrics(MetricsRegistry &registry, const Tracker &tracker);

}  // namespace kiln::rpc
