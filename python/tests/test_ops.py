"""Every public op built with the typed builders: verified, printed and
re-parsed, compiled for the CPU and compared with the numpy reference
(test/Differential/reference.py), in f32 and bf16, with static and dynamic T.
"""

import numpy as np
import pytest

from moe_mlir import BuildError, FunctionBuilder, Module, TensorType
from helpers import R, assert_close, assert_equal_ints, rand, round_trip, to_f64

FLOATS = ["f32", "bf16"]
DYN = [False, True]


def build(inputs, body, name="f"):
    """A verified, round-tripped module whose function `name` takes
    `inputs` and returns what body(f, *args) returns."""
    m = Module()
    with FunctionBuilder(m, name, inputs) as f:
        out = body(f, *f.args)
        f.ret(*(out if isinstance(out, tuple) else (out,)))
    m.verify()
    round_trip(m)
    return m


def run(m, *args, name="f", **kw):
    return m.compile_cpu(**kw).call(name, *args)


def T_(dyn, t):
    return None if dyn else t


def distinct_ids(rng, T, k, E, bad=False):
    ids = np.stack([rng.permutation(E)[:k] for _ in range(T)]).astype(np.int32)
    if bad and T:
        ids[0, -1] = -1  # not local
        ids[-1, 0] = E + 3  # out of range
    return ids


# ----------------------------------------------------------------------------
# Routing
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dyn", DYN)
def test_topk(rng, dtype, dyn):
    T, E, k = 5, 8, 3
    x = rand(rng, (T, E), dtype)
    x[0, 5] = x[0, 2]  # a tie: lower index first
    x[1, 3] = np.nan  # NaN ranks last
    m = build([TensorType([T_(dyn, T), E], dtype)], lambda f, a: f.topk(a, k=k))
    assert m.functions["f"].results == (
        TensorType([T_(dyn, T), k], dtype),
        TensorType([T_(dyn, T), k], "i32"),
    )
    values, ids = run(m, x)
    want_v, want_i = R.topk(to_f64(x), k)
    assert_equal_ints(ids, want_i, "indices")
    assert_close(values, want_v, dtype, exact=True, name="values")


ROUTES = {
    "softmax-normalize": dict(k=2, scoring="softmax", normalize=True),
    "softmax-groups-max": dict(k=3, scoring="softmax", n_group=4, topk_group=2, group_score="max"),
    "deepseek": dict(
        k=3,
        scoring="sigmoid",
        normalize=True,
        n_group=4,
        topk_group=2,
        group_score="top2_sum",
        scaling=2.5,
        bias=True,
    ),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", sorted(ROUTES))
def test_route(rng, dtype, variant):
    T, E = 7, 8
    attrs = dict(ROUTES[variant])
    with_bias = attrs.pop("bias", False)
    inputs = [TensorType([None, E], dtype)]
    if with_bias:
        inputs.append(TensorType([E], "f32"))
    m = build(inputs, lambda f, lg, *b: f.route(lg, *b, **attrs))
    logits = rand(rng, (T, E), dtype, 2.0)
    args = [logits]
    bias = None
    if with_bias:
        bias = rand(rng, (E,), "f32", 0.1)
        args.append(bias)
    weights, ids = run(m, *args)
    assert weights.dtype == np.float32 and ids.dtype == np.int32
    k = attrs["k"]
    ng, tg = attrs.get("n_group", 1), attrs.get("topk_group", 1)
    gs = attrs.get("group_score", "max")
    _, ref_ids, _, s, c = R.route(
        to_f64(logits),
        k,
        attrs["scoring"],
        attrs.get("normalize", False),
        ng,
        tg,
        gs,
        attrs.get("scaling", 1.0),
        bias,
    )
    want_w = np.zeros((T, k))
    for t in range(T):
        if not np.array_equal(ids[t], ref_ids[t]):
            assert R.route_ids_acceptable(s[t], c[t], ids[t], k, ng, tg, gs), (
                "row %d: got %s want %s" % (t, ids[t], ref_ids[t])
            )
        want_w[t] = R.route_weights(
            s[t], ids[t], attrs.get("normalize", False), attrs.get("scaling", 1.0)
        )
    assert_close(weights, want_w, "f32", name="weights")


def test_route_weights_dtype(rng):
    m = build(
        [TensorType([4, 8], "bf16")],
        lambda f, lg: f.route(lg, k=2, scoring="softmax", weights_dtype="bf16"),
    )
    assert m.functions["f"].results[0] == TensorType([4, 2], "bf16")


# ----------------------------------------------------------------------------
# Dispatch metadata
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("dyn", DYN)
def test_cumsum_get_indices_get_indptr(rng, dyn):
    T, k, E = 6, 2, 5
    ids = distinct_ids(rng, T, k, E, bad=True)
    cs_len = None if dyn else E * T

    m = build([TensorType([T_(dyn, T), k], "i32")], lambda f, i: f.cumsum(i, num_experts=E))
    assert m.functions["f"].results == (TensorType([cs_len], "i32"),)
    cs = run(m, ids)
    want_cs = R.cumsum(ids, E)
    assert_equal_ints(cs, want_cs, "cumsum")

    m = build(
        [TensorType([cs_len], "i32"), TensorType([T_(dyn, T), k], "i32")],
        lambda f, c, i: f.get_indices(c, i),
    )
    rev, tok = run(m, want_cs.astype(np.int32), ids)
    want_rev, want_tok = R.get_indices(want_cs, ids)
    assert_equal_ints(rev, want_rev, "reverse_indices")
    assert_equal_ints(tok, want_tok, "token_indices")

    m = build(
        [TensorType([cs_len], "i32")],
        lambda f, c: (
            f.get_indptr(c, num_experts=E),
            f.get_indptr(c, num_experts=E, inclusive=True, dtype="i64"),
        ),
    )
    assert m.functions["f"].results == (TensorType([E + 1], "i32"), TensorType([E], "i64"))
    exclusive, inclusive = run(m, want_cs.astype(np.int32))
    assert inclusive.dtype == np.int64
    assert_equal_ints(exclusive, R.get_indptr(want_cs, E, False), "exclusive")
    assert_equal_ints(inclusive, R.get_indptr(want_cs, E, True), "inclusive")


# ----------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dyn", DYN)
def test_gather_scatter(rng, dtype, dyn):
    T, H, M = 4, 6, 7
    x = rand(rng, (T, H), dtype)
    gidx = np.array([3, 0, -1, 2, 4, 1, 3], dtype=np.int32)  # -1, 4: zero rows
    rows = rand(rng, (M, H), dtype)
    sidx = np.array([6, 5, 4, 3, 9, 1, 0], dtype=np.int32)  # 9 dropped
    m = build(
        [
            TensorType([T_(dyn, T), H], dtype),
            TensorType([T_(dyn, M)], "i32"),
            TensorType([T_(dyn, M), H], dtype),
            TensorType([T_(dyn, M)], "i32"),
        ],
        lambda f, a, gi, r, si: (f.gather(a, gi), f.scatter(r, si)),
    )
    gathered, scattered = run(m, x, gidx, rows, sidx)
    assert_close(gathered, R.gather(to_f64(x), gidx), dtype, exact=True)
    assert_close(scattered, R.scatter(to_f64(rows), sidx), dtype, exact=True)


# ----------------------------------------------------------------------------
# Expert compute
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", ["plain", "transpose-bias", "f32-out"])
def test_grouped_matmul(rng, dtype, variant):
    M, K, N, E = 9, 8, 6, 3
    offsets = np.array([1, 4, 4, 8], dtype=np.int32)  # row 0 and 8 outside
    transpose = variant == "transpose-bias"
    lhs = rand(rng, (M, K), dtype)
    rhs = rand(rng, (E, N, K) if transpose else (E, K, N), dtype)
    inputs = [
        TensorType([None, K], dtype),
        TensorType(list(rhs.shape), dtype),
        TensorType([E + 1], "i32"),
    ]
    args = [lhs, rhs, offsets]
    bias = None
    if transpose:
        bias = rand(rng, (E, N), dtype)
        inputs.append(TensorType([E, N], dtype))
        args.append(bias)
    out_dtype = "f32" if variant == "f32-out" else None
    m = build(
        inputs, lambda f, *a: f.grouped_matmul(*a, transpose_rhs=transpose, out_dtype=out_dtype)
    )
    got = run(m, *args)
    val, sc, defined = R.grouped_matmul(
        to_f64(lhs), to_f64(rhs), offsets, None if bias is None else to_f64(bias), transpose
    )
    assert_close(got, val, out_dtype or dtype, sc, defined[:, None])


GLUS = {
    "silu-concat": dict(activation="silu", layout="concat"),
    "swiglu-oss": dict(
        activation="silu", layout="interleaved", alpha=1.702, limit=7.0, up_bias=1.0
    ),
    "gelu": dict(activation="gelu", layout="concat"),
    "gelu_tanh-interleaved": dict(activation="gelu_tanh", layout="interleaved"),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", sorted(GLUS))
def test_glu(rng, dtype, variant):
    attrs = GLUS[variant]
    x = rand(rng, (5, 12), dtype, 3.0)
    m = build([TensorType([None, 12], dtype)], lambda f, a: f.glu(a, **attrs))
    assert m.functions["f"].results == (TensorType([None, 6], dtype),)
    got = run(m, x)
    val, sc = R.glu(
        to_f64(x),
        attrs["activation"],
        attrs["layout"],
        attrs.get("alpha", 1.0),
        attrs.get("limit"),
        attrs.get("up_bias", 0.0),
    )
    assert_close(got, val, dtype, sc)


# ----------------------------------------------------------------------------
# Combine and converters
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dyn", DYN)
def test_combine(rng, dtype, dyn):
    T, k, H = 4, 3, 5
    x = rand(rng, (T, k, H), dtype)
    w = rand(rng, (T, k), "f32")
    m = build(
        [TensorType([T_(dyn, T), k, H], dtype), TensorType([T_(dyn, T), k], "f32")],
        lambda f, a, b: (f.combine(a, b), f.combine(a)),
    )
    weighted, plain = run(m, x, w)
    val, sc = R.combine(to_f64(x), w)
    assert_close(weighted, val, dtype, sc)
    val, sc = R.combine(to_f64(x))
    assert_close(plain, val, dtype, sc)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dyn", DYN)
def test_multihot_round_trip(rng, dtype, dyn):
    T, k, E = 5, 3, 8
    ids = distinct_ids(rng, T, k, E, bad=True)
    ids[2, 2] = ids[2, 0]  # a duplicate: the later slot wins
    probs = rand(rng, (T, k), dtype)
    m = build(
        [TensorType([T_(dyn, T), k], "i32"), TensorType([T_(dyn, T), k], dtype)],
        lambda f, i, p: f.indices_to_multihot(i, p, num_experts=E),
    )
    assert [t.dtype for t in m.functions["f"].results] == ["i1", dtype, "i32"]
    mh, pm, pos = run(m, ids, probs)
    assert mh.dtype == np.bool_
    want_mh, want_pm, want_pos = R.indices_to_multihot(ids, to_f64(probs), E)
    assert_equal_ints(mh, want_mh, "multihot")
    assert_close(pm, want_pm, dtype, exact=True, name="probs_multihot")
    assert_equal_ints(pos, want_pos, "position_map")

    m = build(
        [TensorType([T_(dyn, T), E], dtype), TensorType([T_(dyn, T), E], "i32")],
        lambda f, p, q: f.multihot_to_indices(p, q, k=k),
    )
    back = run(m, pm, pos)
    assert_close(back, R.multihot_to_indices(to_f64(pm), pos, k), dtype, exact=True)


@pytest.mark.parametrize("dyn", DYN)
def test_expand_slots(rng, dyn):
    x = rand(rng, (6, 4), "f32")
    order = np.array([5, 4, 3, 2, 1, 0], dtype=np.int32)
    # Expands a fresh tensor: a function returning a view of its argument
    # needs a copy the CPU pipeline cannot lower yet (test_cpu.py).
    m = build(
        [TensorType([T_(dyn, 6), 4], "f32"), TensorType([T_(dyn, 6)], "i32")],
        lambda f, a, i: f.expand_slots(f.gather(a, i), k=2),
    )
    assert m.functions["f"].results == (TensorType([T_(dyn, 3), 2, 4], "f32"),)
    np.testing.assert_array_equal(run(m, x, order), x[order].reshape(3, 2, 4))
    m = Module()
    with pytest.raises(BuildError, match="not a multiple of k"):
        with FunctionBuilder(m, "g", [TensorType([5, 4], "f32")]) as f:
            f.expand_slots(f.args[0], k=2)


# ----------------------------------------------------------------------------
# The composite and the chain it stands for
# ----------------------------------------------------------------------------


def ffn_inputs(rng, T, H, I, E, dtype, transpose=False, bias=False):
    x = rand(rng, (T, H), dtype)
    logits = rand(rng, (T, E), dtype, 2.0)
    up = rand(rng, (E, 2 * I, H) if transpose else (E, H, 2 * I), dtype, 1.0 / np.sqrt(H))
    down = rand(rng, (E, H, I) if transpose else (E, I, H), dtype, 1.0 / np.sqrt(I))
    args = [x, logits, up, down]
    if bias:
        args.append(rand(rng, (E,), "f32", 0.1))
    return args


def check_ffn(got, args, dtype, attrs):
    kw = {n: v for n, v in attrs.items() if n not in ("k", "scoring")}
    bias = args[4] if len(args) > 4 else None
    y, sc, defined = R.ffn(
        *[to_f64(a) for a in args[:4]], dtype, attrs["k"], attrs["scoring"], bias=bias, **kw
    )
    assert_close(got, y, dtype, sc, defined[:, None])


FFNS = {
    "mixtral-like": dict(
        k=2, scoring="softmax", normalize=True, activation="silu", layout="concat"
    ),
    "deepseek-like": dict(
        k=2,
        scoring="sigmoid",
        normalize=True,
        n_group=4,
        topk_group=2,
        group_score="top2_sum",
        scaling=2.5,
        activation="silu",
        layout="concat",
        transpose_weights=True,
    ),
    "gpt-oss-like": dict(
        k=2,
        scoring="softmax",
        normalize=True,
        activation="silu",
        layout="interleaved",
        alpha=1.702,
        limit=7.0,
        up_bias=1.0,
    ),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", sorted(FFNS))
def test_ffn(rng, dtype, variant):
    T, H, I, E = 6, 16, 8, 8
    attrs = FFNS[variant]
    transpose = attrs.get("transpose_weights", False)
    with_bias = variant == "deepseek-like"
    args = ffn_inputs(rng, T, H, I, E, dtype, transpose, with_bias)
    inputs = [
        TensorType([None, H], dtype),
        TensorType([None, E], dtype),
        TensorType(list(args[2].shape), dtype),
        TensorType(list(args[3].shape), dtype),
    ]
    if with_bias:
        inputs.append(TensorType([E], "f32"))
    m = build(inputs, lambda f, x, lg, up, down, *b: f.ffn(x, lg, up, down, *b, **attrs))
    check_ffn(run(m, *args), args, dtype, attrs)
    # The same through --moe-decompose --moe-fuse.
    check_ffn(run(m, *args, pipeline="moe-decompose,moe-fuse"), args, dtype, attrs)


@pytest.mark.parametrize("variant", ["mixtral-like", "deepseek-like"])
def test_more_than_1024_experts(rng, variant):
    """A field bug class (docs/FieldBugs.md): more experts than one
    1024-thread block scans. E = 2048, k = 8, fused and unfused, against
    the float64 reference (routing ids compared through it, offsets of
    mostly empty experts)."""
    T, H, I, E = 300, 16, 8, 2048
    attrs = dict(FFNS[variant], k=8)
    if variant == "deepseek-like":
        attrs.update(n_group=16, topk_group=4)
    transpose = attrs.get("transpose_weights", False)
    with_bias = variant == "deepseek-like"
    args = ffn_inputs(rng, T, H, I, E, "f32", transpose, with_bias)
    inputs = [TensorType([None, H], "f32"), TensorType([None, E], "f32")]
    inputs += [TensorType(list(a.shape), "f32") for a in args[2:]]
    m = build(inputs, lambda f, x, lg, up, down, *b: f.ffn(x, lg, up, down, *b, **attrs))
    check_ffn(run(m, *args), args, "f32", attrs)
    check_ffn(run(m, *args, pipeline="moe-decompose,moe-fuse"), args, "f32", attrs)


def test_primitive_chain_matches_ffn(rng):
    """route -> cumsum -> get_indices -> get_indptr -> gather -> matmul ->
    glu -> matmul -> scatter -> expand -> combine, built op by op, computes
    moe.ffn (docs/Contract.md, section 3)."""
    T, H, I, E, k, dtype = 5, 16, 8, 8, 2, "bf16"
    args = ffn_inputs(rng, T, H, I, E, dtype)

    def chain(f, x, logits, w_up, w_down):
        w, ids = f.route(logits, k=k, scoring="softmax", normalize=True)
        cs = f.cumsum(ids, num_experts=E)
        rev, tok = f.get_indices(cs, ids)
        off = f.get_indptr(cs, num_experts=E)
        h = f.grouped_matmul(f.gather(x, tok), w_up, off)
        a = f.glu(h, activation="silu", layout="concat")
        d = f.grouped_matmul(a, w_down, off)
        return f.combine(f.expand_slots(f.scatter(d, rev), k=k), w)

    m = build(
        [
            TensorType([None, H], dtype),
            TensorType([None, E], dtype),
            TensorType([E, H, 2 * I], dtype),
            TensorType([E, I, H], dtype),
        ],
        chain,
    )
    check_ffn(
        run(m, *args),
        args,
        dtype,
        dict(k=k, scoring="softmax", normalize=True, activation="silu", layout="concat"),
    )


def test_zero_tokens(rng):
    args = ffn_inputs(rng, 0, 16, 8, 8, "f32")
    m = build(
        [
            TensorType([None, 16], "f32"),
            TensorType([None, 8], "f32"),
            TensorType([8, 16, 16], "f32"),
            TensorType([8, 8, 16], "f32"),
        ],
        lambda f, *a: f.ffn(*a, **FFNS["mixtral-like"]),
    )
    y = run(m, *args)
    assert y.shape == (0, 16)
