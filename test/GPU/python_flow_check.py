#!/usr/bin/env python3
"""Checks the Python flow on the GPU: model presets compiled with the
moe_mlir package (test/GPU/build_python_flow.py) and called through
the GPU runtime package moe_mlir_runtime on torch tensors.

Run on the GPU machine, from gpu-artifacts/pyflow/ or with --dir:

  python3 python_flow_check.py [--dir DIR] [--presets a,b] [--T 1,64,512]
                               [--graph-T 1,64] [--sync-T 1,64] [--out DIR] [--budget SECONDS]

Imports only moe_mlir_runtime, torch and torch_reference.py (copies of them
sit next to this file in the artifacts folder; an installed moe-mlir-runtime
wheel serves too). For every preset of cases.json:

  call/<preset>     at each T: outputs preallocated and poisoned (NaN), called
                    as fn(*inputs, *outputs) on the current stream; then
                    fn(*inputs) (outputs allocated by the runtime); both vs
                    torch_reference.ffn, ||y-ref||/||ref|| < 1e-2
  graph/<preset>    fn(*inputs, *outputs) captured once with
                    torch.cuda.CUDAGraph (after a warm-up on the capture
                    stream), then replayed twice with fresh inputs copied
                    into the captured input tensors: the output must match
                    the reference of the new inputs
  graph-alloc/<p>   the same with fn(*inputs) captured (outputs allocated
                    inside the capture, from the graph's pool)
  sync-debug/<p>    at each --sync-T: fn(*inputs, *outputs) and fn(*inputs)
                    called under torch.cuda.set_sync_debug_mode("error")
                    (any synchronising torch call in the runtime raises),
                    outputs poisoned, then checked as call/
  api/<preset>      the runtime's checks: a wrong dtype and a token-count
                    mismatch raise ArgumentError before anything runs

Routing near ties: where the layer error is above tolerance, rows whose k-th
and (k+1)-th reference scores are less than 1e-5 apart are left out and the
rest must pass (reported in the notes).

Writes results.json and summary.txt into --out (default: $OUT/pyflow, else
./pyflow-results). Exit status: 0 all passed, 1 some check failed, 2 none
failed but some were skipped for time.
"""

import argparse
import json
import os
import sys
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 1e-2


def _import_local(d):
    """moe_mlir_runtime and torch_reference.py from `d` (the artifacts
    folder), else from the source tree (an installed moe_mlir_runtime when
    no folder has it)."""
    src = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir, "python", "runtime"))
    for name, where in (
        (os.path.join("moe_mlir_runtime", "__init__.py"), (d, HERE, src)),
        ("torch_reference.py", (d, HERE)),
    ):
        for p in where:
            if os.path.isfile(os.path.join(p, name)):
                if p in sys.path:
                    sys.path.remove(p)
                sys.path.insert(0, p)
                break


class Results:
    def __init__(self, out_dir, budget):
        self.rows = []
        self.out_dir = out_dir
        self.start = time.time()
        self.budget = budget

    def over_budget(self):
        return self.budget is not None and time.time() - self.start > self.budget

    def add(self, name, T=None, status="PASS", err=None, secs=0.0, ms=None, detail=""):
        row = dict(
            name=name,
            T=T,
            status=status,
            err=err,
            tol=TOL if err is not None else None,
            secs=round(secs, 3),
            ms=ms,
            detail=detail,
        )
        self.rows.append(row)
        e = "-" if err is None else "%.3e" % err
        print(
            "%-4s  %-34s T=%-5s err=%-10s %7.3fs %s%s"
            % (
                status,
                name,
                "-" if T is None else T,
                e,
                secs,
                "" if ms is None else "%8.3f ms  " % ms,
                detail,
            ),
            flush=True,
        )
        self.flush()

    def counts(self):
        c = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        for r in self.rows:
            c[r["status"]] += 1
        return c

    def flush(self, meta=None):
        os.makedirs(self.out_dir, exist_ok=True)
        data = dict(
            counts=self.counts(), elapsed_s=round(time.time() - self.start, 1), checks=self.rows
        )
        if meta:
            data["meta"] = meta
        with open(os.path.join(self.out_dir, "results.json"), "w") as f:
            json.dump(data, f, indent=1, default=str)

    def table(self):
        lines = ["%-4s  %-34s %-6s %-10s %-10s %s" % ("", "check", "T", "rel err", "ms", "notes")]
        for r in self.rows:
            lines.append(
                "%-4s  %-34s %-6s %-10s %-10s %s"
                % (
                    r["status"],
                    r["name"],
                    "-" if r["T"] is None else r["T"],
                    "-" if r["err"] is None else "%.3e" % r["err"],
                    "-" if r["ms"] is None else "%.3f" % r["ms"],
                    r["detail"],
                )
            )
        c = self.counts()
        lines.append("")
        lines.append(
            "%d PASS, %d FAIL, %d SKIP in %.1fs (tolerance %.0e)"
            % (c["PASS"], c["FAIL"], c["SKIP"], time.time() - self.start, TOL)
        )
        return lines


class PresetRunner:
    def __init__(self, rt, TR, torch, case, art_dir, res, args):
        self.rt, self.TR, self.torch = rt, TR, torch
        self.case = case
        self.res = res
        self.args = args
        self.name = case["name"]
        self.art = rt.load(os.path.join(art_dir, case["library"]))
        self.fn = self.art.fn(case.get("function", "ffn"))
        self.kw = dict(case["reference"])
        self.dev = torch.device("cuda:0")
        spec = self.fn.spec
        self.spec = spec
        self.H = spec.args[0].shape[1]
        self.E = spec.args[1].shape[1]
        print("    %s: %s" % (self.name, spec.signature()), flush=True)
        t0 = time.time()
        self.weights = self.make_weights()
        torch.cuda.synchronize()
        gib = sum(w.numel() * w.element_size() for w in self.weights) / 2**30
        print("    %s: weights %.2f GiB in %.1fs" % (self.name, gib, time.time() - t0), flush=True)

    # -- data ----------------------------------------------------------------

    def gen(self, key, shape, dtype, scale=1.0):
        torch = self.torch
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(("pyflow/%s/%s" % (self.name, key)).encode()))
        # in the target dtype directly: no f32 copy of the (large) weights
        t = torch.randn(shape, dtype=dtype, device=self.dev, generator=g)
        if scale != 1.0:
            t.mul_(scale)
        return t

    def make_weights(self):
        """w_up, w_down (+ bias) from the manifest's shapes."""
        rt = self.rt
        H, I = self.H, self.case["I"]
        out = []
        for i, a in enumerate(self.spec.args[2:], 2):
            dt = rt.torch_dtype(a.dtype)
            if i == 2:
                out.append(self.gen("w_up", a.shape, dt, 1.0 / H**0.5))
            elif i == 3:
                out.append(self.gen("w_down", a.shape, dt, 1.0 / I**0.5))
            else:
                out.append(self.gen("arg%d" % i, a.shape, dt, 0.1))
        return out

    def inputs(self, T, key):
        rt = self.rt
        x = self.gen("x/%s/%d" % (key, T), (T, self.H), rt.torch_dtype(self.spec.args[0].dtype))
        lg = self.gen(
            "logits/%s/%d" % (key, T), (T, self.E), rt.torch_dtype(self.spec.args[1].dtype), 2.0
        )
        return x, lg

    @property
    def bias(self):
        return self.weights[2] if self.case.get("bias") else None

    # -- comparison ----------------------------------------------------------

    def reference(self, x, lg):
        w_up, w_down = self.weights[0], self.weights[1]
        kw = dict(self.kw)
        if self.case.get("expert_bias"):  # the last two arguments
            kw.update(w_up_bias=self.weights[-2], w_down_bias=self.weights[-1])
        y, rr = self.TR.ffn(x, lg, w_up, w_down, self.bias, **kw)
        return y, rr

    def rel(self, got, want):
        torch = self.torch
        if got.numel() == 0:
            return 0.0
        if not torch.isfinite(got).all():
            return float("inf")
        num = float(torch.linalg.vector_norm((got.double() - want.double()).reshape(-1)))
        den = float(torch.linalg.vector_norm(want.double().reshape(-1)))
        return num / den if den else (0.0 if num == 0.0 else float("inf"))

    def compare(self, y, ref, rr):
        """(ok, err, detail)"""
        torch = self.torch
        yf = y.float()
        detail = []
        nonfin = ~torch.isfinite(yf).all(dim=1)
        if nonfin.any():
            return (
                False,
                float("inf"),
                "%d rows non-finite (first %d; unwritten?)"
                % (int(nonfin.sum()), int(torch.nonzero(nonfin)[0, 0])),
            )
        err = self.rel(yf, ref)
        if not err < TOL:
            near = (rr.boundary_gap < self.TR.NEAR_TIE) & ~rr.dead
            keep = ~near
            if int(near.sum()) and keep.any():
                err2 = self.rel(yf[keep], ref[keep])
                if err2 < TOL:
                    detail.append(
                        "excluded %d near-tie rows (err with them %.3g)" % (int(near.sum()), err)
                    )
                    err = err2
        if not err < TOL:
            rowerr = (yf - ref).norm(dim=1) / (ref.norm(dim=1) + 1e-30)
            r = int(torch.argmax(rowerr))
            detail.append("worst row %d (rel %.3g)" % (r, float(rowerr[r])))
            return False, err, "; ".join(detail)
        return True, err, "; ".join(detail)

    def args_of(self, x, lg):
        return [x, lg] + list(self.weights)

    def poisoned_outputs(self, ins):
        """The outputs of fn(*ins), preallocated and filled with NaN."""
        shapes = self.fn.output_shapes(*ins)
        return [
            self.torch.full(s, float("nan"), dtype=self.rt.torch_dtype(r.dtype), device=self.dev)
            for s, r in zip(shapes, self.spec.results)
        ]

    def time_call(self, ins, outs):
        torch = self.torch
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        self.fn(*ins, *outs)
        b.record()
        b.synchronize()
        return a.elapsed_time(b)

    # -- checks --------------------------------------------------------------

    def check_call(self, T):
        torch = self.torch
        name = "call/" + self.name
        t0 = time.time()
        try:
            x, lg = self.inputs(T, "call")
            ins = self.args_of(x, lg)
            outs = self.poisoned_outputs(ins)
            ret = self.fn(*ins, *outs)
            self.art.synchronize()
            if ret is not outs[0]:
                raise AssertionError("fn(*inputs, *outputs) did not return the output")
            ref, rr = self.reference(x, lg)
            ok, err, detail = self.compare(outs[0], ref, rr)
            # the allocating form, same inputs
            y2 = self.fn(*ins)
            self.art.synchronize()
            ok2, err2, det2 = self.compare(y2, ref, rr)
            same = ok and ok2 and bool(torch.equal(y2, outs[0]))
            notes = [d for d in (detail, ("fn(*inputs): " + det2) if det2 else "") if d]
            notes.append(
                "fn(*inputs) %s" % ("bitwise equal" if same else "differs (rel err %.3g)" % err2)
            )
            ms = self.time_call(ins, outs) if T else None
            self.res.add(
                name,
                T,
                "PASS" if ok and ok2 else "FAIL",
                max(err, err2),
                time.time() - t0,
                ms,
                "; ".join(notes),
            )
        except Exception as ex:  # noqa: BLE001
            self.res.add(
                name,
                T,
                "FAIL",
                secs=time.time() - t0,
                detail="%s: %s" % (type(ex).__name__, str(ex)[:400]),
            )
            traceback.print_exc()

    def check_graph(self, T, allocate):
        torch = self.torch
        name = ("graph-alloc/" if allocate else "graph/") + self.name
        t0 = time.time()
        try:
            x0, lg0 = self.inputs(T, "graph-static")
            static_in = self.args_of(x0.clone(), lg0.clone())
            static_out = None if allocate else self.fn.allocate_outputs(*static_in)
            # warm up on a side stream (as torch recommends before capture)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    if allocate:
                        self.fn(*static_in)
                    else:
                        self.fn(*static_in, *static_out)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                if allocate:
                    y = self.fn(*static_in)
                else:
                    y = self.fn(*static_in, *static_out)
            torch.cuda.synchronize()
            self.art.synchronize()
            errs, notes, ok = [], [], True
            for rnd in range(2):
                x, lg = self.inputs(T, "graph-replay-%d" % rnd)
                static_in[0].copy_(x)
                static_in[1].copy_(lg)
                y.fill_(float("nan"))
                t1 = time.time()
                g.replay()
                torch.cuda.synchronize()
                replay_ms = (time.time() - t1) * 1e3
                self.art.synchronize()
                ref, rr = self.reference(x, lg)
                ok_r, err, det = self.compare(y, ref, rr)
                ok = ok and ok_r
                errs.append(err)
                if det:
                    notes.append("replay %d: %s" % (rnd, det))
            notes.append("replay %.3f ms (host-timed)" % replay_ms)
            del g
            self.res.add(
                name,
                T,
                "PASS" if ok else "FAIL",
                max(errs),
                time.time() - t0,
                None,
                "; ".join(notes),
            )
        except Exception as ex:  # noqa: BLE001
            self.res.add(
                name,
                T,
                "FAIL",
                secs=time.time() - t0,
                detail="%s: %s" % (type(ex).__name__, str(ex)[:400]),
            )
            traceback.print_exc()

    def check_sync_debug(self, T):
        torch = self.torch
        name = "sync-debug/" + self.name
        t0 = time.time()
        try:
            x, lg = self.inputs(T, "sync-debug")
            ins = self.args_of(x, lg)
            outs = self.poisoned_outputs(ins)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                self.fn(*ins, *outs)
                y2 = self.fn(*ins)
            finally:
                torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
            self.art.synchronize()
            ref, rr = self.reference(x, lg)
            ok, err, det = self.compare(outs[0], ref, rr)
            ok2, err2, det2 = self.compare(y2, ref, rr)
            notes = [d for d in (det, det2) if d]
            notes.append("no synchronising call under set_sync_debug_mode('error')")
            self.res.add(
                name,
                T,
                "PASS" if ok and ok2 else "FAIL",
                max(err, err2),
                time.time() - t0,
                None,
                "; ".join(notes),
            )
        except Exception as ex:  # noqa: BLE001
            torch.cuda.set_sync_debug_mode("default")
            self.res.add(
                name,
                T,
                "FAIL",
                secs=time.time() - t0,
                detail="%s: %s" % (type(ex).__name__, str(ex)[:400]),
            )
            traceback.print_exc()

    def check_api(self):
        """Argument checks of the runtime: they must raise, not launch."""
        rt = self.rt
        name = "api/" + self.name
        t0 = time.time()
        problems = []
        x, lg = self.inputs(8, "api")
        cases = [
            ("wrong dtype", [x.float(), lg] + list(self.weights)),
            ("T mismatch", [x, lg[:7]] + list(self.weights)),
            ("too few arguments", [x, lg]),
            ("CPU tensor", [x.cpu(), lg] + list(self.weights)),
        ]
        for what, args in cases:
            try:
                self.fn(*args)
                problems.append("%s: no error" % what)
            except rt.ArgumentError:
                pass
            except Exception as ex:  # noqa: BLE001
                problems.append("%s: %s instead of ArgumentError" % (what, type(ex).__name__))
        try:
            self.art.synchronize()
        except Exception as ex:  # noqa: BLE001
            problems.append("runtime error after the rejected calls: %s" % ex)
        self.res.add(
            name,
            None,
            "FAIL" if problems else "PASS",
            secs=time.time() - t0,
            detail="; ".join(problems) or "%d bad calls rejected" % len(cases),
        )

    def free(self):
        self.weights = None
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=HERE, help="the pyflow artifacts folder")
    ap.add_argument("--presets", default="", help="comma-separated (default: all in cases.json)")
    ap.add_argument("--T", default="1,64,512", help="token counts of the call checks")
    ap.add_argument(
        "--graph-T", dest="graph_T", default="1,64", help="token counts of the graph checks"
    )
    ap.add_argument(
        "--sync-T", dest="sync_T", default="1,64", help="token counts of the sync-debug checks"
    )
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds after which remaining checks are skipped",
    )
    args = ap.parse_args(argv)

    art_dir = os.path.abspath(args.dir)
    _import_local(art_dir)
    import torch
    import moe_mlir_runtime as rt
    import torch_reference as TR

    out = args.out or (
        os.path.join(os.environ["OUT"], "pyflow")
        if os.environ.get("OUT")
        else os.path.join(os.getcwd(), "pyflow-results")
    )
    res = Results(out, args.budget)
    if not torch.cuda.is_available():
        print("python_flow_check: torch sees no CUDA device", file=sys.stderr)
        return 1
    TR.configure_precision()
    with open(os.path.join(art_dir, "cases.json")) as f:
        cases = json.load(f)
    meta = dict(
        cases.get("meta", {}),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        gpu=torch.cuda.get_device_name(0),
        python=sys.version.split()[0],
        runtime=rt.__file__,
    )
    print("=== python flow: %s (torch %s, %s)" % (art_dir, torch.__version__, meta["gpu"]))
    for k in ("commit", "built", "compiled_with"):
        if k in meta:
            print("    %s: %s" % (k, meta[k]))
    wanted = [p for p in args.presets.split(",") if p]
    Ts = [int(t) for t in args.T.split(",") if t]
    # Check on a non-default stream: the runtime must follow torch's current
    # stream (graph capture needs one anyway).
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    for case in cases["presets"]:
        if wanted and case["name"] not in wanted:
            continue
        if res.over_budget():
            for n in ("call", "graph", "graph-alloc", "sync-debug", "api"):
                res.add("%s/%s" % (n, case["name"]), status="SKIP", detail="time budget")
            continue
        print(
            "--- %s (reference: %s)" % (case["name"], case.get("reference_from", "?")), flush=True
        )
        try:
            runner = PresetRunner(rt, TR, torch, case, art_dir, res, args)
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            res.add(
                "load/" + case["name"],
                status="FAIL",
                detail="%s: %s" % (type(ex).__name__, str(ex)[:400]),
            )
            continue
        for T in Ts:
            if res.over_budget():
                res.add("call/" + case["name"], T, "SKIP", detail="time budget")
                continue
            runner.check_call(T)
        for T in [int(t) for t in args.graph_T.split(",") if t]:
            runner.check_graph(T, allocate=False)
            runner.check_graph(T, allocate=True)
        for T in [int(t) for t in args.sync_T.split(",") if t]:
            runner.check_sync_debug(T)
        runner.check_api()
        runner.free()
    res.flush(meta)
    lines = res.table()
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print()
    print("\n".join(lines))
    c = res.counts()
    if c["FAIL"] or not res.rows:
        return 1
    return 2 if c["SKIP"] else 0


if __name__ == "__main__":
    sys.exit(main())
