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
    Scoring,
    TensorType,
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
    router logits' element type (None: the activations')."""

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
    name: str = ""

    def replace(self, **changes) -> "MoeConfig":
        """A copy with some fields changed (``dataclasses.replace``), e.g.
        a scaled-down layer for tests: ``cfg.replace(hidden=64)``."""
        return dataclasses.replace(self, **changes)

    def input_types(self, T: Optional[int] = None, dtype: str = "bf16") -> List[TensorType]:
        """The types of ``ffn``'s arguments for ``T`` tokens (None:
        dynamic): x, logits, w_up, w_down, with ``routing_bias`` bias and
        with ``expert_bias`` w_up_bias and w_down_bias."""
        H, I, E = self.hidden, self.intermediate, self.experts
        if self.transpose_weights:
            w_up, w_down = [E, 2 * I, H], [E, H, I]
        else:
            w_up, w_down = [E, H, 2 * I], [E, I, H]
        types = [
            TensorType([T, H], dtype),
            TensorType([T, E], self.logits_dtype or dtype),
            TensorType(w_up, dtype),
            TensorType(w_down, dtype),
        ]
        if self.routing_bias:
            types.append(TensorType([E], "f32"))
        if self.expert_bias:
            types += [TensorType([E, 2 * I], dtype), TensorType([E, H], dtype)]
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
        expert = dict(w_up_bias=rest[0], w_down_bias=rest[1]) if config.expert_bias else {}
        f.ret(f.ffn(x, logits, w_up, w_down, bias, **config.ffn_attributes(), **expert))
    return module
