"""Contexts, modules, tensor types and the typed op builders.

The types (TensorType, FunctionType, DTYPES) are defined in
``moe_mlir._types`` and exported from here. Everything else here wraps the C++ extension ``moe_mlir._moe``: IR is created
with MLIR's ``OpBuilder`` and the ODS-generated builders of the ``moe``
ops, never assembled from strings, and every op is verified as soon as it
is built.
"""

from __future__ import annotations

import inspect
import itertools
import os
import sys
from typing import TYPE_CHECKING, Literal, NamedTuple, Optional, Sequence, Tuple, Union

from . import _moe
from ._moe import BuildError, MLIRError
from ._types import DTYPES, DType, FunctionType, TensorType, _type_from_raw

if TYPE_CHECKING:  # pragma: no cover
    from .cpu import CpuModule

__all__ = [
    "DTYPES",
    "Context",
    "Module",
    "TensorType",
    "FunctionType",
    "Value",
    "FunctionBuilder",
    "TopK",
    "Route",
    "Indices",
    "Multihot",
    "Scoring",
    "GroupScore",
    "Activation",
    "GluLayout",
    "WeightFormat",
    "ScaleFmt",
    "DType",
]

Scoring = Literal["softmax", "sigmoid"]
GroupScore = Literal["max", "top2_sum"]
Activation = Literal["silu", "gelu", "gelu_tanh"]
GluLayout = Literal["concat", "interleaved"]
WeightFormat = Literal["plain", "fp8_block", "mxfp4", "mxfp4_hopper"]
ScaleFmt = Literal["f32", "ue8m0"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _error(cls, summary: str):
    """An MLIRError / BuildError raised from Python (no diagnostics)."""
    exc = cls(summary)
    exc.summary = summary
    exc.diagnostics = []
    return exc


def _caller_location() -> Tuple[str, int, int]:
    """(file, line, column) of the first caller outside this package: the
    location given to the ops it builds, so diagnostics point at user code."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return ("", 0, 0)
    col = 0
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is not None and frame.f_lasti >= 0:
        try:
            pos = next(itertools.islice(positions(), frame.f_lasti // 2, None))
            if pos[2] is not None:
                col = pos[2] + 1
        except StopIteration:  # pragma: no cover
            pass
    return (frame.f_code.co_filename, frame.f_lineno or 0, col)


# ----------------------------------------------------------------------------
# Context and Module
# ----------------------------------------------------------------------------


class Context:
    """Owns an ``MLIRContext`` with the moe dialect and every dialect our
    pipelines use registered (``moe::registerAllDialects``); passes and
    pipelines are registered once per process. Modules built without an
    explicit context share ``Context.default()``."""

    __slots__ = ("_c",)

    def __init__(self) -> None:
        self._c = _moe._Context()

    @staticmethod
    def default() -> "Context":
        """The process-wide context used when none is given."""
        ctx = Context.__new__(Context)
        ctx._c = _moe._Context.default()
        return ctx

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Context) and self._c == other._c

    def __hash__(self) -> int:
        return hash(self._c)

    def __repr__(self) -> str:
        return "<moe_mlir.Context at 0x%x>" % hash(self._c)


def _raw_context(context: Optional[Context]):
    if context is None:
        return _moe._Context.default()
    if not isinstance(context, Context):
        raise TypeError("context must be a moe_mlir.Context, got %r" % type(context).__name__)
    return context._c


class Module:
    """A ``builtin.module``.

    ``Module()`` is empty (add functions with :class:`FunctionBuilder`),
    ``Module.parse(text)`` parses MLIR text. Pipelines transform it in place
    (``module.run_pipeline("moe-decompose,moe-fuse")``); ``str(module)``
    prints it. Every failure raises :class:`moe_mlir.MLIRError` with the
    MLIR diagnostics.
    """

    __slots__ = ("_m",)

    def __init__(self, context: Optional[Context] = None) -> None:
        self._m = _moe._Module(_raw_context(context))

    @classmethod
    def _wrap(cls, raw) -> "Module":
        module = cls.__new__(cls)
        module._m = raw
        return module

    @classmethod
    def parse(
        cls, text: str, context: Optional[Context] = None, *, name: str = "<string>"
    ) -> "Module":
        """Parses MLIR text (custom or generic form). ``name`` is the file
        name diagnostics report. Raises MLIRError on a syntax or verifier
        error."""
        return cls._wrap(_moe._Module.parse(text, _raw_context(context), name))

    @classmethod
    def parse_file(
        cls, path: Union[str, os.PathLike], context: Optional[Context] = None
    ) -> "Module":
        """Parses an ``.mlir`` file."""
        with open(path, "r", encoding="utf-8") as f:
            return cls.parse(f.read(), context, name=os.fspath(path))

    @property
    def context(self) -> Context:
        ctx = Context.__new__(Context)
        ctx._c = self._m.context
        return ctx

    def __str__(self) -> str:
        return self._m.get_asm(False, False)

    def __repr__(self) -> str:
        names = ", ".join(self.functions)
        return "<moe_mlir.Module with functions [%s]>" % names

    def get_asm(self, *, generic: bool = False, debug_info: bool = False) -> str:
        """The module as text: custom syntax, or the generic op form; with
        ``debug_info`` the locations are printed too."""
        return self._m.get_asm(generic, debug_info)

    def verify(self) -> None:
        """Runs the verifiers; raises MLIRError with their diagnostics."""
        self._m.verify()

    def run_pipeline(self, pipeline: str, verify_each: bool = True) -> "Module":
        """Runs a textual pass pipeline on the module, in place, and returns
        the module. The syntax is MLIR's (``parsePassPipeline``):
        ``"moe-decompose,moe-fuse"``,
        ``"moe-lower-to-cpu{deallocate=false}"``,
        ``"moe-lower-to-nvvm{chip=sm_90a}"``, or a full
        ``"builtin.module(...)"``. With ``verify_each`` (the default) the
        verifiers run after every pass; without it, once on the result
        (faster; ``compile_gpu`` does that). On failure the module is
        unchanged and MLIRError carries the diagnostics."""
        self._m.run_pipeline(pipeline, verify_each)
        return self

    def clone(self) -> "Module":
        """A deep copy in the same context."""
        return Module._wrap(self._m.clone())

    @property
    def functions(self) -> dict:
        """``{name: FunctionType}`` of the functions with a body, in order."""
        out = {}
        for name, visibility, ins, outs in self._m.functions():
            out[name] = FunctionType(
                tuple(_type_from_raw(t) for t in ins),
                tuple(_type_from_raw(t) for t in outs),
                visibility,
            )
        return out

    def translate_to_llvm_ir(self) -> str:
        """LLVM IR text of a module already lowered to the LLVM dialect (for
        example after ``moe-lower-to-cpu`` or ``moe-lower-to-nvvm``)."""
        return self._m.translate_to_llvm_ir()

    def emit_object(
        self,
        path: Union[str, os.PathLike],
        triple: Optional[str] = None,
        pic: bool = True,
        *,
        opt_level: int = 2,
        cpu: str = "",
        features: str = "",
    ) -> None:
        """Compiles a module in the LLVM dialect to an object file with an
        LLVM TargetMachine (``triple`` defaults to the host's; ``cpu`` ""
        is the generic CPU). For the AOT flow: the host side of a
        ``moe-lower-to-nvvm`` module, with its embedded GPU binary, becomes
        an object file to link with the CUDA runtime archive."""
        self._m.emit_object(os.fspath(path), triple, pic, opt_level, cpu, features)

    def compile_cpu(
        self,
        *,
        opt_level: int = 2,
        pipeline: Optional[str] = None,
        shared_libs: Optional[Sequence[str]] = None,
    ) -> "CpuModule":
        """JIT-compiles a copy of the module for this CPU.

        The copy runs ``pipeline`` first when given (e.g.
        ``"moe-decompose,moe-fuse"``), then ``moe-emit-c-interface`` and
        ``moe-lower-to-cpu{deallocate=true}``, and is compiled by MLIR's
        ExecutionEngine. ``shared_libs`` defaults to LLVM's
        ``libmlir_c_runner_utils``. Call public functions with numpy arrays:
        ``compile_cpu().call("layer", x, logits, w_up, w_down)``."""
        # Imported here, not at the top: cpu.py needs numpy, building IR
        # does not. (cpu.py itself imports only _types, not this module.)
        from .cpu import CpuModule, default_shared_libs

        libs = default_shared_libs() if shared_libs is None else [os.fspath(p) for p in shared_libs]
        raw = self._m.compile_cpu(opt_level, pipeline or "", libs)
        return CpuModule(raw)


# ----------------------------------------------------------------------------
# Values and results
# ----------------------------------------------------------------------------


class Value:
    """An SSA value of a function being built (an argument or an op
    result). Its type is fixed when it is created."""

    __slots__ = ("_v", "_type")

    def __init__(self, raw) -> None:
        self._v = raw
        self._type = _type_from_raw(raw.type)

    @property
    def type(self) -> TensorType:
        return self._type

    @property
    def shape(self) -> Tuple[Optional[int], ...]:
        return self._type.shape

    @property
    def dtype(self) -> str:
        return self._type.dtype

    def __repr__(self) -> str:
        return "Value(%s)" % self._type


class TopK(NamedTuple):
    values: Value
    indices: Value


class Route(NamedTuple):
    weights: Value
    indices: Value


class Indices(NamedTuple):
    reverse_indices: Value
    token_indices: Value


class Multihot(NamedTuple):
    multihot: Value
    probs_multihot: Value
    position_map: Value


def _raw_value(v, what: str):
    if not isinstance(v, Value):
        raise TypeError("%s must be a moe_mlir.Value, got %r" % (what, type(v).__name__))
    return v._v


def _opt_raw(v, what: str):
    return None if v is None else _raw_value(v, what)


def _as_type(t) -> TensorType:
    if isinstance(t, TensorType):
        return t
    if isinstance(t, tuple) and len(t) == 2 and isinstance(t[1], str):
        return TensorType(t[0], t[1])
    raise TypeError("function inputs are TensorType or (shape, dtype), got %r" % (t,))


# ----------------------------------------------------------------------------
# FunctionBuilder
# ----------------------------------------------------------------------------


class FunctionBuilder:
    """Builds one ``func.func`` in a module, op by op.

    ::

        with FunctionBuilder(module, "layer", inputs=[
                TensorType([None, 64], "bf16"), TensorType([None, 8], "bf16"),
                TensorType([8, 64, 256], "bf16"),
                TensorType([8, 128, 64], "bf16")]) as f:
            x, logits, w_up, w_down = f.args
            y = f.ffn(x, logits, w_up, w_down, k=2, scoring="softmax",
                      normalize=True, activation="silu", layout="concat")
            f.ret(y)

    Each builder method creates one op with the ODS-generated C++ builder,
    infers its result types and verifies it immediately: an invalid
    attribute value or operand type raises :class:`moe_mlir.BuildError`
    (a ``ValueError`` and an ``MLIRError``) whose message is the verifier's
    diagnostic, located at the Python line that called the builder.
    Attributes are keyword-only; enum attributes are their keywords
    (``scoring="sigmoid"``). Leaving the ``with`` block because of an
    exception removes the unfinished function from the module, and so does
    dropping a builder before ``ret()``. While a builder of a module is
    open the module cannot be transformed, cloned or compiled.
    """

    def __init__(
        self,
        module: Module,
        name: str,
        inputs: Sequence[Union[TensorType, Tuple]] = (),
        *,
        visibility: Literal["public", "private"] = "public",
    ) -> None:
        if not isinstance(module, Module):
            raise TypeError("module must be a moe_mlir.Module")
        types = [_as_type(t) for t in inputs]
        self.module = module
        self._b = _moe._FunctionBuilder(
            module._m, name, [t._raw() for t in types], visibility, _caller_location()
        )
        self._args = tuple(Value(a) for a in self._b.arguments)

    # -- function structure --------------------------------------------------

    @property
    def name(self) -> str:
        return self._b.name

    @property
    def args(self) -> Tuple[Value, ...]:
        """The function's arguments, in order."""
        return self._args

    @property
    def is_open(self) -> bool:
        """False once ret() was called (or the function was abandoned)."""
        return self._b.is_open

    def ret(self, *values: Value) -> None:
        """Terminates the function with ``func.return values``; the result
        types become the function's result types. The function is verified;
        the builder is finished afterwards."""
        if len(values) == 1 and isinstance(values[0], (list, tuple)):
            values = tuple(values[0])
        self._b.ret(_caller_location(), [_raw_value(v, "ret value") for v in values])

    def abandon(self) -> None:
        """Removes the unfinished function from the module."""
        self._b.abandon()

    def __enter__(self) -> "FunctionBuilder":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._b.abandon()
            return False
        if self._b.is_open:
            self._b.abandon()
            raise _error(
                BuildError,
                "function '%s' was not terminated: "
                "call ret() before leaving the with block" % self.name,
            )
        return False

    # -- routing ---------------------------------------------------------------

    def topk(self, input: Value, *, k: int) -> TopK:
        """``moe.topk``: per row of ``input`` (``T x E``) the ``k`` largest
        values in descending order and their indices (ties: lower index;
        NaN last). Returns ``(values T x k, indices T x k i32)``."""
        values, indices = self._b.topk(_caller_location(), _raw_value(input, "input"), k)
        return TopK(Value(values), Value(indices))

    def route(
        self,
        logits: Value,
        bias: Optional[Value] = None,
        *,
        k: int,
        scoring: Scoring,
        normalize: bool = False,
        n_group: int = 1,
        topk_group: int = 1,
        group_score: GroupScore = "max",
        scaling: float = 1.0,
        weights_dtype: DType = "f32",
    ) -> Route:
        """``moe.route``: softmax / sigmoid gating of ``logits`` (``T x E``),
        optional score-correction ``bias`` (``E`` f32), group-limited
        selection (``n_group``, ``topk_group``, ``group_score``),
        ``normalize`` and ``scaling``. Returns ``(weights T x k
        weights_dtype, indices T x k i32)``."""
        weights, indices = self._b.route(
            _caller_location(),
            _raw_value(logits, "logits"),
            _opt_raw(bias, "bias"),
            k,
            scoring,
            normalize,
            n_group,
            topk_group,
            group_score,
            float(scaling),
            weights_dtype,
        )
        return Route(Value(weights), Value(indices))

    # -- dispatch metadata -------------------------------------------------------

    def cumsum(self, indices: Value, *, num_experts: int) -> Value:
        """``moe.cumsum``: expert-major inclusive prefix sum of the dispatch
        mask of ``indices`` (``T x k`` i32). Result ``E*T`` i32."""
        return Value(
            self._b.cumsum(_caller_location(), _raw_value(indices, "indices"), num_experts)
        )

    def get_indices(self, cumsum: Value, indices: Value) -> Indices:
        """``moe.get_indices``: the expert-grouped permutation. Returns
        ``(reverse_indices T*k, token_indices T*k)``, both i32."""
        rev, tok = self._b.get_indices(
            _caller_location(), _raw_value(cumsum, "cumsum"), _raw_value(indices, "indices")
        )
        return Indices(Value(rev), Value(tok))

    def get_indptr(
        self,
        cumsum: Value,
        *,
        num_experts: int,
        inclusive: bool = False,
        dtype: Literal["i32", "i64"] = "i32",
    ) -> Value:
        """``moe.get_indptr``: per-expert row offsets, ``E+1`` exclusive
        (``[0, end_0, ...]``) or ``E`` inclusive, of element type ``dtype``."""
        return Value(
            self._b.get_indptr(
                _caller_location(), _raw_value(cumsum, "cumsum"), num_experts, inclusive, dtype
            )
        )

    # -- data movement -----------------------------------------------------------

    def gather(self, input: Value, indices: Value) -> Value:
        """``moe.gather``: ``out[m] = input[indices[m]]`` (zero rows for
        out-of-range indices). ``T x H``, ``M`` -> ``M x H``."""
        return Value(
            self._b.gather(
                _caller_location(), _raw_value(input, "input"), _raw_value(indices, "indices")
            )
        )

    def scatter(self, input: Value, indices: Value) -> Value:
        """``moe.scatter``: ``out[indices[i]] = input[i]`` (rows nothing
        writes are zero). ``M x H``, ``M`` -> ``M x H``."""
        return Value(
            self._b.scatter(
                _caller_location(), _raw_value(input, "input"), _raw_value(indices, "indices")
            )
        )

    # -- expert compute ------------------------------------------------------------

    def grouped_matmul(
        self,
        lhs: Value,
        rhs: Value,
        offsets: Value,
        bias: Optional[Value] = None,
        *,
        transpose_rhs: bool = False,
        out_dtype: Optional[DType] = None,
        weight_format: WeightFormat = "plain",
        scale_fmt: ScaleFmt = "f32",
        rhs_scale: Optional[Value] = None,
    ) -> Value:
        """``moe.grouped_matmul``: rows ``offsets[e] <= m < offsets[e+1]`` of
        ``lhs`` (``M x K``) times ``rhs[e]`` (``E x K x N``, or ``E x N x K``
        with ``transpose_rhs``) plus ``bias[e]`` (``E x N``), accumulated in
        f32. Result ``M x N`` of ``out_dtype`` (default: the operands'
        type; ``"f32"`` is the other choice). Low-precision weights:
        ``weight_format`` ``"fp8_block"`` (f8E4M3FN ``E x N x K``,
        ``rhs_scale`` f32 ``E x ceil(N/128) x ceil(K/128)``; ``scale_fmt``
        ``"ue8m0"`` rounds the activation scales up to powers of two) or
        ``"mxfp4"`` (i8 ``E x N x K/2``, ``rhs_scale`` f8E8M0FNU ``E x N x
        K/32``; ``"mxfp4_hopper"`` the same codes in the Hopper kernels'
        order), all with ``transpose_rhs``; the op reference has the
        arithmetic."""
        return Value(
            self._b.grouped_matmul(
                _caller_location(),
                _raw_value(lhs, "lhs"),
                _raw_value(rhs, "rhs"),
                _raw_value(offsets, "offsets"),
                _opt_raw(bias, "bias"),
                transpose_rhs,
                out_dtype,
                weight_format,
                scale_fmt,
                _opt_raw(rhs_scale, "rhs_scale"),
            )
        )

    def glu(
        self,
        input: Value,
        *,
        activation: Activation,
        layout: GluLayout,
        alpha: float = 1.0,
        limit: Optional[float] = None,
        up_bias: float = 0.0,
    ) -> Value:
        """``moe.glu``: ``act(gate) * (up + up_bias)`` of ``input``
        (``M x 2N``), gate / up split by ``layout``, optional clamp
        ``limit``. Result ``M x N``."""
        return Value(
            self._b.glu(
                _caller_location(),
                _raw_value(input, "input"),
                activation,
                layout,
                float(alpha),
                None if limit is None else float(limit),
                float(up_bias),
            )
        )

    # -- combine and converters ----------------------------------------------------

    def combine(self, input: Value, weights: Optional[Value] = None) -> Value:
        """``moe.combine``: ``out[t] = sum_j weights[t][j] * input[t][j]``
        in slot order, f32 accumulation. ``T x k x H`` (+ ``T x k``) ->
        ``T x H``."""
        return Value(
            self._b.combine(
                _caller_location(), _raw_value(input, "input"), _opt_raw(weights, "weights")
            )
        )

    def indices_to_multihot(self, indices: Value, probs: Value, *, num_experts: int) -> Multihot:
        """``moe.indices_to_multihot``: top-k ids and probabilities (both
        ``T x k``) to ``(multihot T x E i1, probs_multihot T x E,
        position_map T x E i32)``."""
        mh, pm, pos = self._b.indices_to_multihot(
            _caller_location(),
            _raw_value(indices, "indices"),
            _raw_value(probs, "probs"),
            num_experts,
        )
        return Multihot(Value(mh), Value(pm), Value(pos))

    def multihot_to_indices(self, probs_multihot: Value, position_map: Value, *, k: int) -> Value:
        """``moe.multihot_to_indices``: dense probabilities and position map
        (``T x E``) back to top-k slot order (``T x k``)."""
        return Value(
            self._b.multihot_to_indices(
                _caller_location(),
                _raw_value(probs_multihot, "probs_multihot"),
                _raw_value(position_map, "position_map"),
                k,
            )
        )

    def expand_slots(self, input: Value, *, k: int) -> Value:
        """``tensor.expand_shape`` of ``input`` (``(T*k) x H``) to
        ``T x k x H``: the reshape between ``scatter`` and ``combine`` in
        the ``moe.ffn`` chain."""
        return Value(self._b.expand_slots(_caller_location(), _raw_value(input, "input"), k))

    # -- the composite -------------------------------------------------------------

    def ffn(
        self,
        x: Value,
        logits: Value,
        w_up: Value,
        w_down: Value,
        bias: Optional[Value] = None,
        *,
        k: int,
        scoring: Scoring,
        activation: Activation,
        layout: GluLayout,
        normalize: bool = False,
        n_group: int = 1,
        topk_group: int = 1,
        group_score: GroupScore = "max",
        scaling: float = 1.0,
        alpha: float = 1.0,
        limit: Optional[float] = None,
        up_bias: float = 0.0,
        transpose_weights: bool = False,
        w_up_bias: Optional[Value] = None,
        w_down_bias: Optional[Value] = None,
        weight_format: WeightFormat = "plain",
        scale_fmt: ScaleFmt = "f32",
        w_up_scale: Optional[Value] = None,
        w_down_scale: Optional[Value] = None,
    ) -> Value:
        """``moe.ffn``: a whole MoE layer on ``x`` (``T x H``) and
        ``logits`` (``T x E``, the type of ``x`` or f32) with ``w_up``
        (``E x H x 2I``; ``E x 2I x H`` with ``transpose_weights``),
        ``w_down`` (``E x I x H``; ``E x H x I``), the optional routing
        ``bias`` (``E`` f32) and the optional per-expert matmul biases
        ``w_up_bias`` (``E x 2I``) and ``w_down_bias`` (``E x H``), given
        together (the op's ``expert_bias``). Takes every :meth:`route` and
        :meth:`glu` attribute. Low-precision weights: ``weight_format``,
        ``scale_fmt`` and the weight scales ``w_up_scale``,
        ``w_down_scale`` as in :meth:`grouped_matmul` (with
        ``transpose_weights``; mxfp4 weights hold two values a byte along
        H and I). Result ``T x H``."""
        arguments = dict(locals())  # every parameter, nothing else yet
        del arguments["self"]
        return self._ffn_family("ffn", None, arguments, ())[0]

    def ffn_train(
        self,
        x: Value,
        logits: Value,
        w_up: Value,
        w_down: Value,
        bias: Optional[Value] = None,
        **attributes,
    ) -> Tuple[Value, Value, Value, Value]:
        """``moe.ffn_train``: :meth:`ffn` (the same operands and keyword
        attributes, plain weights) plus what its backward needs saved:
        ``(y, h, weights, indices)``, ``h`` the up projection's
        pre-activation in dispatch order (``(T*k) x 2I``), ``weights``
        ``T x k`` f32, ``indices`` ``T x k`` i32."""
        arguments = self._ffn_arguments(x, logits, w_up, w_down, bias, attributes)
        return tuple(self._ffn_family("ffn_train", None, arguments, ()))

    def ffn_grad(
        self,
        dy: Value,
        x: Value,
        logits: Value,
        w_up: Value,
        w_down: Value,
        bias: Optional[Value] = None,
        *,
        saved: Sequence[Value] = (),
        weight_grads: str = "f32",
        **attributes,
    ) -> Tuple[Value, ...]:
        """``moe.ffn_grad``: the gradients of :meth:`ffn` (the same operands
        and keyword attributes, plain weights) from ``dy`` (``T x H``):
        ``(dx, dlogits, dw_up, dw_down)``, the weight gradients f32
        (``weight_grads="f32"``) or in the weights' type (``"weights"``:
        each f32 sum rounded once, half the bytes), plus ``(dw_up_bias,
        dw_down_bias)`` f32 with the expert biases. ``saved``:
        :meth:`ffn_train`'s ``(h, weights, indices)`` (then no routing and
        no up GEMM are recomputed), or empty."""
        arguments = self._ffn_arguments(x, logits, w_up, w_down, bias, attributes)
        return tuple(self._ffn_family("ffn_grad", dy, arguments, saved, weight_grads))

    def _ffn_arguments(self, x, logits, w_up, w_down, bias, attributes):
        """:meth:`ffn`'s arguments for these, its defaults filled in (an
        unknown or missing keyword raises TypeError, as for ffn itself)."""
        bound = inspect.signature(FunctionBuilder.ffn).bind(
            self, x, logits, w_up, w_down, bias, **attributes
        )
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        return arguments

    def _ffn_family(self, op, dy, a, saved, weight_grads="f32"):
        """moe.ffn / ffn_train / ffn_grad (``op``) from :meth:`ffn`'s
        arguments ``a``, ``dy`` (ffn_grad) and ``saved`` (ffn_grad's
        saved form): the list of results."""
        raw = self._b.ffn_family(
            _caller_location(),
            op,
            _opt_raw(dy, "dy"),
            _raw_value(a["x"], "x"),
            _raw_value(a["logits"], "logits"),
            _raw_value(a["w_up"], "w_up"),
            _raw_value(a["w_down"], "w_down"),
            _opt_raw(a["bias"], "bias"),
            a["k"],
            a["scoring"],
            a["normalize"],
            a["n_group"],
            a["topk_group"],
            a["group_score"],
            float(a["scaling"]),
            a["activation"],
            a["layout"],
            float(a["alpha"]),
            None if a["limit"] is None else float(a["limit"]),
            float(a["up_bias"]),
            a["transpose_weights"],
            _opt_raw(a["w_up_bias"], "w_up_bias"),
            _opt_raw(a["w_down_bias"], "w_down_bias"),
            a["weight_format"],
            a["scale_fmt"],
            _opt_raw(a["w_up_scale"], "w_up_scale"),
            _opt_raw(a["w_down_scale"], "w_down_scale"),
            [_raw_value(v, n) for v, n in zip(saved, ("h", "weights", "indices"))],
            weight_grads,
        )
        return [Value(v) for v in raw]
