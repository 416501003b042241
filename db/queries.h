#pragma once
// The SQL of the tuning log's hot lookups, in one place so that a test can check that each one
// is answered by index seeks (no table scan, no sort) whatever the number of records.
namespace kiln::db::queries {

// The columns of a record with its workload, target and device, and the joins that give them.
#define KILN_DB_RECORD_SELECT                                                                   \
  "SELECT r.id, w.workload_key, w.template_name, w.args, w.flop, t.target, d.device_key, "      \
  "t.model, r.job_id, r.config_index, r.space, r.config, r.error_class, r.error_msg, r.costs, " \
  "r.wall_s, r.runner, r.kiln_version, r.measured_at FROM record r "                            \
  "JOIN workload w ON w.id = r.workload_id JOIN target t ON t.id = r.target_id "                \
  "JOIN device d ON d.id = r.device_id "

// Valid records of workload ?1 on target string ?2 of device class ?3, fastest first, at most ?4
// (-1: all, read until the ranking is decided).
// The ids are looked up inside the statement, so a lookup is one statement, one read snapshot.
constexpr const char *kRankedOnTarget = KILN_DB_RECORD_SELECT
    "WHERE r.workload_id = (SELECT id FROM workload WHERE workload_key = ?1) "
    "AND r.target_id = (SELECT tt.id FROM target tt JOIN device dd ON dd.id = tt.device_id "
    "WHERE tt.target = ?2 AND dd.device_key = ?3) "
    "AND r.error_class = 0 ORDER BY r.mean_s, r.id LIMIT ?4";

// Valid records of workload ?1 on any target of device class ?2, fastest first, at most ?3 (-1: all).
constexpr const char *kRankedOnDevice = KILN_DB_RECORD_SELECT
    "WHERE r.workload_id = (SELECT id FROM workload WHERE workload_key = ?1) "
    "AND r.device_id = (SELECT id FROM device WHERE device_key = ?2) "
    "AND r.error_class = 0 ORDER BY r.mean_s, r.id LIMIT ?3";

// The valid records of one config (index ?4 of space ?5) of workload ?1 on target string ?2 of
// device class ?3: the records a config's rank is taken from (TuningDb::top_k).
constexpr const char *kConfigRecords = KILN_DB_RECORD_SELECT
    "WHERE r.workload_id = (SELECT id FROM workload WHERE workload_key = ?1) "
    "AND r.target_id = (SELECT tt.id FROM target tt JOIN device dd ON dd.id = tt.device_id "
    "WHERE tt.target = ?2 AND dd.device_key = ?3) "
    "AND r.config_index = ?4 AND r.space = ?5 AND r.error_class = 0";

// The configs a job has measured: (workload key, config index) for job ?1.
constexpr const char *kJobMeasured =
    "SELECT w.workload_key, r.config_index FROM record r "
    "JOIN workload w ON w.id = r.workload_id WHERE r.job_id = ?1";

// Whether a record identical to the one being imported is already stored: a seek on the config
// and time, as selective for failed records (whose mean is NULL) as for valid ones.
constexpr const char *kDuplicate =
    "SELECT 1 FROM record INDEXED BY record_by_config WHERE workload_id = ?1 AND target_id = ?2 "
    "AND error_class = ?3 AND mean_s IS ?4 AND config_index = ?5 AND measured_at = ?6 AND runner = ?7 "
    "AND space = ?8 LIMIT 1";

}  // namespace kiln::db::queries
