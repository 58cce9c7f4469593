#!/usr/bin/env python3
"""Determinism check of the compiled layers (issue 10): each layer of the
benchmark folder is called five times on the same inputs (output poisoned
with NaN before every call) and the five outputs must be bitwise identical.

  python3 repeat_check.py --dir bench-artifacts [--T 64,4096] [--runs 5]

Prints one line per (layer, T) and exits 1 on any difference."""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".")
    ap.add_argument("--T", default="64,4096")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--layers", default=None)
    args = ap.parse_args()
    sys.path.insert(0, args.dir)
    import torch
    import bench_moe as B
    import gen_layers as GL
    import moe_mlir_runtime as rt

    B.torch = torch
    names = args.layers.split(",") if args.layers else [l.name for l in GL.LAYERS]
    bad = 0
    for name in names:
        layer = GL.LAYERS_BY_NAME[name]
        so = os.path.join(args.dir, name + ".so")
        if not os.path.exists(so):
            continue
        fn = rt.load(so).fn("ffn")
        w_up, w_down = B.make_weights(layer)
        for T in [int(t) for t in args.T.split(",")]:
            x, logits = B.make_inputs(layer, T)
            outs = []
            for _ in range(args.runs):
                y = torch.full((T, layer.H), float("nan"), dtype=torch.bfloat16, device="cuda")
                fn(x, logits, w_up, w_down, y)
                torch.cuda.synchronize()
                outs.append(y.view(torch.int16).clone())
            same = all(torch.equal(outs[0], o) for o in outs[1:])
            nan = bool(torch.isnan(outs[0].view(torch.bfloat16)).any())
            ok = same and not nan
            bad += not ok
            print(
                "%-4s %-22s T=%-6d %d runs bitwise %s%s"
                % (
                    "PASS" if ok else "FAIL",
                    name,
                    T,
                    args.runs,
                    "identical" if same else "DIFFERENT",
                    ", NaN in output" if nan else "",
                ),
                flush=True,
            )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
