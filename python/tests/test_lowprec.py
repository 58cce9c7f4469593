"""Low-precision expert weights from Python: the MoeConfig weight formats
and the checkpoint presets build, their argument types are the formats'
(f8E4M3FN / i8 weights, f32 / f8E8M0FNU scales), and a small layer of each
runs on the CPU JIT and matches the differential tester's independent
float64 reference (test/Differential/reference.py, through helpers) on
fresh random data, within its tolerance model."""

import numpy as np
import pytest

moe_mlir = pytest.importorskip("moe_mlir")
ml_dtypes = pytest.importorskip("ml_dtypes")

from helpers import R, assert_close, reference_ffn_attrs


def test_preset_types():
    P = moe_mlir.PRESETS
    up, down = P["deepseek-v3-fp8"].input_types(8)[2:4]
    assert (list(up.shape), up.dtype) == ([256, 4096, 7168], "f8E4M3FN")
    assert (list(down.shape), down.dtype) == ([256, 7168, 2048], "f8E4M3FN")
    scales = P["deepseek-v3-fp8"].input_types(8)[-2:]
    assert [(list(t.shape), t.dtype) for t in scales] == [
        ([256, 32, 56], "f32"),
        ([256, 56, 16], "f32"),
    ]
    assert P["deepseek-v3.1-fp8"].scale_fmt == "ue8m0"
    gpt = P["gpt-oss-120b-mxfp4"].input_types(None)
    assert [(list(t.shape), t.dtype) for t in gpt[2:4]] == [
        ([128, 5760, 1440], "i8"),
        ([128, 2880, 1440], "i8"),
    ]
    assert [(list(t.shape), t.dtype) for t in gpt[-2:]] == [
        ([128, 5760, 90], "f8E8M0FNU"),
        ([128, 2880, 90], "f8E8M0FNU"),
    ]
    with pytest.raises(ValueError, match="transpose_weights"):
        P["gpt-oss-120b"].replace(weight_format="mxfp4").input_types(4)


def test_presets_build_and_verify():
    for name in ("deepseek-v3-fp8", "deepseek-v3.1-fp8", "qwen3-30b-a3b-fp8", "gpt-oss-120b-mxfp4"):
        text = str(moe_mlir.ffn_from_config(name, T=None))
        assert "weight_format = #moe.weight_format<" in text, name
        assert "scales(" in text, name


def _random_inputs(rng, types):
    arrays = []
    for t in types:
        shape = [4 if d is None else d for d in t.shape]
        if t.dtype == "f8E4M3FN":
            bits = rng.integers(0, 256, size=shape, dtype=np.uint8)
            bits[(bits & 0x7F) == 0x7F] = 0x38  # no NaN weights here
            arrays.append(bits.view(ml_dtypes.float8_e4m3fn))
        elif t.dtype == "i8":
            arrays.append(rng.integers(-128, 128, size=shape, dtype=np.int8))
        elif t.dtype == "f8E8M0FNU":
            arrays.append(
                rng.integers(118, 132, size=shape, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
            )
        elif t.dtype == "f32" and len(shape) == 3:  # fp8 block scales
            arrays.append(rng.uniform(0.001, 0.01, size=shape).astype(np.float32))
        else:
            arrays.append(rng.standard_normal(shape).astype(moe_mlir.numpy_dtype(t.dtype)))
    return arrays


@pytest.mark.parametrize(
    "name,sizes",
    [
        ("deepseek-v3-fp8", dict(hidden=200, intermediate=96, experts=16, n_group=4, topk_group=2)),
        (
            "deepseek-v3.1-fp8",
            dict(hidden=256, intermediate=64, experts=8, n_group=1, topk_group=1),
        ),
        ("gpt-oss-120b-mxfp4", dict(hidden=64, intermediate=96, experts=8)),
    ],
)
def test_small_layer_matches_reference(name, sizes):
    cfg = moe_mlir.PRESETS[name].replace(**sizes)
    cpu = moe_mlir.ffn_from_config(cfg, T=None, dtype="f32").compile_cpu()
    rng = np.random.default_rng(7)
    args = _random_inputs(rng, cfg.input_types(None, "f32"))
    got = cpu.call("ffn", *args)
    # The reference decodes the formats from their bytes.
    as_bytes = [a.view(np.uint8) if a.dtype.itemsize == 1 else a for a in args]
    x, logits, w_up, w_down = as_bytes[:4]
    rest = list(as_bytes[4:])
    kw = {}
    if cfg.routing_bias:
        kw["bias"] = rest.pop(0)
    if cfg.expert_bias:
        kw.update(w_up_bias=rest.pop(0), w_down_bias=rest.pop(0))
    kw.update(w_up_scale=rest.pop(0), w_down_scale=rest.pop(0))
    want, scale, defined = R.ffn(
        x, logits, w_up, w_down, "f32", cfg.top_k, cfg.scoring, **reference_ffn_attrs(cfg), **kw
    )
    assert_close(got, want, "f32", scale, defined[:, None])
