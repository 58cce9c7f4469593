#!/usr/bin/env python3
"""Builds the artifacts of the training check (issue 47, training_check.py):
here, with the compiler, into OUT (default <repo>/gpu-artifacts/training):
one library per layer of CASES (moe_mlir.training.training_from_config:
@ffn_train and @ffn_grad), cases.json, the check, test/GPU/torch_reference.py
and the runtime package. Carry OUT to the GPU machine and run
`python3 OUT/training_check.py --dir OUT` there."""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "build", "python_packages"))

from moe_mlir import PRESETS, gpu, training_from_config  # noqa: E402

SMALL = dict(hidden=128, intermediate=64, experts=8, top_k=2)
# name -> (config, activation dtype)
CASES = {
    "qwen3-f32": (PRESETS["qwen3-30b-a3b"].replace(**SMALL), "f32"),
    "qwen3-bf16": (PRESETS["qwen3-30b-a3b"].replace(**SMALL), "bf16"),
    "deepseek-f32": (
        PRESETS["deepseek-v3"].replace(
            hidden=128, intermediate=64, experts=16, top_k=4, n_group=4, topk_group=2
        ),
        "f32",
    ),
    "gptoss-f32": (PRESETS["gpt-oss-120b"].replace(**SMALL), "f32"),
    "gptoss-bf16": (PRESETS["gpt-oss-120b"].replace(**SMALL), "bf16"),
}


def main(argv):
    out = os.path.abspath(
        argv[1] if len(argv) > 1 else os.path.join(REPO, "gpu-artifacts", "training")
    )
    os.makedirs(out, exist_ok=True)
    table = {}
    for name, (config, dtype) in CASES.items():
        gpu.compile_gpu(training_from_config(config, dtype=dtype), os.path.join(out, name + ".so"))
        fields = {f: getattr(config, f) for f in config.__dataclass_fields__}
        table[name] = dict(config=fields, dtype=dtype)
        print("built", name, flush=True)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    shutil.copy(os.path.join(HERE, "training_check.py"), out)
    shutil.copy(os.path.join(REPO, "test", "GPU", "torch_reference.py"), out)
    sys.path.insert(0, os.path.join(REPO, "python", "runtime"))
    import ship  # the runtime package's own copier

    ship.copy_package(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
