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
quantized weights. Built with :class:`~moe_mlir.ir.FunctionBuilder`
(``ffn_train``, ``ffn_grad``)."""

from typing import Optional, Union

from .ir import Context, FunctionBuilder, Module, TensorType
from .presets import PRESETS, MoeConfig


def training_from_config(
    config: Union[MoeConfig, str],
    T: Optional[int] = None,
    dtype: str = "bf16",
    *,
    weight_grads: str = "f32",
    context: Optional[Context] = None,
) -> Module:
    """A verified module with ``@ffn_train`` and ``@ffn_grad`` for the layer
    ``config`` (a :class:`MoeConfig` or a key of :data:`PRESETS`).
    ``weight_grads``: the weight gradients' type, ``"f32"`` (ready for an
    f32 ``main_grad``) or ``"weights"`` (``dtype``: each f32 sum rounded
    once; half the bytes written, no cast in :func:`ffn_autograd`)."""
    if isinstance(config, str):
        config = PRESETS[config]
    if config.weight_format != "plain":
        raise ValueError(
            "training needs plain weights (weight_format %r: the backward "
            "ops do not take quantized weights)" % config.weight_format
        )
    inputs = config.input_types(T, dtype)
    attributes = config.ffn_attributes()
    rows = None if T is None else T * config.top_k
    saved = [
        TensorType([rows, 2 * config.intermediate], dtype),
        TensorType([T, config.top_k], "f32"),
        TensorType([T, config.top_k], "i32"),
    ]

    def operands(args):
        """(x, logits, w_up, w_down, bias) and the expert-bias keywords."""
        rest = list(args[4:])
        bias = rest.pop(0) if config.routing_bias else None
        expert = {}
        if config.expert_bias:
            expert = dict(w_up_bias=rest.pop(0), w_down_bias=rest.pop(0))
        return list(args[:4]) + [bias], expert

    module = Module(context)
    with FunctionBuilder(module, "ffn_train", inputs) as f:
        main, expert = operands(f.args)
        f.ret(*f.ffn_train(*main, **attributes, **expert))
    with FunctionBuilder(module, "ffn_grad", [inputs[0]] + inputs + saved) as f:
        dy, args, h = f.args[0], f.args[1 : 1 + len(inputs)], f.args[1 + len(inputs) :]
        main, expert = operands(args)
        f.ret(*f.ffn_grad(dy, *main, saved=h, weight_grads=weight_grads, **attributes, **expert))
    return module
