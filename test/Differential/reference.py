#!/usr/bin/env python3
"""Independent numpy reference of the public `moe` dialect ops.

Written from docs/Contract.md and the op descriptions in
MoeOps.td; it shares no code with the compiler.  Everything is computed in
float64; `round_to(x, dtype)` emulates the storage precision of f32, f16 and
bf16 (round to nearest even) so inputs and the intermediate activations of the
`moe.ffn` chain can be rounded where the compiled chain rounds them.

Float results come with a `scale` array: a first-order bound of the magnitude
the result's rounding / accumulation error is proportional to (for a dot
product, sum |a_i * b_i|).  The differential driver accepts
|got - ref| <= rtol(dtype) * scale + atol(dtype).

Run `python3 reference.py --self-test` to check hand-worked examples.
"""

import itertools
import math
import sys

import numpy as np

FLT_MAX = float(np.finfo(np.float32).max)
FLOAT_TYPES = ("f32", "f16", "bf16")
INT_TYPES = ("i32", "i64", "i1")
# Element types of low-precision weights and their scales, held as their
# bit patterns (0..255): e4m3 (fp8_block weights), E8M0 (mxfp4 scales) and
# bytes of two e2m1 (mxfp4 weights).
BYTE_TYPES = ("f8E4M3FN", "f8E8M0FNU", "i8")

# Comparison tolerances per float type: (rtol relative to `scale`, atol).
TOLERANCE = {
    "f32": (1e-5, 1e-7),
    "f16": (4e-3, 1e-4),
    "bf16": (2e-2, 1e-6),
}
# Unit roundoff-ish per type, used to propagate error scales in the chain.
UNIT = {"f64": 2.0**-52, "f32": 2.0**-23, "f16": 2.0**-10, "bf16": 2.0**-7}


# ----------------------------------------------------------------------------
# Storage-precision emulation
# ----------------------------------------------------------------------------


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even."""
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    lsb = (u >> np.uint64(16)) & np.uint64(1)
    r = (u + np.uint64(0x7FFF) + lsb) >> np.uint64(16)
    nan = np.isnan(a)
    r = np.where(nan, (u >> np.uint64(16)) | np.uint64(0x40), r)
    return r.astype(np.uint16)


def bf16_bits_to_f64(b):
    b = np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return b.view(np.float32).astype(np.float64)


def round_to(x, dtype):
    """Round float64 values to `dtype` storage and return them as float64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "f64":
            return x.copy()
        if dtype == "f32":
            return x.astype(np.float32).astype(np.float64)
        if dtype == "f16":
            return x.astype(np.float16).astype(np.float64)
        if dtype == "bf16":
            return bf16_bits_to_f64(f32_to_bf16_bits(x.astype(np.float32)))
    raise ValueError("not a float type: %s" % dtype)


def to_bytes(x, dtype):
    """Little-endian raw data of `x` stored as `dtype` (for dense hex literals)."""
    x = np.asarray(x)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "f32":
            a = x.astype("<f4")
        elif dtype == "f16":
            a = x.astype("<f2")
        elif dtype == "bf16":
            a = f32_to_bf16_bits(x.astype(np.float32)).astype("<u2")
        elif dtype == "i32":
            a = x.astype("<i4")
        elif dtype == "i64":
            a = x.astype("<i8")
        elif dtype in BYTE_TYPES:  # values are the bit patterns 0..255
            a = x.astype(np.int64).astype(np.uint8)
        else:
            raise ValueError(dtype)
    return np.ascontiguousarray(a).tobytes()


# ----------------------------------------------------------------------------
# Routing
# ----------------------------------------------------------------------------


def _sanitize_logits(x):
    x = np.array(x, dtype=np.float64)
    x[np.isnan(x)] = -np.inf
    x[x == np.inf] = FLT_MAX
    return x


def scores(logits, scoring):
    """Step 1 of moe.route: softmax over E or sigmoid, NaN -> -inf, +inf -> FLT_MAX."""
    x = _sanitize_logits(logits)
    if x.ndim == 1:
        x = x[None, :]
    s = np.zeros_like(x)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if scoring == "softmax":
            for t in range(x.shape[0]):
                m = np.max(x[t]) if x.shape[1] else -np.inf
                if m == -np.inf:
                    continue  # every score is zero
                e = np.exp(x[t] - m)
                s[t] = e / np.sum(e)
        elif scoring == "sigmoid":
            s = 1.0 / (1.0 + np.exp(-x))
        else:
            raise ValueError(scoring)
    return s


def route_grad(grad, logits, ids, scoring, normalize=False, scaling=1.0):
    """moe.route_grad: (value [T,E], scale [T,E]), the gradient of moe.route's
    weights w.r.t. the logits for the given selection (ids outside [0, E)
    take no part)."""
    g = np.asarray(grad, dtype=np.float64)
    T, E = np.asarray(logits).shape
    s = scores(logits, scoring) if T else np.zeros((0, E))
    val, scale = np.zeros((T, E)), np.zeros((T, E))
    for t in range(T):
        picks = [(j, int(i)) for j, i in enumerate(ids[t]) if 0 <= int(i) < E]
        S = sum(s[t, i] for _, i in picks)
        D = sum(g[t, j] * s[t, i] for j, i in picks)
        Da = sum(abs(g[t, j]) * s[t, i] for j, i in picks)
        ds, dsa = np.zeros(E), np.zeros(E)
        for j, i in picks:
            if normalize and S > 0:
                ds[i] += scaling * (g[t, j] - D / S) / S
                dsa[i] += abs(scaling) * (abs(g[t, j]) + Da / S) / S
            else:
                ds[i] += scaling * g[t, j]
                dsa[i] += abs(scaling * g[t, j])
        if scoring == "softmax":
            val[t] = s[t] * (ds - ds @ s[t])
            scale[t] = s[t] * (dsa + dsa @ s[t])
        else:
            val[t] = ds * s[t] * (1 - s[t])
            scale[t] = dsa * s[t] * (1 - s[t])
    return val, scale


def _order(keys, allowed):
    """Indices of `allowed` sorted by descending key, ties -> lower index."""
    return sorted(allowed, key=lambda e: (-keys[e], e))


def _group_scores(c_row, n_group, group_score):
    g = len(c_row) // n_group
    out = []
    for gi in range(n_group):
        vals = sorted(c_row[gi * g : (gi + 1) * g], reverse=True)
        out.append(vals[0] if group_score == "max" else vals[0] + vals[1])
    return out


def _key_tol(v):
    # f32 routing math: a few ulps relative, plus a floor below which f32
    # values are denormal / flushed and cannot be ordered reliably.
    return 4e-6 * abs(v) + 1e-30


def _near(a, b):
    return a != b and abs(a - b) <= _key_tol(a) + _key_tol(b)


def route_row(s_row, c_row, k, n_group, topk_group, group_score, kept_groups=None):
    """Selected ids of one row (steps 3-4)."""
    E = len(c_row)
    if n_group > 1:
        g = E // n_group
        if kept_groups is None:
            gs = _group_scores(c_row, n_group, group_score)
            kept_groups = _order(gs, range(n_group))[:topk_group]
        allowed = [e for e in range(E) if e // g in kept_groups]
    else:
        allowed = list(range(E))
    return _order(c_row, allowed)[:k]


def route_weights(s_row, ids, normalize, scaling):
    w = np.array([s_row[i] for i in ids], dtype=np.float64)
    if normalize:
        tot = np.sum(w)
        if tot > 0:
            w = w / tot
    return w * float(scaling)


def route(
    logits,
    k,
    scoring,
    normalize=False,
    n_group=1,
    topk_group=1,
    group_score="max",
    scaling=1.0,
    bias=None,
):
    """moe.route. Returns (weights f64 [T,k], ids int64 [T,k], ambiguous [T] bool).

    `ambiguous[t]` is set when the row's selected *set* depends on a near tie
    (not an exact one) that f32 arithmetic may resolve either way."""
    logits = np.asarray(logits, dtype=np.float64)
    T, E = logits.shape
    s = scores(logits, scoring) if T else np.zeros((0, E))
    c = s + (np.asarray(bias, dtype=np.float64)[None, :] if bias is not None else 0.0)
    W = np.zeros((T, k))
    ids = np.zeros((T, k), dtype=np.int64)
    amb = np.zeros(T, dtype=bool)
    for t in range(T):
        row_ids = route_row(s[t], c[t], k, n_group, topk_group, group_score)
        ids[t] = row_ids
        W[t] = route_weights(s[t], row_ids, normalize, scaling)
        amb[t] = _row_ambiguous(c[t], k, n_group, topk_group, group_score)
    return W, ids, amb, s, c


def _row_ambiguous(c_row, k, n_group, topk_group, group_score):
    E = len(c_row)
    if n_group > 1:
        gs = _group_scores(c_row, n_group, group_score)
        order = _order(gs, range(n_group))
        if topk_group < n_group and _near(gs[order[topk_group - 1]], gs[order[topk_group]]):
            return True
        g = E // n_group
        allowed = [e for e in range(E) if e // g in order[:topk_group]]
    else:
        allowed = list(range(E))
    order = _order(c_row, allowed)
    if k < len(order) and _near(c_row[order[k - 1]], c_row[order[k]]):
        return True
    return False


def route_ids_acceptable(s_row, c_row, got_ids, k, n_group, topk_group, group_score):
    """Is `got_ids` a correct selection of this row up to near ties that f32
    may break either way?  Exact ties must follow the lower-index rule."""
    got_ids = [int(i) for i in got_ids]
    E = len(c_row)
    if len(set(got_ids)) != len(got_ids) or any(i < 0 or i >= E for i in got_ids):
        return False
    candidates = [None]
    if n_group > 1:
        gs = _group_scores(c_row, n_group, group_score)
        order = _order(gs, range(n_group))
        bound = gs[order[topk_group - 1]]
        sure = [gi for gi in order if gs[gi] > bound and not _near(gs[gi], bound)]
        maybe = [gi for gi in order if gi not in sure and (gs[gi] == bound or _near(gs[gi], bound))]
        need = topk_group - len(sure)
        candidates = [sure + list(cmb) for cmb in itertools.combinations(maybe, need)]
        if len(candidates) > 200:
            candidates = candidates[:200]
    for kept in candidates:
        ref = route_row(s_row, c_row, k, n_group, topk_group, group_score, kept_groups=kept)
        if n_group > 1:
            g = E // n_group
            if any(i // g not in kept for i in got_ids):
                continue
        ok = True
        for a, b in zip(got_ids, ref):
            if a == b:
                continue
            if not _near(c_row[a], c_row[b]):
                ok = False
                break
        if ok:
            return True
    return False


def topk(x, k):
    """moe.topk: (values [T,k], ids [T,k]); NaN below everything, ties lower index."""
    x = np.asarray(x, dtype=np.float64)
    T, E = x.shape
    vals = np.zeros((T, k))
    ids = np.zeros((T, k), dtype=np.int64)
    for t in range(T):
        order = sorted(
            range(E), key=lambda e: (1, 0.0, e) if math.isnan(x[t, e]) else (0, -x[t, e], e)
        )[:k]
        ids[t] = order
        vals[t] = x[t, order]
    return vals, ids


# ----------------------------------------------------------------------------
# Dispatch metadata
# ----------------------------------------------------------------------------


def cumsum(indices, E):
    indices = np.asarray(indices, dtype=np.int64)
    T = indices.shape[0]
    mask = np.zeros((T, E), dtype=np.int64)
    for t in range(T):
        for e in indices[t]:
            if 0 <= e < E:
                mask[t, e] += 1
    return np.cumsum(mask.T.reshape(-1)).astype(np.int64)


def get_indices(cs, indices):
    cs = np.asarray(cs, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    T, k = indices.shape
    rev = np.full(T * k, -7, dtype=np.int64)
    tok = np.full(T * k, -7, dtype=np.int64)
    if T == 0:
        return rev, tok
    E = len(cs) // T
    dispatched = 0
    for b in range(T):
        row = list(indices[b])
        for e in set(int(v) for v in row if 0 <= v < E):
            slots = [j for j in range(k) if row[j] == e]
            p = int(cs[e * T + b]) - 1
            for n, j in enumerate(slots):
                q = p - (len(slots) - 1) + n
                rev[q] = b * k + j
                tok[q] = b
            dispatched += len(slots)
    q = dispatched
    for b in range(T):
        for j in range(k):
            if not (0 <= indices[b, j] < E):
                rev[q] = b * k + j
                tok[q] = b
                q += 1
    return rev, tok


def get_indptr(cs, E, inclusive):
    cs = np.asarray(cs, dtype=np.int64)
    T = len(cs) // E
    ends = np.array([cs[(e + 1) * T - 1] if T > 0 else 0 for e in range(E)], dtype=np.int64)
    if inclusive:
        return ends
    return np.concatenate([[0], ends]).astype(np.int64)


# ----------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------


def gather(x, idx):
    x = np.asarray(x, dtype=np.float64)
    T, H = x.shape
    out = np.zeros((len(idx), H))
    for m, i in enumerate(idx):
        if 0 <= i < T:
            out[m] = x[i]
    return out


def scatter(x, idx):
    x = np.asarray(x, dtype=np.float64)
    M, H = x.shape
    out = np.zeros((M, H))
    for i, d in enumerate(idx):  # later row wins
        if 0 <= d < M:
            out[d] = x[i]
    return out


# ----------------------------------------------------------------------------
# Expert compute
# ----------------------------------------------------------------------------


def grouped_matmul(lhs, rhs, offsets, bias=None, transpose_rhs=False):
    """Returns (value [M,N], scale [M,N], defined_rows [M] bool).

    A row is undefined (not compared) when the two rules of the op reference
    disagree on it, which only happens for non-monotone offsets: several
    experts' ranges cover it, or one covers it outside [offsets[0], offsets[E])."""
    lhs = np.asarray(lhs, dtype=np.float64)
    rhs = np.asarray(rhs, dtype=np.float64)
    M, K = lhs.shape
    E = rhs.shape[0]
    W = np.transpose(rhs, (0, 2, 1)) if transpose_rhs else rhs  # E x K x N
    N = W.shape[2]
    off = [min(max(int(o), 0), M) for o in offsets]
    out = np.zeros((M, N))
    scale = np.zeros((M, N))
    defined = np.ones(M, dtype=bool)
    owner = [[] for _ in range(M)]
    for e in range(E):
        for m in range(off[e], off[e + 1]):
            owner[m].append(e)
    for m in range(M):
        inside = off[0] <= m < off[E]
        if len(owner[m]) > 1 or (len(owner[m]) == 1 and not inside):
            defined[m] = False
            continue
        if not owner[m]:
            continue
        e = owner[m][0]
        out[m] = lhs[m] @ W[e]
        scale[m] = np.abs(lhs[m]) @ np.abs(W[e])
        if bias is not None:
            out[m] += bias[e]
            scale[m] += np.abs(bias[e])
    return out, scale, defined


def grouped_matmul_wgrad(lhs, rhs, offsets, acc=None):
    """moe.grouped_matmul_wgrad: (value [E,K,N], scale [E,K,N]); group e is
    rows [clamp(offsets[e]), clamp(offsets[e+1])), empty when decreasing."""
    lhs = np.asarray(lhs, dtype=np.float64)
    rhs = np.asarray(rhs, dtype=np.float64)
    M, K = lhs.shape
    N = rhs.shape[1]
    E = len(offsets) - 1
    out = np.zeros((E, K, N)) if acc is None else np.array(acc, dtype=np.float64)
    scale = np.abs(out)
    for e in range(E):
        lo = min(max(int(offsets[e]), 0), M)
        hi = min(max(int(offsets[e + 1]), 0), M)
        if hi > lo:
            out[e] += lhs[lo:hi].T @ rhs[lo:hi]
            scale[e] += np.abs(lhs[lo:hi]).T @ np.abs(rhs[lo:hi])
    return out, scale


# ----------------------------------------------------------------------------
# Low-precision expert weights (weight_format fp8_block / mxfp4)
# ----------------------------------------------------------------------------


def _e4m3_value(b):
    """The value of e4m3 (float8_e4m3fn) bits `b`: bias 7, no infinities,
    S.1111.111 NaN, subnormals m * 2^-9."""
    sign = -1.0 if b & 0x80 else 1.0
    e, m = (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return sign * m * 2.0**-9
    return sign * 2.0 ** (e - 7) * (1.0 + m / 8.0)


E4M3 = np.array([_e4m3_value(b) for b in range(256)])  # value of every bit pattern
E4M3_MAX = 448.0
# Codes 0x00..0x7e: the non-negative finite values, increasing with the code.
_E4M3_POS = E4M3[:0x7F]
E2M1 = np.array([(-1.0) ** (c >> 3) * [0, 0.5, 1, 1.5, 2, 3, 4, 6][c & 7] for c in range(16)])
ACT_AMAX_FLOOR = np.float32(1e-4)


def decode_e4m3(bits):
    return E4M3[np.asarray(bits, dtype=np.int64) & 0xFF]


def encode_e4m3(x):
    """Bits of e4m3-representable values `x` (NaN -> 0x7f)."""
    x = np.asarray(x, dtype=np.float64)
    code = np.searchsorted(_E4M3_POS, np.abs(np.nan_to_num(x, nan=0.0)))
    code = np.where(np.signbit(x), code | 0x80, code)
    code = np.where(np.isnan(x), 0x7F, code)
    if not np.array_equal(decode_e4m3(code), x, equal_nan=True):
        raise ValueError("not e4m3 values")
    return code.astype(np.int64)


def decode_e8m0(bits):
    """2^(s - 127); 255 is NaN (0 is 2^-127)."""
    s = np.asarray(bits, dtype=np.int64) & 0xFF
    with np.errstate(invalid="ignore"):
        return np.where(s == 255, np.nan, np.ldexp(1.0, s - 127))


def unpack_e2m1(packed):
    """... x K/2 bytes -> ... x K e2m1 codes: element 2j in the low nibble of
    byte j, 2j + 1 in the high one."""
    b = np.asarray(packed, dtype=np.int64) & 0xFF
    codes = np.empty(b.shape[:-1] + (2 * b.shape[-1],), dtype=np.int64)
    codes[..., 0::2] = b & 15
    codes[..., 1::2] = b >> 4
    return codes


def pack_e2m1(codes):
    c = np.asarray(codes, dtype=np.int64)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def round_to_e4m3(x):
    """float64 values -> nearest e4m3 value (ties to the even code), |x| >
    448 saturated to 448, NaN kept; by search in the table of all values."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), E4M3_MAX)  # NaN stays NaN
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    hi = np.searchsorted(_E4M3_POS, a)  # _E4M3_POS[hi - 1] < a <= _E4M3_POS[hi]
    lo = np.maximum(hi - 1, 0)
    d_lo = a - _E4M3_POS[lo]
    d_hi = _E4M3_POS[hi] - a
    pick = np.where(d_hi < d_lo, hi, np.where(d_lo < d_hi, lo, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(d_hi == 0, hi, pick)
    v = _E4M3_POS[pick]
    v = np.where(np.signbit(x), -v, v)
    return np.where(nan, np.nan, v)


def e4m3_quantum(a):
    """The spacing of e4m3 values at magnitude a (<= 448)."""
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    return np.ldexp(1.0, (np.maximum(e, -6) - 3).astype(np.int64))


def activation_scale(amax, ue8m0):
    """The f32 quantization scale of groups with largest magnitude `amax`
    (f32 values): max(amax, 1e-4) / 448 in f32, rounded up to a power of two
    with ue8m0; NaN propagates."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.maximum(np.asarray(amax, dtype=np.float32), ACT_AMAX_FLOOR) / np.float32(E4M3_MAX)
    s = np.asarray(s, dtype=np.float32).astype(np.float64)
    if ue8m0:
        m, e = np.frexp(s)
        up = np.where(m == 0.5, s, np.ldexp(1.0, e))
        s = np.where(np.isfinite(s), up, s)
    return s


def quantize_rows_fp8(lhs, ue8m0):
    """fp8_block activations: (q [M,K] e4m3 values, s [M, ceil(K/128)] f32
    scales); row m's group g is columns [128 g, 128 g + 128)."""
    x = np.asarray(lhs, dtype=np.float64).astype(np.float32)
    M, K = x.shape
    G = -(-K // 128)
    s = np.zeros((M, G))
    q = np.zeros((M, K))
    for g in range(G):
        blk = x[:, g * 128 : (g + 1) * 128]
        amax = np.max(np.abs(blk), axis=1) if M else np.zeros(0, np.float32)
        s[:, g] = activation_scale(amax, ue8m0)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            r = (blk / s[:, g : g + 1].astype(np.float32)).astype(np.float64)  # f32 division
        q[:, g * 128 : (g + 1) * 128] = round_to_e4m3(r)
    return q, s


def expand_groups(s, K, size=128):
    """[..., G] -> [..., K]: entry k takes group k // size."""
    return np.repeat(np.asarray(s, dtype=np.float64), size, axis=-1)[..., :K]


def dequantize_weights(rhs, weight_format, rhs_scale):
    """The E x N x K float64 values of low-precision weights (exact)."""
    if weight_format == "fp8_block":
        w = decode_e4m3(rhs)
        E, N, K = w.shape
        rs = np.asarray(rhs_scale, dtype=np.float64)
        rs = np.repeat(expand_groups(rs, K), 128, axis=1)[:, :N, :]
        with np.errstate(invalid="ignore"):
            return w * rs
    if weight_format == "mxfp4":
        w = E2M1[unpack_e2m1(rhs)]
        with np.errstate(invalid="ignore"):
            return w * expand_groups(decode_e8m0(rhs_scale), w.shape[2], 32)
    raise ValueError(weight_format)


def dequantized_lhs(lhs, weight_format, scale_fmt="f32"):
    """What the GEMM multiplies the weights with: for fp8_block the rows
    quantized to e4m3 times their scales, else `lhs` itself."""
    lhs = np.asarray(lhs, dtype=np.float64)
    if weight_format != "fp8_block":
        return lhs
    q, s = quantize_rows_fp8(lhs, scale_fmt == "ue8m0")
    with np.errstate(invalid="ignore"):
        return q * expand_groups(s, lhs.shape[1])


def grouped_matmul_lowp(lhs, rhs, offsets, rhs_scale, weight_format, scale_fmt="f32", bias=None):
    """moe.grouped_matmul with weight_format fp8_block / mxfp4 (transposed
    weights). Returns (value, scale, defined rows [M], care [M,N]).

    The products are exact in float64 (q, the scales and the decoded
    weights are). `care` drops the elements whose f32 accumulation may
    overflow: sum |finite products| + |bias| >= FLT_MAX, unless the value is
    NaN (which f32 gives too)."""
    x = dequantized_lhs(lhs, weight_format, scale_fmt)
    w = dequantize_weights(rhs, weight_format, rhs_scale)
    with np.errstate(invalid="ignore", over="ignore"):
        val, scale, defined = grouped_matmul(x, w, offsets, bias, transpose_rhs=True)
        finite, _, _ = grouped_matmul(
            np.where(np.isfinite(x), np.abs(x), 0.0),
            np.where(np.isfinite(w), np.abs(w), 0.0),
            offsets,
            None if bias is None else np.abs(bias),
            transpose_rhs=True,
        )
        care = np.isnan(val) | (finite < FLT_MAX * (1 - 2.0**-20))
    return val, scale, defined, care


def fp8_requantization_error(x, x_err, ue8m0):
    """Bound of |q' s' - q s| over the activations x' with |x' - x| <=
    x_err (elementwise): how far the dequantized fp8_block activations of a
    slightly different x' (an f32 chain's) can be from those of x. Small
    (|q| * ds) where no e4m3 rounding boundary and no ue8m0 step lies in
    reach, up to an e4m3 quantum times s where one does."""
    x = np.asarray(x, dtype=np.float64)
    err = np.asarray(x_err, dtype=np.float64)
    M, K = x.shape
    out = np.zeros((M, K))
    ax = np.abs(x)
    for g in range(-(-K // 128)):
        sl = slice(g * 128, (g + 1) * 128)
        a, e = ax[:, sl], err[:, sl]
        if M == 0:
            continue
        amax_lo = np.max(np.maximum(a - e, 0.0), axis=1)
        amax_hi = np.max(a + e, axis=1)
        # f32 amax: rounding the bounds outwards keeps them bounds.
        s_lo = activation_scale(np.nextafter(amax_lo.astype(np.float32), np.float32(0)), ue8m0)
        s_hi = activation_scale(np.nextafter(amax_hi.astype(np.float32), np.float32(np.inf)), ue8m0)
        s = activation_scale(np.max(a, axis=1), ue8m0)
        ref = round_to_e4m3(a / s[:, None]) * s[:, None]
        qa = round_to_e4m3(np.maximum(a - e, 0.0) / s_hi[:, None])
        qb = round_to_e4m3((a + e) / s_lo[:, None])
        d = np.maximum(ref - qa * s_lo[:, None], qb * s_hi[:, None] - ref)
        flip = a < e  # x' may have the other sign
        out[:, sl] = np.where(flip, ref + qb * s_hi[:, None], d)
    return out


def _phi(x):  # standard normal pdf
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _glu_halves(x, layout):
    N = x.shape[1] // 2
    if layout == "concat":
        return x[:, :N], x[:, N:]
    if layout == "interleaved":
        return x[:, 0::2], x[:, 1::2]
    raise ValueError(layout)


def _glu_join(gate, up, layout):
    out = np.zeros((gate.shape[0], 2 * gate.shape[1]))
    if layout == "concat":
        out[:, : gate.shape[1]], out[:, gate.shape[1] :] = gate, up
    else:
        out[:, 0::2], out[:, 1::2] = gate, up
    return out


def activation_grad(g, act, alpha):
    """(act(g), act'(g), the sum of |terms| of act'(g) and of act(g) in f32's
    evaluation, as error scales) in float64."""
    g = np.asarray(g, dtype=np.float64)
    cancel = 2.0**-21 / TOLERANCE["f32"][0]  # a few 2^-24 absolute, as in glu
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if act == "silu":
            sg = 1.0 / (1.0 + np.exp(-alpha * g))
            t = alpha * g * sg * (1.0 - sg)
            return g * sg, sg + t, np.abs(sg) + np.abs(t), np.abs(g * sg)
        if act == "gelu":
            cdf = 0.5 * (1.0 + _erf(g / math.sqrt(2.0)))
            t = g * _phi(g)
            return (
                g * cdf,
                cdf + t,
                np.abs(cdf) + np.abs(t) + cancel,
                np.abs(g) * (np.abs(cdf) + cancel),
            )
        if act == "gelu_tanh":
            c = math.sqrt(2.0 / math.pi)
            k = 0.044715
            th = np.tanh(c * (g + k * g**3))
            outer = 0.5 * g * c * (1.0 + 3 * k * g * g)
            t = outer * (1.0 - th * th)
            d = 0.5 * (1.0 + th) + t
            terms = np.abs(0.5 * (1.0 + th)) + np.abs(t) + cancel * (1.0 + np.abs(outer))
            return 0.5 * g * (1.0 + th), d, terms, np.abs(g) * (np.abs(0.5 * (1.0 + th)) + cancel)
    raise ValueError(act)


def activation(g, act, alpha):
    """(act(g), |act'(g)|) in float64."""
    a, d, _, _ = activation_grad(g, act, alpha)
    return a, np.abs(d)


def glu(x, act, layout, alpha=1.0, limit=None, up_bias=0.0, x_scale=None):
    """moe.glu: (value [M,N], scale [M,N]).  `x_scale` is the error scale
    of the input (defaults to |x|: inputs exact, only f32 evaluation error)."""
    x = np.asarray(x, dtype=np.float64)
    xs = np.abs(x) if x_scale is None else x_scale
    g, u = _glu_halves(x, layout)
    gs, us = _glu_halves(xs, layout)
    if limit is not None:
        g = np.minimum(g, limit)
        u = np.clip(u, -limit, limit)
    a, da = activation(g, act, alpha)
    ub = u + up_bias
    val = a * ub
    scale = da * gs * np.abs(ub) + np.abs(a) * us + np.abs(val)
    if act in ("gelu", "gelu_tanh"):
        # 0.5*g*(1 + erf|tanh(..)) cancels for negative g: in f32 the
        # bracket carries an absolute error of a few 2^-24, so the result
        # is off by |g*ub| * 2^-22 or so (the erf form promises no more).
        scale = scale + np.abs(g) * np.abs(ub) * (2.0**-21 / TOLERANCE["f32"][0])
    return val, scale


def glu_grad(dA, x, act, layout, alpha=1.0, limit=None, up_bias=0.0):
    """moe.glu_grad: (value [M,2N], scale [M,2N]) in the input's layout;
    inputs exact (only f32 evaluation error). A clamp passes the gradient
    inside its closed interval; a NaN gate / up keeps its NaN."""
    x = np.asarray(x, dtype=np.float64)
    dA = np.asarray(dA, dtype=np.float64)
    g0, u0 = _glu_halves(x, layout)
    g, u = g0, u0
    if limit is not None:
        g = np.minimum(g0, limit)
        u = np.clip(u0, -limit, limit)
    a, d, d_scale, a_scale = activation_grad(g, act, alpha)
    ub = u + up_bias
    with np.errstate(invalid="ignore", over="ignore"):
        dg = dA * ub * d
        du = dA * a
        sg = np.abs(dA) * (np.abs(u) + abs(up_bias) + np.abs(ub)) * d_scale
        su = np.abs(dA) * a_scale
    if limit is not None:
        with np.errstate(invalid="ignore"):
            gate_on = (g0 <= limit) | np.isnan(g0)
            up_on = ((u0 >= -limit) & (u0 <= limit)) | np.isnan(u0)
        dg, sg = np.where(gate_on, dg, 0.0), np.where(gate_on, sg, 0.0)
        du, su = np.where(up_on, du, 0.0), np.where(up_on, su, 0.0)
    return _glu_join(dg, du, layout), _glu_join(sg, su, layout)


def combine(x, w=None):
    """moe.combine: (value [T,H], scale [T,H]); slot-order sum."""
    x = np.asarray(x, dtype=np.float64)
    T, k, H = x.shape
    if w is None:
        w = np.ones((T, k))
    w = np.asarray(w, dtype=np.float64)
    val = np.einsum("tk,tkh->th", w, x) if T else np.zeros((0, H))
    scale = np.einsum("tk,tkh->th", np.abs(w), np.abs(x)) if T else np.zeros((0, H))
    return val, scale


def combine_grad(grad, k, w=None):
    """moe.combine_grad: (value [T,k,H], scale [T,k,H]); w[t,j] * grad[t]."""
    g = np.asarray(grad, dtype=np.float64)
    w = np.ones((g.shape[0], k)) if w is None else np.asarray(w, dtype=np.float64)
    val = w[:, :, None] * g[:, None, :]
    return val, np.abs(val)


def row_dot(lhs, rhs, acc=None):
    """moe.row_dot: (value [M], scale [M]); acc[m] + <lhs[m], rhs[m]>."""
    lhs = np.asarray(lhs, dtype=np.float64)
    rhs = np.asarray(rhs, dtype=np.float64)
    a = np.zeros(lhs.shape[0]) if acc is None else np.asarray(acc, dtype=np.float64)
    val = a + np.sum(lhs * rhs, axis=1)
    return val, np.abs(a) + np.sum(np.abs(lhs * rhs), axis=1)


# ----------------------------------------------------------------------------
# Converters
# ----------------------------------------------------------------------------


def indices_to_multihot(indices, probs, E):
    indices = np.asarray(indices, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    T, k = indices.shape
    mh = np.zeros((T, E), dtype=np.int64)
    pm = np.zeros((T, E))
    pos = np.full((T, E), -1, dtype=np.int64)
    for t in range(T):
        for j in range(k):  # later slot wins
            e = indices[t, j]
            if 0 <= e < E:
                mh[t, e] = 1
                pm[t, e] = probs[t, j]
                pos[t, e] = j
    return mh, pm, pos


def multihot_to_indices(pm, pos, k):
    pm = np.asarray(pm, dtype=np.float64)
    pos = np.asarray(pos, dtype=np.int64)
    T, E = pm.shape
    out = np.zeros((T, k))
    for t in range(T):
        for e in range(E):  # higher expert wins
            j = pos[t, e]
            if 0 <= j < k:
                out[t, j] = pm[t, e]
    return out


# ----------------------------------------------------------------------------
# The composite: moe.ffn as the chain of docs/Contract.md section 3
# ----------------------------------------------------------------------------


def ffn(
    x,
    logits,
    w_up,
    w_down,
    F,
    k,
    scoring,
    normalize=False,
    n_group=1,
    topk_group=1,
    group_score="max",
    scaling=1.0,
    bias=None,
    activation="silu",
    layout="concat",
    alpha=1.0,
    limit=None,
    up_bias=0.0,
    transpose_weights=False,
    w_up_bias=None,
    w_down_bias=None,
    weight_format="plain",
    scale_fmt="f32",
    w_up_scale=None,
    w_down_scale=None,
):
    """Returns (y [T,H] (not yet rounded to F), scale [T,H], defined rows [T]).

    `w_up_bias` (E x 2I) and `w_down_bias` (E x H) are the expert biases of
    moe.ffn (expert_bias): the grouped matmuls' biases.

    `weight_format` fp8_block / mxfp4: `w_up`, `w_down` hold the weights'
    bits (E x 2I x H and E x H x I, mxfp4 packed along the last dimension),
    `w_up_scale`, `w_down_scale` their scales, as moe.grouped_matmul's. With
    fp8_block the GLU output is quantized again for the down GEMM: where the
    compiled chain's (slightly different) activations may quantize to other
    e4m3 values, the error scale grows by that (fp8_requantization_error).

    Between the ops of the chain every activation is rounded to F (the
    decomposition's element type); route weights are f32."""
    x = np.asarray(x, dtype=np.float64)
    T, H = x.shape
    E = logits.shape[1]
    u = UNIT[F]
    weights, ids, amb, _, _ = route(
        logits, k, scoring, normalize, n_group, topk_group, group_score, scaling, bias
    )
    lowp = weight_format not in (None, "plain")
    fp8 = weight_format == "fp8_block"
    if lowp:
        w_up = dequantize_weights(w_up, weight_format, w_up_scale)
        w_down = dequantize_weights(w_down, weight_format, w_down_scale)
        transpose_weights = True
    # f32 routing weights (float64 throughout when F is "f64": the
    # self-test's central differences)
    weights = round_to(weights, "f64" if F == "f64" else "f32")
    cs = cumsum(ids, E)
    rev, tok = get_indices(cs, ids)
    off = get_indptr(cs, E, inclusive=False)
    rows = gather(x, tok)
    up, up_scale, _ = grouped_matmul(
        dequantized_lhs(rows, weight_format, scale_fmt),
        w_up,
        off,
        bias=w_up_bias,
        transpose_rhs=transpose_weights,
    )
    up = round_to(up, F)
    # error scale of `up` in units of u: accumulation + rounding
    act, act_scale = glu(
        up, activation, layout, alpha, limit, up_bias, x_scale=up_scale + np.abs(up)
    )
    act = round_to(act, F)
    act_q = dequantized_lhs(act, weight_format, scale_fmt)
    down, _, _ = grouped_matmul(
        act_q, w_down, off, bias=w_down_bias, transpose_rhs=transpose_weights
    )
    act_err = act_scale + np.maximum(np.abs(act), np.abs(act_q))
    if fp8:
        rtol = TOLERANCE[F][0]
        act_err = act_err + (
            fp8_requantization_error(act, rtol * (act_scale + np.abs(act)), scale_fmt == "ue8m0")
            / rtol
        )
    down_scale, _, _ = grouped_matmul(act_err, np.abs(w_down), off, transpose_rhs=transpose_weights)
    down = round_to(down, F)
    down_scale = down_scale + np.abs(down)
    sc = scatter(down, rev).reshape(T, k, H)
    sc_scale = scatter(down_scale, rev).reshape(T, k, H)
    y, _ = combine(sc, weights)
    y_scale, _ = combine(sc_scale, np.abs(weights))
    y_scale = y_scale + np.abs(y)
    del u
    return y, y_scale, ~amb


def ffn_saved(
    x,
    logits,
    w_up,
    F,
    k,
    scoring,
    normalize=False,
    n_group=1,
    topk_group=1,
    group_score="max",
    scaling=1.0,
    bias=None,
    transpose_weights=False,
    w_up_bias=None,
):
    """What moe.ffn_train saves beside y: ({name: value} of h [(T*k), 2I]
    (the up projection's pre-activation incl. w_up_bias, dispatch order,
    not yet rounded to F), h's error scale, weights [T,k] (rounded to f32),
    ids [T,k]; defined rows [T]).  Independent of the compiled chain only
    as far as `ffn` is: the same route / get_indices / grouped_matmul
    pieces of this file."""
    x = np.asarray(x, dtype=np.float64)
    E = logits.shape[1]
    weights, ids, amb, _, _ = route(
        logits, k, scoring, normalize, n_group, topk_group, group_score, scaling, bias
    )
    cs = cumsum(ids, E)
    _, tok = get_indices(cs, ids)
    off = get_indptr(cs, E, inclusive=False)
    up, up_scale, _ = grouped_matmul(
        gather(x, tok), w_up, off, bias=w_up_bias, transpose_rhs=transpose_weights
    )
    return {
        "h": up,
        "h_scale": up_scale,
        "weights": round_to(weights, "f32"),
        "ids": ids,
    }, ~amb


def ffn_grad(
    dy,
    x,
    logits,
    w_up,
    w_down,
    F,
    k,
    scoring,
    normalize=False,
    n_group=1,
    topk_group=1,
    group_score="max",
    scaling=1.0,
    bias=None,
    activation="silu",
    layout="concat",
    alpha=1.0,
    limit=None,
    up_bias=0.0,
    transpose_weights=False,
    w_up_bias=None,
    w_down_bias=None,
):
    """moe.ffn_grad: the VJP of `ffn` (plain weights), written per token and
    slot, not as the compiler's chain.  Returns ({name: (value, scale)} for
    dx [T,H], dlogits [T,E], dw_up, dw_down (the weights' layouts) and, with
    expert biases, dw_up_bias [E,2I], dw_down_bias [E,H]; defined rows [T]).

    For each token t and slot j (expert e, routing weight w) of the forward
    selection: z = x_t W1_e + b1_e and a = glu(z) (rounded to F as `ffn`
    rounds them), g = W2_e dy_t, dweights[t, j] = <g, a> + <dy_t, b2_e>,
    dz = glu_grad(w g, z), dx_t += W1_e dz, dW1_e += x_t dz^T, dW2_e += a
    (w dy_t)^T, db1_e += dz, db2_e += w dy_t; dlogits = route_grad(dweights).
    The selection (top-k, groups, the correction bias) has no gradient.

    Scales: first-order bounds of |error| (as everywhere in this file), the
    absolute values propagated, plus |v| wherever the compiled chain rounds
    a value v to F."""
    x = np.asarray(x, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    T, H = x.shape
    E = logits.shape[1]
    w_up = np.asarray(w_up, dtype=np.float64)
    w_down = np.asarray(w_down, dtype=np.float64)
    # Work in the E x H x 2I / E x I x H layouts.
    W1 = np.transpose(w_up, (0, 2, 1)) if transpose_weights else w_up
    W2 = np.transpose(w_down, (0, 2, 1)) if transpose_weights else w_down
    I2 = W1.shape[2]
    weights, ids, amb, _, _ = route(
        logits, k, scoring, normalize, n_group, topk_group, group_score, scaling, bias
    )
    weights = round_to(weights, "f64" if F == "f64" else "f32")
    b1 = np.zeros((E, I2)) if w_up_bias is None else np.asarray(w_up_bias, dtype=np.float64)
    b2 = np.zeros((E, H)) if w_down_bias is None else np.asarray(w_down_bias, dtype=np.float64)
    glu_args = (activation, layout, alpha, limit, up_bias)
    dx, dx_s = np.zeros((T, H)), np.zeros((T, H))
    dW1, dW1_s = np.zeros(W1.shape), np.zeros(W1.shape)
    dW2, dW2_s = np.zeros(W2.shape), np.zeros(W2.shape)
    db1, db1_s = np.zeros((E, I2)), np.zeros((E, I2))
    db2, db2_s = np.zeros((E, H)), np.zeros((E, H))
    dwts, dwts_s = np.zeros((T, k)), np.zeros((T, k))
    for t in range(T):
        for j in range(k):
            e, w = int(ids[t, j]), weights[t, j]
            z = x[t] @ W1[e] + b1[e]
            z_s = np.abs(x[t]) @ np.abs(W1[e]) + np.abs(b1[e])
            z = round_to(z, F)
            z_s = z_s + np.abs(z)
            a, a_s = glu(z[None, :], *glu_args, x_scale=z_s[None, :])
            a = round_to(a, F)[0]
            a_s = a_s[0] + np.abs(a)
            g = W2[e] @ dy[t]
            g_s = np.abs(W2[e]) @ np.abs(dy[t])
            g = round_to(g, F)
            g_s = g_s + np.abs(g)
            dwts[t, j] = g @ a + dy[t] @ b2[e]
            dwts_s[t, j] = g_s @ np.abs(a) + np.abs(g) @ a_s + np.abs(dy[t]) @ np.abs(b2[e])
            da = round_to(w * g, F)
            da_s = abs(w) * g_s + np.abs(da)
            dz, dz_s = glu_grad(da[None, :], z[None, :], *glu_args)
            # da's error through the (linear in da) GLU gradient
            dz_lin, _ = glu_grad(np.ones_like(da)[None, :], z[None, :], *glu_args)
            halves = _glu_halves(np.abs(dz_lin), layout)
            dz_s = dz_s + _glu_join(halves[0] * da_s, halves[1] * da_s, layout)
            dz = round_to(dz, F)[0]
            dz_s = dz_s[0] + np.abs(dz)
            dxr = W1[e] @ dz
            dxr_s = np.abs(W1[e]) @ dz_s
            dxr = round_to(dxr, F)
            dx[t] += dxr
            dx_s[t] += dxr_s + np.abs(dxr)
            dO = round_to(w * dy[t], F)
            dO_s = abs(w) * np.abs(dy[t]) + np.abs(dO)
            dW1[e] += np.outer(x[t], dz)
            dW1_s[e] += np.outer(np.abs(x[t]), dz_s)
            dW2[e] += np.outer(a, dO)
            dW2_s[e] += np.outer(a_s, np.abs(dO)) + np.outer(np.abs(a), dO_s)
            db1[e] += dz
            db1_s[e] += dz_s
            db2[e] += dO
            db2_s[e] += dO_s
    dx_s = dx_s + np.abs(dx)
    rg = (scoring, normalize, scaling)
    dl, dl_s = route_grad(dwts, logits, ids, *rg) if T else (np.zeros((0, E)),) * 2
    if T:
        dl_s = dl_s + route_grad(dwts_s, logits, ids, *rg)[1]
    if transpose_weights:
        dW1, dW1_s = np.transpose(dW1, (0, 2, 1)), np.transpose(dW1_s, (0, 2, 1))
        dW2, dW2_s = np.transpose(dW2, (0, 2, 1)), np.transpose(dW2_s, (0, 2, 1))
    out = {
        "dx": (dx, dx_s),
        "dlogits": (dl, dl_s),
        "dw_up": (dW1, dW1_s),
        "dw_down": (dW2, dW2_s),
    }
    if w_up_bias is not None:
        out["dw_up_bias"] = (db1, db1_s)
        out["dw_down_bias"] = (db2, db2_s)
    return out, ~amb


# ----------------------------------------------------------------------------
# Self-test
# ----------------------------------------------------------------------------


def _eq(name, got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError("%s: got %s, want %s" % (name, got.tolist(), want.tolist()))


def _close(name, got, want, tol=1e-12):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
        raise AssertionError("%s: got %s, want %s" % (name, got.tolist(), want.tolist()))


def self_test():
    checks = []

    def check(fn):
        checks.append(fn)
        return fn

    @check
    def seed_cumsum_example():
        ids = [[0, 1], [1, 2], [3, 4], [2, 5]]
        cs = cumsum(ids, 6)
        _eq("cumsum", cs, [1, 1, 1, 1, 2, 3, 3, 3, 3, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 7, 8])
        rev, tok = get_indices(cs, ids)
        # expert 0: (0,0); 1: (0,1),(1,0); 2: (1,1),(3,0); 3: (2,0); 4: (2,1); 5: (3,1)
        _eq("get_indices.rev", rev, [0, 1, 2, 3, 6, 4, 5, 7])
        _eq("get_indices.tok", tok, [0, 0, 1, 1, 3, 2, 2, 3])
        _eq("indptr.excl", get_indptr(cs, 6, False), [0, 1, 3, 5, 6, 7, 8])
        _eq("indptr.incl", get_indptr(cs, 6, True), [1, 3, 5, 6, 7, 8])

    @check
    def cumsum_undispatched_and_duplicate():
        # -1 (not local), 7 >= E, and expert 2 twice in row 1.
        ids = [[2, -1], [2, 2], [0, 7]]
        E = 3
        cs = cumsum(ids, E)
        # mask: row0 e2=1; row1 e2=2; row2 e0=1. expert-major: e0:[0,0,1] e1:[0,0,0] e2:[1,2,0]
        _eq("cumsum", cs, [0, 0, 1, 1, 1, 1, 2, 4, 4])
        rev, tok = get_indices(cs, ids)
        # dispatched: pos0 = (2,0)->4 ; e2: (0,0)->0 at pos1; row1 slots 0,1 -> pos 2,3
        # undispatched after, in (b,j) order: (0,1)->1, (2,1)->5
        _eq("rev", rev, [4, 0, 2, 3, 1, 5])
        _eq("tok", tok, [2, 0, 1, 1, 0, 2])
        _eq("perm", sorted(rev.tolist()), list(range(6)))
        _eq("indptr", get_indptr(cs, E, False), [0, 1, 1, 4])

    @check
    def empty_tokens():
        cs = cumsum(np.zeros((0, 2), dtype=np.int64), 4)
        _eq("cumsum T=0", cs, np.zeros(0, dtype=np.int64))
        _eq("indptr T=0", get_indptr(cs, 4, False), [0, 0, 0, 0, 0])
        rev, tok = get_indices(cs, np.zeros((0, 2), dtype=np.int64))
        _eq("rev T=0", rev, np.zeros(0, dtype=np.int64))

    @check
    def multihot_round_trip():
        ids = [[3, -1, 1], [0, 5, 0]]  # E = 4: -1 and 5 ignored, 0 twice (later wins)
        probs = [[0.5, 0.25, 0.125], [1.0, 2.0, 3.0]]
        mh, pm, pos = indices_to_multihot(ids, probs, 4)
        _eq("mh", mh, [[0, 1, 0, 1], [1, 0, 0, 0]])
        _close("pm", pm, [[0, 0.125, 0, 0.5], [3.0, 0, 0, 0]])
        _eq("pos", pos, [[-1, 2, -1, 0], [2, -1, -1, -1]])
        back = multihot_to_indices(pm, pos, 3)
        _close("back", back, [[0.5, 0.0, 0.125], [0.0, 0.0, 3.0]])
        # two experts on one slot: higher expert wins; out-of-range slots dropped
        back2 = multihot_to_indices([[1.0, 2.0, 4.0]], [[0, 0, 3]], 2)
        _close("back2", back2, [[2.0, 0.0]])

    @check
    def topk_ties_nan():
        x = [[1.0, np.nan, 3.0, 3.0, -np.inf], [np.nan, np.nan, -np.inf, 0.0, -0.0]]
        v, i = topk(x, 5)
        _eq("ids", i, [[2, 3, 0, 4, 1], [3, 4, 2, 0, 1]])
        _close("vals", v, [[3, 3, 1, -np.inf, np.nan], [0, 0, -np.inf, np.nan, np.nan]])

    @check
    def route_softmax():
        lg = np.array([[1.0, 2.0, 3.0, 4.0]])
        w, ids, _, s, _ = route(lg, 2, "softmax", normalize=True)
        e = np.exp(lg[0] - 4.0)
        p = e / e.sum()
        _eq("ids", ids, [[3, 2]])
        _close("w", w, [[p[3] / (p[3] + p[2]), p[2] / (p[3] + p[2])]])
        w, ids, _, _, _ = route(lg, 2, "softmax", normalize=False, scaling=2.0)
        _close("w nonorm", w, [[2 * p[3], 2 * p[2]]])

    @check
    def route_nonfinite():
        # all -inf/NaN row: zero weights, distinct ids 0..k-1 (ties lower index)
        lg = np.array([[-np.inf, np.nan, -np.inf], [np.inf, 0.0, np.inf], [np.nan, 1.0, 1.0]])
        w, ids, _, _, _ = route(lg, 2, "softmax", normalize=True)
        _eq("ids", ids, [[0, 1], [0, 2], [1, 2]])
        _close("w", w, [[0, 0], [0.5, 0.5], [0.5, 0.5]])
        w, ids, _, _, _ = route(lg, 2, "sigmoid", normalize=False)
        _eq("ids sig", ids, [[0, 1], [0, 2], [1, 2]])
        _close("w sig", w, [[0, 0], [1, 1], [1 / (1 + math.exp(-1))] * 2])

    @check
    def route_groups():
        # E=6, 3 groups of 2. c = sigmoid + bias
        lg = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
        bias = np.array([0.1, 0.0, 0.0, 0.3, 0.05, 0.04])
        # c = .6,.5,.5,.8,.55,.54 ; max: g0=.6 g1=.8 g2=.55 -> keep g1,g0
        w, ids, _, _, _ = route(
            lg, 2, "sigmoid", normalize=True, n_group=3, topk_group=2, group_score="max", bias=bias
        )
        _eq("ids max", ids, [[3, 0]])
        _close("w max", w, [[0.5, 0.5]])
        # top2_sum: g0=1.1 g1=1.3 g2=1.09 -> keep g1,g0 ; k=3 -> 3,0,1? c[1]=.5=c[2]: 2 excluded? g1={2,3}
        w, ids, _, _, _ = route(
            lg,
            3,
            "sigmoid",
            normalize=False,
            n_group=3,
            topk_group=2,
            group_score="top2_sum",
            bias=bias,
            scaling=2.0,
        )
        _eq("ids top2", ids, [[3, 0, 1]])
        _close("w top2", w, [[1.0, 1.0, 1.0]])
        # group ties -> lower group index
        w, ids, _, _, _ = route(lg, 2, "softmax", n_group=3, topk_group=1)
        _eq("ids tie", ids, [[0, 1]])

    @check
    def route_acceptance():
        c = [0.5, 0.5 + 1e-9, 0.2]
        assert route_ids_acceptable(c, c, [1, 0], 2, 1, 1, "max")
        assert route_ids_acceptable(c, c, [0, 1], 2, 1, 1, "max")
        c2 = [0.5, 0.5, 0.2]
        assert not route_ids_acceptable(c2, c2, [1, 0], 2, 1, 1, "max")
        assert not route_ids_acceptable(c2, c2, [0, 0], 2, 1, 1, "max")

    @check
    def grouped_matmul_offsets():
        lhs = np.arange(10, dtype=np.float64).reshape(5, 2)
        rhs = np.stack([np.eye(2), 2 * np.eye(2), 3 * np.eye(2)])
        out, _, d = grouped_matmul(lhs, rhs, [0, 2, 2, 4])  # expert 1 empty, row 4 outside
        _close("gmm", out, [[0, 1], [2, 3], [12, 15], [18, 21], [0, 0]])
        assert d.all()
        out, _, d = grouped_matmul(lhs, rhs, [-3, 1, 1, 99])  # clamped to [0,1,1,5]
        _close("gmm clamp", out, [[0, 1], [6, 9], [12, 15], [18, 21], [24, 27]])
        out, _, d = grouped_matmul(lhs, rhs, [0, 3, 1, 1])  # decreasing pair
        assert d.tolist() == [True, False, False, True, True]
        bias = np.array([[1.0, -1.0], [0, 0], [0.5, 0.5]])
        out, _, _ = grouped_matmul(
            lhs, np.transpose(rhs, (0, 2, 1)), [0, 1, 1, 2], bias=bias, transpose_rhs=True
        )
        _close("gmm T", out, [[1, 0], [6.5, 9.5], [0, 0], [0, 0], [0, 0]])

    @check
    def grouped_matmul_wgrad_is_the_weights_vjp():
        # <dY, grouped_matmul(X, W)> is linear in W: its gradient is
        # wgrad(X, dY) (wgrad(dY, X) for the transposed layout), checked on
        # a random direction V; empty, clamped and decreasing groups too.
        rng = np.random.default_rng(5)
        for off in ([0, 2, 2, 5, 7], [-3, 1, 4, 4, 99], [0, 4, 1, 6, 7]):
            x, dy = rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
            v = rng.normal(size=(4, 3, 2))
            y, _, d = grouped_matmul(x, v, off)
            want = np.sum((dy * y)[d])
            if sorted(off) == list(off):  # monotone: every row defined
                got, _ = grouped_matmul_wgrad(x, dy, off)
                assert abs(np.sum(got * v) - want) < 1e-9, off
                got, _ = grouped_matmul_wgrad(dy, x, off)  # x @ w^T layout
                yt, _, _ = grouped_matmul(x, np.transpose(v, (0, 2, 1)), off, transpose_rhs=True)
                assert abs(np.sum(got * np.transpose(v, (0, 2, 1))) - np.sum(dy * yt)) < 1e-9
        got, _ = grouped_matmul_wgrad(
            np.ones((3, 1)), np.ones((3, 1)), [2, 1, 3], np.full((2, 1, 1), 0.5)
        )
        _close("wgrad decreasing + acc", got[:, 0, 0], [0.5, 2.5])

    @check
    def combine_grad_is_the_inputs_vjp():
        # <g, combine(v, w)> = <combine_grad(g, w), v> for every v.
        rng = np.random.default_rng(6)
        g, v, w = rng.normal(size=(5, 3)), rng.normal(size=(5, 2, 3)), rng.normal(size=(5, 2))
        for ww in (w, None):
            lhs = np.sum(g * combine(v, ww)[0])
            assert abs(lhs - np.sum(combine_grad(g, 2, ww)[0] * v)) < 1e-12

    @check
    def route_grad_vs_finite_differences():
        # <g, weights(logits)> for a fixed selection (what moe.route computes
        # after its top-k): central differences against route_grad.
        rng = np.random.default_rng(7)

        def weights(x, ids, scoring, normalize, scaling):
            s = scores(x[None, :], scoring)[0]
            sel = [s[i] for i in ids if 0 <= i < len(s)]
            S = sum(sel)
            d = S if normalize and S > 0 else 1.0
            return np.array([scaling * v / d for v in sel])

        for scoring in ("softmax", "sigmoid"):
            for normalize in (False, True):
                x = rng.normal(0, 2, size=6)
                ids = [4, 1, -1, 2]
                g = rng.normal(size=3)  # the valid picks' gradients
                gfull = np.array([g[0], g[1], 9.0, g[2]])  # the -1 pick's is ignored
                got, _ = route_grad(gfull[None, :], x[None, :], [ids], scoring, normalize, 2.5)
                want = np.zeros(6)
                for e in range(6):
                    xp, xm = x.copy(), x.copy()
                    xp[e] += 1e-6
                    xm[e] -= 1e-6
                    fp = g @ weights(xp, ids, scoring, normalize, 2.5)
                    fm = g @ weights(xm, ids, scoring, normalize, 2.5)
                    want[e] = (fp - fm) / 2e-6
                assert np.allclose(got[0], want, rtol=1e-6, atol=1e-8), (scoring, normalize)

    @check
    def glu_variants():
        x = np.array([[1.0, -2.0, 3.0, 0.5]])
        v, _ = glu(x, "silu", "concat")
        sil = lambda a, al=1.0: a / (1 + math.exp(-al * a))
        _close("silu concat", v, [[sil(1.0) * 3.0, sil(-2.0) * 0.5]])
        v, _ = glu(x, "silu", "interleaved", alpha=1.702, limit=2.5, up_bias=1.0)
        _close("swiglu", v, [[sil(1.0, 1.702) * (-2.0 + 1.0), sil(2.5, 1.702) * (0.5 + 1.0)]])
        v, _ = glu(x, "gelu", "concat")
        ge = lambda a: 0.5 * a * (1 + math.erf(a / math.sqrt(2)))
        _close("gelu", v, [[ge(1.0) * 3.0, ge(-2.0) * 0.5]])
        v, _ = glu(x, "gelu_tanh", "concat")
        gt = lambda a: 0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))
        _close("gelu_tanh", v, [[gt(1.0) * 3.0, gt(-2.0) * 0.5]])
        v, _ = glu(np.array([[9.0, -9.0]]), "silu", "concat", limit=7.0)
        _close("limit", v, [[sil(7.0) * -7.0]])

    @check
    def glu_grad_vs_finite_differences():
        # glu_grad is the vector-Jacobian product of glu: central differences
        # of <dA, glu(x)> in float64, away from the clamp's kinks.
        rng = np.random.default_rng(3)
        for act in ("silu", "gelu", "gelu_tanh"):
            for layout in ("concat", "interleaved"):
                for kw in ({}, {"alpha": 1.702, "limit": 7.0, "up_bias": 1.0}, {"limit": 1.5}):
                    x = rng.uniform(-9, 9, (3, 8))
                    if "limit" in kw:
                        x[np.abs(np.abs(x) - kw["limit"]) < 1e-3] += 0.01
                    dA = rng.normal(size=(3, 4))
                    got, _ = glu_grad(dA, x, act, layout, **kw)
                    want = np.zeros_like(x)
                    h = 1e-6
                    for i in np.ndindex(x.shape):
                        xp, xm = x.copy(), x.copy()
                        xp[i] += h
                        xm[i] -= h
                        fp = np.sum(dA * glu(xp, act, layout, **kw)[0])
                        fm = np.sum(dA * glu(xm, act, layout, **kw)[0])
                        want[i] = (fp - fm) / (2 * h)
                    assert np.allclose(got, want, rtol=1e-6, atol=1e-7), (
                        act,
                        layout,
                        kw,
                        got,
                        want,
                    )
        # The clamp passes the gradient inside its closed interval only:
        # gate 9 > 7 none, gate 7 and up -7 at the edges do, up 9 none.
        x = np.array([[9.0, 7.0, 9.0, -7.0]])
        got, _ = glu_grad(np.array([[1.0, 1.0]]), x, "silu", "concat", limit=7.0)
        sg = 1 / (1 + math.exp(-7.0))
        _close("clamp", got, [[0.0, -7.0 * (sg + 7.0 * sg * (1 - sg)), 0.0, 7.0 * sg]])

    @check
    def gather_scatter_combine():
        x = np.array([[1.0, 2.0], [3.0, 4.0]])
        _close("gather", gather(x, [1, -1, 2, 0]), [[3, 4], [0, 0], [0, 0], [1, 2]])
        _close("scatter", scatter(x, [1, 1]), [[0, 0], [3, 4]])
        _close("scatter drop", scatter(x, [5, -1]), [[0, 0], [0, 0]])
        v, _ = combine(np.array([[[1.0, 2.0], [3.0, 4.0]]]), [[0.5, 2.0]])
        _close("combine", v, [[6.5, 9.0]])

    @check
    def rounding():
        _close(
            "bf16 rne",
            round_to([1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-8 + 2**-20], "bf16"),
            [1.0, 1.0 + 2**-6, 1.0 + 2**-7],
        )
        assert to_bytes(np.array([1.0]), "bf16") == b"\x80\x3f"
        assert to_bytes(np.array([1.0]), "f32") == b"\x00\x00\x80\x3f"
        assert np.isnan(round_to([np.nan], "bf16")[0])
        _close("f16", round_to([1.0 + 2**-11], "f16"), [1.0])
        _close("bf16 ovf", round_to([3.4e38], "bf16"), [np.inf])

    @check
    def ffn_chain_small():
        # T=2, H=2, E=2, I=1, k=1, softmax normalize: each token goes to argmax.
        x = np.array([[1.0, 2.0], [3.0, -1.0]])
        lg = np.array([[0.0, 1.0], [2.0, 0.0]])
        w_up = np.array([[[1.0, 0.0], [0.0, 1.0]], [[2.0, 1.0], [0.0, 1.0]]])  # E x H x 2I
        w_dn = np.array([[[1.0, 1.0]], [[1.0, -1.0]]])  # E x I x H
        y, _, d = ffn(
            x,
            lg,
            w_up,
            w_dn,
            "f32",
            1,
            "softmax",
            normalize=True,
            activation="silu",
            layout="concat",
        )
        sil = lambda a: a / (1 + math.exp(-a))
        # token 0 -> expert 1: h = [2, 1+2=3]; act = silu(2)*3
        a0 = sil(2.0) * 3.0
        # token 1 -> expert 0: h = [3, -1]; act = silu(3)*-1
        a1 = sil(3.0) * -1.0
        _close("ffn", y, [[a0, -a0], [a1, a1]], tol=1e-6)
        assert d.all()

    @check
    def ffn_grad_vs_finite_differences():
        # <dy, ffn(...)> in float64 (F = "f64": no rounding) by central
        # differences in every input, against ffn_grad, for a fixed
        # selection (logits without near ties, steps far below the gaps).
        configs = [
            dict(scoring="softmax", normalize=True),
            dict(scoring="softmax", normalize=False, activation="gelu"),
            dict(
                scoring="sigmoid",
                normalize=True,
                n_group=2,
                topk_group=1,
                group_score="top2_sum",
                scaling=2.5,
                bias=True,
                activation="gelu_tanh",
            ),
            dict(scoring="softmax", normalize=True, expert_bias=True, layout="interleaved"),
            dict(
                scoring="softmax",
                normalize=False,
                alpha=1.702,
                limit=0.9,
                up_bias=1.0,
                layout="interleaved",
                transpose_weights=True,
                expert_bias=True,
            ),
            dict(
                scoring="sigmoid", normalize=False, n_group=2, topk_group=2, transpose_weights=True
            ),
        ]
        for ci, cfg in enumerate(configs):
            rng = np.random.default_rng(100 + ci)
            cfg = dict(cfg)
            T, H, I, E, k = 3, 3, 2, 4, 2
            tw = cfg.pop("transpose_weights", False)
            eb = cfg.pop("expert_bias", False)
            has_bias = cfg.pop("bias", False)
            x = rng.normal(size=(T, H))
            lg = rng.normal(0, 2, size=(T, E))
            wu = rng.normal(0, 0.8, size=(E, 2 * I, H) if tw else (E, H, 2 * I))
            wd = rng.normal(0, 0.8, size=(E, H, I) if tw else (E, I, H))
            bu = rng.normal(0, 0.5, size=(E, 2 * I)) if eb else None
            bd = rng.normal(0, 0.5, size=(E, H)) if eb else None
            rb = rng.normal(0, 0.3, size=E) if has_bias else None
            dy = rng.normal(size=(T, H))
            kw = dict(cfg, transpose_weights=tw, bias=rb)

            def f(x, lg, wu, wd, bu, bd):
                y, _, _ = ffn(x, lg, wu, wd, "f64", k, w_up_bias=bu, w_down_bias=bd, **kw)
                return float(np.sum(dy * y))

            got, defined = ffn_grad(dy, x, lg, wu, wd, "f64", k, w_up_bias=bu, w_down_bias=bd, **kw)
            assert defined.all(), ci
            args = [x, lg, wu, wd, bu, bd]
            names = ["dx", "dlogits", "dw_up", "dw_down", "dw_up_bias", "dw_down_bias"]
            for ai, name in enumerate(names):
                if args[ai] is None:
                    assert name not in got
                    continue
                want = np.zeros(args[ai].shape)
                for idx in np.ndindex(*args[ai].shape):
                    plus = [a if a is None else a.copy() for a in args]
                    minus = [a if a is None else a.copy() for a in args]
                    plus[ai][idx] += 1e-6
                    minus[ai][idx] -= 1e-6
                    want[idx] = (f(*plus) - f(*minus)) / 2e-6
                assert np.allclose(got[name][0], want, rtol=1e-5, atol=1e-7), (
                    ci,
                    name,
                    got[name][0].tolist(),
                    want.tolist(),
                )
                assert (got[name][1] >= np.abs(got[name][0]) - 1e-12).all(), (ci, name)

    @check
    def e4m3_e2m1_e8m0_decoding():
        _close(
            "e4m3",
            decode_e4m3([0x00, 0x80, 0x01, 0x07, 0x08, 0x38, 0x39, 0x7E, 0xFE, 0xB8, 0x7F, 0xFF]),
            [0, 0, 2**-9, 7 * 2**-9, 2**-6, 1, 1.125, 448, -448, -1, np.nan, np.nan],
        )
        assert np.signbit(decode_e4m3(0x80))
        _eq("e4m3 finite", int(np.isfinite(E4M3).sum()), 254)
        _eq(
            "encode",
            encode_e4m3([0.0, -0.0, 2**-9, 448.0, -1.0, np.nan]),
            [0, 128, 1, 126, 184, 127],
        )
        _close("e2m1", E2M1, [0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6])
        _eq("unpack", unpack_e2m1([[0x1F, 0xA0]]), [[15, 1, 0, 10]])
        _eq("pack", pack_e2m1([[15, 1, 0, 10]]), [[0x1F, 0xA0]])
        _close(
            "e8m0",
            decode_e8m0([0, 1, 127, 128, 254, 255]),
            [2**-127, 2**-126, 1, 2, 2**127, np.nan],
        )

    @check
    def e4m3_rounding():
        _close(
            "rne",
            round_to_e4m3(
                [
                    1.0625,
                    1.1875,
                    1.0625 + 2**-20,
                    464.0,
                    1e9,
                    -500.0,
                    2**-10,
                    3 * 2**-10,
                    15 * 2**-10,
                ]
            ),
            [1.0, 1.25, 1.125, 448, 448, -448, 0.0, 2**-8, 2**-6],
        )
        _close("nan", round_to_e4m3([np.nan, np.inf, -np.inf]), [np.nan, 448, -448])
        assert np.signbit(round_to_e4m3(-(2.0**-12)))  # -0
        try:
            import ml_dtypes
        except ImportError:
            print("     (ml_dtypes absent: no cross-check of the e4m3 / e8m0 tables)")
            return
        bits = np.arange(256, dtype=np.uint8)
        _close("ml_dtypes e4m3", bits.view(ml_dtypes.float8_e4m3fn).astype(np.float64), E4M3)
        _close(
            "ml_dtypes e8m0",
            bits.view(ml_dtypes.float8_e8m0fnu).astype(np.float64),
            decode_e8m0(bits),
        )
        # Rounding from f32: every midpoint and its f32 neighbours, random values.
        fin = E4M3[np.isfinite(E4M3)]
        mids = np.unique(np.concatenate([fin, (np.sort(fin)[1:] + np.sort(fin)[:-1]) / 2]))
        mids = mids[np.abs(mids) <= 448].astype(np.float32)
        rng = np.random.default_rng(1)
        v = np.concatenate(
            [
                mids,
                np.nextafter(mids, np.float32(np.inf)),
                np.nextafter(mids, np.float32(-np.inf)),
                (rng.standard_normal(20000) * np.exp2(rng.uniform(-14, 9, 20000))).astype(
                    np.float32
                ),
            ]
        )
        v = v[np.abs(v) <= 448]
        _close(
            "vs ml_dtypes",
            round_to_e4m3(v),
            v.astype(ml_dtypes.float8_e4m3fn).astype(np.float64),
            0,
        )

    @check
    def fp8_activation_quantization():
        q, s = quantize_rows_fp8([[1.0, -0.5, 0.0], [0.0, 0.0, 0.0], [56.0, 1.0, -3.0]], False)
        s0 = float(np.float32(1.0) / np.float32(448))
        _close("s", s[:, 0], [s0, float(np.float32(1e-4) / np.float32(448)), 0.125])
        _close("q", q, [[448, -224, 0], [0, 0, 0], [448, 8, -24]])
        q, s = quantize_rows_fp8([[1.0, -0.5, 0.0], [56.0, 1.0, -3.0]], True)
        _close("s ue8m0", s[:, 0], [2**-8, 0.125])  # up to a power of two; exact ones stay
        _close("q ue8m0", q, [[256, -128, 0], [448, 8, -24]])
        # 300 columns: groups [0,128), [128,256), [256,300); NaN spoils its group only.
        x = np.zeros((1, 300))
        x[0, 5], x[0, 130], x[0, 299] = 2.0, np.nan, -4.0
        q, s = quantize_rows_fp8(x, False)
        assert s.shape == (1, 3) and np.isnan(s[0, 1]) and np.isnan(q[0, 128:256]).all()
        _close("groups", [q[0, 5], q[0, 299], s[0, 2]], [448, -448, float(np.float32(4) / 448)])
        # x / s rounds: 1 / (3/448) = 149.33 -> 144 (quantum 16 in [128, 256)).
        q, s = quantize_rows_fp8([[1.0, 3.0]], False)
        _close("q rne", q, [[144, 448]])

    @check
    def low_precision_gemms():
        # fp8_block: w = [1, 2] (0x38, 0x40), block scale 0.5; the row above.
        s3 = float(np.float32(3) / np.float32(448))
        v, _, d, care = grouped_matmul_lowp(
            [[1.0, 3.0]], [[[0x38, 0x40]]], [0, 1], [[[0.5]]], "fp8_block"
        )
        _close("fp8", v, [[(144 * 1 + 448 * 2) * s3 * 0.5]])
        assert d.all() and care.all()
        # mxfp4: 32 ones times codes 2 (1.0), one 15 (-6.0) at k = 1; scale 2^1.
        w = np.full((2, 1, 16), 0x22)
        w[:, 0, 0] = 0xF2
        sc = np.array([[[128]], [[255]]])
        v, _, _, care = grouped_matmul_lowp(np.ones((2, 32)), w, [0, 1, 2], sc, "mxfp4")
        _close("mxfp4", v, [[(31 - 6) * 2.0], [np.nan]])
        assert care.all()
        # Scale 254: finite in exact arithmetic for a tiny row, else overflowing (not compared).
        lhs = np.array([[2.0**-100] * 32, [1.0] * 32])
        v, _, _, care = grouped_matmul_lowp(
            lhs, np.full((1, 1, 16), 0x77), [0, 2], [[[254]]], "mxfp4"
        )
        _close("254", v[0], [32 * 6 * 2.0**27])
        _eq("254 care", care[:, 0], [True, False])
        # fp8_block weights: blocks of 128 x 128 along N and K.
        w = np.full((1, 130, 130), 0x38)
        rs = np.array([[[1.0, 2.0], [4.0, 8.0]]])
        wd = dequantize_weights(w, "fp8_block", rs)
        _close("blocks", [wd[0, 0, 0], wd[0, 0, 128], wd[0, 129, 0], wd[0, 129, 129]], [1, 2, 4, 8])
        x = np.array([[1.0, 2.0, 3.0]])
        _close("requant 0", fp8_requantization_error(x, np.zeros_like(x), True), [[0, 0, 0]])

    @check
    def ffn_low_precision_chain():
        # mxfp4 = plain with the dequantized weights; fp8_block: token by
        # token, activations quantized before each GEMM (k = 1, normalized).
        rng = np.random.default_rng(0)
        T, H, I, E = 3, 32, 32, 2
        x = round_to(rng.normal(size=(T, H)), "bf16")
        lg = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5]])
        wu, wd = rng.integers(0, 256, (E, 2 * I, H // 2)), rng.integers(0, 256, (E, H, I // 2))
        su, sd = (
            rng.integers(120, 126, (E, 2 * I, H // 32)),
            rng.integers(120, 126, (E, H, I // 32)),
        )
        kw = dict(normalize=True, activation="silu", layout="interleaved", limit=7.0)
        y, _, _ = ffn(
            x,
            lg,
            wu,
            wd,
            "bf16",
            1,
            "softmax",
            weight_format="mxfp4",
            w_up_scale=su,
            w_down_scale=sd,
            **kw,
        )
        y2, _, _ = ffn(
            x,
            lg,
            dequantize_weights(wu, "mxfp4", su),
            dequantize_weights(wd, "mxfp4", sd),
            "bf16",
            1,
            "softmax",
            transpose_weights=True,
            **kw,
        )
        _close("mxfp4 ffn", y, y2)
        wu = encode_e4m3(round_to_e4m3(rng.normal(0, 50, (E, 2 * I, H))))
        wd = encode_e4m3(round_to_e4m3(rng.normal(0, 50, (E, H, I))))
        su, sd = np.full((E, 1, 1), 0.01), np.full((E, 1, 1), 0.02)
        y, _, _ = ffn(
            x,
            lg,
            wu,
            wd,
            "bf16",
            1,
            "softmax",
            weight_format="fp8_block",
            scale_fmt="ue8m0",
            w_up_scale=su,
            w_down_scale=sd,
            **kw,
        )
        for t, e in enumerate([0, 1, 0]):
            up = dequantized_lhs(x[t : t + 1], "fp8_block", "ue8m0") @ (decode_e4m3(wu[e]) * 0.01).T
            act = round_to(glu(round_to(up, "bf16"), "silu", "interleaved", limit=7.0)[0], "bf16")
            dn = dequantized_lhs(act, "fp8_block", "ue8m0") @ (decode_e4m3(wd[e]) * 0.02).T
            _close("fp8 ffn token %d" % t, y[t], round_to(dn, "bf16")[0])

    failed = 0
    for fn in checks:
        try:
            fn()
            print("PASS %s" % fn.__name__)
        except AssertionError as ex:  # pragma: no cover
            failed += 1
            print("FAIL %s: %s" % (fn.__name__, ex))
    print("%d passed, %d failed" % (len(checks) - failed, failed))
    return failed == 0


if __name__ == "__main__":
    if "--self-test" in sys.argv[1:]:
        sys.exit(0 if self_test() else 1)
    print(__doc__)
