#pragma once
// The tuning service's messages (proto/kiln/v1/tuner.proto) and the tuner's types: the one
// conversion each way, for the service (TunerService) and its clients (`kiln tune --daemon`,
// `kiln jobs --daemon`).
#include <cstddef>
#include <string>

#include "kiln/v1/tuner.pb.h"
#include "tuner/job_manager.h"

namespace kiln::tuner {

// What a service accepts in one submission; beyond it, TuneError naming the field.
struct SubmissionLimits {
  size_t max_tasks = 1000;
  size_t max_name_bytes = 256;         // names, templates, targets, device keys, strategy, preset
  size_t max_args_json_bytes = 65536;  // one task's arguments
};

// The submission a JobSpec asks for, with the defaults tuner.proto gives its zero or absent
// fields (64 trials per task, batch 16, xgb, weight 1, the preset's name or the first task's for a job without
// one). A preset is expanded to its tasks. Throws TuneError naming the field for a spec beyond the
// limits or that cannot be read: both or neither of tasks and preset, an unknown preset, arguments
// that are not a JSON object. The options themselves (budgets, strategy, priority) are checked by
// Tuner::create_job.
JobSubmission submission_from_proto(const kiln::v1::JobSpec &spec, const SubmissionLimits &limits = {});
// The spec of a submission, every field explicit.
kiln::v1::JobSpec submission_to_proto(const JobSubmission &submission);

// "pending", "running", "waiting", "paused", "done", "failed", "cancelled" and back;
// JOB_STATE_UNSPECIFIED and "" for anything else.
kiln::v1::JobState state_to_proto(const std::string &state);
std::string state_from_proto(kiln::v1::JobState state);

void report_to_proto(const JobReport &report, kiln::v1::JobInfo *info);
JobReport report_from_proto(const kiln::v1::JobInfo &info);

}  // namespace kiln::tuner
