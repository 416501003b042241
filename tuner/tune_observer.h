#pragma once
// TuneObserver: what a running tuning job reports as it goes, for a service's metrics. The tuner
// calls it and knows nothing of what is behind it (kilnd's tuner_metrics.h turns it into
// Prometheus metrics). Every method may be called from several jobs' threads at once.
#include <string>

#include "db/error_class.h"

namespace kiln::tuner {

class TuneObserver {
 public:
  virtual ~TuneObserver() = default;
  // `count` trials of one batch ended with `error` (kInfra: the measurement did not happen and is
  // not recorded).
  virtual void trials_measured(db::ErrorClass error, int count) = 0;
  // A batch of records took `seconds` to write to the tuning log.
  virtual void log_written(double seconds) = 0;
  // The search strategy refitted its cost model in `seconds`.
  virtual void cost_model_refitted(double seconds) = 0;
};

}  // namespace kiln::tuner
