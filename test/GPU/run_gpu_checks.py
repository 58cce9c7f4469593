#!/usr/bin/env python3
"""Correctness checks of the AOT-compiled moe GPU code (run on the GPU machine).

Run from inside gpu-artifacts/ (made by test/GPU/build_artifacts.sh):

  python3 run_gpu_checks.py [--small] [--out DIR] [--only REGEX] [--builds unfused,fused]
                            [--budget SECONDS] [--list] [--dry-run]

Checks, one line each (status, name, build, T, error, tolerance, seconds, notes):

  selfcheck/torch_reference   torch_reference.py vs reference.py (float64)
  sig/<file>                  each .so's manifest (from the IR, at build time)
                              matches gpu_cases.py's table
  op/<fn>                     every function of ops.so and backward.so at T
                              in 0,1,7,64,300 on fresh random inputs vs
                              reference.py: integers exact, copies exact,
                              computed floats ||out-ref||/||ref|| < 1e-5
                              (f32), 1e-2 (bf16); the layer gradients at the
                              layer's precision, experts without tokens
                              exactly zero (gpu_cases.GRAD_TOL)
  edge/<fn>                   the same on adversarial inputs: -1 / >= E /
                              int32-extreme ids, duplicates, empty experts,
                              NaN / inf / tied logits, clamped offsets
  const/<fn>, const/uploads   moe.ffn with its weights as module constants
                              (cases/ffn_const.mlir, dense and dense_resource)
                              at T in 0,1,7,64,300 vs reference.py; the
                              library holds every constant on the device
                              right after loading and uploads none per call
  route/<model>, ffn/<model>  the four model layers (bf16) at T in
                              1,8,64,512,4096 vs torch_reference.py: routing
                              ids (a mismatch is a near tie only when the
                              reference's k-th and (k+1)-th scores differ by
                              < 1e-5) and the layer output, rel err < 1e-2;
                              median time of a few calls (cuda events)
  edge/ffn-<model>-...        T=0, empty experts, non-finite logit rows, and
                              DeepSeek-V3 at T=38000 (T*k*H > 2^31) on a row
                              subset that includes the last rows
  bwd-det/<fn>                every backward function (cases/backward.mlir)
                              called 5 times on the same inputs (T=1000):
                              bitwise the same results
  bwd-zero/<fn>               moe.ffn_grad (both forms) at T=1000 with every
                              token on the same few experts: the others'
                              weight gradients exactly zero
  bwd-graph/<fn>              moe.ffn_grad (both forms) captured in a CUDA
                              graph at T=64, replayed with new inputs copied
                              in: bitwise a plain call's results, and within
                              tolerance of reference.py
  bwd-pair/<layer>            moe.ffn_train's saved h, weights, indices from
                              the GPU into moe.ffn_grad's saved form, vs
                              reference.py

Every output is poisoned before the call (NaN, 0x7fff..., 0x7f bytes for i1)
and followed by a poisoned guard region that must stay untouched; inputs
must come back unmodified. Both builds (ops.unfused.so / ops.fused.so, ...)
are checked. --small is the subset meant for
`compute-sanitizer --tool memcheck` (ops at T <= 64, models at T = 8,
bwd-det/ and bwd-zero/ at T = 64, no bwd-graph/).

Writes results.json and results.md into --out (default $OUT, else the
current directory). Exit status: 0 all passed, 1 some check failed, 2 none
failed but some were skipped (time budget).

--dry-run exercises the harness without a GPU or torch: a numpy stand-in
"compiles" every op function from reference.py (ops only).
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import sys
import time
import traceback
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gpu_cases as G  # noqa: E402

T_OPS = [0, 1, 7, 64, 300]
T_OPS_SMALL = [0, 1, 7, 64]
T_EDGE = [5, 64]
T_EDGE_SMALL = [64]
T_FFN = [1, 8, 64, 512, 4096]
T_FFN_SMALL = [8]
T_CONST = [0, 1, 7, 64, 300]
T_CONST_SMALL = [1, 64]
BIG_T = 38000
T_DET = 1000  # bwd-det/, bwd-zero/: many rows per expert
T_DET_SMALL = 64
T_BWD = 64  # bwd-graph/, bwd-pair/
DET_CALLS = 5
BUILDS = ("unfused", "fused")
FFN_TOL = 1e-2
ROUTE_W_TOL = 1e-5
GUARD = 256  # poisoned elements after every output


# ----------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------


class Results:
    def __init__(self, out_dir, meta, budget):
        self.out_dir = out_dir
        self.meta = meta
        self.rows = []
        self.start = time.time()
        self.budget = budget
        self.aborted = None  # reason when the CUDA context is gone

    def elapsed(self):
        return time.time() - self.start

    def over_budget(self):
        return self.budget is not None and self.elapsed() > self.budget

    def add(
        self,
        name,
        build="-",
        T=None,
        status="PASS",
        err=None,
        tol=None,
        secs=0.0,
        detail="",
        **extra,
    ):
        row = dict(
            name=name,
            build=build,
            T=T,
            status=status,
            err=err,
            tol=tol,
            secs=round(float(secs), 4),
            detail=detail,
        )
        row.update(extra)
        self.rows.append(row)
        e = "-" if err is None else ("%.3e" % err if np.isfinite(err) else str(err))
        t = "-" if tol is None else "%.0e" % tol
        ms = extra.get("median_ms")
        tm = "" if ms is None else "  median %.3f ms" % ms
        print(
            "%-4s  %-52s %-8s T=%-6s err=%-10s tol=%-6s %7.3fs%s%s"
            % (
                status,
                name,
                build,
                "-" if T is None else T,
                e,
                t,
                secs,
                tm,
                ("  " + detail) if detail else "",
            ),
            flush=True,
        )
        self.flush()
        return row

    def counts(self):
        c = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        for r in self.rows:
            c[r["status"]] = c.get(r["status"], 0) + 1
        return c

    def flush(self):
        os.makedirs(self.out_dir, exist_ok=True)
        data = dict(
            meta=self.meta,
            counts=self.counts(),
            elapsed_s=round(self.elapsed(), 1),
            aborted=self.aborted,
            checks=self.rows,
        )
        tmp = os.path.join(self.out_dir, "results.json.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, os.path.join(self.out_dir, "results.json"))

    # -- summary -------------------------------------------------------------

    def group_table(self):
        groups = {}
        for r in self.rows:
            g = r["name"].split("/")[0]
            if g == "edge" and r["name"].startswith("edge/ffn-"):
                g = "edge-ffn"
            key = (g, r["build"])
            d = groups.setdefault(key, {"PASS": 0, "FAIL": 0, "SKIP": 0, "max_err": 0.0})
            d[r["status"]] = d.get(r["status"], 0) + 1
            if r["status"] != "SKIP" and r["err"] is not None and r["tol"] is not None:
                rel = r["err"] / r["tol"] if r["tol"] else 0.0
                if not (rel <= d["max_err"]):
                    d["max_err"] = rel
        return groups

    def timing_table(self):
        t = {}
        for r in self.rows:
            if r["name"].startswith("ffn/") and r.get("median_ms") is not None:
                t.setdefault(r["name"][4:], {})[(r["T"], r["build"])] = r["median_ms"]
        return t

    def summary_lines(self, markdown=False):
        L = []
        c = self.counts()
        groups = self.group_table()
        if markdown:
            L.append("| group | build | pass | fail | skip | worst err/tol |")
            L.append("|---|---|---:|---:|---:|---:|")
        else:
            L.append(
                "%-10s %-8s %6s %6s %6s %14s"
                % ("group", "build", "pass", "fail", "skip", "worst err/tol")
            )
        for g, b in sorted(groups):
            d = groups[(g, b)]
            me = "%.3g" % d["max_err"] if np.isfinite(d["max_err"]) else "inf"
            if markdown:
                L.append(
                    "| %s | %s | %d | %d | %d | %s |" % (g, b, d["PASS"], d["FAIL"], d["SKIP"], me)
                )
            else:
                L.append(
                    "%-10s %-8s %6d %6d %6d %14s" % (g, b, d["PASS"], d["FAIL"], d["SKIP"], me)
                )
        L.append("")
        nbud = sum(1 for r in self.rows if r["status"] == "SKIP" and r["detail"] == "time budget")
        L.append(
            "total: %d passed, %d failed, %d skipped%s in %.0f s%s"
            % (
                c["PASS"],
                c["FAIL"],
                c["SKIP"],
                " (%d for the time budget: INCOMPLETE)" % nbud if nbud else "",
                self.elapsed(),
                ("  (ABORTED: %s)" % self.aborted) if self.aborted else "",
            )
        )
        fails = [r for r in self.rows if r["status"] == "FAIL"]
        if fails:
            L.append("")
            L.append("failures:" if not markdown else "### Failures")
            if markdown:
                L.append("")
                L.append("| check | build | T | err | detail |")
                L.append("|---|---|---:|---:|---|")
            for r in fails[:200]:
                e = "-" if r["err"] is None else "%.3g" % r["err"]
                if markdown:
                    L.append(
                        "| %s | %s | %s | %s | %s |"
                        % (
                            r["name"],
                            r["build"],
                            r["T"],
                            e,
                            str(r["detail"]).replace("|", "\\|")[:300],
                        )
                    )
                else:
                    L.append(
                        "  %s [%s] T=%s err=%s: %s"
                        % (r["name"], r["build"], r["T"], e, str(r["detail"])[:300])
                    )
            if len(fails) > 200:
                L.append("  ... %d more" % (len(fails) - 200))
        tt = self.timing_table()
        if tt:
            L.append("")
            Ts = sorted({T for d in tt.values() for (T, _) in d})
            if markdown:
                L.append("### moe.ffn median time (ms), unfused / fused")
                L.append("")
                L.append("| model | " + " | ".join("T=%d" % T for T in Ts) + " |")
                L.append("|---|" + "---:|" * len(Ts))
            else:
                L.append("moe.ffn median ms (unfused / fused):")
                L.append("%-16s" % "model" + "".join("%20s" % ("T=%d" % T) for T in Ts))
            for m in sorted(tt):
                cells = []
                for T in Ts:
                    u = tt[m].get((T, "unfused"))
                    f = tt[m].get((T, "fused"))
                    cells.append(
                        "%s / %s"
                        % ("-" if u is None else "%.3f" % u, "-" if f is None else "%.3f" % f)
                    )
                if markdown:
                    L.append("| %s | %s |" % (m, " | ".join(cells)))
                else:
                    L.append("%-16s" % m + "".join("%20s" % cc for cc in cells))
        return L

    def write_markdown(self):
        m = self.meta
        L = ["# moe-mlir GPU correctness checks", ""]
        for k in ("commit", "gpu", "torch", "cuda", "date", "host", "mode", "args"):
            L.append("- **%s**: %s" % (k, m.get(k)))
        L.append("")
        L += self.summary_lines(markdown=True)
        L.append("")
        L.append("<details><summary>all checks</summary>")
        L.append("")
        L.append("| status | check | build | T | err | tol | s | ms | detail |")
        L.append("|---|---|---|---:|---:|---:|---:|---:|---|")
        for r in self.rows:
            e = "-" if r["err"] is None else "%.3g" % r["err"]
            tol = "-" if r["tol"] is None else "%.0e" % r["tol"]
            ms = r.get("median_ms")
            L.append(
                "| %s | %s | %s | %s | %s | %s | %.3f | %s | %s |"
                % (
                    r["status"],
                    r["name"],
                    r["build"],
                    "-" if r["T"] is None else r["T"],
                    e,
                    tol,
                    r["secs"],
                    "-" if ms is None else "%.3f" % ms,
                    str(r["detail"]).replace("|", "\\|")[:300],
                )
            )
        L.append("")
        L.append("</details>")
        with open(os.path.join(self.out_dir, "results.md"), "w") as f:
            f.write("\n".join(L) + "\n")


class ContextLost(Exception):
    pass


# ----------------------------------------------------------------------------
# Artifacts and signatures
# ----------------------------------------------------------------------------


def so_path(art, stem, build):
    return os.path.join(art, "%s.%s.so" % (stem, build))


def _dims(shape):
    return tuple(None if isinstance(d, str) else d for d in shape)


def check_signatures(art, res, builds):
    """sig/<file>: each library's manifest (written when it was built, from
    the module's IR, by bench/write_manifest.py) must give every function
    of the case file the table's argument and result types."""
    sig = G.signatures()
    for stem in sorted({s for s, _ in sig}):
        for build in builds:
            path = so_path(art, stem, build)[: -len(".so")] + ".manifest.json"
            if not os.path.exists(path):
                res.add(
                    "sig/" + stem,
                    build,
                    status="SKIP",
                    detail="no %s (built without the moe_mlir package?)" % os.path.basename(path),
                )
                continue
            with open(path) as f:
                functions = json.load(f).get("functions", {})
            bad = []
            for (s, fn), (ins, outs) in sig.items():
                if s != stem:
                    continue
                want = (
                    [(a.dtype, _dims(a.shape)) for a in ins],
                    [(a.dtype, _dims(a.shape)) for a in outs],
                )
                spec = functions.get(fn)
                if spec is None:
                    bad.append("@%s missing" % fn)
                    continue
                got = (
                    [(a["dtype"], tuple(a["shape"])) for a in spec["args"]],
                    [(r["dtype"], tuple(r["shape"])) for r in spec["results"]],
                )
                if got != want:
                    bad.append("@%s is %s, table says %s" % (fn, got, want))
            res.add(
                "sig/" + stem,
                build,
                status="FAIL" if bad else "PASS",
                detail="; ".join(bad[:5]) + (" (stale artifacts? rebuild)" if bad else ""),
            )


# ----------------------------------------------------------------------------
# Backends: torch on the GPU, numpy for --dry-run
# ----------------------------------------------------------------------------

POISON_INT = {"i32": 0x7FFFFFFF, "i64": 0x7FFFFFFFFFFFFFFF}


class OutBuf:
    def __init__(self, buf, view, numel, dtype):
        self.buf = buf
        self.view = view
        self.numel = numel
        self.dtype = dtype


class TorchBackend:
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch
        if not torch.cuda.is_available():
            raise SystemExit("run_gpu_checks: torch sees no CUDA device")
        self.dev = torch.device("cuda")
        self.stream = torch.cuda.Stream()
        torch.cuda.set_stream(self.stream)
        self.dt = {
            "f32": torch.float32,
            "bf16": torch.bfloat16,
            "f16": torch.float16,
            "i32": torch.int32,
            "i64": torch.int64,
            "i1": torch.bool,
        }

    def load(self, path):
        import memref_abi

        mod = memref_abi.CompiledModule(path)
        if hasattr(mod, "set_stream"):
            s = self.torch.cuda.current_stream()
            try:
                mod.set_stream(s)
            except Exception:  # noqa: BLE001 - the ABI may want the raw handle
                mod.set_stream(s.cuda_stream)
        return mod

    def to_device(self, arr, dtype):
        import torch_reference as TR

        return TR.to_torch(arr, dtype, self.dev)

    def poison(self, buf, dtype):
        t = self.torch
        if dtype in ("f32", "bf16", "f16"):
            buf.fill_(float("nan"))
        elif dtype == "i1":
            buf.view(t.uint8).fill_(0x7F)
        else:
            buf.fill_(POISON_INT[dtype])

    def alloc_out(self, shape, dtype):
        numel = int(np.prod(shape)) if len(shape) else 1
        buf = self.torch.empty(numel + GUARD, dtype=self.dt[dtype], device=self.dev)
        self.poison(buf, dtype)
        return OutBuf(buf, buf[:numel].view(shape), numel, dtype)

    def guard_ok(self, o):
        t = self.torch
        g = o.buf[o.numel :]
        if o.dtype in ("f32", "bf16", "f16"):
            return bool(t.isnan(g).all())
        if o.dtype == "i1":
            return bool((g.view(t.uint8) == 0x7F).all())
        return bool((g == POISON_INT[o.dtype]).all())

    def to_numpy(self, t, dtype):
        import torch_reference as TR

        return TR.to_numpy(t, dtype)

    def clone(self, t):
        return t.clone()

    def same(self, a, b):
        t = self.torch
        if a.dtype in (t.float32, t.bfloat16, t.float16):
            ia = {t.float32: t.int32, t.bfloat16: t.int16, t.float16: t.int16}[a.dtype]
            return bool(t.equal(a.view(ia), b.view(ia)))
        return bool(t.equal(a, b))

    def sync(self):
        self.torch.cuda.synchronize()

    def context_alive(self):
        try:
            self.torch.cuda.synchronize()
            self.torch.zeros(1, device=self.dev).add_(1).item()
            return True
        except Exception:  # noqa: BLE001
            return False


class FakeModule:
    """--dry-run: 'compiled' op functions computed by reference.py, results
    rounded to their declared types and written into the out-params."""

    def __init__(self, path, bug=None):
        self.path = path
        self.bug = bug

    def call(self, name, *arrays):
        case = G.CASES_BY_NAME[name]
        n = len(case.inputs)
        inp = {a.name: arr.copy() for a, arr in zip(case.inputs, arrays[:n])}
        oc = G.Outcome()
        exp = G.expected(case, inp, {}, oc)
        for r, out in zip(case.outputs, arrays[n:]):
            v = np.asarray(exp[r.name].value, dtype=np.float64)
            if r.dtype in G.FLOAT_TYPES:
                v = G.R.round_to(v, r.dtype)
            if self.bug == "skip-last" and v.shape[0] > 0:
                v = v[:-1]
                out.reshape(-1)[: v.size] = v.reshape(-1)
                continue
            out[...] = v.reshape(out.shape)


class NumpyBackend:
    name = "numpy"

    def __init__(self, bug=None):
        self.bug = bug

    def load(self, path):
        return FakeModule(path, self.bug)

    def to_device(self, arr, dtype):
        if dtype in G.FLOAT_TYPES:
            return np.array(arr, dtype=np.float64)
        return np.array(arr, dtype=np.int64)

    def alloc_out(self, shape, dtype):
        numel = int(np.prod(shape)) if len(shape) else 1
        if dtype in G.FLOAT_TYPES:
            buf = np.full(numel + GUARD, np.nan)
        elif dtype == "i1":
            buf = np.full(numel + GUARD, 0x7F, dtype=np.int64)
        else:
            buf = np.full(numel + GUARD, POISON_INT[dtype], dtype=np.int64)
        return OutBuf(buf, buf[:numel].reshape(shape), numel, dtype)

    def guard_ok(self, o):
        g = o.buf[o.numel :]
        if o.dtype in G.FLOAT_TYPES:
            return bool(np.isnan(g).all())
        if o.dtype == "i1":
            return bool((g == 0x7F).all())
        return bool((g == POISON_INT[o.dtype]).all())

    def to_numpy(self, t, dtype):
        return np.array(t, dtype=np.float64 if dtype in G.FLOAT_TYPES else np.int64)

    def clone(self, t):
        return t.copy()

    def same(self, a, b):
        return (
            bool(np.array_equal(a, b, equal_nan=True))
            if a.dtype.kind == "f"
            else bool(np.array_equal(a, b))
        )

    def sync(self):
        pass

    def context_alive(self):
        return True


class Modules:
    """Loads each .so once; remembers load failures."""

    def __init__(self, backend, art):
        self.backend = backend
        self.art = art
        self.mods = {}

    def get(self, stem, build):
        key = (stem, build)
        if key not in self.mods:
            path = so_path(self.art, stem, build)
            if not os.path.exists(path) and self.backend.name != "numpy":
                self.mods[key] = "missing artifact %s" % path
            else:
                try:
                    self.mods[key] = self.backend.load(path)
                except Exception as ex:  # noqa: BLE001
                    self.mods[key] = "cannot load %s: %s: %s" % (path, type(ex).__name__, ex)
        return self.mods[key]


def validate_args(args_spec, tensors, T, backend):
    """The harness's own tensors must match the function's signature."""
    for a, t in zip(args_spec, tensors):
        shape = tuple(t.shape)
        if shape != a.shape_at(T):
            raise AssertionError(
                "harness bug: %s has shape %s, signature wants %s at T=%d"
                % (a.name, shape, a.shape_at(T), T)
            )
        if backend.name == "torch" and t.dtype != backend.dt[a.dtype]:
            raise AssertionError(
                "harness bug: %s is %s, signature wants %s" % (a.name, t.dtype, a.dtype)
            )
        if backend.name == "torch" and not t.is_contiguous():
            raise AssertionError("harness bug: %s is not contiguous" % a.name)
    if len(tensors) != len(args_spec):
        raise AssertionError(
            "harness bug: %d tensors for %d arguments" % (len(tensors), len(args_spec))
        )


def call_checked(backend, mod, fn, ins_spec, ins, outs_spec, outs, T):
    """Validates shapes, calls, synchronises. Raises ContextLost when the
    CUDA context died (every later call would fail too)."""
    validate_args(ins_spec, ins, T, backend)
    validate_args(outs_spec, [o.view for o in outs], T, backend)
    try:
        mod.call(fn, *ins, *[o.view for o in outs])
        if hasattr(mod, "synchronize"):
            mod.synchronize()  # raises errors the runtime recorded asynchronously
        backend.sync()
    except Exception as ex:
        if not backend.context_alive():
            raise ContextLost("%s: %s: %s" % (fn, type(ex).__name__, ex)) from ex
        raise


# ----------------------------------------------------------------------------
# (a) + (c) op checks
# ----------------------------------------------------------------------------


def run_op(res, mods, backend, case, build, T, mode):
    name = ("edge/" if mode == "edge" else "op/") + case.name
    mod = mods.get(case.stem, build)
    if isinstance(mod, str):
        return res.add(name, build, T, "FAIL", detail=mod)
    t0 = time.time()
    try:
        inp = G.gen_inputs(case, T, mode)
        ins = [backend.to_device(inp[a.name], a.dtype) for a in case.inputs]
        saved = [backend.clone(x) for x in ins]
        outs = [backend.alloc_out(r.shape_at(T), r.dtype) for r in case.outputs]
        call_checked(backend, mod, case.name, case.inputs, ins, case.outputs, outs, T)
        secs = time.time() - t0
        got = {r.name: backend.to_numpy(o.view, r.dtype) for r, o in zip(case.outputs, outs)}
        oc = G.check_op(case, inp, got)
        for r, o in zip(case.outputs, outs):
            if not backend.guard_ok(o):
                oc.fail("%s: wrote past its end (guard region changed)" % r.name)
        for a, x, s in zip(case.inputs, ins, saved):
            if not backend.same(x, s):
                oc.fail("input %s was modified" % a.name)
        tol = max([G.REL_TOL[r.dtype] for r in case.outputs if r.dtype in G.REL_TOL] + [oc.tol])
        return res.add(
            name,
            build,
            T,
            "PASS" if oc.ok else "FAIL",
            err=oc.err,
            tol=tol or None,
            secs=secs,
            detail=oc.detail,
        )
    except ContextLost:
        raise
    except Exception as ex:  # noqa: BLE001 - one broken check must not stop the rest
        return res.add(
            name,
            build,
            T,
            "FAIL",
            secs=time.time() - t0,
            detail="%s: %s" % (type(ex).__name__, str(ex)[:500]),
        )


def run_const(res, mods, backend, build, Ts):
    """const/<fn>: cases/ffn_const.mlir, moe.ffn with its weights as module
    constants. The library must hold every constant on the device right
    after loading (uploaded by its constructor) and upload nothing on the
    calls; each call is checked against the reference on the same weights,
    as op/ checks are."""
    mod = mods.get("ffn_const", build)
    names = ["const/" + c.name for c in G.CONST_CASES]
    if isinstance(mod, str):
        for n in names:
            res.add(n, build, status="FAIL", detail=mod)
        return
    held = mod.device_constants() if hasattr(mod, "device_constants") else None
    want = 2 * len(G.CONST_CASES)
    for case in G.CONST_CASES:
        name = "const/" + case.name
        w = case.weights()
        for T in Ts:
            t0 = time.time()
            try:
                inp = G.gen_inputs(case.ref_case, T, "random")
                inp.update(w)
                ins = [backend.to_device(inp[a.name], a.dtype) for a in case.inputs]
                outs = [backend.alloc_out(r.shape_at(T), r.dtype) for r in case.outputs]
                call_checked(backend, mod, case.name, case.inputs, ins, case.outputs, outs, T)
                got = {
                    r.name: backend.to_numpy(o.view, r.dtype) for r, o in zip(case.outputs, outs)
                }
                oc = G.check_op(case.ref_case, inp, got)
                for r, o in zip(case.outputs, outs):
                    if not backend.guard_ok(o):
                        oc.fail("%s: wrote past its end (guard region changed)" % r.name)
                res.add(
                    name,
                    build,
                    T,
                    "PASS" if oc.ok else "FAIL",
                    err=oc.err,
                    tol=G.REL_TOL.get(case.F),
                    secs=time.time() - t0,
                    detail=oc.detail,
                )
            except ContextLost:
                raise
            except Exception as ex:  # noqa: BLE001
                res.add(
                    name,
                    build,
                    T,
                    "FAIL",
                    secs=time.time() - t0,
                    detail="%s: %s" % (type(ex).__name__, str(ex)[:500]),
                )
    if held is None:
        return res.add("const/uploads", build, status="SKIP", detail="no device_constants()")
    after = mod.device_constants()
    ok = held["count"] == want and held["uploads"] == want and after == held
    res.add(
        "const/uploads",
        build,
        status="PASS" if ok else "FAIL",
        detail="after loading %s, after %d calls %s (want %d constants, uploaded once)"
        % (held, len(Ts) * len(G.CONST_CASES), after, want),
    )
    run_const_unload(res, backend, so_path(mods.art, "ffn_const", build), build, want)


def run_const_unload(res, backend, path, build, want):
    """const/unload: a private copy of the library loaded, called and
    unloaded 8 times: each load uploads the constants, each unload frees
    them (and the kernels): the device's free memory does not shrink."""
    import shutil
    import tempfile

    torch = backend.torch
    t0 = time.time()
    try:
        tmp = tempfile.mkdtemp(prefix="moe-const-")
        free = []
        holds = []
        case = G.CONST_CASES[0]
        for i in range(8):
            copy = os.path.join(tmp, "copy%d.so" % i)  # a new file: a new load
            shutil.copy(path, copy)
            lib = backend.load(copy)
            holds.append(lib.device_constants()["count"])
            inp = G.gen_inputs(case.ref_case, 7, "random")
            ins = [backend.to_device(inp[a.name], a.dtype) for a in case.inputs]
            outs = [backend.alloc_out(r.shape_at(7), r.dtype) for r in case.outputs]
            call_checked(backend, lib, case.name, case.inputs, ins, case.outputs, outs, 7)
            del ins, outs
            lib.unload()
            os.remove(copy)
            torch.cuda.synchronize()
            free.append(torch.cuda.mem_get_info()[0])
        shutil.rmtree(tmp, ignore_errors=True)
        lost = free[1] - free[-1]  # after the first cycle (driver / pool warm-up)
        ok = all(h == want for h in holds) and lost <= 2 * 2**20
        res.add(
            "const/unload",
            build,
            status="PASS" if ok else "FAIL",
            secs=time.time() - t0,
            detail="8 load/call/unload cycles: constants held after each load %s; "
            "device free memory %+d bytes from cycle 2 to 8" % (holds, -lost),
        )
    except Exception as ex:  # noqa: BLE001
        res.add(
            "const/unload",
            build,
            status="FAIL",
            secs=time.time() - t0,
            detail="%s: %s" % (type(ex).__name__, str(ex)[:500]),
        )


# ----------------------------------------------------------------------------
# (d) backward: determinism, empty experts, CUDA graphs, train -> grad
# ----------------------------------------------------------------------------


def backward_cases(op=None):
    return [c for c in G.OP_CASES if c.stem == G.BACKWARD and op in (None, c.op)]


def _call_fresh(backend, mod, case, ins, T):
    """One call of `case` on device inputs `ins` into new poisoned outputs."""
    outs = [backend.alloc_out(r.shape_at(T), r.dtype) for r in case.outputs]
    call_checked(backend, mod, case.name, case.inputs, ins, case.outputs, outs, T)
    return outs


def _got(backend, case, outs):
    return {r.name: backend.to_numpy(o.view, r.dtype) for r, o in zip(case.outputs, outs)}


def _bwd_check(res, mods, backend, name, case, build, T, body):
    """Runs `body(mod) -> (ok, err, tol, detail)` as check `name`."""
    mod = mods.get(case.stem, build)
    if isinstance(mod, str):
        return res.add(name, build, T, "FAIL", detail=mod)
    if res.over_budget():
        return res.add(name, build, T, "SKIP", detail="time budget")
    t0 = time.time()
    try:
        ok, err, tol, detail = body(mod)
        res.add(name, build, T, "PASS" if ok else "FAIL", err, tol, time.time() - t0, detail)
    except ContextLost:
        raise
    except Exception as ex:  # noqa: BLE001
        res.add(
            name,
            build,
            T,
            "FAIL",
            secs=time.time() - t0,
            detail="%s: %s" % (type(ex).__name__, str(ex)[:500]),
        )


def run_bwd_det(res, mods, backend, case, build, T):
    """bwd-det/<fn>: DET_CALLS calls on the same inputs give bitwise the
    same results (no order-dependent reduction, e.g. float atomics)."""

    def body(mod):
        inp = G.gen_inputs(case, T, "random")
        ins = [backend.to_device(inp[a.name], a.dtype) for a in case.inputs]
        first = _call_fresh(backend, mod, case, ins, T)
        diff = []
        for i in range(2, DET_CALLS + 1):
            outs = _call_fresh(backend, mod, case, ins, T)
            for r, a, b in zip(case.outputs, first, outs):
                if not backend.same(a.view, b.view):
                    diff.append("%s (call %d)" % (r.name, i))
        if diff:
            return False, None, None, "differ from call 1: " + ", ".join(diff[:8])
        return True, None, None, "%d calls bitwise equal" % DET_CALLS

    _bwd_check(res, mods, backend, "bwd-det/" + case.name, case, build, T, body)


def run_bwd_zero(res, mods, backend, case, build, T):
    """bwd-zero/<fn>: moe.ffn_grad where every token picks the same few
    experts (gen_inputs' edge logits): the weight gradients of the experts
    no token picks are exactly zero (written, not left poisoned)."""

    def body(mod):
        inp = G.gen_inputs(case, T, "edge")
        empty = G.empty_experts(case, inp)
        if not empty.any():
            raise AssertionError("harness bug: every expert has tokens")
        ins = [backend.to_device(inp[a.name], a.dtype) for a in case.inputs]
        got = _got(backend, case, _call_fresh(backend, mod, case, ins, T))
        bad = [
            "%s[%d]" % (r.name, e)
            for r in case.outputs[2:]
            for e in np.flatnonzero(empty)
            if np.any(got[r.name][e] != 0.0)
        ]
        detail = "%d of %d experts without tokens" % (int(empty.sum()), len(empty))
        if bad:
            return False, None, None, detail + "; not exactly zero: " + ", ".join(bad[:8])
        return True, None, None, detail + ": their weight gradients exactly zero"

    _bwd_check(res, mods, backend, "bwd-zero/" + case.name, case, build, T, body)


def run_bwd_graph(res, mods, backend, case, build, T):
    """bwd-graph/<fn>: one call captured in a CUDA graph (after a warm-up
    on a side stream), then replayed twice with new inputs copied into the
    captured input tensors: each replay bitwise equal to a plain call on
    those inputs, and within tolerance of the reference."""
    torch = backend.torch

    def body(mod):
        inp = G.gen_inputs(case, T, "random", seed=100)
        ins = [backend.to_device(inp[a.name], a.dtype) for a in case.inputs]
        outs = [backend.alloc_out(r.shape_at(T), r.dtype) for r in case.outputs]
        args = ins + [o.view for o in outs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                mod.call(case.name, *args, stream=side)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            mod.call(case.name, *args, stream=torch.cuda.current_stream())
        torch.cuda.synchronize()
        mod.synchronize()
        ok, err, tol, notes = True, 0.0, 0.0, []
        for rnd in (1, 2):
            inp = G.gen_inputs(case, T, "random", seed=100 + rnd)
            for a, x in zip(case.inputs, ins):
                x.copy_(backend.to_device(inp[a.name], a.dtype))
            for o in outs:
                backend.poison(o.buf, o.dtype)
            graph.replay()
            torch.cuda.synchronize()
            mod.synchronize()
            plain = _call_fresh(backend, mod, case, ins, T)
            oc = G.check_op(case, inp, _got(backend, case, outs))
            err, tol = max(err, oc.err), max(tol, oc.tol)
            if not all(backend.same(o.view, p.view) for o, p in zip(outs, plain)):
                ok = False
                notes.append("replay %d differs from a plain call" % rnd)
            if not oc.ok:
                ok = False
                notes.append("replay %d: %s" % (rnd, oc.detail))
        del graph
        return ok, err, tol or None, "; ".join(notes) or "2 replays with new inputs"

    _bwd_check(res, mods, backend, "bwd-graph/" + case.name, case, build, T, body)


def run_bwd_pair(res, mods, backend, layer, build, T):
    """bwd-pair/<layer>: moe.ffn_train's h, weights and indices, as computed
    on the GPU, into moe.ffn_grad's saved form: its results within
    tolerance of the reference (the layer's gradient)."""
    train = G.CASES_BY_NAME["ffn_train_" + layer]
    grad = G.CASES_BY_NAME["ffn_grad_saved_" + layer]

    def body(mod):
        inp = G.gen_inputs(grad, T, "random")
        dev = {a.name: backend.to_device(inp[a.name], a.dtype) for a in grad.inputs}
        touts = _call_fresh(backend, mod, train, [dev[a.name] for a in train.inputs], T)
        for r, o in zip(train.outputs[1:], touts[1:]):  # h, weights, indices
            dev[r.name] = o.view
            inp[r.name] = backend.to_numpy(o.view, r.dtype)
        gouts = _call_fresh(backend, mod, grad, [dev[a.name] for a in grad.inputs], T)
        oc = G.check_op(grad, inp, _got(backend, grad, gouts))
        return oc.ok, oc.err, oc.tol or None, oc.detail

    _bwd_check(res, mods, backend, "bwd-pair/" + layer, grad, build, T, body)


def run_backward(res, mods, backend, builds, small, selected):
    """The bwd-*/ checks. --small (the sanitizer run, torch's caching
    allocator off, which graph capture needs) leaves bwd-graph/ out."""
    T_det = T_DET_SMALL if small else T_DET
    for build in builds:
        for case in backward_cases():
            if selected("bwd-det/" + case.name):
                run_bwd_det(res, mods, backend, case, build, T_det)
        for case in backward_cases("ffn_grad"):
            if selected("bwd-zero/" + case.name):
                run_bwd_zero(res, mods, backend, case, build, T_det)
            if not small and selected("bwd-graph/" + case.name):
                run_bwd_graph(res, mods, backend, case, build, T_BWD)
        for layer, *_ in G.LAYERS:
            if selected("bwd-pair/" + layer):
                run_bwd_pair(res, mods, backend, layer, build, T_BWD)


# ----------------------------------------------------------------------------
# (b) + (c) model layers
# ----------------------------------------------------------------------------


class ModelRunner:
    def __init__(self, res, mods, backend, model, builds, args):
        import torch
        import torch_reference as TR

        self.torch = torch
        self.TR = TR
        self.res = res
        self.mods = mods
        self.backend = backend
        self.m = model
        self.builds = builds
        self.args = args
        self.stem = "ffn_" + model.name
        self.dev = backend.dev
        self.w_up = self.w_down = self.bias = None
        self.w_up_bias = self.w_down_bias = None

    # -- data ----------------------------------------------------------------

    def gen(self, key, shape, dtype, scale=1.0):
        torch = self.torch
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(("%s/%s" % (self.m.name, key)).encode()))
        t = torch.randn(shape, dtype=dtype, device=self.dev, generator=g)
        if scale != 1.0:
            t.mul_(scale)
        return t

    def make_weights(self):
        torch, m = self.torch, self.m
        t0 = time.time()
        self.w_up = self.gen("w_up", m.w_up_shape, torch.bfloat16, 1.0 / m.H**0.5)
        self.w_down = self.gen("w_down", m.w_down_shape, torch.bfloat16, 1.0 / m.I**0.5)
        self.bias = self.gen("bias", (m.E,), torch.float32, 0.1) if m.bias else None
        if m.expert_bias:
            self.w_up_bias = self.gen("w_up_bias", (m.E, 2 * m.I), torch.bfloat16, 0.5)
            self.w_down_bias = self.gen("w_down_bias", (m.E, m.H), torch.bfloat16, 0.1)
        torch.cuda.synchronize()
        gib = (self.w_up.numel() + self.w_down.numel()) * 2 / 2**30
        print(
            "      %s: weights %.1f GiB generated in %.1fs" % (m.name, gib, time.time() - t0),
            flush=True,
        )

    def free(self):
        self.w_up = self.w_down = self.bias = None
        self.w_up_bias = self.w_down_bias = None
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    def inputs(self, T, kind):
        torch, m = self.torch, self.m
        x = self.gen("x/%s/%d" % (kind, T), (T, m.H), torch.bfloat16)
        lg = self.gen("logits/%s/%d" % (kind, T), (T, m.E), torch.float32, 2.0)
        if kind == "empty-experts":
            # every token prefers the same k experts (inside topk_group groups
            # for DeepSeek), so E-k experts get no token at all
            fav = G.favoured_experts(m.E, m.k, m.route)
            lg = lg * 0.5 - 8.0
            lg[:, fav] += 16.0
        elif kind == "nonfinite" and T:
            nan, inf = float("nan"), float("inf")
            r = torch.arange(T, device=self.dev)

            def rows(i):
                return torch.nonzero(r % 8 == i).flatten()

            lg[rows(1)] = nan  # whole row NaN
            lg[rows(2)] = -inf  # whole row -inf
            lg[rows(3), 5 % m.E] = inf  # one +inf
            mixed = rows(4)  # NaN / -inf / finite
            for c0, v in ((0, nan), (1, -inf)):
                cols = torch.arange(c0, m.E, 3, device=self.dev)
                lg[mixed[:, None], cols[None, :]] = v
            lg[rows(5), 2 % m.E] = nan  # one NaN
            lg[rows(6), 7 % m.E] = inf  # two +inf
            lg[rows(6), 3 % m.E] = inf
        return x, lg.to(torch.float32 if m.logits_f == "f32" else torch.bfloat16)

    def ref_route(self, lg):
        return self.TR.route(lg, bias=self.bias, k=self.m.k, **self.route_kw())

    def route_kw(self):
        r = self.m.route
        return dict(
            scoring=r["scoring"],
            normalize=r.get("normalize", False),
            n_group=r.get("n_group", 1),
            topk_group=r.get("topk_group", 1),
            group_score=r.get("group_score", "max"),
            scaling=G.f32(r.get("scaling", 1.0)),
        )

    def ffn_kw(self):
        g = self.m.glu
        lim = g.get("limit")
        kw = dict(
            k=self.m.k,
            activation=g["activation"],
            layout=g["layout"],
            alpha=G.f32(g.get("alpha", 1.0)),
            limit=None if lim is None else G.f32(lim),
            up_bias=G.f32(g.get("up_bias", 0.0)),
            transpose_weights=self.m.transpose_weights,
            w_up_bias=self.w_up_bias,
            w_down_bias=self.w_down_bias,
        )
        kw.update(self.route_kw())
        return kw

    # -- calls ---------------------------------------------------------------

    def call(self, mod, fn, ins, T):
        m = self.m
        if fn == "ffn":
            spec_in, spec_out = m.ffn_inputs(), m.ffn_outputs()
        else:
            spec_in, spec_out = m.route_inputs(), m.route_outputs()
        outs = [self.backend.alloc_out(r.shape_at(T), r.dtype) for r in spec_out]
        t0 = time.time()
        call_checked(self.backend, mod, fn, spec_in, ins, spec_out, outs, T)
        secs = time.time() - t0
        for r, o in zip(spec_out, outs):
            if not self.backend.guard_ok(o):
                raise AssertionError("@%s result %s: wrote past its end" % (fn, r.name))
        return [o.view for o in outs], secs

    def route_args(self, lg):
        return [lg] + ([self.bias] if self.bias is not None else [])

    def ffn_args(self, x, lg):
        args = [x, lg, self.w_up, self.w_down] + ([self.bias] if self.bias is not None else [])
        if self.w_up_bias is not None:
            args += [self.w_up_bias, self.w_down_bias]
        return args

    def time_ffn(self, mod, ins, T, first_secs):
        if self.args.small or first_secs > 5.0:
            return None
        torch = self.torch
        reps = 5 if first_secs < 0.5 else 2
        outs = [self.backend.alloc_out(r.shape_at(T), r.dtype) for r in self.m.ffn_outputs()]
        views = [o.view for o in outs]
        times = []
        for _ in range(reps):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            mod.call("ffn", *ins, *views)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    # -- one check -----------------------------------------------------------

    def compare_routing(self, rr, w_got, ids_got):
        """(status, err, detail, ids to use for the layer reference, tie rows)"""
        torch = self.torch
        ids_ref = rr.ids.long()
        ids_g = ids_got.long()
        exact = (ids_g == ids_ref).all(dim=1)
        same_set = (torch.sort(ids_g, dim=1).values == torch.sort(ids_ref, dim=1).values).all(dim=1)
        # a set difference is excused by a near tie at the k / k+1 boundary,
        # an order difference by a near tie between adjacent selected scores;
        # rows whose scores are all zero follow the lower-index rule exactly.
        set_tie = (rr.boundary_gap < self.TR.NEAR_TIE) & ~rr.dead
        ord_tie = (rr.min_gap < self.TR.NEAR_TIE) & ~rr.dead
        bad_set = ~same_set & ~set_tie
        bad_ord = same_set & ~exact & ~ord_tie
        ties = ~exact & ~bad_set & ~bad_ord
        detail = []
        ok = True
        n_bad = int(bad_set.sum()) + int(bad_ord.sum())
        if n_bad:
            ok = False
            r = int(torch.nonzero(bad_set | bad_ord)[0, 0])
            detail.append(
                "%d rows with wrong ids (row %d: got %s, want %s, gap %.3g)"
                % (n_bad, r, ids_g[r].tolist(), ids_ref[r].tolist(), float(rr.boundary_gap[r]))
            )
        n_ties = int(ties.sum())
        if n_ties:
            detail.append("%d near-tie rows" % n_ties)
        err = 0.0
        if exact.any():
            e = self.rel(w_got.float()[exact], rr.weights[exact])
            err = e
            if not e < ROUTE_W_TOL:
                ok = False
                detail.append("weights rel err %.3g" % e)
        if not torch.isfinite(w_got.float()).all():
            ok = False
            detail.append("non-finite weights")
        use = torch.where(ties[:, None], ids_g, ids_ref).to(torch.int32)
        return ok, err, "; ".join(detail), use, ties

    def rel(self, got, want):
        torch = self.torch
        if got.numel() == 0:
            return 0.0
        if not torch.isfinite(got).all():
            return float("inf")
        num = float(torch.linalg.vector_norm((got.double() - want.double()).reshape(-1)))
        den = float(torch.linalg.vector_norm(want.double().reshape(-1)))
        if den == 0.0:
            return 0.0 if num == 0.0 else float("inf")
        return num / den

    def check(self, T, kind="random", rows=None, label=None):
        """route + ffn for both builds on one input set."""
        torch, m = self.torch, self.m
        if kind == "random":
            rname, fname = "route/" + m.name, "ffn/" + m.name
        else:
            rname = "edge/ffn-%s-%s-route" % (m.name, label or kind)
            fname = "edge/ffn-%s-%s" % (m.name, label or kind)
        want = [(b, n) for b in self.builds for n in (rname, fname) if self.args.selected(n)]
        if not want:
            return
        if self.res.over_budget():
            for b, n in want:
                self.res.add(n, b, T, "SKIP", detail="time budget")
            return
        if self.w_up is None:
            self.make_weights()
        x, lg = self.inputs(T, kind)
        rr = self.ref_route(lg)
        if kind == "big":
            rows = self.big_rows(rr)
            print("      comparing %d of %d rows" % (rows.numel(), T), flush=True)
        ref_cache = {}
        for build in self.builds:
            mod = self.mods.get(self.stem, build)
            if isinstance(mod, str):
                for n in (rname, fname):
                    if self.args.selected(n):
                        self.res.add(n, build, T, "FAIL", detail=mod)
                continue
            use_ids = rr.ids
            ties = torch.zeros(T, dtype=torch.bool, device=self.dev)
            # routing
            t0 = time.time()
            try:
                (w_got, ids_got), secs = self.call(mod, "route", self.route_args(lg), T)
                ok, err, det, use_ids, ties = self.compare_routing(rr, w_got, ids_got)
                if self.args.selected(rname):
                    self.res.add(
                        rname,
                        build,
                        T,
                        "PASS" if ok else "FAIL",
                        err=err,
                        tol=ROUTE_W_TOL,
                        secs=secs,
                        detail=det,
                    )
            except ContextLost:
                raise
            except Exception as ex:  # noqa: BLE001
                if self.args.selected(rname):
                    self.res.add(
                        rname,
                        build,
                        T,
                        "FAIL",
                        secs=time.time() - t0,
                        detail="%s: %s" % (type(ex).__name__, str(ex)[:400]),
                    )
            if not self.args.selected(fname):
                continue
            # the layer
            t0 = time.time()
            try:
                (y,), secs = self.call(mod, "ffn", self.ffn_args(x, lg), T)
                key = use_ids.cpu().numpy().tobytes()
                if key not in ref_cache:
                    if rows is None:
                        ref_cache[key] = self.TR.ffn(
                            x, lg, self.w_up, self.w_down, self.bias, ids=use_ids, **self.ffn_kw()
                        )[0]
                    else:
                        ref_cache[key] = self.TR.ffn(
                            x,
                            lg,
                            self.w_up,
                            self.w_down,
                            self.bias,
                            rows=rows,
                            ids=use_ids[rows],
                            **self.ffn_kw(),
                        )[0]
                yref = ref_cache[key]
                ysel = y if rows is None else y[rows]
                tsel = ties if rows is None else ties[rows]
                yf = ysel.float()
                detail = []
                ok = True
                nonfin = ~torch.isfinite(yf).all(dim=1)
                if nonfin.any():
                    ok = False
                    detail.append(
                        "%d rows non-finite (first %d; unwritten?)"
                        % (int(nonfin.sum()), int(torch.nonzero(nonfin)[0, 0]))
                    )
                err = self.rel(yf, yref)
                if ok and not err < FFN_TOL:
                    # a near tie the layer broke differently from @route
                    near = (rr.boundary_gap < self.TR.NEAR_TIE) & ~rr.dead
                    near = near if rows is None else near[rows]
                    keep = ~(near | tsel)
                    if int((~keep).sum()) and keep.any():
                        err2 = self.rel(yf[keep], yref[keep])
                        if err2 < FFN_TOL:
                            detail.append(
                                "excluded %d near-tie rows (err with them %.3g)"
                                % (int((~keep).sum()), err)
                            )
                            err = err2
                    if not err < FFN_TOL:
                        ok = False
                        rowerr = (yf - yref).norm(dim=1) / (yref.norm(dim=1) + 1e-30)
                        r = int(torch.argmax(rowerr))
                        detail.append(
                            "worst row %d (rel %.3g)"
                            % (r if rows is None else int(rows[r]), float(rowerr[r]))
                        )
                if kind == "nonfinite":
                    dead = rr.dead if rows is None else rr.dead[rows]
                    nz = (yf[dead] != 0).any(dim=1)
                    if nz.any():
                        ok = False
                        detail.append("%d all-zero-score rows not exactly zero" % int(nz.sum()))
                if T and int(tsel.sum()):
                    detail.append("%d rows follow @route's near-tie ids" % int(tsel.sum()))
                ms = None
                if kind == "random" and T:
                    ms = self.time_ffn(mod, self.ffn_args(x, lg), T, secs)
                self.res.add(
                    fname,
                    build,
                    T,
                    "PASS" if ok else "FAIL",
                    err=err,
                    tol=FFN_TOL,
                    secs=secs,
                    detail="; ".join(detail),
                    median_ms=ms,
                )
            except ContextLost:
                raise
            except Exception as ex:  # noqa: BLE001
                self.res.add(
                    fname,
                    build,
                    T,
                    "FAIL",
                    secs=time.time() - t0,
                    detail="%s: %s" % (type(ex).__name__, str(ex)[:400]),
                )
        del x, lg, rr, ref_cache

    def big_rows(self, rr):
        """Rows to compare at huge T: the last 64 (their (t*k+j)*H offsets
        pass 2^31), the first 8, rows routed to the highest experts (their
        dispatched rows sit at the end of the M x H buffers), 64 random."""
        torch = self.torch
        T = rr.ids.shape[0]
        hi = torch.nonzero((rr.ids >= self.m.E - 4).any(dim=1)).flatten()
        g = torch.Generator(device="cpu").manual_seed(5)
        rand = torch.randint(0, T, (64,), generator=g).to(self.dev)
        rows = torch.cat(
            [
                torch.arange(T - 64, T, device=self.dev),
                torch.arange(0, 8, device=self.dev),
                hi[-64:],
                rand,
            ]
        )
        return torch.unique(rows)

    def run(self, Ts, edge, big):
        try:
            for T in Ts:
                self.check(T)
            if edge:
                self.check(0, "t0", label="T0")
                Te = 8 if self.args.small else 64
                self.check(Te, "empty-experts")
                self.check(Te, "nonfinite")
            if big:
                self.check(BIG_T, "big", label="T%d" % BIG_T)
        finally:
            self.free()


# ----------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------


def read_commit(art):
    p = os.path.join(art, "COMMIT")
    return open(p).read().strip() if os.path.exists(p) else "unknown (no COMMIT file)"


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--small", action="store_true", help="fast subset for compute-sanitizer")
    ap.add_argument("--out", default=os.environ.get("OUT") or os.getcwd())
    ap.add_argument("--only", default=None, help="regex over check names (re.search)")
    ap.add_argument("--builds", default=",".join(BUILDS))
    ap.add_argument("--artifacts", default=HERE, help="folder of the .so's (default: here)")
    ap.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds; checks after that are SKIPped (results stay consistent)",
    )
    ap.add_argument("--no-selfcheck", action="store_true")
    ap.add_argument("--no-ffn", action="store_true")
    ap.add_argument("--no-big", action="store_true", help="skip the T=38000 DeepSeek check")
    ap.add_argument("--list", action="store_true", help="list the check names and exit")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="numpy stand-in for the compiled ops (no GPU, no torch)",
    )
    ap.add_argument("--dry-run-bug", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    only = re.compile(args.only) if args.only else None
    args.selected = lambda name: only is None or bool(only.search(name))
    builds = [b for b in args.builds.split(",") if b]
    for b in builds:
        if b not in BUILDS:
            ap.error("unknown build %r (known: %s)" % (b, ", ".join(BUILDS)))

    t_ops = T_OPS_SMALL if args.small else T_OPS
    t_ffn = T_FFN_SMALL if args.small else T_FFN
    run_ffn = not args.no_ffn and not args.dry_run
    big = run_ffn and not args.small and not args.no_big

    if args.list:
        for c in G.OP_CASES:
            print("op/%s\nedge/%s" % (c.name, c.name))
        for c in G.CONST_CASES:
            print("const/%s" % c.name)
        print("const/uploads\nconst/unload")
        for c in backward_cases():
            print("bwd-det/%s" % c.name)
        for c in backward_cases("ffn_grad"):
            print("bwd-zero/%s\nbwd-graph/%s" % (c.name, c.name))
        for layer, *_ in G.LAYERS:
            print("bwd-pair/%s" % layer)
        for m in G.MODELS:
            print("route/%s\nffn/%s" % (m.name, m.name))
            labels = ["T0", "empty-experts", "nonfinite"]
            if m.name == "deepseek_v3":
                labels.append("T%d" % BIG_T)
            for k in labels:
                print("edge/ffn-%s-%s-route\nedge/ffn-%s-%s" % (m.name, k, m.name, k))
        return 0

    if args.dry_run:
        backend = NumpyBackend(args.dry_run_bug)
        meta_dev = dict(gpu="none (dry run)", torch="-", cuda="-")
    else:
        backend = TorchBackend()
        import torch
        import torch_reference as TR

        TR.configure_precision()
        meta_dev = dict(
            gpu=torch.cuda.get_device_name(0), torch=torch.__version__, cuda=torch.version.cuda
        )
    meta = dict(
        commit=read_commit(args.artifacts),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        host=platform.node(),
        python=platform.python_version(),
        mode="small" if args.small else "full",
        args=" ".join(sys.argv[1:]),
        builds=builds,
        **meta_dev,
    )
    res = Results(args.out, meta, args.budget)
    print(
        "moe-mlir GPU checks: commit %s, %s, torch %s, %s mode, builds %s"
        % (meta["commit"], meta["gpu"], meta["torch"], meta["mode"], ",".join(builds)),
        flush=True,
    )
    mods = Modules(backend, args.artifacts)

    try:
        if (
            not args.dry_run
            and not args.small
            and not args.no_selfcheck
            and args.selected("selfcheck/torch_reference")
        ):
            import torch_reference as TR

            t0 = time.time()
            fails = TR.self_check()
            res.add(
                "selfcheck/torch_reference",
                status="FAIL" if fails else "PASS",
                secs=time.time() - t0,
                detail="; ".join(fails[:5]),
            )
        if args.selected("sig/"):
            check_signatures(args.artifacts, res, builds)

        # (a) ops on random inputs, then (b) + (c) the model layers, then
        # (c) ops on edge inputs. T is the outer loop so that a time budget
        # running out still leaves every function checked at small T.
        def op_checks(mode, Ts):
            for T in Ts:
                for build in builds:
                    for case in G.OP_CASES:
                        name = ("edge/" if mode == "edge" else "op/") + case.name
                        if not args.selected(name):
                            continue
                        if res.over_budget():
                            res.add(name, build, T, "SKIP", detail="time budget")
                            continue
                        run_op(res, mods, backend, case, build, T, mode)

        op_checks("random", t_ops)
        if not args.dry_run and args.selected("const/"):
            for build in builds:
                if res.over_budget():
                    res.add("const/uploads", build, status="SKIP", detail="time budget")
                    continue
                run_const(res, mods, backend, build, T_CONST_SMALL if args.small else T_CONST)
        if run_ffn:
            for m in G.MODELS:
                mr = ModelRunner(res, mods, backend, m, builds, args)
                mr.run(t_ffn, edge=True, big=big and m.name == "deepseek_v3")
        op_checks("edge", T_EDGE_SMALL if args.small else T_EDGE)
        if not args.dry_run:
            run_backward(res, mods, backend, builds, args.small, args.selected)
    except ContextLost as ex:
        res.aborted = "CUDA context lost after %s" % ex
        res.add("abort", status="FAIL", detail=res.aborted + "; later checks did not run")
    except KeyboardInterrupt:
        res.aborted = "interrupted"
        res.add("abort", status="FAIL", detail="interrupted")
    except Exception as ex:  # noqa: BLE001 - always write the results
        res.aborted = "harness error %s: %s" % (type(ex).__name__, ex)
        traceback.print_exc()
        res.add("abort", status="FAIL", detail=res.aborted)

    res.flush()
    res.write_markdown()
    summary = "\n".join(res.summary_lines())
    with open(os.path.join(res.out_dir, "summary.txt"), "w") as f:
        f.write(
            "commit %s, %s, torch %s, %s mode\n\n%s\n"
            % (meta["commit"], meta["gpu"], meta["torch"], meta["mode"], summary)
        )
    print()
    print(summary)
    print("\nwrote %s/results.json and results.md" % res.out_dir)
    c = res.counts()
    if c["FAIL"]:
        return 1
    if c["SKIP"] and any(r["detail"] == "time budget" for r in res.rows):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
