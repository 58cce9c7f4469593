# ===- library.py - a compiled library loaded with ctypes -----------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""`Library`: a compiled shared library loaded with ctypes and called by
name with memref descriptors, without a manifest (the former
memref_abi.CompiledModule): the runtime's embedder API (streams, the error
slot, synchronisation, module constants, dlclose) and the raw calls that
`artifact.Function` makes after its checks.

Streams and CUDA graphs: every call first hands the stream it runs on
(`torch.cuda.current_stream()` unless `stream=` / `set_stream` says
otherwise) to the library's runtime (`moeRuntimeSetStream`); all work of the
call is then issued on that stream, temporaries come from the stream-ordered
allocator (cuMemAllocAsync) and the runtime never synchronises the host on
that stream (a call is asynchronous, like a torch op). A call does no host
synchronisation and no allocation outside the stream, so it can be captured
with `torch.cuda.graph` (allocating outputs with `Function.__call__` during
a capture allocates them from the graph's pool, as any torch op does).

Errors: after every call the runtime's error slot (`moeRuntimeGetLastError`)
is read and a recorded error is raised as `RuntimeError` with the runtime's
message. Kernel faults are asynchronous: they surface at the next
`synchronize()` (or a later call). The compiled code checks the dynamic
sizes of its arguments itself (C callers have no manifest): a mismatch that
reaches it is raised as `ShapeError` (a `ValueError` and a `RuntimeError`),
and nothing ran.
"""

import ctypes
import os

from .descriptors import memref_descriptor, stream_handle
from .errors import ShapeError
from .tensors import _current_stream, _torch


class Library:
    """A library of compiled functions loaded with ctypes, called by name
    with memref descriptors (no manifest: the former
    memref_abi.CompiledModule)."""

    def __init__(self, path):
        torch = _torch()
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
        torch = _torch()
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
