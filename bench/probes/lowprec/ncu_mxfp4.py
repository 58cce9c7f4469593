#!/usr/bin/env python3
"""Calls the benchmark's MXFP4 layer (gpt-oss-120b.mxfp4) a few times with
no graph, for ncu (bench/NOTES.md v71: where the register-A kernels' time
goes). From the repository root on the GPU machine, with the artifacts of
`LOWPREC=mxfp4 bash bench/build_bench.sh bench-variants/mxfp4-artifacts`
carried:

  ncu --clock-control none -k regex:ffn_kernel_[0-9]+__pdl -c 6 \\
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
      --section MemoryWorkloadAnalysis -o $OUT/mx \\
      python3 bench/probes/lowprec/ncu_mxfp4.py --T 8

Inputs as bench_moe.py / bench_lowprec.py make them (same generators)."""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="bench-variants/mxfp4-artifacts")
    ap.add_argument("--layer", default="gpt-oss-120b.mxfp4")
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--calls", type=int, default=2)
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
    fn = rt.load(os.path.join(args.dir, layer.name + ".so")).fn("ffn")
    w_up, w_down = B.make_weights(layer)
    (wu, su), (wd, sd) = LB.quantize_mxfp4(w_up), LB.quantize_mxfp4(w_down)
    del w_up, w_down
    if layer.weight_format == "mxfp4_hopper":
        from moe_mlir_runtime.mxfp4 import repack_mxfp4_hopper

        wu, wd = repack_mxfp4_hopper(wu), repack_mxfp4_hopper(wd)
    biases = BL.make_biases(layer)
    x, logits = B.make_inputs(layer, args.T)
    y = torch.empty((args.T, layer.H), dtype=torch.bfloat16, device="cuda")
    for _ in range(args.calls):
        fn(x, logits, wu, wd, *biases, su, sd, y)
    torch.cuda.synchronize()
    print("ok", args.layer, args.T, float(y.float().norm()))


if __name__ == "__main__":
    main()
