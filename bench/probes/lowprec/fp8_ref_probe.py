#!/usr/bin/env python3
"""Probe (issue 45, v76): why the bench's FP8 check reads ours at ~1.4e-2
from T = 8 on (5.5e-3 at T = 1) while lowprec_check's numpy reference reads
2.5e-3 - 6.3e-3. Ours on one bench cell against quant_reference computed
(a) as the bench does (GPU f32), (b) GPU with the scale divided exactly,
(c) GPU float64, (d) on the CPU (float32 and float64)."""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--layer", default="qwen3-30b-a3b.fp8")
    ap.add_argument("--T", default="8,64")
    ap.add_argument("--rows", type=int, default=64)
    args = ap.parse_args()
    sys.path.insert(0, args.dir)
    import torch
    import torch.nn.functional as F

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
    q = LB.quantize_fp8_blocks(w_up) + LB.quantize_fp8_blocks(w_down)

    def fq_exact(a, eps=LB.EPS, dt=torch.float32):
        M, K = a.shape
        G = -(-K // 128)
        ag = F.pad(a.to(dt), (0, G * 128 - K)).reshape(M, G, 128)
        s = ag.abs().amax(dim=2).float().clamp(min=eps) / torch.tensor(448.0, device=a.device)
        s = s.to(dt)
        qq = (ag / s[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).to(dt)
        return (qq * s[..., None]).reshape(M, G * 128)[:, :K]

    for T in [int(t) for t in args.T.split(",")]:
        x, logits = B.make_inputs(layer, T)
        y = torch.empty((T, layer.H), dtype=torch.bfloat16, device="cuda")
        fn(x, logits, q[0], q[2], q[1], q[3], y)
        torch.cuda.synchronize()
        rows = None
        if T > args.rows:
            rows = torch.arange(args.rows, device="cuda")
        yr = (y if rows is None else y[: args.rows]).double().cpu()

        def err(ref):
            ref = ref.double().cpu()
            return float((yr - ref).norm() / ref.norm())

        def ref(dev, dt, aq, round_up=False):
            xx, ll = x.to(dev), logits.to(dev)
            rr = None if rows is None else rows.to(dev)

            def ew(e):
                return (
                    LB.dequantize_fp8_block(q[0][e], q[1][e]).to(dev).to(dt),
                    LB.dequantize_fp8_block(q[2][e], q[3][e]).to(dev).to(dt),
                )

            def aq2(a):
                return aq(a.to(dt)) if aq is LB.fake_quant_groups else aq(a, dt=dt)

            r = BL.quant_reference(
                layer, xx, ll, rr, ew, lambda a: aq2(a).to(dt), round_up=round_up
            )
            return r

        res = {}
        res["gpu f32 bench"] = ref("cuda", torch.float32, LB.fake_quant_groups)
        res["gpu f32 exact-div"] = ref("cuda", torch.float32, fq_exact)
        res["gpu f64 exact-div"] = ref("cuda", torch.float64, fq_exact)
        res["cpu f32 bench"] = ref("cpu", torch.float32, LB.fake_quant_groups)
        res["cpu f64 exact-div"] = ref("cpu", torch.float64, fq_exact)
        res["gpu f64 round_up"] = ref("cuda", torch.float64, fq_exact, True)
        base = res["cpu f64 exact-div"].double().cpu()
        for k_, v in res.items():
            d = float((v.double().cpu() - base).norm() / base.norm())
            print("T=%d %-20s ours err %.2e   vs cpu-f64 %.2e" % (T, k_, err(v), d))


if __name__ == "__main__":
    main()
