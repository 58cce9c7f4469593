# ===- runtime.py - moe_mlir.runtime is moe_mlir_runtime ------------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""``moe_mlir.runtime``: the GPU runtime, the separate pure-Python package
``moe_mlir_runtime`` (python/runtime, pip name ``moe-mlir-runtime``).

This module replaces itself in ``sys.modules`` with that package, so
``from moe_mlir import runtime`` and ``import moe_mlir_runtime`` are the same
module object (patching one patches the other). It loads neither torch nor
the compiled extension. ``moe_mlir_runtime`` is found on ``sys.path`` (an
install, the build tree's python_packages, the moe_mlir wheel, which
contains it), else in the source checkout next to this package
(python/runtime/moe_mlir_runtime).
"""

import importlib.util
import os
import sys


def _load():
    try:
        import moe_mlir_runtime

        return moe_mlir_runtime
    except ImportError:
        pass
    init = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "runtime",
        "moe_mlir_runtime",
        "__init__.py",
    )
    if not os.path.isfile(init):
        raise ImportError(
            "moe_mlir.runtime needs the moe_mlir_runtime package (pip install ./python/runtime)"
        )
    spec = importlib.util.spec_from_file_location("moe_mlir_runtime", init)
    module = importlib.util.module_from_spec(spec)
    sys.modules["moe_mlir_runtime"] = module
    spec.loader.exec_module(module)
    return module


sys.modules[__name__] = _load()
