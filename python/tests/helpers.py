"""Shared helpers of the moe_mlir tests (imported as `helpers`).

The numpy semantics come from test/Differential/reference.py (the
independent reference the differential tester uses); comparisons follow
its tolerance model: |got - want| <= rtol(dtype) * scale + atol(dtype),
with `want` rounded to the result's storage type.
"""

import os
import sys

import numpy as np
import moe_mlir

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "test", "Differential"))

import reference as R  # noqa: E402


def reference_ffn_attrs(cfg):
    """The routing, GLU, layout and weight-format keywords of
    reference.ffn for the layer `cfg` (a moe_mlir.MoeConfig): its
    FunctionBuilder.ffn keywords but k and scoring (reference.ffn's
    positional arguments)."""
    attrs = cfg.ffn_attributes()
    del attrs["k"], attrs["scoring"]
    return attrs


def to_f64(a):
    return np.asarray(a).astype(np.float64)


def rand(rng, shape, dtype, scale=1.0):
    """Normal values exactly representable in `dtype`, as an array of it."""
    vals = R.round_to(rng.normal(0.0, scale, size=shape), dtype)
    return vals.astype(moe_mlir.numpy_dtype(dtype))


def assert_close(got, want, dtype, scale=None, care=None, exact=False, name="result"):
    got = to_f64(got)
    want_r = R.round_to(want, dtype)
    assert got.shape == want_r.shape, "%s: shape %s, want %s" % (name, got.shape, want_r.shape)
    rtol, atol = R.TOLERANCE[dtype]
    if exact:
        tol = np.zeros_like(want_r)
    else:
        sc = np.abs(want_r) if scale is None else np.maximum(scale, np.abs(want_r))
        tol = rtol * sc + atol
    with np.errstate(invalid="ignore"):
        ok = (np.isnan(got) & np.isnan(want_r)) | (got == want_r) | (np.abs(got - want_r) <= tol)
    if care is not None:
        ok = ok | ~np.broadcast_to(care, ok.shape)
    bad = np.argwhere(~ok)
    assert not len(bad), "%s: %d mismatches; first at %s: got %r want %r" % (
        name,
        len(bad),
        tuple(bad[0]),
        got[tuple(bad[0])],
        want_r[tuple(bad[0])],
    )


def assert_equal_ints(got, want, name="result"):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (name, got.shape, want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), "%s: got %s want %s" % (
        name,
        got.tolist(),
        want.tolist(),
    )


def round_trip(module):
    """Prints and re-parses `module` (custom and generic form); both must
    give back the same text."""
    text = str(module)
    again = moe_mlir.Module.parse(text, module.context)
    assert str(again) == text
    generic = moe_mlir.Module.parse(module.get_asm(generic=True), module.context)
    assert str(generic) == text
    return again


def gpu_toolchain_or_skip():
    """Skips the calling test unless compile_gpu can run here: the runtime
    archive, the CUDA driver stub and ptxas (no GPU needed)."""
    import pytest
    from moe_mlir import gpu

    try:
        gpu.find_runtime_library()
        gpu.find_cuda_library_dir()
    except gpu.CompileError as exc:
        pytest.skip(str(exc))
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    if not os.path.exists(os.path.join(home, "bin", "ptxas")):
        pytest.skip("no ptxas under %s" % home)
