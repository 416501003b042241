#!/usr/bin/env bash
# Installs the kiln package with pip into a fresh virtual environment (with the system's numpy) from
# the build tree BUILD_DIR, then imports it from outside the source and build trees and tunes,
# records and builds a small matmul with it.
# Usage: pip_install_check.sh PYTHON SOURCE_DIR BUILD_DIR
set -euo pipefail
python="$1" source_dir="$2" build_dir="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
KILN_BUILD_DIR="$build_dir" "$work/venv/bin/pip" install -q --no-build-isolation --no-index "$source_dir/python"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import os
import numpy as np
import kiln
here = os.path.dirname(kiln.__file__)
assert here.startswith(os.environ.get("VIRTUAL_ENV", os.getcwd())) or "site-packages" in here, here
task = kiln.ops.task("matmul.x86", {"a": {"shape": [16, 16]}, "b": {"shape": [16, 16]}})
status = kiln.tune.run(task, "tuning.db", trials=4, strategy="random", batch_size=4)
assert status.state == "done", status.message
best = kiln.db.open("tuning.db").best(task)
a = np.random.rand(16, 16).astype("float32")
b = np.random.rand(16, 16).astype("float32")
c = np.zeros((16, 16), dtype="float32")
task.build(task.config(best.knobs))(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-5)
print("installed kiln at", here, "tuned", status.trials_done, "trials")
PY
