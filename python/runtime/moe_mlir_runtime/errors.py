# ===- errors.py - the exceptions of the GPU runtime ----------------------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""The exceptions the runtime raises on purpose. `ManifestError`: a manifest
that cannot be used (missing, malformed, written for another build of the
library, or naming functions the library does not export). `ArgumentError`:
a call whose arguments do not match the function's manifest entry, found in
Python before anything is launched. `ShapeError`: the compiled function's
own run-time check of its dynamic sizes failed (what a caller without a
manifest meets). All are `ValueError`s; `ShapeError` is a `RuntimeError`
too, like every other error the library's runtime records (those are raised
as plain `RuntimeError` by `library.Library.check_error`)."""


class ManifestError(ValueError):
    """A manifest that cannot be used (missing, malformed, stale)."""


class ArgumentError(ValueError):
    """Arguments that do not match a function's manifest entry."""


class ShapeError(ValueError, RuntimeError):
    """The compiled function's own run-time shape check failed (dynamic
    sizes of its arguments that must agree do not): reported by the library
    through `moeRuntimeReportShapeError` before it launched anything or
    wrote an output. A `ValueError`, and a `RuntimeError` like every error
    the runtime records."""
