# ===- manifest.py - what a compiled library exports, and call checks -----=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""The manifest of a compiled library, in pure Python (no torch, no ctypes
calls): `Manifest` reads, validates, builds and writes it; `FunctionSpec` and
`ArgSpec` are a function's signature, and `FunctionSpec.check` /
`output_shapes` check a call given as (shape, MLIR dtype name) pairs and
derive the output shapes; `DTYPES` is the table of element types a manifest
may name; `load_manifest` finds and checks the manifest of a library.

Manifest (`<library stem>.manifest.json` next to the library), written at
compile time:

    {"format": "moe-mlir-gpu-artifact", "version": 1,
     "library": "qwen3.so", "sha256": "<of the library>",
     "calling_convention": "out-params",
     "target": {...}, "pipeline": "...",
     "functions": {"ffn": {
        "args":    [{"name": "x", "kind": "tensor", "dtype": "bf16",
                     "shape": [null, 2048], "symbols": ["T", null]}, ...],
        "results": [{"name": "result0", "kind": "tensor", "dtype": "bf16",
                     "shape": [null, 2048], "symbols": ["T", null]}]}}}

`shape` has null for dynamic dimensions. `symbols` (optional) names dynamic
dimensions: equal names must be equal at run time, and a result's named
dimension is taken from the inputs when outputs are allocated. A null
symbol is a dynamic dimension nothing is known about: it is not checked,
and an output with one cannot be allocated (pass the outputs instead).
`kind` is "tensor" or "memref" (passed as descriptors; a memref with a
non-identity layout may be strided: "contiguous": false) or "scalar"
(`shape` null, passed by value).
"""

import ctypes
import hashlib
import json
import os
import re

from .errors import ArgumentError, ManifestError

MANIFEST_FORMAT = "moe-mlir-gpu-artifact"
MANIFEST_VERSION = 1
MANIFEST_SUFFIX = ".manifest.json"

# MLIR element type -> (torch dtype attribute, bytes per element, ctypes
# type of a scalar argument). i1 memrefs use one byte per element, as
# torch.bool does; index is 64-bit in the lowering.
DTYPES = {
    "f64": ("float64", 8, ctypes.c_double),
    "f32": ("float32", 4, ctypes.c_float),
    "f16": ("float16", 2, None),
    "bf16": ("bfloat16", 2, None),
    "i64": ("int64", 8, ctypes.c_int64),
    "index": ("int64", 8, ctypes.c_int64),
    "i32": ("int32", 4, ctypes.c_int32),
    "i16": ("int16", 2, ctypes.c_int16),
    "i8": ("int8", 1, ctypes.c_int8),
    "ui8": ("uint8", 1, ctypes.c_uint8),
    "i1": ("bool", 1, ctypes.c_bool),
    # Low-precision weights and scales (tensors only).
    "f8E4M3FN": ("float8_e4m3fn", 1, None),
    "f8E8M0FNU": ("float8_e8m0fnu", 1, None),
}

_KINDS = ("tensor", "memref", "scalar")


def manifest_path(library_path):
    """Where the manifest of `library_path` lives: `x/lib.so` ->
    `x/lib.manifest.json`."""
    stem, ext = os.path.splitext(library_path)
    return (stem if ext == ".so" else library_path) + MANIFEST_SUFFIX


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _dim_text(size, symbol):
    if size is not None:
        return str(size)
    return symbol if symbol else "?"


def _symbolic(size):
    """A torch.SymInt (a size while torch.compile traces)."""
    return type(size).__name__ == "SymInt"


class ArgSpec:
    """One argument or result of a compiled function."""

    __slots__ = ("name", "kind", "dtype", "shape", "symbols", "contiguous")

    def __init__(self, name, kind, dtype, shape=None, symbols=None, contiguous=True):
        self.name = name
        self.kind = kind
        self.dtype = dtype
        self.shape = None if shape is None else tuple(shape)
        if self.shape is not None and symbols is None:
            symbols = [None] * len(self.shape)
        self.symbols = None if symbols is None else tuple(symbols)
        self.contiguous = contiguous

    @property
    def rank(self):
        return None if self.shape is None else len(self.shape)

    @property
    def is_scalar(self):
        return self.kind == "scalar"

    def type_text(self):
        if self.is_scalar:
            return self.dtype
        return "%s[%s]" % (
            self.dtype,
            ", ".join(_dim_text(s, y) for s, y in zip(self.shape, self.symbols)),
        )

    def to_json(self):
        d = {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
        }
        if self.symbols is not None and any(self.symbols):
            d["symbols"] = list(self.symbols)
        if not self.contiguous:
            d["contiguous"] = False
        return d

    @classmethod
    def from_json(cls, d, where):
        if not isinstance(d, dict):
            raise ManifestError("%s: expected an object, got %r" % (where, d))
        for key in ("kind", "dtype"):
            if key not in d:
                raise ManifestError("%s: missing %r" % (where, key))
        kind, dtype = d["kind"], d["dtype"]
        if kind not in _KINDS:
            raise ManifestError("%s: kind %r is not one of %s" % (where, kind, ", ".join(_KINDS)))
        if dtype not in DTYPES:
            raise ManifestError(
                "%s: unsupported dtype %r (known: %s)" % (where, dtype, ", ".join(sorted(DTYPES)))
            )
        shape = d.get("shape")
        symbols = d.get("symbols")
        if kind == "scalar":
            if shape is not None:
                raise ManifestError("%s: a scalar has no shape" % where)
            if DTYPES[dtype][2] is None:
                raise ManifestError(
                    "%s: scalar arguments of type %s are not supported" % (where, dtype)
                )
        else:
            if not isinstance(shape, list) or not all(
                s is None or (isinstance(s, int) and not isinstance(s, bool) and s >= 0)
                for s in shape
            ):
                raise ManifestError(
                    "%s: shape must be a list of non-negative ints and nulls, "
                    "got %r" % (where, shape)
                )
            if symbols is not None:
                if not isinstance(symbols, list) or len(symbols) != len(shape):
                    raise ManifestError(
                        "%s: symbols must be a list as long as shape, got %r" % (where, symbols)
                    )
                for s, y in zip(shape, symbols):
                    if y is not None and (not isinstance(y, str) or not y):
                        raise ManifestError("%s: symbol %r is not a name" % (where, y))
                    if y is not None and s is not None:
                        raise ManifestError(
                            "%s: static dimension %d has a symbol %r" % (where, s, y)
                        )
        return cls(
            d.get("name") or where, kind, dtype, shape, symbols, bool(d.get("contiguous", True))
        )


class FunctionSpec:
    """A function's signature from the manifest, and the checks of a call
    against it (pure Python: shapes as tuples, dtypes by MLIR name)."""

    def __init__(self, name, args, results, unsupported=None):
        self.name = name
        self.args = list(args)
        self.results = list(results)
        self.unsupported = unsupported

    @classmethod
    def from_json(cls, name, d, where="manifest"):
        where = "%s: function %r" % (where, name)
        if not isinstance(d, dict):
            raise ManifestError("%s: expected an object" % where)
        for key in ("args", "results"):
            if not isinstance(d.get(key), list):
                raise ManifestError("%s: missing list %r" % (where, key))
        args = [
            ArgSpec.from_json(a, "%s argument %d" % (where, i)) for i, a in enumerate(d["args"])
        ]
        results = [
            ArgSpec.from_json(r, "%s result %d" % (where, i)) for i, r in enumerate(d["results"])
        ]
        for i, r in enumerate(results):
            if r.is_scalar:
                raise ManifestError(
                    "%s result %d: scalar results are not "
                    "supported (out-params are memrefs)" % (where, i)
                )
        return cls(name, args, results, d.get("unsupported"))

    def to_json(self):
        d = {
            "args": [a.to_json() for a in self.args],
            "results": [r.to_json() for r in self.results],
        }
        if self.unsupported:
            d["unsupported"] = self.unsupported
        return d

    def signature(self):
        args = ", ".join("%s: %s" % (a.name, a.type_text()) for a in self.args)
        res = ", ".join(r.type_text() for r in self.results)
        if len(self.results) != 1:
            res = "(%s)" % res
        return "%s(%s) -> %s" % (self.name, args, res)

    def __repr__(self):
        return "<FunctionSpec %s>" % self.signature()

    # -- checks --------------------------------------------------------------

    def _what(self, index, spec):
        n_in = len(self.args)
        if index < n_in:
            return "@%s argument %d (%s)" % (self.name, index, spec.name)
        return "@%s output %d (%s)" % (self.name, index - n_in, spec.name)

    def _bind(self, index, spec, shape, dtype, env, check_symbols):
        what = self._what(index, spec)
        if spec.is_scalar:
            if shape is not None:
                raise ArgumentError("%s: expected a scalar %s, got a tensor" % (what, spec.dtype))
            return
        if shape is None:
            raise ArgumentError("%s: expected a tensor %s, got a scalar" % (what, spec.type_text()))
        if dtype != spec.dtype:
            raise ArgumentError("%s: expected dtype %s, got %s" % (what, spec.dtype, dtype))
        # (Symbolic sizes, torch.SymInt while torch.compile traces, stay
        # symbolic: int() would specialise the graph to one T.)
        shape = tuple(s if _symbolic(s) else int(s) for s in shape)
        if len(shape) != len(spec.shape):
            raise ArgumentError(
                "%s: expected rank %d %s, got shape %s"
                % (what, len(spec.shape), spec.type_text(), list(shape))
            )
        for d, (want, sym, got) in enumerate(zip(spec.shape, spec.symbols, shape)):
            if want is not None and got != want:
                raise ArgumentError(
                    "%s: expected shape %s, got %s "
                    "(dimension %d)" % (what, spec.type_text(), list(shape), d)
                )
            if want is None and sym and check_symbols:
                if sym in env:
                    prev, where = env[sym]
                    message = "%s: dimension %d (%s) is %s, but %s is %s in %s" % (
                        what,
                        d,
                        sym,
                        got,
                        sym,
                        prev,
                        where,
                    )
                    if _symbolic(got) or _symbolic(prev):
                        # While tracing: sizes with a hint are compared
                        # (a guard); unbacked ones (torch._dynamo.
                        # mark_unbacked: one graph for every T, 0 and 1
                        # included) cannot be, so the check is deferred
                        # to run time.
                        import torch
                        from torch.fx.experimental.symbolic_shapes import guard_or_false

                        if guard_or_false(got != prev):
                            raise ArgumentError(message)
                        torch._check(got == prev, lambda m=message: m)
                    elif prev != got:
                        raise ArgumentError(message)
                env.setdefault(sym, (got, "%s dimension %d" % (what, d)))

    def check(self, inputs, outputs=None):
        """Checks a call. `inputs` / `outputs`: one (shape, dtype) per
        argument / result, shape None for a scalar, dtype the MLIR name.
        Returns {symbol: size}. Raises ArgumentError."""
        if self.unsupported:
            raise ArgumentError("@%s cannot be called: %s" % (self.name, self.unsupported))
        if len(inputs) != len(self.args):
            raise ArgumentError(self._count_message(len(inputs) + len(outputs or ())))
        if outputs is not None and len(outputs) != len(self.results):
            raise ArgumentError(self._count_message(len(inputs) + len(outputs)))
        env = {}
        for i, (spec, (shape, dtype)) in enumerate(zip(self.args, inputs)):
            self._bind(i, spec, shape, dtype, env, True)
        for j, (spec, (shape, dtype)) in enumerate(zip(self.results, outputs or ())):
            self._bind(len(self.args) + j, spec, shape, dtype, env, True)
        return {k: v[0] for k, v in env.items()}

    def _count_message(self, got):
        n_in, n_out = len(self.args), len(self.results)
        return (
            "@%s takes %d input%s, then optionally its %d output%s "
            "(%d arguments in all); got %d arguments. Signature: %s"
            % (
                self.name,
                n_in,
                "" if n_in == 1 else "s",
                n_out,
                "" if n_out == 1 else "s",
                n_in + n_out,
                got,
                self.signature(),
            )
        )

    def output_shapes(self, inputs):
        """The shapes of the outputs for these inputs ((shape, dtype) per
        argument). Raises ArgumentError when a dynamic output dimension is
        not determined by the inputs."""
        env = self.check(inputs)
        shapes = []
        for j, spec in enumerate(self.results):
            shape = []
            for d, (size, sym) in enumerate(zip(spec.shape, spec.symbols)):
                if size is not None:
                    shape.append(size)
                elif sym and sym in env:
                    shape.append(env[sym])
                else:
                    raise ArgumentError(
                        "@%s output %d (%s): dynamic dimension %d is not "
                        "determined by the inputs (the manifest names no "
                        "input dimension it equals); allocate the outputs "
                        "and pass them after the inputs" % (self.name, j, spec.name, d)
                    )
            shapes.append(tuple(shape))
        return shapes


class Manifest:
    """The manifest of a compiled library."""

    def __init__(self, data, path=None):
        self.path = path
        where = "manifest %s" % path if path else "manifest"
        self.where = where
        if not isinstance(data, dict):
            raise ManifestError("%s: expected a JSON object" % where)
        if data.get("format") != MANIFEST_FORMAT:
            raise ManifestError(
                "%s: format is %r, expected %r" % (where, data.get("format"), MANIFEST_FORMAT)
            )
        version = data.get("version")
        if version != MANIFEST_VERSION:
            raise ManifestError(
                "%s: version %r, this runtime reads version %d" % (where, version, MANIFEST_VERSION)
            )
        convention = data.get("calling_convention", "out-params")
        if convention != "out-params":
            raise ManifestError(
                "%s: calling convention %r is not supported "
                "(compile with out-params)" % (where, convention)
            )
        functions = data.get("functions")
        if not isinstance(functions, dict) or not functions:
            raise ManifestError("%s: no functions" % where)
        self.data = data
        self.functions = {
            name: FunctionSpec.from_json(name, f, where) for name, f in functions.items()
        }
        self.library = data.get("library")
        self.sha256 = data.get("sha256")

    @classmethod
    def read(cls, path):
        try:
            with open(path) as f:
                data = json.load(f)
        except FileNotFoundError:
            raise ManifestError(
                "no manifest %s (compile with "
                "moe_mlir.gpu.compile_gpu, or pass "
                "manifest=False to load without checks)" % path
            ) from None
        except ValueError as exc:
            raise ManifestError("manifest %s is not valid JSON: %s" % (path, exc)) from None
        return cls(data, path)

    def write(self, path):
        tmp = path + ".tmp"
        text = json.dumps(self.data, indent=1)
        # lists of numbers / names on one line: "shape": [null, 2048]
        text = re.sub(
            r"\[\s*([^\[\]{}]*?)\s*\]",
            lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]",
            text,
        )
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
        self.path = path

    @staticmethod
    def build(functions, library=None, sha256=None, **meta):
        """A manifest from FunctionSpecs (what compile_gpu writes)."""
        data = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "library": library,
            "sha256": sha256,
            "calling_convention": "out-params",
        }
        data.update(meta)
        data["functions"] = {f.name: f.to_json() for f in functions}
        return Manifest(data)

    def check_library(self, library_path):
        """Raises ManifestError when the manifest was written for another
        build of the library."""
        if self.sha256:
            actual = file_sha256(library_path)
            if actual != self.sha256:
                raise ManifestError(
                    "%s is stale: it was written for a library with sha256 "
                    "%s..., %s has %s... (recompile, or pass manifest=False)"
                    % (self.where, self.sha256[:12], library_path, actual[:12])
                )


def load_manifest(library_path, manifest=None, check_hash=True):
    """The Manifest of `library_path`: `manifest` may be a path, a dict, a
    Manifest or None (the default path next to the library)."""
    if isinstance(manifest, Manifest):
        m = manifest
    elif isinstance(manifest, dict):
        m = Manifest(manifest)
    else:
        m = Manifest.read(manifest or manifest_path(library_path))
    if check_hash:
        m.check_library(library_path)
    return m
