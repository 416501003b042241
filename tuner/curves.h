#pragma once
// Tuning curves: the best throughput found after each trial of each task of a job, from the job's
// records in the tuning log, and drawn as an SVG picture (`kiln db curve`).
#include <cstdint>
#include <string>
#include <vector>

#include "db/tuning_db.h"

namespace kiln::tuner {

struct Curve {
  std::string name;                 // the task's name (or its template)
  std::vector<double> best_gflops;  // after each trial of the task, in the order they were recorded
  double default_gflops = 0;        // the template's default config, 0 when not measured
};

// Throws TuneError for an unknown job.
std::vector<Curve> job_curves(db::TuningDb &log, int64_t job_id);

// One panel per curve (at most 3 per row): best GFLOPS against trials, with the default config's
// throughput as a dashed line.
std::string curves_svg(const std::vector<Curve> &curves, const std::string &title);

}  // namespace kiln::tuner
