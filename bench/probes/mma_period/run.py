#!/usr/bin/env python3
"""Runs mma_period.cubin (gen.py) on the GPU: cycles per 128-K block and
warpgroup for each kernel, one and two consumer warpgroups, one CTA per SM.

  python3 run.py [--cubin mma_period.cubin] [--iters 4096]
"""

import argparse, ctypes, os, statistics
import torch
from cuda.bindings import driver as cu


def chk(r):
    err = r[0] if isinstance(r, tuple) else r
    if int(err) != 0:
        raise RuntimeError("CUDA error %s" % err)
    if isinstance(r, tuple):
        return r[1] if len(r) == 2 else r[1:]


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--cubin", default=os.path.join(here, "mma_period.cubin"))
    ap.add_argument("--iters", type=int, default=4096)
    args = ap.parse_args()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    dev = torch.cuda.current_device()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    print("device:", torch.cuda.get_device_name(dev), "SMs", sms)
    mod = chk(cu.cuModuleLoadData(open(args.cubin, "rb").read()))
    smem = 49152 + 64 + 1024
    clk = torch.zeros(2 * sms, dtype=torch.int64, device="cuda")
    sink = torch.zeros(256, dtype=torch.float32, device="cuda")
    # name, 128-K blocks a warpgroup runs per iteration, MMA N, halves
    kernels = [
        ("mma_n128_n_x", 2, 128),
        ("mma_n128_w_x", 2, 128),
        ("mma_n128_w_p", 2, 128),
        ("mma_n256_n_x", 1, 256),
        ("mma_n256_w_x", 1, 256),
        ("mma_n128_pair", 2, 128),
    ]
    print(
        "%-15s %3s %10s %12s %9s %9s"
        % ("kernel", "wgs", "cyc/half", "cyc/128K-blk", "TFLOP/s", "MMA %")
    )
    for name, halves, n in kernels:
        f = chk(cu.cuModuleGetFunction(mod, name.encode()))
        chk(
            cu.cuFuncSetAttribute(
                f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem
            )
        )
        for nwg in (1, 2):
            vals = [
                ctypes.c_uint64(clk.data_ptr()),
                ctypes.c_uint64(sink.data_ptr()),
                ctypes.c_int32(args.iters),
                ctypes.c_int32(nwg),
            ]
            ptrs = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in vals])
            times = []
            for rep in range(5):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                chk(
                    cu.cuLaunchKernel(
                        f,
                        sms,
                        1,
                        1,
                        256,
                        1,
                        1,
                        smem,
                        torch.cuda.current_stream().cuda_stream,
                        ptrs,
                        0,
                    )
                )
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e) * 1e-3)
            t = statistics.median(times[1:])
            c = clk.view(sms, 2)[:, :nwg].float().median().item()
            # a warpgroup per iteration: 256 columns x 64 rows x 128 K (both halves)
            flop = 2.0 * 64 * 256 * 128 * args.iters * nwg * sms
            per_half = c / args.iters / halves
            # tensor work of one half (m64n128k128) of one warpgroup: 256 cycles at
            # 8192 dense e4m3 FLOP / cycle / SM; nwg warpgroups share the SM
            ideal = 256.0 * (n // 128) * nwg
            print(
                "%-15s %3d %10.1f %12.1f %9.1f %9.1f"
                % (
                    name,
                    nwg,
                    per_half,
                    c / args.iters,
                    flop / t * 1e-12,
                    100.0 * ideal / (per_half * (n // 128) if n == 128 else per_half),
                )
            )


if __name__ == "__main__":
    main()
