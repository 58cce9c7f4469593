"""moe_mlir: build, transform, compile and run moe-mlir IR from Python.

    import numpy as np
    from moe_mlir import Module, FunctionBuilder, TensorType

    m = Module()
    with FunctionBuilder(m, "layer", inputs=[
            TensorType([None, 64], "f32"), TensorType([None, 8], "f32"),
            TensorType([8, 64, 256], "f32"), TensorType([8, 128, 64], "f32")]) as f:
        x, logits, w_up, w_down = f.args
        f.ret(f.ffn(x, logits, w_up, w_down, k=2, scoring="softmax",
                    normalize=True, activation="silu", layout="concat"))
    m.run_pipeline("moe-decompose,moe-fuse")
    y = m.compile_cpu().call("layer", x_np, logits_np, w_up_np, w_down_np)

Modules: :mod:`moe_mlir.ir` (Context, Module, TensorType, FunctionBuilder),
:mod:`moe_mlir.cpu` (CpuModule), :mod:`moe_mlir.presets` (MoeConfig,
PRESETS, ffn_from_config). Every MLIR failure raises :class:`MLIRError`;
invalid builder arguments raise :class:`BuildError` (also a ValueError).

The names above are imported lazily: ``from moe_mlir import runtime`` (the
GPU-side runtime, for a machine without LLVM) does not load the compiler
extension ``moe_mlir._moe``.
"""

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# name -> submodule that defines it (imported on first use, PEP 562).
_LAZY = {
    "MLIRError": "._moe",
    "BuildError": "._moe",
    "CpuModule": ".cpu",
    "numpy_dtype": ".cpu",
    "DTYPES": ".ir",
    "Context": ".ir",
    "FunctionBuilder": ".ir",
    "FunctionType": ".ir",
    "Indices": ".ir",
    "Module": ".ir",
    "Multihot": ".ir",
    "Route": ".ir",
    "TensorType": ".ir",
    "TopK": ".ir",
    "Value": ".ir",
    "PRESETS": ".presets",
    "MoeConfig": ".presets",
    "ffn_from_config": ".presets",
    "training_from_config": ".training",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover
    from ._moe import BuildError, MLIRError
    from .cpu import CpuModule, numpy_dtype
    from .training import training_from_config
    from .ir import (
        DTYPES,
        Context,
        FunctionBuilder,
        FunctionType,
        Indices,
        Module,
        Multihot,
        Route,
        TensorType,
        TopK,
        Value,
    )
    from .presets import PRESETS, MoeConfig, ffn_from_config


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'moe_mlir' has no attribute %r" % name)
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
