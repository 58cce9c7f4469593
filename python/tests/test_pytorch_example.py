# ===- test_pytorch_example.py - docs/PyTorch.md's example runs -----------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""examples/pytorch/hf_dropin.py (the example of docs/PyTorch.md) runs and
reports the eager model's tokens, with the CPU backend (needs torch and
transformers: skipped without them)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch" / "hf_dropin.py"


def test_example_runs():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--device", "cpu"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "same tokens as the eager model: True" in proc.stdout
