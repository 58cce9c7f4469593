#!/usr/bin/env python3
"""The GPU test cases: one table, three users.

* `gen_mlir.py` writes `cases/ops.mlir`, `cases/backward.mlir` and
  `cases/ffn_<model>.mlir` from it,
* `run_gpu_checks.py` calls the compiled functions with inputs generated here
  and compares them with the float64 numpy reference (`reference.py` of
  test/Differential) through `check_op()` below,
* `torch_reference.py`'s self-check reuses the same generators.

Needs numpy only (no torch), so everything here also runs on the build
machine (`selftest_local.py`).

A dimension is an int (static) or a string expression in `T` (dynamic in
the MLIR signature, `?`), e.g. "2*T+3". Function arguments are the case's
inputs in order, then one out-param per result (the AOT ABI).
"""

import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (HERE, os.path.join(HERE, "..", "Differential")):
    if os.path.exists(os.path.join(_p, "reference.py")):
        if _p not in sys.path:
            sys.path.insert(0, _p)
        break
import op_syntax as OS  # noqa: E402
import reference as R  # noqa: E402

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
FLOAT_TYPES = ("f32", "bf16", "f16")
# Relative-error bound ||got - ref|| / ||ref|| per result element type.
REL_TOL = {"f32": 1e-5, "bf16": 1e-2, "f16": 2e-3}


def f32(v):
    return float(np.float32(v))


# ----------------------------------------------------------------------------
# Shapes and signatures
# ----------------------------------------------------------------------------


def eval_dim(d, T):
    if isinstance(d, int):
        return d
    v = eval(d, {"__builtins__": {}}, {"T": T})  # noqa: S307 - our own table
    return int(v)


class Arg:
    """One function argument / result: name (also its SSA name), element
    type, shape (ints and T-expressions)."""

    def __init__(self, name, dtype, shape):
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)

    def shape_at(self, T):
        return tuple(eval_dim(d, T) for d in self.shape)

    @property
    def mlir_type(self):
        dims = ["?" if isinstance(d, str) else str(d) for d in self.shape]
        return "tensor<%s>" % "x".join(dims + [self.dtype])

    def __repr__(self):
        return "%s:%s" % (self.name, self.mlir_type)


class OpCase:
    """One function of cases/<stem>.mlir (ops.mlir, backward.mlir): a
    single moe op."""

    def __init__(self, name, op, attrs, inputs, outputs, stem="ops"):
        self.name = name
        self.op = op
        self.attrs = dict(attrs)
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.stem = stem

    def inp(self, name):
        for a in self.inputs:
            if a.name == name:
                return a
        return None

    def has(self, name):
        return self.inp(name) is not None

    def mlir(self):
        return func_text(self.name, self.inputs, [(self.op_text(), self.outputs)])

    def op_text(self):
        return op_text(self.op, self.attrs, self.inputs, self.outputs)


def func_text(name, inputs, ops):
    """A func.func with `ops`: [(op text, [result Args])]; returns all results."""
    args = ", ".join("%%%s: %s" % (a.name, a.mlir_type) for a in inputs)
    results = [r for _, rs in ops for r in rs]
    rtys = [r.mlir_type for r in results]
    ret = rtys[0] if len(rtys) == 1 else "(%s)" % ", ".join(rtys)
    lines = ["func.func @%s(%s) -> %s attributes {llvm.emit_c_interface} {" % (name, args, ret)]
    for text, _ in ops:
        lines.append("  " + text)
    lines.append("  return %s : %s" % (", ".join("%" + r.name for r in results), ", ".join(rtys)))
    lines.append("}")
    return "\n".join(lines)


def _fattr(v):
    return "%s : f32" % repr(float(v))


# Attributes that differ from their defaults only (op_syntax.py).
SYNTAX = OS.Syntax(f32=_fattr)


def op_text(op, a, inputs, outputs):
    """`op` on operands `inputs` (Args, SSA names %<name>) with results
    `outputs`, in custom syntax."""
    return SYNTAX.op(
        op,
        a,
        {x.name: "%" + x.name for x in inputs},
        {x.name: x.mlir_type for x in inputs},
        ", ".join("%" + r.name for r in outputs),
        [r.mlir_type for r in outputs],
    )


# ----------------------------------------------------------------------------
# The op functions of cases/ops.mlir
# ----------------------------------------------------------------------------

A = Arg
OP_CASES = []


def _case(name, op, attrs, inputs, outputs, stem="ops"):
    OP_CASES.append(OpCase(name, op, attrs, inputs, outputs, stem))


# moe.topk
for _n, _F, _E, _k in (
    ("topk_f32", "f32", 32, 4),
    ("topk_bf16", "bf16", 64, 8),
    ("topk_f32_k_eq_e", "f32", 8, 8),
):
    _case(
        _n,
        "topk",
        {"k": _k},
        [A("input", _F, ("T", _E))],
        [A("values", _F, ("T", _k)), A("indices", "i32", ("T", _k))],
    )

# moe.route
_ROUTES = [
    # name, F, W, E, k, bias, attrs
    ("route_softmax_norm_f32", "f32", "f32", 32, 4, False, dict(scoring="softmax", normalize=True)),
    (
        "route_softmax_scaled_bf16",
        "bf16",
        "bf16",
        64,
        6,
        False,
        dict(scoring="softmax", scaling=1.5),
    ),
    (
        "route_sigmoid_bias_top2_sum_bf16",
        "bf16",
        "f32",
        64,
        8,
        True,
        dict(
            scoring="sigmoid",
            normalize=True,
            n_group=8,
            topk_group=4,
            group_score="top2_sum",
            scaling=2.5,
        ),
    ),
    (
        "route_softmax_group_max_f32",
        "f32",
        "f32",
        32,
        3,
        False,
        dict(scoring="softmax", n_group=4, topk_group=2),
    ),
    ("route_sigmoid_bias_f32", "f32", "f32", 16, 2, True, dict(scoring="sigmoid")),
    (
        "route_softmax_bias_group_max_norm_bf16",
        "bf16",
        "f32",
        32,
        4,
        True,
        dict(scoring="softmax", normalize=True, n_group=8, topk_group=3),
    ),
]
for _n, _F, _W, _E, _k, _b, _a in _ROUTES:
    _ins = [A("logits", _F, ("T", _E))] + ([A("bias", "f32", (_E,))] if _b else [])
    _case(
        _n,
        "route",
        dict(_a, k=_k),
        _ins,
        [A("weights", _W, ("T", _k)), A("indices", "i32", ("T", _k))],
    )

# moe.cumsum, moe.get_indices, moe.get_indptr
for _E, _k in ((8, 2), (32, 4)):
    _case(
        "cumsum_e%d_k%d" % (_E, _k),
        "cumsum",
        {"num_experts": _E},
        [A("indices", "i32", ("T", _k))],
        [A("cumsum", "i32", ("%d*T" % _E,))],
    )
    _case(
        "get_indices_e%d_k%d" % (_E, _k),
        "get_indices",
        {"num_experts": _E},
        [A("cumsum", "i32", ("%d*T" % _E,)), A("indices", "i32", ("T", _k))],
        [A("reverse_indices", "i32", ("%d*T" % _k,)), A("token_indices", "i32", ("%d*T" % _k,))],
    )
for _n, _E, _incl, _R in (
    ("get_indptr_excl_i32", 16, False, "i32"),
    ("get_indptr_incl_i64", 16, True, "i64"),
    ("get_indptr_excl_i64", 8, False, "i64"),
    ("get_indptr_incl_i32", 8, True, "i32"),
):
    _case(
        _n,
        "get_indptr",
        {"num_experts": _E, "inclusive": _incl, "k": 2},
        [A("cumsum", "i32", ("%d*T" % _E,))],
        [A("result", _R, (_E if _incl else _E + 1,))],
    )

# moe.gather / moe.scatter
_case(
    "gather_f32",
    "gather",
    {},
    [A("input", "f32", ("T", 128)), A("indices", "i32", ("2*T+3",))],
    [A("result", "f32", ("2*T+3", 128))],
)
_case(
    "gather_bf16",
    "gather",
    {},
    [A("input", "bf16", ("T", 256)), A("indices", "i32", ("4*T",))],
    [A("result", "bf16", ("4*T", 256))],
)
_case(
    "scatter_f32",
    "scatter",
    {},
    [A("input", "f32", ("2*T", 128)), A("indices", "i32", ("2*T",))],
    [A("result", "f32", ("2*T", 128))],
)
_case(
    "scatter_bf16",
    "scatter",
    {},
    [A("input", "bf16", ("T", 256)), A("indices", "i32", ("T",))],
    [A("result", "bf16", ("T", 256))],
)
# Duplicate destinations: the later row wins (MoeOps.td).
_case(
    "scatter_dup_f32",
    "scatter",
    {"dups": True},
    [A("input", "f32", ("2*T", 64)), A("indices", "i32", ("2*T",))],
    [A("result", "f32", ("2*T", 64))],
)

# moe.grouped_matmul
_GMM = [
    # name, F, O, M, E, K, N, transpose, bias
    ("grouped_matmul_f32", "f32", "f32", "2*T", 8, 64, 128, False, False),
    ("grouped_matmul_bf16_f32out", "bf16", "f32", "2*T", 8, 128, 64, False, False),
    ("grouped_matmul_bf16", "bf16", "bf16", "4*T", 16, 64, 96, False, False),
    ("grouped_matmul_transpose_bias_bf16", "bf16", "bf16", "2*T", 8, 64, 96, True, True),
    ("grouped_matmul_transpose_f32", "f32", "f32", "T", 4, 256, 32, True, False),
    ("grouped_matmul_bias_f32", "f32", "f32", "2*T", 8, 32, 64, False, True),
]
for _n, _F, _O, _M, _E, _K, _N, _tr, _b in _GMM:
    _ins = [
        A("lhs", _F, (_M, _K)),
        A("rhs", _F, (_E, _N, _K) if _tr else (_E, _K, _N)),
        A("offsets", "i32", (_E + 1,)),
    ]
    if _b:
        _ins.append(A("bias", _F, (_E, _N)))
    _case(_n, "grouped_matmul", {"transpose_rhs": _tr}, _ins, [A("result", _O, (_M, _N))])

# moe.glu
_GLU = [
    ("glu_silu_concat_bf16", "bf16", 128, dict(activation="silu", layout="concat")),
    ("glu_silu_concat_f32", "f32", 64, dict(activation="silu", layout="concat")),
    (
        "glu_swiglu_interleaved_f32",
        "f32",
        64,
        dict(activation="silu", layout="interleaved", alpha=1.702, limit=7.0, up_bias=1.0),
    ),
    (
        "glu_swiglu_interleaved_bf16",
        "bf16",
        128,
        dict(activation="silu", layout="interleaved", alpha=1.702, limit=7.0, up_bias=1.0),
    ),
    (
        "glu_silu_alpha_limit_concat_f32",
        "f32",
        32,
        dict(activation="silu", layout="concat", alpha=0.5, limit=2.0),
    ),
    ("glu_gelu_concat_f32", "f32", 64, dict(activation="gelu", layout="concat")),
    (
        "glu_gelu_interleaved_up_bias_bf16",
        "bf16",
        32,
        dict(activation="gelu", layout="interleaved", up_bias=-0.5),
    ),
    ("glu_gelu_tanh_concat_bf16", "bf16", 64, dict(activation="gelu_tanh", layout="concat")),
    (
        "glu_gelu_tanh_interleaved_limit_f32",
        "f32",
        32,
        dict(activation="gelu_tanh", layout="interleaved", limit=3.0),
    ),
]
for _n, _F, _N, _a in _GLU:
    _case(_n, "glu", _a, [A("input", _F, ("T", 2 * _N))], [A("result", _F, ("T", _N))])

# moe.combine
_case(
    "combine_weighted_bf16_f32w",
    "combine",
    {},
    [A("input", "bf16", ("T", 2, 256)), A("weights", "f32", ("T", 2))],
    [A("result", "bf16", ("T", 256))],
)
_case(
    "combine_unweighted_f32",
    "combine",
    {},
    [A("input", "f32", ("T", 4, 64))],
    [A("result", "f32", ("T", 64))],
)
_case(
    "combine_weighted_f32_k8",
    "combine",
    {},
    [A("input", "f32", ("T", 8, 128)), A("weights", "f32", ("T", 8))],
    [A("result", "f32", ("T", 128))],
)
_case(
    "combine_weighted_bf16_bf16w",
    "combine",
    {},
    [A("input", "bf16", ("T", 4, 64)), A("weights", "bf16", ("T", 4))],
    [A("result", "bf16", ("T", 64))],
)

# moe.indices_to_multihot / moe.multihot_to_indices
for _n, _F, _E, _k in (
    ("indices_to_multihot_f32", "f32", 16, 4),
    ("indices_to_multihot_bf16", "bf16", 32, 8),
):
    _case(
        _n,
        "indices_to_multihot",
        {"num_experts": _E},
        [A("indices", "i32", ("T", _k)), A("probs", _F, ("T", _k))],
        [
            A("multihot", "i1", ("T", _E)),
            A("probs_multihot", _F, ("T", _E)),
            A("position_map", "i32", ("T", _E)),
        ],
    )
for _n, _F, _E, _k in (
    ("multihot_to_indices_f32", "f32", 16, 4),
    ("multihot_to_indices_bf16", "bf16", 32, 8),
):
    _case(
        _n,
        "multihot_to_indices",
        {"k": _k},
        [A("probs_multihot", _F, ("T", _E)), A("position_map", "i32", ("T", _E))],
        [A("probs", _F, ("T", _k))],
    )

# moe.dispatch (fused)
for _E, _k in ((8, 2), (32, 4), (128, 8)):
    _case(
        "dispatch_e%d_k%d" % (_E, _k),
        "dispatch",
        {"num_experts": _E},
        [A("indices", "i32", ("T", _k))],
        [
            A("offsets", "i32", (_E + 1,)),
            A("reverse_indices", "i32", ("%d*T" % _k,)),
            A("token_indices", "i32", ("%d*T" % _k,)),
        ],
    )

# moe.expert_gemm (fused)
_SWIGLU = dict(activation="silu", layout="interleaved", alpha=1.702, limit=7.0, up_bias=1.0)
_EG = [
    # name, F, O, E, K, N (gemm), attrs, has (gather, bias, scatter, scale dtype or None)
    ("expert_gemm_plain_bf16", "bf16", "bf16", 8, 64, 128, {}, (False, False, False, None)),
    ("expert_gemm_gather_f32", "f32", "f32", 8, 64, 32, {}, (True, False, False, None)),
    (
        "expert_gemm_gather_glu_bf16",
        "bf16",
        "bf16",
        8,
        64,
        256,
        dict(activation="silu", layout="concat"),
        (True, False, False, None),
    ),
    (
        "expert_gemm_gather_swiglu_bf16",
        "bf16",
        "bf16",
        8,
        64,
        256,
        _SWIGLU,
        (True, False, False, None),
    ),
    (
        "expert_gemm_glu_gelu_f32",
        "f32",
        "f32",
        4,
        64,
        64,
        dict(activation="gelu", layout="concat"),
        (False, False, False, None),
    ),
    ("expert_gemm_scatter_scale_bf16", "bf16", "bf16", 8, 64, 64, {}, (False, False, True, "f32")),
    ("expert_gemm_scatter_f32", "f32", "f32", 8, 64, 32, {}, (False, False, True, None)),
    (
        "expert_gemm_transpose_bias_bf16",
        "bf16",
        "bf16",
        8,
        64,
        32,
        {"transpose_rhs": True},
        (False, True, False, None),
    ),
    (
        "expert_gemm_all_stages_f32out",
        "bf16",
        "f32",
        8,
        64,
        256,
        dict(transpose_rhs=True, activation="silu", layout="concat"),
        (True, True, True, "bf16"),
    ),
    # Hopper (wgmma) engine configurations: bf16, rhs [E, N, K]; K tails
    # (K % 64 != 0), N tails (N % 128 != 0), GLU concat / interleaved,
    # bias, gather, scatter + scale; K % 8 != 0 takes the SIMT engine.
    (
        "expert_gemm_wg_plain_bf16",
        "bf16",
        "bf16",
        8,
        192,
        200,
        {"transpose_rhs": True},
        (False, False, False, None),
    ),
    (
        "expert_gemm_wg_one_expert_bf16",
        "bf16",
        "bf16",
        1,
        128,
        136,
        {"transpose_rhs": True},
        (False, False, False, None),
    ),
    (
        "expert_gemm_wg_many_experts_bf16",
        "bf16",
        "bf16",
        64,
        64,
        64,
        {"transpose_rhs": True},
        (True, False, False, None),
    ),
    (
        "expert_gemm_wg_gather_concat_bf16",
        "bf16",
        "bf16",
        8,
        136,
        144,
        dict(transpose_rhs=True, activation="silu", layout="concat"),
        (True, False, False, None),
    ),
    (
        "expert_gemm_wg_gather_swiglu_bf16",
        "bf16",
        "bf16",
        8,
        64,
        200,
        dict(_SWIGLU, transpose_rhs=True),
        (True, True, False, None),
    ),
    (
        "expert_gemm_wg_scatter_scale_bias_bf16",
        "bf16",
        "bf16",
        8,
        256,
        96,
        {"transpose_rhs": True},
        (False, True, True, "f32"),
    ),
    (
        "expert_gemm_wg_all_stages_f32out",
        "bf16",
        "f32",
        4,
        320,
        512,
        dict(transpose_rhs=True, activation="silu", layout="concat"),
        (True, True, True, "bf16"),
    ),
    (
        "expert_gemm_wg_interleaved_scatter_bf16",
        "bf16",
        "bf16",
        16,
        72,
        264,
        dict(transpose_rhs=True, activation="silu", layout="interleaved"),
        (True, False, True, "f32"),
    ),
    (
        "expert_gemm_wg_k_not_8_bf16",
        "bf16",
        "bf16",
        8,
        100,
        64,
        {"transpose_rhs": True},
        (True, False, False, None),
    ),
    (
        "expert_gemm_wg_f16",
        "f16",
        "f16",
        8,
        128,
        128,
        {"transpose_rhs": True},
        (True, False, True, "f32"),
    ),
    # 2-CTA clusters (rows >= E x 128: T >= 192 here): odd column-tile count
    # (3), row-tile pairs and odd last row tiles, gather + scatter + scale;
    # and the [E, K, N] weights, whose two 64-column boxes the pair splits.
    (
        "expert_gemm_wg_cluster_odd_bf16",
        "bf16",
        "bf16",
        3,
        192,
        320,
        {"transpose_rhs": True},
        (True, False, True, "f32"),
    ),
    ("expert_gemm_wg_cluster_mn_bf16", "bf16", "bf16", 2, 128, 384, {}, (False, True, False, None)),
    # Tiles narrower than 256 where they divide the columns better (the
    # cost model, GemmConfig.cpp): 720 rhs columns take 3 tiles of 240 (the
    # staged epilogue's second pass is 112 columns: 14 chunks per row, 9
    # rows per round of 128 threads), with the interleaved GLU 120 output
    # columns per tile (f32: passes of 64 + 56); a concat GLU's 672 take 3
    # of 224 (halves of 112).
    (
        "expert_gemm_wg_tile240_scatter_bf16",
        "bf16",
        "bf16",
        3,
        192,
        720,
        {"transpose_rhs": True},
        (True, False, True, "f32"),
    ),
    (
        "expert_gemm_wg_tile240_swiglu_f32out",
        "bf16",
        "f32",
        4,
        136,
        720,
        dict(_SWIGLU, transpose_rhs=True),
        (True, True, True, "f32"),
    ),
    (
        "expert_gemm_wg_tile224_concat_bf16",
        "bf16",
        "bf16",
        3,
        128,
        672,
        dict(transpose_rhs=True, activation="silu", layout="concat"),
        (True, False, False, None),
    ),
]
for _n, _F, _O, _E, _K, _N, _a, (_g, _b, _s, _sc) in _EG:
    _tr = _a.get("transpose_rhs", False)
    _Nout = _N // 2 if _a.get("activation") else _N
    _M = "2*T"
    _ins = [A("lhs", _F, ("T" if _g else _M, _K))]
    if _g:
        _ins.append(A("gather", "i32", (_M,)))
    _ins += [A("rhs", _F, (_E, _N, _K) if _tr else (_E, _K, _N)), A("offsets", "i32", (_E + 1,))]
    if _b:
        _ins.append(A("bias", _F, (_E, _N)))
    if _s:
        _ins.append(A("scatter", "i32", (_M,)))
    if _sc:
        _ins.append(A("scale", _sc, (_M,)))
    _case(_n, "expert_gemm", _a, _ins, [A("result", _O, (_M, _Nout))])

# moe.route_dispatch (fused)
_RD = [
    (
        "route_dispatch_softmax_f32",
        "f32",
        "f32",
        32,
        4,
        False,
        dict(scoring="softmax", normalize=True),
    ),
    (
        "route_dispatch_deepseek_bf16",
        "bf16",
        "f32",
        64,
        6,
        True,
        dict(
            scoring="sigmoid",
            normalize=True,
            n_group=8,
            topk_group=4,
            group_score="top2_sum",
            scaling=2.5,
        ),
    ),
    (
        "route_dispatch_softmax_bf16w",
        "bf16",
        "bf16",
        16,
        2,
        False,
        dict(scoring="softmax", normalize=True),
    ),
]
for _n, _F, _W, _E, _k, _b, _a in _RD:
    _ins = [A("logits", _F, ("T", _E))] + ([A("bias", "f32", (_E,))] if _b else [])
    _case(
        _n,
        "route_dispatch",
        dict(_a, k=_k),
        _ins,
        [
            A("weights", _W, ("T", _k)),
            A("indices", "i32", ("T", _k)),
            A("offsets", "i32", (_E + 1,)),
            A("reverse_indices", "i32", ("%d*T" % _k,)),
            A("token_indices", "i32", ("%d*T" % _k,)),
        ],
    )

# The DeepSeek-like layers' routing and GLU: sigmoid scores, 4 groups
# keeping 2 by top2_sum, renormalised, scaled.
DEEPSEEK_LIKE = dict(
    k=4,
    scoring="sigmoid",
    normalize=True,
    n_group=4,
    topk_group=2,
    group_score="top2_sum",
    scaling=2.5,
    activation="silu",
    layout="concat",
)

# moe.ffn at small dims (the model-size layers are in cases/ffn_<model>.mlir)
_FFN_SMALL = [
    (
        "ffn_small_mixtral_like_f32",
        "f32",
        64,
        32,
        8,
        False,
        False,
        dict(k=2, scoring="softmax", normalize=True, activation="silu", layout="concat"),
    ),
    (
        "ffn_small_deepseek_like_bf16",
        "bf16",
        128,
        64,
        16,
        True,
        False,
        DEEPSEEK_LIKE,
    ),
    (
        "ffn_small_gpt_oss_like_bf16",
        "bf16",
        64,
        64,
        8,
        False,
        True,
        dict(
            k=2,
            scoring="softmax",
            normalize=True,
            activation="silu",
            layout="interleaved",
            alpha=1.702,
            limit=7.0,
            up_bias=1.0,
        ),
    ),
    (
        "ffn_small_gelu_f32",
        "f32",
        32,
        16,
        4,
        False,
        False,
        dict(k=1, scoring="softmax", activation="gelu", layout="concat"),
    ),
]
# DeepSeek-V3 routes on f32 logits while its activations are bf16.
_FFN_SMALL.append(("ffn_small_deepseek_like_bf16_f32_logits",) + _FFN_SMALL[1][1:])
# gpt-oss's per-expert matmul biases (expert_bias), both weight layouts.
_FFN_SMALL.append(("ffn_small_gpt_oss_like_bf16_expert_bias",) + _FFN_SMALL[2][1:])
_FFN_SMALL.append(
    ("ffn_small_gpt_oss_like_bf16_expert_bias_nt",)
    + _FFN_SMALL[2][1:6]
    + (False,)
    + _FFN_SMALL[2][7:]
)
_FFN_SMALL.append(("ffn_small_mixtral_like_f32_expert_bias",) + _FFN_SMALL[0][1:])
for _n, _F, _H, _I, _E, _b, _tw, _a in _FFN_SMALL:
    _ins = [
        A("x", _F, ("T", _H)),
        A("logits", "f32" if _n.endswith("_f32_logits") else _F, ("T", _E)),
        A("w_up", _F, (_E, 2 * _I, _H) if _tw else (_E, _H, 2 * _I)),
        A("w_down", _F, (_E, _H, _I) if _tw else (_E, _I, _H)),
    ]
    if _b:
        _ins.append(A("bias", "f32", (_E,)))
    if "_expert_bias" in _n:
        _ins += [A("w_up_bias", _F, (_E, 2 * _I)), A("w_down_bias", _F, (_E, _H))]
    _case(_n, "ffn", dict(_a, transpose_weights=_tw), _ins, [A("result", _F, ("T", _H))])


# ----------------------------------------------------------------------------
# The backward functions of cases/backward.mlir
# ----------------------------------------------------------------------------
#
# The backward primitives at small shapes, and two small layers (LAYERS) as
# moe.ffn_train, moe.ffn_grad and moe.ffn_grad's saved(h, weights, indices)
# form. A file of their own, so that the forward libraries build and run
# whatever state the backward lowering is in.
#
# Tolerances (||got - ref|| / ||ref||, the reference in float64):
# * the primitives: REL_TOL of the result type, as the forward ops; each
#   rounds once, at its end (f32 results of bf16 operands: 1e-5, f32
#   accumulation only). route_grad's error is relative to the norm of its
#   terms (reference.route_grad's scale): a row whose normalised weights
#   cannot move (one valid id) cancels to zero, and f32 leaves a residue.
#   Experts / groups with no rows must be exact (zero, or `acc`);
#   combine_grad without weights copies (exact).
# * the layers: GRAD_TOL[F] for every result, whatever its element type.
#   reference.ffn_grad rounds to F wherever the chain rounds (h, a = glu(h),
#   g = dy W2^T, w g, dh, each slot's dx row, w dy), so the chain is checked
#   against what it should compute: against unrounded float64 the bf16
#   layer is up to 5e-2 off (dlogits = route_grad(<g, a>) cancels; T = 1).
#   What remains is the compiled chain's f32 summation order flipping the
#   last bit of an intermediate (2^-8 for bf16) and the results' own
#   rounding. The CPU pipeline, over 60 seeds at T = 1..7: dx 2.5e-3,
#   dlogits 3.6e-3, the f32 weight gradients 3e-4 (sums of products of
#   bf16-rounded values: bf16-accurate, whatever their type; the
#   differential tester also compares them at F). So 1e-2, the bf16 bound,
#   for every result of a bf16 layer; 1e-5 for an f32 layer (CPU: 1.6e-6).
#   The layers' edge logits keep sigmoid scores off saturation, where
#   f32's 1 - s alone costs 1e-4.
GRAD_TOL = {"f32": 1e-5, "bf16": 1e-2}
BACKWARD = "backward"


def _bcase(name, op, attrs, inputs, outputs):
    _case(name, op, attrs, inputs, outputs, BACKWARD)


_SWIGLU_OSS = dict(activation="silu", layout="interleaved", alpha=1.702, limit=7.0, up_bias=1.0)

# moe.glu_grad: name, F, rows, N, attrs
for _n, _F, _M, _N, _a in (
    ("glu_grad_silu_concat_bf16", "bf16", "T", 128, dict(activation="silu", layout="concat")),
    ("glu_grad_swiglu_interleaved_f32", "f32", "T", 64, _SWIGLU_OSS),
    ("glu_grad_swiglu_interleaved_bf16", "bf16", "2*T", 128, _SWIGLU_OSS),
    (
        "glu_grad_gelu_tanh_limit_concat_f32",
        "f32",
        "T",
        32,
        dict(activation="gelu_tanh", layout="concat", limit=3.0),
    ),
):
    _bcase(
        _n,
        "glu_grad",
        _a,
        [A("grad", _F, (_M, _N)), A("input", _F, (_M, 2 * _N))],
        [A("result", _F, (_M, 2 * _N))],
    )

# moe.row_dot: name, F, result type, rows, N, accumulate
for _n, _F, _O, _M, _N, _acc in (
    ("row_dot_bf16_acc_f32", "bf16", "f32", "2*T", 128, True),
    ("row_dot_f32", "f32", "f32", "T", 96, False),
    ("row_dot_bf16", "bf16", "bf16", "T", 64, False),
):
    _ins = [A("lhs", _F, (_M, _N)), A("rhs", _F, (_M, _N))]
    if _acc:
        _ins.append(A("acc", "f32", (_M,)))
    _bcase(_n, "row_dot", {}, _ins, [A("result", _O, (_M,))])

# moe.combine_grad (k is the result's dimension 1)
_bcase(
    "combine_grad_weighted_bf16_f32w",
    "combine_grad",
    {},
    [A("grad", "bf16", ("T", 256)), A("weights", "f32", ("T", 2))],
    [A("result", "bf16", ("T", 2, 256))],
)
_bcase(
    "combine_grad_unweighted_f32",
    "combine_grad",
    {},
    [A("grad", "f32", ("T", 64))],
    [A("result", "f32", ("T", 4, 64))],
)

# moe.route_grad: name, logits type, result type, E, k, attrs (ids may be -1)
for _n, _F, _O, _E, _k, _a in (
    ("route_grad_softmax_norm_f32", "f32", "f32", 32, 4, dict(scoring="softmax", normalize=True)),
    (
        "route_grad_sigmoid_norm_scaled_f32",
        "f32",
        "f32",
        64,
        8,
        dict(scoring="sigmoid", normalize=True, scaling=2.5),
    ),
    (
        "route_grad_softmax_norm_bf16",
        "bf16",
        "bf16",
        16,
        2,
        dict(scoring="softmax", normalize=True),
    ),
):
    _bcase(
        _n,
        "route_grad",
        _a,
        [A("grad", "f32", ("T", _k)), A("logits", _F, ("T", _E)), A("indices", "i32", ("T", _k))],
        [A("result", _O, ("T", _E))],
    )

# moe.grouped_matmul_wgrad: name, F, result type, rows, E, K, N, accumulate.
# Offsets always leave experts empty; on edge inputs they are also clamped
# (below 0, past M) and decreasing (gen_wgrad_offsets).
for _n, _F, _O, _M, _E, _K, _N, _acc in (
    ("grouped_matmul_wgrad_bf16_f32out", "bf16", "f32", "2*T", 8, 64, 128, False),
    ("grouped_matmul_wgrad_bf16_acc", "bf16", "f32", "2*T", 8, 128, 64, True),
    ("grouped_matmul_wgrad_bf16_tails", "bf16", "bf16", "2*T", 8, 96, 200, False),
    ("grouped_matmul_wgrad_f32_many_experts", "f32", "f32", "T", 16, 40, 24, False),
    # The Hopper kernel (WgmmaWgrad.cpp): 192-column tiles and a last row
    # tile half past K, bf16 results; 256-column tiles (two row tiles, two
    # column tiles, setmaxnreg) into an f32 acc; f16.
    ("grouped_matmul_wgrad_bf16_tile192", "bf16", "bf16", "2*T", 8, 192, 192, False),
    ("grouped_matmul_wgrad_bf16_tile256_acc", "bf16", "f32", "3*T", 6, 256, 512, True),
    ("grouped_matmul_wgrad_f16", "f16", "f16", "2*T", 8, 128, 128, False),
    # 256 items (E x K / 64 x N / 256) over at most 132 blocks: a block's
    # items alternate between its two consumer warpgroups, the experts'
    # 8 T / 8 rows run past the 5 pipeline stages (the turn-taking of the
    # consumers' main loops).
    ("grouped_matmul_wgrad_bf16_many_items_acc", "bf16", "f32", "8*T", 8, 2048, 256, True),
):
    _ins = [A("lhs", _F, (_M, _K)), A("rhs", _F, (_M, _N)), A("offsets", "i32", (_E + 1,))]
    if _acc:
        _ins.append(A("acc", "f32", (_E, _K, _N)))
    _bcase(_n, "grouped_matmul_wgrad", {}, _ins, [A("result", _O, (_E, _K, _N))])

# The fused gather (a layer's weight gradients read the token rows of x
# through the dispatch's indices): one operand gathered from T rows, the
# indices incl. out-of-range ones (zero rows); the Hopper kernel (bf16, 256
# and 128 columns) and the portable one (f32). The Hopper producer loads
# the next step's indices a step ahead and shuffles them to the copying
# lanes: the "8*T" cases run several steps an item and several items a
# block, at tile 192 (a copy's rows straddle the two halves of the
# prefetched indices) and with the lhs gathered at tile 256.
for _n, _F, _O, _side, _E, _K, _N, _M in (
    ("grouped_matmul_wgrad_bf16_rhs_gathered", "bf16", "f32", "rhs", 8, 128, 256, "2*T"),
    ("grouped_matmul_wgrad_bf16_lhs_gathered", "bf16", "bf16", "lhs", 8, 64, 128, "2*T"),
    ("grouped_matmul_wgrad_f32_rhs_gathered", "f32", "f32", "rhs", 8, 24, 40, "2*T"),
    ("grouped_matmul_wgrad_bf16_rhs_gathered_tile192", "bf16", "bf16", "rhs", 8, 256, 576, "8*T"),
    (
        "grouped_matmul_wgrad_bf16_lhs_gathered_many_items",
        "bf16",
        "f32",
        "lhs",
        8,
        1024,
        256,
        "8*T",
    ),
    # Both operands gathered, each through its own indices.
    ("grouped_matmul_wgrad_bf16_both_gathered", "bf16", "f32", "both", 8, 128, 256, "8*T"),
):
    _sides = ("lhs", "rhs") if _side == "both" else (_side,)
    _ins = [
        A("lhs", _F, ("T" if "lhs" in _sides else _M, _K)),
        A("rhs", _F, ("T" if "rhs" in _sides else _M, _N)),
        *[A(_sd + "_gather", "i32", (_M,)) for _sd in _sides],
        A("offsets", "i32", (_E + 1,)),
    ]
    _bcase(_n, "grouped_matmul_wgrad", {}, _ins, [A("result", _O, (_E, _K, _N))])

# The layers: name, F, logits type, H, I, E, routing bias, expert biases,
# attributes. A softmax layer in bf16 (nn.Linear weights) and a DeepSeek-like
# sigmoid layer (bias, groups, scaling) with expert biases in f32.
LAYERS = [
    (
        "softmax_bf16",
        "bf16",
        "bf16",
        64,
        64,
        8,
        False,
        False,
        dict(
            k=2,
            scoring="softmax",
            normalize=True,
            activation="silu",
            layout="concat",
            transpose_weights=True,
        ),
    ),
    (
        "deepseek_like_f32",
        "f32",
        "f32",
        64,
        32,
        16,
        True,
        True,
        dict(DEEPSEEK_LIKE, transpose_weights=False),
    ),
]
for _n, _F, _LF, _H, _I, _E, _b, _eb, _a in LAYERS:
    _k, _tw = _a["k"], _a["transpose_weights"]
    _wu = (_E, 2 * _I, _H) if _tw else (_E, _H, 2 * _I)
    _wd = (_E, _H, _I) if _tw else (_E, _I, _H)
    _ins = [
        A("x", _F, ("T", _H)),
        A("logits", _LF, ("T", _E)),
        A("w_up", _F, _wu),
        A("w_down", _F, _wd),
    ]
    if _b:
        _ins.append(A("bias", "f32", (_E,)))
    if _eb:
        _ins += [A("w_up_bias", _F, (_E, 2 * _I)), A("w_down_bias", _F, (_E, _H))]
    _saved = [
        A("h", _F, ("%d*T" % _k, 2 * _I)),
        A("weights", "f32", ("T", _k)),
        A("indices", "i32", ("T", _k)),
    ]
    _grads = [
        A("dx", _F, ("T", _H)),
        A("dlogits", _LF, ("T", _E)),
        A("dw_up", "f32", _wu),
        A("dw_down", "f32", _wd),
    ]
    if _eb:
        _grads += [A("dw_up_bias", "f32", (_E, 2 * _I)), A("dw_down_bias", "f32", (_E, _H))]
    _bcase("ffn_train_" + _n, "ffn_train", _a, _ins, [A("y", _F, ("T", _H))] + _saved)
    _dy = [A("dy", _F, ("T", _H))]
    _bcase("ffn_grad_" + _n, "ffn_grad", _a, _dy + _ins, _grads)
    # The saved form returns the weight gradients in the weights' type
    # (weight_grads="weights"; bf16 for the bf16 layer).
    _grads_w = _grads[:2] + [A("dw_up", _F, _wu), A("dw_down", _F, _wd)] + _grads[4:]
    _bcase("ffn_grad_saved_" + _n, "ffn_grad", _a, _dy + _ins + _saved, _grads_w)

CASES_BY_NAME = {c.name: c for c in OP_CASES}
assert len(CASES_BY_NAME) == len(OP_CASES), "duplicate case names"


# ----------------------------------------------------------------------------
# The model layers of cases/ffn_<model>.mlir
# ----------------------------------------------------------------------------


class Model:
    def __init__(
        self,
        name,
        title,
        H,
        I,
        E,
        k,
        route,
        glu,
        transpose_weights,
        bias,
        logits_f="bf16",
        expert_bias=False,
    ):
        self.name = name
        self.title = title
        self.H, self.I, self.E, self.k = H, I, E, k
        self.route = dict(route)  # moe.route attributes except k
        self.glu = dict(glu)  # moe.glu attributes
        self.transpose_weights = transpose_weights
        self.bias = bias  # routing bias tensor<E x f32>
        self.F = "bf16"
        self.logits_f = logits_f  # the router's logits: bf16 or f32
        self.expert_bias = expert_bias  # w_up_bias E x 2I, w_down_bias E x H

    @property
    def attrs(self):
        a = dict(self.route, k=self.k, transpose_weights=self.transpose_weights)
        a.update(self.glu)
        return a

    @property
    def w_up_shape(self):
        E, H, I = self.E, self.H, self.I
        return (E, 2 * I, H) if self.transpose_weights else (E, H, 2 * I)

    @property
    def w_down_shape(self):
        E, H, I = self.E, self.H, self.I
        return (E, H, I) if self.transpose_weights else (E, I, H)

    def ffn_inputs(self):
        F = self.F
        ins = [
            A("x", F, ("T", self.H)),
            A("logits", self.logits_f, ("T", self.E)),
            A("w_up", F, self.w_up_shape),
            A("w_down", F, self.w_down_shape),
        ]
        if self.bias:
            ins.append(A("bias", "f32", (self.E,)))
        if self.expert_bias:
            ins += [A("w_up_bias", F, (self.E, 2 * self.I)), A("w_down_bias", F, (self.E, self.H))]
        return ins

    def route_inputs(self):
        ins = [A("logits", self.logits_f, ("T", self.E))]
        if self.bias:
            ins.append(A("bias", "f32", (self.E,)))
        return ins

    def ffn_outputs(self):
        return [A("result", self.F, ("T", self.H))]

    def route_outputs(self):
        return [A("weights", "f32", ("T", self.k)), A("indices", "i32", ("T", self.k))]

    def mlir(self):
        ffn = func_text(
            "ffn",
            self.ffn_inputs(),
            [
                (
                    op_text("ffn", self.attrs, self.ffn_inputs(), self.ffn_outputs()),
                    self.ffn_outputs(),
                )
            ],
        )
        ra = dict(self.route, k=self.k)
        route = func_text(
            "route",
            self.route_inputs(),
            [
                (
                    op_text("route", ra, self.route_inputs(), self.route_outputs()),
                    self.route_outputs(),
                )
            ],
        )
        return ffn + "\n\n" + route


# gpt-oss routes with a softmax over the k selected logits, which is
# softmax over E followed by normalize (the common factor cancels).
MODELS = [
    Model(
        "qwen3_30b_a3b",
        "Qwen3-30B-A3B",
        H=2048,
        I=768,
        E=128,
        k=8,
        route=dict(scoring="softmax", normalize=True),
        glu=dict(activation="silu", layout="concat"),
        transpose_weights=True,
        bias=False,
    ),
    Model(
        "gpt_oss_120b",
        "gpt-oss-120b",
        H=2880,
        I=2880,
        E=128,
        k=4,
        route=dict(scoring="softmax", normalize=True),
        glu=dict(activation="silu", layout="interleaved", alpha=1.702, limit=7.0, up_bias=1.0),
        transpose_weights=False,
        bias=False,
        expert_bias=True,  # gate_up_proj_bias, down_proj_bias
    ),
    Model(
        "mixtral_8x7b",
        "Mixtral-8x7B",
        H=4096,
        I=14336,
        E=8,
        k=2,
        route=dict(scoring="softmax", normalize=True),
        glu=dict(activation="silu", layout="concat"),
        transpose_weights=True,
        bias=False,
    ),
    Model(
        "deepseek_v3",
        "DeepSeek-V3",
        H=7168,
        I=2048,
        E=256,
        k=8,
        route=dict(
            scoring="sigmoid",
            normalize=True,
            n_group=8,
            topk_group=4,
            group_score="top2_sum",
            scaling=2.5,
        ),
        glu=dict(activation="silu", layout="concat"),
        transpose_weights=False,
        bias=True,
        logits_f="f32",
    ),
    # A field bug class (docs/FieldBugs.md): more experts than one
    # 1024-thread block scans (routing, dispatch offsets), most of them
    # empty at small T. Small H / I: the experts, not the GEMMs, are the
    # point.
    Model(
        "many_experts",
        "2048 experts",
        H=256,
        I=256,
        E=2048,
        k=8,
        route=dict(scoring="softmax", normalize=True),
        glu=dict(activation="silu", layout="interleaved"),
        transpose_weights=True,
        bias=False,
    ),
]
MODELS_BY_NAME = {m.name: m for m in MODELS}


# ----------------------------------------------------------------------------
# Weights as module constants (cases/ffn_const.mlir)
# ----------------------------------------------------------------------------


class ConstCase:
    """A moe.ffn whose w_up / w_down are constants of the module: `dense`
    hex literals (form "dense") or `dense_resource` blobs in the file's
    resource section (form "resource"). The function takes x and logits;
    `ref_case` is the same ffn with the weights as arguments (what
    check_op's reference runs on), `weights()` their values."""

    def __init__(self, name, F, H, I, E, attrs, form):
        self.name, self.F, self.form = name, F, form
        self.H, self.I, self.E = H, I, E
        self.attrs = dict(attrs)
        self.inputs = [A("x", F, ("T", H)), A("logits", F, ("T", E))]
        self.outputs = [A("result", F, ("T", H))]
        tw = self.attrs.get("transpose_weights", False)
        self.w_args = [
            A("w_up", F, (E, 2 * I, H) if tw else (E, H, 2 * I)),
            A("w_down", F, (E, H, I) if tw else (E, I, H)),
        ]
        self.ref_case = OpCase(name, "ffn", self.attrs, self.inputs + self.w_args, self.outputs)

    def weights(self):
        rng = rng_for("const", self.name)
        up, down = self.w_args
        return {
            "w_up": floats(rng, up.shape, self.F, scale=1.0 / np.sqrt(self.H)),
            "w_down": floats(rng, down.shape, self.F, scale=1.0 / np.sqrt(self.I)),
        }

    def resource_key(self, arg):
        return "%s_%s" % (self.name, arg)

    def mlir(self):
        w = self.weights()
        ops = []
        for a in self.w_args:
            if self.form == "dense":
                lit = 'dense<"0x%s">' % R.to_bytes(w[a.name], self.F).hex().upper()
            else:
                lit = "dense_resource<%s>" % self.resource_key(a.name)
            ops.append(("%%%s = arith.constant %s : %s" % (a.name, lit, a.mlir_type), []))
        ops.append((self.ref_case.op_text(), self.outputs))
        return func_text(self.name, self.inputs, ops)

    def resources(self):
        """{key: hex blob} of the resource form (alignment prefix first)."""
        if self.form != "resource":
            return {}
        w = self.weights()
        align = {"f32": 4, "bf16": 2, "f16": 2}[self.F]
        return {
            self.resource_key(a.name): "0x%08X" % int.from_bytes(align.to_bytes(4, "little"), "big")
            + R.to_bytes(w[a.name], self.F).hex().upper()
            for a in self.w_args
        }


_CONST_ATTRS = dict(k=2, scoring="softmax", normalize=True, activation="silu", layout="concat")
CONST_CASES = [
    ConstCase("ffn_const_dense_bf16", "bf16", 64, 32, 8, _CONST_ATTRS, "dense"),
    ConstCase(
        "ffn_const_resource_bf16_nt",
        "bf16",
        64,
        32,
        8,
        dict(_CONST_ATTRS, transpose_weights=True),
        "resource",
    ),
    ConstCase("ffn_const_resource_f32", "f32", 32, 16, 4, _CONST_ATTRS, "resource"),
]


def case_files():
    """{file name in cases/: [function names]}"""
    out = {}
    for c in OP_CASES:
        out.setdefault(c.stem + ".mlir", []).append(c.name)
    for m in MODELS:
        out["ffn_%s.mlir" % m.name] = ["ffn", "route"]
    out["ffn_const.mlir"] = [c.name for c in CONST_CASES]
    return out


def signatures():
    """{(case file stem, function): (input Args, output Args)}"""
    sig = {}
    for c in OP_CASES:
        sig[(c.stem, c.name)] = (c.inputs, c.outputs)
    for m in MODELS:
        sig[("ffn_" + m.name, "ffn")] = (m.ffn_inputs(), m.ffn_outputs())
        sig[("ffn_" + m.name, "route")] = (m.route_inputs(), m.route_outputs())
    for c in CONST_CASES:
        sig[("ffn_const", c.name)] = (c.inputs, c.outputs)
    return sig


# ----------------------------------------------------------------------------
# Input generation (numpy; values exactly representable in their type)
# ----------------------------------------------------------------------------


def rng_for(*key):
    h = [zlib.crc32(str(k).encode()) for k in key]
    return np.random.default_rng(h)


def floats(rng, shape, dtype, scale=1.0):
    return R.round_to(rng.normal(0.0, scale, size=shape), dtype)


def _bad_ids(rng, n, E):
    pool = np.array([-1, -1, -1, E, E + 7, -5, INT32_MAX, INT32_MIN], dtype=np.int64)
    return pool[rng.integers(0, len(pool), size=n)]


def gen_ids(rng, T, k, E, mode):
    """T x k expert ids. random: distinct in-range ids per row. edge: rows of
    out-of-range ids (-1, >= E, int32 extremes), duplicates, and rows that
    only use two experts (most experts get no token)."""
    out = np.zeros((T, k), dtype=np.int64)
    two = [1 % E, (E - 2) % E]
    for t in range(T):
        row = rng.permutation(E)[:k] if k <= E else rng.integers(0, E, size=k)
        if mode == "edge":
            r = rng.random()
            if r < 0.3:  # only two experts (duplicates when k > 2)
                row = np.array([two[j % 2] for j in range(k)])
                if k > 1 and rng.random() < 0.5:
                    row = row[::-1].copy()
            elif r < 0.5:  # a few ids not local / out of range
                m = rng.random(k) < 0.4
                row = row.copy()
                row[m] = _bad_ids(rng, int(m.sum()), E)
            elif r < 0.6:  # nothing dispatched
                row = _bad_ids(rng, k, E)
            elif r < 0.75 and k > 1:  # duplicates
                row = row.copy()
                row[rng.integers(0, k)] = row[rng.integers(0, k)]
        out[t] = row
    return out


def gen_logits(rng, T, E, F, mode, scale=2.0):
    x = R.round_to(rng.normal(0.0, scale, size=(T, E)), F)
    if mode != "edge":
        return x
    big = R.round_to([R.FLT_MAX, -R.FLT_MAX, 1e30, -1e30, 0.0], F)
    for t in range(T):
        r = rng.random()
        if r < 0.12:
            x[t] = np.nan
        elif r < 0.22:
            x[t] = -np.inf
        elif r < 0.32:
            x[t, rng.integers(0, E)] = np.inf
        elif r < 0.42:
            m = rng.random(E) < 0.4
            sp = np.array([np.nan, np.inf, -np.inf])
            x[t, m] = sp[rng.integers(0, 3, size=int(m.sum()))]
        elif r < 0.5:
            x[t] = big[rng.integers(0, len(big), size=E)]
        elif r < 0.58:
            x[t] = np.where(rng.random(E) < 0.5, 0.0, -0.0)
        elif r < 0.7:  # ties: a pool of three values
            pool = R.round_to(rng.uniform(-3, 3, size=3), F)
            x[t] = pool[rng.integers(0, 3, size=E)]
        elif r < 0.8:  # two favoured experts: every other expert gets no token
            x[t] = R.round_to(rng.normal(-8.0, 1.0, size=E), F)
            x[t, [0, E // 2]] = R.round_to(8.0 + rng.normal(0, 1, 2), F)
    return x


def gen_offsets(rng, M, E, mode, monotone=False):
    """E+1 exclusive offsets over M rows. edge: short / late ranges, values
    clamped at run time, and (unless `monotone`) a decreasing pair."""
    cuts = np.sort(rng.integers(0, M + 1, size=E - 1)) if E > 1 else np.zeros(0, np.int64)
    off = np.concatenate([[0], cuts, [M]]).astype(np.int64)
    if mode != "edge":
        return off
    r = rng.random()
    if r < 0.25:  # rows past offsets[E] are zero
        end = int(rng.integers(0, M + 1))
        off = np.minimum(off, end)
    elif r < 0.4:  # rows before offsets[0] are zero
        start = int(rng.integers(0, M + 1))
        off = np.maximum(off, start)
    elif r < 0.6:  # clamped to [0, M] at run time
        off[0] = -int(rng.integers(1, 5))
        off[-1] = M + int(rng.integers(1, 50))
    elif r < 0.75 and E > 1 and not monotone:  # a decreasing pair: an empty group
        e = int(rng.integers(0, E))
        off[e + 1] = max(off[e] - int(rng.integers(1, 3)), -1)
    elif r < 0.9:  # everything in one expert, others empty
        e = int(rng.integers(0, E))
        off[: e + 1] = 0
        off[e + 1 :] = M
    return off


def gen_index_vector(rng, n, lo_hi, mode, bad_frac=0.25):
    lo, hi = lo_hi
    if hi > lo:
        v = rng.integers(lo, hi, size=n).astype(np.int64)
    else:
        v = np.full(n, -1, dtype=np.int64)
    if mode == "edge" and n:
        m = rng.random(n) < bad_frac
        pool = np.array([-1, hi, hi + 3, INT32_MAX, INT32_MIN, -7], dtype=np.int64)
        v[m] = pool[rng.integers(0, len(pool), size=int(m.sum()))]
    return v


def gen_permutation(rng, n, mode, bad_frac=0.2):
    v = rng.permutation(n).astype(np.int64)
    if mode == "edge" and n:
        m = rng.random(n) < bad_frac
        pool = np.array([-1, n, n + 5, INT32_MAX, INT32_MIN], dtype=np.int64)
        v[m] = pool[rng.integers(0, len(pool), size=int(m.sum()))]
    return v


def gen_wgrad_offsets(rng, M, E, mode):
    """E+1 offsets over M rows (E >= 6) for moe.grouped_matmul_wgrad:
    experts 1 and E-1 always empty; edge: also clamped (below 0, past M)
    and a decreasing pair (an empty group between two that overlap)."""
    off = np.concatenate([[0], np.sort(rng.integers(0, M + 1, size=E - 1)), [M]])
    off[2] = off[1]
    off[E - 1] = M
    if mode == "edge":
        off[0] = -int(rng.integers(1, 5))
        off[E - 1] = M + int(rng.integers(1, 5))
        off[E] = M + int(rng.integers(5, 50))
        off[4] = max(off[3] - int(rng.integers(1, 3)), -1)
    return off.astype(np.int64)


def favoured_experts(E, k, route):
    """k experts a layer's logits can favour so that every token picks them
    (inside topk_group groups for group-limited routing): E-k get none."""
    if route.get("n_group", 1) > 1:
        g = E // route["n_group"]
        groups = list(range(route["topk_group"]))
        per = -(-k // len(groups))
        fav = [gi * g + (3 * j + 1) % g for gi in groups for j in range(per)][:k]
    else:
        fav = [(j * 37 + 3) % E for j in range(k)]
    assert len(set(fav)) == k
    return fav


def gen_layer_logits(rng, T, E, F, a, mode):
    """Logits of the training layers. random: gen_logits'. edge: every token
    favours the same k experts (most experts get no token), with rows of
    NaN (all scores zero) and of ties (the lower-index rule). Scores stay
    clear of saturation, where f32's 1 - s loses the digits a rel-err
    bound of 1e-5 needs."""
    if mode != "edge":
        return gen_logits(rng, T, E, F, mode)
    x = rng.normal(-3.0, 0.5, size=(T, E))
    x[:, favoured_experts(E, a["k"], a)] += 6.0
    r = rng.random(T)
    x[r < 0.1] = np.nan
    x[(r >= 0.1) & (r < 0.2)] = 0.5
    return R.round_to(x, F)


def _training_inputs(rng, case, v, mode):
    """moe.ffn_train / moe.ffn_grad inputs beyond moe.ffn's: dy, and the
    saved h, weights, indices (moe.ffn_train's results, from reference.py).
    Rows whose routing is a near tie get new logits: the weight gradients
    sum over every token, so no row may be left out of the comparison."""
    a = case.attrs
    E, LF = v["logits"].shape[1], case.inp("logits").dtype
    for _ in range(100):
        amb = R.route(v["logits"], bias=v.get("bias"), **_route_attrs(a))[2]
        if not amb.any():
            break
        v["logits"][amb] = gen_layer_logits(rng, int(amb.sum()), E, LF, a, mode)
    else:
        raise AssertionError("%s: no routing without near ties" % case.name)
    F = case.inp("x").dtype
    if case.has("dy"):
        v["dy"] = floats(rng, v["x"].shape, F)
    if case.has("h"):
        saved, _ = R.ffn_saved(
            v["x"],
            v["logits"],
            v["w_up"],
            F,
            bias=v.get("bias"),
            transpose_weights=a.get("transpose_weights", False),
            w_up_bias=v.get("w_up_bias"),
            **_route_attrs(a),
        )
        v["h"] = R.round_to(saved["h"], F)
        v["weights"] = saved["weights"]
        v["indices"] = saved["ids"]


def gen_inputs(case, T, mode="random", seed=0):
    """{input name: numpy array} for `case` at T tokens. Floats are float64
    holding values exact in their type; ints are int64 within int32."""
    rng = rng_for(case.name, T, mode, seed)
    sh = {a.name: a.shape_at(T) for a in case.inputs}
    dt = {a.name: a.dtype for a in case.inputs}
    op, a = case.op, case.attrs
    v = {}
    if op == "topk":
        E = sh["input"][1]
        v["input"] = gen_logits(rng, T, E, dt["input"], mode)
        if mode != "edge":  # bf16 values tie naturally; add a tie row anyway
            if T > 2:
                v["input"][1, :] = v["input"][1, 0]
    elif op in ("route", "route_dispatch"):
        E = sh["logits"][1]
        v["logits"] = gen_logits(rng, T, E, dt["logits"], mode)
        if "bias" in sh:
            v["bias"] = R.round_to(rng.normal(0.0, 0.3, size=E), "f32")
    elif op in ("cumsum", "dispatch"):
        k = sh["indices"][1]
        v["indices"] = gen_ids(rng, T, k, a["num_experts"], mode)
    elif op == "get_indices":
        E = a["num_experts"]
        ids = gen_ids(rng, T, sh["indices"][1], E, mode)
        v["cumsum"] = R.cumsum(ids, E)
        v["indices"] = ids
    elif op == "get_indptr":
        E = a["num_experts"]
        ids = gen_ids(rng, T, a.get("k", 2), E, mode)
        v["cumsum"] = R.cumsum(ids, E)
    elif op == "gather":
        Tin = sh["input"][0]
        v["input"] = floats(rng, sh["input"], dt["input"])
        v["indices"] = gen_index_vector(rng, sh["indices"][0], (0, Tin), mode)
    elif op == "scatter":
        M = sh["input"][0]
        v["input"] = floats(rng, sh["input"], dt["input"])
        if a.get("dups"):
            v["indices"] = rng.integers(0, max(M, 1), size=M).astype(np.int64)
            if mode == "edge" and M:
                v["indices"][rng.random(M) < 0.2] = -1
        else:
            v["indices"] = gen_permutation(rng, M, mode)
    elif op == "grouped_matmul":
        M, K = sh["lhs"]
        E = sh["rhs"][0]
        F = dt["lhs"]
        v["lhs"] = floats(rng, sh["lhs"], F)
        v["rhs"] = floats(rng, sh["rhs"], F, scale=1.0 / np.sqrt(K))
        v["offsets"] = gen_offsets(rng, M, E, mode)
        if "bias" in sh:
            v["bias"] = floats(rng, sh["bias"], F, scale=0.5)
    elif op == "glu":
        v["input"] = floats(rng, sh["input"], dt["input"], scale=3.0)
    elif op == "combine":
        v["input"] = floats(rng, sh["input"], dt["input"])
        if "weights" in sh:
            v["weights"] = R.round_to(rng.uniform(0.0, 1.0, size=sh["weights"]), dt["weights"])
            if mode == "edge" and T:
                v["weights"][rng.random(sh["weights"]) < 0.3] = 0.0
    elif op == "indices_to_multihot":
        T_, k = sh["indices"]
        v["indices"] = gen_ids(rng, T_, k, a["num_experts"], mode)
        v["probs"] = R.round_to(rng.uniform(0.0, 1.0, size=(T_, k)), dt["probs"])
    elif op == "multihot_to_indices":
        T_, E = sh["probs_multihot"]
        k = a["k"]
        F = dt["probs_multihot"]
        if mode != "edge":
            ids = gen_ids(rng, T_, k, E, "random")
            _, pm, pos = R.indices_to_multihot(ids, R.round_to(rng.uniform(0, 1, (T_, k)), F), E)
        else:  # arbitrary maps: collisions, -1, >= k, int32 extremes
            pm = R.round_to(rng.uniform(-1, 1, (T_, E)), F)
            pos = rng.integers(-2, k + 2, size=(T_, E)).astype(np.int64)
            if T_:
                pos[rng.random((T_, E)) < 0.05] = INT32_MAX
        v["probs_multihot"] = pm
        v["position_map"] = pos
    elif op == "expert_gemm":
        F = dt["lhs"]
        K = sh["lhs"][1]
        E = sh["rhs"][0]
        M = case.outputs[0].shape_at(T)[0]
        v["lhs"] = floats(rng, sh["lhs"], F)
        if "gather" in sh:
            v["gather"] = gen_index_vector(rng, M, (0, sh["lhs"][0]), mode, bad_frac=0.15)
        v["rhs"] = floats(rng, sh["rhs"], F, scale=1.0 / np.sqrt(K))
        # expert_gemm computes every (clamped) range: overlapping ranges would
        # make a row's value depend on the kernel's order, so keep them apart.
        v["offsets"] = gen_offsets(rng, M, E, mode, monotone=True)
        if "bias" in sh:
            v["bias"] = floats(rng, sh["bias"], F, scale=0.5)
        if "scatter" in sh:
            v["scatter"] = gen_permutation(rng, M, mode, bad_frac=0.15)
        if "scale" in sh:
            v["scale"] = R.round_to(rng.uniform(0.0, 1.0, size=M), dt["scale"])
    elif op in ("ffn", "ffn_train", "ffn_grad"):
        F = dt["x"]
        T_, H = sh["x"]
        E = sh["logits"][1]
        I = sh["w_down"][2] if a.get("transpose_weights") else sh["w_down"][1]
        v["x"] = floats(rng, sh["x"], F)
        if op == "ffn":
            v["logits"] = gen_logits(rng, T_, E, dt["logits"], mode)
        else:
            v["logits"] = gen_layer_logits(rng, T_, E, dt["logits"], a, mode)
        v["w_up"] = floats(rng, sh["w_up"], F, scale=1.0 / np.sqrt(H))
        v["w_down"] = floats(rng, sh["w_down"], F, scale=1.0 / np.sqrt(I))
        if "bias" in sh:
            v["bias"] = R.round_to(rng.normal(0.0, 0.3, size=E), "f32")
        if "w_up_bias" in sh:
            v["w_up_bias"] = floats(rng, sh["w_up_bias"], F, scale=0.5)
            v["w_down_bias"] = floats(rng, sh["w_down_bias"], F, scale=0.2)
        if op != "ffn":
            _training_inputs(rng, case, v, mode)
    elif op == "glu_grad":
        v["grad"] = floats(rng, sh["grad"], dt["grad"])
        v["input"] = floats(rng, sh["input"], dt["input"], scale=3.0)
        if mode == "edge" and T:  # at and next to the clamps; saturated
            L = a.get("limit", 3.0)
            pool = R.round_to([L, -L, 1.02 * L, -1.02 * L, 0.98 * L, 40.0, -40.0, 0.0], dt["input"])
            m = rng.random(sh["input"]) < 0.2
            v["input"][m] = pool[rng.integers(0, len(pool), size=int(m.sum()))]
    elif op == "row_dot":
        v["lhs"] = floats(rng, sh["lhs"], dt["lhs"])
        v["rhs"] = floats(rng, sh["rhs"], dt["rhs"])
        if "acc" in sh:
            v["acc"] = floats(rng, sh["acc"], "f32", scale=4.0)
        if mode == "edge" and T:  # rows of zeros
            v["lhs"][rng.random(sh["lhs"][0]) < 0.2] = 0.0
    elif op == "combine_grad":
        v["grad"] = floats(rng, sh["grad"], dt["grad"])
        if "weights" in sh:
            v["weights"] = R.round_to(rng.uniform(-1.0, 1.0, size=sh["weights"]), dt["weights"])
            if mode == "edge" and T:
                v["weights"][rng.random(sh["weights"]) < 0.3] = 0.0
    elif op == "route_grad":
        T_, E = sh["logits"]
        k = sh["indices"][1]
        v["grad"] = floats(rng, sh["grad"], dt["grad"])
        v["logits"] = gen_logits(rng, T_, E, dt["logits"], mode)
        v["indices"] = gen_ids(rng, T_, k, E, mode)
        if mode != "edge" and T:  # dropped slots
            v["indices"][rng.random((T_, k)) < 0.1] = -1
    elif op == "grouped_matmul_wgrad":
        v["lhs"] = floats(rng, sh["lhs"], dt["lhs"])
        v["rhs"] = floats(rng, sh["rhs"], dt["rhs"])
        M = sh["lhs"][0]
        for side in ("lhs", "rhs"):
            if side + "_gather" in sh:  # indices into T rows, some outside
                M = sh[side + "_gather"][0]
                S = sh[side][0]
                v[side + "_gather"] = rng.integers(-2, S + 2, size=M).astype(np.int32)
        v["offsets"] = gen_wgrad_offsets(rng, M, sh["offsets"][0] - 1, mode)
        if "acc" in sh:
            v["acc"] = floats(rng, sh["acc"], "f32", scale=2.0)
    else:
        raise KeyError(op)
    for arg in case.inputs:  # shape sanity
        if arg.name not in v:
            raise AssertionError("%s: no value for input %s" % (case.name, arg.name))
        got = tuple(np.shape(v[arg.name]))
        if got != arg.shape_at(T):
            raise AssertionError(
                "%s: input %s has shape %s, expected %s"
                % (case.name, arg.name, got, arg.shape_at(T))
            )
    return v


# ----------------------------------------------------------------------------
# Numpy references and comparison
# ----------------------------------------------------------------------------


class Expect:
    """The expected value of one result. kind: 'exact' (ints, and floats
    that are copies of inputs; NaN == NaN) or 'float' (rel-err bound `tol`,
    default REL_TOL of the result type, relative to the norm of `scale`
    when given: reference.py's error scale, the size of the terms, for a
    value that can cancel to zero; the slices of dim 0 in the mask `exact`
    must match exactly, e.g. the weight gradient of an expert with no
    rows)."""

    def __init__(self, value, kind, rows=None, tol=None, exact=None, scale=None):
        self.value = np.asarray(value)
        self.kind = kind
        self.rows = rows  # bool mask over dim 0: rows to compare (None = all)
        self.tol = tol
        self.exact = exact
        self.scale = scale


def rel_err(got, want, scale=None):
    """||got - want|| / ||want|| (/ ||scale|| when given)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.size == 0:
        return 0.0
    if not np.all(np.isfinite(got)):
        return float("inf")
    num = np.linalg.norm((got - want).ravel())
    den = np.linalg.norm(np.asarray(want if scale is None else scale, np.float64).ravel())
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return float(num / den)


class Outcome:
    def __init__(self):
        self.ok = True
        self.err = 0.0
        self.tol = 0.0  # the largest float tolerance applied
        self.msgs = []
        self.notes = []

    def fail(self, msg):
        self.ok = False
        self.msgs.append(msg)

    def merge_err(self, e):
        if not (e <= self.err):  # NaN-safe max
            self.err = e

    @property
    def detail(self):
        return "; ".join(self.msgs + self.notes)


def compare(out, name, dtype, got, exp):
    """Compare one result into Outcome `out`."""
    got = np.asarray(got)
    want, scale = exp.value, exp.scale
    if got.shape != want.shape:
        out.fail("%s: shape %s, expected %s" % (name, got.shape, want.shape))
        out.merge_err(float("inf"))
        return
    if exp.exact is not None and exp.exact.any():
        g, w = np.asarray(got[exp.exact], np.float64), np.asarray(want[exp.exact], np.float64)
        n = int(np.count_nonzero(~((g == w) | (np.isnan(g) & np.isnan(w)))))
        if n:
            out.fail(
                "%s: %d elements of the slices %s that must be exactly the reference's differ"
                % (name, n, np.flatnonzero(exp.exact).tolist())
            )
            out.merge_err(float("inf"))
    if exp.rows is not None and got.ndim >= 1:
        got = got[exp.rows]
        want = want[exp.rows]
        scale = None if scale is None else scale[exp.rows]
    if exp.kind == "exact":
        if dtype in FLOAT_TYPES:
            g = np.asarray(got, dtype=np.float64)
            w = np.asarray(want, dtype=np.float64)
            bad = ~((g == w) | (np.isnan(g) & np.isnan(w)))
        else:
            bad = np.asarray(got) != np.asarray(want)
        n = int(np.count_nonzero(bad))
        if n:
            idx = np.argwhere(bad)[0]
            out.fail(
                "%s: %d/%d elements differ (first at %s: got %s, want %s)"
                % (
                    name,
                    n,
                    bad.size,
                    tuple(int(i) for i in idx),
                    np.asarray(got)[tuple(idx)],
                    np.asarray(want)[tuple(idx)],
                )
            )
            out.merge_err(float("inf"))
        return
    tol = REL_TOL[dtype] if exp.tol is None else exp.tol
    out.tol = max(out.tol, tol)
    g = np.asarray(got, dtype=np.float64)
    nan = ~np.isfinite(g) & np.isfinite(want)
    if np.any(nan):
        idx = np.argwhere(nan)[0]
        out.fail(
            "%s: %d non-finite elements (first at %s; unwritten output?)"
            % (name, int(nan.sum()), tuple(int(i) for i in idx))
        )
        out.merge_err(float("inf"))
        return
    e = rel_err(g, want, scale)
    out.merge_err(e)
    if not e < tol:
        diff = np.abs(g - want)
        idx = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
        out.fail(
            "%s: rel err %.3g >= %.0e (max |diff| %.3g at %s)"
            % (name, e, tol, float(diff.max()) if diff.size else 0.0, tuple(int(i) for i in idx))
        )


def _route_attrs(a):
    return dict(
        k=a["k"],
        scoring=a["scoring"],
        normalize=a.get("normalize", False),
        n_group=a.get("n_group", 1),
        topk_group=a.get("topk_group", 1),
        group_score=a.get("group_score", "max"),
        scaling=f32(a.get("scaling", 1.0)),
    )


def _glu_kw(a):
    lim = a.get("limit")
    return dict(
        alpha=f32(a.get("alpha", 1.0)),
        limit=None if lim is None else f32(lim),
        up_bias=f32(a.get("up_bias", 0.0)),
    )


def _dispatch_ref(ids, E):
    cs = R.cumsum(ids, E)
    off = R.get_indptr(cs, E, False)
    rev, tok = R.get_indices(cs, ids)
    return off, rev, tok


def _route_ref(out, inp, got, a):
    """moe.route reference with near-tie tolerance: a row whose ids differ
    from the float64 reference is accepted when the difference is a near tie
    f32 may break either way; its weights are then recomputed from the
    float64 scores at the returned ids. Returns (weights, ids used)."""
    ra = _route_attrs(a)
    W, ids, _amb, s, c = R.route(inp["logits"], bias=inp.get("bias"), **ra)
    got_ids = np.asarray(got["indices"]).astype(np.int64) if "indices" in got else None
    use = ids.copy()
    if got_ids is not None and got_ids.shape == ids.shape:
        ties = 0
        for t in range(ids.shape[0]):
            if np.array_equal(got_ids[t], ids[t]):
                continue
            if R.route_ids_acceptable(
                s[t], c[t], got_ids[t], ra["k"], ra["n_group"], ra["topk_group"], ra["group_score"]
            ):
                ties += 1
                use[t] = got_ids[t]
                W[t] = R.route_weights(s[t], got_ids[t], ra["normalize"], ra["scaling"])
        if ties:
            out.notes.append("%d near-tie rows" % ties)
    return W, use


def expected(case, inp, got, out):
    """{result name: Expect} for `case` on inputs `inp`; `got` (the compiled
    results, numpy) is only consulted to accept near ties in routing."""
    op, a = case.op, case.attrs
    res = {}
    if op == "topk":
        vals, ids = R.topk(inp["input"], a["k"])
        res = {"values": Expect(vals, "exact"), "indices": Expect(ids, "exact")}
    elif op == "route":
        W, ids = _route_ref(out, inp, got, a)
        res = {"weights": Expect(W, "float"), "indices": Expect(ids, "exact")}
    elif op == "route_dispatch":
        W, ids = _route_ref(out, inp, got, a)
        off, rev, tok = _dispatch_ref(ids, inp["logits"].shape[1])
        res = {
            "weights": Expect(W, "float"),
            "indices": Expect(ids, "exact"),
            "offsets": Expect(off, "exact"),
            "reverse_indices": Expect(rev, "exact"),
            "token_indices": Expect(tok, "exact"),
        }
    elif op == "cumsum":
        res = {"cumsum": Expect(R.cumsum(inp["indices"], a["num_experts"]), "exact")}
    elif op == "get_indices":
        rev, tok = R.get_indices(inp["cumsum"], inp["indices"])
        res = {"reverse_indices": Expect(rev, "exact"), "token_indices": Expect(tok, "exact")}
    elif op == "get_indptr":
        res = {
            "result": Expect(
                R.get_indptr(inp["cumsum"], a["num_experts"], a.get("inclusive", False)), "exact"
            )
        }
    elif op == "gather":
        res = {"result": Expect(R.gather(inp["input"], inp["indices"]), "exact")}
    elif op == "scatter":
        res = {"result": Expect(R.scatter(inp["input"], inp["indices"]), "exact")}
    elif op == "grouped_matmul":
        val, _, defined = R.grouped_matmul(
            inp["lhs"], inp["rhs"], inp["offsets"], inp.get("bias"), a.get("transpose_rhs", False)
        )
        if not defined.all():
            out.notes.append("%d rows undefined (non-monotone offsets)" % int((~defined).sum()))
        res = {"result": Expect(val, "float", rows=defined)}
    elif op == "glu":
        val, _ = R.glu(inp["input"], a["activation"], a["layout"], **_glu_kw(a))
        res = {"result": Expect(val, "float")}
    elif op == "combine":
        val, _ = R.combine(inp["input"], inp.get("weights"))
        res = {"result": Expect(val, "float")}
    elif op == "indices_to_multihot":
        mh, pm, pos = R.indices_to_multihot(inp["indices"], inp["probs"], a["num_experts"])
        res = {
            "multihot": Expect(mh, "exact"),
            "probs_multihot": Expect(pm, "exact"),
            "position_map": Expect(pos, "exact"),
        }
    elif op == "multihot_to_indices":
        res = {
            "probs": Expect(
                R.multihot_to_indices(inp["probs_multihot"], inp["position_map"], a["k"]), "exact"
            )
        }
    elif op == "dispatch":
        off, rev, tok = _dispatch_ref(inp["indices"], a["num_experts"])
        res = {
            "offsets": Expect(off, "exact"),
            "reverse_indices": Expect(rev, "exact"),
            "token_indices": Expect(tok, "exact"),
        }
    elif op == "expert_gemm":
        res = {"result": Expect(expert_gemm_ref(case, inp), "float")}
    elif op == "ffn":
        y, _, defined = _ffn_ref(case, inp)
        if not defined.all():
            out.notes.append("%d near-tie rows skipped" % int((~defined).sum()))
        res = {"result": Expect(y, "float", rows=defined)}
    elif op == "glu_grad":
        val, _ = R.glu_grad(inp["grad"], inp["input"], a["activation"], a["layout"], **_glu_kw(a))
        res = {"result": Expect(val, "float")}
    elif op == "row_dot":
        val, _ = R.row_dot(inp["lhs"], inp["rhs"], inp.get("acc"))
        res = {"result": Expect(val, "float")}
    elif op == "combine_grad":
        val, _ = R.combine_grad(inp["grad"], case.outputs[0].shape[1], inp.get("weights"))
        res = {"result": Expect(val, "float" if "weights" in inp else "exact")}
    elif op == "route_grad":
        # A row's gradient cancels to zero where its normalised weights
        # cannot move (one valid id): f32 leaves a residue of the terms' size.
        val, sc = R.route_grad(
            inp["grad"],
            inp["logits"],
            inp["indices"],
            a["scoring"],
            a.get("normalize", False),
            f32(a.get("scaling", 1.0)),
        )
        res = {"result": Expect(val, "float", scale=sc)}
    elif op == "grouped_matmul_wgrad":
        lhs, rhs = (
            R.gather(inp[n], inp[n + "_gather"]) if n + "_gather" in inp else inp[n]
            for n in ("lhs", "rhs")
        )
        val, _ = R.grouped_matmul_wgrad(lhs, rhs, inp["offsets"], inp.get("acc"))
        off = np.clip(np.asarray(inp["offsets"]), 0, lhs.shape[0])
        res = {"result": Expect(val, "float", exact=off[1:] <= off[:-1])}
    elif op == "ffn_train":
        y, _, defined = _ffn_ref(case, inp)
        W, ids = _route_ref(out, inp, got, a)
        saved, _ = R.ffn_saved(
            inp["x"],
            inp["logits"],
            inp["w_up"],
            case.inp("x").dtype,
            bias=inp.get("bias"),
            transpose_weights=a.get("transpose_weights", False),
            w_up_bias=inp.get("w_up_bias"),
            **_route_attrs(a),
        )
        # h is in dispatch order: another selection of one row moves others
        h_rows = np.full(len(saved["h"]), defined.all() and np.array_equal(ids, saved["ids"]))
        if not h_rows.all() and len(h_rows):
            out.notes.append("h not compared: the selection differs by a near tie")
        res = {
            "y": Expect(y, "float", rows=defined),
            "h": Expect(saved["h"], "float", rows=h_rows),
            "weights": Expect(W, "float"),
            "indices": Expect(ids, "exact"),
        }
    elif op == "ffn_grad":
        F = case.inp("x").dtype
        grads, defined = R.ffn_grad(
            inp["dy"], inp["x"], inp["logits"], inp["w_up"], inp["w_down"], F, **_layer_kw(a, inp)
        )
        tol = GRAD_TOL[F]
        res = {n: Expect(grads[n][0], "float", rows=defined, tol=tol) for n in ("dx", "dlogits")}
        empty = empty_experts(case, inp)
        for r in case.outputs[2:]:  # the weight gradients sum over every token
            rows = np.full(len(empty), bool(defined.all()))
            res[r.name] = Expect(grads[r.name][0], "float", rows=rows, tol=tol, exact=empty & rows)
        if not defined.all():
            out.notes.append(
                "%d near-tie rows skipped, weight gradients not compared" % int((~defined).sum())
            )
    else:
        raise KeyError(op)
    return res


def _layer_kw(a, inp):
    """reference.ffn / ffn_grad keyword arguments of a layer case."""
    return dict(
        bias=inp.get("bias"),
        activation=a["activation"],
        layout=a["layout"],
        transpose_weights=a.get("transpose_weights", False),
        w_up_bias=inp.get("w_up_bias"),
        w_down_bias=inp.get("w_down_bias"),
        **_route_attrs(a),
        **_glu_kw(a),
    )


def _ffn_ref(case, inp):
    """reference.ffn of a moe.ffn / moe.ffn_train case: (y, scale, defined)."""
    return R.ffn(
        inp["x"],
        inp["logits"],
        inp["w_up"],
        inp["w_down"],
        case.inp("x").dtype,
        **_layer_kw(case.attrs, inp),
    )


def empty_experts(case, inp):
    """Bool [E]: the experts no token of a layer case selects (their weight
    gradients must be exactly zero)."""
    E = inp["logits"].shape[1]
    if "indices" in inp:
        ids = np.asarray(inp["indices"])
    else:
        ids = R.route(inp["logits"], bias=inp.get("bias"), **_route_attrs(case.attrs))[1]
    empty = np.ones(E, dtype=bool)
    empty[ids[(ids >= 0) & (ids < E)]] = False
    return empty


def expert_gemm_ref(case, inp):
    """moe.expert_gemm in float64 (MoeOps.td stages 1-5)."""
    a = case.attrs
    lhs = inp["lhs"]
    M = len(inp["gather"]) if "gather" in inp else lhs.shape[0]
    rows = R.gather(lhs, inp["gather"]) if "gather" in inp else np.asarray(lhs, np.float64)
    rhs = np.asarray(inp["rhs"], np.float64)
    tr = a.get("transpose_rhs", False)
    W = np.transpose(rhs, (0, 2, 1)) if tr else rhs
    E = W.shape[0]
    acc = np.zeros((M, W.shape[2]))
    written = np.zeros(M, dtype=bool)
    off = [min(max(int(o), 0), M) for o in inp["offsets"]]
    for e in range(E):
        for m in range(off[e], off[e + 1]):
            acc[m] = rows[m] @ W[e]
            if "bias" in inp:
                acc[m] += inp["bias"][e]
            written[m] = True
    if a.get("activation"):
        acc, _ = R.glu(acc, a["activation"], a["layout"], **_glu_kw(a))
    res = np.zeros_like(acc)
    for m in range(M):
        if not written[m]:
            continue
        d = int(inp["scatter"][m]) if "scatter" in inp else m
        if not 0 <= d < M:
            continue
        res[d] = acc[m] * (inp["scale"][d] if "scale" in inp else 1.0)
    return res


def check_op(case, inp, got):
    """Compare compiled results `got` ({name: numpy array}, floats as
    float64, ints as int64) with the reference. Returns an Outcome."""
    out = Outcome()
    try:
        exp = expected(case, inp, got, out)
    except Exception as ex:  # a reference crash is a harness bug: report it
        out.fail("reference failed: %s: %s" % (type(ex).__name__, ex))
        out.merge_err(float("inf"))
        return out
    for r in case.outputs:
        if r.name not in got:
            out.fail("%s: missing result" % r.name)
            continue
        compare(out, r.name, r.dtype, got[r.name], exp[r.name])
    return out


if __name__ == "__main__":
    for c in OP_CASES:
        print("%-40s %s -> %s" % (c.name, c.inputs, c.outputs))
    for m in MODELS:
        print("%-40s %s" % (m.name, m.attrs))
