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

Calling convention (`--moe-lower-to-nvvm`, out-params): each public function
`@f(%in...) -> (%out...)` is exported as `_mlir_ciface_f(desc *in...,
desc *out...)`; every ranked memref argument is passed as a pointer to

    struct { T *allocated; T *aligned; int64_t offset;
             int64_t sizes[R]; int64_t strides[R]; }

(`aligned` is `tensor.data_ptr()`, `offset` 0, sizes and strides in
elements), scalars by value. The caller owns the outputs.

Streams and CUDA graphs: every call first hands the stream it runs on
(`torch.cuda.current_stream()` unless `stream=` / `set_stream` says
otherwise) to the library's runtime (`moeRuntimeSetStream`); all work of the
call is then issued on that stream, temporaries come from the stream-ordered
allocator (cuMemAllocAsync) and the runtime never synchronises the host
on that stream (a call is asynchronous, like a torch op). A call does no
host synchronisation and
no allocation outside the stream, so it can be captured with
`torch.cuda.graph` (allocating outputs with `__call__` during a capture
allocates them from the graph's pool, as any torch op does).

Errors: after every call the runtime's error slot (`moeRuntimeGetLastError`)
is read and a recorded error is raised as `RuntimeError` with the runtime's
message. Kernel faults are asynchronous: they surface at the next
`synchronize()` (or a later call). Arguments are checked against the
manifest before anything is launched (`ArgumentError`, a `ValueError`):
count, dtype, rank, static dimensions, dynamic dimensions that must agree
(the manifest's symbols, e.g. `T`), device (cuda:0, the runtime's device)
and contiguity. The compiled code checks the dynamic sizes itself as well
(C callers have no manifest): a mismatch that reaches it is raised as
`ShapeError` (a `ValueError` and a `RuntimeError`), and nothing ran.

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

try:  # torch is needed to call, not to import
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

__all__ = [
    "load",
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

MANIFEST_FORMAT = "moe-mlir-gpu-artifact"
MANIFEST_VERSION = 1
MANIFEST_SUFFIX = ".manifest.json"

# CUstream value of the legacy default stream; torch reports it as 0, which
# for moeRuntimeSetStream would mean "no stream".
CU_STREAM_LEGACY = 1

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
}

_KINDS = ("tensor", "memref", "scalar")


class ManifestError(ValueError):
    """A manifest that cannot be used (missing, malformed, stale)."""


class ArgumentError(ValueError):
    """Arguments that do not match a function's manifest entry."""


class ShapeError(ValueError, RuntimeError):
    """The compiled function's own run-time shape check failed (dynamic
    sizes of its arguments that must agree do not): reported by the library
    through `moeRuntimeReportShapeError` before it launched anything or
    wrote an output. A `ValueError`, and a `RuntimeError` like every error
    the runtime records."""


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


def _need_torch(what):
    if torch is None:
        raise RuntimeError("%s needs PyTorch (import torch failed)" % what)


# ----------------------------------------------------------------------------
# Memref descriptors and streams (also used by test/GPU/memref_abi.py)
# ----------------------------------------------------------------------------

_descriptor_types = {}


def _descriptor_type(rank):
    """The ctypes struct of a ranked memref descriptor of rank `rank`."""
    if rank not in _descriptor_types:
        fields = [
            ("allocated", ctypes.c_void_p),
            ("aligned", ctypes.c_void_p),
            ("offset", ctypes.c_int64),
        ]
        if rank > 0:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        _descriptor_types[rank] = type(
            "MemRefDescriptor%d" % rank, (ctypes.Structure,), {"_fields_": fields}
        )
    return _descriptor_types[rank]


def memref_descriptor(tensor, contiguous=True):
    """A ranked memref descriptor (ctypes struct) viewing `tensor`."""
    if contiguous and not tensor.is_contiguous():
        raise ValueError(
            "tensor of shape %s with strides %s is not contiguous; an "
            "identity-layout memref would ignore its strides (pass "
            "contiguous=False for strided memrefs)" % (tuple(tensor.shape), tensor.stride())
        )
    rank = tensor.dim()
    descriptor = _descriptor_type(rank)()
    descriptor.allocated = tensor.untyped_storage().data_ptr() or None
    descriptor.aligned = tensor.data_ptr() or None
    descriptor.offset = 0
    for i in range(rank):
        descriptor.sizes[i] = tensor.shape[i]
        descriptor.strides[i] = tensor.stride(i)
    return descriptor


def stream_handle(stream):
    """The CUstream value to hand to moeRuntimeSetStream for `stream` (a
    torch.cuda.Stream or a raw handle); the legacy default stream is 1."""
    handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else stream
    return int(handle) or CU_STREAM_LEGACY


def _current_stream():
    _need_torch("calling a compiled function")
    return torch.cuda.current_stream(0)


class Library:
    """A library of compiled functions loaded with ctypes, called by name
    with memref descriptors (no manifest: the former
    memref_abi.CompiledModule)."""

    def __init__(self, path):
        if torch is not None and torch.cuda.is_available():
            # Let torch set up the device first; the library's constructors
            # then load their kernels into the same (primary) context.
            torch.cuda.init()
        self.path = os.path.abspath(path)
        self._lib = ctypes.CDLL(self.path)
        lib = self._lib
        lib.moeRuntimeSetStream.argtypes = [ctypes.c_void_p]
        lib.moeRuntimeSetStream.restype = None
        lib.moeRuntimeGetLastError.argtypes = []
        lib.moeRuntimeGetLastError.restype = ctypes.c_char_p
        lib.moeRuntimeClearError.argtypes = []
        lib.moeRuntimeClearError.restype = None
        lib.moeRuntimeSynchronize.argtypes = []
        lib.moeRuntimeSynchronize.restype = ctypes.c_int
        self._stream = None
        self._functions = {}
        self.check_error("loading " + self.path)

    # -- streams -------------------------------------------------------------

    def set_stream(self, stream):
        """Runs later calls on `stream` (a torch.cuda.Stream or a raw
        CUstream handle); None: on torch.cuda.current_stream() of each
        call."""
        self._stream = stream

    def _stream_for_call(self, stream=None):
        if stream is not None:
            return stream_handle(stream)
        if self._stream is not None:
            return stream_handle(self._stream)
        return stream_handle(_current_stream())

    # -- symbols and errors --------------------------------------------------

    def has_function(self, name):
        try:
            getattr(self._lib, "_mlir_ciface_" + name)
        except AttributeError:
            return False
        return True

    def _function(self, name):
        if name not in self._functions:
            symbol = "_mlir_ciface_" + name
            try:
                function = getattr(self._lib, symbol)
            except AttributeError:
                raise AttributeError(
                    "%s has no %s (is @%s public and marked "
                    "llvm.emit_c_interface?)" % (self.path, symbol, name)
                ) from None
            function.restype = None
            self._functions[name] = function
        return self._functions[name]

    def check_error(self, what):
        """Raises the runtime's recorded error (and clears it)."""
        message = self._lib.moeRuntimeGetLastError()
        if message is not None:
            self._lib.moeRuntimeClearError()
            text = message.decode(errors="replace")
            if text.startswith("shape check failed: "):
                raise ShapeError("%s: %s" % (what, text))
            raise RuntimeError("%s: %s" % (what, text))

    # backwards-compatible name
    _check = check_error

    # -- module constants ------------------------------------------------------

    def device_constants(self):
        """What the library holds of its module constants (weights given as
        `dense` / `dense_resource` constants), which it uploaded to the
        device once, when it was loaded: dict(count=, bytes=, uploads=),
        `uploads` counting every upload since loading (calls make none).
        None for a library built before the runtime had them."""
        lib = self._lib
        try:
            held, uploads = lib.moeRuntimeConstantsHeld, lib.moeRuntimeConstantUploads
        except AttributeError:
            return None
        held.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        held.restype = ctypes.c_int64
        uploads.argtypes = []
        uploads.restype = ctypes.c_int64
        nbytes = ctypes.c_int64(0)
        count = held(ctypes.byref(nbytes))
        return dict(count=int(count), bytes=int(nbytes.value), uploads=int(uploads()))

    def unload(self):
        """Unloads the library (dlclose): its destructors unload its kernels
        and free its device constants. The object is unusable afterwards;
        every tensor the library returned must be gone or copied first."""
        if self._lib is None:
            return
        import _ctypes

        handle = self._lib._handle
        self._lib = None
        self._functions = {}
        _ctypes.dlclose(handle)

    # -- calls ---------------------------------------------------------------

    def _convert(self, index, arg, contiguous, keep_alive):
        if torch is not None and isinstance(arg, torch.Tensor):
            if arg.is_cuda and arg.device.index not in (None, 0):
                raise ValueError(
                    "argument %d is on %s; the runtime uses device 0" % (index, arg.device)
                )
            descriptor = memref_descriptor(arg, contiguous)
            keep_alive.append(descriptor)
            return ctypes.byref(descriptor)
        if isinstance(arg, ctypes.Structure):  # a prepared descriptor
            keep_alive.append(arg)
            return ctypes.byref(arg)
        if isinstance(arg, ctypes._SimpleCData):
            return arg
        if isinstance(arg, (bool, int)):
            return ctypes.c_int64(int(arg))
        raise TypeError(
            "argument %d: cannot pass %s; wrap floats in "
            "ctypes.c_float / ctypes.c_double" % (index, type(arg))
        )

    def call_converted(self, name, c_args, stream=None):
        """Calls `_mlir_ciface_<name>` with ready ctypes arguments on the
        call's stream; raises the runtime's error."""
        function = self._function(name)
        self.check_error("before calling @" + name)
        self._lib.moeRuntimeSetStream(self._stream_for_call(stream))
        function(*c_args)
        self.check_error("@" + name)

    def call(self, name, *args, contiguous=True, stream=None):
        """Calls `_mlir_ciface_<name>` with tensors as memref descriptors
        (outputs last, preallocated), ints as int64 and ctypes scalars as
        they are. Raises RuntimeError when the runtime records an error."""
        keep_alive = []
        c_args = [self._convert(i, arg, contiguous, keep_alive) for i, arg in enumerate(args)]
        self.call_converted(name, c_args, stream)

    def synchronize(self):
        """Waits for the device (moeRuntimeSynchronize) and raises any
        recorded or asynchronous error."""
        status = self._lib.moeRuntimeSynchronize()
        self.check_error("synchronize")
        if status != 0:
            raise RuntimeError("synchronize: moeRuntimeSynchronize returned %d" % status)


# ----------------------------------------------------------------------------
# Manifest
# ----------------------------------------------------------------------------


def _dim_text(size, symbol):
    if size is not None:
        return str(size)
    return symbol if symbol else "?"


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
        shape = tuple(int(s) for s in shape)
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
                if sym in env and env[sym][0] != got:
                    raise ArgumentError(
                        "%s: dimension %d (%s) is %d, but %s is %d in %s"
                        % (what, d, sym, got, sym, env[sym][0], env[sym][1])
                    )
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


# ----------------------------------------------------------------------------
# Torch-facing artifact and functions
# ----------------------------------------------------------------------------

_torch_dtype_names = None


def torch_dtype(name):
    """The torch dtype of an MLIR element type name."""
    _need_torch("torch_dtype")
    return getattr(torch, DTYPES[name][0])


def dtype_name(dtype):
    """The MLIR element type name of a torch dtype (i64 for int64)."""
    global _torch_dtype_names
    if _torch_dtype_names is None:
        _need_torch("dtype_name")
        _torch_dtype_names = {}
        for name, (attr, _, _) in DTYPES.items():
            if name != "index" and hasattr(torch, attr):
                _torch_dtype_names[getattr(torch, attr)] = name
    return _torch_dtype_names.get(dtype, str(dtype))


def _is_tensor(value):
    return torch is not None and isinstance(value, torch.Tensor)


def _info(value):
    """(shape, dtype name) of an argument for FunctionSpec.check."""
    if _is_tensor(value):
        return tuple(value.shape), dtype_name(value.dtype)
    return None, None


class Function:
    """A function of an artifact. Call it with the inputs (outputs are
    allocated with torch and returned) or with the inputs then the
    preallocated outputs (returned too): one tensor for one result, a tuple
    otherwise."""

    def __init__(self, artifact, spec):
        self.artifact = artifact
        self.spec = spec
        self.name = spec.name

    def __repr__(self):
        return "<moe_mlir.runtime.Function %s of %s>" % (
            self.spec.signature(),
            os.path.basename(self.artifact.path),
        )

    @property
    def signature(self):
        return self.spec.signature()

    def _check_values(self, values, offset=0):
        """Python-side checks of tensors / scalars: `values` are the
        arguments from position `offset` (0: inputs; len(args): outputs)."""
        specs = (self.spec.args + self.spec.results)[offset:]
        for i, (spec, v) in enumerate(zip(specs, values), offset):
            what = self.spec._what(i, spec)
            if spec.is_scalar:
                if _is_tensor(v):
                    raise ArgumentError(
                        "%s: expected a Python number, got a tensor "
                        "(pass .item() of a CPU tensor)" % what
                    )
                if not isinstance(v, (bool, int, float, ctypes._SimpleCData)):
                    raise ArgumentError("%s: expected a number, got %s" % (what, type(v).__name__))
                continue
            if not _is_tensor(v):
                raise ArgumentError(
                    "%s: expected a torch tensor, got %s" % (what, type(v).__name__)
                )
            if not v.is_cuda or v.device.index not in (None, 0):
                raise ArgumentError(
                    "%s: expected a tensor on cuda:0 (the "
                    "runtime's device), got one on %s" % (what, v.device)
                )
            if spec.contiguous and not v.is_contiguous():
                raise ArgumentError(
                    "%s: tensor of shape %s with strides %s is not contiguous "
                    "(call .contiguous())" % (what, list(v.shape), v.stride())
                )

    def _c_arg(self, spec, value, keep_alive):
        if spec.is_scalar:
            if isinstance(value, ctypes._SimpleCData):
                return value
            return DTYPES[spec.dtype][2](value)
        descriptor = memref_descriptor(value, contiguous=spec.contiguous)
        keep_alive.append(descriptor)
        return ctypes.byref(descriptor)

    def output_shapes(self, *inputs):
        """The output shapes for these inputs (tuples)."""
        self._arity(inputs, outputs=False)
        return self.spec.output_shapes([_info(v) for v in inputs])

    def allocate_outputs(self, *inputs):
        """Empty outputs (torch.empty on cuda:0, on the current stream) of
        the shapes these inputs give, after checking the inputs."""
        _need_torch("allocate_outputs")
        self._arity(inputs, outputs=False)
        self._check_values(inputs)
        shapes = self.spec.output_shapes([_info(v) for v in inputs])
        return [
            torch.empty(shape, dtype=torch_dtype(spec.dtype), device="cuda:0")
            for spec, shape in zip(self.spec.results, shapes)
        ]

    def _arity(self, args, outputs):
        n_in, n_out = len(self.spec.args), len(self.spec.results)
        ok = (len(args) == n_in) or (outputs and len(args) == n_in + n_out)
        if not ok:
            raise ArgumentError(self.spec._count_message(len(args)))

    def __call__(self, *args, stream=None):
        """fn(*inputs) or fn(*inputs, *outputs): checks, runs on the current
        torch stream (or `stream`), returns the outputs."""
        _need_torch("calling @" + self.name)
        self._arity(args, outputs=True)
        n_in = len(self.spec.args)
        inputs, outputs = list(args[:n_in]), list(args[n_in:])
        if outputs:
            self._check_values(inputs)
            self._check_values(outputs, n_in)
            self.spec.check([_info(v) for v in inputs], [_info(v) for v in outputs])
        else:
            outputs = self.allocate_outputs(*inputs)
        self.run_unchecked(inputs, outputs, stream)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def run_unchecked(self, inputs, outputs, stream=None):
        """The call without the manifest checks (inputs, outputs: lists)."""
        keep_alive = []
        c_args = [
            self._c_arg(s, v, keep_alive)
            for s, v in zip(self.spec.args + self.spec.results, list(inputs) + list(outputs))
        ]
        self.artifact.library.call_converted(self.name, c_args, stream)


class Artifact:
    """A loaded library and its manifest."""

    def __init__(self, path, manifest=None, library=None):
        self.path = os.path.abspath(path)
        self.manifest = manifest
        self.library = library if library is not None else Library(self.path)
        self._fns = {}
        if manifest is not None:
            missing = [n for n in manifest.functions if not self.library.has_function(n)]
            if missing:
                raise ManifestError(
                    "%s lists %s, which %s does not export (_mlir_ciface_*)"
                    % (manifest.where, ", ".join("@" + n for n in missing), self.path)
                )

    @property
    def functions(self):
        return sorted(self.manifest.functions) if self.manifest else []

    def fn(self, name):
        """The function `name` (a Function)."""
        if name not in self._fns:
            if self.manifest is None:
                raise ManifestError(
                    "%s was loaded without a manifest: use "
                    "artifact.library.call(%r, *inputs, *outputs)" % (self.path, name)
                )
            if name not in self.manifest.functions:
                raise KeyError(
                    "%s has no function %r (it has: %s)"
                    % (self.path, name, ", ".join(self.functions))
                )
            self._fns[name] = Function(self, self.manifest.functions[name])
        return self._fns[name]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        manifest = self.__dict__.get("manifest")
        if manifest is not None and name in manifest.functions:
            return self.fn(name)
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))

    def set_stream(self, stream):
        """Pins the stream of later calls (None: torch's current stream)."""
        self.library.set_stream(stream)

    def synchronize(self):
        """Waits for the device and raises any recorded or asynchronous
        error of the runtime."""
        self.library.synchronize()

    def __repr__(self):
        return "<moe_mlir.runtime.Artifact %s: %s>" % (
            self.path,
            ", ".join(self.functions) or "no manifest",
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


def load(path, manifest=None, check_hash=True):
    """Loads a compiled artifact. `manifest`: None reads
    `<stem>.manifest.json` next to the library; a path, dict or Manifest;
    False loads the library without one (no checks, no Function objects:
    call through `artifact.library.call`)."""
    if not os.path.isfile(path):
        raise FileNotFoundError("no such artifact: %s" % path)
    m = None
    if manifest is not False:
        m = load_manifest(path, manifest, check_hash)
    return Artifact(path, m)
