#!/usr/bin/env python3
"""Builds the artifacts of the Python-flow GPU check (python_flow_check.py).

Runs here (LLVM, the moe_mlir package): for each preset, builds the layer
with `moe_mlir.ffn_from_config(moe_mlir.PRESETS[name], T=None, dtype="bf16")`
(dynamic T), compiles it with `moe_mlir.gpu.compile_gpu` (fused, sm_90a) to

    OUT/<preset>.so  OUT/<preset>.manifest.json

and copies what the GPU machine needs next to them: the runtime package
moe_mlir_runtime/ and its wheel (python/runtime/ship.py), torch_reference.py,
python_flow_check.py, and cases.json (per preset: library, function, shapes
and the torch_reference.ffn keyword arguments). The reference arguments come
from the GPU harness's own model table (gpu_cases.MODELS) where a preset
names one of its models: the preset's MoeConfig must agree with that
independent description of the model (sizes, routing and GLU attributes),
and the GPU check then tests the compiled layer against the reference
built from the table, not from the preset. The compiled signature must also
match the table's shapes, in the preset's weight layout (transpose_weights
is a free choice). Presets the table does not know are skipped.

  python3 test/GPU/build_python_flow.py [OUT] [--presets a,b | --all]
                                        [--no-fuse] [--source presets|gpu-cases]
  python3 test/GPU/build_python_flow.py --probe     # exit 0 when buildable

OUT defaults to <repo>/gpu-artifacts/pyflow. `--source gpu-cases` builds
the same layers from gpu_cases' MLIR text instead of the presets (exercises
compile_gpu and the runtime without the package's builders).

Finding the package: `import moe_mlir` as is, else from $MOE_MLIR_PYTHONPATH,
<repo>/build/python_packages, <repo>/build/python, <repo>/python.
Exit status: 0 built, 1 a build or check failed, 3 (--probe) not buildable.
"""

import argparse
import copy
import datetime
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_PRESETS = ["qwen3-30b-a3b", "mixtral-8x7b"]

sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(REPO, "test", "Differential"))


def _package_paths():
    paths = []
    env = os.environ.get("MOE_MLIR_PYTHONPATH")
    if env:
        paths += env.split(os.pathsep)
    paths += [
        os.path.join(REPO, "build", "python_packages"),
        os.path.join(REPO, "build", "python"),
        os.path.join(REPO, "python"),
    ]
    return paths


def import_package(need_presets):
    """(moe_mlir, moe_mlir.gpu, None) or (None, None, why)."""
    errors = []
    for extra in [None] + _package_paths():
        if extra is not None:
            if not os.path.isdir(extra) or extra in sys.path:
                continue
            sys.path.insert(0, extra)
            for name in [n for n in sys.modules if n == "moe_mlir" or n.startswith("moe_mlir.")]:
                del sys.modules[name]
        try:
            pkg = importlib.import_module("moe_mlir")
            gpu = importlib.import_module("moe_mlir.gpu")
            # gpu.function_specs reads the IR through the extension
            importlib.import_module("moe_mlir._moe")
        except Exception as ex:  # noqa: BLE001
            errors.append("%s: %s: %s" % (extra or "sys.path", type(ex).__name__, ex))
            continue
        if need_presets:
            missing = [a for a in ("PRESETS", "ffn_from_config") if not hasattr(pkg, a)]
            if missing:
                errors.append(
                    "%s: moe_mlir has no %s"
                    % (os.path.dirname(os.path.dirname(pkg.__file__ or "?")), ", ".join(missing))
                )
                continue
        return pkg, gpu, None
    return None, None, "; ".join(errors) or "moe_mlir not found"


def model_key(name):
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def reference_kwargs(G, m):
    """torch_reference.ffn keyword arguments of gpu_cases model `m` (as
    run_gpu_checks.ModelRunner.ffn_kw builds them)."""
    r, g = m.route, m.glu
    lim = g.get("limit")
    return dict(
        k=m.k,
        scoring=r["scoring"],
        normalize=r.get("normalize", False),
        n_group=r.get("n_group", 1),
        topk_group=r.get("topk_group", 1),
        group_score=r.get("group_score", "max"),
        scaling=G.f32(r.get("scaling", 1.0)),
        activation=g["activation"],
        layout=g["layout"],
        alpha=G.f32(g.get("alpha", 1.0)),
        limit=None if lim is None else G.f32(lim),
        up_bias=G.f32(g.get("up_bias", 0.0)),
        transpose_weights=m.transpose_weights,
    )


# MoeConfig field -> how gpu_cases.Model says it
_CONFIG_FIELDS = [
    ("hidden", lambda m: m.H),
    ("intermediate", lambda m: m.I),
    ("experts", lambda m: m.E),
    ("top_k", lambda m: m.k),
    ("scoring", lambda m: m.route["scoring"]),
    ("normalize", lambda m: m.route.get("normalize", False)),
    ("n_group", lambda m: m.route.get("n_group", 1)),
    ("topk_group", lambda m: m.route.get("topk_group", 1)),
    ("group_score", lambda m: m.route.get("group_score", "max")),
    ("scaling", lambda m: m.route.get("scaling", 1.0)),
    ("routing_bias", lambda m: bool(m.bias)),
    ("expert_bias", lambda m: bool(m.expert_bias)),
    ("activation", lambda m: m.glu["activation"]),
    ("layout", lambda m: m.glu["layout"]),
    ("alpha", lambda m: m.glu.get("alpha", 1.0)),
    ("limit", lambda m: m.glu.get("limit")),
    ("up_bias", lambda m: m.glu.get("up_bias", 0.0)),
]


def preset_mismatches(G, m, cfg):
    """Where a preset's MoeConfig disagrees with gpu_cases' model. The
    weight layout (transpose_weights) is a free choice and not compared."""
    out = []
    for field, want in _CONFIG_FIELDS:
        if not hasattr(cfg, field):
            out.append("the preset has no field %r" % field)
            continue
        got, exp = getattr(cfg, field), want(m)
        if isinstance(exp, float) or isinstance(got, float):
            same = got is not None and exp is not None and G.f32(got) == G.f32(exp)
            same = same or (got is None and exp is None)
        else:
            same = got == exp
        if not same:
            out.append("%s = %r, gpu_cases has %r" % (field, got, exp))
    return out


def with_layout(m, transpose_weights):
    """gpu_cases' model `m` with the preset's weight layout."""
    m2 = copy.copy(m)
    m2.transpose_weights = bool(transpose_weights)
    return m2


def check_signature(G, m, spec):
    """Problems of the compiled @ffn signature against gpu_cases' model."""
    want = [
        (a.name, a.dtype, tuple(None if isinstance(d, str) else d for d in a.shape))
        for a in m.ffn_inputs()
    ]
    got = [(a.name, a.dtype, tuple(a.shape)) for a in spec.args]
    problems = []
    if len(got) != len(want):
        problems.append("%d arguments, the model has %d" % (len(got), len(want)))
    for (wn, wd, ws), (gn, gd, gs) in zip(want, got):
        if (wd, ws) != (gd, gs):
            problems.append(
                "argument %s: %s%s, the model's %s is %s%s" % (gn, gd, list(gs), wn, wd, list(ws))
            )
    res = [(r.dtype, tuple(r.shape)) for r in spec.results]
    if res != [("bf16", (None, m.H))]:
        problems.append("results %s, expected one bf16[T, %d]" % (res, m.H))
    if spec.args and spec.args[0].symbols[:1] != ("T",):
        problems.append("the manifest does not name the token dimension T")
    return problems


def presets_of(pkg):
    P = pkg.PRESETS
    if isinstance(P, dict):
        return dict(P)
    out = {}
    for c in P:
        name = c.get("name") if isinstance(c, dict) else getattr(c, "name", None)
        out[name] = c
    return out


def commit():
    try:
        head = subprocess.run(
            ["git", "-C", REPO, "rev-parse", "HEAD"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            universal_newlines=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                REPO,
                "status",
                "--porcelain",
                "--",
                ".",
                ":(exclude)gpu-artifacts",
                ":(exclude)gpu-artifacts-*",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            universal_newlines=True,
        ).stdout.strip()
        return (head or "unknown") + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def foreign_deps(so):
    try:
        out = subprocess.run(
            ["ldd", so], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True
        ).stdout
    except OSError:
        return []
    return [
        l.strip()
        for l in out.splitlines()
        if re.search(r"not found|llvm|libMLIR|libmlir", l) and "libcuda" not in l
    ]


def clean_output(out):
    """`out` (absolute) with no library, manifest or listing of an earlier
    build left in it."""
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith((".so", ".manifest.json")) or f in ("cases.json", "BUILD.txt"):
            os.remove(os.path.join(out, f))
    return out


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def write_listing(out, meta, key, cases, status):
    """cases.json ({meta, key: cases}) and BUILD.txt (meta, the case names,
    the status) of an artifacts folder."""
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"meta": meta, key: cases}, f, indent=1)
    with open(os.path.join(out, "BUILD.txt"), "w") as f:
        for k, v in meta.items():
            f.write("%-14s %s\n" % (k + ":", v))
        f.write("%-14s %s\n" % (key + ":", " ".join(c["name"] for c in cases)))
        f.write("%-14s %d\n" % ("status:", status))


def ship_runtime(out, scripts):
    """Puts the runtime package and its wheel (python/runtime/ship.py) and
    the check `scripts` of this folder into `out`; False when shipping
    failed."""
    shipped = subprocess.run(
        [sys.executable, os.path.join(REPO, "python", "runtime", "ship.py"), out],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    print(shipped.stdout.rstrip())
    for f in scripts:
        shutil.copy(os.path.join(HERE, f), os.path.join(out, f))
    return shipped.returncode == 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(REPO, "gpu-artifacts", "pyflow"))
    ap.add_argument("--presets", default=",".join(DEFAULT_PRESETS))
    ap.add_argument("--all", action="store_true", help="every preset gpu_cases knows")
    ap.add_argument("--no-fuse", dest="fuse", action="store_false")
    ap.add_argument("--source", choices=("presets", "gpu-cases"), default="presets")
    ap.add_argument("--probe", action="store_true")
    args = ap.parse_args(argv)

    need_presets = args.source == "presets"
    pkg, gpu, why = import_package(need_presets)
    if args.probe:
        if pkg is None:
            print("build_python_flow: moe_mlir not usable: %s" % why)
            return 3
        print("build_python_flow: moe_mlir from %s" % os.path.dirname(gpu.__file__))
        return 0
    if pkg is None:
        print("build_python_flow: cannot import moe_mlir: %s" % why, file=sys.stderr)
        return 1
    rt = gpu._rt

    import gpu_cases as G  # numpy only

    out = clean_output(args.out)

    if args.source == "presets":
        available = presets_of(pkg)
        if args.all:
            names = [n for n in available if model_key(n) in G.MODELS_BY_NAME]
        else:
            names = [n for n in args.presets.split(",") if n]
    else:
        available = {}
        names = (
            [m.name for m in G.MODELS]
            if args.all
            else [model_key(n) for n in args.presets.split(",") if n]
        )

    status = 0
    cases = []
    t_all = time.time()
    for name in names:
        key = model_key(name)
        m = G.MODELS_BY_NAME.get(key)
        if m is None:
            print("skip %-18s gpu_cases.MODELS has no %s to take the reference from" % (name, key))
            continue
        so = os.path.join(out, name + ".so")
        t0 = time.time()
        try:
            if args.source == "presets":
                if name not in available:
                    raise KeyError(
                        "moe_mlir.PRESETS has no %r (it has: %s)"
                        % (name, ", ".join(sorted(available)))
                    )
                cfg = available[name]
                bad = preset_mismatches(G, m, cfg)
                if bad:
                    raise RuntimeError(
                        "preset %s disagrees with gpu_cases' %s: %s"
                        % (name, m.title, "; ".join(bad))
                    )
                m = with_layout(m, getattr(cfg, "transpose_weights", m.transpose_weights))
                module = pkg.ffn_from_config(cfg, T=None, dtype="bf16")
                verify = getattr(module, "verify", None)
                if callable(verify) and verify() is False:
                    raise RuntimeError("the preset's module does not verify")
            else:
                module = G.Model.mlir(m)
            gpu.compile_gpu(module, so, chip="sm_90a", fuse=args.fuse)
            manifest = rt.Manifest.read(rt.manifest_path(so))
            fns = sorted(manifest.functions)
            fn = "ffn" if "ffn" in fns else fns[0]
            if len(fns) != 1 and args.source == "presets":
                print("     note: %s exports %s; checking @%s" % (name, fns, fn))
            problems = check_signature(G, m, manifest.functions[fn])
            if problems:
                raise RuntimeError(
                    "@%s does not match gpu_cases' %s: %s" % (fn, m.title, "; ".join(problems))
                )
            deps = foreign_deps(so)
            if deps:
                raise RuntimeError("depends on libraries the GPU machine lacks: %s" % deps)
            cases.append(
                dict(
                    name=name,
                    library=os.path.basename(so),
                    function=fn,
                    model=m.name,
                    title=m.title,
                    H=m.H,
                    I=m.I,
                    E=m.E,
                    k=m.k,
                    bias=bool(m.bias),
                    expert_bias=bool(getattr(m, "expert_bias", False)),
                    reference=reference_kwargs(G, m),
                    reference_from="gpu_cases.MODELS[%s]" % m.name,
                    signature=manifest.functions[fn].signature(),
                    compiled_with=manifest.data.get("compiled_with"),
                    pipeline=manifest.data.get("pipeline"),
                )
            )
            print(
                "ok   %-18s %5.1fs %7d KiB  %s"
                % (
                    name,
                    time.time() - t0,
                    os.path.getsize(so) // 1024,
                    manifest.functions[fn].signature(),
                )
            )
        except Exception as ex:  # noqa: BLE001
            status = 1
            print("FAIL %-18s %5.1fs %s: %s" % (name, time.time() - t0, type(ex).__name__, ex))
    if not cases:
        print("build_python_flow: nothing built", file=sys.stderr)
        status = 1

    runtime_src = os.path.dirname(rt.__file__)
    stale = os.path.join(out, "runtime.py")  # the single file shipped before
    if os.path.exists(stale):
        os.remove(stale)
    if not ship_runtime(out, ("torch_reference.py", "python_flow_check.py")):
        status = 1
    meta = dict(
        commit=commit(),
        built=now(),
        source=args.source,
        fuse=args.fuse,
        compiled_with=cases[0]["compiled_with"] if cases else None,
        package=os.path.dirname(gpu.__file__),
        runtime=runtime_src,
    )
    write_listing(out, meta, "presets", cases, status)
    print(
        "--- %s: %d artifacts in %.1fs (commit %s)"
        % (out, len(cases), time.time() - t_all, meta["commit"])
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
