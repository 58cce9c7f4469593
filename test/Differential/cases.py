#!/usr/bin/env python3
"""Random case generators for the differential tester, one per moe op.

`make_case(op, seed)` is a pure function of (op, seed): the same key always
gives the same shapes, attributes, input bits and static/dynamic choice.
Float inputs are generated as float64 values exactly representable in their
element type (they are rounded with reference.round_to).
"""

import zlib

import numpy as np

import reference as ref

OPS = [
    "topk",
    "route",
    "route_grad",
    "cumsum",
    "get_indices",
    "get_indptr",
    "gather",
    "grouped_matmul",
    "grouped_matmul_wgrad",
    "glu",
    "glu_grad",
    "scatter",
    "combine",
    "combine_grad",
    "row_dot",
    "indices_to_multihot",
    "multihot_to_indices",
    "ffn",
    "ffn_grad",
    "ffn_train",
    "ffn_grad_saved",
]
# Low-precision expert weights (weight_format fp8_block / mxfp4): variants of
# grouped_matmul and ffn, run with `run.py --ops lowp` (or by name).
LOWP_OPS = ["grouped_matmul_fp8", "grouped_matmul_mxfp4", "ffn_fp8", "ffn_mxfp4"]


class Tensor:
    """An operand: `dyn` makes dim 0 dynamic through tensor.cast."""

    def __init__(self, name, dtype, value, dyn=False):
        self.name = name
        self.dtype = dtype
        self.value = np.asarray(value)
        self.dyn = dyn

    def __repr__(self):
        return "%s: %s%s %s" % (
            self.name,
            "x".join(map(str, self.value.shape)),
            "(dyn)" if self.dyn else "",
            self.dtype,
        )


class Case:
    """`op` is the moe op; `gen` the generator (its name in OPS / LOWP_OPS:
    `op`, or a variant such as grouped_matmul_fp8), which the replay key
    names."""

    def __init__(self, op, seed, inputs, attrs, out_dtypes, note="", gen=None):
        self.op = op
        self.gen = gen or op
        self.seed = seed
        self.inputs = inputs  # operand order
        self.attrs = attrs  # op attributes (python values)
        self.out_dtypes = out_dtypes  # element type of every result
        self.note = note

    @property
    def key(self):
        return "%s:%d" % (self.gen, self.seed)

    def inp(self, name):
        for t in self.inputs:
            if t.name == name:
                return t
        return None

    def describe(self):
        return "%s %s attrs=%s %s" % (self.key, self.inputs, self.attrs, self.note)


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------


def _rng(op, seed):
    return np.random.default_rng([zlib.crc32(op.encode()), int(seed) & 0xFFFFFFFF])


def _pick(rng, xs, p=None):
    return xs[int(rng.choice(len(xs), p=p))]


def _T(rng):
    """Token counts: 0, 1, odd and a few larger."""
    return int(
        _pick(
            rng,
            [0, 1, 1, 2, 3, 5, 7, 8, 9, 13, 17, 31, 64, 101],
            p=[0.06, 0.1, 0.04, 0.08, 0.12, 0.12, 0.12, 0.08, 0.1, 0.08, 0.05, 0.03, 0.01, 0.01],
        )
    )


def _E(rng):
    return int(_pick(rng, [1, 2, 3, 4, 5, 6, 7, 8, 12]))


def _dtype(rng, allow_f16=True):
    if allow_f16:
        return _pick(rng, ["f32", "bf16", "f16"], p=[0.45, 0.4, 0.15])
    return _pick(rng, ["f32", "bf16"])


def _floats(rng, shape, dtype, scale=1.0, ties=False):
    """Finite values representable in dtype; `ties` draws from a tiny pool."""
    if ties:
        pool = np.round(rng.normal(0, scale, size=3) * 4) / 4
        v = pool[rng.integers(0, len(pool), size=shape)]
    else:
        v = rng.normal(0.0, scale, size=shape)
    return ref.round_to(v, dtype)


def _f32(x):
    return float(np.float32(x))


def _sprinkle_nonfinite(rng, x, frac=0.15):
    x = x.copy()
    if x.size == 0:
        return x
    mask = rng.random(x.shape) < frac
    specials = np.array([np.nan, np.inf, -np.inf])
    x[mask] = specials[rng.integers(0, 3, size=int(mask.sum()))]
    return x


def _ids(rng, T, k, E, bad=0.1, dup=0.1):
    """T x k expert ids: mostly distinct per row, some -1 / >= E / duplicates."""
    out = np.zeros((T, k), dtype=np.int64)
    for t in range(T):
        if k <= E:
            row = rng.permutation(E)[:k]
        else:
            row = rng.integers(0, E, size=k)
        for j in range(k):
            r = rng.random()
            if r < bad:
                row[j] = _pick(rng, [-1, -1, E, E + 3, -5])
            elif r < bad + dup and k > 1:
                row[j] = row[rng.integers(0, k)]
        out[t] = row
    return out


# ----------------------------------------------------------------------------
# per-op generators
# ----------------------------------------------------------------------------


def gen_topk(rng, seed):
    T, E = _T(rng), _E(rng)
    k = int(_pick(rng, [1, E, int(rng.integers(1, E + 1))]))
    F = _dtype(rng)
    ties = rng.random() < 0.4
    x = _floats(rng, (T, E), F, ties=ties)
    note = ""
    if rng.random() < 0.35:
        x = _sprinkle_nonfinite(rng, x, frac=0.25)
        note += "nonfinite "
    if T and rng.random() < 0.2:  # signed zeros compare equal
        x[rng.integers(0, T), :] = np.where(rng.random(E) < 0.5, 0.0, -0.0)
        note += "signed-zero "
    return Case(
        "topk", seed, [Tensor("input", F, x, rng.random() < 0.5)], {"k": k}, [F, "i32"], note
    )


ROUTE_STYLES = ["softmax_norm", "softmax_nonorm", "group_max", "sigmoid_top2_sum"]


def _route_config(rng, E_choices=(2, 3, 4, 6, 8, 12, 16)):
    style = _pick(rng, ROUTE_STYLES)
    attrs = {"scoring": "softmax", "normalize": False}
    has_bias = False
    if style == "softmax_norm":
        E = int(_pick(rng, [1, 2, 3, 5, 6, 7, 8, 12]))
        attrs["normalize"] = True
        n_group, topk_group = 1, 1
    elif style == "softmax_nonorm":
        E = int(_pick(rng, [1, 2, 3, 5, 6, 7, 8, 12]))
        n_group, topk_group = 1, 1
    elif style == "group_max":
        E = int(_pick(rng, [4, 6, 8, 9, 12]))
        n_group = int(_pick(rng, [d for d in range(2, E + 1) if E % d == 0]))
        topk_group = int(rng.integers(1, n_group + 1))
        attrs["group_score"] = "max"
        attrs["normalize"] = bool(rng.random() < 0.5)
        has_bias = rng.random() < 0.3
    else:
        E = int(_pick(rng, [4, 6, 8, 12, 16]))
        n_group = int(_pick(rng, [d for d in range(1, E // 2 + 1) if E % d == 0 and E // d >= 2]))
        topk_group = int(rng.integers(1, n_group + 1))
        attrs["scoring"] = "sigmoid"
        attrs["group_score"] = "top2_sum"
        attrs["normalize"] = bool(rng.random() < 0.7)
        attrs["scaling"] = _f32(_pick(rng, [1.0, 2.5, float(rng.uniform(0.25, 4))]))
        has_bias = True
    if n_group > 1 or rng.random() < 0.5:
        attrs["n_group"] = n_group
        attrs["topk_group"] = topk_group
    if style.startswith("softmax") and rng.random() < 0.2:
        attrs["scaling"] = _f32(rng.uniform(0.5, 3))
    kmax = topk_group * E // n_group
    k = int(_pick(rng, [1, kmax, int(rng.integers(1, kmax + 1))]))
    return style, E, k, attrs, has_bias


FLT_MAX_F = float(np.finfo(np.float32).max)


def _logits(rng, T, E, F, scoring, nonfinite):
    if rng.random() < 0.3:  # ties: a small pool of values
        pool = ref.round_to(rng.uniform(-3, 3, size=3), F)
        x = pool[rng.integers(0, 3, size=(T, E))]
    else:
        x = ref.round_to(rng.normal(0, 2.0, size=(T, E)), F)
    if nonfinite and T:
        for t in range(T):
            r = rng.random()
            if r < 0.15:
                x[t] = np.nan
            elif r < 0.3:
                x[t] = -np.inf
            elif r < 0.45:
                x[t, rng.integers(0, E)] = np.inf
            elif r < 0.6:
                x[t] = _sprinkle_nonfinite(rng, x[t], 0.4)
            elif r < 0.68:  # huge finite logits (x - max overflows in f32)
                big = ref.round_to([FLT_MAX_F, -FLT_MAX_F, 1e30, -1e30, 0.0], F)
                x[t] = big[rng.integers(0, 5, size=E)]
            elif r < 0.72:
                x[t] = np.where(rng.random(E) < 0.5, 0.0, -0.0)
    return x


def gen_route(rng, seed):
    style, E, k, attrs, has_bias = _route_config(rng)
    T = _T(rng)
    F = _dtype(rng)
    nonfinite = rng.random() < 0.35
    x = _logits(rng, T, E, F, attrs["scoring"], nonfinite)
    inputs = [Tensor("logits", F, x, rng.random() < 0.5)]
    if has_bias:
        b = ref.round_to(rng.normal(0, 0.5, size=E), "f32")
        if rng.random() < 0.3:
            b = np.round(b * 4) / 4
        inputs.append(Tensor("bias", "f32", b))
    attrs["k"] = k
    W = _pick(rng, ["f32", F])
    return Case(
        "route", seed, inputs, attrs, [W, "i32"], style + (" nonfinite" if nonfinite else "")
    )


def gen_route_grad(rng, seed):
    T, E = _T(rng), int(_pick(rng, [1, 2, 3, 5, 8, 12, 16]))
    k = int(rng.integers(1, min(E, 4) + 1))
    F = _dtype(rng)
    attrs = {"scoring": _pick(rng, ["softmax", "sigmoid"]), "normalize": bool(rng.random() < 0.6)}
    if rng.random() < 0.4:
        attrs["scaling"] = _f32(_pick(rng, [2.5, float(rng.uniform(0.25, 4))]))
    x = _floats(rng, (T, E), F, scale=2.0)
    if rng.random() < 0.2:  # masked experts: -inf logits, scores exactly 0
        x[rng.random((T, E)) < 0.3] = -np.inf
    ids = _ids(rng, T, k, E)
    W = _pick(rng, ["f32", F])
    dyn = rng.random() < 0.5
    inputs = [
        Tensor("grad", W, _floats(rng, (T, k), W), dyn),
        Tensor("logits", F, x, dyn),
        Tensor("indices", "i32", ids, dyn),
    ]
    return Case("route_grad", seed, inputs, attrs, [_pick(rng, [F, "f32"])])


def gen_cumsum(rng, seed):
    T, E = _T(rng), _E(rng)
    k = int(rng.integers(1, 5))
    ids = _ids(rng, T, k, E)
    return Case(
        "cumsum",
        seed,
        [Tensor("indices", "i32", ids, rng.random() < 0.5)],
        {"num_experts": E},
        ["i32"],
    )


def gen_get_indices(rng, seed):
    T, E = _T(rng), _E(rng)
    k = int(rng.integers(1, 5))
    ids = _ids(rng, T, k, E)
    cs = ref.cumsum(ids, E)
    dyn = rng.random() < 0.5
    return Case(
        "get_indices",
        seed,
        [Tensor("cumsum", "i32", cs, dyn), Tensor("indices", "i32", ids, dyn)],
        {"num_experts": E},
        ["i32", "i32"],
    )


def gen_get_indptr(rng, seed):
    T, E = _T(rng), _E(rng)
    if rng.random() < 0.7:
        cs = ref.cumsum(_ids(rng, T, int(rng.integers(1, 4)), E), E)
    else:
        cs = rng.integers(-100, 1000, size=E * T)
    incl = bool(rng.random() < 0.5)
    R = _pick(rng, ["i32", "i64"])
    return Case(
        "get_indptr",
        seed,
        [Tensor("cumsum", "i32", cs, rng.random() < 0.5)],
        {"num_experts": E, "inclusive": incl},
        [R],
    )


def gen_gather(rng, seed):
    T = _T(rng)
    H = int(_pick(rng, [1, 3, 8, 17]))
    M = _T(rng)
    F = _dtype(rng)
    x = _floats(rng, (T, H), F)
    idx = rng.integers(-2, T + 3, size=M)
    return Case(
        "gather",
        seed,
        [
            Tensor("input", F, x, rng.random() < 0.5),
            Tensor("indices", "i32", idx, rng.random() < 0.5),
        ],
        {},
        [F],
    )


def gen_scatter(rng, seed):
    M = _T(rng)
    H = int(_pick(rng, [1, 3, 8, 17]))
    F = _dtype(rng)
    x = _floats(rng, (M, H), F)
    if rng.random() < 0.4:
        idx = rng.permutation(M)
    else:
        idx = rng.integers(-2, M + 3, size=M)
    dyn = rng.random() < 0.5
    return Case(
        "scatter", seed, [Tensor("input", F, x, dyn), Tensor("indices", "i32", idx, dyn)], {}, [F]
    )


def _offsets(rng, M, E):
    kind = rng.random()
    cuts = np.sort(rng.integers(0, M + 1, size=E - 1)) if E > 1 else np.zeros(0, int)
    note = "offsets:full"
    start, end = 0, M
    if kind < 0.25:
        end = int(rng.integers(0, M + 1))  # ends before M
        cuts = np.minimum(cuts, end)
        note = "offsets:short"
    elif kind < 0.35:
        start = int(rng.integers(0, M + 1))
        cuts = np.maximum(cuts, start)
        note = "offsets:late-start"
    off = np.concatenate([[start], cuts, [end]]).astype(np.int64)
    if rng.random() < 0.15:  # out of [0, M]: clamped at run time
        if rng.random() < 0.5:
            off[0] = -int(rng.integers(1, 5))
        else:
            off[-1] = M + int(rng.integers(1, 5))
        note += "+clamp"
    elif rng.random() < 0.08 and E > 1:  # decreasing pair
        e = int(rng.integers(0, E))
        off[e + 1] = max(off[e] - int(rng.integers(1, 3)), -1)
        note += "+decreasing"
    return off, note


def gen_grouped_matmul(rng, seed):
    M = _T(rng)
    E = _E(rng)
    K = int(_pick(rng, [1, 4, 8, 13, 32]))
    N = int(_pick(rng, [1, 2, 5, 8, 16]))
    F = _dtype(rng)
    tr = bool(rng.random() < 0.5)
    lhs = _floats(rng, (M, K), F)
    rhs = _floats(rng, (E, N, K) if tr else (E, K, N), F, scale=1 / np.sqrt(K))
    off, note = _offsets(rng, M, E)
    dyn = rng.random() < 0.5
    inputs = [Tensor("lhs", F, lhs, dyn), Tensor("rhs", F, rhs), Tensor("offsets", "i32", off)]
    if rng.random() < 0.35:
        inputs.append(Tensor("bias", F, _floats(rng, (E, N), F)))
    O = _pick(rng, [F, "f32"])
    attrs = {"transpose_rhs": tr}
    if rng.random() < 0.1:  # the default, written out
        attrs["weight_format"] = "plain"
    return Case("grouped_matmul", seed, inputs, attrs, [O], note)


def gen_grouped_matmul_wgrad(rng, seed):
    M = _T(rng)
    E = _E(rng)
    K = int(_pick(rng, [1, 4, 8, 13, 32]))
    N = int(_pick(rng, [1, 2, 5, 8, 16]))
    F = _dtype(rng)
    off, note = _offsets(rng, M, E)
    dyn = rng.random() < 0.5
    inputs = []
    # Either operand may be read through row indices (the fused gather):
    # its own row count S, indices of length M incl. out-of-range ones
    # (read as zero rows).
    for name, cols in (("lhs", K), ("rhs", N)):
        if rng.random() < 0.3:
            S = int(rng.integers(0, M + 5))
            idx = rng.integers(-2, S + 2, size=M).astype(np.int32)
            inputs.append(Tensor(name, F, _floats(rng, (S, cols), F), dyn))
            inputs.append(Tensor(name + "_gather", "i32", idx, dyn))
            note += " %s gathered from %d rows" % (name, S)
        else:
            inputs.append(Tensor(name, F, _floats(rng, (M, cols), F), dyn))
    inputs.append(Tensor("offsets", "i32", off))
    if rng.random() < 0.35:  # main_grad-style accumulation, f32
        inputs.append(Tensor("acc", "f32", _floats(rng, (E, K, N), "f32")))
        O = "f32"
    else:
        O = _pick(rng, [F, "f32"])
    return Case("grouped_matmul_wgrad", seed, inputs, {}, [O], note)


def _glu_attrs(rng):
    attrs = {
        "activation": _pick(rng, ["silu", "gelu", "gelu_tanh"]),
        "layout": _pick(rng, ["concat", "interleaved"]),
    }
    r = rng.random()
    if r < 0.3:  # gpt-oss swiglu
        attrs.update(activation="silu", alpha=_f32(1.702), limit=7.0, up_bias=1.0)
    else:
        if rng.random() < 0.4:
            attrs["alpha"] = _f32(_pick(rng, [1.702, 0.5, float(rng.uniform(0.2, 3))]))
        if rng.random() < 0.4:
            attrs["limit"] = _f32(_pick(rng, [7.0, 1.0, float(rng.uniform(0.3, 3))]))
        if rng.random() < 0.4:
            attrs["up_bias"] = _f32(_pick(rng, [1.0, -0.5, float(rng.uniform(-2, 2))]))
    return attrs


def gen_glu(rng, seed):
    M = _T(rng)
    N = int(_pick(rng, [1, 2, 3, 8, 16]))
    F = _dtype(rng)
    x = _floats(rng, (M, 2 * N), F, scale=_pick(rng, [1.0, 3.0, 10.0]))
    return Case("glu", seed, [Tensor("input", F, x, rng.random() < 0.5)], _glu_attrs(rng), [F])


def gen_glu_grad(rng, seed):
    M = _T(rng)
    N = int(_pick(rng, [1, 2, 3, 8, 16]))
    F = _dtype(rng)
    x = _floats(rng, (M, 2 * N), F, scale=_pick(rng, [1.0, 3.0, 10.0]))
    dA = _floats(rng, (M, N), F, scale=_pick(rng, [1.0, 0.1]))
    inputs = [Tensor("grad", F, dA, rng.random() < 0.5), Tensor("input", F, x, rng.random() < 0.5)]
    return Case("glu_grad", seed, inputs, _glu_attrs(rng), [F])


def gen_combine(rng, seed):
    T = _T(rng)
    k = int(_pick(rng, [1, 2, 3, 4, 8]))
    H = int(_pick(rng, [1, 3, 8, 16]))
    F = _dtype(rng)
    dyn = rng.random() < 0.5
    inputs = [Tensor("input", F, _floats(rng, (T, k, H), F), dyn)]
    if rng.random() < 0.75:
        W = _pick(rng, ["f32", F])
        inputs.append(Tensor("weights", W, ref.round_to(rng.uniform(-1, 1, (T, k)), W), dyn))
    return Case("combine", seed, inputs, {}, [F])


def gen_combine_grad(rng, seed):
    T = _T(rng)
    k = int(_pick(rng, [1, 2, 3, 4, 8]))
    H = int(_pick(rng, [1, 3, 8, 16]))
    F = _dtype(rng)
    dyn = rng.random() < 0.5
    inputs = [Tensor("grad", F, _floats(rng, (T, H), F), dyn)]
    if rng.random() < 0.75:
        W = _pick(rng, ["f32", F])
        inputs.append(Tensor("weights", W, ref.round_to(rng.uniform(-1, 1, (T, k)), W), dyn))
    # k: the result's slot count (the op has no attribute; not printed).
    return Case("combine_grad", seed, inputs, {"k": k}, [F])


def gen_indices_to_multihot(rng, seed):
    T, E = _T(rng), _E(rng)
    k = int(rng.integers(1, 5))
    F = _dtype(rng)
    ids = _ids(rng, T, k, E, bad=0.2, dup=0.15)
    probs = ref.round_to(rng.uniform(0, 1, (T, k)), F)
    dyn = rng.random() < 0.5
    return Case(
        "indices_to_multihot",
        seed,
        [Tensor("indices", "i32", ids, dyn), Tensor("probs", F, probs, dyn)],
        {"num_experts": E},
        ["i1", F, "i32"],
    )


def gen_multihot_to_indices(rng, seed):
    T, E = _T(rng), _E(rng)
    k = int(rng.integers(1, 5))
    F = _dtype(rng)
    if rng.random() < 0.5:  # a consistent forward result
        ids = _ids(rng, T, k, E, bad=0.2, dup=0.1)
        _, pm, pos = ref.indices_to_multihot(ids, ref.round_to(rng.uniform(0, 1, (T, k)), F), E)
    else:  # arbitrary maps: collisions, -1, >= k
        pm = ref.round_to(rng.uniform(-1, 1, (T, E)), F)
        pos = rng.integers(-2, k + 2, size=(T, E))
    dyn = rng.random() < 0.5
    return Case(
        "multihot_to_indices",
        seed,
        [Tensor("probs_multihot", F, pm, dyn), Tensor("position_map", "i32", pos, dyn)],
        {"k": k},
        [F],
    )


def gen_ffn(rng, seed):
    style, E, k, attrs, has_bias = _route_config(rng)
    T = _T(rng)
    H = int(_pick(rng, [1, 4, 8, 16]))
    I = int(_pick(rng, [1, 2, 4, 8]))
    F = _dtype(rng)
    tw = bool(rng.random() < 0.5)
    x = _floats(rng, (T, H), F)
    # f32 router logits with narrower activations (DeepSeek-V3) or F.
    LF = "f32" if F != "f32" and rng.random() < 0.4 else F
    logits = _logits(rng, T, E, LF, attrs["scoring"], nonfinite=rng.random() < 0.15)
    w_up = _floats(rng, (E, 2 * I, H) if tw else (E, H, 2 * I), F, scale=1 / np.sqrt(H))
    w_down = _floats(rng, (E, H, I) if tw else (E, I, H), F, scale=1 / np.sqrt(I))
    dyn = rng.random() < 0.5
    inputs = [
        Tensor("x", F, x, dyn),
        Tensor("logits", LF, logits, dyn),
        Tensor("w_up", F, w_up),
        Tensor("w_down", F, w_down),
    ]
    if has_bias:
        inputs.append(Tensor("bias", "f32", ref.round_to(rng.normal(0, 0.5, size=E), "f32")))
    if rng.random() < 0.35:  # per-expert matmul biases (gpt-oss)
        inputs.append(Tensor("w_up_bias", F, _floats(rng, (E, 2 * I), F, scale=0.5)))
        inputs.append(Tensor("w_down_bias", F, _floats(rng, (E, H), F, scale=0.5)))
    attrs["k"] = k
    attrs.update(_glu_attrs(rng))
    attrs["transpose_weights"] = tw
    if rng.random() < 0.1:  # the default, written out
        attrs["weight_format"] = "plain"
    return Case("ffn", seed, inputs, attrs, [F], style)


def gen_ffn_grad(rng, seed):
    """moe.ffn_grad: gen_ffn's layers (plain weights) and an upstream dy;
    results dx, dlogits, f32 dw_up / dw_down (and the expert biases')."""
    c = gen_ffn(rng, seed)
    v = {t.name: t for t in c.inputs}
    F, LF = v["x"].dtype, v["logits"].dtype
    dy = Tensor("dy", F, _floats(rng, v["x"].value.shape, F), v["x"].dyn)
    out = [F, LF, "f32", "f32"] + (["f32", "f32"] if "w_up_bias" in v else [])
    return Case("ffn_grad", seed, [dy] + c.inputs, c.attrs, out, c.note)


def gen_ffn_train(rng, seed):
    """moe.ffn_train: gen_ffn's layers (plain weights); results y, h,
    weights, ids."""
    c = gen_ffn(rng, seed)
    F = c.out_dtypes[0]
    return Case("ffn_train", seed, c.inputs, c.attrs, [F, F, "f32", "i32"], c.note)


def gen_ffn_grad_saved(rng, seed):
    """moe.ffn_grad's saved form: gen_ffn_grad's cases; run.py feeds the
    saved operands from a moe.ffn_train of the same operands in the same
    function (the pair end to end)."""
    c = gen_ffn_grad(rng, seed)
    c.gen = "ffn_grad_saved"
    return c


def gen_row_dot(rng, seed):
    M = _T(rng)
    N = int(_pick(rng, [1, 2, 3, 8, 16, 33]))
    F = _dtype(rng)
    dyn = rng.random() < 0.5
    inputs = [
        Tensor("lhs", F, _floats(rng, (M, N), F), dyn),
        Tensor("rhs", F, _floats(rng, (M, N), F), dyn),
    ]
    if rng.random() < 0.4:
        inputs.append(Tensor("acc", "f32", _floats(rng, (M,), "f32"), dyn))
        out = "f32"
    else:
        out = _pick(rng, [F, "f32"])
    return Case("row_dot", seed, inputs, {}, [out])


# ----------------------------------------------------------------------------
# low-precision expert weights (weight_format fp8_block / mxfp4)
# ----------------------------------------------------------------------------


def _scale_fmt(rng, fp8):
    """scale_fmt: absent (f32), f32 written out, or ue8m0 (fp8_block only)."""
    return _pick(rng, [None, "f32", "ue8m0", "ue8m0"] if fp8 else [None, None, None, "f32"])


def _magnitude(rng, F, kind, group):
    """A row scale: `tiny` (fp8: amax below the 1e-4 floor, q down to e4m3
    subnormals; mxfp4: small enough for 2^127 scales to stay finite) or
    `large` (mxfp4: 2^-127 scales still visible), within F's range."""
    if F == "f16":
        lo, hi = {"tiny": (-7.0, -5.0), "large": (2.0, 4.0)}[kind]
    elif group == 32:
        lo, hi = {"tiny": (-36.0, -5.0), "large": (31.0, 36.0)}[kind]
    else:
        lo, hi = {"tiny": (-36.0, -5.0), "large": (20.0, 36.0)}[kind]
    return 10.0 ** rng.uniform(lo, hi)


def _lowp_lhs(rng, M, K, F, group):
    """M x K activations: rows of normal, tiny, large and varied magnitude;
    for fp8 (group = 128) an all-zero group and a group whose amax / 448 is
    an exact power of two now and then; NaN / inf rarely."""
    x = rng.normal(0.0, 1.0, size=(M, K))
    notes = []
    for m in range(M):
        r = rng.random()
        if r < 0.12:
            x[m] *= _magnitude(rng, F, "tiny", group)
            notes.append("tiny")
        elif r < 0.24:
            x[m] *= _magnitude(rng, F, "large", group)
            notes.append("large")
        elif r < 0.34:
            x[m] *= 10.0 ** rng.uniform(-3, 3)
    G = -(-K // group)
    if M and group == 128 and rng.random() < 0.3:
        m, g = int(rng.integers(0, M)), int(rng.integers(0, G))
        x[m, g * 128 : (g + 1) * 128] = np.where(rng.random(min(128, K - g * 128)) < 0.5, 0.0, -0.0)
        notes.append("zero-group")
    if M and group == 128 and rng.random() < 0.25:
        m, g = int(rng.integers(0, M)), int(rng.integers(0, G))
        blk = x[m, g * 128 : (g + 1) * 128]
        j = int(rng.integers(-14, 4))
        top = 448.0 * 2.0**j  # s = 2^j exactly
        blk[:] = np.clip(blk / max(np.max(np.abs(blk)), 1e-30) * top * 0.9, -top, top)
        blk[int(rng.integers(0, len(blk)))] = top * _pick(rng, [1.0, -1.0])
        notes.append("pow2-amax")
    x = ref.round_to(x, F)
    if M and rng.random() < 0.12:
        for _ in range(int(rng.integers(1, 3))):
            x[rng.integers(0, M), rng.integers(0, K)] = _pick(rng, [np.nan, np.inf, -np.inf])
        notes.append("nonfinite")
    return x, notes


E4M3_SPECIAL = [0x00, 0x80, 0x01, 0x02, 0x07, 0x81, 0x85, 0x87, 0x08, 0x7E, 0xFE, 0x3F, 0xC0]


def _fp8_weights(rng, shape, nan_ok=True):
    """e4m3 bits: uniformly random codes (every binade, subnormals) or
    rounded normal values; some subnormal / zero / +-448 codes always, the
    NaN codes 0x7f / 0xff now and then."""
    if rng.random() < 0.5:
        bits = rng.integers(0, 256, size=shape)
        bits = np.where((bits & 0x7F) == 0x7F, bits ^ 0x01, bits)
    else:
        sigma = _pick(rng, [1.0, 30.0, 200.0])
        bits = ref.encode_e4m3(ref.round_to_e4m3(rng.normal(0.0, sigma, size=shape)))
    flat = bits.reshape(-1)
    n = min(flat.size, 8)
    flat[rng.choice(flat.size, size=n, replace=False)] = rng.choice(E4M3_SPECIAL, size=n)
    note = []
    if nan_ok and rng.random() < 0.1:
        flat[rng.integers(0, flat.size)] = _pick(rng, [0x7F, 0xFF])
        note.append("nan-weight")
    return bits, note


def _fp8_block_scales(rng, E, N, K):
    """f32 E x ceil(N/128) x ceil(K/128) (a checkpoint's weight_scale_inv)."""
    shape = (E, -(-N // 128), -(-K // 128))
    if rng.random() < 0.3:  # powers of two
        return np.ldexp(1.0, rng.integers(-12, 3, size=shape))
    return ref.round_to(2.0 ** rng.uniform(-12, 2, size=shape), "f32")


def gen_grouped_matmul_fp8(rng, seed):
    M = _T(rng)
    N = int(_pick(rng, [1, 3, 16, 40, 130, 200], p=[0.15, 0.2, 0.2, 0.2, 0.15, 0.1]))
    K = int(_pick(rng, [16, 48, 128, 144, 256, 272], p=[0.2, 0.2, 0.15, 0.2, 0.1, 0.15]))
    E = min(_E(rng), max(1, 60000 // (N * K)))
    F = _dtype(rng)
    lhs, notes = _lowp_lhs(rng, M, K, F, 128)
    rhs, wn = _fp8_weights(rng, (E, N, K))
    off, onote = _offsets(rng, M, E)
    inputs = [
        Tensor("lhs", F, lhs, rng.random() < 0.5),
        Tensor("rhs", "f8E4M3FN", rhs),
        Tensor("offsets", "i32", off),
    ]
    if rng.random() < 0.35:
        inputs.append(Tensor("bias", F, _floats(rng, (E, N), F)))
    inputs.append(Tensor("rhs_scale", "f32", _fp8_block_scales(rng, E, N, K)))
    attrs = {"transpose_rhs": True, "weight_format": "fp8_block"}
    sf = _scale_fmt(rng, True)
    if sf:
        attrs["scale_fmt"] = sf
    O = _pick(rng, [F, "f32"])
    note = " ".join([onote] + sorted(set(notes)) + wn)
    return Case("grouped_matmul", seed, inputs, attrs, [O], note, gen="grouped_matmul_fp8")


E8M0_LOW = [0, 0, 1, 2]
E8M0_HIGH = [253, 254, 254]
E8M0_EXTREME = E8M0_LOW + [64, 126, 127, 128, 190] + E8M0_HIGH


def _mxfp4_weights(rng, E, N, K, extreme, scale_range=(118, 131), nan_ok=True):
    """(packed e2m1 bytes E x N x K/2 with every code somewhere, E8M0 bits
    E x N x K/32: typical exponents, or the extremes 0, 1, 254 (and 255,
    NaN, now and then))."""
    codes = rng.integers(0, 16, size=(E, N, K))
    codes[0, 0, :16] = rng.permutation(16)
    scales = rng.integers(scale_range[0], scale_range[1], size=(E, N, K // 32))
    note = []
    if extreme:  # per weight row: all scales low, all high, or mixed
        pools = [E8M0_LOW, E8M0_HIGH, E8M0_EXTREME]
        for e in range(E):
            for n in range(N):
                pool = pools[int(rng.choice(3, p=[0.3, 0.2, 0.5]))]
                scales[e, n] = rng.choice(pool, size=K // 32)
        note.append("e8m0-extreme")
    if nan_ok and rng.random() < 0.1:
        scales.reshape(-1)[rng.integers(0, scales.size)] = 255
        note.append("e8m0-nan")
    return ref.pack_e2m1(codes), scales, note


def gen_grouped_matmul_mxfp4(rng, seed):
    M = _T(rng)
    N = int(_pick(rng, [1, 2, 5, 16, 33, 64]))
    K = int(_pick(rng, [32, 64, 96, 160, 256]))
    E = min(_E(rng), max(1, 40000 // (N * K)))
    F = _dtype(rng)
    lhs, notes = _lowp_lhs(rng, M, K, F, 32)
    rhs, scales, wn = _mxfp4_weights(rng, E, N, K, extreme=rng.random() < 0.4)
    off, onote = _offsets(rng, M, E)
    inputs = [
        Tensor("lhs", F, lhs, rng.random() < 0.5),
        Tensor("rhs", "i8", rhs),
        Tensor("offsets", "i32", off),
    ]
    if rng.random() < 0.35:
        inputs.append(Tensor("bias", F, _floats(rng, (E, N), F)))
    inputs.append(Tensor("rhs_scale", "f8E8M0FNU", scales))
    attrs = {"transpose_rhs": True, "weight_format": "mxfp4"}
    sf = _scale_fmt(rng, False)
    if sf:
        attrs["scale_fmt"] = sf
    O = _pick(rng, [F, "f32"])
    note = " ".join([onote] + sorted(set(notes)) + wn)
    return Case("grouped_matmul", seed, inputs, attrs, [O], note, gen="grouped_matmul_mxfp4")


def _ffn_lowp(rng, seed, fmt, gen):
    """moe.ffn with weight_format `fmt`: mxfp4 gpt-oss-like (softmax top-k
    normalized, expert biases, interleaved swiglu with alpha / limit /
    up_bias), fp8_block DeepSeek-like (softmax top-k or grouped sigmoid
    routing, concat GLU, ue8m0 or f32 activation scales)."""
    fp8 = fmt == "fp8_block"
    if rng.random() < 0.75:
        E = int(_pick(rng, [2, 3, 4, 6, 8]))
        style = "softmax_norm" if not fp8 or rng.random() < 0.5 else "softmax_nonorm"
        attrs = {"scoring": "softmax", "normalize": style == "softmax_norm"}
        k = int(rng.integers(1, min(E, 4) + 1))
        has_bias = False
    else:
        style, E, k, attrs, has_bias = _route_config(rng)
    T = _T(rng)
    if fp8:  # E x (2I x H + H x I) bytes of weights: 150 KB at most
        HI = [(h, i) for h in (16, 48, 144) for i in (8, 40, 72, 136) if E * 3 * h * i <= 150000]
        H, I = HI[int(rng.integers(0, len(HI)))]
    else:
        H = int(_pick(rng, [32, 64]))
        I = int(_pick(rng, [32, 64]))
    F = _dtype(rng)
    x = _floats(rng, (T, H), F)
    if T and rng.random() < 0.2:
        x[rng.integers(0, T)] = 0.0  # amax floor (fp8)
    LF = "f32" if F != "f32" and rng.random() < 0.4 else F
    logits = _logits(rng, T, E, LF, attrs["scoring"], nonfinite=rng.random() < 0.1)
    dyn = rng.random() < 0.5
    inputs = [Tensor("x", F, x, dyn), Tensor("logits", LF, logits, dyn)]
    notes = [style]
    if fp8:
        # Weights filling the e4m3 range, block scales bringing them to ~1/sqrt(K).
        w_up = ref.encode_e4m3(ref.round_to_e4m3(rng.normal(0, 64.0, size=(E, 2 * I, H))))
        w_down = ref.encode_e4m3(ref.round_to_e4m3(rng.normal(0, 64.0, size=(E, H, I))))
        s_up = ref.round_to(
            2.0 ** rng.uniform(-0.5, 0.5, size=(E, -(-2 * I // 128), -(-H // 128)))
            / (64 * np.sqrt(H)),
            "f32",
        )
        s_down = ref.round_to(
            2.0 ** rng.uniform(-0.5, 0.5, size=(E, -(-H // 128), -(-I // 128))) / (64 * np.sqrt(I)),
            "f32",
        )
        WT, ST = "f8E4M3FN", "f32"
    else:
        # e2m1 (mean |v| ~ 2.3) times 2^-6 .. 2^-2
        w_up, s_up, _ = _mxfp4_weights(rng, E, 2 * I, H, False, (121, 126), False)
        w_down, s_down, _ = _mxfp4_weights(rng, E, H, I, False, (121, 126), False)
        WT, ST = "i8", "f8E8M0FNU"
    inputs += [Tensor("w_up", WT, w_up), Tensor("w_down", WT, w_down)]
    if has_bias:
        inputs.append(Tensor("bias", "f32", ref.round_to(rng.normal(0, 0.5, size=E), "f32")))
    if rng.random() < (0.85 if not fp8 else 0.25):
        inputs.append(Tensor("w_up_bias", F, _floats(rng, (E, 2 * I), F, scale=0.5)))
        inputs.append(Tensor("w_down_bias", F, _floats(rng, (E, H), F, scale=0.5)))
    inputs += [Tensor("w_up_scale", ST, s_up), Tensor("w_down_scale", ST, s_down)]
    attrs["k"] = k
    if rng.random() < 0.7:
        if fp8:
            attrs.update(activation="silu", layout="concat")
        else:
            attrs.update(activation="silu", layout="interleaved")
            attrs.update(alpha=_f32(1.702), limit=7.0, up_bias=1.0)
    else:
        attrs.update(_glu_attrs(rng))
    attrs["transpose_weights"] = True
    attrs["weight_format"] = fmt
    sf = _scale_fmt(rng, fp8)
    if sf:
        attrs["scale_fmt"] = sf
    return Case("ffn", seed, inputs, attrs, [F], " ".join(notes), gen=gen)


def gen_ffn_fp8(rng, seed):
    return _ffn_lowp(rng, seed, "fp8_block", "ffn_fp8")


def gen_ffn_mxfp4(rng, seed):
    return _ffn_lowp(rng, seed, "mxfp4", "ffn_mxfp4")


GENERATORS = {op: globals()["gen_" + op] for op in OPS + LOWP_OPS}


def make_case(op, seed):
    if op not in GENERATORS:
        raise KeyError("unknown op %r (known: %s)" % (op, ", ".join(GENERATORS)))
    return GENERATORS[op](_rng(op, seed), seed)


if __name__ == "__main__":
    import sys

    for key in sys.argv[1:]:
        op, s = key.split(":")
        print(make_case(op, int(s)).describe())
