#!/usr/bin/env python3
"""How many thread-block clusters of n CTAs the GPU holds at once for a
kernel shaped like the Hopper GEMM's main kernel (384 threads, up to 227 KiB
of dynamic shared memory, one CTA per SM). Clusters are placed inside a GPC,
so with GPCs of uneven SM counts a cluster size can leave SMs idle; the
persistent GEMM grid may only count CTAs in co-resident clusters (a second
wave of clusters would double their share of the time). bench/NOTES.md
(next-session plan of the twenty-second) asks this before 4-CTA clusters.

  python3 bench/cluster_occupancy.py build DIR   # here: LLVM 22 mlir-opt + ptxas -> DIR/empty.cubin
  python3 bench/cluster_occupancy.py run DIR     # on the GPU machine (cuda.bindings)

Run on the H200 in the twenty-third session (bench/results/cluster-occupancy-
h200.txt): 2-CTA clusters fill all 132 SMs, 4- and 8-CTA clusters 120,
16-CTA clusters 112 (bench/NOTES.md v57).
"""

import os
import re
import subprocess
import sys

KERNEL = """module attributes {gpu.container_module} {
gpu.module @k {
  gpu.func @k(%p: !llvm.ptr) kernel attributes {gpu.known_block_size = array<i32: 384, 1, 1>} {
    gpu.return
  }
}
}
"""


def build(out):
    os.makedirs(out, exist_ok=True)
    src = os.path.join(out, "empty.mlir")
    with open(src, "w") as f:
        f.write(KERNEL)
    mlir_opt = os.environ.get("MLIR_OPT", "/usr/lib/llvm-22/bin/mlir-opt")
    ptxas = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
    pipe = (
        "--gpu-lower-to-nvvm-pipeline=cubin-chip=sm_90a cubin-features=+ptx86 "
        "cubin-format=isa kernel-bare-ptr-calling-convention=1"
    )
    isa = subprocess.run([mlir_opt, src, pipe], capture_output=True, text=True, check=True)
    m = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', isa.stdout)
    ptx = re.sub(r"\\([0-9A-Fa-f]{2})", lambda g: chr(int(g.group(1), 16)), m.group(1))
    ptx_path = os.path.join(out, "empty.ptx")
    with open(ptx_path, "w") as f:
        f.write(ptx)
    subprocess.run(
        [ptxas, "-arch=sm_90a", ptx_path, "-o", os.path.join(out, "empty.cubin")], check=True
    )
    print("wrote", os.path.join(out, "empty.cubin"))


def run(out):
    from cuda.bindings import driver as cu

    def chk(r):
        err = r[0] if isinstance(r, tuple) else r
        if int(err) != 0:
            raise RuntimeError(f"CUDA error {err}")
        return r[1] if isinstance(r, tuple) and len(r) == 2 else None

    chk(cu.cuInit(0))
    dev = chk(cu.cuDeviceGet(0))
    chk(cu.cuCtxSetCurrent(chk(cu.cuDevicePrimaryCtxRetain(dev))))
    sms = chk(
        cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
    )
    with open(os.path.join(out, "empty.cubin"), "rb") as f:
        fn = chk(cu.cuModuleGetFunction(chk(cu.cuModuleLoadData(f.read())), b"k"))
    chk(
        cu.cuFuncSetAttribute(
            fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1
        )
    )
    for smem in (231424, 116736, 0):
        chk(
            cu.cuFuncSetAttribute(
                fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem
            )
        )
        for n in (1, 2, 4, 8, 16):
            cfg = cu.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = n * 64, 1, 1
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 384, 1, 1
            cfg.sharedMemBytes = smem
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = n, 1, 1
            cfg.attrs = [attr]
            cfg.numAttrs = 1
            try:
                c = chk(cu.cuOccupancyMaxActiveClusters(fn, cfg))
                print(
                    f"smem {smem:6d} B, cluster {n:2d}: {c:3d} clusters = {c * n:3d} CTAs of {sms} SMs"
                )
            except RuntimeError as e:
                print(f"smem {smem:6d} B, cluster {n:2d}: {e}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run"):
        sys.exit(__doc__)
    (build if sys.argv[1] == "build" else run)(sys.argv[2])
