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


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = pathlib.Path(os.environ.get("KILN_BUILD_DIR", ROOT / "build"))
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                               f"-DPYTHON_EXECUTABLE={sys.executable}"])
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
