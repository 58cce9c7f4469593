# ===- test_gpu_compile.py - compile_gpu and the runtime without a GPU ---=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Tests of moe_mlir.gpu and moe_mlir.runtime that need no GPU and no torch:

  * compile_gpu on a small moe.ffn: a .so exporting _mlir_ciface_ffn and the
    runtime's embedder API, needing only libcuda.so.1, and its manifest
    (skipped without the CUDA toolkit / runtime archive);
  * the runtime (moe_mlir_runtime, python/runtime) imports without torch
    and without the compiled extension;
  * manifest reading and argument checks raise clear errors;
  * the ctypes calling path end to end, against a fake host-only library
    (a C file compiled here) and a stand-in for torch over numpy arrays.

The calls on a real GPU are test/GPU/python_flow_check.py's job.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

PY_DIR = Path(__file__).resolve().parents[1]
RUNTIME_PY = PY_DIR / "runtime" / "moe_mlir_runtime" / "__init__.py"


from moe_mlir import gpu, runtime as rt  # noqa: E402
import moe_mlir  # noqa: E402


SMALL_FFN = textwrap.dedent("""\
    func.func @ffn(%x: tensor<?x32xf32>, %logits: tensor<?x8xf32>,
                   %w_up: tensor<8x32x128xf32>, %w_down: tensor<8x64x32xf32>)
        -> tensor<?x32xf32> attributes {llvm.emit_c_interface} {
      %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
          activation = silu layout = concat {normalize = true}
          : tensor<?x32xf32>, tensor<?x8xf32>, tensor<8x32x128xf32>,
            tensor<8x64x32xf32> -> tensor<?x32xf32>
      return %y : tensor<?x32xf32>
    }
    """)

# As the printer writes it: one line per op, the header on one line.
SMALL_FFN_PRINTED = (
    "module {\n"
    "  func.func @ffn(%arg0: tensor<?x32xf32>, %arg1: tensor<?x8xf32>, "
    "%arg2: tensor<8x32x128xf32>, %arg3: tensor<8x64x32xf32>) -> "
    "tensor<?x32xf32> attributes {llvm.emit_c_interface} {\n"
    "    %0 = moe.ffn %arg0, %arg1, %arg2, %arg3 k = 2 scoring = softmax "
    "activation = silu layout = concat {normalize = true} : "
    "tensor<?x32xf32>, tensor<?x8xf32>, tensor<8x32x128xf32>, "
    "tensor<8x64x32xf32> -> tensor<?x32xf32>\n"
    "    return %0 : tensor<?x32xf32>\n"
    "  }\n"
    "}\n"
)


def _ffn_manifest():
    return {
        "format": rt.MANIFEST_FORMAT,
        "version": rt.MANIFEST_VERSION,
        "calling_convention": "out-params",
        "functions": {
            "ffn": {
                "args": [
                    {
                        "name": "x",
                        "kind": "tensor",
                        "dtype": "bf16",
                        "shape": [None, 64],
                        "symbols": ["T", None],
                    },
                    {
                        "name": "logits",
                        "kind": "tensor",
                        "dtype": "bf16",
                        "shape": [None, 8],
                        "symbols": ["T", None],
                    },
                    {"name": "w_up", "kind": "tensor", "dtype": "bf16", "shape": [8, 256, 64]},
                    {"name": "w_down", "kind": "tensor", "dtype": "bf16", "shape": [8, 64, 128]},
                ],
                "results": [
                    {
                        "name": "result",
                        "kind": "tensor",
                        "dtype": "bf16",
                        "shape": [None, 64],
                        "symbols": ["T", None],
                    }
                ],
            }
        },
    }


# ----------------------------------------------------------------------------
# runtime.py without torch and without the extension
# ----------------------------------------------------------------------------

_BLOCKER = textwrap.dedent("""\
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch.") or name == "moe_mlir._moe":
                raise ImportError("blocked for the test: " + name)
            return None
    sys.meta_path.insert(0, Block())
    """)


def _run_python(code, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(_BLOCKER + textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=str(PY_DIR))
    return subprocess.run(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        env=env,
        cwd=str(tmp_path),
    )


def test_runtime_file_imports_without_torch_or_extension(tmp_path):
    """What test/GPU/memref_abi.py does with the package next to the
    artifacts: loads it from its __init__.py by path (registered in
    sys.modules first, so that it can import its modules)."""
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(_ffn_manifest()))
    done = _run_python(
        """
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("moe_mlir_runtime", %r)
        rt = importlib.util.module_from_spec(spec)
        sys.modules["moe_mlir_runtime"] = rt
        spec.loader.exec_module(rt)
        assert rt.torch is None
        m = rt.Manifest.read(%r)
        print(m.functions["ffn"].signature())
        try:
            rt.torch_dtype("f32")
        except RuntimeError as e:
            print("error:", e)
        """
        % (str(RUNTIME_PY), str(manifest)),
        tmp_path,
    )
    assert done.returncode == 0, done.stdout
    assert "ffn(x: bf16[T, 64], logits: bf16[T, 8]" in done.stdout
    assert "needs PyTorch" in done.stdout


def test_package_runtime_imports_without_torch_or_extension(tmp_path):
    """`from moe_mlir import runtime` must not need moe_mlir._moe."""
    done = _run_python(
        """
        from moe_mlir import runtime
        print("ok", runtime.MANIFEST_FORMAT, runtime.torch)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stdout
    assert "ok moe-mlir-gpu-artifact None" in done.stdout


def test_memref_abi_shim_finds_runtime(tmp_path):
    """test/GPU/memref_abi.py is a shim over runtime.Library."""
    shim = PY_DIR.parent / "test" / "GPU" / "memref_abi.py"
    stub = tmp_path / "stub"
    (stub / "torch").mkdir(parents=True)
    (stub / "torch" / "__init__.py").write_text("# stand-in\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(stub), str(shim.parent)]))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import memref_abi as m; print(issubclass(m.CompiledModule, "
            "m._runtime.Library), m.memref_descriptor.__name__, m._CU_STREAM_LEGACY)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
        env=env,
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == ["True", "memref_descriptor", "1"]


# ----------------------------------------------------------------------------
# Manifests and argument checks
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(format="something"), "format is 'something'"),
        (lambda d: d.update(version=99), "version 99"),
        (lambda d: d.update(calling_convention="results"), "calling convention"),
        (lambda d: d.update(functions={}), "no functions"),
        (lambda d: d["functions"]["ffn"].pop("results"), "missing list 'results'"),
        (
            lambda d: d["functions"]["ffn"]["args"][0].pop("dtype"),
            "function 'ffn' argument 0: missing 'dtype'",
        ),
        (lambda d: d["functions"]["ffn"]["args"][1].update(dtype="f8"), "unsupported dtype 'f8'"),
        (
            lambda d: d["functions"]["ffn"]["args"][2].update(shape=[8, -1, 64]),
            "shape must be a list of non-negative ints",
        ),
        (
            lambda d: d["functions"]["ffn"]["args"][0].update(symbols=["T"]),
            "symbols must be a list as long as shape",
        ),
        (
            lambda d: d["functions"]["ffn"]["args"][2].update(symbols=["E", None, None]),
            "static dimension 8 has a symbol 'E'",
        ),
        (lambda d: d["functions"]["ffn"]["args"][0].update(kind="vector"), "kind 'vector'"),
        (
            lambda d: d["functions"]["ffn"]["results"][0].update(
                kind="scalar", shape=None, dtype="f32", symbols=None
            ),
            "scalar results are not supported",
        ),
    ],
)
def test_bad_manifests_raise(edit, message):
    data = _ffn_manifest()
    edit(data)
    with pytest.raises(rt.ManifestError) as info:
        rt.Manifest(data, "x.manifest.json")
    assert message in str(info.value)
    assert "x.manifest.json" in str(info.value)


def test_manifest_files(tmp_path):
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"\x7fELF not really")
    assert rt.manifest_path(str(lib)) == str(tmp_path / "lib.manifest.json")
    with pytest.raises(rt.ManifestError, match="no manifest .*lib.manifest.json"):
        rt.load_manifest(str(lib))
    (tmp_path / "lib.manifest.json").write_text("{not json")
    with pytest.raises(rt.ManifestError, match="not valid JSON"):
        rt.load_manifest(str(lib))
    data = _ffn_manifest()
    data["sha256"] = rt.file_sha256(str(lib))
    m = rt.Manifest(data)
    m.write(str(tmp_path / "lib.manifest.json"))
    assert rt.load_manifest(str(lib)).data == data
    lib.write_bytes(b"\x7fELF rebuilt")
    with pytest.raises(rt.ManifestError, match="stale"):
        rt.load_manifest(str(lib))
    assert rt.load_manifest(str(lib), check_hash=False).functions["ffn"]


def test_argument_checks():
    ffn = rt.Manifest(_ffn_manifest()).functions["ffn"]
    W = [((8, 256, 64), "bf16"), ((8, 64, 128), "bf16")]
    good = [((5, 64), "bf16"), ((5, 8), "bf16")] + W
    assert ffn.check(good) == {"T": 5}
    assert ffn.output_shapes(good) == [(5, 64)]
    assert ffn.check(good, [((5, 64), "bf16")]) == {"T": 5}
    assert ffn.output_shapes([((0, 64), "bf16"), ((0, 8), "bf16")] + W) == [(0, 64)]

    def fails(inputs, outputs=None):
        with pytest.raises(rt.ArgumentError) as info:
            ffn.check(inputs, outputs)
        return str(info.value)

    assert "argument 0 (x): expected dtype bf16, got f32" in fails([((5, 64), "f32")] + good[1:])
    assert "argument 1 (logits): dimension 0 (T) is 7, but T is 5" in fails(
        [good[0], ((7, 8), "bf16")] + W
    )
    assert "expected shape bf16[T, 64], got [5, 32]" in fails([((5, 32), "bf16")] + good[1:])
    assert "expected rank 3" in fails(good[:2] + [((8, 256), "bf16"), W[1]])
    assert "output 0 (result): dimension 0 (T) is 4, but T is 5" in fails(good, [((4, 64), "bf16")])
    assert "expected a tensor" in fails(good[:3] + [(None, None)])
    assert "takes 4 inputs, then optionally its 1 output" in fails(good[:3])
    assert "got 3 arguments" in fails(good[:3])


def test_unnamed_dynamic_output_cannot_be_allocated():
    spec = gpu.function_specs(
        "func.func @gather(%a: tensor<?x16xf32>, %i: tensor<?xi32>) -> tensor<?x16xf32> {\n"
        "  %0 = moe.gather %a[%i] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>\n"
        "  return %0 : tensor<?x16xf32>\n}\n"
    )[0]
    # gather's M rows come from the indices, not from the first input: nothing
    # is assumed, the rows of input and indices may differ
    assert spec.check([((5, 16), "f32"), ((9,), "i32")]) == {}
    with pytest.raises(rt.ArgumentError, match="not determined by the inputs"):
        spec.output_shapes([((5, 16), "f32"), ((9,), "i32")])


# ----------------------------------------------------------------------------
# Reading signatures off the module
# ----------------------------------------------------------------------------


def test_function_specs_of_ffn():
    for text in (SMALL_FFN, SMALL_FFN_PRINTED):
        (spec,) = gpu.function_specs(text)
        assert spec.name == "ffn" and not spec.unsupported
        assert [a.shape for a in spec.args] == [(None, 32), (None, 8), (8, 32, 128), (8, 64, 32)]
        assert [a.symbols[0] for a in spec.args] == ["T", "T", None, None]
        assert spec.results[0].shape == (None, 32) and spec.results[0].symbols == ("T", None)
    # printed modules number the arguments; a lone moe.ffn names them
    for text in (SMALL_FFN, SMALL_FFN_PRINTED):
        assert [a.name for a in gpu.function_specs(text)[0].args] == [
            "x",
            "logits",
            "w_up",
            "w_down",
        ]
    with_bias = SMALL_FFN_PRINTED.replace(
        "%arg3: tensor<8x64x32xf32>)", "%arg3: tensor<8x64x32xf32>, %arg4: tensor<8xf32>)"
    ).replace("%arg3 k = 2", "%arg3 bias(%arg4 : tensor<8xf32>) k = 2")
    (spec,) = gpu.function_specs(with_bias)
    assert spec.signature() == (
        "ffn(x: f32[T, 32], logits: f32[T, 8], w_up: f32[8, 32, 128], "
        "w_down: f32[8, 64, 32], bias: f32[8]) -> f32[T, 32]"
    )


def test_function_specs_of_other_signatures():
    text = textwrap.dedent("""\
        module {
          func.func private @decl(f32) -> f32
          func.func private @helper(%a: tensor<4xf32>) -> tensor<4xf32> {
            return %a : tensor<4xf32>
          }
          func.func @route(%l: tensor<?x16xbf16>, %b: tensor<16xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) attributes {llvm.emit_c_interface} {
            %w, %i = moe.route %l bias(%b : tensor<16xf32>) k = 2 scoring = sigmoid : tensor<?x16xbf16> -> tensor<?x2xf32>, tensor<?x2xi32>
            return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
          }
          func.func @mixed(%m: memref<?x?xf32, strided<[?, 1], offset: ?>>, %s: f32, %n: index, %k: i1) {
            return
          }
          func.func @odd(%v: vector<4xf32>, %u: tensor<*xf32>) -> tensor<2x?xf16> {
            %c3 = arith.constant 3 : index
            %0 = tensor.empty(%c3) : tensor<2x?xf16>
            return %0 : tensor<2x?xf16>
          }
        }
        """)
    specs = {s.name: s for s in gpu.function_specs(text)}
    assert sorted(specs) == ["mixed", "odd", "route"]  # private ones are not exported
    route = specs["route"]
    assert [(r.dtype, r.shape, r.symbols) for r in route.results] == [
        ("f32", (None, 2), ("T", None)),
        ("i32", (None, 2), ("T", None)),
    ]
    assert route.args[1].shape == (16,) and route.args[1].symbols == (None,)
    mixed = specs["mixed"]
    assert [(a.kind, a.dtype) for a in mixed.args] == [
        ("memref", "f32"),
        ("scalar", "f32"),
        ("scalar", "index"),
        ("scalar", "i1"),
    ]
    assert mixed.args[0].contiguous is False and mixed.results == []
    assert mixed.args[0].symbols == (None, None)  # not a token op: nothing named
    odd = specs["odd"]
    assert odd.unsupported == (
        "v: type vector<4xf32> is not supported (tensors, memrefs and int / "
        "float scalars are); u: unranked tensor<*xf32> is not supported"
    )
    with pytest.raises(rt.ArgumentError, match="cannot be called"):
        odd.check([])
    # the manifest keeps the unsupported function and says why
    m = rt.Manifest.build(list(specs.values()))
    assert rt.Manifest(m.data).functions["odd"].unsupported == odd.unsupported


def test_function_specs_names_and_problems():
    text = textwrap.dedent("""\
        func.func @half(%h: f16, %c: memref<4xf32, 1>, %q: memref<?x4xf32, strided<[4, 1]>>) -> f32 {
          %0 = arith.constant 1.0 : f32
          return %0 : f32
        }
        func.func nested @hidden() {
          return
        }
        func.func public @pub(%a: memref<2x3xi8>, %b: memref<*xf32>, %c: ui8, %d: i32,
                              %e: tensor<4xcomplex<f32>>) {
          return
        }
        func.func @topk(%arg0: tensor<?x16xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
          %v, %i = moe.topk %arg0 k = 2 : tensor<?x16xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
          return %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
        }
        func.func @ffn(%arg0: tensor<?x32xf32>, %gate: tensor<?x8xf32>,
                       %arg2: tensor<8x32x128xf32>, %down: tensor<8x64x32xf32>) -> tensor<?x32xf32> {
          %y = moe.ffn %arg0, %gate, %arg2, %down k = 2 scoring = softmax
              activation = silu layout = concat
              : tensor<?x32xf32>, tensor<?x8xf32>, tensor<8x32x128xf32>,
                tensor<8x64x32xf32> -> tensor<?x32xf32>
          return %y : tensor<?x32xf32>
        }
        """)
    specs = {s.name: s for s in gpu.function_specs(text)}
    assert list(specs) == ["half", "pub", "topk", "ffn"]  # nested: not exported
    half = specs["half"]
    assert half.unsupported == (
        "h: scalar f16 arguments are not supported; c: memory space 1 is not "
        "supported: memref<4xf32, 1>; result: scalar results are not supported"
    )
    q = half.args[2]
    assert (q.name, q.kind, q.shape, q.contiguous) == ("q", "memref", (None, 4), False)
    pub = specs["pub"]
    assert pub.unsupported == (
        "b: unranked memref<*xf32> is not supported; e: element type "
        "complex<f32> is not supported: tensor<4xcomplex<f32>>"
    )
    a = pub.args[0]
    assert (a.kind, a.dtype, a.shape, a.contiguous) == ("memref", "i8", (2, 3), True)
    assert [(x.kind, x.dtype) for x in pub.args[2:4]] == [("scalar", "ui8"), ("scalar", "i32")]
    # a token op names T; only moe.ffn gives numbered arguments role names
    topk = specs["topk"]
    assert topk.signature() == "topk(arg0: f32[T, 16]) -> (f32[T, 2], i32[T, 2])"
    ffn = specs["ffn"]
    assert [x.name for x in ffn.args] == ["x", "gate", "w_up", "down"]
    assert [x.symbols[0] for x in ffn.args] == ["T", "T", None, None]
    with pytest.raises(moe_mlir.MLIRError, match="failed to parse"):
        gpu.function_specs("func.func @f(")


def test_function_specs_of_modules(tmp_path):
    m = moe_mlir.Module()
    with moe_mlir.FunctionBuilder(
        m,
        "layer",
        inputs=[
            moe_mlir.TensorType([None, 32], "f32"),
            moe_mlir.TensorType([None, 8], "f32"),
            moe_mlir.TensorType([8, 32, 128], "f32"),
            moe_mlir.TensorType([8, 64, 32], "f32"),
        ],
    ) as f:
        f.ret(f.ffn(*f.args, k=2, scoring="softmax", activation="silu", layout="concat"))
    signature = (
        "layer(x: f32[T, 32], logits: f32[T, 8], w_up: f32[8, 32, 128], "
        "w_down: f32[8, 64, 32]) -> f32[T, 32]"
    )
    assert [s.signature() for s in gpu.function_specs(m)] == [signature]
    # the module object and its printed text read alike
    assert [s.signature() for s in gpu.function_specs(str(m))] == [signature]
    path = tmp_path / "layer.mlir"
    path.write_text(str(m))
    assert [s.signature() for s in gpu.function_specs(str(path))] == [signature]
    # after fusion the body is no lone token op: numbered names, no T
    fused = m.clone().run_pipeline(gpu.FUSE_PIPELINE)
    (spec,) = gpu.function_specs(fused)
    assert [a.name for a in spec.args] == ["arg0", "arg1", "arg2", "arg3"]
    assert all(y is None for a in spec.args + spec.results for y in a.symbols)


def test_pipeline_text_and_option_checks():
    assert (
        gpu.lower_to_nvvm_pipeline("sm_90a", 64, 32, 16)
        == "moe-lower-to-nvvm{chip=sm_90a tile-m=64 tile-n=32 tile-k=16}"
    )
    for bad in (
        dict(chip="sm90"),
        dict(chip="sm_90a tile-m=1"),
        dict(tile_m=0),
        dict(tile_k=True),
        dict(tile_n=16.0),
    ):
        with pytest.raises(ValueError):
            gpu.compile_gpu(SMALL_FFN, "/nonexistent/x.so", **bad)
    # more --moe-lower-to-nvvm options, underscores or dashes, in order
    assert gpu.lower_to_nvvm_pipeline(
        options={"wgmma_swap_mn_major": False, "wgmma-producer-registers": 56, "gemm": "simt"}
    ) == (
        "moe-lower-to-nvvm{chip=sm_90a tile-m=64 tile-n=64 tile-k=16 "
        "wgmma-swap-mn-major=false wgmma-producer-registers=56 gemm=simt}"
    )
    for bad, message in (
        (["wgmma_swap_mn_major"], "dict"),
        ({"chip": "sm_80"}, "set by compile_gpu"),
        ({"tile_m": 32}, "set by compile_gpu"),
        ({"format": "ptx"}, "embeds cubins"),
        ({"Wgmma": 1}, "not an option name"),
        ({"a b": 1}, "not an option name"),
        ({3: 1}, "not an option name"),
        ({"gemm": "simt chip=sm_80"}, "plain word"),
        ({"gemm": "simt}"}, "plain word"),
        ({"wgmma_stages": 2.0}, "plain word"),
        ({"wgmma_stages": None}, "plain word"),
    ):
        with pytest.raises(ValueError, match=message):
            gpu.compile_gpu(SMALL_FFN, "/nonexistent/x.so", options=bad)
    with pytest.raises(ValueError, match="backend"):
        gpu.compile_gpu(SMALL_FFN, "/nonexistent/x.so", backend="nvcc")
    with pytest.raises(gpu.CompileError, match="no public func.func"):
        gpu.compile_gpu("func.func private @f() {\n  return\n}\n", "/nonexistent/x.so")


# ----------------------------------------------------------------------------
# compile_gpu (needs the CUDA toolkit and the runtime archive, not a GPU)
# ----------------------------------------------------------------------------


def _toolchain_or_skip():
    from helpers import gpu_toolchain_or_skip

    gpu_toolchain_or_skip()


def _backends():
    out = []
    if gpu._can_emit_objects(gpu._core()):
        out.append("core")
    if gpu.find_moe_aot():
        out.append("moe-aot")
    return out or ["none"]


def _dynamic_symbols(so):
    nm = shutil.which("nm") or shutil.which("llvm-nm-22") or shutil.which("llvm-nm")
    if not nm:
        pytest.skip("no nm")
    out = subprocess.run(
        [nm, "-D", "--defined-only", so],
        stdout=subprocess.PIPE,
        universal_newlines=True,
        check=True,
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def _needed(so):
    readelf = shutil.which("readelf") or shutil.which("llvm-readelf-22")
    if not readelf:
        return None
    out = subprocess.run(
        [readelf, "-d", so], stdout=subprocess.PIPE, universal_newlines=True, check=True
    ).stdout
    return {line.split("[")[1].split("]")[0] for line in out.splitlines() if "NEEDED" in line}


@pytest.mark.parametrize("backend", _backends())
def test_compile_gpu_small_ffn(tmp_path, backend):
    if backend == "none":
        pytest.skip("neither the core API's emit_object nor moe-aot is available")
    _toolchain_or_skip()
    out = gpu.compile_gpu(SMALL_FFN, str(tmp_path / "sub" / "small.so"), tile_m=32, backend=backend)
    assert out == str(tmp_path / "sub" / "small.so") and os.path.isfile(out)
    syms = _dynamic_symbols(out)
    for s in (
        "_mlir_ciface_ffn",
        "moeRuntimeSetStream",
        "moeRuntimeGetLastError",
        "moeRuntimeClearError",
        "moeRuntimeSynchronize",
        "mgpuLaunchKernel",
    ):
        assert s in syms, s
    needed = _needed(out)
    if needed is not None:
        extra = {
            n
            for n in needed
            if not n.startswith(
                (
                    "libc.so",
                    "libm.so",
                    "libdl.so",
                    "libpthread.so",
                    "librt.so",
                    "ld-linux",
                    "libgcc_s",
                )
            )
        }
        assert extra == {"libcuda.so.1"}, needed
    manifest = rt.load_manifest(out)  # checks the sha256 too
    assert manifest.library == "small.so"
    assert manifest.data["target"] == {
        "chip": "sm_90a",
        "fuse": True,
        "tile_m": 32,
        "tile_n": 64,
        "tile_k": 16,
        "options": {},
    }
    assert manifest.data["pipeline"] == (
        "moe-decompose,moe-fuse,moe-lower-to-nvvm{chip=sm_90a tile-m=32 tile-n=64 tile-k=16}"
    )
    assert manifest.data["compiled_with"] == (
        "moe_mlir core API" if backend == "core" else "moe-aot"
    )
    ffn = manifest.functions["ffn"]
    assert ffn.signature() == (
        "ffn(x: f32[T, 32], logits: f32[T, 8], w_up: f32[8, 32, 128], "
        "w_down: f32[8, 64, 32]) -> f32[T, 32]"
    )


def test_backends_build_the_same_library(tmp_path):
    """One compile path: moe-aot and the core API run the same C++ (lib/AOT)
    for the object and the link, so their libraries are byte-identical."""
    if sorted(_backends()) != ["core", "moe-aot"]:
        pytest.skip("needs both the core API and moe-aot")
    _toolchain_or_skip()
    core = gpu.compile_gpu(SMALL_FFN, str(tmp_path / "core.so"), backend="core")
    aot = gpu.compile_gpu(SMALL_FFN, str(tmp_path / "aot.so"), backend="moe-aot")
    assert Path(core).read_bytes() == Path(aot).read_bytes()


def test_compile_gpu_unfused_from_file(tmp_path):
    if _backends() == ["none"]:
        pytest.skip("neither the core API's emit_object nor moe-aot is available")
    _toolchain_or_skip()
    src = tmp_path / "layer.mlir"
    src.write_text(SMALL_FFN)
    out = gpu.compile_gpu(
        str(src),
        str(tmp_path / "layer.so"),
        fuse=False,
        tile_n=32,
        tile_k=8,
        keep_temps=str(tmp_path / "temps"),
    )
    assert "_mlir_ciface_ffn" in _dynamic_symbols(out)
    m = rt.load_manifest(out)
    assert m.data["pipeline"] == "moe-lower-to-nvvm{chip=sm_90a tile-m=64 tile-n=32 tile-k=8}"
    assert m.data["target"]["fuse"] is False


def test_compile_gpu_with_options(tmp_path):
    """options reach the pipeline and the manifest; the pipeline rejects
    names and values it does not take (CompileError, no library left)."""
    if _backends() == ["none"]:
        pytest.skip("neither the core API's emit_object nor moe-aot is available")
    _toolchain_or_skip()
    out = gpu.compile_gpu(
        SMALL_FFN,
        str(tmp_path / "opts.so"),
        options={"wgmma_producer_registers": 56, "programmatic_launch": False},
    )
    m = rt.load_manifest(out)
    assert m.data["target"]["options"] == {
        "wgmma-producer-registers": "56",
        "programmatic-launch": "false",
    }
    assert m.data["pipeline"].endswith(
        "moe-lower-to-nvvm{chip=sm_90a tile-m=64 tile-n=64 tile-k=16 "
        "wgmma-producer-registers=56 programmatic-launch=false}"
    )
    for bad, message in (
        ({"no_such_option": 1}, "no_such_option|no-such-option"),
        ({"wgmma_producer_registers": 44}, "wgmma-producer-registers must be"),
    ):
        with pytest.raises((gpu.CompileError, RuntimeError, ValueError), match=message):
            gpu.compile_gpu(SMALL_FFN, str(tmp_path / "bad.so"), options=bad)
        assert not os.path.exists(tmp_path / "bad.so")


def test_compile_errors_are_reported(tmp_path):
    if _backends() == ["none"]:
        pytest.skip("neither the core API's emit_object nor moe-aot is available")
    _toolchain_or_skip()
    bad = SMALL_FFN.replace("k = 2", "k = 9")  # k > E: the verifier rejects it
    # an earlier build's files must not survive a failed one
    (tmp_path / "bad.so").write_bytes(b"old")
    (tmp_path / "bad.manifest.json").write_text("{}")
    with pytest.raises((gpu.CompileError, RuntimeError, ValueError)) as info:
        gpu.compile_gpu(bad, str(tmp_path / "bad.so"))
    assert "k" in str(info.value)
    assert not os.path.exists(tmp_path / "bad.so")
    assert not os.path.exists(tmp_path / "bad.manifest.json")


# ----------------------------------------------------------------------------
# The calling path, end to end, on the host: a fake runtime library and a
# stand-in for torch over numpy arrays
# ----------------------------------------------------------------------------

FAKE_LIB_C = r"""
#include <stdint.h>
#include <stdio.h>

typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } D2;
static char message[256];
static int failed;
static void *stream;
static int64_t calls;

void moeRuntimeSetStream(void *s) { stream = s; }
void *moeRuntimeGetStream(void) { return stream; }
const char *moeRuntimeGetLastError(void) { return failed ? message : 0; }
void moeRuntimeClearError(void) { failed = 0; }
int moeRuntimeSynchronize(void) { return failed ? -1 : 0; }
int64_t fakeCalls(void) { return calls; }

/* y = s * x; T == 13 records an error instead */
void _mlir_ciface_scale(D2 *x, float s, D2 *y) {
  ++calls;
  if (x->sizes[0] == 13) {
    snprintf(message, sizeof message, "fake launch failed: T=%lld (in mgpuLaunchKernel)",
             (long long)x->sizes[0]);
    failed = 1;
    return;
  }
  for (int64_t i = 0; i < x->sizes[0]; ++i)
    for (int64_t j = 0; j < x->sizes[1]; ++j)
      y->aligned[y->offset + i * y->strides[0] + j * y->strides[1]] =
          s * x->aligned[x->offset + i * x->strides[0] + j * x->strides[1]];
}
"""

SCALE_MLIR = (
    "func.func @scale(%x: tensor<?x4xf32>, %s: f32) -> tensor<?x4xf32> {\n"
    "  %0 = arith.constant 0 : index\n  return %x : tensor<?x4xf32>\n}\n"
)


@pytest.fixture
def fake_lib(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler")
    src = tmp_path / "fake.c"
    src.write_text(FAKE_LIB_C)
    so = tmp_path / "libfake.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return str(so)


class _FakeTorch(types.ModuleType):
    """Just what runtime.py touches, over numpy arrays ("on cuda:0")."""

    def __init__(self, np):
        super().__init__("torch")
        self.np = np
        self.float32, self.int32, self.int64 = "dt:float32", "dt:int32", "dt:int64"
        self.float16, self.bfloat16, self.float64 = "dt:float16", "dt:bfloat16", "dt:float64"
        self.int8, self.int16, self.uint8, self.bool = "dt:int8", "dt:int16", "dt:uint8", "dt:bool"
        fake = self

        class Tensor:
            def __init__(self, array, device_index=0):
                self.a = array
                self.device = types.SimpleNamespace(index=device_index, type="cuda")
                self.is_cuda = device_index is not None
                self.dtype = "dt:" + str(array.dtype)

            shape = property(lambda self: self.a.shape)

            def dim(self):
                return self.a.ndim

            def stride(self, i=None):
                s = tuple(x // self.a.itemsize for x in self.a.strides)
                return s if i is None else s[i]

            def is_contiguous(self):
                return self.a.flags["C_CONTIGUOUS"]

            def data_ptr(self):
                return self.a.ctypes.data

            def untyped_storage(self):
                base = self.a if self.a.base is None else self.a.base
                return types.SimpleNamespace(data_ptr=lambda: base.ctypes.data)

        self.Tensor = Tensor
        stream = types.SimpleNamespace(cuda_stream=0)
        self.cuda = types.SimpleNamespace(
            is_available=lambda: False, init=lambda: None, current_stream=lambda device=None: stream
        )

        def empty(shape, dtype=None, device=None):
            return Tensor(fake.np.full(shape, fake.np.nan, dtype=dtype[3:]))

        self.empty = empty


@pytest.fixture
def fake_torch(monkeypatch):
    np = pytest.importorskip("numpy")
    fake = _FakeTorch(np)
    monkeypatch.setattr(rt, "torch", fake)
    monkeypatch.setattr(rt, "_torch_dtype_names", None)
    return fake


def test_calls_through_the_fake_runtime(fake_lib, fake_torch, tmp_path):
    np, T = fake_torch.np, fake_torch.Tensor
    (spec,) = gpu.function_specs(SCALE_MLIR)
    # name the token dimension by hand (no token op in this body)
    spec.args[0].symbols = spec.results[0].symbols = ("T", None)
    manifest = rt.Manifest.build([spec], library="libfake.so", sha256=rt.file_sha256(fake_lib))
    manifest.write(rt.manifest_path(fake_lib))
    art = rt.load(fake_lib)
    scale = art.fn("scale")
    assert art.scale is scale and art.functions == ["scale"]
    assert scale.signature == "scale(x: f32[T, 4], s: f32) -> f32[T, 4]"
    lib = art.library._lib
    lib.moeRuntimeGetStream.restype = ctypes.c_void_p

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    # allocating form; a scalar passed by value as a C float
    y = scale(T(x), 2.5)
    assert np.array_equal(y.a, 2.5 * x)
    assert lib.moeRuntimeGetStream() == rt.CU_STREAM_LEGACY  # torch's 0 -> legacy
    # out-param form, into a view with a storage offset, on a given stream
    buf = np.full((5, 4), -1.0, dtype=np.float32)
    out = T(buf[1:4])
    assert scale(T(x), ctypes.c_float(-1.0), out, stream=7) is out
    assert np.array_equal(buf[1:4], -x) and (buf[0] == -1).all() and (buf[4] == -1).all()
    assert lib.moeRuntimeGetStream() == 7
    art.set_stream(9)
    scale(T(x), 1.0, out)
    assert lib.moeRuntimeGetStream() == 9
    art.set_stream(None)
    assert scale.output_shapes(T(x), 1.0) == [(3, 4)]

    # argument checks: nothing is called
    calls = lib.fakeCalls()
    bad = [
        ((T(x.astype(np.int32)), 1.0), "expected dtype f32, got i32"),
        ((T(x), 1.0, T(np.zeros((2, 4), np.float32))), "dimension 0 (T) is 2, but T is 3"),
        ((T(x), T(x)), "expected a Python number, got a tensor"),
        ((T(x), "2"), "expected a number, got str"),
        ((x, 1.0), "expected a torch tensor, got ndarray"),
        ((T(x, device_index=1), 1.0), "expected a tensor on cuda:0"),
        ((T(np.zeros((4, 3), np.float32).T), 1.0), "is not contiguous"),
        ((T(x),), "takes 2 inputs"),
    ]
    for args, message in bad:
        with pytest.raises(rt.ArgumentError) as info:
            scale(*args)
        assert message in str(info.value), (message, str(info.value))
    assert lib.fakeCalls() == calls

    # the runtime's recorded error is raised with its message, then cleared
    with pytest.raises(
        RuntimeError,
        match=r"@scale: fake launch failed: T=13 "
        r"\(in mgpuLaunchKernel\)",
    ):
        scale(T(np.zeros((13, 4), np.float32)), 1.0)
    art.synchronize()
    scale(T(x), 1.0)

    # a manifest that names a function the library does not export
    data = json.loads(json.dumps(manifest.data))
    data["functions"]["missing"] = data["functions"]["scale"]
    with pytest.raises(rt.ManifestError, match="@missing, which .* does not export"):
        rt.load(fake_lib, manifest=data)
    # without a manifest: only the raw memref calls
    raw = rt.load(fake_lib, manifest=False)
    with pytest.raises(rt.ManifestError, match="without a manifest"):
        raw.fn("scale")
    y = T(np.zeros((3, 4), np.float32))
    raw.library.call("scale", T(x), ctypes.c_float(3.0), y)
    assert np.array_equal(y.a, 3 * x)


def test_unnamed_dims_need_outputs(fake_lib, fake_torch):
    np, T = fake_torch.np, fake_torch.Tensor
    specs = gpu.function_specs(SCALE_MLIR)  # body is not a token op: no symbols
    art = rt.load(fake_lib, manifest=rt.Manifest.build(specs).data)
    x = np.ones((2, 4), np.float32)
    with pytest.raises(rt.ArgumentError, match="allocate the outputs and pass them"):
        art.fn("scale")(T(x), 1.0)
    y = T(np.zeros((2, 4), np.float32))
    art.fn("scale")(T(x), 4.0, y)
    assert (y.a == 4).all()


# ----------------------------------------------------------------------------
# With torch (not on this machine; on the GPU machine python_flow_check.py
# covers the calls)
# ----------------------------------------------------------------------------


def test_torch_dtypes_and_cpu_tensors(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(rt, "_torch_dtype_names", None)
    for name in ("f32", "bf16", "f16", "i32", "i64", "i1"):
        assert rt.dtype_name(rt.torch_dtype(name)) == name
    ffn = rt.Function(
        types.SimpleNamespace(path="x.so"), rt.Manifest(_ffn_manifest()).functions["ffn"]
    )
    x = torch.zeros(2, 64, dtype=torch.bfloat16)
    with pytest.raises(rt.ArgumentError, match="cuda:0"):
        ffn.allocate_outputs(
            x,
            torch.zeros(2, 8, dtype=torch.bfloat16),
            torch.zeros(8, 256, 64, dtype=torch.bfloat16),
            torch.zeros(8, 64, 128, dtype=torch.bfloat16),
        )


@pytest.mark.parametrize(
    "name,sizes,signature",
    [
        (
            "deepseek-v3-fp8",
            dict(hidden=256, intermediate=128, experts=16, n_group=2, topk_group=1),
            "ffn(x: bf16[T, 256], logits: f32[T, 16], w_up: f8E4M3FN[16, 256, 256], "
            "w_down: f8E4M3FN[16, 256, 128], bias: f32[16], w_up_scale: f32[16, 2, 2], "
            "w_down_scale: f32[16, 2, 1]) -> bf16[T, 256]",
        ),
        (
            "gpt-oss-120b-mxfp4",
            dict(hidden=64, intermediate=64, experts=4),
            "ffn(x: bf16[T, 64], logits: bf16[T, 4], w_up: i8[4, 128, 32], "
            "w_down: i8[4, 64, 32], w_up_bias: bf16[4, 128], w_down_bias: bf16[4, 64], "
            "w_up_scale: f8E8M0FNU[4, 128, 2], w_down_scale: f8E8M0FNU[4, 64, 2]) -> bf16[T, 64]",
        ),
    ],
)
def test_compile_gpu_low_precision(tmp_path, name, sizes, signature):
    """The low-precision presets compile for the GPU (FP8: the Hopper
    kernels; MXFP4: the SIMT engine) and their manifests name the formats'
    element types, which the runtime passes as torch.float8_e4m3fn /
    float8_e8m0fnu / int8 tensors (test/GPU/lowprec runs them)."""
    if _backends() == ["none"]:
        pytest.skip("neither the core API's emit_object nor moe-aot is available")
    _toolchain_or_skip()
    cfg = moe_mlir.PRESETS[name].replace(**sizes)
    out = gpu.compile_gpu(moe_mlir.ffn_from_config(cfg, T=None), str(tmp_path / (name + ".so")))
    manifest = rt.load_manifest(out)
    assert manifest.functions["ffn"].signature() == signature
    assert rt.DTYPES["f8E4M3FN"][:2] == ("float8_e4m3fn", 1)
    assert rt.DTYPES["f8E8M0FNU"][:2] == ("float8_e8m0fnu", 1)
