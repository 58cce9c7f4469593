#!/usr/bin/env python3
"""Per-kernel time breakdown of compiled moe.ffn artifacts on the GPU.

Runs on the GPU machine from gpu-artifacts/pyflow (built by
test/GPU/build_python_flow.py): only moe_mlir_runtime + torch are needed. For each
preset artifact and T, calls the layer a few times to warm up, then records
one call with torch.profiler (CUPTI) and prints every kernel in launch order
with its grid and time, the total, and the two floors of METHOD.md (bytes of
the touched expert weights over the measured copy bandwidth, FLOPs over the
bf16 matrix rate). Launch order matches the gpu.launch order in the IR
(moe-opt --moe-decompose --moe-fuse --convert-moe-to-gpu).

  python3 profile_kernels.py --dir . [--T 1,64,4096] [--out results.md]
"""

import argparse
import json
import os
import sys
import time

COPY_TBPS = 4.3  # measured device-to-device copy (KINDS.md), bytes r+w
BF16_TFLOPS = 790  # measured 8192^3 bf16 matmul (KINDS.md)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".")
    ap.add_argument("--T", default="1,64,4096")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sys.path.insert(0, args.dir)
    import torch
    import moe_mlir_runtime as rt
    from torch.profiler import ProfilerActivity, profile

    cases = json.load(open(os.path.join(args.dir, "cases.json")))
    if isinstance(cases, dict):
        cases = cases.get("presets") or cases.get("cases") or []
    lines = []
    dev = torch.device("cuda:0")
    for case in cases:
        art = rt.load(os.path.join(args.dir, case["library"]))
        fn = art.fn(case.get("function", "ffn"))
        spec = fn.spec
        H, E = spec.args[0].shape[1], spec.args[1].shape[1]
        k = case["reference"].get("k", case.get("k"))
        torch.manual_seed(0)
        weights = []
        for a in spec.args[2:]:
            weights.append((torch.randn(a.shape, device=dev) * 0.02).to(rt.torch_dtype(a.dtype)))
        inter = case.get("I")
        for T in [int(t) for t in args.T.split(",")]:
            x = torch.randn(T, H, device=dev).to(rt.torch_dtype(spec.args[0].dtype))
            lg = (torch.randn(T, E, device=dev) * 2).to(rt.torch_dtype(spec.args[1].dtype))
            for _ in range(3):
                y = fn(x, lg, *weights)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                y = fn(x, lg, *weights)
                torch.cuda.synchronize()
            kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            total = sum(e.device_time for e in kernels)
            # Floors: touched experts' weights (bf16) and GEMM FLOPs.
            touched = min(E, T * k) if k else E
            wbytes = touched * 3 * H * inter * 2 if inter else 0
            flops = 2 * T * k * 3 * H * inter if (k and inter) else 0
            floor_us = max(wbytes / (COPY_TBPS * 1e12) * 1e6, flops / (BF16_TFLOPS * 1e12) * 1e6)
            lines.append(
                "## %s T=%d: %d kernels, %.1f us on the GPU "
                "(floor %.1f us: %.2f GB weights, %.2f TFLOP)"
                % (case["name"], T, len(kernels), total, floor_us, wbytes / 1e9, flops / 1e12)
            )
            for i, e in enumerate(kernels):
                lines.append("  %2d  %-28s %10.1f us" % (i, e.name[:28], e.device_time))
            lines.append("")
            print("\n".join(lines[-(len(kernels) + 2) :]), flush=True)
        del weights
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
