"""Contexts, modules, printing / parsing, pipelines and the builder's
function structure."""

import os

import pytest

import moe_mlir
from moe_mlir import BuildError, Context, FunctionBuilder, MLIRError, Module, TensorType
from helpers import REPO, round_trip

LAYER = """
func.func @layer(%x: tensor<?x32xf32>, %logits: tensor<?x8xf32>,
                 %w_up: tensor<8x32x128xf32>, %w_down: tensor<8x64x32xf32>)
    -> tensor<?x32xf32> {
  %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
      activation = silu layout = concat {normalize = true}
      : tensor<?x32xf32>, tensor<?x8xf32>, tensor<8x32x128xf32>,
        tensor<8x64x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
"""


def layer_module(context=None):
    m = Module(context)
    with FunctionBuilder(
        m,
        "layer",
        inputs=[
            TensorType([None, 32], "f32"),
            TensorType([None, 8], "f32"),
            TensorType([8, 32, 128], "f32"),
            TensorType([8, 64, 32], "f32"),
        ],
    ) as f:
        x, logits, w_up, w_down = f.args
        f.ret(
            f.ffn(
                x,
                logits,
                w_up,
                w_down,
                k=2,
                scoring="softmax",
                normalize=True,
                activation="silu",
                layout="concat",
            )
        )
    return m


def test_tensor_type():
    t = TensorType([None, 4096], "bf16")
    assert str(t) == "tensor<?x4096xbf16>"
    assert t.rank == 2 and not t.is_static
    assert TensorType((2, 3)) == TensorType([2, 3], "f32")
    with pytest.raises(ValueError):
        TensorType([-1], "f32")
    with pytest.raises(ValueError):
        TensorType([2], "f8")


def test_builder_matches_parsed_text():
    built = layer_module()
    parsed = Module.parse(LAYER)
    assert str(built) == str(parsed)
    built.verify()
    round_trip(built)


def test_parse_print_round_trip_of_repository_tests():
    path = os.path.join(REPO, "examples", "mixtral_layer.mlir")
    m = Module.parse_file(path)
    m.verify()
    round_trip(m)


def test_functions_and_values():
    m = Module()
    with FunctionBuilder(m, "f", [TensorType([None, 8], "bf16")], visibility="private") as f:
        (x,) = f.args
        assert x.type == TensorType([None, 8], "bf16")
        assert x.shape == (None, 8) and x.dtype == "bf16"
        values, indices = f.topk(x, k=2)
        assert repr(indices) == "Value(tensor<?x2xi32>)"
        f.ret(values, indices)
    assert not f.is_open
    ft = m.functions["f"]
    assert ft.visibility == "private"
    assert ft.inputs == (TensorType([None, 8], "bf16"),)
    assert ft.results == (TensorType([None, 2], "bf16"), TensorType([None, 2], "i32"))
    assert "func.func private @f" in str(m)


def test_locations_point_at_the_builder_call():
    m = layer_module()
    text = m.get_asm(debug_info=True)
    assert os.path.basename(__file__) in text
    again = Module.parse(text)
    assert again.get_asm(debug_info=True) == text


def test_run_pipeline_in_place_and_clone():
    m = layer_module()
    copy = m.clone()
    assert m.run_pipeline("moe-decompose") is m
    text = str(m)
    assert "moe.ffn" not in text and "moe.route" in text
    assert "moe.grouped_matmul" in text and "moe.combine" in text
    assert "moe.ffn" in str(copy)  # the clone is independent
    m.run_pipeline("moe-fuse")
    assert "moe.route_dispatch" in str(m) and "moe.expert_gemm" in str(m)
    # Upstream passes and the full anchored syntax work too.
    copy.run_pipeline("builtin.module(moe-decompose,canonicalize,cse)")
    copy.verify()
    # Verified once at the end instead of after every pass: the same result.
    once, each = layer_module(), layer_module()
    once.run_pipeline("moe-decompose,moe-fuse,canonicalize", verify_each=False)
    each.run_pipeline("moe-decompose,moe-fuse,canonicalize", verify_each=True)
    assert str(once) == str(each) and "moe.expert_gemm" in str(once)


def test_lower_to_cpu_and_llvm_ir(tmp_path):
    m = layer_module()
    m.run_pipeline("moe-emit-c-interface,moe-lower-to-cpu{deallocate=true}")
    assert "llvm.func @layer" in str(m)
    ir = m.translate_to_llvm_ir()
    assert "define" in ir and "_mlir_ciface_layer" in ir
    obj = tmp_path / "layer.o"
    m.emit_object(obj)
    data = obj.read_bytes()
    assert data[:4] == b"\x7fELF" and b"_mlir_ciface_layer" in data


def test_contexts():
    a, b = Context(), Context()
    assert a != b and a == a
    m = layer_module(a)
    assert m.context == a
    assert Module().context == Context.default()
    # Values of one module cannot be used in another module's function.
    m2 = Module(a)
    with FunctionBuilder(m, "g", [TensorType([4, 8], "f32")]) as f1:
        with pytest.raises(BuildError, match="another function"):
            with FunctionBuilder(m2, "h", [TensorType([4, 8], "f32")]) as f2:
                f2.topk(f1.args[0], k=1)
        f1.ret(f1.args[0])
    assert list(m2.functions) == []  # h was removed again


def test_builder_structure_errors():
    m = Module()
    with pytest.raises(BuildError, match="not terminated"):
        with FunctionBuilder(m, "f", [TensorType([4, 8], "f32")]):
            pass
    assert m.functions == {}
    # An exception inside the block removes the unfinished function.
    with pytest.raises(RuntimeError):
        with FunctionBuilder(m, "f", [TensorType([4, 8], "f32")]) as f:
            f.topk(f.args[0], k=2)
            raise RuntimeError("boom")
    assert m.functions == {}
    m.verify()
    with FunctionBuilder(m, "f", [TensorType([4, 8], "f32")]) as f:
        x = f.args[0]
        f.ret(x)
    with pytest.raises(BuildError, match="finished"):
        f.topk(x, k=1)
    with pytest.raises(BuildError, match="already has a symbol"):
        FunctionBuilder(m, "f", [])
    with pytest.raises(TypeError):
        with FunctionBuilder(m, "g", [TensorType([4, 8], "f32")]) as f:
            f.topk("not a value", k=1)


def test_module_is_locked_while_building():
    m = Module()
    f = FunctionBuilder(m, "f", [TensorType([4, 8], "f32")])
    with pytest.raises(MLIRError, match="FunctionBuilder"):
        m.run_pipeline("moe-decompose")
    with pytest.raises(MLIRError, match="FunctionBuilder"):
        m.clone()
    f.ret(f.args[0])
    m.run_pipeline("moe-decompose")
    # A builder dropped before ret() removes its function and unlocks.
    g = FunctionBuilder(m, "g", [TensorType([4, 8], "f32")])
    g.topk(g.args[0], k=2)
    del g
    assert list(m.functions) == ["f"]
    m.verify()
    m.run_pipeline("moe-decompose")


def test_package_surface():
    for name in moe_mlir.__all__:
        assert hasattr(moe_mlir, name), name
    assert issubclass(moe_mlir.BuildError, moe_mlir.MLIRError)
    assert issubclass(moe_mlir.BuildError, ValueError)
    assert issubclass(moe_mlir.MLIRError, Exception)
