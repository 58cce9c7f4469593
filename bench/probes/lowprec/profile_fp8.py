#!/usr/bin/env python3
"""Probe (issue 45, v70): kernel times of the FP8 layers (torch.profiler)
from the low-precision check artifacts: where the large-T time goes
(activation quantization kernels vs the FP8 GEMMs). Run on the device with
gpu-artifacts/lowprec carried (test/GPU/build_artifacts.sh builds it):
  python3 bench/probes/lowprec/profile_fp8.py gpu-artifacts/lowprec"""

import sys, os, torch, math

LP = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "gpu-artifacts/lowprec")
sys.path.insert(0, LP)
import moe_mlir_runtime as rt
from torch.profiler import profile, ProfilerActivity

dev = "cuda"
for name, T in (
    ("qwen3-30b-a3b-fp8", 16384),
    ("qwen3-30b-a3b-fp8", 512),
    ("deepseek-v3-fp8", 16384),
    ("qwen3-30b-a3b-bf16", 16384),
):
    fn = rt.load(os.path.join(LP, name + ".so")).fn("ffn")
    args = []
    for a in fn.spec.args:
        shape = [T if d is None else d for d in a.shape]
        dt = rt.torch_dtype(a.dtype)
        if dt in (torch.float8_e4m3fn,):
            args.append((torch.randn(shape, device=dev) * 0.5).to(dt))
        elif dt == torch.float32 and len(shape) == 3:
            args.append(torch.rand(shape, device=dev) * 1e-3 + 1e-3)
        else:
            args.append(torch.randn(shape, device=dev).to(dt))
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            fn(*args)
        torch.cuda.synchronize()
    print("=====", name, T)
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=40))
    del args, fn
    torch.cuda.empty_cache()
