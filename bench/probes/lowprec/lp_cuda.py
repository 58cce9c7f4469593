# Device-side helpers of the low-precision runners: the CUDA driver through cuda.bindings (as the
# shared Hopper probes' probe_cuda.py), device buffers through torch.
import ctypes, os, struct, time
import numpy as np
import torch
from cuda.bindings import driver as cu


def chk(r):
    err = r[0] if isinstance(r, tuple) else r
    if int(err) != 0:
        raise RuntimeError(f"CUDA error {err}")
    if isinstance(r, tuple):
        return r[1] if len(r) == 2 else r[1:]


def env_line():
    p = torch.cuda.get_device_properties(0)
    drv = chk(cu.cuDriverGetVersion())
    return (
        f"device: {p.name}, {p.multi_processor_count} SMs, cc {p.major}.{p.minor}; driver API {drv}; "
        f"torch {torch.__version__} (CUDA {torch.version.cuda})"
    )


def dev(a):
    """numpy array -> torch CUDA tensor (same bits; unsigned 16/32-bit as the signed type)"""
    a = np.ascontiguousarray(a)
    if a.dtype in (np.uint16, np.uint32):
        a = a.view(np.int16 if a.dtype == np.uint16 else np.int32)
    return torch.from_numpy(a).cuda()


def tmap(t, box, dtype):
    """2-D tensor map, SWIZZLE_128B, over a row-major CUDA tensor t [rows, cols] (cols contiguous);
    box = [box_cols, box_rows]; dtype 'u8' or 'bf16'. Returns the 128-byte device buffer holding the
    CUtensorMap (the kernels take a pointer to it; keep it alive while kernels use it: hopper P2)."""
    dt = {
        "u8": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8,
        "bf16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    }[dtype]
    rows, cols = t.shape
    r = cu.cuTensorMapEncodeTiled(
        dt,
        2,
        t.data_ptr(),
        [cu.cuuint64_t(cols), cu.cuuint64_t(rows)],
        [cu.cuuint64_t(t.stride(0) * t.element_size())],
        [cu.cuuint32_t(b) for b in box],
        [cu.cuuint32_t(1)] * 2,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    tm = chk(r)
    raw = bytes(struct.pack("16Q", *[int(x) for x in tm.opaque]))
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).cuda()


def ensure_context():
    """Makes the primary context (torch's) current for the driver calls of this thread."""
    torch.zeros(1, device="cuda")
    chk(cu.cuInit(0))
    device = chk(cu.cuDeviceGet(0))
    ctx = chk(cu.cuDevicePrimaryCtxRetain(device))
    chk(cu.cuCtxSetCurrent(ctx))


class Kernel:
    def __init__(self, cubin_path, name, smem):
        ensure_context()
        self.mod = chk(cu.cuModuleLoadData(open(cubin_path, "rb").read()))
        self.f = chk(cu.cuModuleGetFunction(self.mod, name.encode()))
        self.smem = smem
        chk(
            cu.cuFuncSetAttribute(
                self.f,
                cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem,
            )
        )
        self.nregs = chk(
            cu.cuFuncGetAttribute(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, self.f)
        )

    def launch(self, args, keep=(), timeout_s=10.0, what=""):
        """one CTA of 128 threads; args: torch tensors (passed as device pointers); keep: tensors the
        kernel reads through the args (e.g. behind a tensor map) that must stay alive. Polls the stream so
        that a kernel that never finishes (an mbarrier that never completes) ends this process."""
        vals = [ctypes.c_uint64(a.data_ptr()) for a in args]
        arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        stream = torch.cuda.current_stream()
        chk(
            cu.cuLaunchKernel(
                self.f, 1, 1, 1, 128, 1, 1, self.smem, stream.cuda_stream, ctypes.addressof(arr), 0
            )
        )
        t0 = time.time()
        while not stream.query():
            if time.time() - t0 > timeout_s:
                print(f"HANG: {what} did not finish in {timeout_s} s", flush=True)
                os._exit(3)
            time.sleep(0.002)
        torch.cuda.synchronize()
        del args, keep  # the tensors (tensor maps included) lived until the kernel finished
