#!/usr/bin/env python3
# ===- ship.py - put the GPU runtime package into an artifacts folder -----=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Puts the GPU runtime (the moe-mlir-runtime package) into a folder that
goes to a GPU machine (torch, no LLVM, no internet).

    python3 python/runtime/ship.py OUT_DIR [--require-wheel]

writes

    OUT_DIR/moe_mlir_runtime/                    the package, used in place:
                                                 scripts in OUT_DIR import it
    OUT_DIR/moe_mlir_runtime-<v>-py3-none-any.whl  to install it there:
        pip install --no-deps --no-index OUT_DIR/moe_mlir_runtime-*.whl

The wheel is built offline (`pip wheel --no-deps --no-build-isolation
--no-index`, needs setuptools with wheel support: setuptools >= 70.1 or the
`wheel` package) from a temporary copy, so the source tree gets no build/ or
egg-info. Without wheel support the folder is still written and the missing
wheel reported; with --require-wheel that is an error. Standard library
only. Exit status: 0 written, 1 failed.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "moe_mlir_runtime"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def copy_package(out):
    """OUT/moe_mlir_runtime, replacing an older copy. Returns its path."""
    dst = os.path.join(out, PACKAGE)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(os.path.join(HERE, PACKAGE), dst, ignore=_IGNORE)
    return dst


def build_wheel(out):
    """Builds the wheel into `out` (older wheels of it removed). Returns
    (path or None, pip's output)."""
    for old in glob.glob(os.path.join(out, PACKAGE + "-*.whl")):
        os.remove(old)
    with tempfile.TemporaryDirectory(prefix="moe-runtime-wheel-") as tmp:
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        shutil.copy(os.path.join(HERE, "pyproject.toml"), src)
        shutil.copytree(os.path.join(HERE, PACKAGE), os.path.join(src, PACKAGE), ignore=_IGNORE)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--disable-pip-version-check",
                "-q",
                "-w",
                os.path.abspath(out),
                src,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            universal_newlines=True,
        )
    wheels = glob.glob(os.path.join(out, PACKAGE + "-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        return None, done.stdout
    return wheels[0], done.stdout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--require-wheel", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    print("ship: %s" % copy_package(args.out))
    wheel, log = build_wheel(args.out)
    if wheel:
        print("ship: %s" % wheel)
        return 0
    print(
        "ship: no wheel (pip wheel failed; the package folder is there):\n%s" % log.rstrip(),
        file=sys.stderr,
    )
    return 1 if args.require_wheel else 0


if __name__ == "__main__":
    sys.exit(main())
