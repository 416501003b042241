"""kiln.ops: templates, tasks, config spaces and the builds of their configs, against numpy."""
import numpy as np
import pytest

import kiln


def matmul_task(m=16, k=64, n=32):
    return kiln.ops.task("matmul.x86", {"a": {"shape": [m, k], "dtype": "float32"},
                                        "b": {"shape": [k, n], "dtype": "float32"}})


def test_templates_are_listed_with_their_arguments():
    names = kiln.ops.templates()
    assert "matmul.x86" in names and "conv2d_nchw.x86" in names
    t = kiln.ops.template("matmul.x86")
    assert t.name == "matmul.x86"
    assert [a.name for a in t.arguments][:2] == ["a", "b"]
    assert t.example["a"]["shape"] == [16, 64]


def test_a_task_has_the_canonical_workload_and_its_flop_count():
    task = matmul_task()
    assert task.template == "matmul.x86"
    assert task.args["a"]["shape"] == [16, 64]
    assert task.flop == 2 * 16 * 64 * 32
    assert len(task.key) == 64
    # the same workload in another spelling has the same key
    same = kiln.ops.task("matmul.x86", {"b": {"dtype": "float32", "shape": [64, 32]},
                                        "a": {"shape": [16, 64]}})
    assert same.key == task.key
    assert matmul_task(m=32).key != task.key


def test_config_space_indexes_and_samples():
    space = matmul_task().config_space
    n = len(space)
    assert n == space.size > 1
    assert space.count_valid() <= n
    first, last = space.get(0), space.get(n - 1)
    assert first.index == 0 and last.index == n - 1
    assert first != last
    assert list(first.knobs) == space.knobs
    c = space.sample(seed=7)
    assert space.is_valid(c)
    assert space.sample(seed=7) == c  # the same seed draws the same config
    assert space.get(c.index) == c
    # a config from its knob values is the one with that index
    assert space.from_values(c.knobs) == c
    with pytest.raises(kiln.ConfigError, match="index"):
        space.get(n)


def test_every_sampled_config_builds_and_computes_the_matmul(rng):
    task = matmul_task()
    a = rng.random((16, 64), dtype=np.float32)
    b = rng.random((64, 32), dtype=np.float32)
    space = task.config_space
    for seed in range(3):
        f = task.build(space.sample(seed=seed))
        c = np.zeros((16, 32), dtype=np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    f = task.build(task.default_config())
    c = np.zeros((16, 32), dtype=np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_instantiate_gives_the_schedule_and_its_tensors():
    task = matmul_task()
    s, args = task.instantiate(task.default_config())
    assert [t.name for t in args][:2] == ["a", "b"]
    text = str(kiln.lower(s, args))
    assert "for (" in text
    assert str(task.lower(task.default_config())) == str(kiln.lower(s, args, name="matmul_x86"))


def test_configs_from_text_and_dicts():
    task = matmul_task()
    c = task.config_space.sample(seed=1)
    assert task.config(str(c)) == c
    assert task.config(c.knobs) == c
    assert task.config(c.index) == c
    with pytest.raises(kiln.ConfigError, match="nope"):
        task.config({"nope": 1})


def test_bad_workloads_raise_op_errors():
    with pytest.raises(kiln.OpError, match="matmul.x86"):  # the message lists the known templates
        kiln.ops.task("no_such_template.x86", {})
    with pytest.raises(kiln.OpError):
        kiln.ops.task("matmul.x86", {"a": {"shape": [16, 64]}, "b": {"shape": [32, 32]}})
    with pytest.raises(kiln.OpError):
        kiln.ops.template("nothing")
    with pytest.raises(kiln.UserError, match="nonsense_cpu"):
        kiln.ops.task("matmul.x86", None, target="llvm -mcpu=nonsense_cpu")
