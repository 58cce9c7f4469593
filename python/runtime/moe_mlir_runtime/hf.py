# ===- hf.py - Hugging Face MoE blocks, the runtime's side ----------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""The runtime's side of the Hugging Face drop-in (`moe_mlir.hf` is the
compiler's): what a transformers 5.x MoE block is (`block_signature`, read
from the block alone: class, sizes, routing attributes, dtype), the
replacement forward on the block's own parameters (`patch_blocks`), and the
table of prebuilt libraries by signature in a cache folder, so that a GPU
machine with only this package patches a model from a cache built elsewhere:

    # where the compiler is:  moe_mlir.hf.patch_moe_blocks(model, cache_dir=D)
    #                         (or moe_mlir.hf.prebuild(model, D))
    # on the GPU box:         moe_mlir_runtime.hf.patch_prebuilt(model, D)

Blocks: `MixtralSparseMoeBlock`, `Qwen3MoeSparseMoeBlock`, `DeepseekV3MoE`
(routed experts; the shared expert stays in torch), `GptOssMLP` (returns
(hidden states, None): no router scores).
"""

import json
import os
import types

#: Block class name -> router attribute.
ROUTERS = {
    "MixtralSparseMoeBlock": "gate",
    "Qwen3MoeSparseMoeBlock": "gate",
    "DeepseekV3MoE": "gate",
    "GptOssMLP": "router",
}
#: Blocks whose experts are [E, H, 2I] / [E, I, H] (the others: [E, 2I, H] /
#: [E, H, I], nn.Linear's layout).
_MN_MAJOR = ("GptOssMLP",)
TABLE = "hf-blocks.json"
_DTYPES = {"torch.float32": "f32", "torch.bfloat16": "bf16", "torch.float16": "f16"}


def supported(block):
    return type(block).__name__ in ROUTERS


def block_signature(block):
    """What determines a block's compiled layer, read from the block: a
    dict (class, hidden, intermediate, experts, top_k, routing attributes,
    dtype). TypeError for an unsupported block."""
    kind = type(block).__name__
    if kind not in ROUTERS:
        raise TypeError(
            "%s is not a supported MoE block (supported: %s)" % (kind, ", ".join(sorted(ROUTERS)))
        )
    router = getattr(block, ROUTERS[kind])
    ex = block.experts
    E, H = router.weight.shape
    I = ex.down_proj.shape[1] if kind in _MN_MAJOR else ex.down_proj.shape[2]
    dtype = str(ex.gate_up_proj.dtype)
    if dtype not in _DTYPES:
        raise TypeError("%s: expert weights of dtype %s are not supported" % (kind, dtype))
    sig = dict(
        block=kind,
        hidden=int(H),
        intermediate=int(I),
        experts=int(E),
        top_k=int(router.top_k),
        dtype=_DTYPES[dtype],
    )
    if kind == "Qwen3MoeSparseMoeBlock":
        sig.update(normalize=bool(router.norm_topk_prob))
    if kind == "DeepseekV3MoE":
        sig.update(
            n_group=int(router.num_group),
            topk_group=int(router.topk_group),
            scaling=float(router.routed_scaling_factor),
            normalize=bool(router.norm_topk_prob),
        )
    if kind == "GptOssMLP":
        sig.update(alpha=float(ex.alpha), limit=float(ex.limit))
    return sig


def signature_text(sig):
    return json.dumps(sig, sort_keys=True)


def router_logits(block, x):
    """The router's logits of the token rows `x` (its linear layer, in
    torch): the compiled layer's input."""
    import torch.nn.functional as F

    kind = type(block).__name__
    if kind == "DeepseekV3MoE":  # its router runs in f32
        return F.linear(x.float(), block.gate.weight.float())
    if kind == "GptOssMLP":
        return F.linear(x, block.router.weight, block.router.bias)
    return F.linear(x, block.gate.weight)


def operands(block):
    """The block's own tensors the layer reads after x and the logits (the
    very parameter objects: no copies)."""
    ex = block.experts
    ws = [ex.gate_up_proj, ex.down_proj]
    if type(block).__name__ == "DeepseekV3MoE":
        # f32 (the layer's routing bias type): a model cast to bf16 casts
        # this buffer too, and its router adds it to f32 scores (exact).
        ws.append(block.gate.e_score_correction_bias.float())
    if hasattr(ex, "gate_up_proj_bias"):
        ws += [ex.gate_up_proj_bias, ex.down_proj_bias]
    return ws


def patch_blocks(model, layer_for):
    """Replaces the forward of every supported block of `model` with the
    layer `layer_for(block, signature)` returns (a callable of x, logits and
    the operands); returns the patched module names."""
    patched = []
    for name, block in model.named_modules():
        if not supported(block) or hasattr(block, "_moe_mlir_forward"):
            continue
        layer = layer_for(block, block_signature(block))
        kind = type(block).__name__

        def forward(self, hidden_states, _layer=layer, _kind=kind):
            shape = hidden_states.shape
            x = hidden_states.reshape(-1, shape[-1])
            if not x.is_contiguous():
                x = x.contiguous()
            y = _layer(x, router_logits(self, x).contiguous(), *operands(self))
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


def unpatch_blocks(model):
    """Restores the original forward of every patched block; returns their
    names."""
    names = []
    for name, block in model.named_modules():
        if hasattr(block, "_moe_mlir_forward"):
            block.forward = block._moe_mlir_forward
            del block._moe_mlir_forward
            names.append(name)
    return names


def read_table(cache_dir=None):
    from .cache import cache_root

    try:
        with open(os.path.join(cache_root(cache_dir), TABLE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def record(sig, skey, cache_dir=None):
    """Adds signature -> source key to the cache folder's table (atomic
    replace)."""
    from .cache import cache_root

    root = cache_root(cache_dir)
    os.makedirs(root, exist_ok=True)
    table = read_table(cache_dir)
    table[signature_text(sig)] = skey
    tmp = os.path.join(root, ".%s.%d" % (TABLE, os.getpid()))
    with open(tmp, "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(root, TABLE))


def patch_prebuilt(model, cache_dir=None):
    """patch_blocks with the libraries a compiler put in the cache folder
    (moe_mlir.hf.patch_moe_blocks / prebuild with the same cache_dir): no
    compiler needed. ManifestError when a block's library is missing."""
    from .artifact import load
    from .cache import find_cached
    from .errors import ManifestError
    from .torch_ops import torch_op

    table = read_table(cache_dir)
    ops = {}

    def layer_for(block, sig):
        text = signature_text(sig)
        if text not in ops:
            skey = table.get(text)
            library = find_cached(skey, cache_dir) if skey else None
            if library is None:
                raise ManifestError(
                    "no prebuilt library for the block %s in the cache %s (build it with "
                    "moe_mlir.hf.prebuild(model, cache_dir) where the compiler is)"
                    % (text, cache_dir)
                )
            ops[text] = torch_op(load(library), "ffn")
        return ops[text]

    return patch_blocks(model, layer_for)
