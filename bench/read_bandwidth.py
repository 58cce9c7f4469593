#!/usr/bin/env python3
"""What this H200 streams from HBM: median time of reading N bytes once
(torch.sum of a bf16 tensor into f32; an elementwise copy for comparison),
cuda events, 20 runs, the tensor larger than L2 so nothing is reused.

  python3 bench/read_bandwidth.py [--sizes-mb 64,256,1024,4096]

Prints TB/s per size: the practical ceiling the weight-streaming cells
(T <= 64) are compared against in bench/NOTES.md."""

import argparse
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", default="64,256,1024,4096")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    import torch

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for mb in [int(s) for s in args.sizes_mb.split(",") if s]:
        n = (mb << 20) // 2
        x = torch.randn(n, device="cuda", dtype=torch.float32).to(torch.bfloat16)
        y = torch.empty_like(x)
        for what, fn, nbytes in (
            ("sum", lambda: x.sum(dtype=torch.float32), 2 * n),
            ("copy", lambda: y.copy_(x), 4 * n),
        ):
            times = []
            for _ in range(args.runs + 2):
                flush.zero_()
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1e3)
            t = statistics.median(times[2:])
            print("%-5s %6d MB  %9.1f us  %5.2f TB/s" % (what, mb, t, nbytes / t / 1e6))
        del x, y


if __name__ == "__main__":
    main()
