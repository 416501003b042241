#include "rpc_server/tracker_metrics.h"

#include "rpc_server/metrics.h"
#include "rpc_server/tracker.h"

namespace kiln::rpc {

void add_tracker_metrics(MetricsRegistry &registry, const Tracker &tracker) {
  auto &runners =
      registry.gauge("kiln_tracker_runners", "Registered runners by device key and state (free, busy, quarantined).",
                     {"device_key", "state"});
  auto &queue = registry.gauge("kiln_tracker_queue_length", "Acquire requests waiting for a runner, by device key.",
                               {"device_key"});
  auto &active = registry.gauge("kiln_tracker_leases_active", "Leases held now.");
  auto &granted = registry.counter("kiln_tracker_leases_granted_total", "Leases granted.");
  auto &released = registry.counter("kiln_tracker_leases_released_total", "Leases given back by their holder.");
  auto &expired = registry.counter("kiln_tracker_leases_expired_total",
                                   "Leases revoked: unused for the lease idle timeout, or their runner was lost.");
  auto &registered = registry.counter("kiln_tracker_runners_registered_total", "Runner registrations.");
  auto &lost = registry.counter("kiln_tracker_runners_lost_total", "Runners dropped for a heartbeat timeout.");
  registry.on_collect([&, &tracker = tracker] {
    runners.clear();
    queue.clear();
    int busy = 0;
    for (const DeviceSummary &d : tracker.summary()) {
      runners.with({d.device_key, "free"}).set(d.free_runners);
      runners.with({d.device_key, "busy"}).set(d.busy_runners);
      runners.with({d.device_key, "quarantined"}).set(d.quarantined_runners);
      queue.with({d.device_key}).set(d.queue_length);
      busy += d.busy_runners;
    }
    active.get().set(busy);
    const TrackerCounts c = tracker.counts();
    granted.get().set_total(static_cast<double>(c.leases_granted));
    released.get().set_total(static_cast<double>(c.leases_released));
    expired.get().set_total(static_cast<double>(c.leases_expired));
    registered.get().set_total(static_cast<double>(c.runners_registered));
    lost.get().set_total(static_cast<double>(c.runners_lost));
  });
}

}  // namespace kiln::rpc
