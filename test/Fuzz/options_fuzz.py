#!/usr/bin/env python3
# ===- options_fuzz.py - random GPU pipeline options on valid modules ------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Option fuzzer of the GPU pipeline: valid modules, random options.

  options_fuzz.py [--count N] [--seed S] [-j J] [--moe-opt PATH]
                  [--ptxas PATH] [--keep DIR] [--timeout SECONDS]

fuzz.py mutates the input and keeps the default options; this one keeps
the inputs (the functions of test/GPU/cases/*.mlir, each as its own module,
as fuzz.py's seeds) and draws the --moe-lower-to-nvvm options: every GEMM
engine option (tile sizes, stages, clusters, TMA, producer registers, the
small-M kernels' options) and the others (chip, elide-fills, programmatic
launch, ...), each left out or set
to a value drawn from its valid values and a few invalid ones. Each run is
moe-opt (--moe-decompose --moe-fuse for half of them) with the options and
format=ptx, then ptxas -v on every kernel for its chip. Classes:

  ok        compiled, every kernel assembled without spills or warnings
  rejected  exit 1 with a diagnostic (the answer to a bad option value or
            an option set a configuration cannot take)
  crash     a signal, an assertion / LLVM ERROR / stack-dump banner, an
            exit code other than 0 / 1, exit 1 without a diagnostic, or a
            timeout
  ptxas     ptxas rejected a kernel
  spill     a kernel spills (ptxas -v: spill stores / loads) or ptxas warns
            (e.g. wgmma serialised, C7520; warpgroup.arrive injected, C7519)

Everything but ok and rejected is written to --keep (default
./options-fuzz-findings) with the command line. Exit status 1 when any
run crashed or ptxas rejected a kernel; spills are reported (the kernel
still runs) but do not fail the run. The draws depend only on --seed and
--count.
"""

import argparse
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Pipelines"))
import fuzz  # noqa: E402  (seed_modules, CRASH_BANNERS)
import ptxas_check  # noqa: E402  (OBJECT, unescape, ptxas_info)

# option -> values (valid ones first; the fuzzer draws from all of them).
OPTIONS = {
    "gemm": ["auto", "simt", "wgmma", "tensor"],
    "chip": ["sm_90a", "sm_90a", "sm_90a", "sm_80", "sm_90", "sm_100a"],
    "tile-m": ["16", "32", "64", "8", "0"],
    "tile-n": ["16", "32", "64", "12"],
    "tile-k": ["8", "16", "32", "0"],
    "wgmma-tile-m": ["0", "64", "128", "96"],
    "wgmma-tile-n": [
        "0",
        "64",
        "96",
        "128",
        "144",
        "192",
        "208",
        "240",
        "256",
        "80",
        "48",
        "272",
        "100",
    ],
    "wgmma-stages": ["0", "2", "3", "4", "5", "6", "8", "1", "9"],
    "wgmma-tma": ["true", "false"],
    "wgmma-cluster": ["0", "1", "2", "4"],
    "wgmma-swap-rows": ["-1", "0", "1", "8", "16", "64", "-3"],
    "wgmma-swap-tile-m": ["0", "16", "32", "64", "48"],
    "wgmma-swap-tile-n": ["0", "64", "128", "96"],
    "wgmma-wide-swap-rows": ["-1", "0", "32", "64", "-2"],
    "wgmma-wide-swap-tile-m": ["32", "64", "16"],
    "wgmma-swap-mn-major": ["true", "false"],
    "elide-fills": ["true", "false"],
    "route-dispatch-small": ["true", "false"],
    "programmatic-launch": ["true", "false"],
    "out-params": ["true", "false"],
    "shape-checks": ["report", "abort", "none"],
}
# Options drawn from their valid values only in 3 of 4 runs, so that most
# runs reach the kernels rather than the option checks.
INVALID_SHARE = 0.25
SPILL = re.compile(r"([1-9]\d*) bytes spill (stores|loads)")
PTXAS_WARNING = re.compile(r"ptxas (warning|info)\s*:.*(C75\d\d|Potential Performance Loss)")


def draw_options(rng):
    """A random option list; the valid values are the first entries up to
    the first invalid one (those past the valid prefix only with
    INVALID_SHARE)."""
    invalid_ok = rng.random() < INVALID_SHARE
    opts = {}
    for name, values in OPTIONS.items():
        if rng.random() < 0.55:
            continue
        pool = values if invalid_ok else valid_values(name, values)
        opts[name] = rng.choice(pool)
    return opts


def valid_values(name, values):
    invalid = {
        "gemm": {"tensor"},
        "chip": {"sm_100a"},
        "tile-m": {"0"},
        "tile-n": {"12"},
        "tile-k": {"0"},
        "wgmma-tile-m": {"96"},
        "wgmma-tile-n": {"80", "48", "272", "100"},
        "wgmma-stages": {"1", "9"},
        "wgmma-cluster": {"4"},
        "wgmma-swap-rows": {"-3"},
        "wgmma-swap-tile-m": {"48"},
        "wgmma-swap-tile-n": {"96"},
        "wgmma-wide-swap-rows": {"-2"},
        "wgmma-wide-swap-tile-m": {"16"},
    }.get(name, set())
    return [v for v in values if v not in invalid]


def run_one(moe_opt, ptxas, text, fused, opts, timeout):
    """(class, detail) of one run."""
    option_text = " ".join(["format=ptx"] + ["%s=%s" % kv for kv in opts.items()])
    pipeline = (["--moe-decompose", "--moe-fuse"] if fused else []) + [
        "--moe-lower-to-nvvm=" + option_text
    ]
    chip = opts.get("chip", "sm_90a")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.mlir")
        out = os.path.join(tmp, "out.mlir")
        with open(src, "w") as f:
            f.write(text)
        try:
            p = subprocess.run(
                [moe_opt, src, *pipeline, "-o", out],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return "crash", "timeout", pipeline
        err = p.stderr.decode(errors="replace")
        if p.returncode < 0:
            return "crash", "signal %d" % -p.returncode, pipeline
        if fuzz.CRASH_BANNERS.search(err):
            return "crash", fuzz.CRASH_BANNERS.search(err).group(0), pipeline
        if p.returncode not in (0, 1):
            return "crash", "exit %d" % p.returncode, pipeline
        if p.returncode == 1:
            if "error:" not in err:
                return "crash", "exit 1 without a diagnostic", pipeline
            first = next((line for line in err.splitlines() if "error:" in line), "")
            return "rejected", first.split("error:", 1)[1].strip(), pipeline
        findings = []
        for i, (name, ptx) in enumerate(ptxas_check.OBJECT.findall(open(out).read())):
            path = os.path.join(tmp, "%d.ptx" % i)
            with open(path, "w") as f:
                f.write(ptxas_check.unescape(ptx))
            try:
                q = subprocess.run(
                    [ptxas, "-arch=" + chip, "-v", path, "-o", os.devnull],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                return "crash", "ptxas timeout (%s)" % name, pipeline
            log = q.stdout.decode(errors="replace")
            if q.returncode != 0:
                return "ptxas", "%s: %s" % (name, log.strip().splitlines()[-1:]), pipeline
            for kernel, lines in ptxas_check.ptxas_info(log).items():
                for line in lines:
                    if SPILL.search(line) or PTXAS_WARNING.search(line):
                        findings.append("%s %s" % (kernel, line.strip()))
        if findings:
            return "spill", "; ".join(sorted(set(findings))[:4]), pipeline
        return "ok", "", pipeline


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--moe-opt", default="moe-opt")
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("--keep", default="options-fuzz-findings")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args(argv)

    seeds = fuzz.seed_modules()
    rng = random.Random(args.seed)
    runs = []
    for i in range(args.count):
        name, text = seeds[rng.randrange(len(seeds))]
        fused = rng.random() < 0.5
        runs.append((i, name, text, fused, draw_options(rng)))

    start = time.time()
    counts = {}
    rejections = {}
    failed = False
    os.makedirs(args.keep, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            pool.submit(run_one, args.moe_opt, args.ptxas, text, fused, opts, args.timeout): (
                i,
                name,
                text,
            )
            for i, name, text, fused, opts in runs
        }
        for future in concurrent.futures.as_completed(futures):
            i, name, text = futures[future]
            kind, detail, pipeline = future.result()
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "rejected":
                key = re.sub(r"\d+", "N", detail)[:110]
                rejections[key] = rejections.get(key, 0) + 1
                continue
            if kind == "ok":
                continue
            failed |= kind in ("crash", "ptxas")
            base = os.path.join(args.keep, "run%05d" % i)
            with open(base + ".mlir", "w") as f:
                f.write(text)
            with open(base + ".cmd", "w") as f:
                f.write("moe-opt %s.mlir %s\n" % (base, " ".join("'%s'" % a for a in pipeline)))
            print(
                "%s run %d (%s): %s\n  %s" % (kind.upper(), i, name, detail, " ".join(pipeline)),
                flush=True,
            )

    print("rejections (diagnostic, count):")
    for key, n in sorted(rejections.items(), key=lambda kv: -kv[1]):
        print("  %5d  %s" % (n, key))
    summary = ", ".join(
        "%d %s" % (counts.get(k, 0), k) for k in ("ok", "rejected", "spill", "ptxas", "crash")
    )
    print(
        "options_fuzz: %d runs (seed %d, %d seed functions) in %.0f s: %s"
        % (args.count, args.seed, len(seeds), time.time() - start, summary)
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
