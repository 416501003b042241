"""Compiled models (model.kiln) run without the compiler: this module loads only Kiln's runtime.

    m = kiln.runtime.load("model.kiln")
    y, = m(x)                                     # or m.set_input("x", x); m.run(); m.get_output(0)
"""
from ._runtime import GraphModule, load  # noqa: F401
