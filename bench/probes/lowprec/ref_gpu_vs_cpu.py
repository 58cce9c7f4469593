#!/usr/bin/env python3
"""Probe (issue 45, v70): the same float64 reference steps on the CPU and on
the GPU (torch), compared stage by stage. The torch GPU references of the
FP8 layer disagreed with the numpy one (and with torch on the CPU) by ~1e-2
once an expert has several rows; this finds the step. Run on the device:
  python3 bench/probes/lowprec/ref_gpu_vs_cpu.py   (carry bench/probes/lowprec
  and test/Differential/reference.py is found through the repo)"""

import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "test", "Differential"))
import reference as R  # noqa: E402, F401


def fake_quant(a):
    M, K = a.shape
    G = -(-K // 128)
    af = torch.nn.functional.pad(a.float(), (0, G * 128 - K)).reshape(M, G, 128)
    s = af.abs().amax(dim=2).clamp(min=1e-4) / 448.0
    q = (af / s[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).double()
    return (q * s.double()[..., None]).reshape(M, G * 128)[:, :K]


def run(dev):
    g = torch.Generator().manual_seed(0)
    T, H, I, E, k = 7, 512, 256, 16, 8
    x = torch.randn(T, H, generator=g).bfloat16().to(dev)
    wu = (torch.randn(2 * I, H, generator=g) / math.sqrt(H)).double().to(dev)
    wd = (torch.randn(H, I, generator=g) / math.sqrt(I)).double().to(dev)
    t = torch.tensor([0, 3, 5, 6], device=dev)
    out = {}
    xs = x[t].double()
    out["xs"] = xs
    xq = fake_quant(xs)
    out["xq"] = xq
    up = xq @ wu.T
    out["up"] = up
    upb = up.to(torch.bfloat16).double()
    out["upb"] = upb
    gg, u = upb[:, :I], upb[:, I:]
    act = gg * torch.sigmoid(gg) * u
    out["act"] = act
    actb = act.to(torch.bfloat16).double()
    out["actb"] = actb
    aq = fake_quant(actb)
    out["aq"] = aq
    dn = aq @ wd.T
    out["dn"] = dn
    out["dnb"] = dn.to(torch.bfloat16).double()
    # single-row versions
    out["up_row1"] = xq[1:2] @ wu.T
    return {k_: v.cpu() for k_, v in out.items()}


a = run("cpu")
b = run("cuda")
for key in a:
    d = (a[key] - b[key]).abs()
    print(
        "%-8s maxdiff %.3e  rel %.3e  n!=%d"
        % (key, float(d.max()), float(d.norm() / max(a[key].norm(), 1e-300)), int((d > 0).sum()))
    )
print("up row1 gpu vs gemm row", float((b["up_row1"][0] - b["up"][1]).abs().max()))
