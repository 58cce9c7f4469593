#!/usr/bin/env python3
# Writes the MLIR text of the low-precision probes (README.md says what each checks).
#
# Probe 1, FP8 (e4m3) wgmma, one warpgroup, one CTA:
#   fp8_n<N>_k<K>_<load>[_promote].mlir, kernel @fp8_n<N>_k<K>_<load>[_promote]
#   args (all !llvm.ptr, bare-pointer convention): a, b, out, sa, sb, dbg
#     load = tma:    a, b point to 128-byte CUtensorMaps (UINT8, SWIZZLE_128B; A box [128 B, 64 rows],
#                    B box [128 B, N rows]) in device memory
#     load = manual: a = A [64, K] e4m3 row-major, b = B [N, K] e4m3 row-major (K contiguous); 16-byte
#                    plain loads, stored to chunk c ^ (r % 8) of row r by hand
#   out [64, N] f32 = sum_k A[m, k] B[n, k]           (plain)
#   out [64, N] f32 = sum_kb sa[kb, m] sb[kb, n / 128] sum_{k in kb} A[m, k] B[n, k]   (_promote;
#        kb = 128-wide K block; sa [K/128, 64] f32, sb [K/128, N/128] f32: DeepGEMM's promotion)
#   dbg: bytes 0..8191 = shared A tile of K block 0 (64 rows x 128 B as the wgmma reads it),
#        bytes 8192.. = shared B tile of K block 0 (N rows x 128 B)
#   Shared memory (from the 1024-aligned base): mbarrier at 0, A tiles at 1024 + kb * 8192,
#   B tiles after them, N * 128 B each. Launch: 1 CTA x 128 threads,
#   dynamic smem = 2048 + (K/128) * (8192 + N * 128).
#
# Probe 2, register-A bf16 wgmma (MXFP4 weights dequantized in registers), one warpgroup:
#   rega_<mode>_n128_k128.mlir, kernel @rega_<mode>_n128_k128
#   args: a, as, b, out, dbg
#     mode = bf16:  a = A [64, 128] bf16 row-major (loaded straight into the A fragment registers)
#     mode = mxfp4: a = Aq [64, 64] u8 (two e2m1 per byte, low nibble = even k), as = S [64, 4] u8
#                   (E8M0, one per 32 k); A[m, k] = e2m1(Aq) * 2^(S[m, k/32] - 127), built as bf16
#     b = B [128, 128] bf16 row-major (K contiguous), hand-swizzled into two 64-k tiles of 128 rows
#   out [64, 128] f32 = A B^T;  dbg [128 threads][8 k16 steps][4] i32 = the A registers as issued.
#   Launch: 1 CTA x 128 threads, dynamic smem = 2048 + 32768.
#
# usage: python3 gen_lowprec.py [OUTDIR]   (default: this folder)
import os, sys
from lp_emit import Fn, module

ATTRS = "nvvm.maxntid = array<i32: 128, 1, 1>"


def load_tile_manual(f, tid, gbase, row_stride, col_off, rows, soff):
    """rows x 128 bytes from global (row r at gbase + r*row_stride + col_off) into the 1024-aligned
    shared tile at soff, 16-byte chunk c of row r going to chunk c ^ (r % 8) (the SWIZZLE_128B
    layout). 128 threads, rows*8/128 chunks each."""
    with f.loop(0, rows * 8 // 128) as L:
        i = f.add(tid, f.mul(L.iv, 128))
        r, c = f.shru(i, 3), f.and_(i, 7)
        src = f.gep1(gbase, f.add(f.add(f.mul(r, row_stride), col_off), f.shl(c, 4)))
        v = f.ld_global(src, "vector<4xi32>", 16)
        dst = f.add(soff, f.add(f.shl(r, 7), f.shl(f.xor(c, f.and_(r, 7)), 4)))
        f.st_shared(v, f.sptr(dst), "vector<4xi32>", 16)


def dump_smem(f, tid, soff, nbytes, gdst, goff):
    """copy nbytes of shared memory at soff to global gdst + goff, 16 B per thread per step"""
    with f.loop(0, nbytes // 16 // 128) as L:
        i = f.shl(f.add(tid, f.mul(L.iv, 128)), 4)
        v = f.ld_shared(f.sptr(f.add(soff, i)), "vector<4xi32>", 16)
        f.st_global(v, f.gep1(gdst, f.add(i, goff)), "vector<4xi32>", 16)


def frag_coords(f, tid):
    """wgmma accumulator fragment (m64nN, f32): thread t = 32 w + 4 g + q holds rows 16 w + g and
    16 w + g + 8; register i holds row (16 w + g + 8 * ((i >> 1) & 1)), column 8 * (i >> 2) + 2 q + (i & 1).
    Returns (row0, col0) = (16 w + g, 2 q)."""
    w, l = f.shru(tid, 5), f.and_(tid, 31)
    return f.add(f.mul(w, 16), f.shru(l, 2)), f.mul(f.and_(l, 3), 2)


def store_out(f, og, vals, row0, col0, N):
    for i, v in enumerate(vals):
        row = f.add(row0, 8 * ((i >> 1) & 1))
        col = f.add(col0, 8 * (i >> 2) + (i & 1))
        f.st_global(v, f.gep1(og, f.shl(f.add(f.mul(row, N), col), 2)), "f32", 4)


def gen_fp8(N, K, load, promote):
    KB = K // 128
    nf = N // 2
    name = f"fp8_n{N}_k{K}_{load}" + ("_promote" if promote else "")
    f = Fn(
        name,
        [
            "%a: !llvm.ptr",
            "%b: !llvm.ptr",
            "%out: !llvm.ptr",
            "%sa: !llvm.ptr",
            "%sb: !llvm.ptr",
            "%dbg: !llvm.ptr",
        ],
        ATTRS,
    )
    tid = f.tid()
    f.smem_base()
    A_OFF = lambda kb: 1024 + kb * 8192
    B_OFF = lambda kb: 1024 + KB * 8192 + kb * N * 128
    t0 = f.cmp("eq", tid, 0)
    if load == "tma":
        bar = f.sptr(0)
        with f.if_(t0):
            f.mbar_init(bar, 1)
            f.e("nvvm.fence.mbarrier.init")
        f.barrier()
        with f.if_(t0):
            f.mbar_expect_tx(bar, KB * (8192 + N * 128))
            for kb in range(KB):
                f.tma_load_2d(f.sptr(A_OFF(kb)), "%a", bar, kb * 128, 0)
                f.tma_load_2d(f.sptr(B_OFF(kb)), "%b", bar, kb * 128, 0)
        f.mbar_wait(bar, 0)
    else:
        ga, gb = f.gptr("%a"), f.gptr("%b")
        for kb in range(KB):
            load_tile_manual(f, tid, ga, K, kb * 128, 64, A_OFF(kb))
            load_tile_manual(f, tid, gb, K, kb * 128, N, B_OFF(kb))
        f.fence_proxy_async()  # generic-proxy smem writes -> visible to wgmma (async proxy)
        f.barrier()

    row0, col0 = frag_coords(f, tid)
    og = f.gptr("%out")
    z = f.zero_acc(nf)
    if not promote:
        acc = z
        f.wgmma_fence()
        for kb in range(KB):
            dA, dB = f.desc(f.saddr(A_OFF(kb))), f.desc(f.saddr(B_OFF(kb)))
            for j in range(4):  # k32 steps inside the 128-byte swizzled row: +32 B = +2
                acc = f.wgmma_ss(
                    f.add(dA, 2 * j, "i64"), f.add(dB, 2 * j, "i64"), acc, N, nf, "e4m3"
                )
        f.wgmma_commit()
        f.wgmma_wait(0)
        vals = [f.extract(acc, i, nf) for i in range(nf)]
    else:
        gsa, gsb = f.gptr("%sa"), f.gptr("%sb")
        final = None
        for kb in range(KB):
            dA, dB = f.desc(f.saddr(A_OFF(kb))), f.desc(f.saddr(B_OFF(kb)))
            f.wgmma_fence()  # the previous block's accumulators were read by this thread
            acc = z
            for j in range(4):
                acc = f.wgmma_ss(
                    f.add(dA, 2 * j, "i64"),
                    f.add(dB, 2 * j, "i64"),
                    acc,
                    N,
                    nf,
                    "e4m3",
                    accumulate=(j > 0),
                )
            f.wgmma_commit()
            f.wgmma_wait(0)
            sa = [
                f.ld_global(f.gep1(gsa, f.shl(f.add(row0, kb * 64 + 8 * h), 2)), "f32", 4)
                for h in range(2)
            ]
            sb = [
                f.ld_global(f.gep1(gsb, 4 * (kb * (N // 128) + nb)), "f32", 4)
                for nb in range(N // 128)
            ]
            sc = [[f.fmul(sa[h], sb[nb]) for nb in range(N // 128)] for h in range(2)]
            part = [f.fmul(f.extract(acc, i, nf), sc[(i >> 1) & 1][i // 64]) for i in range(nf)]
            final = part if final is None else [f.fadd(final[i], part[i]) for i in range(nf)]
        vals = final
    store_out(f, og, vals, row0, col0, N)
    # shared tiles of K block 0 as the wgmma saw them
    gd = f.gptr("%dbg")
    dump_smem(f, tid, A_OFF(0), 8192, gd, 0)
    dump_smem(f, tid, B_OFF(0), N * 128, gd, 8192)
    return name, module([f])


def e2m1_to_bf16(f, v, s):
    """bf16 bits (i32, low 16) of e2m1 nibble v (i32, 0..15) times 2^(s - 127), s the E8M0 byte
    (valid for 2 <= s <= 252). e2m1 = sign | e(2) | m(1): |x| = 0.5 m if e == 0, else 2^(e-1) (1 + m/2).
    Result exponent field = s - 1 + e (e == 0, m == 1: 0.5 * 2^(s-127) -> s - 1), mantissa top bit
    = m for e >= 1; magnitude code 0 -> 0."""
    sign = f.shl(f.and_(v, 8), 12)
    mag = f.and_(v, 7)
    e = f.shru(mag, 1)
    mant = f.sel(f.cmp("uge", mag, 2), f.shl(f.and_(mag, 1), 6), 0)
    expf = f.add(f.sub(s, 1), e)
    bits = f.sel(f.cmp("eq", mag, 0), 0, f.or_(f.shl(expf, 7), mant))
    return f.or_(sign, bits)


def gen_rega(mode, N=128, K=128):
    nf = N // 2
    name = f"rega_{mode}_n{N}_k{K}"
    f = Fn(
        name,
        ["%a: !llvm.ptr", "%as: !llvm.ptr", "%b: !llvm.ptr", "%out: !llvm.ptr", "%dbg: !llvm.ptr"],
        ATTRS,
    )
    tid = f.tid()
    f.smem_base()
    B_OFF = lambda t: 1024 + t * N * 128  # K tile t = k in [64 t, 64 t + 64)
    gb = f.gptr("%b")
    for t in range(K // 64):
        load_tile_manual(f, tid, gb, K * 2, t * 128, N, B_OFF(t))
    f.fence_proxy_async()
    f.barrier()

    # A fragment of m64nNk16 (bf16, registers): the m16n8k16 mma A layout per warp, warp w of the
    # warpgroup owning rows 16 w .. 16 w + 15. Thread lane = 4 g + q:
    #   reg 0 = A[16w+g  ][2q, 2q+1]     reg 1 = A[16w+g+8][2q, 2q+1]
    #   reg 2 = A[16w+g  ][2q+8, 2q+9]   reg 3 = A[16w+g+8][2q+8, 2q+9]     (k relative to the k16 step;
    #   the lower k in the low 16 bits)
    row0, col0 = frag_coords(f, tid)
    ga, gs, gd = f.gptr("%a"), f.gptr("%as"), f.gptr("%dbg")
    regs = []
    for s in range(K // 16):
        rs = []
        for q in range(4):
            row = f.add(row0, 8 * (q & 1))
            col = f.add(col0, 16 * s + 8 * (q >> 1))  # even
            if mode == "bf16":
                v = f.ld_global(f.gep1(ga, f.shl(f.add(f.mul(row, K), col), 1)), "i32", 4)
            else:
                byte = f.ld_u8(ga, f.add(f.mul(row, K // 2), f.shru(col, 1)))
                sc = f.ld_u8(
                    gs, f.add(f.mul(row, K // 32), (16 * s) // 32)
                )  # col // 32 == 16 s // 32
                lo = e2m1_to_bf16(f, f.and_(byte, 15), sc)
                hi = e2m1_to_bf16(f, f.shru(byte, 4), sc)
                v = f.or_(lo, f.shl(hi, 16))
            f.st_global(
                v, f.gep1(gd, f.shl(f.add(f.mul(tid, 4 * (K // 16)), 4 * s + q), 2)), "i32", 4
            )
            rs.append(v)
        regs.append(rs)
    acc = f.zero_acc(nf)
    f.wgmma_fence()  # orders the A-register writes above before the wgmmas read them
    for s in range(K // 16):
        t, j = s // 4, s % 4
        dB = f.desc(f.saddr(B_OFF(t)))
        acc = f.wgmma_rs_bf16(regs[s], f.add(dB, 2 * j, "i64"), acc, N, nf, accumulate=(s > 0))
    f.wgmma_commit()
    f.wgmma_wait(0)
    store_out(f, f.gptr("%out"), [f.extract(acc, i, nf) for i in range(nf)], row0, col0, N)
    return name, module([f])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    jobs = []
    for N in (128, 256):
        for load in ("tma", "manual"):
            jobs.append(gen_fp8(N, 128, load, False))
        jobs.append(gen_fp8(N, 512, "tma", True))
    jobs.append(gen_fp8(128, 512, "tma", False))
    for mode in ("bf16", "mxfp4"):
        jobs.append(gen_rega(mode))
    for name, text in jobs:
        open(os.path.join(out, name + ".mlir"), "w").write(text)
        print(name)


if __name__ == "__main__":
    main()
