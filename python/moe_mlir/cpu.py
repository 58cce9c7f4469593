"""Running compiled modules on the CPU with numpy arrays.

``Module.compile_cpu()`` lowers a copy of the module with
``moe-emit-c-interface`` + ``moe-lower-to-cpu{deallocate=true}`` and
JIT-compiles it with MLIR's ExecutionEngine. :meth:`CpuModule.call` passes
numpy arrays as memref descriptors to the ``_mlir_ciface_<name>`` wrapper.

Calling convention: tensor arguments are passed as C-contiguous arrays of
the function's element type (converted when the kind matches: float64 ->
f32 / bf16, int64 -> i32, ...; static dimensions are checked). Results are
the memrefs the function returns: each becomes a numpy array that owns the
buffer the compiled code allocated (no copy; freed when the array is
garbage collected). bf16 arrays use ``ml_dtypes.bfloat16``, i1 ``bool``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple, Union

import numpy as np

from . import _moe
from ._types import FunctionType, TensorType, _type_from_raw

__all__ = ["CpuModule", "numpy_dtype", "default_shared_libs"]


def _ml_dtype(name: str, what: str) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "%s arrays need the ml_dtypes package (pip install ml_dtypes)" % what
        ) from exc
    return np.dtype(getattr(ml_dtypes, name))


def _bfloat16():
    return _ml_dtype("bfloat16", "bf16")


#: Element types held as ml_dtypes arrays: (ml_dtypes name, element type).
_ML_DTYPES = {
    "bf16": "bfloat16",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E8M0FNU": "float8_e8m0fnu",
}


_NUMPY = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f16": np.dtype(np.float16),
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "index": np.dtype(np.int64),
}


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of an element type name (bf16, f8E4M3FN, f8E8M0FNU:
    ml_dtypes' bfloat16, float8_e4m3fn, float8_e8m0fnu)."""
    if dtype in _ML_DTYPES:
        return _ml_dtype(_ML_DTYPES[dtype], dtype)
    try:
        return _NUMPY[dtype]
    except KeyError:
        raise ValueError("no numpy dtype for element type %r" % dtype) from None


def default_shared_libs() -> List[str]:
    """LLVM's ``libmlir_c_runner_utils`` (memrefCopy and friends), when
    present next to libMLIR.so."""
    path = os.path.join(_moe.LLVM_LIBRARY_DIR, "libmlir_c_runner_utils" + _moe.SHLIB_SUFFIX)
    return [path] if os.path.exists(path) else []


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name == "bfloat16"


def _convert(value: Any, t: TensorType, index: int, name: str) -> np.ndarray:
    want = numpy_dtype(t.dtype)
    arr = np.asarray(value)
    if arr.dtype != want:
        src_float = _is_float(arr.dtype)
        if t.dtype in ("f8E4M3FN", "f8E8M0FNU"):
            # Low-precision weights and scales: their own dtype, or their
            # bytes (a checkpoint's uint8 / int8 view), never a conversion.
            if arr.dtype.itemsize != 1 or arr.dtype.kind not in "iu":
                raise TypeError(
                    "argument %d of '%s': expected %s data (or its bytes as uint8 / int8), "
                    "got %s" % (index, name, t.dtype, arr.dtype)
                )
            arr = np.ascontiguousarray(arr).view(want)
            ok = True
        elif t.dtype in ("f32", "f64", "f16", "bf16"):
            ok = src_float or arr.dtype.kind in "iub"
        elif t.dtype == "i1":
            ok = arr.dtype.kind == "b"
        else:
            ok = arr.dtype.kind in "iub"
        if not ok:
            raise TypeError(
                "argument %d of '%s': expected %s data, got %s" % (index, name, t.dtype, arr.dtype)
            )
        arr = arr.astype(want)
    if arr.ndim != t.rank:
        raise ValueError(
            "argument %d of '%s': expected a rank-%d array (%s), "
            "got shape %s" % (index, name, t.rank, t, arr.shape)
        )
    for d, (want_dim, got) in enumerate(zip(t.shape, arr.shape)):
        if want_dim is not None and want_dim != got:
            raise ValueError(
                "argument %d of '%s': dimension %d is %d, %s "
                "needs %d" % (index, name, d, got, t, want_dim)
            )
    return np.ascontiguousarray(arr)


class CpuModule:
    """A module JIT-compiled for this CPU (see :meth:`Module.compile_cpu`)."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self._sigs: Dict[str, Tuple[FunctionType, str]] = {}
        for name, (ins, outs, unsupported) in raw.functions.items():
            ft = FunctionType(
                tuple(_type_from_raw(t) for t in ins), tuple(_type_from_raw(t) for t in outs)
            )
            self._sigs[name] = (ft, unsupported)

    @property
    def functions(self) -> Dict[str, FunctionType]:
        """``{name: FunctionType}`` of the public functions."""
        return {name: ft for name, (ft, _) in self._sigs.items()}

    def call(self, name: str, *args: Any) -> Union[None, np.ndarray, Tuple[np.ndarray, ...]]:
        """Calls public function ``name``. Tensor arguments are numpy arrays
        (or anything ``np.asarray`` takes), scalar arguments Python numbers.
        Returns ``None``, one array, or a tuple of arrays (several
        results). Raises KeyError for an unknown function, TypeError /
        ValueError for arguments that do not fit the signature."""
        try:
            ft, unsupported = self._sigs[name]
        except KeyError:
            raise KeyError(
                "no public function '%s' (have: %s)" % (name, ", ".join(self._sigs) or "none")
            ) from None
        if unsupported:
            raise TypeError("function '%s' cannot be called from Python: %s" % (name, unsupported))
        if len(args) != len(ft.inputs):
            raise TypeError(
                "function '%s' takes %d arguments, got %d" % (name, len(ft.inputs), len(args))
            )
        keep = []
        packed = []
        for i, (value, t) in enumerate(zip(args, ft.inputs)):
            if isinstance(t, TensorType):
                arr = _convert(value, t, i, name)
                keep.append(arr)
                packed.append((arr.__array_interface__["data"][0], list(arr.shape)))
            elif isinstance(t, str) and t.startswith("memref<"):
                raise TypeError(
                    "function '%s' takes memrefs; call the tensor-level function instead" % name
                )
            else:
                packed.append(value)
        raw_results = self._raw.invoke(name, packed)
        results = []
        for arr, t in zip(raw_results, ft.results):
            dtype = t.dtype if isinstance(t, TensorType) else None
            if dtype == "bf16":
                arr = arr.view(_bfloat16())
            elif dtype == "i1":
                arr = arr.view(np.bool_)
            results.append(arr)
        del keep
        if not results:
            return None
        if len(results) == 1:
            return results[0]
        return tuple(results)

    def __repr__(self) -> str:
        return "<moe_mlir.CpuModule with functions [%s]>" % ", ".join(self._sigs)
