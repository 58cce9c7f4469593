# ===- memref_abi.py - call moe-aot libraries on torch tensors ------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Calls functions of a moe-aot shared library on PyTorch tensors (ctypes).

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

import ctypes
import os

import torch

__all__ = ["CompiledModule", "memref_descriptor"]

# CUstream value of the legacy default stream; torch reports it as 0, which
# for moeRuntimeSetStream would mean "no stream".
_CU_STREAM_LEGACY = 1

_descriptor_types = {}


def _descriptor_type(rank):
    """The ctypes struct of a ranked memref descriptor of rank `rank`."""
    if rank not in _descriptor_types:
        fields = [("allocated", ctypes.c_void_p),
                  ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_int64)]
        if rank > 0:
            fields += [("sizes", ctypes.c_int64 * rank),
                       ("strides", ctypes.c_int64 * rank)]
        _descriptor_types[rank] = type("MemRefDescriptor%d" % rank,
                                       (ctypes.Structure,),
                                       {"_fields_": fields})
    return _descriptor_types[rank]


def memref_descriptor(tensor, contiguous=True):
    """A ranked memref descriptor (ctypes struct) viewing `tensor`."""
    if contiguous and not tensor.is_contiguous():
        raise ValueError(
            "tensor of shape %s with strides %s is not contiguous; an "
            "identity-layout memref would ignore its strides (pass "
            "contiguous=False for strided memrefs)"
            % (tuple(tensor.shape), tensor.stride()))
    rank = tensor.dim()
    descriptor = _descriptor_type(rank)()
    descriptor.allocated = tensor.untyped_storage().data_ptr() or None
    descriptor.aligned = tensor.data_ptr() or None
    descriptor.offset = 0
    for i in range(rank):
        descriptor.sizes[i] = tensor.shape[i]
        descriptor.strides[i] = tensor.stride(i)
    return descriptor


def _stream_handle(stream):
    handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else stream
    return int(handle) or _CU_STREAM_LEGACY


class CompiledModule:
    """A moe-aot shared library, loaded with ctypes."""

    def __init__(self, path):
        if torch.cuda.is_available():
            # Let torch set up the device first; the library's constructors
            # then load their kernels into the same (primary) context.
            torch.cuda.init()
        self.path = os.path.abspath(path)
        self._lib = ctypes.CDLL(self.path)
        self._lib.moeRuntimeSetStream.argtypes = [ctypes.c_void_p]
        self._lib.moeRuntimeSetStream.restype = None
        self._lib.moeRuntimeGetLastError.argtypes = []
        self._lib.moeRuntimeGetLastError.restype = ctypes.c_char_p
        self._lib.moeRuntimeClearError.argtypes = []
        self._lib.moeRuntimeClearError.restype = None
        self._lib.moeRuntimeSynchronize.argtypes = []
        self._lib.moeRuntimeSynchronize.restype = ctypes.c_int
        self._stream = None
        self._functions = {}
        self._check("loading " + self.path)

    def set_stream(self, stream):
        """Runs later calls on `stream` (a torch.cuda.Stream or a raw
        CUstream handle); None: on torch.cuda.current_stream() of each
        call."""
        self._stream = stream

    def _current_stream_handle(self):
        if self._stream is not None:
            return _stream_handle(self._stream)
        return _stream_handle(torch.cuda.current_stream(0))

    def _function(self, name):
        if name not in self._functions:
            symbol = "_mlir_ciface_" + name
            try:
                function = getattr(self._lib, symbol)
            except AttributeError:
                raise AttributeError(
                    "%s has no %s (is @%s marked llvm.emit_c_interface?)"
                    % (self.path, symbol, name)) from None
            function.restype = None
            self._functions[name] = function
        return self._functions[name]

    def _check(self, what):
        message = self._lib.moeRuntimeGetLastError()
        if message is not None:
            self._lib.moeRuntimeClearError()
            raise RuntimeError("%s: %s" % (what, message.decode(errors="replace")))

    def _convert(self, index, arg, contiguous, keep_alive):
        if isinstance(arg, torch.Tensor):
            if arg.is_cuda and arg.device.index not in (None, 0):
                raise ValueError("argument %d is on %s; the runtime uses "
                                 "device 0" % (index, arg.device))
            descriptor = memref_descriptor(arg, contiguous)
            keep_alive.append(descriptor)
            return ctypes.byref(descriptor)
        if isinstance(arg, ctypes._SimpleCData):
            return arg
        if isinstance(arg, (bool, int)):
            return ctypes.c_int64(int(arg))
        raise TypeError("argument %d: cannot pass %s; wrap floats in "
                        "ctypes.c_float / ctypes.c_double" % (index, type(arg)))

    def call(self, name, *args, contiguous=True):
        """Calls `_mlir_ciface_<name>` with tensors as memref descriptors
        (outputs last, preallocated), ints as int64 and ctypes scalars as
        they are. Raises RuntimeError when the runtime records an error."""
        function = self._function(name)
        self._check("before calling @" + name)
        keep_alive = []
        c_args = [self._convert(i, arg, contiguous, keep_alive)
                  for i, arg in enumerate(args)]
        self._lib.moeRuntimeSetStream(self._current_stream_handle())
        function(*c_args)
        self._check("@" + name)

    def synchronize(self):
        """Waits for the device (moeRuntimeSynchronize) and raises any
        recorded or asynchronous error."""
        status = self._lib.moeRuntimeSynchronize()
        self._check("synchronize")
        if status != 0:
            raise RuntimeError("synchronize: moeRuntimeSynchronize returned %d"
                               % status)
