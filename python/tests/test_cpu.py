"""compile_cpu / CpuModule.call: argument conversion and checks, dynamic T,
results that own their buffers, scalar arguments."""

import gc

import ml_dtypes
import numpy as np
import pytest

from moe_mlir import FunctionBuilder, MLIRError, Module, TensorType

TOPK = """
func.func @topk(%x: tensor<?x8xbf16>) -> (tensor<?x2xbf16>, tensor<?x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<?x8xbf16> -> tensor<?x2xbf16>, tensor<?x2xi32>
  return %v, %i : tensor<?x2xbf16>, tensor<?x2xi32>
}
func.func private @helper(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %v, %i = moe.topk %x k = 1 : tensor<4x8xf32> -> tensor<4x1xf32>, tensor<4x1xi32>
  return %v : tensor<4x1xf32>
}
"""


@pytest.fixture(scope="module")
def topk_cpu():
    return Module.parse(TOPK).compile_cpu()


def test_functions(topk_cpu):
    assert list(topk_cpu.functions) == ["topk"]  # public functions only
    ft = topk_cpu.functions["topk"]
    assert ft.inputs == (TensorType([None, 8], "bf16"),)
    assert ft.results == (TensorType([None, 2], "bf16"), TensorType([None, 2], "i32"))


@pytest.mark.parametrize("T", [0, 1, 5, 300])
def test_dynamic_T_and_bf16(topk_cpu, T):
    x = np.arange(T * 8, dtype=np.float32).reshape(T, 8)[:, ::-1]
    v, i = topk_cpu.call("topk", x.astype(ml_dtypes.bfloat16))
    assert v.dtype == ml_dtypes.bfloat16 and i.dtype == np.int32
    assert v.shape == (T, 2) and i.shape == (T, 2)
    np.testing.assert_array_equal(i, np.tile([0, 1], (T, 1)))
    np.testing.assert_array_equal(
        v.astype(np.float32), x[:, :2].astype(ml_dtypes.bfloat16).astype(np.float32)
    )


def test_argument_conversion(topk_cpu):
    # float64 / float32 data and lists are converted to bf16, a
    # non-contiguous view is copied.
    x = np.random.default_rng(0).normal(size=(3, 16))
    v, i = topk_cpu.call("topk", x[:, ::2])
    want = np.argsort(
        -x[:, ::2].astype(ml_dtypes.bfloat16).astype(np.float32), axis=1, kind="stable"
    )[:, :2]
    np.testing.assert_array_equal(i, want)
    v2, i2 = topk_cpu.call("topk", x[:, ::2].tolist())
    np.testing.assert_array_equal(i2, i)


def test_argument_errors(topk_cpu):
    with pytest.raises(KeyError, match="no public function 'helper'"):
        topk_cpu.call("helper", np.zeros((4, 8)))
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        topk_cpu.call("topk", np.zeros((2, 8)), np.zeros((2, 8)))
    with pytest.raises(ValueError, match="dimension 1 is 7"):
        topk_cpu.call("topk", np.zeros((2, 7)))
    with pytest.raises(ValueError, match="rank-2"):
        topk_cpu.call("topk", np.zeros(8))
    with pytest.raises(TypeError, match="expected bf16 data"):
        topk_cpu.call("topk", np.array([["a"] * 8]))


def test_results_own_their_buffers(topk_cpu):
    x = np.ones((64, 8), dtype=ml_dtypes.bfloat16)
    v, i = topk_cpu.call("topk", x)
    views = [v[1:], i.T]
    del v, i
    gc.collect()
    assert views[0].shape == (63, 2) and float(views[0][0, 0]) == 1.0
    np.testing.assert_array_equal(views[1][:, 0], [0, 1])
    # Repeated calls do not accumulate memory (each result frees its buffer).
    for _ in range(200):
        topk_cpu.call("topk", x)


def test_scalar_arguments_and_no_results():
    m = Module.parse("""
func.func @scale(%a: tensor<3xf32>, %s: f32, %n: i32) -> tensor<3xf32> {
  %e = tensor.empty() : tensor<3xf32>
  %f = arith.sitofp %n : i32 to f32
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<3xf32>) outs(%e : tensor<3xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %s : f32
    %z = arith.addf %y, %f : f32
    linalg.yield %z : f32
  } -> tensor<3xf32>
  return %r : tensor<3xf32>
}
func.func @nothing(%a: tensor<3xf32>) {
  return
}
""")
    cpu = m.compile_cpu(opt_level=0)
    np.testing.assert_allclose(cpu.call("scale", [1, 2, 3], 2.5, 10), [12.5, 15.0, 17.5])
    assert cpu.call("nothing", [1, 2, 3]) is None


def test_compile_with_pre_pipeline(rng):
    m = Module()
    with FunctionBuilder(m, "route", [TensorType([None, 8], "f32")]) as f:
        f.ret(*f.route(f.args[0], k=2, scoring="softmax", normalize=True))
    logits = rng.normal(size=(6, 8)).astype(np.float32)
    plain = m.compile_cpu().call("route", logits)
    fused = m.compile_cpu(pipeline="moe-fuse").call("route", logits)
    np.testing.assert_array_equal(plain[1], fused[1])
    np.testing.assert_allclose(plain[0], fused[0], rtol=1e-6)
    assert "moe.route " in str(m)  # compile_cpu works on a copy


# Regression: ownership-based deallocation inserts a bufferization.clone
# when a function returns a buffer it does not own; the pipeline lowers it.
def test_returning_an_argument():
    m = Module.parse("""func.func @id(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  return %a : tensor<?x4xf32>
}""")
    a = np.ones((2, 4), dtype=np.float32)
    out = m.compile_cpu().call("id", a)
    np.testing.assert_array_equal(out, a)
    assert not np.shares_memory(out, a)
