# ===- test_runtime_package.py - the GPU runtime as its own pip package ---=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""python/runtime is a pure-Python package, moe-mlir-runtime: its wheel
builds offline, installs without the network and imports with neither torch
nor LLVM nor the compiled extension (what a GPU machine has), and
moe_mlir.runtime is that same module."""

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

PY_DIR = Path(__file__).resolve().parents[1]
RUNTIME_DIR = PY_DIR / "runtime"
SHIP = RUNTIME_DIR / "ship.py"

# torch and every moe_mlir module are unimportable, as on a GPU machine
# without the compiler package (and with torch uninstalled, its worst case)
_BLOCKER = textwrap.dedent("""\
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in ("torch", "moe_mlir"):
                raise ImportError("blocked for the test: " + name)
            return None
    sys.meta_path.insert(0, Block())
    """)

_PROBE = textwrap.dedent("""\
    import json, sys
    import moe_mlir_runtime as rt
    print("file", rt.__file__)
    print("torch", rt.torch)
    m = rt.Manifest({"format": rt.MANIFEST_FORMAT, "version": rt.MANIFEST_VERSION,
                     "calling_convention": "out-params",
                     "functions": {"f": {"args": [{"name": "x", "kind": "tensor",
                                                   "dtype": "f32", "shape": [None, 4],
                                                   "symbols": ["T", None]}],
                                         "results": []}}})
    print("sig", m.functions["f"].signature())
    """)


def _probe(tmp_path, pythonpath):
    script = tmp_path / "probe.py"
    script.write_text(_BLOCKER + _PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, pythonpath)), PYTHONNOUSERSITE="1")
    # -S: no site-packages, so only PYTHONPATH can provide the package
    done = subprocess.run(
        [sys.executable, "-S", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        env=env,
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stdout
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["torch"] == "None"
    assert lines["sig"] == "f(x: f32[T, 4]) -> ()"
    return Path(lines["file"])


def _can_build_wheels():
    try:
        import setuptools
    except ImportError:
        return False
    try:
        import wheel  # noqa: F401

        return True
    except ImportError:
        major, minor = (int(p) for p in setuptools.__version__.split(".")[:2])
        return (major, minor) >= (70, 1)


def test_wheel_builds_offline_and_installs_without_llvm(tmp_path):
    if not _can_build_wheels():
        pytest.skip(
            "setuptools cannot build wheels here (needs >= 70.1 or the "
            "wheel package; .ci/setup installs it)"
        )
    out = tmp_path / "artifacts"
    done = subprocess.run(
        [sys.executable, str(SHIP), str(out), "--require-wheel"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    assert done.returncode == 0, done.stdout
    (whl,) = out.glob("moe_mlir_runtime-*-py3-none-any.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert sorted(n for n in names if not n.startswith("moe_mlir_runtime-")) == sorted(
        "moe_mlir_runtime/" + p.name for p in (RUNTIME_DIR / "moe_mlir_runtime").glob("*.py")
    )  # every module of the package, pure Python, nothing else
    meta = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith("/METADATA")))
    assert b"Name: moe-mlir-runtime" in meta and b"Requires-Dist" not in meta
    # the folder next to the artifacts, used in place
    assert _probe(tmp_path, [out]) == out / "moe_mlir_runtime" / "__init__.py"
    # the GPU machine's install: no network, no dependencies
    site = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            "--target",
            str(site),
            str(whl),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    assert done.returncode == 0, done.stdout
    assert _probe(tmp_path, [site]) == site / "moe_mlir_runtime" / "__init__.py"


def test_source_folder_on_pythonpath(tmp_path):
    path = _probe(tmp_path, [RUNTIME_DIR])
    assert path == RUNTIME_DIR / "moe_mlir_runtime" / "__init__.py"


def test_moe_mlir_runtime_is_the_package():
    import moe_mlir_runtime
    from moe_mlir import runtime
    import moe_mlir.gpu

    assert runtime is moe_mlir_runtime and moe_mlir.gpu._rt is moe_mlir_runtime
    assert runtime.__name__ == "moe_mlir_runtime"
