# ===- test_torch_ops.py - compiled functions as torch custom ops ---------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""moe_mlir_runtime.torch_op without a GPU (needs torch; skipped without
it): the operator registers once per name, its fake implementation gives
the manifest's output shapes and dtypes (symbolic T through make_fx),
torch.compile(fullgraph=True, dynamic=True) traces a model calling it in
one graph and one compilation for two token counts, and bad calls (device,
dtype, shape, contiguity) raise ArgumentError while tracing and, for real
tensors, before any launch. The calls on a GPU are the device checks'."""

import pytest

torch = pytest.importorskip("torch")

import moe_mlir_runtime as rt  # noqa: E402
from moe_mlir_runtime.artifact import Function  # noqa: E402
from moe_mlir_runtime.manifest import Manifest  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402


def _manifest(sha):
    T = [None, 64]
    return Manifest(
        {
            "format": rt.MANIFEST_FORMAT,
            "version": rt.MANIFEST_VERSION,
            "library": "layer.so",
            "sha256": sha,
            "calling_convention": "out-params",
            "functions": {
                "ffn": {
                    "args": [
                        {
                            "name": "x",
                            "kind": "tensor",
                            "dtype": "bf16",
                            "shape": T,
                            "symbols": ["T", None],
                        },
                        {
                            "name": "logits",
                            "kind": "tensor",
                            "dtype": "bf16",
                            "shape": [None, 8],
                            "symbols": ["T", None],
                        },
                        {
                            "name": "w_up",
                            "kind": "tensor",
                            "dtype": "f8E4M3FN",
                            "shape": [8, 256, 64],
                        },
                        {
                            "name": "w_up_scale",
                            "kind": "tensor",
                            "dtype": "f32",
                            "shape": [8, 2, 1],
                        },
                    ],
                    "results": [
                        {
                            "name": "result0",
                            "kind": "tensor",
                            "dtype": "bf16",
                            "shape": T,
                            "symbols": ["T", None],
                        }
                    ],
                }
            },
        }
    )


class _Artifact:
    """An artifact whose library is never reached (the tests' tensors fail
    the checks first, or are fake)."""

    def __init__(self, path, sha):
        self.path = path
        self.manifest = _manifest(sha)

    def fn(self, name):
        return Function(self, self.manifest.functions[name])


class _CpuFunction(Function):
    """A Function that runs on the CPU: no device / contiguity checks (the
    manifest's dtype and shape checks stay), zeros as the result."""

    def _check_values(self, values, offset=0):
        pass

    def __call__(self, *args, stream=None):
        shapes = self.spec.output_shapes([rt._info(v) for v in args])
        return torch.zeros(shapes[0], dtype=torch.bfloat16)


class _CpuArtifact(_Artifact):
    def fn(self, name):
        return _CpuFunction(self, self.manifest.functions[name])


@pytest.fixture(scope="module")
def cpu_op():
    return rt.torch_op(_CpuArtifact("/x/cpu.so", "d" * 64), "ffn", name="test_cpu_ffn")


def _inputs(T, device="cuda"):
    return (
        torch.empty(T, 64, dtype=torch.bfloat16, device=device),
        torch.empty(T, 8, dtype=torch.bfloat16, device=device),
        torch.empty(8, 256, 64, dtype=torch.float8_e4m3fn, device=device),
        torch.empty(8, 2, 1, dtype=torch.float32, device=device),
    )


@pytest.fixture(scope="module")
def op():
    return rt.torch_op(_Artifact("/x/layer.so", "a" * 64), "ffn", name="test_layer_ffn")


def test_registration(op):
    assert op is torch.ops.moe_mlir.test_layer_ffn
    assert rt.torch_op(_Artifact("/y/layer.so", "a" * 64), name="test_layer_ffn") is op
    with pytest.raises(ValueError, match="already registered for another library"):
        rt.torch_op(_Artifact("/z/layer.so", "b" * 64), name="test_layer_ffn")
    assert rt.op_name(_Artifact("/p/qwen3-30b.so", "c" * 64)) == "qwen3_30b_ffn"
    assert "Tensor x, Tensor logits, Tensor w_up, Tensor w_up_scale" in str(op.default._schema)


def test_fake_shapes_and_symbolic_T(op, cpu_op):
    with FakeTensorMode():
        y = op(*_inputs(5))
        assert tuple(y.shape) == (5, 64) and y.dtype == torch.bfloat16
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda *a: cpu_op(*a) * 2, tracing_mode="symbolic")(*_inputs(7, "cpu"))
    assert "torch.ops.moe_mlir.test_cpu_ffn.default" in gm.code
    # The output's first size is the inputs' symbol T, not 7.
    outs = [
        n for n in gm.graph.nodes if n.op == "call_function" and "test_cpu_ffn" in str(n.target)
    ]
    assert str(outs[0].meta["val"].shape[0]) != "7"


@pytest.mark.parametrize(
    "bad,message",
    [
        (lambda a: (a[0].to(torch.float32),) + a[1:], "bf16"),
        (lambda a: (a[0], a[1][:3]) + a[2:], "T"),
        (lambda a: a[:2] + (a[2][:4],) + a[3:], "8"),
        (lambda a: (a[0].t().contiguous().t(),) + a[1:], "not contiguous"),
        (lambda a: (a[0].cpu(),) + a[1:], "cuda:0"),
    ],
)
def test_bad_calls_fail_while_tracing(op, bad, message):
    with FakeTensorMode():
        args = bad(_inputs(6))
        with pytest.raises(rt.ArgumentError, match=message):
            op(*args)


def _compiled_model(op):
    """(model, graphs): the op in a torch.compile(fullgraph, dynamic) model
    whose backend records each graph it is given."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    @torch.compile(fullgraph=True, dynamic=True, backend=backend)
    def model(x, logits, w, s):
        return op(x + 1, logits, w, s).float().sum(dim=1)

    return model, graphs


def test_compile_fullgraph_dynamic(cpu_op):
    model, graphs = _compiled_model(cpu_op)
    for T in (5, 9, 33):
        assert tuple(model(*_inputs(T, device="cpu")).shape) == (T,)
    assert len(graphs) == 1, "one graph for every token count"
    assert "moe_mlir.test_cpu_ffn" in graphs[0].code


def test_compile_unbacked_T_one_graph(cpu_op):
    """T marked unbacked: one graph for every T, 1 included (dynamic=True
    alone specialises T = 0 and 1); the check that x and logits share T
    becomes a deferred run-time check."""
    model, graphs = _compiled_model(cpu_op)
    for T in (1, 7, 64):
        a = _inputs(T, device="cpu")
        torch._dynamo.decorators.mark_unbacked(a[0], 0)
        torch._dynamo.decorators.mark_unbacked(a[1], 0)
        assert tuple(model(*a).shape) == (T,)
    assert len(graphs) == 1


def test_compile_T_mismatch_is_an_argument_error(cpu_op):
    """Backed sizes under torch.compile: x and logits with different T fail
    with the op's ArgumentError while tracing."""
    c = torch.compile(lambda *a: cpu_op(*a), fullgraph=True, dynamic=True, backend="eager")
    a = _inputs(8, device="cpu")
    with pytest.raises(Exception) as info:
        c(a[0], a[1][:4], a[2], a[3])
    assert "ArgumentError" in str(info.value) and "dimension 0 (T) is" in str(info.value)


def test_compile_rejects_bad_calls_while_tracing(op):
    """The real operator under torch.compile: CPU tensors are rejected by
    the fake implementation while tracing, before anything runs."""

    @torch.compile(fullgraph=True, backend="eager")
    def model(x, logits, w, s):
        return op(x, logits, w, s)

    with pytest.raises(Exception, match="expected a tensor on cuda:0"):
        model(*_inputs(4, device="cpu"))
