# ===- tensors.py - the runtime's side of torch ---------------------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""How the runtime reaches torch: torch itself (`_torch`, `_need_torch`; the
other modules get it from here), MLIR element type names <-> torch dtypes
(`torch_dtype`, `dtype_name`), what a tensor argument looks like to the
manifest checks (`_is_tensor`, `_info`) and the stream a call runs on by
default (`_current_stream`).

torch is the package's attribute `moe_mlir_runtime.torch` (None when
`import torch` failed: the package still imports, manifests can be read and
checked, nothing can be called), read at each use, and the cache of
`dtype_name` is the package's `_torch_dtype_names`: patching either on the
package (as the tests do, with a stand-in for torch) reaches every module.
"""

import sys

from .manifest import DTYPES

# The package (moe_mlir_runtime) whose `torch` and `_torch_dtype_names` this
# module reads and writes; it is in sys.modules while it imports its modules.
_package = sys.modules[__package__]


def _torch():
    """torch as the package holds it now (None without torch)."""
    return _package.torch


def _need_torch(what):
    if _torch() is None:
        raise RuntimeError("%s needs PyTorch (import torch failed)" % what)


def torch_dtype(name):
    """The torch dtype of an MLIR element type name."""
    _need_torch("torch_dtype")
    return getattr(_torch(), DTYPES[name][0])


def dtype_name(dtype):
    """The MLIR element type name of a torch dtype (i64 for int64)."""
    if _package._torch_dtype_names is None:
        _need_torch("dtype_name")
        torch = _torch()
        names = _package._torch_dtype_names = {}
        for name, (attr, _, _) in DTYPES.items():
            if name != "index" and hasattr(torch, attr):
                names[getattr(torch, attr)] = name
    return _package._torch_dtype_names.get(dtype, str(dtype))


def _is_tensor(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def _info(value):
    """(shape, dtype name) of an argument for FunctionSpec.check."""
    if _is_tensor(value):
        return tuple(value.shape), dtype_name(value.dtype)
    return None, None


def _current_stream():
    _need_torch("calling a compiled function")
    return _torch().cuda.current_stream(0)
