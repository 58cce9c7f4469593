"""The model presets: full-size IR for each, and scaled-down layers of the
same routing / GLU configuration run on the CPU against the reference."""

import numpy as np
import pytest

from moe_mlir import PRESETS, MoeConfig, Module, TensorType, ffn_from_config
from helpers import R, assert_close, rand, reference_ffn_attrs, round_trip, to_f64

NAMES = ["mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b"]
# The same layers with low-precision checkpoint weights (test_lowprec.py).
LOWPREC = ["deepseek-v3-fp8", "deepseek-v3.1-fp8", "qwen3-30b-a3b-fp8", "gpt-oss-120b-mxfp4"]


def test_preset_table():
    assert sorted(PRESETS) == sorted(NAMES + LOWPREC)
    ds = PRESETS["deepseek-v3"]
    assert (ds.experts, ds.top_k, ds.n_group, ds.topk_group) == (256, 8, 8, 4)
    assert ds.scoring == "sigmoid" and ds.routing_bias and ds.scaling == 2.5
    assert ds.logits_dtype == "f32" and not ds.expert_bias
    oss = PRESETS["gpt-oss-120b"]
    assert (oss.layout, oss.alpha, oss.limit, oss.up_bias) == ("interleaved", 1.702, 7.0, 1.0)
    assert oss.expert_bias and oss.logits_dtype is None
    assert PRESETS["mixtral-8x7b"].replace(hidden=64).hidden == 64


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("T", [None, 16])
def test_full_size_ir(name, T):
    cfg = PRESETS[name]
    m = ffn_from_config(name, T=T)
    m.verify()
    again = round_trip(m)
    ((fname, ft),) = m.functions.items()
    assert fname == "ffn" and ft.visibility == "public"
    assert list(ft.inputs) == cfg.input_types(T, "bf16")
    assert ft.results == (TensorType([T, cfg.hidden], "bf16"),)
    H, I, E = cfg.hidden, cfg.intermediate, cfg.experts
    up = [E, 2 * I, H] if cfg.transpose_weights else [E, H, 2 * I]
    assert ft.inputs[2] == TensorType(up, "bf16")
    assert ft.inputs[1] == TensorType([T, E], cfg.logits_dtype or "bf16")
    if cfg.expert_bias:
        assert list(ft.inputs[-2:]) == [TensorType([E, 2 * I], "bf16"), TensorType([E, H], "bf16")]
    text = str(again)
    assert "moe.ffn" in text and "k = %d" % cfg.top_k in text
    # Decomposes and fuses at full size.
    m.run_pipeline("moe-decompose,moe-fuse")
    m.verify()


def small(cfg: MoeConfig) -> MoeConfig:
    """The same routing and GLU on a layer small enough to run here."""
    return cfg.replace(
        hidden=32, intermediate=16, experts=16 if cfg.n_group > 1 else 8, top_k=min(cfg.top_k, 4)
    )


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_scaled_down_layer_runs(rng, name, dtype):
    cfg = small(PRESETS[name])
    m = ffn_from_config(cfg, T=None, dtype=dtype)
    cpu = m.compile_cpu()
    T, H, I, E = 9, cfg.hidden, cfg.intermediate, cfg.experts
    x = rand(rng, (T, H), dtype)
    logits = rand(rng, (T, E), cfg.logits_dtype or dtype, 2.0)
    up_shape = (E, 2 * I, H) if cfg.transpose_weights else (E, H, 2 * I)
    down_shape = (E, H, I) if cfg.transpose_weights else (E, I, H)
    args = [x, logits, rand(rng, up_shape, dtype, H**-0.5), rand(rng, down_shape, dtype, I**-0.5)]
    bias = None
    if cfg.routing_bias:
        bias = rand(rng, (E,), "f32", 0.05)
        args.append(bias)
    expert = {}
    if cfg.expert_bias:
        expert = dict(
            w_up_bias=rand(rng, (E, 2 * I), dtype, 0.5), w_down_bias=rand(rng, (E, H), dtype, 0.5)
        )
        args += [expert["w_up_bias"], expert["w_down_bias"]]
    y = cpu.call("ffn", *args)
    assert y.shape == (T, H) and y.dtype == args[0].dtype
    want, scale, defined = R.ffn(
        *[to_f64(a) for a in args[:4]],
        dtype,
        cfg.top_k,
        cfg.scoring,
        bias=bias,
        **reference_ffn_attrs(cfg),
        **{k: to_f64(v) for k, v in expert.items()},
    )
    assert_close(y, want, dtype, scale, defined[:, None])


def test_custom_config_and_names():
    cfg = MoeConfig(
        hidden=8, intermediate=4, experts=4, top_k=1, scoring="sigmoid", normalize=False
    )
    m = ffn_from_config(cfg, T=3, dtype="f16", name="my_layer")
    assert list(m.functions) == ["my_layer"]
    assert m.functions["my_layer"].inputs[0] == TensorType([3, 8], "f16")
    with pytest.raises(KeyError, match="unknown preset"):
        ffn_from_config("llama")
    assert isinstance(m, Module)
