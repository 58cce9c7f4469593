#!/usr/bin/env python3
"""Differential tester: compiled moe ops (moe-opt --moe-lower-to-cpu +
mlir-runner) against the numpy reference (reference.py).

Every case (cases.py, reproducible from `op:seed`) becomes a function that
materialises its inputs as exact `dense<"0x...">` literals (dim 0 made dynamic
with tensor.cast on about half of the cases), applies the op in its custom
syntax and prints every result as i32 bits through printMemrefI32.  Several
cases share one module (one mlir-runner start); a module that fails to
compile or run is retried case by case so failures stay attributable.

  run.py [--seed S] [--count N] [--ops a,b] [-j N] [--keep DIR] [--fused]
  run.py --replay topk:17 [--replay ffn:3 ...] [-v]
  run.py --emit topk:17          # print the module of one case and exit

`--count N` is the number of cases per op; case seeds are S*100000 + i.
`--ops` names generators (cases.py): one per moe op by default (OPS);
`lowp` stands for the low-precision weight variants (LOWP_OPS:
grouped_matmul_fp8, grouped_matmul_mxfp4, ffn_fp8, ffn_mxfp4), `all` for
both.
Prints one `FAIL op:seed ...` line per failing case and finally
`N passed, M failed`; exits 1 when something failed.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases as C  # noqa: E402
import op_syntax as OS  # noqa: E402
import reference as R  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
LLVM_LIB = "/usr/lib/llvm-22/lib"
SHARED_LIBS = "%s/libmlir_runner_utils.so,%s/libmlir_c_runner_utils.so" % (LLVM_LIB, LLVM_LIB)
MARKER = 0x5EEDCA5E - (1 << 32) if 0x5EEDCA5E >= (1 << 31) else 0x5EEDCA5E


# ----------------------------------------------------------------------------
# MLIR emission
# ----------------------------------------------------------------------------


def ttype(shape, dtype, dyn=False):
    dims = ["?" if (dyn and i == 0) else str(d) for i, d in enumerate(shape)]
    return "tensor<%s>" % "x".join(dims + [dtype])


def f32_attr(v):
    bits = int(np.array([v], dtype=np.float32).view(np.uint32)[0])
    return "0x%08X : f32" % bits


def dense(value, dtype):
    if value.size == 0:
        return "dense<>"
    return 'dense<"0x%s">' % R.to_bytes(value, dtype).hex().upper()


class Emitter:
    def __init__(self):
        self.lines = []
        self.n = 0

    def fresh(self, base="v"):
        self.n += 1
        return "%%%s%d" % (base, self.n)

    def emit(self, s):
        self.lines.append("    " + s)


def result_shapes(case):
    """[(shape, dyn)] of every result, and whether dim 0 is dynamic."""
    op, a = case.op, case.attrs
    i0 = case.inputs[0]
    sh = i0.value.shape
    dyn = i0.dyn
    if op == "topk":
        return [((sh[0], a["k"]), dyn)] * 2
    if op == "route":
        return [((sh[0], a["k"]), dyn)] * 2
    if op == "cumsum":
        return [((sh[0] * a["num_experts"],), dyn)]
    if op == "get_indices":
        idx = case.inp("indices")
        n = idx.value.shape[0] * idx.value.shape[1]
        return [((n,), dyn)] * 2
    if op == "get_indptr":
        E = a["num_experts"]
        return [((E if a["inclusive"] else E + 1,), False)]
    if op == "gather":
        idx = case.inp("indices")
        return [((idx.value.shape[0], sh[1]), idx.dyn)]
    if op == "scatter":
        return [(sh, dyn)]
    if op == "grouped_matmul":
        rhs = case.inp("rhs").value.shape
        N = rhs[1] if a["transpose_rhs"] else rhs[2]
        return [((sh[0], N), dyn)]
    if op == "grouped_matmul_wgrad":
        E = case.inp("offsets").value.shape[0] - 1
        return [((E, sh[1], case.inp("rhs").value.shape[1]), False)]
    if op == "route_grad":
        return [(case.inp("logits").value.shape, dyn)]
    if op == "glu":
        return [((sh[0], sh[1] // 2), dyn)]
    if op == "glu_grad":
        inp = case.inp("input")
        return [(inp.value.shape, inp.dyn)]
    if op == "combine_grad":
        return [((sh[0], a["k"], sh[1]), dyn)]
    if op == "combine":
        return [((sh[0], sh[2]), dyn)]
    if op == "indices_to_multihot":
        return [((sh[0], a["num_experts"]), dyn)] * 3
    if op == "multihot_to_indices":
        return [((sh[0], a["k"]), dyn)]
    if op == "ffn":
        return [(sh, dyn)]
    if op == "ffn_grad":
        shapes = [(sh, dyn), (case.inp("logits").value.shape, dyn)]
        shapes += [(case.inp(n).value.shape, False) for n in ("w_up", "w_down")]
        if case.inp("w_up_bias") is not None:
            shapes += [(case.inp(n).value.shape, False) for n in ("w_up_bias", "w_down_bias")]
        return shapes
    if op == "row_dot":
        return [((sh[0],), dyn)]
    if op == "ffn_train":
        return [(sh, dyn)] + _saved_shapes(case)
    raise KeyError(op)


def _saved_shapes(case):
    """[(shape, dyn)] of moe.ffn_train's h, weights and ids."""
    x = case.inp("x")
    T, k = x.value.shape[0], case.attrs["k"]
    w_up = case.inp("w_up").value.shape
    two_i = w_up[1] if case.attrs.get("transpose_weights") else w_up[2]
    return [((T * k, two_i), x.dyn), ((T, k), x.dyn), ((T, k), x.dyn)]


SYNTAX = OS.Syntax(f32=f32_attr, explicit=True)


def op_text(case, vals, tys, res, rtys):
    """The op itself in custom syntax (op_syntax.py). vals/tys: operand SSA
    names / types; the attributes given in the case are printed, defaults
    included."""
    names = [t.name for t in case.inputs]
    return SYNTAX.op(
        case.op, case.attrs, dict(zip(names, vals)), dict(zip(names, tys)), ", ".join(res), rtys
    )


SCALAR_CONVERT = {
    "f32": ["{o} = arith.bitcast {i} : f32 to i32"],
    "bf16": ["{t} = arith.extf {i} : bf16 to f32", "{o} = arith.bitcast {t} : f32 to i32"],
    "f16": ["{t} = arith.extf {i} : f16 to f32", "{o} = arith.bitcast {t} : f32 to i32"],
    "i1": ["{o} = arith.extui {i} : i1 to i32"],
    "i64": ["{o} = arith.trunci {i} : i64 to i32"],
}
ELEMENTWISE_ARITH = False  # set by --elementwise-arith


def emit_to_i32(em, val, shape, dtype, dyn):
    """The i32 view of a result: elementwise arith ops on tensors with
    --elementwise-arith, else the same scalar ops inside a linalg.generic."""
    ty = ttype(shape, dtype, dyn)
    ity = ttype(shape, "i32", dyn)
    if dtype == "i32":
        return val
    if ELEMENTWISE_ARITH:
        if dtype in ("bf16", "f16"):
            f = em.fresh("e")
            em.emit("%s = arith.extf %s : %s to %s" % (f, val, ty, ttype(shape, "f32", dyn)))
            val, ty, dtype = f, ttype(shape, "f32", dyn), "f32"
        x = em.fresh("b")
        opname = {"f32": "bitcast", "i1": "extui", "i64": "trunci"}[dtype]
        em.emit("%s = arith.%s %s : %s to %s" % (x, opname, val, ty, ity))
        return x
    dyn_sizes = []
    if dyn:
        c0 = em.fresh("i")
        em.emit("%s = arith.constant 0 : index" % c0)
        d = em.fresh("n")
        em.emit("%s = tensor.dim %s, %s : %s" % (d, val, c0, ty))
        dyn_sizes.append(d)
    init = em.fresh("init")
    em.emit("%s = tensor.empty(%s) : %s" % (init, ", ".join(dyn_sizes), ity))
    dims = ", ".join("d%d" % i for i in range(len(shape)))
    amap = "affine_map<(%s) -> (%s)>" % (dims, dims)
    x = em.fresh("b")
    em.emit(
        "%s = linalg.generic {indexing_maps = [%s, %s], iterator_types = [%s]} "
        "ins(%s : %s) outs(%s : %s) {"
        % (x, amap, amap, ", ".join(['"parallel"'] * len(shape)), val, ty, init, ity)
    )
    em.emit("^bb0(%%in: %s, %%out: i32):" % dtype)
    for line in SCALAR_CONVERT[dtype]:
        em.emit("  " + line.format(i="%in", t="%tmp", o="%cv"))
    em.emit("  linalg.yield %cv : i32")
    em.emit("} -> %s" % ity)
    return x


def emit_print(em, val, shape, dtype, dyn):
    ity = ttype(shape, "i32", dyn)
    x = emit_to_i32(em, val, shape, dtype, dyn)
    mty = "memref<%s>" % "x".join(
        ["?" if (dyn and i == 0) else str(d) for i, d in enumerate(shape)] + ["i32"]
    )
    m = em.fresh("m")
    em.emit("%s = bufferization.to_buffer %s : %s to %s" % (m, x, ity, mty))
    u = em.fresh("u")
    em.emit("%s = memref.cast %s : %s to memref<*xi32>" % (u, m, mty))
    em.emit("call @printMemrefI32(%s) : (memref<*xi32>) -> ()" % u)


def case_function(case, index):
    em = Emitter()
    mk = em.fresh("mk")
    em.emit("%s = arith.constant dense<[%d, %d]> : tensor<2xi32>" % (mk, MARKER, index))
    emit_print(em, mk, (2,), "i32", False)
    vals, tys = [], []
    for t in case.inputs:
        c = em.fresh("c")
        sty = ttype(t.value.shape, t.dtype)
        em.emit("%s = arith.constant %s : %s" % (c, dense(t.value, t.dtype), sty))
        if t.dyn:
            d = em.fresh("d")
            dty = ttype(t.value.shape, t.dtype, True)
            em.emit("%s = tensor.cast %s : %s to %s" % (d, c, sty, dty))
            vals.append(d)
            tys.append(dty)
        else:
            vals.append(c)
            tys.append(sty)
    shapes = result_shapes(case)
    res = [em.fresh("r") for _ in shapes]
    rtys = [ttype(s, dt, dyn) for (s, dyn), dt in zip(shapes, case.out_dtypes)]
    if case.gen == "ffn_grad_saved":
        # The pair: moe.ffn_train of the same operands (all but dy), its
        # saved results into moe.ffn_grad's saved(...).
        names = [t.name for t in case.inputs]
        v, t = dict(zip(names, vals)), dict(zip(names, tys))
        v.pop("dy"), t.pop("dy")
        F = case.inp("x").dtype
        train_shapes = [(case.inp("x").value.shape, case.inp("x").dyn)] + _saved_shapes(case)
        train = [em.fresh("t") for _ in train_shapes]
        train_tys = [ttype(s, dt, dyn) for (s, dyn), dt in zip(train_shapes, [F, F, "f32", "i32"])]
        em.emit(SYNTAX.op("ffn_train", case.attrs, v, t, ", ".join(train), train_tys))
        v, t = dict(zip(names, vals)), dict(zip(names, tys))
        for i, n in enumerate(("h", "weights", "indices")):
            v[n], t[n] = train[1 + i], train_tys[1 + i]
        em.emit(SYNTAX.op(case.op, case.attrs, v, t, ", ".join(res), rtys))
    else:
        em.emit(op_text(case, vals, tys, res, rtys))
    for r, (s, dyn), dt in zip(res, shapes, case.out_dtypes):
        emit_print(em, r, s, dt, dyn)
    em.emit("return")
    return "  // case %d: %s\n  func.func @case_%d() {\n%s\n  }\n" % (
        index,
        case.key,
        index,
        "\n".join(em.lines),
    )


def module_text(cases_):
    body = [case_function(c, i) for i, c in enumerate(cases_)]
    calls = "\n".join("    call @case_%d() : () -> ()" % i for i in range(len(cases_)))
    return (
        "module {\n  func.func private @printMemrefI32(memref<*xi32>)\n%s"
        "  func.func @main() {\n%s\n    return\n  }\n}\n" % ("".join(body), calls)
    )


# ----------------------------------------------------------------------------
# Running and parsing
# ----------------------------------------------------------------------------

HEADER = re.compile(
    r"Unranked Memref base@ = \S+ rank = (\d+) offset = \d+ "
    r"sizes = \[([^\]]*)\] strides = \[[^\]]*\] data ="
)
INT = re.compile(r"-?\d+")


def parse_memrefs(text):
    out = []
    hs = list(HEADER.finditer(text))
    for i, h in enumerate(hs):
        sizes = tuple(int(s) for s in h.group(2).split(",") if s.strip())
        end = hs[i + 1].start() if i + 1 < len(hs) else len(text)
        n = int(np.prod(sizes)) if sizes else 1
        data = [int(x) for x in INT.findall(text[h.end() : end])] if n else []
        if len(data) < n:
            raise ValueError("truncated memref print (%d of %d values)" % (len(data), n))
        out.append((sizes, np.array(data[:n], dtype=np.int64).reshape(sizes)))
    return out


def run_module(text, args, workdir, tag):
    path = os.path.join(workdir, "%s.mlir" % tag)
    with open(path, "w") as f:
        f.write(text)
    passes = ["--moe-decompose", "--moe-fuse"] if args.fused else []
    opt = subprocess.run(
        [args.moe_opt] + passes + ["--moe-lower-to-cpu", path],
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    if opt.returncode != 0:
        return None, "moe-opt failed (rc %d): %s" % (opt.returncode, _first_error(opt.stderr))
    llpath = os.path.join(workdir, "%s.ll.mlir" % tag)
    with open(llpath, "w") as f:
        f.write(opt.stdout)
    run = subprocess.run(
        [
            args.mlir_runner,
            "-e",
            "main",
            "-entry-point-result=void",
            "-shared-libs=" + SHARED_LIBS,
            llpath,
        ],
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    if run.returncode != 0:
        return None, "mlir-runner failed (rc %d): %s" % (run.returncode, _first_error(run.stderr))
    return run.stdout, None


def _first_error(stderr):
    lines = [l for l in stderr.splitlines() if l.strip()]
    for l in lines:
        if "error" in l:
            return l.strip()[:400]
    return lines[0].strip()[:400] if lines else "(no stderr)"


def split_cases(memrefs, ncases):
    """[[result arrays] per case] using the markers."""
    per = []
    cur = None
    for sizes, arr in memrefs:
        if sizes == (2,) and arr[0] == MARKER:
            cur = []
            per.append((int(arr[1]), cur))
            continue
        if cur is None:
            raise ValueError("output before first marker")
        cur.append(arr)
    got = {i: r for i, r in per}
    return [got.get(i) for i in range(ncases)]


# ----------------------------------------------------------------------------
# Expected values and comparison
# ----------------------------------------------------------------------------


def as_float(bits):
    return np.asarray(bits, dtype=np.int64).astype(np.uint32).view(np.float32).astype(np.float64)


def _fmt_idx(idx):
    return "[" + ",".join(str(int(i)) for i in idx) + "]"


def cmp_int(name, got, want):
    want = np.asarray(want, dtype=np.int64)
    if got.shape != want.shape:
        return "%s: shape %s, want %s" % (name, got.shape, want.shape)
    bad = np.argwhere(got != want)
    if len(bad):
        i = tuple(bad[0])
        return "%s: %d mismatches; first at %s: got %d want %d (got %s want %s)" % (
            name,
            len(bad),
            _fmt_idx(i),
            got[i],
            want[i],
            _short(got),
            _short(want),
        )
    return None


def _short(a, n=24):
    flat = np.asarray(a).reshape(-1).tolist()
    s = ",".join(("%.6g" % v) if isinstance(v, float) else str(v) for v in flat[:n])
    return "[" + s + (",...]" if len(flat) > n else "]")


def cmp_float(name, got_bits, want, dtype, scale=None, care=None, exact=False):
    """Compare printed bits with the float64 reference rounded to dtype."""
    got = as_float(got_bits)
    want_r = R.round_to(want, dtype)
    if got.shape != want_r.shape:
        return "%s: shape %s, want %s" % (name, got.shape, want_r.shape)
    rtol, atol = R.TOLERANCE[dtype]
    if exact:
        tol = np.zeros_like(want_r)
    else:
        sc = np.abs(want_r) if scale is None else np.maximum(scale, np.abs(want_r))
        tol = rtol * sc + atol
    with np.errstate(invalid="ignore"):
        both_nan = np.isnan(got) & np.isnan(want_r)
        ok = both_nan | (got == want_r) | (np.abs(got - want_r) <= tol)
    if care is not None:
        ok = ok | ~np.broadcast_to(care, ok.shape)
    bad = np.argwhere(~ok)
    if len(bad):
        i = tuple(bad[0])
        return "%s: %d mismatches; first at %s: got %.9g want %.9g (tol %.3g)" % (
            name,
            len(bad),
            _fmt_idx(i),
            got[i],
            want_r[i],
            tol[i],
        )
    return None


# moe.ffn's routing and GLU attributes, as the float64 references take them.
FFN_KW = (
    "normalize",
    "n_group",
    "topk_group",
    "group_score",
    "scaling",
    "activation",
    "layout",
    "alpha",
    "limit",
    "up_bias",
    "transpose_weights",
)


def check_case(case, results):
    """List of mismatch strings (empty: pass)."""
    op, a = case.op, case.attrs
    v = {t.name: t.value for t in case.inputs}
    od = case.out_dtypes
    errs = []

    def add(e):
        if e:
            errs.append(e)

    if results is None:
        return ["no output for this case"]
    if len(results) != len(od):
        return ["printed %d results, want %d" % (len(results), len(od))]
    if op == "topk":
        vals, ids = R.topk(v["input"], a["k"])
        add(cmp_int("indices", results[1], ids))
        add(cmp_float("values", results[0], vals, od[0], exact=True))
    elif op == "route":
        add(check_route(case, results))
    elif op == "cumsum":
        add(cmp_int("result", results[0], R.cumsum(v["indices"], a["num_experts"])))
    elif op == "get_indices":
        rev, tok = R.get_indices(v["cumsum"], v["indices"])
        add(cmp_int("reverse_indices", results[0], rev))
        add(cmp_int("token_indices", results[1], tok))
    elif op == "get_indptr":
        add(
            cmp_int(
                "result", results[0], R.get_indptr(v["cumsum"], a["num_experts"], a["inclusive"])
            )
        )
    elif op == "gather":
        add(cmp_float("result", results[0], R.gather(v["input"], v["indices"]), od[0], exact=True))
    elif op == "scatter":
        add(cmp_float("result", results[0], R.scatter(v["input"], v["indices"]), od[0], exact=True))
    elif op == "grouped_matmul" and a.get("weight_format", "plain") != "plain":
        val, sc, defined, care = R.grouped_matmul_lowp(
            v["lhs"],
            v["rhs"],
            v["offsets"],
            v["rhs_scale"],
            a["weight_format"],
            a.get("scale_fmt", "f32"),
            v.get("bias"),
        )
        add(cmp_float("result", results[0], val, od[0], sc, defined[:, None] & care))
    elif op == "grouped_matmul":
        val, sc, defined = R.grouped_matmul(
            v["lhs"], v["rhs"], v["offsets"], v.get("bias"), a["transpose_rhs"]
        )
        add(cmp_float("result", results[0], val, od[0], sc, defined[:, None]))
    elif op == "grouped_matmul_wgrad":
        lhs, rhs = (
            R.gather(v[n], v[n + "_gather"]) if n + "_gather" in v else v[n] for n in ("lhs", "rhs")
        )
        val, sc = R.grouped_matmul_wgrad(lhs, rhs, v["offsets"], v.get("acc"))
        add(cmp_float("result", results[0], val, od[0], sc))
    elif op == "route_grad":
        val, sc = R.route_grad(
            v["grad"],
            v["logits"],
            v["indices"],
            a["scoring"],
            a["normalize"],
            a.get("scaling", 1.0),
        )
        add(cmp_float("result", results[0], val, od[0], sc))
    elif op in ("glu", "glu_grad"):
        glu_args = (
            a["activation"],
            a["layout"],
            a.get("alpha", 1.0),
            a.get("limit"),
            a.get("up_bias", 0.0),
        )
        if op == "glu":
            val, sc = R.glu(v["input"], *glu_args)
        else:
            val, sc = R.glu_grad(v["grad"], v["input"], *glu_args)
        add(cmp_float("result", results[0], val, od[0], sc))
    elif op == "combine_grad":
        val, sc = R.combine_grad(v["grad"], a["k"], v.get("weights"))
        add(cmp_float("result", results[0], val, od[0], sc))
    elif op == "row_dot":
        val, sc = R.row_dot(v["lhs"], v["rhs"], v.get("acc"))
        add(cmp_float("result", results[0], val, od[0], sc))
    elif op == "ffn_grad":
        kw = {n: a[n] for n in FFN_KW if n in a}
        grads, defined = R.ffn_grad(
            v["dy"],
            v["x"],
            v["logits"],
            v["w_up"],
            v["w_down"],
            od[0],
            a["k"],
            a["scoring"],
            bias=v.get("bias"),
            w_up_bias=v.get("w_up_bias"),
            w_down_bias=v.get("w_down_bias"),
            **kw,
        )
        names = ["dx", "dlogits", "dw_up", "dw_down", "dw_up_bias", "dw_down_bias"]
        # Every result is compared at the layer's precision F (the chain's
        # intermediates are F; f32 results hold F-accurate values): the
        # printed f32 bits against the reference rounded to F.
        for i, name in enumerate(names[: len(od)]):
            val, sc = grads[name]
            if i < 2:  # per token: rows whose selection is a near tie are skipped
                add(cmp_float(name, results[i], val, od[0], sc, defined[:, None]))
            elif defined.all():  # the weight gradients sum over every token
                add(cmp_float(name, results[i], val, od[0], sc))
    elif op == "ffn_train":
        errs += check_ffn_train(case, results)
    elif op == "combine":
        val, sc = R.combine(v["input"], v.get("weights"))
        add(cmp_float("result", results[0], val, od[0], sc))
    elif op == "indices_to_multihot":
        mh, pm, pos = R.indices_to_multihot(v["indices"], v["probs"], a["num_experts"])
        add(cmp_int("multihot", results[0], mh))
        add(cmp_float("probs_multihot", results[1], pm, od[1], exact=True))
        add(cmp_int("position_map", results[2], pos))
    elif op == "multihot_to_indices":
        add(
            cmp_float(
                "probs",
                results[0],
                R.multihot_to_indices(v["probs_multihot"], v["position_map"], a["k"]),
                od[0],
                exact=True,
            )
        )
    elif op == "ffn":
        kw = {n: a[n] for n in FFN_KW + ("weight_format", "scale_fmt") if n in a}
        y, sc, defined = R.ffn(
            v["x"],
            v["logits"],
            v["w_up"],
            v["w_down"],
            od[0],
            a["k"],
            a["scoring"],
            bias=v.get("bias"),
            w_up_bias=v.get("w_up_bias"),
            w_down_bias=v.get("w_down_bias"),
            w_up_scale=v.get("w_up_scale"),
            w_down_scale=v.get("w_down_scale"),
            **kw,
        )
        add(cmp_float("result", results[0], y, od[0], sc, defined[:, None]))
    return errs


def check_ffn_train(case, results):
    """y as moe.ffn's; weights and ids as moe.route's (near ties may pick
    either expert); h, the pre-activation in dispatch order, against the
    float64 reference when no row is a near tie (one other selection moves
    every later row of h)."""
    a, od = case.attrs, case.out_dtypes
    v = {t.name: t.value for t in case.inputs}
    errs = []
    kw = {n: a[n] for n in FFN_KW if n in a}
    y, sc, defined = R.ffn(
        v["x"],
        v["logits"],
        v["w_up"],
        v["w_down"],
        od[0],
        a["k"],
        a["scoring"],
        bias=v.get("bias"),
        w_up_bias=v.get("w_up_bias"),
        w_down_bias=v.get("w_down_bias"),
        **kw,
    )
    e = cmp_float("y", results[0], y, od[0], sc, defined[:, None])
    if e:
        errs.append(e)
    e = check_route(case, [results[2], results[3]], "f32")
    if e:
        errs.append(e)
    kw = {
        n: a[n]
        for n in (
            "normalize",
            "n_group",
            "topk_group",
            "group_score",
            "scaling",
            "transpose_weights",
        )
        if n in a
    }
    saved, defined = R.ffn_saved(
        v["x"],
        v["logits"],
        v["w_up"],
        od[1],
        a["k"],
        a["scoring"],
        bias=v.get("bias"),
        w_up_bias=v.get("w_up_bias"),
        **kw,
    )
    if defined.all():
        for e in (
            cmp_int("indices", results[3], saved["ids"]),
            cmp_float("weights", results[2], saved["weights"], "f32"),
            cmp_float("h", results[1], saved["h"], od[1], saved["h_scale"]),
        ):
            if e:
                errs.append(e)
    return errs


def check_route(case, results, weights_dtype=None):
    a = case.attrs
    v = {t.name: t.value for t in case.inputs}
    k = a["k"]
    ng, tg = a.get("n_group", 1), a.get("topk_group", 1)
    gsc = a.get("group_score", "max")
    _, ref_ids, _, s, c = R.route(
        v["logits"],
        k,
        a["scoring"],
        a.get("normalize", False),
        ng,
        tg,
        gsc,
        a.get("scaling", 1.0),
        v.get("bias"),
    )
    got_ids = results[1]
    T = ref_ids.shape[0]
    if got_ids.shape != ref_ids.shape:
        return "indices: shape %s, want %s" % (got_ids.shape, ref_ids.shape)
    want_w = np.zeros((T, k))
    for t in range(T):
        if not np.array_equal(got_ids[t], ref_ids[t]) and not R.route_ids_acceptable(
            s[t], c[t], got_ids[t], k, ng, tg, gsc
        ):
            return "indices: row %d: got %s want %s (logits %s, c %s)" % (
                t,
                got_ids[t].tolist(),
                ref_ids[t].tolist(),
                _short(v["logits"][t]),
                _short(c[t]),
            )
        want_w[t] = R.route_weights(
            s[t], got_ids[t], a.get("normalize", False), a.get("scaling", 1.0)
        )
    return cmp_float("weights", results[0], want_w, weights_dtype or case.out_dtypes[0])


# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------


def run_batch(batch, args, workdir, tag):
    """[(case, [errors])]"""
    out, err = None, None
    try:
        out, err = run_module(module_text(batch), args, workdir, tag)
    except subprocess.TimeoutExpired:
        err = "timeout"
    if err is None:
        try:
            per = split_cases(parse_memrefs(out), len(batch))
        except ValueError as ex:
            err = "unparsable output: %s" % ex
    if err is not None:
        if len(batch) == 1:
            return [(batch[0], [err])]
        res = []
        for i, c in enumerate(batch):
            res += run_batch([c], args, workdir, "%s_%d" % (tag, i))
        return res
    results = []
    for c, r in zip(batch, per):
        try:
            errs = check_case(c, r)
        except Exception as ex:  # a reference/driver bug must not hide the rest
            errs = ["checker exception: %r" % (ex,)]
        results.append((c, errs))
    return results


def default_moe_opt():
    if os.environ.get("MOE_OPT"):
        return os.environ["MOE_OPT"]
    return os.path.join(REPO, "build", "bin", "moe-opt")


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--moe-opt", default=default_moe_opt())
    p.add_argument("--mlir-runner", default="/usr/lib/llvm-22/bin/mlir-runner")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=20, help="cases per op")
    p.add_argument("--ops", default=",".join(C.OPS))
    p.add_argument("--replay", action="append", default=[], metavar="OP:SEED")
    p.add_argument("--emit", metavar="OP:SEED", help="print one case's module and exit")
    p.add_argument("--keep", metavar="DIR", help="write failing cases' .mlir there")
    p.add_argument("-j", type=int, default=os.cpu_count() or 1, dest="jobs")
    p.add_argument("--batch", type=int, default=24, help="cases per module")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument(
        "--fused",
        action="store_true",
        help="run --moe-decompose --moe-fuse before --moe-lower-to-cpu",
    )
    p.add_argument(
        "--parse-only",
        action="store_true",
        help="only check that moe-opt parses and verifies the modules",
    )
    p.add_argument(
        "--elementwise-arith",
        action="store_true",
        help="convert results with arith ops on tensors instead of linalg.generic",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    global ELEMENTWISE_ARITH
    ELEMENTWISE_ARITH = args.elementwise_arith

    if args.emit:
        op, s = args.emit.split(":")
        sys.stdout.write(module_text([C.make_case(op, int(s))]))
        return 0

    if args.replay:
        todo = []
        for key in args.replay:
            for k in key.split(","):
                op, s = k.split(":")
                todo.append(C.make_case(op, int(s)))
    else:
        alias = {"lowp": C.LOWP_OPS, "all": C.OPS + C.LOWP_OPS}
        ops = [g for o in args.ops.split(",") if o for g in alias.get(o, [o])]
        todo = [C.make_case(op, args.seed * 100000 + i) for i in range(args.count) for op in ops]

    batches = [todo[i : i + args.batch] for i in range(0, len(todo), args.batch)]
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="moe-diff-") as workdir:
        if args.parse_only:
            return parse_only(batches, args, workdir)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
            futs = [
                ex.submit(run_batch, b, args, workdir, "b%d" % i) for i, b in enumerate(batches)
            ]
            for f in futs:
                for case, errs in f.result():
                    if errs:
                        failed += 1
                        print("FAIL %s: %s" % (case.key, "; ".join(errs)))
                        if args.verbose:
                            print("     %s" % case.describe())
                        if args.keep:
                            os.makedirs(args.keep, exist_ok=True)
                            with open(
                                os.path.join(args.keep, "%s_%d.mlir" % (case.gen, case.seed)), "w"
                            ) as fh:
                                fh.write("// %s\n" % case.describe())
                                fh.write(module_text([case]))
                    else:
                        passed += 1
                        if args.verbose:
                            print("PASS %s" % case.key)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def parse_only(batches, args, workdir):
    passed = failed = 0
    for i, b in enumerate(batches):
        path = os.path.join(workdir, "p%d.mlir" % i)
        with open(path, "w") as f:
            f.write(module_text(b))
        r = subprocess.run([args.moe_opt, path, "-o", os.devnull], capture_output=True, text=True)
        if r.returncode == 0:
            passed += len(b)
            continue
        for c in b:
            with open(path, "w") as f:
                f.write(module_text([c]))
            r = subprocess.run(
                [args.moe_opt, path, "-o", os.devnull], capture_output=True, text=True
            )
            if r.returncode:
                failed += 1
                print("FAIL %s: %s" % (c.key, _first_error(r.stderr)))
            else:
                passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
