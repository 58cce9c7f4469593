# ===- descriptors.py - memref descriptors and stream handles (C ABI) -----=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""The C ABI of the compiled functions, as ctypes values: memref
descriptors viewing tensors (`memref_descriptor`) and the CUstream handle a
call runs on (`stream_handle`). Used by `library.Library` and by
test/GPU/memref_abi.py; needs no torch of its own (it reads the tensor
methods it is given).

Calling convention (`--moe-lower-to-nvvm`, out-params): each public function
`@f(%in...) -> (%out...)` is exported as `_mlir_ciface_f(desc *in...,
desc *out...)`; every ranked memref argument is passed as a pointer to

    struct { T *allocated; T *aligned; int64_t offset;
             int64_t sizes[R]; int64_t strides[R]; }

(`aligned` is `tensor.data_ptr()`, `offset` 0, sizes and strides in
elements), scalars by value. The caller owns the outputs.
"""

import ctypes

# CUstream value of the legacy default stream; torch reports it as 0, which
# for moeRuntimeSetStream would mean "no stream".
CU_STREAM_LEGACY = 1

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
