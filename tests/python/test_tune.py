"""kiln.tune and kiln.db: a matmul tuned from Python lands in the tuning log, and kiln.db finds it."""
import numpy as np
import pytest

import kiln


def matmul_task(n=32):
    return kiln.ops.task("matmul.x86", {"a": {"shape": [n, n], "dtype": "float32"},
                                        "b": {"shape": [n, n], "dtype": "float32"}})


def test_a_tuned_matmul_lands_in_the_log_and_the_best_config_builds(tmp_path, rng):
    task = matmul_task()
    path = tmp_path / "tuning.db"
    seen = []
    status = kiln.tune.run(task, path, trials=8, strategy="random", batch_size=4,
                           progress=lambda s: seen.append((s.state, s.trials_done)))
    assert status.state == "done", status.message
    assert status.trials_done == 8 and status.trials_total == 8
    assert [d for _, d in seen][-1] == 8 and len(seen) >= 2  # called after every batch
    assert all(a <= b for (_, a), (_, b) in zip(seen, seen[1:]))

    log = kiln.db.open(str(path))
    records = [r for r in log.records() if r.workload_key == task.key]
    assert len(records) == 8
    valid = [r for r in records if r.valid]
    assert valid, [r.error_message for r in records]
    best = log.best(task)
    assert best is not None and best.valid
    assert best.mean == min(r.mean for r in valid)
    assert best.template == "matmul.x86" and best.args == task.args
    assert best.device == "local-cpu" and best.job_id == status.job_id
    assert status.tasks[0].best_s == pytest.approx(best.mean)
    top = log.top_k(task, 3)
    assert [r.mean for r in top] == sorted(r.mean for r in valid)[:3]
    assert len(log.history("matmul.x86", "local-cpu")) == 8
    assert [(j.id, j.state, j.trials_done) for j in log.jobs()] == [(status.job_id, "done", 8)]
    # the key alone finds it too, and an unknown device class has nothing
    assert log.best(task.key, target=task.target).id == best.id
    assert log.best(task, device="another-cpu") is None

    # the best config is a config of the task, and its build computes the matmul
    config = task.config(best.knobs)
    assert config.index == best.config_index
    a = rng.random((32, 32), dtype=np.float32)
    b = rng.random((32, 32), dtype=np.float32)
    c = np.zeros((32, 32), dtype=np.float32)
    task.build(config)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_an_exception_in_the_callback_pauses_the_job(tmp_path):
    task = matmul_task(16)
    path = tmp_path / "tuning.db"

    class Stop(Exception):
        pass

    def stop(status):
        raise Stop(f"stopped after {status.trials_done}")

    with pytest.raises(Stop, match="stopped after 4"):
        kiln.tune.run(task, path, trials=12, strategy="random", batch_size=4, progress=stop)
    log = kiln.db.open(str(path))
    (job,) = log.jobs()
    assert job.state == "paused"
    assert job.trials_done == 4  # the batch measured before the callback stays in the log
    assert len(log.records()) == 4


def test_ctrl_c_pauses_the_job_after_the_batch_in_flight(tmp_path):
    import os
    import signal
    task = matmul_task(16)
    path = tmp_path / "tuning.db"
    with pytest.raises(KeyboardInterrupt):
        kiln.tune.run(task, path, trials=12, strategy="random", batch_size=4,
                      progress=lambda s: os.kill(os.getpid(), signal.SIGINT))
    (job,) = kiln.db.open(str(path)).jobs()
    assert job.state == "paused" and job.trials_done == 4


def test_bad_jobs_and_logs_raise_user_errors(tmp_path):
    with pytest.raises(kiln.TuneError):
        kiln.tune.run(matmul_task(), tmp_path / "t.db", trials=0)
    with pytest.raises(kiln.UserError, match="no_such_template"):
        kiln.tune.run(("no_such_template.x86", {}), tmp_path / "t.db", trials=4)
    with pytest.raises(kiln.TuningDbError, match="missing.db"):
        kiln.db.open(str(tmp_path / "missing.db"))
    (tmp_path / "not_a_log.db").write_text("hello, this is not a tuning log\n" * 100)
    with pytest.raises(kiln.TuningDbError):
        kiln.db.open(str(tmp_path / "not_a_log.db"))
    # an empty log knows nothing
    log = kiln.db.open(str(tmp_path / "new.db"), create=True)
    assert log.best(matmul_task()) is None and log.records() == [] and log.jobs() == []
