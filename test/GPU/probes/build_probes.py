#!/usr/bin/env python3
"""Builds the probe kernels of this folder (MLIR text in the gpu / llvm / nvvm
dialects) to cubins, here (no GPU needed):

  python3 test/GPU/probes/build_probes.py OUT_DIR

mlir-opt's upstream --gpu-lower-to-nvvm-pipeline (sm_90a, +ptx86, bare
pointers, format isa) writes PTX; ptxas (-v, resource report next to the
cubin) assembles it. Run the cubins on the H200 with probes_device.py."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Pipelines"))
from ptxas_check import OBJECT, unescape  # noqa: E402

MLIR_OPT = os.environ.get("MLIR_OPT", "/usr/lib/llvm-22/bin/mlir-opt")
PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
PIPELINE = (
    "--gpu-lower-to-nvvm-pipeline=cubin-chip=sm_90a cubin-features=+ptx86 "
    "cubin-format=isa kernel-bare-ptr-calling-convention=1"
)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "build")
    os.makedirs(out, exist_ok=True)
    failed = 0
    for src in sorted(f for f in os.listdir(HERE) if f.endswith(".mlir")):
        name = src[: -len(".mlir")]
        res = subprocess.run(
            [MLIR_OPT, os.path.join(HERE, src), PIPELINE], capture_output=True, text=True
        )
        objects = OBJECT.findall(res.stdout) if res.returncode == 0 else []
        if not objects:
            print(f"FAILED {src}: {res.stderr.strip()[:2000]}")
            failed += 1
            continue
        ptx = os.path.join(out, name + ".ptx")
        with open(ptx, "w") as f:
            f.write(unescape(objects[0][1]))
        asm = subprocess.run(
            [PTXAS, "-arch=sm_90a", "-v", ptx, "-o", os.path.join(out, name + ".cubin")],
            capture_output=True,
            text=True,
        )
        with open(os.path.join(out, name + ".ptxas.txt"), "w") as f:
            f.write(asm.stderr)
        print(("ok     " if asm.returncode == 0 else "FAILED ") + name)
        failed += asm.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
