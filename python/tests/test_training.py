"""moe_mlir.training: the ffn_train / ffn_grad module of a config, run on the
CPU: ffn_train's output is the layer's (ffn_from_config), and ffn_grad's
gradients are the layer's (central differences of the f32 layer)."""

import numpy as np
import pytest

from moe_mlir import PRESETS, MLIRError, ffn_from_config, training_from_config

SMALL = dict(hidden=16, intermediate=8, experts=4, top_k=2)
CONFIGS = {
    "softmax": PRESETS["qwen3-30b-a3b"].replace(**SMALL),
    # sigmoid, groups, routing bias, scaling
    "deepseek": PRESETS["deepseek-v3"].replace(
        hidden=16, intermediate=8, experts=8, top_k=2, n_group=4, topk_group=2
    ),
    # clamped interleaved SwiGLU, expert biases
    "gpt-oss": PRESETS["gpt-oss-120b"].replace(**SMALL),
}


def inputs(config, T, rng):
    H, I, E = config.hidden, config.intermediate, config.experts
    args = []
    for t in config.input_types(T, "f32"):
        a = rng.standard_normal([d for d in t.shape]).astype(np.float32)
        args.append(a * (0.5 if len(t.shape) == 3 else 1.0))
    if config.routing_bias:
        args[4] = (0.1 * rng.standard_normal(E)).astype(np.float32)
    del H, I
    return args


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_train_and_grad(name):
    config = CONFIGS[name]
    rng = np.random.default_rng(7)
    T = 5
    args = inputs(config, T, rng)
    jit = training_from_config(config, dtype="f32").compile_cpu()
    layer = ffn_from_config(config, dtype="f32").compile_cpu()
    y, h, w, ids = jit.call("ffn_train", *args)
    assert h.shape == (T * config.top_k, 2 * config.intermediate)
    assert w.shape == ids.shape == (T, config.top_k) and ids.dtype == np.int32
    np.testing.assert_array_equal(y, layer.call("ffn", *args))
    dy = rng.standard_normal(y.shape).astype(np.float32)
    grads = jit.call("ffn_grad", dy, *args, h, w, ids)
    n_params = 4 + (2 if config.expert_bias else 0)
    assert len(grads) == n_params

    def loss(a):
        return float(np.sum(dy.astype(np.float64) * layer.call("ffn", *a)))

    # Differentiable operands: x, logits, w_up, w_down (and the expert biases,
    # the last two inputs); a few coordinates each.
    slots = [0, 1, 2, 3] + ([len(args) - 2, len(args) - 1] if config.expert_bias else [])
    for g, slot in zip(grads, slots):
        flat = args[slot].reshape(-1)
        for i in rng.choice(flat.size, size=min(6, flat.size), replace=False):
            eps = 1e-2
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[slot].reshape(-1)[i] += eps
            minus[slot].reshape(-1)[i] -= eps
            fd = (loss(plus) - loss(minus)) / (2 * eps)
            got = float(g.reshape(-1)[i])
            assert abs(got - fd) <= 2e-2 * max(1.0, abs(fd)), (name, slot, i, got, fd)


def test_quantized_weights_rejected():
    cfg = PRESETS["gpt-oss-120b-mxfp4"].replace(**SMALL)
    with pytest.raises(ValueError, match="plain weights"):
        training_from_config(cfg)


def test_verifier_errors_surface():
    bad = CONFIGS["softmax"].replace(top_k=9)
    with pytest.raises(MLIRError):
        training_from_config(bad)


def test_builder_checks():
    """FunctionBuilder.ffn_train / ffn_grad take ffn's keywords only, and
    ffn_grad's saved tensors are (h, weights, indices)."""
    from moe_mlir import BuildError, FunctionBuilder, Module

    config = CONFIGS["softmax"]
    attrs = config.ffn_attributes()
    with pytest.raises(TypeError, match="unexpected keyword"):
        with FunctionBuilder(Module(), "f", config.input_types(None, "f32")) as f:
            f.ffn_train(*f.args, **attrs, bogus=1)
    with pytest.raises(BuildError, match="saved tensors"):
        with FunctionBuilder(Module(), "g", config.input_types(None, "f32")) as f:
            f.ffn_grad(f.args[0], *f.args, saved=f.args[:2], **attrs)


def test_weight_grads_in_weights_type():
    """weight_grads="weights": the weight gradients in the weights' type
    (bf16), each the f32 module's sum rounded once; the rest unchanged."""
    import ml_dtypes

    config = CONFIGS["softmax"]
    rng = np.random.default_rng(11)
    T = 6
    args = [a.astype(ml_dtypes.bfloat16) for a in inputs(config, T, rng)]
    ref = training_from_config(config, dtype="bf16").compile_cpu()
    half = training_from_config(config, dtype="bf16", weight_grads="weights").compile_cpu()
    y, h, w, ids = ref.call("ffn_train", *args)
    dy = rng.standard_normal(y.shape).astype(ml_dtypes.bfloat16)
    want = ref.call("ffn_grad", dy, *args, h, w, ids)
    got = half.call("ffn_grad", dy, *args, h, w, ids)
    for i in (0, 1):
        np.testing.assert_array_equal(got[i], want[i])
    for i in (2, 3):
        assert want[i].dtype == np.float32 and got[i].dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(got[i], want[i].astype(ml_dtypes.bfloat16))
    from moe_mlir import BuildError

    with pytest.raises(BuildError, match="weight_grads must be"):
        training_from_config(config, weight_grads="bf16")
