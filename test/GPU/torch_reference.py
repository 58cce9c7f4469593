#!/usr/bin/env python3
"""Torch reference of the public moe ops, the fused ops and moe.ffn.

Written from docs/Contract.md and the op reference; it shares nothing with
the compiler. Everything is computed in float32 on the tensors' device from
the f32 / bf16 / f16 inputs (GEMMs in true f32: call configure_precision()
first, which turns TF32 and reduced-precision reductions off). Routing math
(softmax, sigmoid, bias, group scores, normalisation) is f32, exactly as
moe.route's description says:

  * NaN logits count as -inf, +inf as the largest finite f32;
  * a row whose scores are all zero gets weights 0, never NaN, and distinct
    ids (the lowest-index allowed experts);
  * ties: the lower expert / group index first (stable sorts, -0.0 == 0.0);
  * ids outside [0, E) are not dispatched (cumsum / get_indices / dispatch /
    indices_to_multihot), gather / scatter indices out of range give zero
    rows / drop rows, later rows / slots / higher experts win collisions as
    MoeOps.td says.

`ffn()` is the chain of docs/Contract.md section 3 for whole layers (per-expert f32 GEMMs;
intermediates rounded to the layer's element type where the unfused chain
rounds them), with a `rows=` subset for huge T and an `ids=` override to
follow a routing that broke a near tie the other way.

`self_check()` compares every function here with the float64 numpy reference
(reference.py) on the small random cases of gpu_cases.py; run it on the GPU
machine: `python3 torch_reference.py` (or it runs first in run_gpu_checks.py).
"""

import math
import sys

import torch

FLT_MAX = float(torch.finfo(torch.float32).max)
INF = float("inf")
NEAR_TIE = 1e-5  # score gap below which f32 may order two experts either way

DTYPES = {
    "f32": torch.float32,
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "i32": torch.int32,
    "i64": torch.int64,
    "i1": torch.bool,
}


def configure_precision():
    """True f32 GEMMs: no TF32 (through the new fp32_precision API where
    torch has it, else the legacy flags; mixing the two is an error in
    recent torch). self_check() verifies the result."""
    m = torch.backends.cuda.matmul
    done = False
    if hasattr(m, "fp32_precision"):
        try:
            m.fp32_precision = "ieee"
            done = True
        except Exception:  # noqa: BLE001
            done = False
    if not done:
        for fn in (
            lambda: setattr(m, "allow_tf32", False),
            lambda: torch.set_float32_matmul_precision("highest"),
        ):
            try:
                fn()
            except Exception:  # noqa: BLE001
                pass


def f32_gemm_error(device="cuda"):
    """Relative error of a torch f32 GEMM against float64 (TF32: ~1e-3)."""
    g = torch.Generator(device=device).manual_seed(3)
    a = torch.randn(256, 1024, generator=g, device=device)
    b = torch.randn(1024, 256, generator=g, device=device)
    ref = a.double() @ b.double()
    return float((a @ b).double().sub(ref).norm() / ref.norm())


# ----------------------------------------------------------------------------
# Ordering helpers
# ----------------------------------------------------------------------------


def desc_order(keys, valid=None):
    """Per row: the column order by (valid first, key descending, lower
    index first). `keys` is f32 without NaN."""
    k = keys.float() + 0.0  # -0.0 -> +0.0 so a radix sort cannot split them
    order = torch.sort(k, dim=-1, descending=True, stable=True).indices
    if valid is not None:
        v = torch.gather(valid, -1, order)
        order = torch.gather(
            order, -1, torch.sort((~v).to(torch.int32), dim=-1, stable=True).indices
        )
    return order


# ----------------------------------------------------------------------------
# Routing
# ----------------------------------------------------------------------------


def topk(x, k):
    """moe.topk: (values in x's dtype, ids i32); NaN below -inf, ties lower index."""
    xf = x.float()
    nan = torch.isnan(xf)
    order = desc_order(torch.where(nan, torch.full_like(xf, -INF), xf), ~nan)[:, :k]
    return torch.gather(x, 1, order), order.to(torch.int32)


def sanitize_logits(logits):
    x = logits.float()
    x = torch.where(torch.isnan(x), torch.full_like(x, -INF), x)
    return torch.where(x == INF, torch.full_like(x, FLT_MAX), x)


def scores(logits, scoring):
    x = sanitize_logits(logits)
    if scoring == "sigmoid":
        return torch.sigmoid(x)
    if scoring != "softmax":
        raise ValueError(scoring)
    if x.shape[0] == 0:
        return x.clone()
    m = x.amax(dim=1, keepdim=True)
    dead = m == -INF
    e = torch.exp(x - torch.where(dead, torch.zeros_like(m), m))
    s = e / e.sum(dim=1, keepdim=True)
    return torch.where(dead, torch.zeros_like(s), s)


class RouteResult:
    """weights f32 [T,k], ids i32 [T,k], s / c f32 [T,E]; boundary_gap: the
    gap between the k-th and (k+1)-th allowed score (and between the kept
    and the first dropped group), min_gap: the smallest gap between adjacent
    selected scores or at that boundary (inf when there is none); dead: rows
    whose scores are all zero (their ties must follow the lower-index rule)."""

    def __init__(self, weights, ids, s, c, boundary_gap, min_gap, dead):
        self.weights = weights
        self.ids = ids
        self.s = s
        self.c = c
        self.boundary_gap = boundary_gap
        self.min_gap = min_gap
        self.dead = dead


def weights_at(s, ids, normalize, scaling):
    w = torch.gather(s, 1, ids.long())
    if normalize:
        tot = w.sum(dim=1, keepdim=True)
        w = torch.where(tot > 0, w / torch.where(tot > 0, tot, torch.ones_like(tot)), w)
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
    """moe.route (its description, steps 1-6) in f32."""
    s = scores(logits, scoring)
    c = s + bias.float()[None, :] if bias is not None else s
    T, E = c.shape
    dev = c.device
    allowed = None
    group_gap = torch.full((T,), INF, device=dev)
    n_allowed = E
    if n_group > 1:
        g = E // n_group
        top = torch.sort(c.view(T, n_group, g), dim=2, descending=True).values
        gs = top[..., 0] if group_score == "max" else top[..., 0] + top[..., 1]
        gorder = desc_order(gs)
        kept = gorder[:, :topk_group]
        gmask = torch.zeros((T, n_group), dtype=torch.bool, device=dev)
        gmask.scatter_(1, kept, torch.ones_like(kept, dtype=torch.bool))
        allowed = gmask.repeat_interleave(g, dim=1)
        n_allowed = topk_group * g
        if topk_group < n_group and T:
            gsorted = torch.gather(gs, 1, gorder)
            group_gap = gsorted[:, topk_group - 1] - gsorted[:, topk_group]
    order = desc_order(c, allowed)
    ids = order[:, :k]
    csorted = torch.gather(c, 1, order)
    width = min(k + 1, n_allowed)
    if T and width > 1:
        gaps = csorted[:, : width - 1] - csorted[:, 1:width]
    else:
        gaps = torch.full((T, 1), INF, device=dev)
    if k < n_allowed and T:
        bgap = gaps[:, k - 1]
    else:
        bgap = torch.full((T,), INF, device=dev)
    boundary_gap = torch.minimum(bgap, group_gap)
    min_gap = torch.minimum(
        gaps.min(dim=1).values if gaps.numel() else torch.full((T,), INF, device=dev), group_gap
    )
    dead = (s == 0).all(dim=1) if E else torch.ones(T, dtype=torch.bool, device=dev)
    w = weights_at(s, ids, normalize, scaling)
    return RouteResult(w, ids.to(torch.int32), s, c, boundary_gap, min_gap, dead)


# ----------------------------------------------------------------------------
# Dispatch metadata
# ----------------------------------------------------------------------------


def _valid_ids(ids, E):
    e = ids.long()
    return e, (e >= 0) & (e < E)


def cumsum(ids, E):
    """moe.cumsum: inclusive prefix sum of the T x E slot-count mask, expert-major."""
    T = ids.shape[0]
    e, valid = _valid_ids(ids, E)
    mask = torch.zeros((T, E), dtype=torch.int64, device=ids.device)
    mask.scatter_add_(1, torch.where(valid, e, torch.zeros_like(e)), valid.long())
    return torch.cumsum(mask.t().reshape(-1), 0).to(torch.int32)


def get_indices(cs, ids):
    """moe.get_indices from a cumsum and its ids (its description)."""
    T, k = ids.shape
    dev = ids.device
    if T == 0:
        z = torch.zeros(0, dtype=torch.int32, device=dev)
        return z, z.clone()
    E = cs.numel() // T
    e, valid = _valid_ids(ids, E)
    b = torch.arange(T, device=dev)[:, None].expand(T, k)
    p = cs.long()[(torch.where(valid, e, torch.zeros_like(e)) * T + b).reshape(-1)].view(T, k) - 1
    same = e[:, :, None] == e[:, None, :]
    later = torch.ones((k, k), dtype=torch.bool, device=dev).triu(1)
    pos = p - (same & later).sum(dim=2)
    vflat = valid.reshape(-1)
    nd = int(vflat.sum())
    inv_rank = torch.cumsum((~vflat).long(), 0) - 1
    pos = torch.where(vflat, pos.reshape(-1), nd + inv_rank)
    if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= T * k):
        raise ValueError("get_indices: cumsum does not belong to these ids")
    slot = torch.arange(T * k, device=dev)
    rev = torch.full((T * k,), -1, dtype=torch.int64, device=dev)
    rev[pos] = slot
    return rev.to(torch.int32), (rev // k).to(torch.int32)


def get_indptr(cs, E, inclusive=False, dtype=torch.int32):
    T = cs.numel() // E
    if T:
        ends = cs.long().view(E, T)[:, -1]
    else:
        ends = torch.zeros(E, dtype=torch.int64, device=cs.device)
    if not inclusive:
        ends = torch.cat([torch.zeros(1, dtype=torch.int64, device=cs.device), ends])
    return ends.to(dtype)


def dispatch(ids, E):
    """moe.dispatch: (offsets i32 [E+1], reverse_indices, token_indices) by a
    stable counting sort of the (b, j) slots; out-of-range ids last."""
    T, k = ids.shape
    e, valid = _valid_ids(ids.reshape(-1), E)
    key = torch.where(valid, e, torch.full_like(e, E))
    order = torch.sort(key, stable=True).indices
    counts = torch.bincount(e[valid], minlength=E)
    off = torch.cat([torch.zeros(1, dtype=torch.int64, device=ids.device), torch.cumsum(counts, 0)])
    return off.to(torch.int32), order.to(torch.int32), (order // max(k, 1)).to(torch.int32)


# ----------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------


def gather(x, idx):
    T = x.shape[0]
    i = idx.long()
    valid = (i >= 0) & (i < T)
    out = torch.zeros((idx.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    out[valid] = x[i[valid]]
    return out


def scatter(x, idx):
    """out[idx[i]] = x[i]; the later row wins; out-of-range rows dropped."""
    M = x.shape[0]
    i = idx.long()
    valid = (i >= 0) & (i < M)
    winner = torch.full((M,), -1, dtype=torch.int64, device=x.device)
    src = torch.arange(M, device=x.device)
    winner.scatter_reduce_(0, i[valid], src[valid], reduce="amax", include_self=True)
    out = torch.zeros_like(x)
    has = winner >= 0
    out[has] = x[winner[has]]
    return out


def combine(x, w=None):
    """sum_j w[t][j] * x[t][j] in f32, slot order."""
    T, k, H = x.shape
    acc = torch.zeros((T, H), dtype=torch.float32, device=x.device)
    for j in range(k):
        term = x[:, j].float()
        if w is not None:
            term = w[:, j, None].float() * term
        acc += term
    return acc


def indices_to_multihot(ids, probs, E):
    T, k = ids.shape
    dev = ids.device
    mh = torch.zeros((T, E), dtype=torch.bool, device=dev)
    pm = torch.zeros((T, E), dtype=probs.dtype, device=dev)
    pos = torch.full((T, E), -1, dtype=torch.int32, device=dev)
    rows = torch.arange(T, device=dev)
    for j in range(k):  # later slot wins
        e, v = _valid_ids(ids[:, j], E)
        r, ev = rows[v], e[v]
        mh[r, ev] = True
        pm[r, ev] = probs[v, j]
        pos[r, ev] = j
    return mh, pm, pos


def multihot_to_indices(pm, pos, k):
    T, E = pm.shape
    out = torch.zeros((T, k), dtype=pm.dtype, device=pm.device)
    rows = torch.arange(T, device=pm.device)
    for e in range(E):  # higher expert wins
        p = pos[:, e].long()
        v = (p >= 0) & (p < k)
        out[rows[v], p[v]] = pm[v, e]
    return out


# ----------------------------------------------------------------------------
# Expert compute
# ----------------------------------------------------------------------------


def _weight(rhs, e, transpose):
    w = rhs[e].float()
    return w.t() if transpose else w


def grouped_matmul(lhs, rhs, offsets, bias=None, transpose_rhs=False):
    """f32 [M, N]; offsets clamped to [0, M]; rows outside
    [offsets[0], offsets[E]) and of empty groups are zero."""
    M = lhs.shape[0]
    E = rhs.shape[0]
    N = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    off = [min(max(int(o), 0), M) for o in offsets.tolist()]
    out = torch.zeros((M, N), dtype=torch.float32, device=lhs.device)
    for e in range(E):
        lo, hi = max(off[e], off[0]), min(off[e + 1], off[E])
        if hi <= lo:
            continue
        r = lhs[lo:hi].float() @ _weight(rhs, e, transpose_rhs)
        if bias is not None:
            r = r + bias[e].float()
        out[lo:hi] = r
    return out


def activation(g, act, alpha=1.0):
    if act == "silu":
        return g * torch.sigmoid(float(alpha) * g)
    if act == "gelu":
        return 0.5 * g * (1.0 + torch.erf(g / math.sqrt(2.0)))
    if act == "gelu_tanh":
        c = math.sqrt(2.0 / math.pi)
        return 0.5 * g * (1.0 + torch.tanh(c * (g + 0.044715 * g * g * g)))
    raise ValueError(act)


def glu(x, activation_="silu", layout="concat", alpha=1.0, limit=None, up_bias=0.0):
    """act(gate) * (up + up_bias) in f32; gate clamped to <= limit, up to
    [-limit, limit] when limit is given."""
    x = x.float()
    N = x.shape[1] // 2
    if layout == "concat":
        g, u = x[:, :N], x[:, N:]
    elif layout == "interleaved":
        g, u = x[:, 0::2], x[:, 1::2]
    else:
        raise ValueError(layout)
    if limit is not None:
        g = torch.clamp(g, max=float(limit))
        u = torch.clamp(u, min=-float(limit), max=float(limit))
    return activation(g, activation_, alpha) * (u + float(up_bias))


def expert_gemm(
    lhs,
    rhs,
    offsets,
    gather_idx=None,
    bias=None,
    scatter_idx=None,
    scale=None,
    transpose_rhs=False,
    activation_=None,
    layout=None,
    alpha=1.0,
    limit=None,
    up_bias=0.0,
):
    """moe.expert_gemm (MoeOps.td stages 1-5), f32 result [M, N']."""
    M = gather_idx.shape[0] if gather_idx is not None else lhs.shape[0]
    rows = gather(lhs, gather_idx) if gather_idx is not None else lhs
    E = rhs.shape[0]
    N = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    off = [min(max(int(o), 0), M) for o in offsets.tolist()]
    acc = torch.zeros((M, N), dtype=torch.float32, device=lhs.device)
    written = torch.zeros(M, dtype=torch.bool, device=lhs.device)
    for e in range(E):
        lo, hi = off[e], off[e + 1]
        if hi <= lo:
            continue
        r = rows[lo:hi].float() @ _weight(rhs, e, transpose_rhs)
        if bias is not None:
            r = r + bias[e].float()
        acc[lo:hi] = r
        written[lo:hi] = True
    if activation_:
        acc = glu(acc, activation_, layout, alpha, limit, up_bias)
    d = scatter_idx.long() if scatter_idx is not None else torch.arange(M, device=lhs.device)
    ok = written & (d >= 0) & (d < M)
    val = acc[ok]
    dv = d[ok]
    if scale is not None:
        val = val * scale.float()[dv][:, None]
    res = torch.zeros_like(acc)
    res[dv] = val
    return res


# ----------------------------------------------------------------------------
# The layer
# ----------------------------------------------------------------------------

ROUTE_KEYS = ("k", "scoring", "normalize", "n_group", "topk_group", "group_score", "scaling")
GLU_KEYS = ("alpha", "limit", "up_bias")


def split_attrs(attrs):
    ra = {k: attrs[k] for k in ROUTE_KEYS if k in attrs}
    ga = {k: attrs[k] for k in GLU_KEYS if k in attrs}
    return ra, ga


def ffn(
    x,
    logits,
    w_up,
    w_down,
    bias=None,
    *,
    k,
    scoring,
    normalize=False,
    n_group=1,
    topk_group=1,
    group_score="max",
    scaling=1.0,
    activation="silu",
    layout="concat",
    alpha=1.0,
    limit=None,
    up_bias=0.0,
    transpose_weights=False,
    rows=None,
    ids=None,
    round_intermediates=True,
    w_up_bias=None,
    w_down_bias=None,
    round_dtype=None,
):
    """moe.ffn as the chain of docs/Contract.md section 3. Returns (y f32 [R, H], RouteResult)
    for the R = len(rows) rows selected (all rows by default). `ids` (i32
    [R, k]) overrides the routing's selection (weights are recomputed from
    the f32 scores at those ids). `w_up_bias` (E x 2I) and `w_down_bias`
    (E x H) are the expert biases (expert_bias), added to each GEMM's f32
    result. With `round_intermediates` the GEMM /
    GLU / down-projection results are rounded to x's dtype as the unfused
    chain does; `round_dtype` (default x's dtype) is the dtype rounded
    to, so that f32 copies of a bf16 layer's inputs get its roundings."""
    if rows is not None:
        x = x[rows]
        logits = logits[rows]
    rr = route(logits, k, scoring, normalize, n_group, topk_group, group_score, scaling, bias)
    if ids is not None:
        rr.ids = ids.to(torch.int32)
        rr.weights = weights_at(rr.s, ids, normalize, scaling)
    F = round_dtype or x.dtype
    T, H = x.shape
    E = w_up.shape[0]

    def rnd(t):
        return t.to(F).float() if round_intermediates else t

    flat, valid = _valid_ids(rr.ids.reshape(-1), E)
    order = torch.sort(torch.where(valid, flat, torch.full_like(flat, E)), stable=True).indices
    counts = torch.bincount(flat[valid], minlength=E).tolist()
    down_all = torch.zeros((T * k, H), dtype=torch.float32, device=x.device)
    start = 0
    for e in range(E):
        n = counts[e]
        if n == 0:
            continue
        slots = order[start : start + n]
        start += n
        xe = x[slots // k].float()
        up = xe @ _weight(w_up, e, transpose_weights)
        if w_up_bias is not None:
            up = up + w_up_bias[e].float()
        act = rnd(glu(rnd(up), activation, layout, alpha, limit, up_bias))
        down = act @ _weight(w_down, e, transpose_weights)
        if w_down_bias is not None:
            down = down + w_down_bias[e].float()
        down_all[slots] = rnd(down)
    y = combine(down_all.view(T, k, H), rr.weights)
    return y, rr


# ----------------------------------------------------------------------------
# Running one gpu_cases.OpCase (as the compiled function would)
# ----------------------------------------------------------------------------


def _f(a, key, default):
    v = a.get(key, default)
    return default if v is None else v


def run_case(case, t):
    """Outputs {name: tensor in its declared dtype} of gpu_cases.OpCase
    `case` on input tensors `t` ({name: tensor})."""
    op, a = case.op, case.attrs
    ra = dict(
        k=a.get("k"),
        scoring=a.get("scoring"),
        normalize=a.get("normalize", False),
        n_group=a.get("n_group", 1),
        topk_group=a.get("topk_group", 1),
        group_score=a.get("group_score", "max"),
        scaling=a.get("scaling", 1.0),
    )
    gk = dict(alpha=_f(a, "alpha", 1.0), limit=a.get("limit"), up_bias=_f(a, "up_bias", 0.0))
    if op == "topk":
        v, i = topk(t["input"], a["k"])
        res = {"values": v, "indices": i}
    elif op == "route":
        rr = route(t["logits"], bias=t.get("bias"), **ra)
        res = {"weights": rr.weights, "indices": rr.ids}
    elif op == "route_dispatch":
        rr = route(t["logits"], bias=t.get("bias"), **ra)
        off, rev, tok = dispatch(rr.ids, t["logits"].shape[1])
        res = {
            "weights": rr.weights,
            "indices": rr.ids,
            "offsets": off,
            "reverse_indices": rev,
            "token_indices": tok,
        }
    elif op == "cumsum":
        res = {"cumsum": cumsum(t["indices"], a["num_experts"])}
    elif op == "get_indices":
        rev, tok = get_indices(t["cumsum"], t["indices"])
        res = {"reverse_indices": rev, "token_indices": tok}
    elif op == "get_indptr":
        res = {
            "result": get_indptr(
                t["cumsum"],
                a["num_experts"],
                a.get("inclusive", False),
                DTYPES[case.outputs[0].dtype],
            )
        }
    elif op == "gather":
        res = {"result": gather(t["input"], t["indices"])}
    elif op == "scatter":
        res = {"result": scatter(t["input"], t["indices"])}
    elif op == "grouped_matmul":
        res = {
            "result": grouped_matmul(
                t["lhs"], t["rhs"], t["offsets"], t.get("bias"), a.get("transpose_rhs", False)
            )
        }
    elif op == "glu":
        res = {"result": glu(t["input"], a["activation"], a["layout"], **gk)}
    elif op == "combine":
        res = {"result": combine(t["input"], t.get("weights"))}
    elif op == "indices_to_multihot":
        mh, pm, pos = indices_to_multihot(t["indices"], t["probs"], a["num_experts"])
        res = {"multihot": mh, "probs_multihot": pm, "position_map": pos}
    elif op == "multihot_to_indices":
        res = {"probs": multihot_to_indices(t["probs_multihot"], t["position_map"], a["k"])}
    elif op == "dispatch":
        off, rev, tok = dispatch(t["indices"], a["num_experts"])
        res = {"offsets": off, "reverse_indices": rev, "token_indices": tok}
    elif op == "expert_gemm":
        res = {
            "result": expert_gemm(
                t["lhs"],
                t["rhs"],
                t["offsets"],
                t.get("gather"),
                t.get("bias"),
                t.get("scatter"),
                t.get("scale"),
                a.get("transpose_rhs", False),
                a.get("activation"),
                a.get("layout"),
                **gk,
            )
        }
    elif op == "ffn":
        y, _ = ffn(
            t["x"],
            t["logits"],
            t["w_up"],
            t["w_down"],
            t.get("bias"),
            activation=a["activation"],
            layout=a["layout"],
            transpose_weights=a.get("transpose_weights", False),
            w_up_bias=t.get("w_up_bias"),
            w_down_bias=t.get("w_down_bias"),
            **ra,
            **gk,
        )
        res = {"result": y}
    else:
        raise KeyError(op)
    return {r.name: res[r.name].to(DTYPES[r.dtype]) for r in case.outputs}


# ----------------------------------------------------------------------------
# Self-check against reference.py (float64 numpy)
# ----------------------------------------------------------------------------


def to_torch(arr, dtype, device):
    import numpy as np

    if dtype in ("f32", "bf16", "f16"):
        return (
            torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
            .to(device)
            .to(DTYPES[dtype])
        )
    if dtype == "i1":
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.bool_)).to(device)
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.int64)).to(device).to(DTYPES[dtype])


def to_numpy(t, dtype):
    import numpy as np

    if dtype in ("f32", "bf16", "f16"):
        return t.detach().float().cpu().numpy().astype(np.float64)
    if dtype == "i1":
        return t.detach().contiguous().view(torch.uint8).cpu().numpy().astype(np.int64)
    return t.detach().cpu().numpy().astype(np.int64)


def self_check(device="cuda", Ts=(0, 1, 7, 33), verbose=False):
    """Every forward op of gpu_cases.OP_CASES (random and edge inputs)
    through run_case(), checked with gpu_cases.check_op() against
    reference.py, plus the ffn row-subset / id-override paths (the backward
    cases are checked against reference.py alone). Returns a list of
    failure strings (empty: all good)."""
    import numpy as np
    import gpu_cases as G

    configure_precision()
    failures = []
    n = 1
    e = f32_gemm_error(device)
    if not e < 5e-5:
        failures.append("f32 GEMMs are not IEEE f32 (rel err %.3g; TF32 on?)" % e)
    for case in G.OP_CASES:
        if case.stem == G.BACKWARD:
            continue
        for T in Ts:
            for mode in ("random", "edge"):
                n += 1
                inp = G.gen_inputs(case, T, mode, seed=1)
                t = {a.name: to_torch(inp[a.name], a.dtype, device) for a in case.inputs}
                try:
                    res = run_case(case, t)
                    got = {r.name: to_numpy(res[r.name], r.dtype) for r in case.outputs}
                    oc = G.check_op(case, inp, got)
                    ok, msg = oc.ok, oc.detail
                except Exception as ex:  # noqa: BLE001 - report, keep going
                    ok, msg = False, "%s: %s" % (type(ex).__name__, ex)
                if not ok:
                    failures.append("%s T=%d %s: %s" % (case.name, T, mode, msg))
                elif verbose:
                    print("ok %s T=%d %s %s" % (case.name, T, mode, msg))
    # ffn: a row subset and an id override give the same rows as the whole.
    g = torch.Generator(device=device).manual_seed(7)
    T, H, I, E, k = 37, 32, 16, 16, 4
    x = torch.randn(T, H, generator=g, device=device).to(torch.bfloat16)
    lg = (2 * torch.randn(T, E, generator=g, device=device)).to(torch.bfloat16)
    wu = (torch.randn(E, H, 2 * I, generator=g, device=device) / H**0.5).to(torch.bfloat16)
    wd = (torch.randn(E, I, H, generator=g, device=device) / I**0.5).to(torch.bfloat16)
    bias = 0.3 * torch.randn(E, generator=g, device=device)
    attrs = dict(
        k=k,
        scoring="sigmoid",
        normalize=True,
        n_group=4,
        topk_group=2,
        group_score="top2_sum",
        scaling=2.5,
    )
    y, rr = ffn(x, lg, wu, wd, bias, **attrs)

    def close(a, b):  # GEMMs on a row subset may pick other kernels
        return float((a - b).norm()) <= 1e-3 * float(b.norm()) + 1e-6

    rows = torch.tensor([36, 0, 5, 17], device=device)
    ys, _ = ffn(x, lg, wu, wd, bias, rows=rows, **attrs)
    n += 1
    if not close(ys, y[rows]):
        failures.append("ffn rows= subset differs from the full layer")
    yi, _ = ffn(x, lg, wu, wd, bias, ids=rr.ids, **attrs)
    n += 1
    if not close(yi, y):
        failures.append("ffn ids= override with the same ids differs")
    # an override with other ids changes exactly the overridden row
    ids2 = rr.ids.clone()
    ids2[3] = torch.flip(ids2[3], dims=[0])
    y2, rr2 = ffn(x, lg, wu, wd, bias, ids=ids2, **attrs)
    n += 1
    if not (close(y2[3], y[3]) and torch.equal(rr2.ids, ids2)):
        failures.append("ffn ids= override with permuted slots changes the row")
    # near-tie bookkeeping on a constructed row: c = [.5, .5+1e-7, .2, .1], k=1
    n += 1
    rr = route(torch.tensor([[0.0, 1e-6, -2.0, -3.0]], device=device), 1, "sigmoid")
    if not (float(rr.boundary_gap[0]) < NEAR_TIE and int(rr.ids[0, 0]) == 1):
        failures.append("route near-tie gap bookkeeping")
    if verbose or failures:
        for f in failures:
            print("FAIL " + f)
    print("torch_reference self-check: %d checks, %d failed" % (n, len(failures)))
    del np
    return failures


if __name__ == "__main__":
    import os

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(1 if self_check(verbose="-v" in sys.argv) else 0)
