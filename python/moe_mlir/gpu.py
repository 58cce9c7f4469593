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
file and links it exactly as `tools/moe-aot` does:

    c++ -shared obj libmoe_cuda_runtime.a -L<cuda stubs> -lcuda
        -static-libstdc++ -static-libgcc -Wl,--exclude-libs,libstdc++.a
        -Wl,-Bsymbolic -Wl,-z,defs

The library needs only the CUDA driver (libcuda.so.1) where it runs. Next to
it goes the manifest (`<stem>.manifest.json`, see runtime.py) that the
runtime checks calls against: each public function with its argument and
result shapes (null for dynamic dimensions), dtypes and the names of
dynamic dimensions that must agree.

When the core API cannot emit objects (an older or unbuilt extension), or
with `backend="moe-aot"`, the module is compiled by the `moe-aot` tool of the
build tree instead (same pipeline, same link).

Where things are found (first hit wins):
  runtime archive  $MOE_MLIR_CUDA_RUNTIME; next to the package
                   (moe_mlir/lib/, moe_mlir/); <prefix>/lib of an install or
                   build tree holding the package; the path configured into
                   build/bin/moe-aot; <repo>/build/lib
  driver stub dir  $MOE_MLIR_CUDA_LIB_DIR; the directory configured into
                   moe-aot; $CUDA_HOME/lib64/stubs; /usr/local/cuda/lib64/stubs
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

try:
    from . import runtime as _rt
except ImportError:  # loaded as a plain file next to runtime.py
    import runtime as _rt  # type: ignore[no-redef]

__all__ = ["compile_gpu", "function_specs", "lower_to_nvvm_pipeline",
           "find_runtime_library", "find_cuda_library_dir", "find_moe_aot",
           "CompileError", "FUSE_PIPELINE"]

FUSE_PIPELINE = "moe-decompose,moe-fuse"
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_RUNTIME_ARCHIVE = "libmoe_cuda_runtime.a"
_CHIP_RE = re.compile(r"^sm_[0-9]+[a-z]?$")


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


def _aot_configured(moe_aot, key):
    """A path CMake configured into a build tree's moe-aot script."""
    try:
        with open(moe_aot) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r'"%s":\s*"([^"@]*)"' % re.escape(key), text)
    return m.group(1) if m and m.group(1) else None


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
    candidates += [os.path.join(_PKG_DIR, "lib", _RUNTIME_ARCHIVE),
                   os.path.join(_PKG_DIR, _RUNTIME_ARCHIVE)]
    for d in _build_dirs():
        candidates.append(os.path.join(d, "lib", _RUNTIME_ARCHIVE))
    aot = find_moe_aot()
    if aot:
        candidates.append(_aot_configured(aot, "runtime_library"))
    for c in candidates:
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    raise CompileError(
        "cannot find the CUDA runtime library %s (was moe-mlir configured "
        "without the CUDA toolkit?); set MOE_MLIR_CUDA_RUNTIME" % _RUNTIME_ARCHIVE)


def find_cuda_library_dir():
    """A directory holding libcuda.so (the driver's link stub is enough)."""
    candidates = []
    env = os.environ.get("MOE_MLIR_CUDA_LIB_DIR")
    if env:
        candidates.append(env)
    aot = find_moe_aot()
    if aot:
        candidates.append(_aot_configured(aot, "cuda_library_dir"))
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        candidates += [os.path.join(home, "lib64", "stubs"),
                       os.path.join(home, "lib64")]
    candidates += ["/usr/local/cuda/lib64/stubs", "/usr/local/cuda/lib64"]
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "libcuda.so")):
            return c
    raise CompileError("cannot find libcuda.so (the driver or its link stub); "
                       "set MOE_MLIR_CUDA_LIB_DIR")


# ----------------------------------------------------------------------------
# Signatures -> manifest entries
# ----------------------------------------------------------------------------
#
# The manifest is read off the module's printed form: the func.func headers
# (types only, which the printer writes in one fixed form) and, to name the
# token dimension, the op names in each body. Nothing here builds IR.

_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}

# Ops whose every dynamic dimension 0, of every operand and result, is the
# token count T (their verifiers require it). A function whose body is one
# of them names that dimension "T": the runtime then checks that inputs
# agree on it and can allocate the outputs.
_TOKEN_OPS = frozenset(["moe.ffn", "moe.route", "moe.topk"])


def _scan_group(text, start):
    """Index just past the bracket group opening at text[start]."""
    stack = []
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in _OPEN:
            stack.append(_OPEN[c])
        elif c in _CLOSE:
            # '>' of '->' is not a bracket
            if c == ">" and i > 0 and text[i - 1] == "-":
                pass
            else:
                if not stack or stack[-1] != c:
                    raise ValueError("unbalanced %r at offset %d" % (c, i))
                stack.pop()
                if not stack:
                    return i + 1
        i += 1
    raise ValueError("unterminated group at offset %d" % start)


def _split_top(text, sep=","):
    """Splits at `sep` outside brackets and strings."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE and not (c == ">" and i > 0 and text[i - 1] == "-"):
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _strip_attrs(text):
    """`type {attrs} loc(...)` -> `type`."""
    text = re.sub(r"\s+loc\(.*\)\s*$", "", text.strip())
    if text.endswith("}"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            if text[i] == "}":
                depth += 1
            elif text[i] == "{":
                depth -= 1
                if depth == 0:
                    return text[:i].strip()
    return text


def parse_type(text):
    """An MLIR type -> (kind, shape or None, dtype, contiguous); raises
    ValueError for types the runtime cannot pass."""
    text = text.strip()
    if text in _rt.DTYPES:
        if _rt.DTYPES[text][2] is None:
            raise ValueError("scalar %s arguments are not supported" % text)
        return "scalar", None, text, True
    m = re.match(r"^(tensor|memref)<(.*)>$", text, re.S)
    if not m:
        raise ValueError("type %s is not supported (tensors, memrefs and "
                         "int / float scalars are)" % text)
    kind, body = m.group(1), m.group(2)
    parts = _split_top(body)
    shaped, extra = parts[0], parts[1:]
    if kind == "tensor" and extra:
        raise ValueError("tensor encodings are not supported: %s" % text)
    contiguous = True
    for e in extra:
        if e.startswith("strided<") or e.startswith("affine_map<"):
            contiguous = False
        elif re.match(r"^(\d+|#gpu\.address_space<global>)$", e) and e != "0":
            raise ValueError("memory space %s is not supported: %s" % (e, text))
    if shaped.startswith("*"):
        raise ValueError("unranked %s is not supported" % text)
    dims = shaped.split("x")
    dtype = dims.pop()
    if dtype not in _rt.DTYPES:
        raise ValueError("element type %s is not supported: %s" % (dtype, text))
    shape = []
    for d in dims:
        if d == "?":
            shape.append(None)
        elif d.isdigit():
            shape.append(int(d))
        else:
            raise ValueError("cannot read dimension %r of %s" % (d, text))
    return kind, shape, dtype, contiguous


_FUNC_RE = re.compile(
    r"(?m)^\s*func\.func\s+(?:(public|private|nested)\s+)?@(\"[^\"]+\"|[\w$.-]+)\s*\(")
_OP_RE = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([a-z_][\w]*\.[\w.]+|return)\b')


def _body_ops(body):
    """[(op name, its line)] of a function body."""
    ops = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("//") or line in ("{", "}"):
            continue
        m = _OP_RE.match(line)
        if m:
            ops.append((m.group(1), line))
    return ops


# Operand roles of moe.ffn in its custom form
# (`moe.ffn %x, %logits, %w_up, %w_down [bias(%b : ...)] ...`), to name the
# arguments of a function that only forwards them (printed as %argN).
_FFN_OPERANDS_RE = re.compile(
    r"moe\.ffn\s+%([\w$.-]+)\s*,\s*%([\w$.-]+)\s*,\s*%([\w$.-]+)\s*,"
    r"\s*%([\w$.-]+)(?:\s+bias\(\s*%([\w$.-]+))?")
_FFN_ROLES = ("x", "logits", "w_up", "w_down", "bias")


def _role_names(ops, arg_names):
    """{argument index: role name} for a body that is one moe.ffn."""
    core = [(n, line) for n, line in ops if n not in ("return", "func.return")]
    if len(core) != 1 or core[0][0] != "moe.ffn":
        return {}
    m = _FFN_OPERANDS_RE.search(core[0][1])
    if not m:
        return {}
    roles = {}
    for role, ssa in zip(_FFN_ROLES, m.groups()):
        if ssa is not None and ssa in arg_names:
            roles[arg_names.index(ssa)] = role
    return roles


def _parse_functions(text):
    """[(name, visibility, [(arg name, type)], [result types], body ops or
    None for a declaration)] of the top-level func.func ops."""
    out = []
    for m in _FUNC_RE.finditer(text):
        name = m.group(2).strip('"')
        open_paren = m.end() - 1
        close = _scan_group(text, open_paren)
        args = []
        for i, a in enumerate(_split_top(text[open_paren + 1:close - 1])):
            a = _strip_attrs(a)
            am = re.match(r"^%([\w$.-]+)\s*:\s*(.*)$", a, re.S)
            args.append((am.group(1), am.group(2).strip()) if am
                        else ("arg%d" % i, a))
        rest = text[close:]
        pos = 0
        results = []
        rm = re.match(r"\s*->\s*", rest)
        if rm:
            pos = rm.end()
            if rest[pos] == "(":
                end = _scan_group(rest, pos)
                results = [_strip_attrs(r) for r in _split_top(rest[pos + 1:end - 1])]
                pos = end
            else:
                end = pos
                depth = 0
                while end < len(rest):
                    c = rest[end]
                    if c in "<([":
                        depth += 1
                    elif c in ">)]":
                        depth -= 1
                    elif c.isspace() and depth == 0:
                        break
                    end += 1
                results = [rest[pos:end].strip()]
                pos = end
                am = re.match(r"\s*(\{)", rest[pos:])
                if am and not re.match(r"\s*\{\s*\n", rest[pos:]):
                    pos += am.start(1)  # result attributes {..}
                    pos = _scan_group(rest, pos)
        am = re.match(r"\s*attributes\s*", rest[pos:])
        if am:
            pos += am.end()
            pos = _scan_group(rest, pos)
        bm = re.match(r"[ \t]*\{", rest[pos:])
        ops = None
        if bm:
            start = pos + bm.end() - 1
            end = _scan_group(rest, start)
            ops = _body_ops(rest[start + 1:end - 1])
        out.append((name, m.group(1) or "public", args, results, ops))
    return out


def function_specs(text):
    """runtime.FunctionSpec for every public function defined in the module
    text (what the library exports as _mlir_ciface_<name>), in order."""
    specs = []
    for name, visibility, args, results, ops in _parse_functions(text):
        if visibility != "public" or ops is None:
            continue
        problems = []

        def spec_of(label, type_text, is_result):
            try:
                kind, shape, dtype, contiguous = parse_type(type_text)
            except ValueError as exc:
                problems.append("%s: %s" % (label, exc))
                return _rt.ArgSpec(label, "tensor", "f32", [], None)
            if is_result and kind == "scalar":
                problems.append("%s: scalar results are not supported" % label)
                return _rt.ArgSpec(label, "tensor", dtype, [], None)
            return _rt.ArgSpec(label, kind, dtype, shape, None, contiguous)

        # printed modules number their arguments (%arg0): name the ones a
        # lone moe.ffn uses by their role
        roles = _role_names(ops, [n for n, _ in args])
        a_specs = [spec_of(roles.get(i, n) if re.match(r"^arg\d+$", n) else n,
                           t, False) for i, (n, t) in enumerate(args)]
        r_specs = [spec_of("result%d" % i if len(results) > 1 else "result",
                           t, True) for i, t in enumerate(results)]
        if not problems:
            _name_token_dim(ops, a_specs, r_specs)
        specs.append(_rt.FunctionSpec(name, a_specs, r_specs,
                                      "; ".join(problems) or None))
    return specs


def _name_token_dim(ops, args, results):
    core = [n for n, _ in ops if n not in ("return", "func.return")]
    if len(core) != 1 or core[0] not in _TOKEN_OPS:
        return
    shaped = [s for s in args + results if not s.is_scalar]
    if any(size is None and d != 0
           for s in shaped for d, size in enumerate(s.shape)):
        return
    for s in shaped:
        if s.shape and s.shape[0] is None:
            s.symbols = ("T",) + tuple(s.symbols[1:])


# ----------------------------------------------------------------------------
# The core API, and the moe-aot fallback
# ----------------------------------------------------------------------------

def lower_to_nvvm_pipeline(chip="sm_90a", tile_m=64, tile_n=64, tile_k=16):
    """The `moe-lower-to-nvvm{...}` pipeline element for these options
    (validated here, so that nothing else reaches the pipeline text)."""
    chip, tiles = _check_options(chip, tile_m, tile_n, tile_k)
    return "moe-lower-to-nvvm{chip=%s tile-m=%d tile-n=%d tile-k=%d}" % (
        (chip,) + tiles)


def _check_options(chip, tile_m, tile_n, tile_k):
    if not isinstance(chip, str) or not _CHIP_RE.match(chip):
        raise ValueError("chip must name an SM architecture such as sm_90a, "
                         "got %r" % (chip,))
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
    return core is not None and hasattr(core.Module, "emit_object")


def _check_against_core(specs, core_module):
    """Compares the signatures read off the text with the core API's
    (`Module.functions`): they must agree on every tensor's shape and
    dtype."""
    functions = getattr(core_module, "functions", None)
    if functions is None:
        return
    functions = functions() if callable(functions) else functions
    for spec in specs:
        ftype = functions.get(spec.name)
        if ftype is None:
            raise CompileError("internal error: the core API does not list "
                               "@%s" % spec.name)
        for label, mine, theirs in (("argument", spec.args, ftype.inputs),
                                    ("result", spec.results, ftype.results)):
            if spec.unsupported:
                continue
            if len(mine) != len(theirs):
                raise CompileError("internal error: @%s has %d %ss, the core "
                                   "API says %d" % (spec.name, len(mine), label,
                                                    len(theirs)))
            for i, (a, t) in enumerate(zip(mine, theirs)):
                shape = getattr(t, "shape", None)
                if a.kind == "tensor" and shape is not None and (
                        tuple(shape) != a.shape or t.dtype != a.dtype):
                    raise CompileError(
                        "internal error: @%s %s %d read as %s, the core API "
                        "says %s" % (spec.name, label, i, a.type_text(), t))


def _run(command, what, verbose):
    if verbose:
        print("compile_gpu: [%s] %s" % (what, " ".join(shlex.quote(c) for c in command)))
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
    except OSError as exc:
        raise CompileError("%s: cannot run %s: %s" % (what, command[0], exc))
    if done.returncode != 0:
        raise CompileError("%s failed (exit code %d): %s\n%s" % (
            what, done.returncode, " ".join(shlex.quote(c) for c in command),
            (done.stderr + done.stdout).rstrip()))


def link_shared(obj, output, verbose=False, cxx=None, runtime_library=None,
                cuda_library_dir=None):
    """Links an object of lowered host code into a self-contained shared
    library, as tools/moe-aot does."""
    cxx = cxx or os.environ.get("CXX", "c++")
    runtime_library = runtime_library or find_runtime_library()
    cuda_library_dir = cuda_library_dir or find_cuda_library_dir()
    # -Bsymbolic: the module's calls bind to its own copy of the runtime even
    # when another library in the process exports mgpu* too. libstdc++ is
    # linked in but not re-exported.
    _run([cxx, "-shared", "-o", output, obj, runtime_library,
          "-L" + cuda_library_dir, "-lcuda",
          "-static-libstdc++", "-static-libgcc",
          "-Wl,--exclude-libs,libstdc++.a", "-Wl,-Bsymbolic", "-Wl,-z,defs"],
         "link", verbose)


def _core_step(what, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except CompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - MLIRError and friends
        raise CompileError("%s failed: %s" % (what, exc)) from exc


def _compile_core(core, module, text, specs, output, fuse, lower, temp_dir,
                  verbose):
    # what the link needs, before the (long) pipeline runs
    runtime_library = find_runtime_library()
    cuda_library_dir = find_cuda_library_dir()
    m = _core_step("parsing the module", _core_module, core, module, text)
    _check_against_core(specs, m)
    steps = ([FUSE_PIPELINE] if fuse else []) + [lower]
    for pipeline in steps:
        if verbose:
            print("compile_gpu: [core] run_pipeline(%r)" % pipeline)
        _core_step(pipeline, m.run_pipeline, pipeline)
    obj = os.path.join(temp_dir, "module.o")
    if verbose:
        print("compile_gpu: [core] emit_object(%r)" % obj)
    # as moe-aot's `llc -O2 -relocation-model=pic -filetype=obj`
    _core_step("emit_object", m.emit_object, obj, None, True, opt_level=2)
    link_shared(obj, output, verbose, runtime_library=runtime_library,
                cuda_library_dir=cuda_library_dir)


def _compile_aot(text, output, fuse, lower, temp_dir, verbose, keep):
    aot = find_moe_aot()
    if not aot:
        raise CompileError(
            "the core API cannot emit objects and no moe-aot was found "
            "(build moe-mlir, or set MOE_AOT)")
    src = os.path.join(temp_dir, "module.mlir")
    with open(src, "w") as f:
        f.write(text)
    # moe-opt flags: '--moe-lower-to-nvvm=chip=sm_90a tile-m=64 ...'
    name, _, options = lower.partition("{")
    flags = (["--moe-decompose", "--moe-fuse"] if fuse else []) + [
        "--%s=%s" % (name, options.rstrip("}"))]
    command = [aot, src, "-o", output, "--pipeline=" + " ".join(
        shlex.quote(f) for f in flags)]
    runtime_lib = os.environ.get("MOE_MLIR_CUDA_RUNTIME")
    if runtime_lib:
        command += ["--runtime", runtime_lib]
    if keep:
        command += ["--keep-temps", temp_dir]
    if verbose:
        command.append("-v")
    _run(command, "moe-aot", verbose)


def compile_gpu(module, path, chip="sm_90a", fuse=True, tile_m=64, tile_n=64,
                tile_k=16, *, backend="auto", keep_temps=None, verbose=False):
    """Compiles `module` (a moe_mlir.Module, MLIR text or a .mlir path) into
    the shared library `path` plus its manifest `<stem>.manifest.json`.
    Returns the library's absolute path.

    backend: "auto" (the core API when it can emit objects, else moe-aot),
    "core" or "moe-aot". keep_temps: a folder to keep the object file /
    input in. Raises CompileError when a step fails and ValueError for bad
    options."""
    lower = lower_to_nvvm_pipeline(chip, tile_m, tile_n, tile_k)
    if backend not in ("auto", "core", "moe-aot"):
        raise ValueError("backend must be auto, core or moe-aot, got %r" % (backend,))
    text = _module_text(module)
    specs = function_specs(text)
    if not specs:
        raise CompileError("the module defines no public func.func: nothing "
                           "would be exported")
    output = os.path.abspath(path)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    core = _core() if backend != "moe-aot" else None
    use_core = backend == "core" or (backend == "auto" and _can_emit_objects(core))
    if backend == "core" and not _can_emit_objects(core):
        raise CompileError("the core API (moe_mlir.Module.emit_object) is not "
                           "available")

    def build(temp_dir):
        if use_core:
            _compile_core(core, module, text, specs, output, fuse, lower,
                          temp_dir, verbose)
        else:
            _compile_aot(text, output, fuse, lower, temp_dir, verbose,
                         bool(keep_temps))

    # never leave a stale library or manifest behind a failed build
    for stale in (output, _rt.manifest_path(output)):
        if os.path.exists(stale):
            os.remove(stale)
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
        specs, library=os.path.basename(output),
        sha256=_rt.file_sha256(output),
        target={"chip": chip, "fuse": bool(fuse), "tile_m": tile_m,
                "tile_n": tile_n, "tile_k": tile_k},
        pipeline=",".join(pipeline),
        compiled_with="moe_mlir core API" if use_core else "moe-aot",
        module_sha256=hashlib.sha256(text.encode()).hexdigest(),
        created=datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"))
    manifest.write(_rt.manifest_path(output))
    return output
