"""The package as a user meets it: docstrings, type hints, error classes."""
import pathlib

import kiln
from kiln import te


def test_help_says_what_compute_does():
    doc = te.compute.__doc__
    assert "whose element at index (i, j, ...) is fcompute(i, j, ...)" in doc
    assert "te.sum" in doc
    assert kiln.build.__doc__ and "callable on numpy arrays" in kiln.build.__doc__
    assert "split" in te.Stage.split.__doc__.lower()


def test_type_hints_ship_with_the_package():
    pkg = pathlib.Path(kiln.__file__).parent
    for name in ["__init__.pyi", "te.pyi", "py.typed"]:
        assert (pkg / name).exists(), name
    stub = (pkg / "te.pyi").read_text()
    # every public name of kiln.te has a hint
    public = [n for n in dir(te) if not n.startswith("_") and n not in ("annotations",)]
    missing = [n for n in public if f"def {n}(" not in stub and f"class {n}" not in stub and f"{n} =" not in stub]
    assert missing == []


def test_error_classes_form_kilns_hierarchy():
    for cls in [kiln.ScheduleError, kiln.ExprError, kiln.KernelError, kiln.TensorError, kiln.ModuleError]:
        assert issubclass(cls, kiln.UserError)
    assert issubclass(kiln.UserError, ValueError)
    assert not issubclass(kiln.InternalError, kiln.UserError)


def test_every_module_has_its_type_hints():
    pkg = pathlib.Path(kiln.__file__).parent
    for module in [kiln.ops, kiln.db, kiln.graph, kiln.runtime, kiln.tune]:
        name = module.__name__.split(".")[-1]
        stub = (pkg / f"{name}.pyi").read_text()
        public = [n for n in dir(module) if not n.startswith("_") and n != "os"]
        missing = [n for n in public if f"def {n}(" not in stub and f"class {n}" not in stub]
        assert missing == [], name


def test_the_new_error_classes_are_user_errors():
    for cls in [kiln.OpError, kiln.ConfigError, kiln.TuningDbError, kiln.ArtifactError, kiln.GraphInputError,
                kiln.GraphError, kiln.ModelImportError, kiln.ExecutionError, kiln.TuneError, kiln.MeasureError]:
        assert issubclass(cls, kiln.UserError), cls
    assert kiln.runtime.load is kiln._runtime.load


def test_int64_constants_print_as_plain_integers():
    assert str(te.const(5, "int64")) == "5"
    assert str(te.const(2**40)) == "1099511627776"
    assert str(te.const(5, "int16")) == "int16(5)"  # narrower types keep their name
