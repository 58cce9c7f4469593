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
original back. The block-level machinery (signature, forward, the table of
prebuilt libraries) is the runtime's (`moe_mlir_runtime.hf`), so a GPU
machine without the compiler patches a model from a cache folder this side
filled (`prebuild`, then `moe_mlir_runtime.hf.patch_prebuilt`).

backend "cuda": the layer is compiled once per distinct block signature
with `moe_mlir.gpu.compile_cached` (the on-disk cache, which also records
signature -> library in its table) and called as a torch custom op
(`moe_mlir_runtime.torch_op`: torch.compile and CUDA graphs see one op).
backend "cpu": the CPU JIT on numpy copies of the tensors (for testing
without a GPU).

gpt-oss's block returns (hidden states, router scores); the patched one
returns (hidden states, None): router outputs for auxiliary losses are not
produced (training through the patched block is not supported).
"""

from .presets import PRESETS
from .runtime import hf as _rhf

#: Block class name -> preset.
PRESET_OF = {
    "MixtralSparseMoeBlock": "mixtral-8x7b",
    "Qwen3MoeSparseMoeBlock": "qwen3-30b-a3b",
    "DeepseekV3MoE": "deepseek-v3",
    "GptOssMLP": "gpt-oss-120b",
}


def config_of_signature(sig):
    """The MoeConfig of a block signature (moe_mlir_runtime.hf)."""
    changes = {k: v for k, v in sig.items() if k not in ("block", "dtype")}
    return PRESETS[PRESET_OF[sig["block"]]].replace(**changes)


def moe_config_of(block):
    """The MoeConfig of a supported Hugging Face MoE block."""
    return config_of_signature(_rhf.block_signature(block))


def _cuda_layer(sig, cache_dir, options):
    from . import gpu
    from .presets import ffn_from_config
    from .runtime import load, torch_op

    module = ffn_from_config(config_of_signature(sig), T=None, dtype=sig["dtype"])
    skey = gpu.cache_key(module, options=options)
    lib = gpu.compile_cached(
        module, options=options, cache_dir=cache_dir, name="hf_%s_%s" % (skey[:16], sig["dtype"])
    )
    _rhf.record(sig, skey, cache_dir)
    return lambda: torch_op(load(lib), "ffn")


def _cpu_layer(sig):
    import numpy as np
    import torch

    from .cpu import numpy_dtype
    from .presets import ffn_from_config

    jit = ffn_from_config(config_of_signature(sig), T=None, dtype=sig["dtype"]).compile_cpu()
    bf16 = sig["dtype"] == "bf16"

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

    return layer


def _layers(backend, cache_dir, options, load=True):
    if backend not in ("cuda", "cpu"):
        raise ValueError("backend must be 'cuda' or 'cpu', got %r" % (backend,))
    made = {}

    def layer_for(block, sig):
        text = _rhf.signature_text(sig)
        if text not in made:
            if backend == "cpu":
                made[text] = _cpu_layer(sig)
            else:
                make = _cuda_layer(sig, cache_dir, options)
                made[text] = make() if load else None
        return made[text]

    return layer_for


def patch_moe_blocks(model, backend="cuda", cache_dir=None, options=None):
    """Replaces the forward of every supported MoE block of `model` (see the
    module docstring); returns their module names. `options`: more
    --moe-lower-to-nvvm options (cuda). The parameters are read at each call,
    so later in-place updates (loading a checkpoint) are seen."""
    return _rhf.patch_blocks(model, _layers(backend, cache_dir, options))


def prebuild(model, cache_dir=None, options=None):
    """Compiles (into the cache folder, with its signature table) the layers
    of `model`'s MoE blocks without loading them, for
    `moe_mlir_runtime.hf.patch_prebuilt` on a GPU machine without the
    compiler. Returns the block signatures."""
    layer_for = _layers("cuda", cache_dir, options, load=False)
    sigs = {}
    for _, block in model.named_modules():
        if _rhf.supported(block):
            sig = _rhf.block_signature(block)
            layer_for(block, sig)
            sigs[_rhf.signature_text(sig)] = sig
    return list(sigs.values())


def unpatch_moe_blocks(model):
    """Restores the original forward of every patched block."""
    return _rhf.unpatch_blocks(model)
