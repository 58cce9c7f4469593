#!/usr/bin/env python3
"""Calls the benchmark's FP8 block layers (<config>.fp8 of
`LOWPREC=fp8 bash bench/build_bench.sh DIR`) with the bench's inputs:
  --profile: kernel times of 5 calls per T (torch.profiler), no graph;
  otherwise: --calls plain calls, for ncu -k regex:ffn_kernel_...
From the repository root on the GPU machine with DIR carried:
  python3 bench/probes/lowprec/fp8_driver.py --dir DIR --layer qwen3-30b-a3b.fp8 --T 512,4096 --profile"""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--layer", default="qwen3-30b-a3b.fp8")
    ap.add_argument("--T", default="4096")
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, args.dir)
    import torch

    import bench_lowprec as BL
    import bench_moe as B
    import gen_layers as GL
    import lowprec_baselines as LB
    import moe_mlir_runtime as rt

    B.torch = torch
    BL.BM = B
    layer = GL.LAYERS_BY_NAME[args.layer]
    twin = GL.LAYERS_BY_NAME[layer.twin]
    fn = rt.load(os.path.join(args.dir, layer.name + ".so")).fn("ffn")
    w_up, w_down = B.make_weights(twin)
    wu, su = LB.quantize_fp8_blocks(w_up)
    wd, sd = LB.quantize_fp8_blocks(w_down)
    del w_up, w_down
    for T in [int(t) for t in args.T.split(",")]:
        x, logits = B.make_inputs(layer, T)
        y = torch.empty((T, layer.H), dtype=torch.bfloat16, device="cuda")
        call = lambda: fn(x, logits, wu, wd, su, sd, y)  # noqa: E731
        for _ in range(args.calls):
            call()
        torch.cuda.synchronize()
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as p:
                for _ in range(5):
                    call()
                torch.cuda.synchronize()
            print("=====", layer.name, T, "(5 calls)")
            print(
                p.key_averages().table(
                    sort_by="cuda_time_total", row_limit=14, max_name_column_width=30
                )
            )
        print("ok", layer.name, T, float(y.float().norm()))


if __name__ == "__main__":
    main()
