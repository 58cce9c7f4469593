# ===- memref_abi.py - call moe-aot libraries on torch tensors ------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Calls functions of a moe-aot shared library on PyTorch tensors (ctypes).

A thin shim over the GPU runtime package (moe_mlir_runtime, python/runtime,
`Library`), which now holds the code; kept so that run_gpu_checks.py and
existing scripts work unchanged. moe_mlir_runtime is taken from next to this
file (the copy in gpu-artifacts/), its pyflow/ folder or the source tree,
else from an install (pip install moe_mlir_runtime-*.whl).

The library's functions must carry `llvm.emit_c_interface`, so that it
exports `_mlir_ciface_<name>(Desc *...)`, where each ranked memref argument is
passed as a pointer to

    struct { T *allocated; T *aligned; int64_t offset;
             int64_t sizes[R]; int64_t strides[R]; }

Outputs are out-parameters: the caller allocates them with torch and passes
them last. Example:

    mod = CompiledModule("libaxpy.so")
    mod.call("axpy", x, y)          # on torch.cuda.current_stream()
    mod.set_stream(s)               # pin a stream instead; None: follow torch

After each call the runtime's error slot (moeRuntimeGetLastError) is checked
and a recorded error is raised as RuntimeError.

Descriptors: `aligned` is `tensor.data_ptr()` (the storage offset already
applied), `offset` is 0, and sizes and strides are in elements. Functions
with identity-layout memrefs (`memref<?x?xf32>`) use static offset 0 and
static row-major strides, so by default non-contiguous tensors are rejected;
pass `contiguous=False` when the function's memrefs are
`strided<[?, ?], offset: ?>`. The runtime works on device 0.

Python standard library + torch only.
"""

import importlib.util
import os
import sys

import torch  # noqa: F401  (the runtime needs it to call; fail early)

__all__ = ["CompiledModule", "memref_descriptor"]


def _load_runtime():
    name = "moe_mlir_runtime"
    if name in sys.modules:
        return sys.modules[name]
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.path.join(here, name, "__init__.py"),
        os.path.join(here, "pyflow", name, "__init__.py"),
        os.path.join(here, os.pardir, os.pardir, "python", "runtime", name, "__init__.py"),
    ]
    for path in candidates:
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(
            "memref_abi: cannot find the %s package (looked at "
            "%s, then sys.path)" % (name, ", ".join(os.path.normpath(c) for c in candidates))
        ) from None


_runtime = _load_runtime()

memref_descriptor = _runtime.memref_descriptor
_descriptor_type = _runtime._descriptor_type
_stream_handle = _runtime.stream_handle
_CU_STREAM_LEGACY = _runtime.CU_STREAM_LEGACY


class CompiledModule(_runtime.Library):
    """A moe-aot shared library, loaded with ctypes (runtime.Library)."""
