"""The training form of a :class:`~moe_mlir.presets.MoeConfig` layer: one
module with ``@ffn_train`` (``moe.ffn_train``: the layer's output plus what
its backward needs saved) and ``@ffn_grad`` (``moe.ffn_grad`` in its saved
form: the gradients from the upstream gradient, the forward's operands and
those saved tensors), for ``moe_mlir_runtime.ffn_autograd`` to wrap as a
``torch.autograd.Function``::

    from moe_mlir import gpu, training
    gpu.compile_gpu(training.training_from_config(cfg), "layer_train.so")

Signatures (``T`` dynamic unless given; ``F`` the activation type):

- ``ffn_train(x, logits, w_up, w_down[, bias][, w_up_bias, w_down_bias])
  -> (y, h, weights, ids)``: ``h`` ``(T*k) x 2I`` of ``F`` in dispatch
  order, ``weights`` ``T x k`` f32, ``ids`` ``T x k`` i32;
- ``ffn_grad(dy, x, logits, w_up, w_down[, bias][, w_up_bias,
  w_down_bias], h, weights, ids) -> (dx, dlogits, dw_up, dw_down[,
  dw_up_bias, dw_down_bias])``, the weight and expert-bias gradients f32.

Plain (bf16 / f16 / f32) weights only: the backward ops do not take
quantized weights. The module is built as MLIR text (the op syntax of the
op reference)."""

from typing import List, Optional, Union

from .ir import Context, Module
from .presets import PRESETS, MoeConfig


def _type(shape, dtype: str) -> str:
    return "tensor<%sx%s>" % ("x".join("?" if d is None else str(d) for d in shape), dtype)


def _float(v: float) -> str:
    return "%r : f32" % float(v)


def _attributes(c: MoeConfig) -> str:
    items: List[str] = []
    if c.normalize:
        items.append("normalize = true")
    if c.n_group != 1:
        items.append("n_group = %d : i64" % c.n_group)
    if c.topk_group != 1:
        items.append("topk_group = %d : i64" % c.topk_group)
    if c.group_score != "max":
        items.append("group_score = #moe.group_score<%s>" % c.group_score)
    if c.scaling != 1.0:
        items.append("scaling = " + _float(c.scaling))
    if c.alpha != 1.0:
        items.append("alpha = " + _float(c.alpha))
    if c.limit is not None:
        items.append("limit = " + _float(c.limit))
    if c.up_bias != 0.0:
        items.append("up_bias = " + _float(c.up_bias))
    if c.transpose_weights:
        items.append("transpose_weights = true")
    return " {%s}" % ", ".join(items) if items else ""


def training_text(config: MoeConfig, T: Optional[int] = None, dtype: str = "bf16") -> str:
    """The module's MLIR text (see the module docstring)."""
    if config.weight_format != "plain":
        raise ValueError(
            "training needs plain weights (weight_format %r: the backward "
            "ops do not take quantized weights)" % config.weight_format
        )
    H, I, E, k = config.hidden, config.intermediate, config.experts, config.top_k
    ins = config.input_types(T, dtype)
    names = ["x", "logits", "w_up", "w_down"]
    if config.routing_bias:
        names.append("bias")
    if config.expert_bias:
        names += ["w_up_bias", "w_down_bias"]
    types = {n: _type(t.shape, t.dtype) for n, t in zip(names, ins)}
    rows = None if T is None else T * k
    saved = {
        "h": _type([rows, 2 * I], dtype),
        "weights": _type([T, k], "f32"),
        "ids": _type([T, k], "i32"),
    }

    def operands(lead: List[str]) -> str:
        text = ", ".join("%" + n for n in lead + names[:4])
        if config.routing_bias:
            text += " bias(%%bias : %s)" % types["bias"]
        if config.expert_bias:
            text += " expert_bias(%%w_up_bias, %%w_down_bias : %s, %s)" % (
                types["w_up_bias"],
                types["w_down_bias"],
            )
        return text

    head = " k = %d scoring = %s activation = %s layout = %s%s" % (
        k,
        config.scoring,
        config.activation,
        config.layout,
        _attributes(config),
    )
    main_types = ", ".join(types[n] for n in names[:4])
    train_results = [types["x"], saved["h"], saved["weights"], saved["ids"]]
    grad_results = [
        types["x"],
        types["logits"],
        _type(ins[2].shape, "f32"),
        _type(ins[3].shape, "f32"),
    ]
    if config.expert_bias:
        grad_results += [_type([E, 2 * I], "f32"), _type([E, H], "f32")]
    args = ", ".join("%%%s: %s" % (n, types[n]) for n in names)
    saved_args = ", ".join("%%%s: %s" % (n, t) for n, t in saved.items())
    n_grad = len(grad_results)
    return "\n".join(
        [
            "func.func @ffn_train(%s) -> (%s) {" % (args, ", ".join(train_results)),
            "  %%y, %%h, %%w, %%ids = moe.ffn_train %s%s : %s -> %s"
            % (operands([]), head, main_types, ", ".join(train_results)),
            "  return %%y, %%h, %%w, %%ids : %s" % ", ".join(train_results),
            "}",
            "func.func @ffn_grad(%%dy: %s, %s, %s) -> (%s) {"
            % (types["x"], args, saved_args, ", ".join(grad_results)),
            "  %%g:%d = moe.ffn_grad %s saved(%%h, %%weights, %%ids : %s, %s, %s)%s : %s, %s -> %s"
            % (
                n_grad,
                operands(["dy"]),
                saved["h"],
                saved["weights"],
                saved["ids"],
                head,
                types["x"],
                main_types,
                ", ".join(grad_results),
            ),
            "  return %s : %s"
            % (", ".join("%%g#%d" % i for i in range(n_grad)), ", ".join(grad_results)),
            "}",
            "",
        ]
    )


def training_from_config(
    config: Union[MoeConfig, str],
    T: Optional[int] = None,
    dtype: str = "bf16",
    *,
    context: Optional[Context] = None,
) -> Module:
    """A verified module with ``@ffn_train`` and ``@ffn_grad`` for the layer
    ``config`` (a :class:`MoeConfig` or a key of :data:`PRESETS`)."""
    if isinstance(config, str):
        config = PRESETS[config]
    return Module.parse(training_text(config, T, dtype), context)
