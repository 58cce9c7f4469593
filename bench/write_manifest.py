#!/usr/bin/env python3
"""Writes the runtime manifest of a library that moe-aot compiled.

    python3 write_manifest.py LAYER.mlir LIB.so --pipeline "..." [--compile-s S]

writes LIB.manifest.json next to LIB.so, exactly as moe_mlir.gpu.compile_gpu
does (signatures read off the module's IR by moe_mlir.gpu.function_specs,
the library's sha256), so that runtime.load(LIB.so) checks calls against
it. Needs the built moe_mlir package (its extension reads the IR): from
$MOE_MLIR_PYTHONPATH (os.pathsep-separated), else <repo>/build/python_packages,
else wherever it is installed.
"""

import argparse
import datetime
import hashlib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PATHS = [p for p in os.environ.get("MOE_MLIR_PYTHONPATH", "").split(os.pathsep) if p]
_PATHS.append(os.path.join(REPO, "build", "python_packages"))
sys.path[:0] = [p for p in _PATHS if os.path.isdir(p)]

from moe_mlir import gpu  # noqa: E402

rt = gpu._rt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mlir")
    ap.add_argument("library")
    ap.add_argument("--pipeline", required=True, help="the moe-aot --pipeline flags")
    ap.add_argument(
        "--compile-s", type=float, default=None, help="moe-aot wall time, recorded in the manifest"
    )
    args = ap.parse_args(argv)
    with open(args.mlir) as f:
        text = f.read()
    specs = gpu.function_specs(text)
    bad = [s for s in specs if s.unsupported]
    if not specs or bad:
        print(
            "write_manifest: %s: %s"
            % (
                args.mlir,
                "; ".join("@%s: %s" % (s.name, s.unsupported) for s in bad) or "no public function",
            ),
            file=sys.stderr,
        )
        return 1
    meta = dict(
        pipeline=args.pipeline,
        compiled_with="moe-aot",
        module_sha256=hashlib.sha256(text.encode()).hexdigest(),
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    if args.compile_s is not None:
        meta["compile_s"] = round(args.compile_s, 3)
    manifest = rt.Manifest.build(
        specs, library=os.path.basename(args.library), sha256=rt.file_sha256(args.library), **meta
    )
    manifest.write(rt.manifest_path(args.library))
    print("%s: %s" % (rt.manifest_path(args.library), "; ".join(s.signature() for s in specs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
