"""Installs the kiln package: configures and builds Kiln's kiln_python target with CMake and
copies the package it lays out (build/python/kiln) into the wheel.

    pip install ./python
"""
import os
import pathlib
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def cached_python(build_dir):
    """The real path of the Python a configured build tree is set up for, or None."""
    cache = pathlib.Path(build_dir) / "CMakeCache.txt"
    if not cache.exists():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith("PYTHON_EXECUTABLE:"):
            return os.path.realpath(line.split("=", 1)[1])
    return None


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = pathlib.Path(os.environ.get("KILN_BUILD_DIR", ROOT / "build"))
        # The interpreter a virtual environment was made from (the extension is the same for both);
        # a build tree configured for that interpreter keeps its setting, so that its tests keep
        # working after the environment is gone.
        python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        args = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"]
        if cached_python(build_dir) != python:
            args.append(f"-DPYTHON_EXECUTABLE={python}")
        subprocess.check_call(args)
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "kiln_python",
                               "-j", os.environ.get("KILN_BUILD_JOBS", str(os.cpu_count() or 1))])
        built = build_dir / "python" / "kiln"
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).parent
        target.mkdir(parents=True, exist_ok=True)
        for f in built.iterdir():
            if f.suffix in (".so", ".py", ".pyi") or f.name in ("py.typed", "kiln-measure-worker"):
                self.copy_file(str(f), str(target / f.name))


setup(
    name="kiln",
    version="0.1.0",
    description="Kiln, a deep-learning compiler: tensor expressions, schedules and builds from Python",
    packages=[],
    ext_modules=[Extension("kiln._kiln", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.8",
    install_requires=["numpy"],
    zip_safe=False,
)
