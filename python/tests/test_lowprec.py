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


def _runtime_mxfp4():
    """python/runtime/moe_mlir_runtime/mxfp4.py (standard library + numpy)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "runtime" / "moe_mlir_runtime" / "mxfp4.py"
    spec = importlib.util.spec_from_file_location("moe_mxfp4", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mxfp4_hopper_repack_is_a_permutation():
    M = _runtime_mxfp4()
    rng = np.random.default_rng(11)
    blocks = rng.integers(0, 256, size=(3, 5, 4, 16), dtype=np.uint8)
    packed = M.repack_mxfp4_hopper(blocks, chunk=7)
    assert packed.shape == blocks.shape and packed.dtype == blocks.dtype
    assert (M.repack_mxfp4_hopper(packed, inverse=True) == blocks).all()
    # Value kk of a block, read back from its word as the op documents it.
    codes = np.stack([blocks & 15, blocks >> 4], axis=-1).reshape(3, 5, 4, 32)
    b = packed.astype(np.int64)
    for kk in range(32):
        q, p, h = (kk // 2) % 4, kk // 8, 16 * (kk % 2)
        word = sum(b[..., 4 * q + t] << (8 * t) for t in range(4))
        pos = [6 - 3 * p, 7 - 3 * p, 8 - 3 * p, 15 - 3 * p] if p < 3 else [13, 14, 10, 11]
        code = sum(((word >> (h + x)) & 1) << r for r, x in enumerate(pos))
        assert (code == codes[..., kk]).all(), kk
    with pytest.raises(ValueError, match="multiple of 16"):
        M.repack_mxfp4_hopper(np.zeros((2, 24), np.uint8))


def test_mxfp4_hopper_layer_equals_mxfp4():
    """weight_format mxfp4_hopper on repacked codes computes what mxfp4
    computes on the checkpoint's (CPU JIT, bitwise, incl. E8M0 extremes)."""
    M = _runtime_mxfp4()
    cfg = moe_mlir.PRESETS["gpt-oss-120b-mxfp4"].replace(hidden=64, intermediate=96, experts=8)
    hop = cfg.replace(weight_format="mxfp4_hopper")
    rng = np.random.default_rng(5)
    args = _random_inputs(rng, cfg.input_types(None, "f32"))
    # a few extreme scales: 0, 1, 128 and above (the kernels' two-step
    # multiply), 255 = NaN in one row
    for s in args[-2:]:
        raw = s.view(np.uint8)
        raw[0, 0, :2] = [0, 128]
        raw[0, 1, :2] = [1, 200]
        raw[1, 2, 0] = 255
    want = moe_mlir.ffn_from_config(cfg, T=None, dtype="f32").compile_cpu().call("ffn", *args)
    hargs = list(args)
    hargs[2], hargs[3] = M.repack_mxfp4_hopper(args[2]), M.repack_mxfp4_hopper(args[3])
    got = moe_mlir.ffn_from_config(hop, T=None, dtype="f32").compile_cpu().call("ffn", *hargs)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
