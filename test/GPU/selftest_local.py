#!/usr/bin/env python3
"""Checks of the GPU harness that need neither a GPU nor torch (numpy only).

  1. cases/*.mlir are up to date with gpu_cases.py (gen_mlir.py --check);
  2. every op case generates inputs of its signature's shapes at every T and
     mode, and the reference, fed back as the "compiled" result (rounded to
     the result types), passes check_op;
  3. check_op catches corrupted results: one wrong integer, a poisoned
     (unwritten) float, a float error above the tolerance, a wrong route id,
     a tiny non-zero weight gradient of an expert without rows (whose edge
     inputs must have such experts);
  4. run_gpu_checks.py --dry-run passes end to end, and with an injected bug
     (last row never written) fails with exit status 1;
  5. the signature parser agrees with the table on the generated files;
  6. every Python file compiles.

Run: python3 test/GPU/selftest_local.py [--quick]   (exit 1 on any failure)
--quick (the lit test harness.test): fewer T values, a smaller dry run.
"""

import os
import py_compile
import subprocess
import sys
import tempfile
import json

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gpu_cases as G  # noqa: E402
import run_gpu_checks as RC  # noqa: E402

FAILS = []
QUICK = "--quick" in sys.argv[1:]


def fail(msg):
    FAILS.append(msg)
    print("FAIL " + msg)


def as_result(case, exp):
    got = {}
    for r in case.outputs:
        v = np.asarray(exp[r.name].value, dtype=np.float64)
        if r.dtype in G.FLOAT_TYPES:
            got[r.name] = G.R.round_to(v, r.dtype)
        else:
            got[r.name] = v.astype(np.int64)
    return got


def test_gen_mlir():
    rc = subprocess.call([sys.executable, os.path.join(HERE, "gen_mlir.py"), "--check"])
    if rc:
        fail("cases/*.mlir are stale: run test/GPU/gen_mlir.py")


def test_cases_roundtrip():
    n = 0
    for case in G.OP_CASES:
        for T in [0, 7] if QUICK else sorted(set(RC.T_OPS + RC.T_EDGE)):
            for mode in ("random", "edge"):
                inp = G.gen_inputs(case, T, mode)
                oc = G.Outcome()
                exp = G.expected(case, inp, {}, oc)
                for r in case.outputs:
                    if exp[r.name].value.shape != r.shape_at(T):
                        fail(
                            "%s T=%d: reference %s has shape %s, signature %s"
                            % (case.name, T, r.name, exp[r.name].value.shape, r.shape_at(T))
                        )
                got = as_result(case, exp)
                oc = G.check_op(case, inp, got)
                n += 1
                if not oc.ok:
                    fail(
                        "%s T=%d %s: reference does not pass its own check: %s"
                        % (case.name, T, mode, oc.detail)
                    )
    print("cases round trip: %d case/T/mode combinations" % n)


def test_detection():
    n = 0
    for case in G.OP_CASES:
        T = 7
        inp = G.gen_inputs(case, T, "random")
        got0 = as_result(case, G.expected(case, inp, {}, G.Outcome()))
        for r in case.outputs:
            if got0[r.name].size == 0:
                continue
            for how in ("poison", "perturb"):
                got = {k: v.copy() for k, v in got0.items()}
                flat = got[r.name].reshape(-1)
                i = flat.size - 1
                if how == "poison":
                    flat[i] = np.nan if r.dtype in G.FLOAT_TYPES else 0x7FFFFFFF
                elif r.dtype in G.FLOAT_TYPES:
                    flat[:] = flat * 1.05 + 0.05  # 5% off everywhere
                else:
                    flat[i] = flat[i] + 1
                oc = G.check_op(case, inp, got)
                n += 1
                if oc.ok:
                    fail("%s: %s of result %s not detected" % (case.name, how, r.name))
    print("corruption detection: %d corruptions" % n)


def test_route_near_tie():
    case = G.CASES_BY_NAME["route_softmax_norm_f32"]
    inp = {"logits": np.array([[1.0, 2.0, 2.0, 0.5] + [-5.0] * 28])}
    got = as_result(case, G.expected(case, inp, {}, G.Outcome()))
    if list(got["indices"][0]) != [1, 2, 0, 3]:
        fail("route tie order: %s" % got["indices"][0])
    bad = {k: v.copy() for k, v in got.items()}
    bad["indices"][0, :2] = [2, 1]  # an exact tie broken the wrong way
    if G.check_op(case, inp, bad).ok:
        fail("exact tie broken the wrong way not detected")
    # a near tie (1e-7 apart in f32 scores) may go either way
    x = np.array([[1.0, 1.0 + 2**-22, 0.0, -1.0] + [-5.0] * 28])
    inp = {"logits": x}
    got = as_result(case, G.expected(case, inp, {}, G.Outcome()))
    alt = {k: v.copy() for k, v in got.items()}
    alt["indices"][0, :2] = got["indices"][0, [1, 0]]
    oc = G.check_op(case, inp, alt)
    if not oc.ok or "near-tie" not in oc.detail:
        fail("near tie not accepted: %s" % oc.detail)


def test_backward_exact():
    """Experts / groups without rows: their slices must be exactly zero,
    and the edge inputs must have some (bwd-zero/ relies on them)."""
    n = 0
    for case in G.OP_CASES:
        if case.op not in ("ffn_grad", "grouped_matmul_wgrad"):
            continue
        for mode in ("random", "edge"):
            inp = G.gen_inputs(case, 64, mode)
            if case.op == "ffn_grad":
                empty = G.empty_experts(case, inp)
                names = [r.name for r in case.outputs[2:]]
            else:
                off = np.clip(inp["offsets"], 0, inp["lhs"].shape[0])
                empty = off[1:] <= off[:-1]
                names = ["result"]
                if mode == "edge" and not (inp["offsets"] > inp["lhs"].shape[0]).any():
                    fail("%s: edge offsets not clamped at M" % case.name)
            if not empty.any():
                if mode == "edge" or case.op != "ffn_grad":
                    fail("%s %s: no expert without rows" % (case.name, mode))
                continue
            got0 = as_result(case, G.expected(case, inp, {}, G.Outcome()))
            for name in names:
                got = {k: v.copy() for k, v in got0.items()}
                got[name][np.flatnonzero(empty)[0]].reshape(-1)[0] = 1e-30
                oc = G.check_op(case, inp, got)
                n += 1
                if oc.ok or "exactly" not in oc.detail:
                    fail("%s %s: 1e-30 in an empty %s slice not detected" % (case.name, mode, name))
    print("exact empty slices: %d corruptions" % n)


def _manifest(stem):
    """A manifest of case file `stem` as bench/write_manifest.py writes it."""
    fns = {}
    for (s, fn), (ins, outs) in G.signatures().items():
        if s == stem:
            fns[fn] = {
                "args": [
                    {"name": a.name, "dtype": a.dtype, "shape": list(RC._dims(a.shape))}
                    for a in ins
                ],
                "results": [
                    {"name": r.name, "dtype": r.dtype, "shape": list(RC._dims(r.shape))}
                    for r in outs
                ],
            }
    return {"format": "moe-mlir-gpu-artifact", "version": 1, "functions": fns}


def test_signatures():
    """sig/ checks: manifests that match the table pass, a wrong type or a
    missing function fails, no manifest is a skip."""
    stems = sorted({s for s, _ in G.signatures()})
    with tempfile.TemporaryDirectory() as d:
        for stem in stems:
            m = _manifest(stem)
            if stem == "ops":  # the fused build of ops gets two errors
                bad = json.loads(json.dumps(m))
                first = sorted(bad["functions"])[0]
                bad["functions"][first]["args"][0]["dtype"] = "f16"
                del bad["functions"][sorted(bad["functions"])[1]]
                with open(os.path.join(d, "ops.fused.manifest.json"), "w") as f:
                    json.dump(bad, f)
            with open(os.path.join(d, "%s.unfused.manifest.json" % stem), "w") as f:
                json.dump(m, f)
        res = RC.Results(d, {}, None)
        RC.check_signatures(d, res, ["unfused", "fused"])
        status = {(r["name"], r["build"]): (r["status"], r["detail"]) for r in res.rows}
        for stem in stems:
            if status[("sig/" + stem, "unfused")][0] != "PASS":
                fail("sig/%s unfused: %s" % (stem, status[("sig/" + stem, "unfused")]))
            want = "FAIL" if stem == "ops" else "SKIP"
            if status[("sig/" + stem, "fused")][0] != want:
                fail("sig/%s fused: %s, want %s" % (stem, status[("sig/" + stem, "fused")], want))
        detail = status[("sig/ops", "fused")][1]
        if "missing" not in detail or "f16" not in detail:
            fail("sig/ops fused detail: %s" % detail)


def test_dry_run():
    with tempfile.TemporaryDirectory() as d:
        art = os.path.join(d, "art")
        os.makedirs(os.path.join(art, "cases"))
        for f in os.listdir(os.path.join(HERE, "cases")):
            with (
                open(os.path.join(HERE, "cases", f)) as src,
                open(os.path.join(art, "cases", f), "w") as dst,
            ):
                dst.write(src.read())
        with open(os.path.join(art, "COMMIT"), "w") as f:
            f.write("0123abc-test\n")
        out = os.path.join(d, "out")
        cmd = (
            [
                sys.executable,
                os.path.join(HERE, "run_gpu_checks.py"),
                "--dry-run",
                "--artifacts",
                art,
            ]
            + (["--small", "--builds", "fused", "--only", "sig/|op/"] if QUICK else [])
            + ["--out", out]
        )
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            fail("dry run exit %d:\n%s" % (p.returncode, p.stdout[-3000:]))
        else:
            data = json.load(open(os.path.join(out, "results.json")))
            c = data["counts"]
            print("dry run: %s" % c)
            if c["FAIL"] or c["PASS"] < len(G.OP_CASES) * (4 if QUICK else 14):
                fail("dry run counts %s" % c)
            md = open(os.path.join(out, "results.md")).read()
            if "0123abc-test" not in md:
                fail("results.md lacks the commit")
        out2 = os.path.join(d, "out2")
        p = subprocess.run(
            cmd[:3]
            + [
                "--artifacts",
                art,
                "--out",
                out2,
                "--dry-run-bug",
                "skip-last",
                "--only",
                "op/",
                "--small",
                "--builds",
                "unfused",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        data = json.load(open(os.path.join(out2, "results.json")))
        # every op case with a non-empty result at T > 0 must fail
        if p.returncode != 1 or data["counts"]["FAIL"] < 3 * len(G.OP_CASES):
            fail("injected bug not caught: exit %d counts %s" % (p.returncode, data["counts"]))
        else:
            print("dry run with injected bug: %s (exit 1, as it should)" % data["counts"])


def test_compile():
    for f in sorted(os.listdir(HERE)):
        if f.endswith(".py"):
            try:
                py_compile.compile(
                    os.path.join(HERE, f),
                    doraise=True,
                    cfile=os.path.join(tempfile.gettempdir(), f + "c"),
                )
            except py_compile.PyCompileError as ex:
                fail("py_compile %s: %s" % (f, ex))


def main():
    for t in (
        test_compile,
        test_gen_mlir,
        test_signatures,
        test_route_near_tie,
        test_cases_roundtrip,
        test_detection,
        test_backward_exact,
        test_dry_run,
    ):
        print("--- %s" % t.__name__, flush=True)
        t()
    print("selftest_local: %s" % ("%d FAILURES" % len(FAILS) if FAILS else "all passed"))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
