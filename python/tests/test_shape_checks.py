"""Run-time shape checks of the CPU JIT (moe-shape-checks, report mode): the
dynamic sizes that must agree are checked before any work, and a mismatch is
a ValueError naming the operands and sizes; nothing is returned."""

import numpy as np
import pytest

from moe_mlir import Module

FFN = """
func.func @ffn(%x: tensor<?x16xf32>, %logits: tensor<?x4xf32>,
               %w_up: tensor<4x16x32xf32>, %w_down: tensor<4x16x16xf32>)
    -> tensor<?x16xf32> {
  %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
      activation = silu layout = concat {normalize = true}
      : tensor<?x16xf32>, tensor<?x4xf32>, tensor<4x16x32xf32>,
        tensor<4x16x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
"""


@pytest.fixture(scope="module", params=["", "moe-decompose,moe-fuse"])
def ffn_cpu(request):
    return Module.parse(FFN, name="layer.mlir").compile_cpu(pipeline=request.param)


def _inputs(rng, tx, tl):
    x = rng.normal(size=(tx, 16)).astype(np.float32)
    logits = rng.normal(size=(tl, 4)).astype(np.float32)
    w_up = rng.normal(size=(4, 16, 32)).astype(np.float32) * 0.1
    w_down = rng.normal(size=(4, 16, 16)).astype(np.float32) * 0.1
    return x, logits, w_up, w_down


@pytest.mark.parametrize("tx, tl", [(5, 4), (2, 5), (5, 1000)])
def test_mismatched_rows_raise(ffn_cpu, tx, tl):
    # The three cases: before the checks each returned a silently
    # wrong (4-, 5- or 1000-row) output.
    rng = np.random.default_rng(tx * 1000 + tl)
    with pytest.raises(ValueError) as info:
        ffn_cpu.call("ffn", *_inputs(rng, tx, tl))
    message = str(info.value)
    assert "@ffn" in message
    assert "is %d" % tl in message and "is %d" % tx in message
    assert "layer.mlir:" in message  # located at the op


def test_module_usable_after_a_failed_check(ffn_cpu):
    rng = np.random.default_rng(7)
    with pytest.raises(ValueError):
        ffn_cpu.call("ffn", *_inputs(rng, 3, 4))
    for t in (0, 1, 6):
        (y,) = [ffn_cpu.call("ffn", *_inputs(rng, t, t))]
        assert y.shape == (t, 16) and np.isfinite(y).all()
