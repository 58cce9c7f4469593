# ===- torch_ops.py - compiled functions as torch.library custom ops ------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Compiled functions as PyTorch custom operators (`torch.library`), so that
`torch.compile(fullgraph=True)` traces a model that calls them with no graph
break, and dynamic token counts need no recompilation:

    import moe_mlir_runtime as rt
    ffn = rt.torch_op(rt.load("qwen3.so"), "ffn")    # torch.ops.moe_mlir.qwen3_ffn
    y = ffn(x, logits, w_up, w_down)

The operator's real implementation is the artifact's `Function` call
(checks against the manifest, outputs allocated on cuda:0, the launch on
torch's current stream: CUDA-graph capturable, no host synchronisation).
Its fake implementation, which torch.compile / torch.export / make_fx run on
fake tensors, applies the same checks (device, contiguity, dtype, rank,
static sizes, dynamic sizes that must agree) and derives the outputs'
shapes and dtypes from the manifest, so a bad call fails while tracing, as
a `ArgumentError`, before anything is launched; symbolic sizes (T) flow
through. Only tensor arguments are supported (scalars: call the Function).
"""

import os
import re

from .errors import ArgumentError
from .tensors import _info, _need_torch, _torch, torch_dtype

NAMESPACE = "moe_mlir"
# op name -> (library sha256, function name): one registration per name.
_REGISTERED = {}


def _identifier(text):
    name = re.sub(r"\W", "_", text)
    return name if re.match(r"^[A-Za-z_]", name) else "_" + name


def op_name(artifact, function="ffn"):
    """The default operator name: the library's file stem and the function."""
    stem = os.path.splitext(os.path.basename(artifact.path))[0]
    return _identifier("%s_%s" % (stem, function))


def _schema(spec):
    names, seen = [], set()
    for i, a in enumerate(spec.args):
        n = _identifier(a.name or "arg%d" % i)
        while n in seen or n in ("self", "out"):
            n += "_"
        seen.add(n)
        names.append(n)
    args = ", ".join("Tensor %s" % n for n in names)
    n_out = len(spec.results)
    out = "Tensor" if n_out == 1 else "(%s)" % ", ".join(["Tensor"] * n_out)
    return "(%s) -> %s" % (args, out)


def torch_op(artifact, function="ffn", name=None):
    """Registers `artifact`'s `function` as the custom operator
    torch.ops.moe_mlir.<name> (default: op_name) and returns it. Registering
    the same library's function under the same name again returns the
    registered operator; another library under a taken name raises
    ValueError (pass `name`)."""
    _need_torch("torch_op")
    torch = _torch()
    fn = artifact.fn(function)
    spec = fn.spec
    if spec.unsupported:
        raise ArgumentError("@%s cannot be called: %s" % (function, spec.unsupported))
    if not spec.results:
        raise ArgumentError("@%s returns nothing: a custom op needs a result" % function)
    scalars = [a.name for a in spec.args if a.is_scalar]
    if scalars:
        raise ArgumentError(
            "@%s takes scalar arguments (%s): custom ops of moe_mlir_runtime take "
            "tensors only; call the Function instead" % (function, ", ".join(scalars))
        )
    name = _identifier(name) if name else op_name(artifact, function)
    key = (artifact.manifest.data.get("sha256"), function)
    if name in _REGISTERED:
        if _REGISTERED[name] != key:
            raise ValueError(
                "torch.ops.%s.%s is already registered for another library; pass name="
                % (NAMESPACE, name)
            )
        return getattr(getattr(torch.ops, NAMESPACE), name)
    n_out = len(spec.results)

    def impl(*args):
        return fn(*args)

    def fake(*args):
        if len(args) != len(spec.args):
            raise ArgumentError(spec._count_message(len(args)))
        fn._check_values(args)
        shapes = spec.output_shapes([_info(v) for v in args])
        outs = tuple(
            args[0].new_empty(shape, dtype=torch_dtype(r.dtype))
            for r, shape in zip(spec.results, shapes)
        )
        return outs[0] if n_out == 1 else outs

    op = torch.library.custom_op(
        "%s::%s" % (NAMESPACE, name), impl, mutates_args=(), schema=_schema(spec)
    )
    op.register_fake(fake)
    _REGISTERED[name] = key
    return getattr(getattr(torch.ops, NAMESPACE), name)
