"""kiln.graph and kiln.runtime: an ONNX model imported, run by the reference executor, compiled into
an artifact and run by the runtime, each against torch."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import kiln

ROOT = pathlib.Path(os.environ.get("KILN_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    """The residual block of the tuning tests: Conv-Relu-Conv-Add-Relu on [1,8,12,12]."""
    out = tmp_path_factory.mktemp("models")
    subprocess.check_call([sys.executable, str(ROOT / "tests" / "cli" / "make_tune_models.py"), str(out)])
    return out


def torch_block(model_path, x):
    import onnx
    import torch
    from onnx import numpy_helper
    w = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx.load(str(model_path)).graph.initializer}
    t = torch.from_numpy(x)
    a = torch.relu(torch.nn.functional.conv2d(t, w["w1"], w["b1"], padding=1))
    y = torch.relu(torch.nn.functional.conv2d(a, w["w2"], w["b2"], padding=1) + t)
    return y.numpy()


def test_import_shows_the_models_inputs_outputs_and_ops(block):
    g = kiln.graph.load_onnx(str(block / "block.onnx"))
    assert g.inputs == [("input", [1, 8, 12, 12], "float32")]
    assert g.outputs == [("output", [1, 8, 12, 12], "float32")]
    assert g.ops == ["Conv", "Relu", "Conv", "Add", "Relu"]
    assert len(g) == 5
    assert "Conv" in str(g)


def test_executor_and_compiled_artifact_match_torch(block, tmp_path):
    x = np.load(block / "input.npy")
    expected = torch_block(block / "block.onnx", x)
    g = kiln.graph.load_onnx(str(block / "block.onnx"))

    (y,) = kiln.graph.Executor(g).run(x)
    assert y.shape == (1, 8, 12, 12) and y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    (y_named,) = kiln.graph.Executor(g).run(input=x)
    np.testing.assert_array_equal(y_named, y)

    path = tmp_path / "model.kiln"
    report = kiln.graph.compile(g.optimize(), str(path))
    assert path.stat().st_size == report["file_bytes"] > 0
    assert report["tuned_kernels"] == 0
    m = kiln.runtime.load(str(path))
    assert m.inputs == [("input", [1, 8, 12, 12], "float32")]
    (z,) = m(x)
    np.testing.assert_allclose(z, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(z, y, rtol=1e-4, atol=1e-5)  # the C++ executor's result
    # the step by step form gives the same
    m.set_input("input", x)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), z)


def test_the_runtime_module_links_no_compiler():
    import kiln._runtime as rt
    code = pathlib.Path(rt.__file__).read_bytes()
    for namespace in [b"_ZN4llvm", b"_ZN4kiln2te", b"_ZN4kiln6driver", b"_ZN4kiln7codegen"]:
        assert namespace not in code, namespace


def test_model_errors_raise_their_classes(block, tmp_path):
    with pytest.raises(kiln.UserError):
        kiln.graph.load_onnx(str(tmp_path / "missing.onnx"))
    (tmp_path / "junk.kiln").write_bytes(b"not an artifact" * 10)
    with pytest.raises(kiln.ArtifactError, match="junk.kiln"):
        kiln.runtime.load(str(tmp_path / "junk.kiln"))
    g = kiln.graph.load_onnx(str(block / "block.onnx"))
    with pytest.raises(kiln.ExecutionError, match="input"):
        kiln.graph.Executor(g).run(np.zeros((1, 8, 6, 6), dtype=np.float32))
    path = tmp_path / "model.kiln"
    kiln.graph.compile(g, str(path))
    m = kiln.runtime.load(str(path))
    with pytest.raises(kiln.GraphInputError, match="input"):
        m(np.zeros((1, 8, 6, 6), dtype=np.float32))
    with pytest.raises(kiln.GraphInputError, match="nope"):
        m.set_input("nope", np.zeros((1, 8, 12, 12), dtype=np.float32))
    assert issubclass(kiln.ArtifactError, kiln.ModuleError)


RUN_WITHOUT_COMPILER = r"""
import sys
import numpy as np
{imports}
m = kiln.runtime.load(sys.argv[1])
(y,) = m(np.load(sys.argv[2]))
np.save(sys.argv[3], y)
compiler = [name for name in sys.modules if name == "kiln._kiln" or name.startswith("kiln._kiln.")]
maps = open("/proc/self/maps").read()
print("compiler modules:", compiler)
print("mapped:", sorted(set(line.split()[-1] for line in maps.splitlines()
                            if "libLLVM" in line or "/_kiln." in line)))
"""


@pytest.mark.parametrize("imports", ["import kiln", "import kiln.runtime"])
def test_running_an_artifact_loads_no_compiler(block, tmp_path, imports):
    x = np.load(block / "input.npy")
    path = tmp_path / "model.kiln"
    kiln.graph.compile(kiln.graph.load_onnx(str(block / "block.onnx")), str(path))
    out = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_COMPILER.format(imports=imports), str(path), str(block / "input.npy"),
         str(tmp_path / "y.npy")],
        check=True, capture_output=True, text=True).stdout
    assert "compiler modules: []" in out
    assert "mapped: []" in out
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), torch_block(block / "block.onnx", x), rtol=1e-4, atol=1e-5)


def test_the_compiler_loads_on_first_use():
    code = ("import sys, kiln\n"
            "assert 'kiln._kiln' not in sys.modules\n"
            "assert issubclass(kiln.ScheduleError, kiln.UserError)\n"
            "assert 'kiln._kiln' in sys.modules\n"
            "from kiln import te\n"
            "assert kiln.te is te and 'build' in dir(kiln)\n"
            "print(kiln.build.__doc__)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "callable on numpy arrays" in out
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        kiln.nosuch
