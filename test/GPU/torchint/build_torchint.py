#!/usr/bin/env python3
"""Builds the artifacts of the PyTorch-integration GPU check (issue 46,
torchint_check.py): here, with the compiler, into OUT (default
<repo>/gpu-artifacts/torchint):

  OUT/cache/          moe_mlir.hf.prebuild of the small Hugging Face models
                      the check builds from their configs (Qwen3-MoE, Mixtral,
                      gpt-oss, DeepSeek-V3; f32 and bf16) plus their signature
                      table, and the Qwen3-30B-A3B preset for the custom-op
                      checks (compile_cached)
  OUT/models.py       the model configs (shared with the check)
  OUT/torchint_check.py, OUT/moe_mlir_runtime/

Needs torch and transformers where it runs (the models are built to read
their blocks' signatures); $TORCHINT_PYTHON names such an interpreter when
this one lacks them (the build then runs under it with the build tree's
package on PYTHONPATH).
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def main(argv):
    out = os.path.abspath(
        argv[1] if len(argv) > 1 else os.path.join(REPO, "gpu-artifacts", "torchint")
    )
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        py = os.environ.get("TORCHINT_PYTHON")
        if not py:
            print(
                "build_torchint: needs torch and transformers (or $TORCHINT_PYTHON)",
                file=sys.stderr,
            )
            return 3
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "build", "python_packages"))
        env.pop("TORCHINT_PYTHON")
        return subprocess.call([py, os.path.abspath(__file__), out], env=env)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "build", "python_packages"))
    import torch
    import models
    import moe_mlir
    from moe_mlir import gpu, hf

    os.makedirs(out, exist_ok=True)
    cache = os.path.join(out, "cache")
    built = []
    for family in models.FAMILIES:
        for dtype in (torch.float32, torch.bfloat16):
            model = models.build(family, dtype, device="cpu")
            for sig in hf.prebuild(model, cache):
                built.append(sig)
            print("prebuilt", family, dtype, flush=True)
    for family in ("qwen3-moe", "mixtral"):  # the decode-speed models
        model = models.build(family, torch.bfloat16, device="cpu", size="decode")
        built += hf.prebuild(model, cache)
        del model
        print("prebuilt", family, "decode", flush=True)
    preset = moe_mlir.ffn_from_config("qwen3-30b-a3b", T=None)
    lib = gpu.compile_cached(preset, cache_dir=cache, name="qwen3_30b_a3b")
    meta = dict(preset_library=os.path.relpath(lib, out), signatures=built)
    commit = subprocess.run(
        ["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True
    )
    meta["commit"] = commit.stdout.strip()
    with open(os.path.join(out, "torchint.json"), "w") as f:
        json.dump(meta, f, indent=1)
    for name in ("torchint_check.py", "models.py"):
        shutil.copy(os.path.join(HERE, name), out)
    dst = os.path.join(out, "moe_mlir_runtime")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(
        os.path.join(REPO, "python", "runtime", "moe_mlir_runtime"),
        dst,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    print("--- %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
