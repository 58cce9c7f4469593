# ===- autograd.py - a compiled layer as a torch.autograd.Function -------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""A compiled MoE layer that trains: the artifact of
`moe_mlir.training.training_from_config` (functions `ffn_train`, `ffn_grad`)
as a `torch.autograd.Function`:

    import moe_mlir_runtime as rt
    layer = rt.ffn_autograd(rt.load("layer_train.so"))
    y = layer(x, logits, w_up, w_down)          # [, bias][, w_up_bias, w_down_bias]
    y.float().pow(2).sum().backward()           # x.grad, logits.grad, w_up.grad, ...

The forward runs `ffn_train` and saves, beside its inputs, only what the
backward needs (the up projection's pre-activation h in dispatch order, the
routing weights and ids: `k*2I*sizeof(F) + 8k` bytes a token); the backward
runs `ffn_grad` on them (no routing, no up GEMM again). Both launch on
torch's current stream with no host synchronisation. The weight and
expert-bias gradients come back in f32 (the weight gradients in the
weights' type when the library was built with `weight_grads="weights"`)
and are cast to the parameters' dtype where they differ (autograd's rule); the routing bias, which only steers the
selection, gets none. Deterministic: the same inputs give bitwise the same
gradients.
"""

from .errors import ArgumentError
from .tensors import _need_torch, _torch, torch_dtype


def ffn_autograd(artifact, train="ffn_train", grad="ffn_grad"):
    """The callable layer(x, logits, w_up, w_down, *extra) of `artifact`'s
    `train` / `grad` functions (see the module docstring); `extra` is the
    routing bias and / or the two expert biases, as the layer takes them."""
    _need_torch("ffn_autograd")
    torch = _torch()
    ftrain, fgrad = artifact.fn(train), artifact.fn(grad)
    n_in = len(ftrain.spec.args)
    n_grad = len(fgrad.spec.results)
    expert_bias = n_grad == 6
    if n_grad not in (4, 6) or len(ftrain.spec.results) != 4:
        raise ArgumentError(
            "ffn_autograd: @%s / @%s are not moe_mlir.training's functions "
            "(4 results and 4 or 6 gradients expected)" % (train, grad)
        )
    routing_bias = n_in - 4 - (2 if expert_bias else 0) == 1

    def outputs(spec, shapes):
        return [
            torch.empty(shape, dtype=torch_dtype(r.dtype), device="cuda:0")
            for r, shape in zip(spec.results, shapes)
        ]

    class MoeFfn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, logits, w_up, w_down, *extra):
            T, H = x.shape
            k = ftrain.spec.results[2].shape[1]
            two_i = ftrain.spec.results[1].shape[1]
            outs = outputs(ftrain.spec, [(T, H), (T * k, two_i), (T, k), (T, k)])
            y, h, w, ids = ftrain(x, logits, w_up, w_down, *extra, *outs)
            ctx.save_for_backward(x, logits, w_up, w_down, *extra, h, w, ids)
            return y

        @staticmethod
        def backward(ctx, dy):
            saved = ctx.saved_tensors
            x, logits, w_up, w_down = saved[:4]
            extra, (h, w, ids) = saved[4:-3], saved[-3:]
            shapes = [tuple(x.shape), tuple(logits.shape), tuple(w_up.shape), tuple(w_down.shape)]
            if expert_bias:
                shapes += [tuple(extra[-2].shape), tuple(extra[-1].shape)]
            outs = outputs(fgrad.spec, shapes)
            g = fgrad(dy.contiguous(), x, logits, w_up, w_down, *extra, h, w, ids, *outs)
            dx, dlogits, dw_up, dw_down = g[:4]
            grads = [dx, dlogits, dw_up.to(w_up.dtype), dw_down.to(w_down.dtype)]
            if routing_bias:
                grads.append(None)
            if expert_bias:
                grads += [g[4].to(extra[-2].dtype), g[5].to(extra[-1].dtype)]
            return tuple(grads)

    def layer(x, logits, w_up, w_down, *extra):
        return MoeFfn.apply(x, logits, w_up, w_down, *extra)

    return layer
