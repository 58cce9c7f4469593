#!/usr/bin/env python3
"""Builds GPU artifacts with one field bug each, for run_broken_gpu.sh (issue 14).

Each entry below puts one shipped MoE GPU kernel bug into the lowering,
rebuilds moe-opt and moe-aot, builds the GPU check artifacts of the cases
that exercise it (test/GPU/build_artifacts.sh with ONLY=...) into
OUT/<bug>/, and restores the source (and rebuilds) whatever happens. Then,
on the H200, `bash test/FieldBugs/run_broken_gpu.sh OUT` runs the check
that names the bug class against each folder and reports whether it was
caught. Run from the repository root with a configured build/:

  python3 test/FieldBugs/build_broken_gpu.py [OUT] [BUG ...]   (OUT default
      gpu-artifacts-broken, git-ignored)
  python3 test/FieldBugs/build_broken_gpu.py --check-anchors
      (edits nothing: every bug's source text is there exactly once;
      check-moe runs it, test/FieldBugs/anchors.test, so that a refactor
      of the lowering cannot silently retire a field bug)

Not part of check-moe otherwise: it edits the source tree while it runs.
"""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROUTING = "lib/Conversion/MoeToGPU/Routing/RouteDispatchSmall.cpp"
WGMMA = "lib/Conversion/MoeToGPU/Gemm/WgmmaEngine.cpp"
WGMMA_KERNEL = "lib/Conversion/MoeToGPU/Gemm/WgmmaKernel.h"
FILLS = "lib/Conversion/MoeToGPU/ExpertComputeToGPU.cpp"
RUNTIME = "lib/Runtime/CUDA/Kernels.cpp"
KERNELS = "lib/Conversion/MoeToGPU/KernelBuilder.cpp"

# name -> (what, case regex for ONLY, [(file, text, replacement)])
BUGS = {
    "no-barrier-before-placement": (
        "the fused route + dispatch kernel reads the per-expert offsets it "
        "just built in shared memory without a barrier",
        "ffn_qwen3",
        [
            (
                ROUTING,
                "        gpu::BarrierOp::create(b);\n        // Phase 4: placement.\n",
                "        // Phase 4: placement.\n",
            )
        ],
    ),
    "atomic-placement": (
        "the fused route + dispatch kernel places each slot at an atomic "
        "per-expert cursor, so slot positions follow thread timing and change "
        "between runs",
        "^ops$",
        [
            (
                ROUTING,
                (
                    "          Value pos =\n"
                    "              b.add(b.add(b.load(offs, {bk}), b.load(earlierBlocks, {bk})),\n"
                    "                    b.add(b.load(counts, {w, bk}), before));\n"
                ),
                (
                    "          (void)before;\n"
                    "          Value pos = b.add(\n"
                    "              memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addi,\n"
                    "                                          b.i32(1), offs, ValueRange{bk})\n"
                    "                  .getResult(),\n"
                    "              b.load(earlierBlocks, {bk}));\n"
                ),
            )
        ],
    ),
    "launch-empty-grid": (
        "kernels are launched with the grid their sizes give, 0 blocks at "
        "T = 0 (no clamp to one block in the lowering, no skip in the "
        "runtime), which CUDA rejects",
        "^ops$",
        [
            (
                KERNELS,
                "  Value gx = b.maxIdx(gridX, one);\n",
                "  Value gx = gridX;\n",
            ),
            (
                RUNTIME,
                (
                    "  if (gridX == 0 || gridY == 0 || gridZ == 0)\n"
                    "    return;\n"
                    "  if (!checkLaunchDims(__func__, {gridX, gridY, gridZ, blockX, blockY, blockZ}))\n"
                ),
                "  if (!checkLaunchDims(__func__, {gridX, gridY, gridZ, blockX, blockY, blockZ}))\n",
            ),
        ],
    ),
    "i32-output-offset": (
        "the GEMM epilogue computes row * stride + column in 32 bits",
        "ffn_deepseek",
        [
            (
                WGMMA_KERNEL,
                "    Value offset = b.add(b.mul(row, outStride), col);\n",
                (
                    "    Value offset = b.toIndex(\n"
                    "        b.add(b.mul(b.toI32(row), b.toI32(outStride)), b.toI32(col)));\n"
                ),
            )
        ],
    ),
    "no-uncovered-fill": (
        "rows no expert covers are left as they were (no zero fill)",
        "^ops$",
        [
            (
                FILLS,
                '         "zeroUncoveredStrided: Rows or PermutedRows");\n',
                '         "zeroUncoveredStrided: Rows or PermutedRows");\n  return;\n',
            )
        ],
    ),
    "scan-one-bucket-per-thread": (
        "the block-wide scan over the experts handles one expert per thread "
        "(256), so experts past it get no offsets",
        "many_experts",
        [
            (
                ROUTING,
                "  int64_t perThread = (nb + kClusterThreads - 1) / kClusterThreads;\n",
                "  int64_t perThread = 1;\n",
            )
        ],
    ),
}


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, **kw)


def tools():
    return run(["ninja", "-C", "build", "moe-opt", "moe-aot", "MoeCudaRuntimeStatic"])


def check_anchors():
    """0 when every edit's text occurs exactly once in its file."""
    status = 0
    for name, (_, _, edits) in BUGS.items():
        for path, old, _ in edits:
            count = (ROOT / path).read_text().count(old)
            if count != 1:
                print(f"{name}: {path} holds its text {count} times, not once")
                status = 1
    print(f"{len(BUGS)} field bugs, anchors {'ok' if status == 0 else 'STALE'}")
    return status


def main():
    args = sys.argv[1:]
    if args == ["--check-anchors"]:
        return check_anchors()
    out = pathlib.Path(args.pop(0) if args and args[0] not in BUGS else "gpu-artifacts-broken")
    out = out if out.is_absolute() else ROOT / out
    names = args or list(BUGS)
    originals = {}
    status = 0
    try:
        for name in names:
            what, only, edits = BUGS[name]
            for path, old, new in edits:
                src = ROOT / path
                text = originals.setdefault(path, src.read_text())
                assert text.count(old) == 1, f"{name}: {path} changed"
                src.write_text(text.replace(old, new))
            r = tools()
            if r.returncode:
                print(f"{name}: the broken build failed\n{r.stdout[-3000:]}")
                status = 1
            else:
                env = dict(os.environ, ONLY=only, SKIP_HF="1", SKIP_PYFLOW="1")
                r = run(["bash", "test/GPU/build_artifacts.sh", str(out / name)], env=env)
                print(f"{name} ({what}): artifacts {'built' if r.returncode == 0 else 'FAILED'}")
                if r.returncode:
                    print(r.stdout[-3000:], r.stderr[-3000:])
                    status = 1
            for path in originals:
                (ROOT / path).write_text(originals[path])
    finally:
        for path, text in originals.items():
            (ROOT / path).write_text(text)
        tools()
    return status


if __name__ == "__main__":
    sys.exit(main())
