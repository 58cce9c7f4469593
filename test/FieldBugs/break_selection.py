#!/usr/bin/env python3
"""Shows that the CPU field-bug tests catch the bugs they name (issue 14).

Each entry below puts one shipped MoE routing bug into the shared selection
code (lib/Conversion/Utils/Selection.cpp, used by the CPU and the GPU
lowering), rebuilds moe-opt, runs the CPU execution tests that guard
against it, and restores the file (and rebuilds) whatever happens. A test
that still passes on a broken build is reported as MISSED; the exit status
is 1 if any bug was missed. Run from the repository root with a configured
build/ (about a minute per bug on 2 cores):

  python3 test/FieldBugs/break_selection.py [BUG ...]

Not part of check-moe: it edits the source tree while it runs.
"""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "lib/Conversion/Utils/Selection.cpp"
LIT = "/usr/lib/llvm-22/bin/lit"
TESTS = ["build/test/Integration/CPU/route.mlir", "build/test/Integration/CPU/topk.mlir"]

# name -> (what the bug is, [(text, replacement), ...])
BUGS = {
    "tie-higher-index": (
        "top-k ties: the higher expert index wins",
        [
            (
                "Value tie = b.andi(b.cmpf(CmpF::OEQ, va, vb), lowerIndex);",
                "Value tie = b.andi(b.cmpf(CmpF::OEQ, va, vb), b.cmpi(CmpI::sgt, ia, ib));",
            )
        ],
    ),
    "nan-logit-kept": (
        "a NaN logit is scored as it is (no -inf), so softmax rows turn NaN",
        [("  x = b.select(b.cmpf(CmpF::UNO, x, x), negInf, x);\n", "")],
    ),
    "nan-unordered-compare": (
        "NaN keys compared with ordered predicates only (NaN never ranks, a pick can repeat)",
        [
            (
                "  return b.select(aNan, whenANan, whenANumber);",
                "  (void)whenANan;\n  (void)whenANumber;\n  return numbers;",
            )
        ],
    ),
    "masked-group-key-0": (
        (
            "group-limited routing: experts of masked groups get key 0 instead of being excluded (-inf)"
        ),
        [
            (
                "              Value key = valueAt(b, e);\n",
                (
                    "              Value key = valueAt(b, e);\n"
                    "              if (allowed)\n"
                    "                key = b.select(allowed(b, e), key, b.f32(0.0));\n"
                ),
            ),
            (
                "              if (allowed)\n                take = b.andi(take, allowed(b, e));\n",
                "",
            ),
        ],
    ),
}


def build():
    return subprocess.run(
        ["ninja", "-C", "build", "moe-opt"], cwd=ROOT, capture_output=True, text=True, check=False
    )


def main():
    names = sys.argv[1:] or list(BUGS)
    original = SOURCE.read_text()
    missed = []
    try:
        for name in names:
            what, edits = BUGS[name]
            text = original
            for old, new in edits:
                assert text.count(old) == 1, f"{name}: the source changed"
                text = text.replace(old, new)
            SOURCE.write_text(text)
            r = build()
            if r.returncode:
                print(f"{name}: the broken build failed\n{r.stdout[-2000:]}")
                missed.append(name)
                continue
            r = subprocess.run(
                [LIT, "-v", *TESTS], cwd=ROOT, capture_output=True, text=True, check=False
            )
            failing = [
                l.split(" :: ")[1].split(" (")[0]
                for l in r.stdout.splitlines()
                if l.startswith("FAIL:")
            ]
            verdict = "caught by " + ", ".join(failing) if failing else "MISSED"
            if not failing:
                missed.append(name)
            print(f"{name} ({what}): {verdict}")
    finally:
        SOURCE.write_text(original)
        build()
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
