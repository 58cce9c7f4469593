# ===- gpu.py - compile moe modules into GPU artifacts ---------------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""Ahead-of-time compilation of a moe module for an NVIDIA GPU.

    from moe_mlir import gpu, runtime
    so = gpu.compile_gpu(module, "qwen3.so")          # + qwen3.manifest.json
    art = runtime.load(so)                            # on the GPU machine

`compile_gpu` runs, through the core API, `moe-decompose,moe-fuse` (when
`fuse`), then `moe-lower-to-nvvm{chip tile-m tile-n tile-k}` (the module
becomes LLVM dialect with the kernels embedded as a cubin), emits an object
file and links it. Object emission and the link are lib/AOT's (moe::aot,
through the extension), the same C++ that the `moe-aot` tool runs, so both
produce the same library:

    c++ -shared obj libmoe_cuda_runtime.a -L<cuda stubs> -lcuda
        -static-libstdc++ -static-libgcc -Wl,--exclude-libs,libstdc++.a
        -Wl,-Bsymbolic -Wl,-z,defs

The library needs only the CUDA driver (libcuda.so.1) where it runs. Next to
it goes the manifest (`<stem>.manifest.json`, see moe_mlir_runtime) that the
runtime checks calls against: each public function with its argument and
result shapes (null for dynamic dimensions), dtypes and the names of
dynamic dimensions that must agree. The signatures are read off the IR by
the extension (`function_specs`), so compiling needs the built package in
every case.

When the core API cannot emit objects (an older extension without
`Module.emit_object` or `link_shared`), or with `backend="moe-aot"`, the
module is compiled by the `moe-aot` tool of the build tree instead (same
pipeline, same C++ for the object and the link).

Where things are found (first hit wins):
  runtime archive  $MOE_MLIR_CUDA_RUNTIME; next to the package
                   (moe_mlir/lib/, moe_mlir/); <prefix>/lib of an install or
                   build tree holding the package; the path configured into
                   the extension's build (lib/AOT); <repo>/build/lib
  driver stub dir  $MOE_MLIR_CUDA_LIB_DIR; the directory configured into the
                   extension's build; $CUDA_HOME/lib64/stubs;
                   /usr/local/cuda/lib64/stubs
  moe-aot          $MOE_AOT; <build>/bin/moe-aot as above; PATH
  build trees      $MOE_MLIR_BUILD_DIR; the folders above the package;
                   <repo>/build
"""

import datetime
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from . import runtime as _rt

__all__ = [
    "compile_gpu",
    "function_specs",
    "lower_to_nvvm_pipeline",
    "find_runtime_library",
    "find_cuda_library_dir",
    "find_moe_aot",
    "CompileError",
    "FUSE_PIPELINE",
]

FUSE_PIPELINE = "moe-decompose,moe-fuse"
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_RUNTIME_ARCHIVE = "libmoe_cuda_runtime.a"
_CHIP_RE = re.compile(r"^sm_[0-9]+[a-z]?$")
_OPTION_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_OPTION_VALUE_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
# --moe-lower-to-nvvm options compile_gpu sets itself (chip and the SIMT
# tiles are its own arguments; the library embeds cubins).
_RESERVED_OPTIONS = ("chip", "tile-m", "tile-n", "tile-k", "format")


class CompileError(RuntimeError):
    """A compilation step failed; the message says which and why."""


# ----------------------------------------------------------------------------
# Finding the runtime archive, the driver stub and moe-aot
# ----------------------------------------------------------------------------


def _build_dirs():
    """Build or install prefixes that may hold bin/moe-aot and lib/."""
    dirs = []
    env = os.environ.get("MOE_MLIR_BUILD_DIR")
    if env:
        dirs.append(env)
    # the package inside a build / install tree (<prefix>/python_packages/
    # moe_mlir, <prefix>/lib/pythonX/site-packages/moe_mlir, ...)
    d = os.path.dirname(_PKG_DIR)
    for _ in range(4):
        if d == os.path.dirname(d):
            break
        dirs.append(d)
        d = os.path.dirname(d)
    # the source tree: <repo>/python/moe_mlir -> <repo>/build
    dirs.append(os.path.join(os.path.dirname(os.path.dirname(_PKG_DIR)), "build"))
    # a build tree without the CUDA runtime (e.g. one for the Python package
    # alone): the default build/ of its source tree
    for d in list(dirs):
        source = _cmake_source_dir(d)
        if source:
            dirs.append(os.path.join(source, "build"))
    seen, out = set(), []
    for d in dirs:
        d = os.path.normpath(d)
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _cmake_source_dir(build_dir):
    """The source directory a CMake build tree of moe-mlir was made from."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("moe-mlir_SOURCE_DIR:"):
                    return line.split("=", 1)[1].strip() or None
    except OSError:
        pass
    return None


def _configured(key):
    """A path configured into the extension's build (moe::aot), or None."""
    core = _core()
    if core is None:
        return None
    from . import _moe

    return getattr(_moe, key, None) or None


def find_moe_aot():
    """The moe-aot tool, or None."""
    env = os.environ.get("MOE_AOT")
    if env:
        return env if os.access(env, os.X_OK) else None
    for d in _build_dirs():
        candidate = os.path.join(d, "bin", "moe-aot")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("moe-aot")


def find_runtime_library():
    """The static CUDA runtime (libmoe_cuda_runtime.a) to link."""
    candidates = []
    env = os.environ.get("MOE_MLIR_CUDA_RUNTIME")
    if env:
        candidates.append(env)
    candidates += [
        os.path.join(_PKG_DIR, "lib", _RUNTIME_ARCHIVE),
        os.path.join(_PKG_DIR, _RUNTIME_ARCHIVE),
    ]
    for d in _build_dirs():
        candidates.append(os.path.join(d, "lib", _RUNTIME_ARCHIVE))
    candidates.append(_configured("CONFIGURED_RUNTIME_LIBRARY"))
    for c in candidates:
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    raise CompileError(
        "cannot find the CUDA runtime library %s (was moe-mlir configured "
        "without the CUDA toolkit?); set MOE_MLIR_CUDA_RUNTIME" % _RUNTIME_ARCHIVE
    )


def find_cuda_library_dir():
    """A directory holding libcuda.so (the driver's link stub is enough)."""
    candidates = []
    env = os.environ.get("MOE_MLIR_CUDA_LIB_DIR")
    if env:
        candidates.append(env)
    candidates.append(_configured("CONFIGURED_CUDA_LIBRARY_DIR"))
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        candidates += [os.path.join(home, "lib64", "stubs"), os.path.join(home, "lib64")]
    candidates += ["/usr/local/cuda/lib64/stubs", "/usr/local/cuda/lib64"]
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "libcuda.so")):
            return c
    raise CompileError(
        "cannot find libcuda.so (the driver or its link stub); set MOE_MLIR_CUDA_LIB_DIR"
    )


# ----------------------------------------------------------------------------
# Signatures -> manifest entries
# ----------------------------------------------------------------------------
#
# The manifest is taken from the IR through the extension
# (`_moe.function_signatures`, python/src/Signatures.cpp): each public
# func.func with a body, the facts about its argument and result types, the
# argument names of the source text, the roles of the arguments of a lone
# moe.ffn and whether the body is one token op (moe.ffn, moe.route,
# moe.topk: every dynamic dimension 0 of their operands and results is the
# token count T, their verifiers require it). What the runtime can pass is
# decided here, against its dtype table.


def _signatures(module):
    """The extension's signatures of a moe_mlir.Module or of MLIR text."""
    core = _core()
    if core is None:
        raise CompileError(
            "reading function signatures needs the moe_mlir extension "
            "(moe_mlir._moe); build the package (bash .ci/setup) or install "
            "it (pip install ./python)"
        )
    from . import _moe

    if isinstance(module, core.Module):
        return _moe.function_signatures(module._m)
    return _moe.function_signatures(_module_text(module), _moe._Context.default(), "<string>")


def _type_spec(t):
    """(kind, shape or None, dtype, contiguous) of a type the extension
    described; raises ValueError for types the runtime cannot pass."""
    kind, text, dtype = t["kind"], t["type"], t["dtype"]
    if kind == "scalar" and dtype in _rt.DTYPES:
        if _rt.DTYPES[dtype][2] is None:
            raise ValueError("scalar %s arguments are not supported" % dtype)
        return "scalar", None, dtype, True
    if kind not in ("tensor", "memref"):
        raise ValueError(
            "type %s is not supported (tensors, memrefs and int / float scalars are)" % text
        )
    if t["encoding"]:
        raise ValueError("tensor encodings are not supported: %s" % text)
    if t["memory_space"] is not None:
        raise ValueError("memory space %s is not supported: %s" % (t["memory_space"], text))
    if t["shape"] is None:
        raise ValueError("unranked %s is not supported" % text)
    if dtype not in _rt.DTYPES:
        raise ValueError("element type %s is not supported: %s" % (dtype, text))
    return kind, list(t["shape"]), dtype, t["contiguous"]


def _arg_name(index, arg):
    """The source name; numbered ones (%arg0, and every argument of a module
    that was not parsed from text) by their moe.ffn role when they have
    one."""
    name = arg["name"] or "arg%d" % index
    if arg["role"] and re.match(r"^arg\d+$", name):
        return arg["role"]
    return name


def function_specs(module):
    """runtime.FunctionSpec for every public function defined in `module` (a
    moe_mlir.Module, MLIR text or a .mlir path; what the library exports as
    _mlir_ciface_<name>), in order. Raises moe_mlir.MLIRError when text does
    not parse or verify, CompileError without the extension."""
    specs = []
    for f in _signatures(module):
        problems = []

        def spec_of(label, t, is_result):
            try:
                kind, shape, dtype, contiguous = _type_spec(t)
            except ValueError as exc:
                problems.append("%s: %s" % (label, exc))
                return _rt.ArgSpec(label, "tensor", "f32", [], None)
            if is_result and kind == "scalar":
                problems.append("%s: scalar results are not supported" % label)
                return _rt.ArgSpec(label, "tensor", dtype, [], None)
            return _rt.ArgSpec(label, kind, dtype, shape, None, contiguous)

        results = f["results"]
        a_specs = [spec_of(_arg_name(i, a), a, False) for i, a in enumerate(f["args"])]
        r_specs = [
            spec_of("result%d" % i if len(results) > 1 else "result", t, True)
            for i, t in enumerate(results)
        ]
        if not problems and f["token_op"]:
            _name_token_dim(a_specs, r_specs)
        specs.append(_rt.FunctionSpec(f["name"], a_specs, r_specs, "; ".join(problems) or None))
    return specs


def _name_token_dim(args, results):
    """Names dimension 0 "T" where it is dynamic, when no other dimension
    is: the runtime then checks that inputs agree on it and can allocate
    the outputs."""
    shaped = [s for s in args + results if not s.is_scalar]
    if any(size is None and d != 0 for s in shaped for d, size in enumerate(s.shape)):
        return
    for s in shaped:
        if s.shape and s.shape[0] is None:
            s.symbols = ("T",) + tuple(s.symbols[1:])


# ----------------------------------------------------------------------------
# The core API, and the moe-aot fallback
# ----------------------------------------------------------------------------


def lower_to_nvvm_pipeline(chip="sm_90a", tile_m=64, tile_n=64, tile_k=16, options=None):
    """The `moe-lower-to-nvvm{...}` pipeline element for these options
    (validated here, so that nothing else reaches the pipeline text).

    options: more --moe-lower-to-nvvm options, a mapping from the option's
    name (dashes or underscores: "wgmma_producer_registers") to a bool, an int or a
    plain word, e.g. {"wgmma_swap_mn_major": False, "wgmma_producer_registers":
    56}; the pipeline checks the names and values it knows."""
    chip, tiles = _check_options(chip, tile_m, tile_n, tile_k)
    text = "chip=%s tile-m=%d tile-n=%d tile-k=%d" % ((chip,) + tiles)
    for name, value in _check_nvvm_options(options):
        text += " %s=%s" % (name, value)
    return "moe-lower-to-nvvm{%s}" % text


def _check_nvvm_options(options):
    """[(name, value text)] of a compile_gpu `options` mapping, in its
    order; ValueError for anything that is not an option name and a plain
    value, or an option compile_gpu sets itself."""
    if options is None:
        return []
    if not isinstance(options, dict):
        raise ValueError(
            "options must be a dict of --moe-lower-to-nvvm options, got %r" % (options,)
        )
    out = []
    for name, value in options.items():
        key = name.replace("_", "-") if isinstance(name, str) else name
        if not isinstance(key, str) or not _OPTION_NAME_RE.match(key):
            raise ValueError("options: %r is not an option name" % (name,))
        if key in _RESERVED_OPTIONS:
            raise ValueError(
                "options: %r is set by compile_gpu itself (%s)"
                % (name, "its own argument" if key != "format" else "the library embeds cubins")
            )
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, str) and _OPTION_VALUE_RE.match(value):
            text = value
        else:
            raise ValueError("options: %s=%r is not a bool, an int or a plain word" % (name, value))
        out.append((key, text))
    return out


def _check_options(chip, tile_m, tile_n, tile_k):
    if not isinstance(chip, str) or not _CHIP_RE.match(chip):
        raise ValueError("chip must name an SM architecture such as sm_90a, got %r" % (chip,))
    tiles = []
    for name, v in (("tile_m", tile_m), ("tile_n", tile_n), ("tile_k", tile_k)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError("%s must be a positive int, got %r" % (name, v))
        tiles.append(v)
    return chip, tuple(tiles)


def _core():
    """The core package (moe_mlir) when its extension is importable."""
    try:
        import moe_mlir

        moe_mlir.Module  # noqa: B018 - the extension's classes are there
    except Exception:  # noqa: BLE001 - unbuilt / broken extension
        return None
    return moe_mlir


def _module_text(module):
    """MLIR text of a moe_mlir.Module, a path to a .mlir file or text."""
    if isinstance(module, os.PathLike):
        with open(module) as f:
            return f.read()
    if isinstance(module, str):
        if "\n" not in module and module.endswith(".mlir") and os.path.isfile(module):
            with open(module) as f:
                return f.read()
        return module
    fn = getattr(module, "to_string", None)
    if callable(fn):
        text = fn()
        if isinstance(text, str):
            return text
    return str(module)


def _core_module(core, module, text):
    """A core Module to lower: a copy of `module` (its locations kept), or
    `text` parsed. The caller's module is left as it was."""
    if isinstance(module, core.Module):
        return module.clone()
    return core.Module.parse(text)


def _can_emit_objects(core):
    if core is None or not hasattr(core.Module, "emit_object"):
        return False
    from . import _moe

    return hasattr(_moe, "link_shared")


def _run(command, what, verbose):
    if verbose:
        print("compile_gpu: [%s] %s" % (what, " ".join(shlex.quote(c) for c in command)))
    try:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True
        )
    except OSError as exc:
        raise CompileError("%s: cannot run %s: %s" % (what, command[0], exc))
    if done.returncode != 0:
        raise CompileError(
            "%s failed (exit code %d): %s\n%s"
            % (
                what,
                done.returncode,
                " ".join(shlex.quote(c) for c in command),
                (done.stderr + done.stdout).rstrip(),
            )
        )


def link_shared(obj, output, verbose=False, cxx=None, runtime_library=None, cuda_library_dir=None):
    """Links an object of lowered host code into a self-contained shared
    library with moe::aot::linkSharedLibrary, as moe-aot does."""
    from . import _moe

    cxx = cxx or os.environ.get("CXX", "c++")
    runtime_library = runtime_library or find_runtime_library()
    cuda_library_dir = cuda_library_dir or find_cuda_library_dir()
    if verbose:
        print(
            "compile_gpu: [link] %s"
            % " ".join(
                shlex.quote(c)
                for c in _moe.link_command(obj, output, cxx, runtime_library, cuda_library_dir)
            )
        )
    try:
        _moe.link_shared(obj, output, cxx, runtime_library, cuda_library_dir)
    except Exception as exc:  # noqa: BLE001 - MLIRError
        raise CompileError(str(exc)) from exc


def _core_step(what, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except CompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - MLIRError and friends
        raise CompileError("%s failed: %s" % (what, exc)) from exc


def _compile_core(core, module, text, output, fuse, lower, temp_dir, verbose):
    # what the link needs, before the (long) pipeline runs
    runtime_library = find_runtime_library()
    cuda_library_dir = find_cuda_library_dir()
    m = _core_step("parsing the module", _core_module, core, module, text)
    steps = ([FUSE_PIPELINE] if fuse else []) + [lower]
    for pipeline in steps:
        if verbose:
            print("compile_gpu: [core] run_pipeline(%r)" % pipeline)
        # verified once on the result, as moe-aot does
        _core_step(pipeline, m.run_pipeline, pipeline, verify_each=False)
    obj = os.path.join(temp_dir, "module.o")
    if verbose:
        print("compile_gpu: [core] emit_object(%r)" % obj)
    # moe::aot::emitObjectFile with moe-aot's options (host triple, PIC, -O2)
    _core_step("emit_object", m.emit_object, obj, None, True, opt_level=2)
    link_shared(
        obj, output, verbose, runtime_library=runtime_library, cuda_library_dir=cuda_library_dir
    )


def _compile_aot(text, output, fuse, lower, temp_dir, verbose, keep):
    aot = find_moe_aot()
    if not aot:
        raise CompileError(
            "the core API cannot emit objects and no moe-aot was found "
            "(build moe-mlir, or set MOE_AOT)"
        )
    src = os.path.join(temp_dir, "module.mlir")
    with open(src, "w") as f:
        f.write(text)
    # moe-opt flags: '--moe-lower-to-nvvm=chip=sm_90a tile-m=64 ...'
    name, _, options = lower.partition("{")
    flags = (["--moe-decompose", "--moe-fuse"] if fuse else []) + [
        "--%s=%s" % (name, options.rstrip("}"))
    ]
    # Locations name the source as the core API does ("<string>"), not the
    # temporary file: the same library from both backends and every run.
    command = [
        aot,
        src,
        "-o",
        output,
        "--source-name=<string>",
        "--pipeline=" + " ".join(shlex.quote(f) for f in flags),
    ]
    runtime_lib = os.environ.get("MOE_MLIR_CUDA_RUNTIME")
    if runtime_lib:
        command += ["--runtime", runtime_lib]
    if keep:
        command += ["--keep-temps", temp_dir]
    if verbose:
        command.append("-v")
    _run(command, "moe-aot", verbose)


def compile_gpu(
    module,
    path,
    chip="sm_90a",
    fuse=True,
    tile_m=64,
    tile_n=64,
    tile_k=16,
    *,
    options=None,
    backend="auto",
    keep_temps=None,
    verbose=False,
):
    """Compiles `module` (a moe_mlir.Module, MLIR text or a .mlir path) into
    the shared library `path` plus its manifest `<stem>.manifest.json`.
    Returns the library's absolute path.

    options: more --moe-lower-to-nvvm options (lower_to_nvvm_pipeline),
    e.g. {"wgmma_producer_registers": 64}; a name or value the pipeline does
    not take raises CompileError.
    backend: "auto" (the core API when it can emit objects, else moe-aot),
    "core" or "moe-aot". keep_temps: a folder to keep the object file /
    input in. Raises CompileError when a step fails and ValueError for bad
    options."""
    lower = lower_to_nvvm_pipeline(chip, tile_m, tile_n, tile_k, options)
    if backend not in ("auto", "core", "moe-aot"):
        raise ValueError("backend must be auto, core or moe-aot, got %r" % (backend,))
    output = os.path.abspath(path)
    # never leave a stale library or manifest behind a failed build
    for stale in (output, _rt.manifest_path(output)):
        if os.path.exists(stale):
            os.remove(stale)
    text = _module_text(module)
    # a Module as it is; text (or a file) parsed, with its argument names
    core = _core()
    source = module if core is not None and isinstance(module, core.Module) else text
    specs = _core_step("reading the function signatures", function_specs, source)
    if not specs:
        raise CompileError("the module defines no public func.func: nothing would be exported")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    if backend == "moe-aot":
        core = None
    use_core = backend == "core" or (backend == "auto" and _can_emit_objects(core))
    if backend == "core" and not _can_emit_objects(core):
        raise CompileError("the core API (moe_mlir.Module.emit_object) is not available")

    def build(temp_dir):
        if use_core:
            _compile_core(core, module, text, output, fuse, lower, temp_dir, verbose)
        else:
            _compile_aot(text, output, fuse, lower, temp_dir, verbose, bool(keep_temps))

    if keep_temps:
        os.makedirs(keep_temps, exist_ok=True)
        with open(os.path.join(keep_temps, "module.mlir"), "w") as f:
            f.write(text)
        build(keep_temps)
    else:
        with tempfile.TemporaryDirectory(prefix="moe-gpu-") as temp_dir:
            build(temp_dir)
    if not os.path.isfile(output):
        raise CompileError("no library was written to %s" % output)

    pipeline = ([FUSE_PIPELINE] if fuse else []) + [lower]
    manifest = _rt.Manifest.build(
        specs,
        library=os.path.basename(output),
        sha256=_rt.file_sha256(output),
        target={
            "chip": chip,
            "fuse": bool(fuse),
            "tile_m": tile_m,
            "tile_n": tile_n,
            "tile_k": tile_k,
            "options": dict(_check_nvvm_options(options)),
        },
        pipeline=",".join(pipeline),
        compiled_with="moe_mlir core API" if use_core else "moe-aot",
        module_sha256=hashlib.sha256(text.encode()).hexdigest(),
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    manifest.write(_rt.manifest_path(output))
    return output


def compiler_identity(backend="auto"):
    """What identifies the compiler a `compile_gpu(..., backend)` call runs:
    moe_mlir's version, the tool (the core API or moe-aot) and the sha256
    of its binary (the Python extension or the moe-aot executable) and of
    the CUDA runtime every library links in (libmoe_cuda_runtime.a), so
    that a rebuilt compiler or runtime is a different compiler (the
    cache's compiler key)."""
    from . import __version__

    core = _core()
    if backend == "moe-aot" or (backend == "auto" and not _can_emit_objects(core)):
        tool, binary = "moe-aot", find_moe_aot()
    else:
        from . import _moe

        tool, binary = "core", getattr(_moe, "__file__", None)
    if not binary or not os.path.isfile(binary):
        raise CompileError("no compiler for backend %r (%s not found)" % (backend, tool))
    identity = {"moe_mlir": __version__, "tool": tool, "sha256": _rt.file_sha256(binary)}
    try:
        identity["runtime_sha256"] = _rt.file_sha256(find_runtime_library())
    except CompileError:
        pass  # (compile_gpu then fails to link anyway)
    return identity


def cache_key(module, chip="sm_90a", fuse=True, tile_m=64, tile_n=64, tile_k=16, *, options=None):
    """The cache's source key of `module` compiled so (compile_cached's
    arguments): what `moe_mlir_runtime.find_cached` / `load_cached` take on
    a machine without the compiler."""
    lower = lower_to_nvvm_pipeline(chip, tile_m, tile_n, tile_k, options)
    pipeline = ",".join(([FUSE_PIPELINE] if fuse else []) + [lower])
    return _rt.cache.source_key(_module_text(module), pipeline)


def compile_cached(
    module,
    chip="sm_90a",
    fuse=True,
    tile_m=64,
    tile_n=64,
    tile_k=16,
    *,
    options=None,
    cache_dir=None,
    name="layer",
    backend="auto",
    rebuild=False,
    verbose=False,
):
    """compile_gpu through the on-disk cache (moe_mlir_runtime.cache): the
    library of `module` compiled with these arguments by this compiler, built
    on the first call and taken from the cache afterwards (also by later
    processes); an entry that is corrupt or stale (its library does not
    match its manifest, its key file is missing or names other keys) is
    rebuilt, as is every entry with `rebuild`. Returns the library path
    (`moe_mlir_runtime.load` it). `cache_dir`: the cache root (default
    $MOE_MLIR_CACHE_DIR, $XDG_CACHE_HOME/moe_mlir, ~/.cache/moe_mlir);
    `name`: the library's file name stem."""
    if not re.match(r"^[A-Za-z0-9_.-]+$", name or ""):
        raise ValueError("name must be a plain file name stem, got %r" % (name,))
    cache = _rt.cache
    lower = lower_to_nvvm_pipeline(chip, tile_m, tile_n, tile_k, options)
    pipeline = ",".join(([FUSE_PIPELINE] if fuse else []) + [lower])
    text = _module_text(module)
    skey = cache.source_key(text, pipeline)
    identity = compiler_identity(backend)
    ckey = cache.compiler_key(identity)
    folder = cache.entry_dir(cache_dir, skey, ckey)
    if not rebuild:
        hit = cache.valid_entry(folder, skey, ckey)
        if hit:
            if verbose:
                print("moe_mlir: cache hit %s" % hit)
            return hit
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".build-", dir=parent)
    try:
        library = compile_gpu(
            module,
            os.path.join(staging, name + ".so"),
            chip,
            fuse,
            tile_m,
            tile_n,
            tile_k,
            options=options,
            backend=backend,
            verbose=verbose,
        )
        cache.write_key(staging, skey, ckey, library, pipeline, identity)
        if rebuild:
            shutil.rmtree(folder, ignore_errors=True)
        library = cache.publish(staging, folder, skey, ckey)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if verbose:
        print("moe_mlir: cached %s" % library)
    return library
