# ===- test_compile_cache.py - the on-disk library cache ------------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""moe_mlir.gpu.compile_cached and moe_mlir_runtime's cache (no GPU needed):
a second compile of the same module, pipeline and compiler is a hit (the
compiler does not run); a corrupt library, a missing or foreign key file
are detected and rebuilt; another compiler gets its own entry; other
options are another source key; the runtime finds an entry by its source
key alone, as on a machine without the compiler."""

import json
import os

import pytest

import moe_mlir
from moe_mlir import gpu, runtime as rt
from helpers import gpu_toolchain_or_skip


@pytest.fixture
def layer():
    gpu_toolchain_or_skip()
    if not (gpu._can_emit_objects(gpu._core()) or gpu.find_moe_aot()):
        pytest.skip("neither the core API's emit_object nor moe-aot is available")
    cfg = moe_mlir.PRESETS["qwen3-30b-a3b"].replace(hidden=64, intermediate=64, experts=4, top_k=2)
    return moe_mlir.ffn_from_config(cfg, T=None)


@pytest.fixture
def counting(monkeypatch):
    """Counts the compile_gpu calls compile_cached makes."""
    calls = []
    real = gpu.compile_gpu

    def compile_gpu(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(gpu, "compile_gpu", compile_gpu)
    return calls


def test_hit_miss_and_runtime_lookup(tmp_path, layer, counting):
    a = gpu.compile_cached(layer, cache_dir=str(tmp_path), name="qwen")
    assert len(counting) == 1 and os.path.basename(a) == "qwen.so"
    assert rt.load_manifest(a).functions["ffn"].args[0].dtype == "bf16"
    # The second call (another "process": nothing is held in memory) is a hit.
    assert gpu.compile_cached(layer, cache_dir=str(tmp_path), name="qwen") == a
    assert len(counting) == 1
    # The runtime finds it by the source key alone (no compiler needed).
    key = gpu.cache_key(layer)
    assert rt.find_cached(key, str(tmp_path)) == a
    assert rt.find_cached("0" * 64, str(tmp_path)) is None
    with pytest.raises(rt.ManifestError, match="no valid cached library"):
        rt.load_cached("0" * 64, str(tmp_path))
    # Other options, another chip, unfused: other source keys.
    keys = {
        key,
        gpu.cache_key(layer, options={"wgmma_stages": 4}),
        gpu.cache_key(layer, chip="sm_80"),
        gpu.cache_key(layer, fuse=False),
    }
    assert len(keys) == 4
    # $MOE_MLIR_CACHE_DIR is the default root.
    os.environ["MOE_MLIR_CACHE_DIR"] = str(tmp_path)
    try:
        assert rt.find_cached(key) == a
    finally:
        del os.environ["MOE_MLIR_CACHE_DIR"]


@pytest.mark.parametrize("damage", ["library", "manifest", "key-missing", "key-foreign", "rebuild"])
def test_stale_entries_are_rebuilt(tmp_path, layer, counting, damage):
    a = gpu.compile_cached(layer, cache_dir=str(tmp_path))
    folder = os.path.dirname(a)
    key_file = os.path.join(folder, rt.cache.KEY_FILE)
    if damage == "library":
        with open(a, "r+b") as f:
            f.seek(100)
            f.write(b"\xff\xfe\xfd\xfc")
    elif damage == "manifest":
        os.remove(rt.manifest_path(a))
    elif damage == "key-missing":
        os.remove(key_file)
    elif damage == "key-foreign":
        with open(key_file) as f:
            key = json.load(f)
        key["source_key"] = "f" * 64
        with open(key_file, "w") as f:
            json.dump(key, f)
    if damage != "rebuild":
        assert rt.cache.valid_entry(folder) is None or damage == "key-foreign"
        assert rt.find_cached(gpu.cache_key(layer), str(tmp_path)) is None
    b = gpu.compile_cached(layer, cache_dir=str(tmp_path), rebuild=damage == "rebuild")
    assert b == a and len(counting) == 2
    assert rt.cache.valid_entry(folder, gpu.cache_key(layer)) == a


def test_another_compiler_gets_its_own_entry(tmp_path, layer, counting, monkeypatch):
    a = gpu.compile_cached(layer, cache_dir=str(tmp_path))
    real = gpu.compiler_identity
    monkeypatch.setattr(
        gpu, "compiler_identity", lambda backend="auto": dict(real(backend), sha256="0" * 64)
    )
    b = gpu.compile_cached(layer, cache_dir=str(tmp_path))
    assert len(counting) == 2 and os.path.dirname(a) != os.path.dirname(b)
    assert os.path.dirname(os.path.dirname(a)) == os.path.dirname(os.path.dirname(b))
    # Both stay valid; without a compiler key the runtime takes the newest.
    key = gpu.cache_key(layer)
    assert rt.find_cached(key, str(tmp_path), ckey=os.path.basename(os.path.dirname(a))) == a
    os.utime(os.path.join(os.path.dirname(a), rt.cache.KEY_FILE), (1, 1))
    assert rt.find_cached(key, str(tmp_path)) == b


def test_a_rebuilt_runtime_is_another_compiler(tmp_path, monkeypatch):
    """Every library links the CUDA runtime in: a rebuilt runtime (a fix in
    it) must not find the libraries linked with the old one."""
    gpu_toolchain_or_skip()
    runtime = gpu.find_runtime_library()
    ident = gpu.compiler_identity()
    assert ident["runtime_sha256"] == rt.file_sha256(runtime)
    other = tmp_path / os.path.basename(runtime)
    with open(runtime, "rb") as f:
        other.write_bytes(f.read() + b"\n")
    monkeypatch.setenv("MOE_MLIR_CUDA_RUNTIME", str(other))
    assert gpu.compiler_identity()["runtime_sha256"] != ident["runtime_sha256"]
    assert gpu.compiler_identity()["sha256"] == ident["sha256"]


def test_bad_name():
    with pytest.raises(ValueError, match="plain file name"):
        gpu.compile_cached("module {}", name="../x")
