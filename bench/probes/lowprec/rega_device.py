#!/usr/bin/env python3
# Probe 2 runner: register-A bf16 wgmma (inline PTX), A built in registers from bf16 (mode bf16) or
# dequantized from MXFP4 (mode mxfp4), B bf16 K-major SWIZZLE_128B in shared memory.
# usage (device): python3 rega_device.py rega_bf16_n128_k128.cubin rega_mxfp4_n128_k128.cubin
# Each cubin: the A registers as issued (dumped by the kernel) against the assumed fragment layout
# (and, for mxfp4, the dequantization), a random product against float64 / torch float32, and
# identity probes that say which register element / which B element each output actually read.
import os, re, sys
import numpy as np
from lp_host import (
    bf16_bits_to_f64,
    f64_to_bf16_bits,
    bf16_unique_values,
    mxfp4_dequant,
    rel_err,
    error_map,
    locate,
    summarize_map,
    ranges,
    acc_frag_owner,
    rega_frag_pos,
    rega_frag_owner,
    rega_expected_regs,
    regs_to_matrix,
)

N, K = 128, 128
ONE_BF16 = 0x3F80


class Spec:
    def __init__(self, path):
        m = re.match(r"rega_(bf16|mxfp4)_n(\d+)_k(\d+)\.cubin$", os.path.basename(path))
        self.path, self.name, self.mode = path, os.path.basename(path)[:-6], m.group(1)
        assert (int(m.group(2)), int(m.group(3))) == (N, K)
        self.smem = 2048 + (K // 64) * N * 128


def make_a(spec, rng, kind):
    """returns (a_arg, scales_arg, A float64 [64, K] as the kernel should see it)"""
    if spec.mode == "bf16":
        if kind == "random":
            bits = f64_to_bf16_bits(rng.standard_normal((64, K)))
        else:
            bits = f64_to_bf16_bits(bf16_unique_values(rng, 64 * K).reshape(64, K))
        return bits, np.zeros((64, K // 32), np.uint8), bf16_bits_to_f64(bits)
    aq = rng.integers(0, 256, (64, K // 2)).astype(np.uint8)
    sc = rng.integers(120, 135, (64, K // 32)).astype(np.uint8)
    return aq, sc, mxfp4_dequant(aq, sc)


def make_a_identity(spec, shift):
    """A[m, k] = 1 iff k == (m + shift) % K"""
    cols = (np.arange(64) + shift) % K
    if spec.mode == "bf16":
        bits = np.zeros((64, K), np.uint16)
        bits[np.arange(64), cols] = ONE_BF16
        return bits, np.zeros((64, K // 32), np.uint8)
    aq = np.zeros((64, K // 2), np.uint8)
    aq[np.arange(64), cols // 2] = np.where(cols % 2 == 0, 0x02, 0x20)  # e2m1 code 2 = 1.0
    return aq, np.full((64, K // 32), 127, np.uint8)


def describe_reg(m, k):
    t, s, q, h = rega_frag_owner(m, k)
    return f"thread {t} k16 step {s} A reg {q} {'hi' if h else 'lo'}"


def check(spec, run, rng, ref32=None, out=print):
    """run(a, scales, b_bits [N, K] u16) -> (out f32 [64, N], regs u32 [128, K/16, 4])"""
    res, name = [], spec.name

    def report(test, ok, head, details=()):
        res.append((test, ok))
        out(f"{'PASS' if ok else 'FAIL'} {name} {test}: {head}")
        for d in details:
            out(f"    {d}")

    describe_out = lambda m, n: "thread %d acc reg %d" % acc_frag_owner(m, n)

    # 1. random A (bf16 or MXFP4), random bf16 B
    a, sc, Ad = make_a(spec, rng, "random")
    bb = f64_to_bf16_bits(rng.standard_normal((N, K)))
    Bd = bf16_bits_to_f64(bb)
    o, regs = run(a, sc, bb)
    exp_regs = rega_expected_regs(f64_to_bf16_bits(Ad), K)
    bad = np.argwhere(regs != exp_regs)
    det = []
    for t, s, q in bad[:8]:
        r, k = rega_frag_pos(t, s, q, 0)
        d = f"thread {t} step {s} reg {q} (A[{r}, {k}:{k + 2}]): got 0x{regs[t, s, q]:08x}, expected 0x{exp_regs[t, s, q]:08x}"
        if spec.mode == "mxfp4":
            d += f" (byte 0x{a[r, k // 2]:02x}, scale {sc[r, k // 32]}, values {Ad[r, k]:g}, {Ad[r, k + 1]:g})"
        det.append(d)
    if len(bad):
        wrong = regs_to_matrix(regs, K) != f64_to_bf16_bits(Ad)
        rr, kk = np.nonzero(wrong)
        det.append(f"A elements wrong (assumed layout): rows {ranges(rr)}, k {ranges(kk)}")
    report(
        "a-registers",
        len(bad) == 0,
        f"{len(bad)}/{regs.size} A registers differ from the {'dequantized ' if spec.mode == 'mxfp4' else ''}"
        "bf16x2 values the assumed fragment layout puts there",
        det,
    )
    ref = Ad @ Bd.T
    e64 = rel_err(o, ref)
    extra = ""
    if ref32 is not None:
        r32 = ref32(Ad, Bd)
        extra = f", vs torch float32 {rel_err(o, r32):.3e} (torch f32 vs float64: {rel_err(r32, ref):.3e})"
    nbad, rows, cols = error_map(o, ref, 1e-3 * np.abs(ref).max())
    report(
        "random",
        e64 < 1e-5 and not np.isnan(o).any(),
        f"rel. err (Frobenius) vs float64 {e64:.3e}{extra}; NaN {int(np.isnan(o).sum())}",
        []
        if nbad == 0
        else [f"{nbad} elements off by > 0.1% of max |ref|: rows {rows}, columns {cols}"],
    )

    # 2. identity-A: B = I, so out[m, n] = the wgmma's view of A[m, n]. Compared with what the kernel
    #    put in its registers (dump, read with the assumed layout): tests the register-A layout alone.
    Bi = np.zeros((N, K), np.uint16)
    Bi[np.arange(N), np.arange(N) % K] = ONE_BF16
    srcs, outs, regsok = [], [], True
    for _ in range(1 if spec.mode == "bf16" else 6):
        a, sc, Ad = make_a(spec, rng, "unique")
        o, regs = run(a, sc, Bi)
        srcs.append(bf16_bits_to_f64(regs_to_matrix(regs, K)))
        regsok &= bool(np.array_equal(srcs[-1], Ad))
        outs.append(o)
    exp = np.stack(np.meshgrid(np.arange(64), np.arange(N) % K, indexing="ij"), -1)
    ok, ls = summarize_map(
        locate(srcs, outs, exp), exp, "A", describe_reg, describe_out, srcs=srcs, outs=outs
    )
    report(
        "identity-A",
        ok,
        "B = I: out[m, n] must equal A[m, n] as placed in the registers "
        f"({'1 run, 8192 distinct values' if spec.mode == 'bf16' else '6 runs of random MXFP4'}; "
        f"register dump == intended A: {regsok})",
        ls,
    )

    # 3. identity-B: A = shifted I (built through the same register path), B distinct values:
    #    out[m, n] must equal B[n, (m + shift) % K] (tests the B descriptor / k-steps).
    allok, lines = True, []
    for shift in (0, 64):
        a, sc = make_a_identity(spec, shift)
        bv = bf16_unique_values(rng, N * K).reshape(N, K)
        o, _ = run(a, sc, f64_to_bf16_bits(bv))
        exp = np.stack(np.meshgrid((np.arange(64) + shift) % K, np.arange(N), indexing="ij"), -1)[
            :, :, ::-1
        ]
        db = lambda n, k: f"B row {n}, k-tile {k // 64}, k16 step {(k % 64) // 16}, k%16={k % 16}"
        ok, ls = summarize_map(
            locate([bv], [o], exp), exp, "B", db, describe_out, srcs=[bv], outs=[o]
        )
        allok &= ok
        lines += [
            f"A[m, k] = 1 iff k == (m + {shift}) % {K}, B 16384 distinct values: " + ls[0]
        ] + ls[1:]
    report("identity-B", allok, "out[m, n] must equal B[n, (m + shift) % K]", lines)
    return res


def main():
    import torch
    from lp_cuda import Kernel, dev, env_line

    torch.backends.cuda.matmul.allow_tf32 = False
    print(env_line(), flush=True)

    def ref32(Ad, Bd):
        # torch float32 matmul of the dequantized inputs (exact in f32: bf16 / MXFP4 values)
        return (dev(Ad.astype(np.float32)) @ dev(Bd.astype(np.float32)).t()).cpu().numpy()

    total = []
    for path in sys.argv[1:]:
        spec = Spec(path)
        print(
            f"== {spec.name}: register-A m64n{N}k16 bf16 x {K // 16} steps, A from {spec.mode}, "
            f"smem={spec.smem}",
            flush=True,
        )
        try:
            k = Kernel(path, spec.name, spec.smem)
            print(f"   registers per thread (cuFuncGetAttribute): {k.nregs}", flush=True)

            def run(a, sc, bb):
                ta, ts, tb = dev(a), dev(sc), dev(bb)
                o = torch.full((64, N), float("nan"), device="cuda")
                regs = torch.zeros(128 * (K // 16) * 4, dtype=torch.int32, device="cuda")
                k.launch([ta, ts, tb, o, regs], what=spec.name)
                return o.cpu().numpy(), regs.cpu().numpy().view(np.uint32).reshape(128, K // 16, 4)

            res = check(
                spec, run, np.random.default_rng(4321), ref32, out=lambda s: print(s, flush=True)
            )
        except Exception as ex:
            print(f"FAIL {spec.name} exception: {str(ex).splitlines()[0]}", flush=True)
            if "CUDA" in str(ex):
                os._exit(4)
            res = [("exception", False)]
        n_ok = sum(ok for _, ok in res)
        print(f"RESULT {spec.name}: {n_ok}/{len(res)} checks passed", flush=True)
        total += res
    sys.exit(0 if all(ok for _, ok in total) else 1)


if __name__ == "__main__":
    main()
