# Host-side numerics and layout diagnostics of the low-precision probes: numpy only (no torch, no
# CUDA), so that selftest_host.py checks them here against emulated kernels before the device run.
import numpy as np

# ---------------------------------------------------------------- float8 e4m3fn (OCP, "fn": no inf,
# 0x7f / 0xff are NaN, max 448; bias 7; subnormals m/8 * 2^-6)


def _e4m3_table():
    t = np.zeros(256)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        v = (m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        t[b] = np.nan if (e == 15 and m == 7) else (-v if s else v)
    return t


E4M3 = _e4m3_table()
FINITE_CODES = np.array([b for b in range(256) if not np.isnan(E4M3[b])], dtype=np.uint8)
_ORDER = np.argsort(E4M3[FINITE_CODES], kind="stable")
_SORTED_VALS = E4M3[FINITE_CODES][_ORDER]
_SORTED_CODES = FINITE_CODES[_ORDER]
ONE_E4M3 = 0x38


def e4m3_decode(codes):
    return E4M3[np.asarray(codes, dtype=np.uint8)]


def e4m3_encode(x):
    """nearest finite e4m3 code (saturating); ties: either neighbour (kernel and reference share the codes)"""
    x = np.clip(np.asarray(x, dtype=np.float64), -448.0, 448.0)
    i = np.clip(np.searchsorted(_SORTED_VALS, x), 1, len(_SORTED_VALS) - 1)
    lo, hi = _SORTED_VALS[i - 1], _SORTED_VALS[i]
    pick = np.where(np.abs(x - lo) <= np.abs(hi - x), i - 1, i)
    return _SORTED_CODES[pick]


def e4m3_random_codes(rng, shape):
    """uniform over the 254 finite codes (subnormals, +-0, +-448 included)"""
    return FINITE_CODES[rng.integers(0, len(FINITE_CODES), size=shape)]


# ---------------------------------------------------------------- bf16


def bf16_bits_to_f64(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)


def f64_to_bf16_bits(x):
    """round to nearest even (finite inputs)"""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_unique_values(rng, count):
    """count distinct bf16 values (exact in f32, no zero, moderate exponents) in random order:
    mantissa j/128 for j in 0..127, exponents -e..e, sign +-"""
    vals = []
    e = 0
    while len(vals) < count:
        for ex in [0] if e == 0 else [e, -e]:
            for sg in (1.0, -1.0):
                vals.extend(sg * (1 + j / 128) * 2.0**ex for j in range(128))
        e += 1
    vals = np.array(vals[:count])
    return vals[rng.permutation(count)]


# ---------------------------------------------------------------- MXFP4 (e2m1 nibbles + E8M0 scales)
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def mxfp4_dequant(aq, sc):
    """aq [R, K/2] u8 (low nibble = even k), sc [R, K/32] u8 E8M0 -> [R, K] float64"""
    R = aq.shape[0]
    nib = np.empty((R, aq.shape[1] * 2), dtype=np.uint8)
    nib[:, 0::2] = aq & 15
    nib[:, 1::2] = aq >> 4
    scale = 2.0 ** (sc.astype(np.float64) - 127)
    return E2M1[nib] * np.repeat(scale, 32, axis=1)


def e2m1_to_bf16_kernel_formula(v, s):
    """the integer formula of gen_lowprec.e2m1_to_bf16, in Python ints (bf16 bits)"""
    sign = (v & 8) << 12
    mag = v & 7
    e = mag >> 1
    mant = ((mag & 1) << 6) if mag >= 2 else 0
    expf = (s - 1 + e) & 0xFFFFFFFF
    bits = 0 if mag == 0 else (((expf << 7) | mant) & 0xFFFFFFFF)
    return (sign | bits) & 0xFFFFFFFF


# ---------------------------------------------------------------- wgmma fragment layouts (assumed)


def acc_frag_pos(t, i):
    """accumulator register i of thread t (m64nN f32) -> (row, col)"""
    w, l = t >> 5, t & 31
    return 16 * w + (l >> 2) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (l & 3) + (i & 1)


def acc_frag_owner(m, n):
    """(row, col) of the m64nN accumulator -> (thread, register)"""
    w, r = m // 16, m % 16
    g, h = r % 8, r // 8
    t = 32 * w + 4 * g + (n % 8) // 2
    return t, 4 * (n // 8) + 2 * h + (n % 2)


def rega_frag_pos(t, s, q, half):
    """A register q (0..3) of thread t for k16 step s, bf16 half (0 = low 16 bits) -> (row, k)
    (the m16n8k16 mma A layout per warp; warp w of the warpgroup owns rows 16 w .. 16 w + 15)"""
    w, l = t >> 5, t & 31
    return 16 * w + (l >> 2) + 8 * (q & 1), 16 * s + 2 * (l & 3) + 8 * (q >> 1) + half


def rega_frag_owner(m, k):
    w, r = m // 16, m % 16
    g, qlo = r % 8, r // 8
    s, kk = k // 16, k % 16
    qhi, tig, half = kk // 8, (kk % 8) // 2, kk % 2
    return 32 * w + 4 * g + tig, s, 2 * qhi + qlo, half


def rega_expected_regs(a_bits, K=128):
    """a_bits [64, K] uint16 bf16 bits -> [128, K/16, 4] uint32 as the kernel should build them"""
    out = np.zeros((128, K // 16, 4), dtype=np.uint32)
    for t in range(128):
        for s in range(K // 16):
            for q in range(4):
                r, k = rega_frag_pos(t, s, q, 0)
                out[t, s, q] = int(a_bits[r, k]) | (int(a_bits[r, k + 1]) << 16)
    return out


def regs_to_matrix(regs, K=128):
    """inverse of rega_expected_regs: [128, K/16, 4] uint32 -> bf16 bits [64, K] under the assumed layout"""
    a = np.zeros((64, K), dtype=np.uint16)
    for t in range(128):
        for s in range(K // 16):
            for q in range(4):
                r, k = rega_frag_pos(t, s, q, 0)
                a[r, k] = regs[t, s, q] & 0xFFFF
                a[r, k + 1] = regs[t, s, q] >> 16
    return a


# ---------------------------------------------------------------- 128B swizzle


def swizzle128(tile):
    """rows x 128 bytes -> the SWIZZLE_128B shared image (16-byte chunk c of row r at chunk c ^ (r % 8))"""
    rows = tile.shape[0]
    out = np.zeros_like(tile)
    for r in range(rows):
        for c in range(8):
            d = c ^ (r % 8)
            out[r, 16 * d : 16 * d + 16] = tile[r, 16 * c : 16 * c + 16]
    return out


def check_smem_image(got, tile, what):
    """got: bytes the kernel dumped; tile: rows x 128 bytes of the source. -> (ok, text)"""
    got = np.asarray(got, dtype=np.uint8).reshape(tile.shape)
    sw = swizzle128(tile)
    if np.array_equal(got, sw):
        return True, f"{what}: shared image == hand 128B swizzle (chunk c of row r at c ^ (r % 8))"
    if np.array_equal(got, tile):
        return False, f"{what}: shared image is UNSWIZZLED (plain row-major 128-byte rows)"
    bad = np.argwhere(got != sw)
    r, b = bad[0]
    return False, (
        f"{what}: shared image differs from the 128B swizzle in {len(bad)} bytes; first at row {r} "
        f"byte {b}: got 0x{got[r, b]:02x}, swizzled expects 0x{sw[r, b]:02x}; rows with differences: "
        f"{ranges(sorted(set(bad[:, 0].tolist())))}"
    )


# ---------------------------------------------------------------- reporting helpers


def ranges(xs):
    xs = sorted(set(int(x) for x in xs))
    if not xs:
        return "none"
    out, a, b = [], xs[0], xs[0]
    for x in xs[1:]:
        if x == b + 1:
            b = x
        else:
            out.append(f"{a}-{b}" if b > a else f"{a}")
            a = b = x
    out.append(f"{a}-{b}" if b > a else f"{a}")
    return ",".join(out)


def rel_err(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def error_map(out, ref, tol):
    """rows and columns with any |out - ref| > tol (NaN counts as wrong)"""
    bad = ~(np.abs(np.asarray(out, np.float64) - ref) <= tol)
    rows, cols = np.nonzero(bad)
    return int(bad.sum()), ranges(rows), ranges(cols)


def locate(srcs, outs, expected=None):
    """Each run r filled a source matrix srcs[r] [P, Q] with random values and the kernel produced
    outs[r] [M, N], each output expected to equal exactly ONE source element (identity probe).
    Returns pos [M, N, 2]: the source (row, col) whose values equal the output's in every run; where
    several sources do (equal values by chance), the expected one if it is among them, else -2
    (ambiguous); -1 where none does."""
    R = len(srcs)
    P, Q = srcs[0].shape
    keys = np.ascontiguousarray(
        np.stack([np.asarray(s, np.float64).ravel() + 0.0 for s in srcs], 1)
    )
    table = {}
    for idx, kb in enumerate(keys.view(f"V{8 * R}").ravel()):
        table.setdefault(kb.tobytes(), []).append(idx)
    M, N = outs[0].shape
    ok = np.ascontiguousarray(np.stack([np.asarray(o, np.float64).ravel() + 0.0 for o in outs], 1))
    exp = None if expected is None else (expected[:, :, 0] * Q + expected[:, :, 1]).ravel()
    pos = np.full((M * N, 2), -1, dtype=np.int64)
    for j, kb in enumerate(ok.view(f"V{8 * R}").ravel()):
        c = table.get(kb.tobytes(), [])
        if exp is not None and exp[j] in c:
            idx = exp[j]
        elif len(c) == 1:
            idx = c[0]
        else:
            idx = -2 if c else -1
        pos[j] = (idx // Q, idx % Q) if idx >= 0 else (idx, idx)
    return pos.reshape(M, N, 2)


def summarize_map(
    pos,
    expected,
    src_name,
    describe_src=None,
    describe_out=None,
    max_examples=12,
    srcs=None,
    outs=None,
):
    """pos, expected: [M, N, 2]; srcs, outs (optional, as given to locate): classify the outputs that
    match no single source (zero in every run = the expected element was never read; twice the
    expected value in every run = read twice). Returns (ok, lines)."""
    M, N = pos.shape[:2]
    good = np.all(pos == expected, axis=2)
    unmatched = pos[:, :, 0] == -1
    ambiguous = pos[:, :, 0] == -2
    elsewhere = ~good & ~unmatched & ~ambiguous
    lines = [
        f"{int(good.sum())}/{M * N} outputs read the expected {src_name} element; "
        f"{int(elsewhere.sum())} another single element, {int(unmatched.sum())} no single element "
        f"(a sum of several, or garbage), {int(ambiguous.sum())} ambiguous"
    ]
    if good.all():
        return True, lines
    if srcs is not None and unmatched.any():
        ev = np.stack(
            [np.asarray(sr, np.float64)[expected[:, :, 0], expected[:, :, 1]] for sr in srcs]
        )
        ov = np.stack([np.asarray(o, np.float64) for o in outs])
        zero = unmatched & np.all(ov == 0, axis=0)
        twice = unmatched & np.all(ov == 2 * ev, axis=0) & ~zero
        lines.append(
            f"  of the {int(unmatched.sum())} with no single source: {int(zero.sum())} are 0 in every run "
            f"(expected element never read), {int(twice.sum())} are twice the expected element "
            f"(read twice), {int((unmatched & ~zero & ~twice).sum())} other"
        )
    br, bc = np.nonzero(~good)
    lines.append(f"  wrong output rows: {ranges(br)}; wrong output columns: {ranges(bc)}")
    if elsewhere.any():
        d = pos[elsewhere] - expected[elsewhere]
        vals, cnt = np.unique(d, axis=0, return_counts=True)
        top = np.argsort(-cnt)[:10]
        lines.append(
            "  most common (source row - expected row, source col - expected col): "
            + ", ".join(f"({vals[i][0]:+d},{vals[i][1]:+d}) x{cnt[i]}" for i in top)
        )
    ex = list(zip(*np.nonzero(~good)))
    step = max(1, len(ex) // max_examples)
    for m, n in ex[::step][:max_examples]:
        p, e = pos[m, n], expected[m, n]
        o = f"out[{m},{n}]" + (f" ({describe_out(m, n)})" if describe_out else "")
        if p[0] == -1:
            s = "matches no single source element"
        elif p[0] == -2:
            s = "ambiguous"
        else:
            s = f"= {src_name}[{p[0]},{p[1]}]" + (
                f" ({describe_src(p[0], p[1])})" if describe_src else ""
            )
        es = f"{src_name}[{e[0]},{e[1]}]" + (
            f" ({describe_src(e[0], e[1])})" if describe_src else ""
        )
        lines.append(f"  {o} {s}; expected {es}")
    return False, lines
