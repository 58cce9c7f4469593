# ===- moe_mlir_runtime - call moe-mlir GPU artifacts on torch tensors ---=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""The thin GPU runtime of moe-mlir: loads a compiled artifact (a shared
library made by `moe_mlir.gpu.compile_gpu` or `moe-aot`, plus its manifest)
and calls its functions on PyTorch CUDA tensors.

    import moe_mlir_runtime as runtime      # or: from moe_mlir import runtime
    art = runtime.load("qwen3.so")          # reads qwen3.manifest.json
    ffn = art.fn("ffn")
    y = ffn(x, logits, w_up, w_down)        # allocates y with torch
    ffn(x, logits, w_up, w_down, y)         # or: outputs preallocated, last
    outs = ffn.allocate_outputs(x, logits, w_up, w_down)

This package is self-contained: Python standard library + ctypes, and torch
when calling. It needs neither the compiled extension `moe_mlir._moe` nor
LLVM, so it installs on a machine that has only a GPU driver and torch: it
is its own pip package, `moe-mlir-runtime` (python/runtime/pyproject.toml;
`pip install --no-deps --no-index moe_mlir_runtime-*.whl`), or is used in
place with its folder's parent on PYTHONPATH. `moe_mlir.runtime` is this
module. Without torch it still imports (manifests can be read and checked;
nothing can be called).

Its modules, each documented in its own docstring; every name is
re-exported here, so `moe_mlir_runtime.X` is the API:

    errors.py       ManifestError, ArgumentError, ShapeError
    manifest.py     the manifest (format, Manifest, FunctionSpec, ArgSpec,
                    DTYPES, load_manifest) and the checks of a call against it
    tensors.py      the runtime's side of torch (torch_dtype, dtype_name)
    descriptors.py  the C ABI: memref descriptors, stream handles
    library.py      Library: the compiled .so through ctypes (streams,
                    errors, synchronize, module constants)
    artifact.py     load, Artifact, Function: checked calls on torch tensors
    autograd.py     ffn_autograd: a training artifact as a torch.autograd.Function

`torch` (None without it) and the cache `_torch_dtype_names` are attributes
of this package that every module reads at each use, so patching them here
(a stand-in for torch in the tests) reaches the whole runtime.
"""

# The imports are the package's namespace: re-exports, most of them unused here.
# ruff: noqa: F401

try:  # torch is needed to call, not to import
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

from . import cache, hf
from .artifact import Artifact, Function, load
from .autograd import ffn_autograd
from .cache import cache_root, find_cached, load_cached
from .descriptors import (
    CU_STREAM_LEGACY,
    _descriptor_type,
    _descriptor_types,
    memref_descriptor,
    stream_handle,
)
from .errors import ArgumentError, ManifestError, ShapeError
from .library import Library
from .manifest import (
    _KINDS,
    DTYPES,
    MANIFEST_FORMAT,
    MANIFEST_SUFFIX,
    MANIFEST_VERSION,
    ArgSpec,
    FunctionSpec,
    Manifest,
    _dim_text,
    file_sha256,
    load_manifest,
    manifest_path,
)
from .tensors import _current_stream, _info, _is_tensor, _need_torch, dtype_name, torch_dtype
from .torch_ops import op_name, torch_op

# dtype_name's cache {torch dtype: MLIR element type name} (tensors.py)
_torch_dtype_names = None

__all__ = [
    "load",
    "cache_root",
    "find_cached",
    "load_cached",
    "torch_op",
    "Artifact",
    "Function",
    "Manifest",
    "FunctionSpec",
    "ArgSpec",
    "Library",
    "ManifestError",
    "ArgumentError",
    "ShapeError",
    "manifest_path",
    "memref_descriptor",
    "stream_handle",
    "DTYPES",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
]
