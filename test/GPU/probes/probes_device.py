#!/usr/bin/env python3
"""Runs the probe cubins (build_probes.py) on the H200 and checks them:

  python3 test/GPU/probes/probes_device.py BUILD_DIR

cluster_multicast: 2-CTA clusters (nvvm.cluster_dim, so a plain
cuLaunchKernel launches clusters); each CTA loads half of a 64 x 64 bf16
tile by TMA with multicast_mask 0b11 into both CTAs; every CTA must hold
the whole tile in the SWIZZLE_128B layout (chunk c of row r at c ^ r % 8).
cluster_pipeline: 8 rounds through one buffer; each CTA releases it on its
own and (mapa + mbarrier.arrive.shared::cluster) on the peer's empty
barrier before either multicasts again; every round must arrive intact.
Prints PASS / FAIL per probe; exit 1 on a failure, 3 on a hang."""

import ctypes
import os
import sys
import time

import torch
from cuda.bindings import driver as cu


def ok(result):
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"CUDA error {err}")
    return result[1] if isinstance(result, tuple) and len(result) == 2 else None


def tensor_map_2d(t, box_cols, box_rows):
    rows, cols = t.shape
    tmap = ok(
        cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            2,
            t.data_ptr(),
            [cu.cuuint64_t(cols), cu.cuuint64_t(rows)],
            [cu.cuuint64_t(t.stride(0) * t.element_size())],
            [cu.cuuint32_t(box_cols), cu.cuuint32_t(box_rows)],
            [cu.cuuint32_t(1)] * 2,
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    )
    words = [int(w) for w in tmap.opaque]
    raw = b"".join(w.to_bytes(8, "little") for w in words)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).cuda()


def launch(cubin, name, blocks, args, timeout_s=10.0):
    module = ok(cu.cuModuleLoadData(open(cubin, "rb").read()))
    fn = ok(cu.cuModuleGetFunction(module, name.encode()))
    ptrs = [ctypes.c_uint64(a.data_ptr()) for a in args]
    arr = (ctypes.c_void_p * len(ptrs))(*[ctypes.addressof(p) for p in ptrs])
    stream = torch.cuda.current_stream()
    ok(
        cu.cuLaunchKernel(
            fn, blocks, 1, 1, 128, 1, 1, 0, stream.cuda_stream, ctypes.addressof(arr), 0
        )
    )
    start = time.time()
    while not stream.query():
        if time.time() - start > timeout_s:
            print(f"HANG: {name} with {blocks} blocks", flush=True)
            os._exit(3)
        time.sleep(0.01)
    torch.cuda.synchronize()


def swizzled(x_bytes):
    """[rows, 128] bytes -> the SWIZZLE_128B shared layout of those rows."""
    out = torch.empty_like(x_bytes)
    for r in range(x_bytes.shape[0]):
        for c in range(8):
            p = c ^ (r % 8)
            out[r, 16 * p : 16 * p + 16] = x_bytes[r, 16 * c : 16 * c + 16]
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    torch.manual_seed(0)
    passed = True

    x = torch.randn(64, 64, dtype=torch.bfloat16, device="cuda")
    ref = swizzled(x.view(torch.uint8).view(64, 128).cpu())
    tmap = tensor_map_2d(x, 64, 32)
    for blocks in (2, 264):
        out = torch.full((blocks, 8192), 0xAB, dtype=torch.uint8, device="cuda")
        launch(os.path.join(build, "cluster_multicast.cubin"), "mc", blocks, [tmap, out])
        got = out.cpu().view(blocks, 64, 128)
        good = sum(torch.equal(got[b], ref) for b in range(blocks))
        print(f"cluster_multicast blocks={blocks}: {good} of {blocks} CTAs hold the whole tile")
        passed &= good == blocks

    rounds = 8
    x = torch.randn(64 * rounds, 64, dtype=torch.bfloat16, device="cuda")
    xb = x.view(torch.uint8).view(64 * rounds, 128).cpu()
    ref = torch.stack([swizzled(xb[64 * i : 64 * i + 64]) for i in range(rounds)])
    tmap = tensor_map_2d(x, 64, 32)
    for blocks in (2, 264, 1320):
        out = torch.full((blocks, rounds * 8192), 0xAB, dtype=torch.uint8, device="cuda")
        launch(os.path.join(build, "cluster_pipeline.cubin"), "mc2", blocks, [tmap, out])
        got = out.cpu().view(blocks, rounds, 64, 128)
        good = sum(torch.equal(got[b], ref) for b in range(blocks))
        print(f"cluster_pipeline blocks={blocks}: {good} of {blocks} CTAs got all {rounds} rounds")
        passed &= good == blocks

    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
