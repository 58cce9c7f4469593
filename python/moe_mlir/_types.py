"""The types of moe_mlir's Python API: element type names, TensorType and
FunctionType, and their conversion from the extension's raw type tuples.

Shared by :mod:`moe_mlir.ir` (which exports them) and :mod:`moe_mlir.cpu`,
neither of which imports the other at module level. Pure Python: nothing
here loads the extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, NamedTuple, Optional, Tuple, Union

__all__ = ["DTYPES", "DType", "TensorType", "FunctionType"]

DType = Literal[
    "f32", "f16", "bf16", "f64", "f8E4M3FN", "f8E8M0FNU", "i1", "i8", "i16", "i32", "i64", "index"
]

#: Element type names accepted by TensorType and the builders.
DTYPES: Tuple[str, ...] = (
    "f32",
    "f16",
    "bf16",
    "f64",
    "f8E4M3FN",
    "f8E8M0FNU",
    "i1",
    "i8",
    "i16",
    "i32",
    "i64",
    "index",
)


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor type: ``TensorType([None, 4096], "bf16")`` is
    ``tensor<?x4096xbf16>`` (``None`` marks a dynamic dimension)."""

    shape: Tuple[Optional[int], ...]
    dtype: str = "f32"

    def __init__(self, shape: Iterable[Optional[int]], dtype: str = "f32"):
        dims = []
        for d in shape:
            if d is not None:
                if isinstance(d, bool) or not isinstance(d, int) and not (hasattr(d, "__index__")):
                    raise TypeError("tensor dimensions are ints or None, got %r" % (d,))
                d = int(d)
                if d < 0:
                    raise ValueError(
                        "tensor dimensions are >= 0 (None for a dynamic one), got %d" % d
                    )
            dims.append(d)
        if dtype not in DTYPES:
            raise ValueError(
                "unknown element type %r (expected one of %s)" % (dtype, ", ".join(DTYPES))
            )
        object.__setattr__(self, "shape", tuple(dims))
        object.__setattr__(self, "dtype", dtype)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when no dimension is dynamic."""
        return all(d is not None for d in self.shape)

    def __str__(self) -> str:
        dims = ["?" if d is None else str(d) for d in self.shape]
        return "tensor<%s>" % "x".join(dims + [self.dtype])

    def _raw(self) -> Tuple[list, str]:
        return ([-1 if d is None else d for d in self.shape], self.dtype)


def _type_from_raw(raw) -> Union[TensorType, str]:
    shape, dtype, kind = raw
    if kind == "tensor" and dtype in DTYPES:
        return TensorType(shape, dtype)
    if kind == "scalar":
        return dtype
    if kind == "memref":
        return "memref<%s>" % "x".join(["?" if d is None else str(d) for d in shape] + [dtype])
    return dtype


class FunctionType(NamedTuple):
    """Signature of a function: input and result types (TensorType for
    tensors, the type's name otherwise) and its visibility."""

    inputs: Tuple[Union[TensorType, str], ...]
    results: Tuple[Union[TensorType, str], ...]
    visibility: str = "public"
