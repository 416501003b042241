"""kiln.tune.submit: a job submitted to a kilnd started by the test, followed to its end, and found
in the service's tuning log with kiln.db."""
import os
import pathlib
import subprocess

import pytest

import kiln

KILND = os.environ.get("KILN_KILND", "")


@pytest.fixture
def kilnd(tmp_path):
    if not KILND or not pathlib.Path(KILND).exists():
        pytest.skip("kilnd is not built (KILN_KILND names it)")
    token = tmp_path / "token"
    token.write_text("python-secret\n")
    log = tmp_path / "service.db"
    with open(tmp_path / "kilnd.log", "w") as err:
        p = subprocess.Popen([KILND, "--db", str(log), "--local", "--listen", "127.0.0.1:0", "--token-file", str(token),
                              "--build-workers", "1"], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        address = p.stdout.readline().strip()
        assert address, (tmp_path / "kilnd.log").read_text()
        yield address, token, log
    finally:
        p.terminate()
        p.wait(timeout=60)


def test_a_submitted_job_runs_in_the_service_and_lands_in_its_log(kilnd):
    address, token, log_path = kilnd
    task = kiln.ops.task("matmul.x86", {"a": {"shape": [16, 16]}, "b": {"shape": [16, 16]}})
    seen = []
    status = kiln.tune.submit(task, address, token_file=token, trials=8, strategy="random", batch_size=4,
                              progress=lambda s: seen.append(s.trials_done))
    assert status.state == "done", status.message
    assert status.trials_done == 8 and seen and seen[-1] == 8
    log = kiln.db.open(str(log_path), read_only=True)
    assert len([r for r in log.records() if r.workload_key == task.key]) == 8
    best = log.best(task.key, target=log.records()[0].target)
    assert best is not None and best.job_id == status.job_id


def test_the_service_refuses_a_wrong_token_and_a_bad_job(kilnd, tmp_path):
    address, token, _ = kilnd
    task = kiln.ops.task("matmul.x86", {"a": {"shape": [16, 16]}, "b": {"shape": [16, 16]}})
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token\n")
    with pytest.raises(kiln.UserError, match="refused the token"):
        kiln.tune.submit(task, address, token_file=wrong, trials=4)
    with pytest.raises(kiln.UserError, match="cannot be reached"):
        kiln.tune.submit(task, "127.0.0.1:1", token_file=token, trials=4)
    with pytest.raises(kiln.UserError):
        kiln.tune.submit(task, address, token_file=token, trials=0)
