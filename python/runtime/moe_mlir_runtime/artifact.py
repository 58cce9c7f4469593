# ===- artifact.py - a loaded artifact and its functions, on torch --------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""The torch-facing API: `load` opens an artifact (a compiled library and
its manifest) as an `Artifact`, whose `Function`s are called on PyTorch CUDA
tensors. A call is checked against the manifest before anything is launched
(`ArgumentError`, a `ValueError`): count, dtype, rank, static dimensions,
dynamic dimensions that must agree (the manifest's symbols, e.g. `T`),
device (cuda:0, the runtime's device) and contiguity; outputs not passed are
allocated with torch from the shapes the inputs give. The call itself goes
through `library.Library.call_converted`.
"""

import ctypes
import os

from .descriptors import memref_descriptor
from .errors import ArgumentError, ManifestError
from .library import Library
from .manifest import DTYPES, load_manifest
from .tensors import _info, _is_tensor, _need_torch, _torch, torch_dtype


class Function:
    """A function of an artifact. Call it with the inputs (outputs are
    allocated with torch and returned) or with the inputs then the
    preallocated outputs (returned too): one tensor for one result, a tuple
    otherwise."""

    def __init__(self, artifact, spec):
        self.artifact = artifact
        self.spec = spec
        self.name = spec.name

    def __repr__(self):
        return "<moe_mlir.runtime.Function %s of %s>" % (
            self.spec.signature(),
            os.path.basename(self.artifact.path),
        )

    @property
    def signature(self):
        return self.spec.signature()

    def _check_values(self, values, offset=0):
        """Python-side checks of tensors / scalars: `values` are the
        arguments from position `offset` (0: inputs; len(args): outputs)."""
        specs = (self.spec.args + self.spec.results)[offset:]
        for i, (spec, v) in enumerate(zip(specs, values), offset):
            what = self.spec._what(i, spec)
            if spec.is_scalar:
                if _is_tensor(v):
                    raise ArgumentError(
                        "%s: expected a Python number, got a tensor "
                        "(pass .item() of a CPU tensor)" % what
                    )
                if not isinstance(v, (bool, int, float, ctypes._SimpleCData)):
                    raise ArgumentError("%s: expected a number, got %s" % (what, type(v).__name__))
                continue
            if not _is_tensor(v):
                raise ArgumentError(
                    "%s: expected a torch tensor, got %s" % (what, type(v).__name__)
                )
            if not v.is_cuda or v.device.index not in (None, 0):
                raise ArgumentError(
                    "%s: expected a tensor on cuda:0 (the "
                    "runtime's device), got one on %s" % (what, v.device)
                )
            if spec.contiguous and not v.is_contiguous():
                raise ArgumentError(
                    "%s: tensor of shape %s with strides %s is not contiguous "
                    "(call .contiguous())" % (what, list(v.shape), v.stride())
                )

    def _c_arg(self, spec, value, keep_alive):
        if spec.is_scalar:
            if isinstance(value, ctypes._SimpleCData):
                return value
            return DTYPES[spec.dtype][2](value)
        descriptor = memref_descriptor(value, contiguous=spec.contiguous)
        keep_alive.append(descriptor)
        return ctypes.byref(descriptor)

    def output_shapes(self, *inputs):
        """The output shapes for these inputs (tuples)."""
        self._arity(inputs, outputs=False)
        return self.spec.output_shapes([_info(v) for v in inputs])

    def allocate_outputs(self, *inputs):
        """Empty outputs (torch.empty on cuda:0, on the current stream) of
        the shapes these inputs give, after checking the inputs."""
        _need_torch("allocate_outputs")
        torch = _torch()
        self._arity(inputs, outputs=False)
        self._check_values(inputs)
        shapes = self.spec.output_shapes([_info(v) for v in inputs])
        return [
            torch.empty(shape, dtype=torch_dtype(spec.dtype), device="cuda:0")
            for spec, shape in zip(self.spec.results, shapes)
        ]

    def _arity(self, args, outputs):
        n_in, n_out = len(self.spec.args), len(self.spec.results)
        ok = (len(args) == n_in) or (outputs and len(args) == n_in + n_out)
        if not ok:
            raise ArgumentError(self.spec._count_message(len(args)))

    def __call__(self, *args, stream=None):
        """fn(*inputs) or fn(*inputs, *outputs): checks, runs on the current
        torch stream (or `stream`), returns the outputs."""
        _need_torch("calling @" + self.name)
        self._arity(args, outputs=True)
        n_in = len(self.spec.args)
        inputs, outputs = list(args[:n_in]), list(args[n_in:])
        if outputs:
            self._check_values(inputs)
            self._check_values(outputs, n_in)
            self.spec.check([_info(v) for v in inputs], [_info(v) for v in outputs])
        else:
            outputs = self.allocate_outputs(*inputs)
        self.run_unchecked(inputs, outputs, stream)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def run_unchecked(self, inputs, outputs, stream=None):
        """The call without the manifest checks (inputs, outputs: lists)."""
        keep_alive = []
        c_args = [
            self._c_arg(s, v, keep_alive)
            for s, v in zip(self.spec.args + self.spec.results, list(inputs) + list(outputs))
        ]
        self.artifact.library.call_converted(self.name, c_args, stream)


class Artifact:
    """A loaded library and its manifest."""

    def __init__(self, path, manifest=None, library=None):
        self.path = os.path.abspath(path)
        self.manifest = manifest
        self.library = library if library is not None else Library(self.path)
        self._fns = {}
        if manifest is not None:
            missing = [n for n in manifest.functions if not self.library.has_function(n)]
            if missing:
                raise ManifestError(
                    "%s lists %s, which %s does not export (_mlir_ciface_*)"
                    % (manifest.where, ", ".join("@" + n for n in missing), self.path)
                )

    @property
    def functions(self):
        return sorted(self.manifest.functions) if self.manifest else []

    def fn(self, name):
        """The function `name` (a Function)."""
        if name not in self._fns:
            if self.manifest is None:
                raise ManifestError(
                    "%s was loaded without a manifest: use "
                    "artifact.library.call(%r, *inputs, *outputs)" % (self.path, name)
                )
            if name not in self.manifest.functions:
                raise KeyError(
                    "%s has no function %r (it has: %s)"
                    % (self.path, name, ", ".join(self.functions))
                )
            self._fns[name] = Function(self, self.manifest.functions[name])
        return self._fns[name]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        manifest = self.__dict__.get("manifest")
        if manifest is not None and name in manifest.functions:
            return self.fn(name)
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))

    def set_stream(self, stream):
        """Pins the stream of later calls (None: torch's current stream)."""
        self.library.set_stream(stream)

    def synchronize(self):
        """Waits for the device and raises any recorded or asynchronous
        error of the runtime."""
        self.library.synchronize()

    def __repr__(self):
        return "<moe_mlir.runtime.Artifact %s: %s>" % (
            self.path,
            ", ".join(self.functions) or "no manifest",
        )


def load(path, manifest=None, check_hash=True):
    """Loads a compiled artifact. `manifest`: None reads
    `<stem>.manifest.json` next to the library; a path, dict or Manifest;
    False loads the library without one (no checks, no Function objects:
    call through `artifact.library.call`)."""
    if not os.path.isfile(path):
        raise FileNotFoundError("no such artifact: %s" % path)
    m = None
    if manifest is not False:
        m = load_manifest(path, manifest, check_hash)
    return Artifact(path, m)
