#!/usr/bin/env python3
# Checks the runners' host logic (references, dequantization, layout diagnostics) on the build
# machine, with numpy emulations of the kernels in place of the GPU: the correct kernels must PASS
# every check, kernels with an injected fault must FAIL with a diagnosis that names the fault.
# usage: python3 selftest_host.py [-v]      (numpy only; no torch, no GPU; -v: every line)
import sys
import numpy as np
import fp8_device, rega_device
from lp_host import (
    e4m3_decode,
    swizzle128,
    E4M3,
    FINITE_CODES,
    mxfp4_dequant,
    e2m1_to_bf16_kernel_formula,
    bf16_bits_to_f64,
    rega_frag_pos,
    E2M1,
)

VERBOSE = "-v" in sys.argv


def fp8_emulator(spec, fault=None):
    def run(A, B, sa, sb):
        Ad, Bd = e4m3_decode(A), e4m3_decode(B)
        o = np.zeros((64, spec.N))
        for kb in range(spec.KB):
            part = np.zeros((64, spec.N))
            for j in range(4):
                k0 = 128 * kb + (16 * j if fault == "kstep16" else 32 * j)
                ks = slice(k0, k0 + 32)
                part += Ad[:, ks] @ Bd[:, ks].T
            o += part * (sa[kb][:, None] * np.repeat(sb[kb], 128)[None, :] if spec.promote else 1)
        if fault == "rows":  # output rows g and g + 8 swapped in the epilogue
            o = o[np.array([(m // 16) * 16 + (m % 16 + 8) % 16 for m in range(64)])]
        dA, dB = swizzle128(A[:, :128]), swizzle128(B[:, :128])
        if fault == "noswizzle":
            dA = A[:, :128].copy()
        return o.astype(np.float32), np.concatenate([dA.ravel(), dB.ravel()])

    return run


def rega_emulator(spec, fault=None):
    def run(a, sc, bb):
        regs = np.zeros((128, 8, 4), np.uint32)
        for t in range(128):
            for s in range(8):
                for q in range(4):
                    r, k = rega_frag_pos(t, s, q, 0)
                    if spec.mode == "bf16":
                        v = int(a[r, k]) | (int(a[r, k + 1]) << 16)
                    else:
                        byte, S = int(a[r, k // 2]), int(sc[r, k // 32])
                        v = e2m1_to_bf16_kernel_formula(byte & 15, S) | (
                            e2m1_to_bf16_kernel_formula(byte >> 4, S) << 16
                        )
                        if fault == "nibbles":  # high / low nibble swapped
                            v = e2m1_to_bf16_kernel_formula(byte >> 4, S) | (
                                e2m1_to_bf16_kernel_formula(byte & 15, S) << 16
                            )
                    regs[t, s, q] = v
        # the "hardware" reading of the registers: the documented layout, or with regs 1 and 2 swapped
        A_hw = np.zeros((64, 128))
        for t in range(128):
            for s in range(8):
                for q in range(4):
                    qq = {1: 2, 2: 1}.get(q, q) if fault == "regs12" else q
                    r, k = rega_frag_pos(t, s, qq, 0)
                    A_hw[r, k] = bf16_bits_to_f64(regs[t, s, q] & 0xFFFF)
                    A_hw[r, k + 1] = bf16_bits_to_f64(regs[t, s, q] >> 16)
        o = A_hw @ bf16_bits_to_f64(bb).T
        return o.astype(np.float32), regs

    return run


def main():
    fails = 0
    # table sanity
    assert (
        np.nanmax(E4M3) == 448
        and len(FINITE_CODES) == 254
        and E4M3[0x38] == 1.0
        and E4M3[0x01] == 2.0**-9
    )
    # the kernel's integer e2m1 -> bf16 formula against the value table, all nibbles, scales 2..252
    for S in range(2, 253):
        for v in range(16):
            got = bf16_bits_to_f64(e2m1_to_bf16_kernel_formula(v, S))
            want = E2M1[v] * 2.0 ** (S - 127)
            assert got == want and np.signbit(got) == np.signbit(want), (v, S, got, want)
    aq = np.zeros((1, 16), np.uint8)
    aq[0, :2] = [0x21, 0xF8]
    d = mxfp4_dequant(aq, np.array([[128]], np.uint8))[0, :4]
    assert list(d) == [1.0, 2.0, 0.0, -12.0] and np.signbit(d[2]), d
    print(
        "ok: e4m3 table, e2m1 kernel formula == table for all nibbles and scales 2..252, nibble order"
    )

    cases = []
    for name in (
        "fp8_n128_k128_tma",
        "fp8_n256_k128_manual",
        "fp8_n128_k512_tma_promote",
        "fp8_n256_k512_tma_promote",
    ):
        spec = fp8_device.Spec(name + ".cubin")
        cases.append(("fp8", spec, None, True))
    spec = fp8_device.Spec("fp8_n128_k128_tma.cubin")
    for fault in ("kstep16", "rows", "noswizzle"):
        cases.append(("fp8", spec, fault, False))
    for mode in ("bf16", "mxfp4"):
        spec = rega_device.Spec(f"rega_{mode}_n128_k128.cubin")
        cases.append(("rega", spec, None, True))
        cases.append(("rega", spec, "regs12", False))
    cases.append(("rega", rega_device.Spec("rega_mxfp4_n128_k128.cubin"), "nibbles", False))

    for kind, spec, fault, expect_pass in cases:
        lines = []
        if kind == "fp8":
            ref32 = lambda A, B, sa, sb: fp8_device.reference(spec, A, B, sa, sb).astype(np.float32)
            res = fp8_device.check(
                spec, fp8_emulator(spec, fault), np.random.default_rng(1), ref32, out=lines.append
            )
        else:
            ref32 = lambda Ad, Bd: Ad.astype(np.float32) @ Bd.astype(np.float32).T
            res = rega_device.check(
                spec, rega_emulator(spec, fault), np.random.default_rng(1), ref32, out=lines.append
            )
        allpass = all(ok for _, ok in res)
        good = allpass == expect_pass
        fails += not good
        print(
            f"{'ok' if good else 'UNEXPECTED'}: {spec.name} fault={fault}: "
            f"{sum(ok for _, ok in res)}/{len(res)} checks passed; failed: {[t for t, ok in res if not ok]}"
        )
        if VERBOSE or not good:
            for l in lines:
                print("   | " + l)
        elif fault:  # the diagnosis of the injected fault, briefly
            for l in lines:
                if l.startswith("FAIL") or "most common" in l or "no single source:" in l:
                    print("   | " + l[:160])
    print("selftest: " + ("all as expected" if not fails else f"{fails} unexpected"))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
