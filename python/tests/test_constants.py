# ===- test_constants.py - weights as module constants -------------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""A moe.ffn whose weights are constants of the module (test/GPU/cases/
ffn_const.mlir: dense hex literals and dense_resource blobs, bf16 and f32):

  * the CPU JIT runs the module as it is, unfused and fused, and matches
    the float64 reference on the same weights;
  * compile_gpu builds it into a library whose manifest has only x and
    logits as arguments and which defines the constant upload (skipped
    without the CUDA toolkit). The calls on the H200 are run_gpu_checks.py's
    const/ checks.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from moe_mlir import Module

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test" / "GPU"))
sys.path.insert(1, str(REPO / "test" / "Differential"))

import gpu_cases as G  # noqa: E402  (numpy only)
import reference as R  # noqa: E402

CASE_FILE = REPO / "test" / "GPU" / "cases" / "ffn_const.mlir"


def _as_input(arr, dtype):
    if dtype == "bf16":
        import ml_dtypes

        return np.asarray(arr, dtype=np.float32).astype(ml_dtypes.bfloat16)
    return np.asarray(arr, dtype=np.float32)


@pytest.mark.parametrize("pipeline", [None, "moe-decompose,moe-fuse"])
def test_cpu_runs_constant_weights(pipeline):
    pytest.importorskip("ml_dtypes")
    cpu = Module.parse(CASE_FILE.read_text(), name=str(CASE_FILE)).compile_cpu(pipeline=pipeline)
    for case in G.CONST_CASES:
        for T in (1, 7, 33):
            inp = G.gen_inputs(case.ref_case, T, "random")
            inp.update(case.weights())
            y = cpu.call(
                case.name,
                _as_input(inp["x"], case.F),
                _as_input(inp["logits"], case.F),
            )
            got = {"result": np.asarray(y, dtype=np.float64)}
            oc = G.check_op(case.ref_case, inp, got)
            assert oc.ok, "%s T=%d (%s): %s" % (case.name, T, pipeline, oc.detail)


def test_constants_change_the_result():
    """The weights really come from the constants: other weights, other y."""
    case = G.CONST_CASES[-1]
    inp = G.gen_inputs(case.ref_case, 5, "random")
    inp.update(case.weights())
    cpu = Module.parse(CASE_FILE.read_text()).compile_cpu()
    y = np.asarray(
        cpu.call(case.name, _as_input(inp["x"], case.F), _as_input(inp["logits"], case.F)),
        dtype=np.float64,
    )
    other = dict(inp, w_up=inp["w_up"] * 2.0)
    oc = G.check_op(case.ref_case, other, {"result": y})
    assert not oc.ok
    assert R.round_to(y, "f32").shape == (5, case.H)


def test_compile_gpu_uploads_constants(tmp_path):
    from helpers import gpu_toolchain_or_skip
    from moe_mlir import gpu

    gpu_toolchain_or_skip()
    so = tmp_path / "libconst.so"
    gpu.compile_gpu(Module.parse(CASE_FILE.read_text()), str(so))
    manifest = gpu._rt.Manifest.read(gpu._rt.manifest_path(str(so)))
    for case in G.CONST_CASES:
        spec = manifest.functions[case.name]
        assert len(spec.args) == 2, spec.signature()
    nm = shutil.which("nm") or shutil.which("llvm-nm-22") or shutil.which("llvm-nm")
    if nm:
        syms = subprocess.run(
            [nm, "-D", "--defined-only", str(so)], stdout=subprocess.PIPE, text=True
        ).stdout
        for sym in ("moeRuntimeUploadConstant", "moeRuntimeConstantUploads"):
            assert sym in syms
