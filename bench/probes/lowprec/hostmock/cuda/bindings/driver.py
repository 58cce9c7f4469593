# Host test only: stand-in for cuda.bindings.driver. Launches decode the kernel arguments (device
# pointers = numpy buffers of the torch stand-in, tensor maps included), check their shapes against
# the kernel's signature, and run the numpy emulators of selftest_host.py.
import ctypes, types, numpy as np
import torch as _t


class _Any:
    def __getattr__(self, k):
        return k


CUtensorMapDataType = CUtensorMapSwizzle = CUtensorMapInterleave = CUtensorMapL2promotion = (
    CUtensorMapFloatOOBfill
) = CUfunction_attribute = _Any()
cuuint64_t = cuuint32_t = int
MAPS = {}
LOG = []


def cuDriverGetVersion():
    return (0, 13000)


def cuModuleLoadData(data):
    return (0, "mod")


def cuModuleGetFunction(mod, name):
    return (0, name.decode())


def cuFuncSetAttribute(f, a, v):
    return (0,)


def cuFuncGetAttribute(a, f):
    return (0, 99)


def cuTensorMapEncodeTiled(dt, rank, ptr, dims, strides, box, es, il, sw, l2, oob):
    assert dt == "CU_TENSOR_MAP_DATA_TYPE_UINT8" and sw == "CU_TENSOR_MAP_SWIZZLE_128B", (dt, sw)
    assert box[0] * 1 <= 128 and box[1] <= 256 and strides[0] % 16 == 0
    LOG.append(("tmap", dims, strides, box))
    return (0, types.SimpleNamespace(opaque=[ptr, dims[0], dims[1], box[0], box[1]] + [0] * 11))


def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
    import fp8_device, rega_device, selftest_host

    assert (gx, gy, gz, bx, by, bz) == (1, 1, 1, 128, 1, 1)
    ptrs = []
    arr = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
    n = 6 if f.startswith("fp8") else 5
    for i in range(n):
        ptrs.append(ctypes.cast(arr[i], ctypes.POINTER(ctypes.c_uint64))[0])
    ts = [_t.REG[p] for p in ptrs]
    if f.startswith("fp8"):
        spec = fp8_device.Spec(f + ".cubin")
        assert smem == spec.smem

        def data(t, rows):
            if t.a.dtype == np.uint8 and t.a.size == 128 and spec.load == "tma":
                w = t.a.view(np.uint64)
                src = _t.REG[int(w[0])].a
                assert (
                    src.shape == (int(w[2]), int(w[1])) and int(w[4]) == rows and int(w[3]) == 128
                )
                return src
            assert spec.load == "manual"
            return t.a

        A, B = data(ts[0], 64), data(ts[1], spec.N)
        assert A.shape == (64, spec.K) and B.shape == (spec.N, spec.K)
        sa, sb = ts[3].a, ts[4].a
        assert (
            sa.shape == (spec.KB, 64) and sb.shape == (spec.KB, spec.NB) and sa.dtype == np.float32
        )
        o, dbg = selftest_host.fp8_emulator(spec)(A, B, sa, sb)
        assert ts[2].a.shape == o.shape and ts[5].a.shape == dbg.shape, (ts[5].a.shape, dbg.shape)
        ts[2].a[...] = o
        ts[5].a[...] = dbg
    else:
        spec = rega_device.Spec(f + ".cubin")
        a = ts[0].a.view(np.uint16) if spec.mode == "bf16" else ts[0].a
        assert a.shape == ((64, 128) if spec.mode == "bf16" else (64, 64))
        assert ts[1].a.shape == (64, 4) and ts[2].a.shape == (128, 128)
        o, regs = selftest_host.rega_emulator(spec)(a, ts[1].a, ts[2].a.view(np.uint16))
        ts[3].a[...] = o
        ts[4].a[...] = regs.reshape(-1).view(np.int32)
    return (0,)
