#!/usr/bin/env python3
"""Calls one compiled benchmark layer a few times (no graph), for ncu:

  ncu --clock-control none -k regex:ffn_kernel_2 -c 1 ... \\
      python3 ncu_driver.py --dir bench-artifacts --layer mixtral-8x7b --T 4096

Inputs as bench_moe.py makes them (same generators). An FP8 block layer
(gen_layers.py --lowprec: `<config>.fp8`) takes its bf16 twin's weights
quantized as bench_lowprec.py does (lowprec_baselines.quantize_fp8_blocks,
which bench_moe.py's folder holds)."""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".")
    ap.add_argument("--layer", required=True)
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--calls", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, args.dir)
    import torch
    import bench_moe as B
    import gen_layers as GL
    import moe_mlir_runtime as rt

    B.torch = torch
    layer = GL.LAYERS_BY_NAME[args.layer]
    fn = rt.load(os.path.join(args.dir, layer.name + ".so")).fn("ffn")
    fmt = getattr(layer, "weight_format", "plain")
    twin = GL.LAYERS_BY_NAME[layer.twin] if fmt != "plain" else layer
    w_up, w_down = B.make_weights(twin)
    x, logits = B.make_inputs(layer, args.T)
    y = torch.empty((args.T, layer.H), dtype=torch.bfloat16, device="cuda")
    weights = (w_up, w_down)
    if fmt == "fp8_block":
        import lowprec_baselines as LB

        q = LB.quantize_fp8_blocks(w_up) + LB.quantize_fp8_blocks(w_down)
        weights = (q[0], q[2], q[1], q[3])  # w_up, w_down, their scales
    elif fmt != "plain":
        sys.exit("ncu_driver: no inputs for %s weights" % fmt)
    for _ in range(args.calls):
        fn(x, logits, *weights, y)
    torch.cuda.synchronize()
    print("ok", args.layer, args.T, float(y.float().norm()))


if __name__ == "__main__":
    main()
