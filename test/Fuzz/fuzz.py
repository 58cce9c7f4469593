#!/usr/bin/env python3
# ===- fuzz.py - mutate valid moe modules, run every pipeline, find crashes -=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Mutation fuzzer of moe-opt: valid modules in, crashes out.

  fuzz.py [--count N] [--seed S] [-j J] [--moe-opt PATH] [--keep DIR]
          [--pipelines all|cheap] [--timeout SECONDS]

Seeds are the functions of test/GPU/cases/*.mlir (every public and fused
op with attribute variants, and the model layers), each as its own module.
A mutant applies 1-3 text mutations to a seed:

  number     an integer literal replaced (0, 1, -1, 2^31, 2^63 - 1, ...)
  shape      a tensor dimension changed, made dynamic, dropped or added
  dtype      an element type replaced (f32, bf16, f16, f64, i1, i32, i64)
  attribute  an enum value or bool swapped, an attribute dropped
  operand    two SSA names of a line swapped
  token      a token deleted

or, for half of the mutations, one that keeps the function consistent
more often (so that the pipelines see it, not only the verifiers):

  shape-all  one dimension size replaced in every tensor type
  dtype-all  one element type replaced everywhere
  attr-value an integer attribute (k, num_groups, ...) set to a small value

and is run through moe-opt: parsing and verifying alone, then one pipeline drawn from
--moe-decompose --moe-fuse, --moe-lower-to-cpu (plain and fused) and
--moe-lower-to-nvvm (plain and fused, format=llvm: no ptxas; format=ptx
for 1 in 10). Each run is classified: ok (exit 0), rejected by the parser
/ verifier or by a pipeline (exit 1 with a diagnostic: the expected answer
to bad input), or a crash: a signal, an
assertion / LLVM ERROR / stack dump banner, another exit code, or a
timeout. Crashing mutants are written to --keep (default
./fuzz-crashes) with the command line. Exit status 1 when any crashed.
The mutant stream depends only on --seed and --count, not on -j.
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
REPO = os.path.dirname(os.path.dirname(HERE))
SEED_DIR = os.path.join(REPO, "test", "GPU", "cases")

PIPELINES = [
    ["--moe-decompose", "--moe-fuse"],
    ["--moe-lower-to-cpu"],
    ["--moe-decompose", "--moe-fuse", "--moe-lower-to-cpu"],
    ["--moe-lower-to-nvvm=format=llvm"],
    ["--moe-decompose", "--moe-fuse", "--moe-lower-to-nvvm=format=llvm"],
]
PTX = ["--moe-decompose", "--moe-fuse", "--moe-lower-to-nvvm=format=ptx"]
CRASH_BANNERS = re.compile(
    r"Assertion .* failed|LLVM ERROR|PLEASE submit a bug report|Stack dump|UNREACHABLE"
)

DTYPES = ["f32", "bf16", "f16", "f64", "i1", "i32", "i64"]
NUMBERS = ["0", "1", "-1", "2", "3", "7", "64", "1000", "2147483648", "9223372036854775807"]
ENUMS = [
    ("softmax", "sigmoid"),
    ("sigmoid", "softmax"),
    ("silu", "gelu"),
    ("gelu", "silu_tanh"),
    ("concat", "interleaved"),
    ("interleaved", "concat"),
    ("top2_sum", "max"),
    ("max", "top2_sum"),
    ("true", "false"),
    ("false", "true"),
]


def seed_modules():
    """One module per func.func of the case files (the resource section,
    where a file has one, goes with each of its functions)."""
    out = []
    for name in sorted(os.listdir(SEED_DIR)):
        if not name.endswith(".mlir"):
            continue
        text = open(os.path.join(SEED_DIR, name)).read()
        resources = ""
        at = text.find("{-#")
        if at >= 0:
            resources, text = text[at:], text[:at]
        for m in re.finditer(r"^func\.func .*?^}\n", text, re.S | re.M):
            if len(m.group(0)) > 20000:  # the dense-hex weights: mutations land in data
                continue
            out.append(("%s:%s" % (name, m.group(0).split("(")[0][11:]), m.group(0) + resources))
    return out


def mutate_consistently(rng, text):
    """A mutation of the whole function that keeps it well-formed more
    often than a local one, so that the pipelines, not only the verifiers,
    see the mutants: one dimension size replaced in every tensor type
    (H, E, k or I of a layer, made smaller, larger, 1 or dynamic), one
    element type replaced everywhere, or an integer attribute (k,
    num_groups, topk_groups, ...) set to a small value."""
    choice = rng.random()
    if choice < 0.45:
        sizes = sorted(
            {d for m in re.finditer(r"tensor<([^>]*)>", text) for d in m.group(1).split("x")[:-1]}
            - {"?"}
        )
        if sizes:
            old = rng.choice(sizes)
            new = rng.choice(["?", "1", "2", "3", "8", "16", "24", "64", "96", "130", "256"])

            def retype(m):
                dims = m.group(1).split("x")
                dims = [new if i < len(dims) - 1 and d == old else d for i, d in enumerate(dims)]
                return "tensor<%s>" % "x".join(dims)

            return "shape-all", re.sub(r"tensor<([^>]*)>", retype, text)
    if choice < 0.7:
        present = sorted(set(re.findall(r"(?<=[x<\s])(f32|bf16|f16)(?![\w])", text)))
        if present:
            old = rng.choice(present)
            new = rng.choice([t for t in ("f32", "bf16", "f16", "f64") if t != old])
            return "dtype-all", re.sub(r"(?<=[x<\s])%s(?![\w])" % old, new, text)
    spots = list(re.finditer(r"\b(\w+) = (-?\d+)(?= ?:? ?i?\d*[,}\s])", text))
    if spots:
        m = rng.choice(spots)
        value = rng.choice(["0", "1", "2", "3", "4", "8", "9", "-1"])
        return "attr-value", text[: m.start(2)] + value + text[m.end(2) :]
    return mutate_local(rng, text)


def mutate_once(rng, text):
    if rng.random() < 0.5:
        return mutate_consistently(rng, text)
    return mutate_local(rng, text)


def mutate_local(rng, text):
    kind = rng.choice(
        [
            "number",
            "number",
            "shape",
            "shape",
            "dtype",
            "attribute",
            "attribute",
            "operand",
            "token",
        ]
    )
    if kind == "number":
        spots = [m for m in re.finditer(r"(?<![\w%#.x])-?\d+(?![\w.])", text)]
        if spots:
            m = rng.choice(spots)
            return kind, text[: m.start()] + rng.choice(NUMBERS) + text[m.end() :]
    if kind == "shape":
        spots = list(re.finditer(r"tensor<([^>]*)>", text))
        if spots:
            m = rng.choice(spots)
            dims = m.group(1).split("x")
            i = rng.randrange(len(dims))
            op = rng.random()
            if op < 0.4 and len(dims) > 1:
                dims[i if i < len(dims) - 1 else 0] = rng.choice(["?", "0", "1", "3", "128"])
            elif op < 0.6 and len(dims) > 1:
                del dims[rng.randrange(len(dims) - 1)]
            elif op < 0.8:
                dims.insert(rng.randrange(len(dims)), rng.choice(["2", "?"]))
            else:
                dims[-1] = rng.choice(DTYPES)
            return kind, text[: m.start()] + "tensor<%s>" % "x".join(dims) + text[m.end() :]
    if kind == "dtype":
        spots = list(re.finditer(r"(?<=[x<\s])(f32|bf16|f16|i32|i64|i1)(?![\w])", text))
        if spots:
            m = rng.choice(spots)
            return kind, text[: m.start()] + rng.choice(DTYPES) + text[m.end() :]
    if kind == "attribute":
        if rng.random() < 0.5:
            spots = list(re.finditer(r"\b\w+ = [^,{}]+?(?=[,}])", text))
            if spots:
                m = rng.choice(spots)
                return kind, text[: m.start()] + text[m.end() :]
        pairs = [(a, b) for a, b in ENUMS if re.search(r"\b%s\b" % a, text)]
        if pairs:
            a, b = rng.choice(pairs)
            spots = list(re.finditer(r"\b%s\b" % a, text))
            m = rng.choice(spots)
            return kind, text[: m.start()] + b + text[m.end() :]
    if kind == "operand":
        lines = text.split("\n")
        cand = [i for i, l in enumerate(lines) if len(set(re.findall(r"%\w+", l))) >= 2]
        if cand:
            i = rng.choice(cand)
            names = sorted(set(re.findall(r"%\w+", lines[i])))
            a, b = rng.sample(names, 2)
            lines[i] = re.sub(
                r"%s\b|%s\b" % (re.escape(a), re.escape(b)),
                lambda m: b if m.group(0) == a else a,
                lines[i],
            )
            return kind, "\n".join(lines)
    spots = list(re.finditer(r"[\w%#.<>\-]+|[(){}\[\],:=]", text))
    m = rng.choice(spots)
    return "token", text[: m.start()] + text[m.end() :]


def make_mutant(seeds, seed, index, ptx_share):
    rng = random.Random("%d/%d" % (seed, index))
    name, text = rng.choice(seeds)
    kinds = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        kind, text = mutate_once(rng, text)
        kinds.append(kind)
    pipeline = PTX if rng.random() < ptx_share else rng.choice(PIPELINES)
    return name, kinds, text, pipeline


def run_one(moe_opt, text, pipeline, timeout):
    """(class, detail) of moe-opt on `text` parsed, then through `pipeline`."""
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        for args in ([], pipeline):
            try:
                p = subprocess.run(
                    [moe_opt, path, *args, "-o", os.devnull],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                return "timeout", " ".join(args) or "parse"
            err = p.stderr.decode(errors="replace")
            if p.returncode < 0:
                return "crash", "signal %d in %s" % (-p.returncode, " ".join(args) or "parse")
            if CRASH_BANNERS.search(err):
                return "crash", CRASH_BANNERS.search(err).group(0)
            if p.returncode not in (0, 1):
                return "crash", "exit %d" % p.returncode
            if p.returncode == 1:
                if "error:" not in err:
                    return "crash", "exit 1 without a diagnostic"
                return ("rejected" if args else "unparsed"), ""
        return "ok", ""
    finally:
        os.unlink(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--moe-opt", default=os.path.join(REPO, "build", "bin", "moe-opt"))
    ap.add_argument("--keep", default="fuzz-crashes")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--ptx-share", type=float, default=0.1, help="share of mutants lowered to PTX")
    args = ap.parse_args(argv)
    seeds = seed_modules()
    t0 = time.time()
    counts = {"ok": 0, "unparsed": 0, "rejected": 0, "crash": 0, "timeout": 0}
    kinds = {}
    crashes = []

    def job(i):
        name, ks, text, pipeline = make_mutant(seeds, args.seed, i, args.ptx_share)
        return i, name, ks, text, pipeline, run_one(args.moe_opt, text, pipeline, args.timeout)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as ex:
        for i, name, ks, text, pipeline, (cls, detail) in ex.map(job, range(args.count)):
            counts[cls] += 1
            for k in ks:
                kinds[k] = kinds.get(k, 0) + 1
            if cls in ("crash", "timeout"):
                crashes.append((i, name, ks, pipeline, cls, detail))
                os.makedirs(args.keep, exist_ok=True)
                path = os.path.join(args.keep, "mutant-%d-%d.mlir" % (args.seed, i))
                with open(path, "w") as f:
                    f.write(
                        "// %s: %s (seed %s, mutations %s)\n// moe-opt %%s %s\n"
                        % (cls, detail, name, ",".join(ks), " ".join(pipeline))
                    )
                    f.write(text)
                print(
                    "%s %s: %s [%s] -> %s" % (cls.upper(), path, detail, name, " ".join(pipeline))
                )
    print(
        "fuzz: %d mutants (seed %d, %d seed functions) in %.0f s: %d ok, %d rejected by "
        "the parser / verifier, %d by a pipeline, %d crashes, %d timeouts; mutations %s"
        % (
            args.count,
            args.seed,
            len(seeds),
            time.time() - t0,
            counts["ok"],
            counts["unparsed"],
            counts["rejected"],
            counts["crash"],
            counts["timeout"],
            ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
        )
    )
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
