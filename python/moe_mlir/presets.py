"""MoE layer configurations of public models and ``ffn_from_config``.

A :class:`MoeConfig` holds every attribute of ``moe.ffn`` plus the layer's
sizes; :func:`ffn_from_config` turns one into a module with a single public
function

    ffn(x: T x H, logits: T x E, w_up, w_down[, bias: E x f32]
        [, w_up_bias: E x 2I, w_down_bias: E x H]) -> T x H

(``w_up`` is ``E x H x 2I`` and ``w_down`` ``E x I x H``; with
``transpose_weights`` they are ``E x 2I x H`` and ``E x H x I``, the
``nn.Linear`` layout of Hugging Face checkpoints).

The presets describe the routed experts of one MoE layer. What the dialect
does not model is left out: shared experts (DeepSeek-V3, one dense FFN next
to the routed ones) and the router's own linear layer (its output are the
``logits``; gpt-oss's router bias is part of it).

Where each operand comes from in the Hugging Face ``transformers`` 5.x
modules (per MoE layer; checked against transformers 5.17 on the H200 by
test/GPU/hf_parity_check.py: same experts, bf16 within ~7e-3 and f32
within ~1e-6 of the block run in float32):

- Mixtral-8x7B (``MixtralSparseMoeBlock``): logits = ``gate(x)`` (the
  router linear); w_up = ``experts.gate_up_proj`` (E x 2I x H, gate rows
  then up rows: ``concat``; older checkpoints: ``cat(w1, w3)`` per
  expert), w_down = ``experts.down_proj`` (E x H x I; ``w2``).
- Qwen3-30B-A3B (``Qwen3MoeSparseMoeBlock``): logits = ``gate(x)``; w_up
  = ``experts.gate_up_proj`` (``cat(gate_proj, up_proj)`` per expert),
  w_down = ``experts.down_proj``; ``norm_topk_prob = true``.
- DeepSeek-V3 (``DeepseekV3MoE``, routed experts; the shared expert is not
  part of the layer): logits = the ``gate`` linear of x computed in f32
  (``logits_dtype="f32"``); bias = ``gate.e_score_correction_bias``; w_up
  = ``experts.gate_up_proj``, w_down = ``experts.down_proj``.
- gpt-oss-120b (``GptOssMLP``): logits = ``router(x)`` (its bias
  included); w_up = ``experts.gate_up_proj`` (E x H x 2I, gate and up
  interleaved), w_up_bias = ``experts.gate_up_proj_bias``; w_down =
  ``experts.down_proj`` (E x I x H), w_down_bias =
  ``experts.down_proj_bias`` (``expert_bias``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, List, Optional, Union

from .ir import (
    Activation,
    Context,
    FunctionBuilder,
    GluLayout,
    GroupScore,
    Module,
    ScaleFmt,
    Scoring,
    TensorType,
    WeightFormat,
)

__all__ = ["MoeConfig", "PRESETS", "ffn_from_config"]


@dataclass(frozen=True)
class MoeConfig:
    """Sizes and ``moe.ffn`` attributes of one MoE layer.

    ``hidden`` (H), ``intermediate`` (I, per expert), ``experts`` (E) and
    ``top_k`` (k) give the shapes; the rest are the ``moe.route`` and
    ``moe.glu`` attributes of the same names (``routing_bias`` adds the
    ``E`` f32 score-correction bias operand, ``expert_bias`` the per-expert
    matmul biases ``E x 2I`` and ``E x H``); ``logits_dtype`` is the
    router logits' element type (None: the activations').
    ``weight_format`` is how the checkpoint ships the expert weights:
    ``"plain"`` (the activations' type), ``"fp8_block"`` (e4m3 with f32
    scales per 128 x 128 block, DeepSeek-V3 / Qwen3-FP8; ``scale_fmt``
    ``"ue8m0"`` for DeepSeek-V3.1's power-of-two activation scales) or
    ``"mxfp4"`` (gpt-oss: two e2m1 a byte, E8M0 scales per 32 values) or
    ``"mxfp4_hopper"`` (the same codes repacked once by
    ``moe_mlir_runtime.mxfp4.repack_mxfp4_hopper``: faster on the Hopper
    kernels); all need ``transpose_weights`` (the checkpoints'
    ``[E, N, K]``)."""

    hidden: int
    intermediate: int
    experts: int
    top_k: int
    scoring: Scoring = "softmax"
    normalize: bool = True
    n_group: int = 1
    topk_group: int = 1
    group_score: GroupScore = "max"
    scaling: float = 1.0
    routing_bias: bool = False
    activation: Activation = "silu"
    layout: GluLayout = "concat"
    alpha: float = 1.0
    limit: Optional[float] = None
    up_bias: float = 0.0
    transpose_weights: bool = False
    expert_bias: bool = False
    logits_dtype: Optional[str] = None
    weight_format: WeightFormat = "plain"
    scale_fmt: ScaleFmt = "f32"
    name: str = ""

    def replace(self, **changes) -> "MoeConfig":
        """A copy with some fields changed (``dataclasses.replace``), e.g.
        a scaled-down layer for tests: ``cfg.replace(hidden=64)``."""
        return dataclasses.replace(self, **changes)

    def input_types(self, T: Optional[int] = None, dtype: str = "bf16") -> List[TensorType]:
        """The types of ``ffn``'s arguments for ``T`` tokens (None:
        dynamic): x, logits, w_up, w_down, with ``routing_bias`` bias, with
        ``expert_bias`` w_up_bias and w_down_bias, and with a
        low-precision ``weight_format`` w_up_scale and w_down_scale (the
        weights then in that format: f8E4M3FN, or i8 holding two e2m1
        along K, ``E x 2I x H/2`` and ``E x H x I/2``)."""
        H, I, E = self.hidden, self.intermediate, self.experts
        fmt = self.weight_format
        if fmt != "plain" and not self.transpose_weights:
            raise ValueError(
                "weight_format %r needs transpose_weights (the checkpoints' E x N x K)" % fmt
            )
        mx = fmt in ("mxfp4", "mxfp4_hopper")
        pack = 2 if mx else 1
        if self.transpose_weights:
            w_up, w_down = [E, 2 * I, H // pack], [E, H, I // pack]
        else:
            w_up, w_down = [E, H, 2 * I], [E, I, H]
        w_dtype = "i8" if mx else {"plain": dtype, "fp8_block": "f8E4M3FN"}[fmt]
        types = [
            TensorType([T, H], dtype),
            TensorType([T, E], self.logits_dtype or dtype),
            TensorType(w_up, w_dtype),
            TensorType(w_down, w_dtype),
        ]
        if self.routing_bias:
            types.append(TensorType([E], "f32"))
        if self.expert_bias:
            types += [TensorType([E, 2 * I], dtype), TensorType([E, H], dtype)]
        if fmt == "fp8_block":
            blocks = lambda n: -(-n // 128)  # noqa: E731
            types += [
                TensorType([E, blocks(2 * I), blocks(H)], "f32"),
                TensorType([E, blocks(H), blocks(I)], "f32"),
            ]
        elif mx:
            types += [
                TensorType([E, 2 * I, H // 32], "f8E8M0FNU"),
                TensorType([E, H, I // 32], "f8E8M0FNU"),
            ]
        return types

    def ffn_attributes(self) -> dict:
        """Keyword arguments of :meth:`FunctionBuilder.ffn`."""
        return dict(
            k=self.top_k,
            scoring=self.scoring,
            normalize=self.normalize,
            n_group=self.n_group,
            topk_group=self.topk_group,
            group_score=self.group_score,
            scaling=self.scaling,
            activation=self.activation,
            layout=self.layout,
            alpha=self.alpha,
            limit=self.limit,
            up_bias=self.up_bias,
            transpose_weights=self.transpose_weights,
            weight_format=self.weight_format,
            scale_fmt=self.scale_fmt,
        )


#: Routed-expert layers of public MoE models, from their published configs.
#: ``transpose_weights`` follows each Hugging Face checkpoint's layout.
PRESETS: Dict[str, MoeConfig] = {
    # Mixtral-8x7B: softmax over 8 experts, top-2 renormalised, SwiGLU (w1
    # gate, w3 up) as nn.Linear weights.
    "mixtral-8x7b": MoeConfig(
        hidden=4096,
        intermediate=14336,
        experts=8,
        top_k=2,
        scoring="softmax",
        normalize=True,
        activation="silu",
        layout="concat",
        transpose_weights=True,
        name="mixtral-8x7b",
    ),
    # Qwen3-30B-A3B: 128 experts, top-8, norm_topk_prob.
    "qwen3-30b-a3b": MoeConfig(
        hidden=2048,
        intermediate=768,
        experts=128,
        top_k=8,
        scoring="softmax",
        normalize=True,
        activation="silu",
        layout="concat",
        transpose_weights=True,
        name="qwen3-30b-a3b",
    ),
    # DeepSeek-V3: sigmoid scores + e_score_correction_bias ("noaux_tc"),
    # 8 groups, keep 4 by top-2 sum, top-8, normalised, x2.5.
    "deepseek-v3": MoeConfig(
        hidden=7168,
        intermediate=2048,
        experts=256,
        top_k=8,
        scoring="sigmoid",
        normalize=True,
        n_group=8,
        topk_group=4,
        group_score="top2_sum",
        scaling=2.5,
        routing_bias=True,
        activation="silu",
        layout="concat",
        transpose_weights=True,
        logits_dtype="f32",
        name="deepseek-v3",
    ),
    # gpt-oss-120b: softmax over the top-4 logits (= softmax + normalise),
    # interleaved SwiGLU with alpha 1.702, clamp 7.0 and up + 1; gate_up_proj
    # is stored E x H x 2I; per-expert biases on both matmuls.
    "gpt-oss-120b": MoeConfig(
        hidden=2880,
        intermediate=2880,
        experts=128,
        top_k=4,
        scoring="softmax",
        normalize=True,
        activation="silu",
        layout="interleaved",
        alpha=1.702,
        limit=7.0,
        up_bias=1.0,
        transpose_weights=False,
        expert_bias=True,
        name="gpt-oss-120b",
    ),
}

#: The same layers with their expert weights as the production checkpoints
#: ship them (Hugging Face names: ``gate_up_proj`` / ``down_proj`` and their
#: ``*_scale_inv`` or ``*_blocks`` / ``*_scales``, always ``[E, N, K]``):
#: DeepSeek-V3 / Qwen3-30B-A3B-FP8 with 128 x 128 block-scaled e4m3
#: (DeepSeek-V3.1 with power-of-two activation scales, ``scale_fmt:
#: ue8m0``), gpt-oss-120b with MXFP4 (its ``*_blocks`` ``[E, N, K/32, 16]``
#: viewed as ``[E, N, K/2]``, ``*_scales`` as float8_e8m0fnu).
PRESETS.update(
    {
        "deepseek-v3-fp8": PRESETS["deepseek-v3"].replace(
            weight_format="fp8_block", name="deepseek-v3-fp8"
        ),
        "deepseek-v3.1-fp8": PRESETS["deepseek-v3"].replace(
            weight_format="fp8_block", scale_fmt="ue8m0", name="deepseek-v3.1-fp8"
        ),
        "qwen3-30b-a3b-fp8": PRESETS["qwen3-30b-a3b"].replace(
            weight_format="fp8_block", name="qwen3-30b-a3b-fp8"
        ),
        "gpt-oss-120b-mxfp4": PRESETS["gpt-oss-120b"].replace(
            weight_format="mxfp4", transpose_weights=True, name="gpt-oss-120b-mxfp4"
        ),
    }
)


def ffn_from_config(
    config: Union[MoeConfig, str],
    T: Optional[int] = None,
    dtype: str = "bf16",
    *,
    context: Optional[Context] = None,
    name: str = "ffn",
) -> Module:
    """A module with one public function ``name`` computing the layer
    ``config`` (a :class:`MoeConfig` or a key of :data:`PRESETS`) as one
    ``moe.ffn`` for ``T`` tokens (None: dynamic) in ``dtype``."""
    if isinstance(config, str):
        try:
            config = PRESETS[config]
        except KeyError:
            raise KeyError("unknown preset %r (have: %s)" % (config, ", ".join(PRESETS))) from None
    module = Module(context)
    with FunctionBuilder(module, name, config.input_types(T, dtype)) as f:
        x, logits, w_up, w_down = f.args[:4]
        rest = list(f.args[4:])
        bias = rest.pop(0) if config.routing_bias else None
        expert = {}
        if config.expert_bias:
            expert = dict(w_up_bias=rest.pop(0), w_down_bias=rest.pop(0))
        if config.weight_format != "plain":
            expert.update(w_up_scale=rest.pop(0), w_down_scale=rest.pop(0))
        f.ret(f.ffn(x, logits, w_up, w_down, bias, **config.ffn_attributes(), **expert))
    return module
