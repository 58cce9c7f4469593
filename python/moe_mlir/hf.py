# ===- hf.py - drop-in for Hugging Face transformers MoE blocks -----------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Replaces the sparse-MoE blocks of a Hugging Face `transformers` (5.x)
model by the compiled moe-mlir layer, using the model's own parameters in
place (the fused expert tensors `experts.gate_up_proj` / `down_proj`, their
biases, the router's weight and DeepSeek-V3's `e_score_correction_bias`:
no copy, no re-layout):

    from moe_mlir.hf import patch_moe_blocks
    model = AutoModelForCausalLM.from_config(cfg).cuda().bfloat16()
    patched = patch_moe_blocks(model)        # ["model.layers.0.mlp", ...]
    model.generate(...)

Blocks: `MixtralSparseMoeBlock` (Mixtral), `Qwen3MoeSparseMoeBlock`
(Qwen3-MoE), `DeepseekV3MoE` (DeepSeek-V3: the routed experts; its shared
expert stays in torch) and `GptOssMLP` (gpt-oss, with its expert biases and
clamped SwiGLU). Each block's layer is the matching `moe_mlir.PRESETS`
entry at the block's sizes and routing attributes; the router's linear
layer stays in torch (its logits are the layer's input), everything after
it (top-k, dispatch, the expert GEMMs, combine) is the compiled layer. A
block's `forward` is replaced on the instance; `unpatch_moe_blocks` puts the
original back.

backend "cuda": the layer is compiled once per distinct configuration with
`moe_mlir.gpu.compile_cached` (the on-disk cache) and called as a torch
custom op (`moe_mlir_runtime.torch_op`: torch.compile and CUDA graphs see
one op). backend "cpu": the CPU JIT on numpy copies of the tensors (for
testing without a GPU; f32 / bf16).

gpt-oss's block returns (hidden states, router scores); the patched one
returns (hidden states, None): router outputs for auxiliary losses are not
produced (training through the patched block is not supported).
"""

import types

from .presets import PRESETS

#: Block class name -> (preset, router attribute).
FAMILIES = {
    "MixtralSparseMoeBlock": ("mixtral-8x7b", "gate"),
    "Qwen3MoeSparseMoeBlock": ("qwen3-30b-a3b", "gate"),
    "DeepseekV3MoE": ("deepseek-v3", "gate"),
    "GptOssMLP": ("gpt-oss-120b", "router"),
}

_DTYPES = {"torch.float32": "f32", "torch.bfloat16": "bf16", "torch.float16": "f16"}


def moe_config_of(block):
    """The MoeConfig of a supported Hugging Face MoE block."""
    name = type(block).__name__
    if name not in FAMILIES:
        raise TypeError(
            "%s is not a supported MoE block (supported: %s)" % (name, ", ".join(sorted(FAMILIES)))
        )
    preset, router_name = FAMILIES[name]
    router = getattr(block, router_name)
    ex = block.experts
    E, H = router.weight.shape
    base = PRESETS[preset]
    if base.transpose_weights:  # [E, 2I, H] and [E, H, I]
        I = ex.down_proj.shape[2]
    else:  # gpt-oss: [E, H, 2I] and [E, I, H]
        I = ex.down_proj.shape[1]
    changes = dict(hidden=H, intermediate=I, experts=E, top_k=router.top_k)
    if name == "Qwen3MoeSparseMoeBlock":
        changes.update(normalize=bool(router.norm_topk_prob))
    if name == "DeepseekV3MoE":
        changes.update(
            n_group=router.num_group,
            topk_group=router.topk_group,
            scaling=float(router.routed_scaling_factor),
            normalize=bool(router.norm_topk_prob),
        )
    if name == "GptOssMLP":
        changes.update(alpha=float(ex.alpha), limit=float(ex.limit))
    return base.replace(**changes)


def _router_logits(block, x):
    import torch.nn.functional as F

    name = type(block).__name__
    if name == "DeepseekV3MoE":  # its router runs in f32
        return F.linear(x.float(), block.gate.weight.float())
    if name == "GptOssMLP":
        return F.linear(x, block.router.weight, block.router.bias)
    return F.linear(x, block.gate.weight)


def _operands(block, cfg):
    ex = block.experts
    ws = [ex.gate_up_proj, ex.down_proj]
    if cfg.routing_bias:
        ws.append(block.gate.e_score_correction_bias)
    if cfg.expert_bias:
        ws += [ex.gate_up_proj_bias, ex.down_proj_bias]
    return ws


def _cuda_layer(cfg, dtype, cache_dir, options, cache):
    import moe_mlir_runtime as rt

    from . import gpu
    from .presets import ffn_from_config

    key = (cfg, dtype, "cuda")
    if key not in cache:
        module = ffn_from_config(cfg, T=None, dtype=dtype)
        stem = "hf_%s_%s" % (gpu.cache_key(module, options=options)[:16], dtype)
        lib = gpu.compile_cached(module, options=options, cache_dir=cache_dir, name=stem)
        cache[key] = rt.torch_op(rt.load(lib), "ffn")
    return cache[key]


def _cpu_layer(cfg, dtype, cache):
    import numpy as np
    import torch

    from .cpu import numpy_dtype
    from .presets import ffn_from_config

    key = (cfg, dtype, "cpu")
    if key not in cache:
        jit = ffn_from_config(cfg, T=None, dtype=dtype).compile_cpu()

        bf16 = dtype == "bf16"

        def to_numpy(t):
            t = t.detach().cpu().contiguous()
            if t.dtype == torch.bfloat16:
                return t.view(torch.int16).numpy().view(numpy_dtype("bf16"))
            return t.numpy()

        def layer(*args):
            y = np.ascontiguousarray(jit.call("ffn", *[to_numpy(a) for a in args]))
            if bf16:
                return torch.from_numpy(y.view(np.int16)).view(torch.bfloat16)
            return torch.from_numpy(y)

        cache[key] = layer
    return cache[key]


def patch_moe_blocks(model, backend="cuda", cache_dir=None, options=None):
    """Replaces the forward of every supported MoE block of `model` (see the
    module docstring); returns their module names. `options`: more
    --moe-lower-to-nvvm options (cuda). The parameters are read at each call,
    so later in-place updates (loading a checkpoint) are seen."""
    if backend not in ("cuda", "cpu"):
        raise ValueError("backend must be 'cuda' or 'cpu', got %r" % (backend,))
    layers, patched = {}, []
    for name, block in model.named_modules():
        if type(block).__name__ not in FAMILIES or hasattr(block, "_moe_mlir_forward"):
            continue
        cfg = moe_config_of(block)
        pdt = str(block.experts.gate_up_proj.dtype)
        if pdt not in _DTYPES:
            raise TypeError("%s: expert weights of dtype %s are not supported" % (name, pdt))
        dtype = _DTYPES[pdt]
        if backend == "cuda":
            layer = _cuda_layer(cfg, dtype, cache_dir, options, layers)
        else:
            layer = _cpu_layer(cfg, dtype, layers)
        kind = type(block).__name__

        def forward(self, hidden_states, _layer=layer, _cfg=cfg, _kind=kind):
            shape = hidden_states.shape
            x = hidden_states.reshape(-1, shape[-1])
            if not x.is_contiguous():
                x = x.contiguous()
            y = _layer(x, _router_logits(self, x).contiguous(), *_operands(self, _cfg))
            y = y.to(hidden_states.device).view(shape)
            if _kind == "DeepseekV3MoE":
                y = y + self.shared_experts(hidden_states)
            if _kind == "GptOssMLP":
                return y, None
            return y

        block._moe_mlir_forward = block.forward
        block.forward = types.MethodType(forward, block)
        patched.append(name)
    return patched


def unpatch_moe_blocks(model):
    """Restores the original forward of every patched block; returns their
    names."""
    names = []
    for name, block in model.named_modules():
        if hasattr(block, "_moe_mlir_forward"):
            block.forward = block._moe_mlir_forward
            del block._moe_mlir_forward
            names.append(name)
    return names
