"""Every failure raises MLIRError carrying the MLIR diagnostics with their
locations (builder misuse: BuildError, also a ValueError)."""

import os

import pytest

from moe_mlir import BuildError, FunctionBuilder, MLIRError, Module, TensorType

HERE = os.path.basename(__file__)


def open_builder(shape=(None, 8), dtype="f32"):
    m = Module()
    return m, FunctionBuilder(m, "f", [TensorType(list(shape), dtype)])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda f, x: f.topk(x, k=9), "expected k in [1, E = 8], got 9"),
        (lambda f, x: f.topk(x, k=0), "expected k in [1, E = 8], got 0"),
        (
            lambda f, x: f.route(x, k=2, scoring="softmax", n_group=3),
            "expected E = 8 to be divisible by n_group = 3",
        ),
        (
            lambda f, x: f.route(x, k=5, scoring="sigmoid", n_group=4, topk_group=2),
            "expected k in [1, topk_group * E / n_group = 4], got 5",
        ),
        (
            lambda f, x: f.route(x, k=2, scoring="softmax", scaling=float("inf")),
            "expected a finite scaling",
        ),
        (
            lambda f, x: f.glu(x, activation="silu", layout="concat", limit=-1.0),
            "expected limit to be finite and > 0",
        ),
        (
            lambda f, x: f.cumsum(x, num_experts=4),
            "operand #0 must be 2D tensor of 32-bit signless integer values",
        ),
    ],
)
def test_invalid_attribute_or_operand(call, message):
    m, f = open_builder()
    x = f.args[0]
    with pytest.raises(BuildError) as info:
        call(f, x)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, MLIRError)
    assert message in str(err)
    # Located at the line of this test that called the builder.
    assert len(err.diagnostics) == 1
    assert HERE in err.diagnostics[0] and ": error: " in err.diagnostics[0]
    # The invalid op was not kept: the function can still be finished.
    f.ret(x)
    m.verify()


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(scoring="bogus"), "invalid scoring 'bogus' (expected one of softmax, sigmoid)"),
        (dict(scoring="softmax", group_score="top3"), "invalid group_score 'top3'"),
        (dict(scoring="softmax", weights_dtype="f8"), "unknown element type 'f8'"),
    ],
)
def test_invalid_enum_keywords(kw, message):
    m, f = open_builder()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        f.route(f.args[0], k=2, **kw)
    f.abandon()


def test_glu_enum_keywords():
    m, f = open_builder()
    with pytest.raises(BuildError, match="invalid activation 'relu'"):
        f.glu(f.args[0], activation="relu", layout="concat")
    with pytest.raises(BuildError, match="invalid layout 'split'"):
        f.glu(f.args[0], activation="silu", layout="split")


def test_ffn_shape_mismatch_is_located():
    m = Module()
    with pytest.raises(BuildError) as info:
        with FunctionBuilder(
            m,
            "f",
            [
                TensorType([None, 32], "f32"),
                TensorType([None, 8], "f32"),
                TensorType([8, 32, 128], "f32"),
                TensorType([8, 64, 16], "f32"),
            ],
        ) as f:
            f.ret(f.ffn(*f.args, k=2, scoring="softmax", activation="silu", layout="concat"))
    assert "'moe.ffn' op" in str(info.value) and HERE in str(info.value)
    assert m.functions == {}


def test_parse_errors():
    with pytest.raises(MLIRError) as info:
        Module.parse("func.func @f( {", name="broken.mlir")
    assert "failed to parse" in info.value.summary
    assert info.value.diagnostics[0].startswith("broken.mlir:1:")
    # Syntactically fine, but the verifier rejects it.
    bad = """func.func @f(%a: tensor<4x8xf32>) -> tensor<4x9xf32> {
  %v, %i = moe.topk %a k = 9 : tensor<4x8xf32> -> tensor<4x9xf32>, tensor<4x9xi32>
  return %v : tensor<4x9xf32>
}"""
    with pytest.raises(
        MLIRError, match=r"bad.mlir:2:\d+: error: 'moe.topk' op expected k in \[1, E = 8\], got 9"
    ):
        Module.parse(bad, name="bad.mlir")


def test_invalid_generic_form():
    text = """func.func @f(%a: tensor<4x8xf32>) -> tensor<4x2xf32> {
  %v, %i = "moe.topk"(%a) <{k = 2 : i32}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return %v : tensor<4x2xf32>
}"""
    with pytest.raises(MLIRError, match="k"):
        Module.parse(text)


def test_bad_pipelines():
    m = Module.parse("module {}")
    with pytest.raises(MLIRError) as info:
        m.run_pipeline("moe-decompose,moe-bogus")
    assert "'moe-bogus' does not refer to a registered pass or pass pipeline" in str(info.value)
    with pytest.raises(MLIRError, match="moe-lower-to-cpu"):
        m.run_pipeline("moe-lower-to-cpu{bogus=1}")
    with pytest.raises(MLIRError):
        m.run_pipeline("moe-decompose(")


def test_failing_pipeline_leaves_module_unchanged():
    # The device-memory pass rejects mutable host globals used outside
    # kernels (before anything needs the CUDA toolkit); constants are fine.
    m = Module.parse(
        """memref.global "private" @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @f() -> memref<4xf32> {
  %g = memref.get_global @table : memref<4xf32>
  return %g : memref<4xf32>
}""",
        name="global.mlir",
    )
    before = str(m)
    with pytest.raises(MLIRError) as info:
        m.run_pipeline("moe-lower-to-nvvm")
    assert info.value.summary == "pass pipeline 'moe-lower-to-nvvm' failed"
    assert info.value.diagnostics[0].startswith("global.mlir:3:")
    assert "host global 'table'" in info.value.diagnostics[0]
    assert str(m) == before


def test_constants_lower_to_nvvm():
    # A tensor constant read by the layer is a device buffer of the library.
    m = Module.parse(
        """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = arith.addf %a, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    )
    text = str(m.run_pipeline("moe-lower-to-nvvm{format=llvm}"))
    assert "llvm.call @moeRuntimeUploadConstant" in text
    assert "llvm.mlir.global_ctors" in text


def test_unregistered_op():
    text = """func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "test.unregistered"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}"""
    with pytest.raises(MLIRError, match="unregistered"):
        Module.parse(text)


def test_translation_needs_llvm_dialect():
    m = Module.parse(
        """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}""",
        name="t.mlir",
    )
    with pytest.raises(MLIRError) as info:
        m.translate_to_llvm_ir()
    assert "t.mlir:1:1: error:" in str(info.value)
    with pytest.raises(MLIRError):
        m.emit_object("/nonexistent/dir/x.o")


def test_compile_errors():
    m = Module.parse("module {}")
    with pytest.raises(MLIRError, match="opt_level"):
        m.compile_cpu(opt_level=7)
    with pytest.raises(MLIRError, match="does not refer to a registered pass"):
        m.compile_cpu(pipeline="nope")
