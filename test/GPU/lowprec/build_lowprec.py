#!/usr/bin/env python3
"""Builds the artifacts of the low-precision GPU check (lowprec_check.py).

Runs here (LLVM, the moe_mlir package): compiles each case's layer (a
moe_mlir preset, possibly scaled down, dynamic T) with
moe_mlir.gpu.compile_gpu into OUT/<case>.so + manifest, and writes
OUT/cases.json (per case: library, the MoeConfig fields, the pipeline
options, whether it is checked against the float64 numpy reference of
test/Differential/reference.py or, at model size, the float64 torch one,
and the bf16 case timed beside it). Copies lowprec_check.py, the numpy
reference, hf_lowprec_parity.py and the runtime package next to them.

  python3 test/GPU/lowprec/build_lowprec.py [OUT] [--only a,b]
                                                (default gpu-artifacts/lowprec)
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
for p in ("build/python_packages", "build/python"):
    sys.path.insert(0, os.path.join(REPO, p))

import moe_mlir  # noqa: E402
from moe_mlir import gpu  # noqa: E402

P = moe_mlir.PRESETS
DS_SMALL = dict(hidden=512, intermediate=256, experts=16, n_group=4, topk_group=2)
MX_SMALL = P["gpt-oss-120b-mxfp4"].replace(hidden=256, intermediate=128, experts=8)
MXH_SMALL = MX_SMALL.replace(weight_format="mxfp4_hopper")

# (name, config, compile options, fuse, reference, bf16 twin for timing)
CASES = [
    ("ds-small", P["deepseek-v3-fp8"].replace(**DS_SMALL), None, True, "numpy", None),
    ("ds-small-unfused", P["deepseek-v3-fp8"].replace(**DS_SMALL), None, False, "numpy", None),
    (
        "ds-small-simt",
        P["deepseek-v3-fp8"].replace(**DS_SMALL),
        {"gemm": "simt"},
        True,
        "numpy",
        None,
    ),
    (
        "ds-small-cpasync",
        P["deepseek-v3-fp8"].replace(**DS_SMALL),
        {"wgmma_tma": False},
        True,
        "numpy",
        None,
    ),
    (
        "ds-small-nocluster",
        P["deepseek-v3-fp8"].replace(**DS_SMALL),
        {"wgmma_cluster": 1},
        True,
        "numpy",
        None,
    ),
    (
        # 128-column FP8 tiles by TMA (the default for these shapes is 256:
        # two scale blocks a tile, GemmConfig.cpp)
        "ds-small-tile128",
        P["deepseek-v3-fp8"].replace(**DS_SMALL),
        {"wgmma_tile_n": 128},
        True,
        "numpy",
        None,
    ),
    (
        # No small-M kernels: the main kernel at every T, so that its
        # epilogue's quantization of h (256-column concat tiles) sees the
        # edge inputs (all-zero, clamped, NaN and inf rows)
        "ds-small-main",
        P["deepseek-v3-fp8"].replace(**DS_SMALL),
        {"wgmma_swap_rows": 0},
        True,
        "numpy",
        None,
    ),
    (
        "ds-small-swap",
        P["deepseek-v3-fp8"].replace(**DS_SMALL),
        {"wgmma_swap_rows": 4096},
        True,
        "numpy",
        None,
    ),
    (
        "ds-small-swap128",
        P["deepseek-v3-fp8"].replace(**DS_SMALL),
        {"wgmma_swap_rows": 4096, "wgmma_swap_tile_n": 128},
        True,
        "numpy",
        None,
    ),
    (
        "ds31-small",
        P["deepseek-v3.1-fp8"].replace(
            hidden=384, intermediate=128, experts=8, n_group=1, topk_group=1
        ),
        None,
        True,
        "numpy",
        None,
    ),
    (
        # scale_fmt ue8m0 with the main kernel at every T and 256-column
        # concat tiles: GEMM1's epilogue quantizes h with power-of-two
        # scales
        "ds31-main",
        P["deepseek-v3.1-fp8"].replace(
            hidden=384, intermediate=256, experts=8, n_group=1, topk_group=1
        ),
        {"wgmma_swap_rows": 0},
        True,
        "numpy",
        None,
    ),
    (
        "ds-partial",
        P["deepseek-v3-fp8"].replace(
            hidden=200, intermediate=96, experts=16, n_group=4, topk_group=2
        ),
        None,
        True,
        "numpy",
        None,
    ),
    (
        # K tails on the 256-column FP8 tiles: the up GEMM's K = 400 (three
        # 128-K blocks and a partial one) at 256-column tiles, the down GEMM
        # at 128 (400 columns); then the down GEMM's K = 208 at 256-column
        # tiles (512 columns), the up GEMM at 128 (208 output columns)
        "ds-tail-wide-up",
        P["deepseek-v3-fp8"].replace(
            hidden=400, intermediate=256, experts=16, n_group=4, topk_group=2
        ),
        None,
        True,
        "numpy",
        None,
    ),
    (
        "ds-tail-wide-down",
        P["deepseek-v3-fp8"].replace(
            hidden=512, intermediate=208, experts=16, n_group=4, topk_group=2
        ),
        None,
        True,
        "numpy",
        None,
    ),
    (
        "mx-small",
        MX_SMALL,
        None,
        True,
        "numpy",
        None,
    ),
    (
        "mx-small-unfused",
        MX_SMALL,
        None,
        False,
        "numpy",
        None,
    ),
    (
        "mx-small-simt",
        MX_SMALL,
        {"gemm": "simt"},
        True,
        "numpy",
        None,
    ),
    # The register-A kernels one at a time (the tiers' row bounds forced):
    # 16 tokens x 64 weight rows, 16 x 128 (two consumer warpgroups), the
    # main kernel alone (64 x 128), 64 x 64, 32 x 64, at every T.
    (
        "mx-swap16",
        MX_SMALL,
        {"wgmma_swap_rows": 4096},
        True,
        "numpy",
        None,
    ),
    (
        "mx-swap16x128",
        MX_SMALL,
        {"wgmma_swap_rows": 4096, "wgmma_swap_tile_n": 128},
        True,
        "numpy",
        None,
    ),
    (
        "mx-main",
        MX_SMALL,
        {"wgmma_swap_rows": 0},
        True,
        "numpy",
        None,
    ),
    (
        "mx-swap64",
        MX_SMALL,
        {"wgmma_swap_rows": 4096, "wgmma_swap_tile_m": 64},
        True,
        "numpy",
        None,
    ),
    (
        "mx-swap32",
        MX_SMALL,
        {"wgmma_swap_rows": 4096, "wgmma_swap_tile_m": 32},
        True,
        "numpy",
        None,
    ),
    # K tails (352 = 11 x 32, 160 = 5 x 32: partial 256-K stages, blocks
    # past K masked) and a partial weight tile (352 rows of w_down).
    (
        "mx-tail",
        P["gpt-oss-120b-mxfp4"].replace(hidden=352, intermediate=160, experts=8),
        None,
        True,
        "numpy",
        None,
    ),
    # The concat GLU layout (each tile: gate half, up half).
    (
        "mx-concat",
        P["gpt-oss-120b-mxfp4"].replace(hidden=256, intermediate=192, experts=8, layout="concat"),
        None,
        True,
        "numpy",
        None,
    ),
    # weight_format mxfp4_hopper (codes repacked in fragment order): the
    # small layer, each tier forced, K tails (the edge inputs include
    # E8M0 >= 128, the two-step multiply).
    ("mxh-small", MXH_SMALL, None, True, "numpy", None),
    ("mxh-small-unfused", MXH_SMALL, None, False, "numpy", None),
    ("mxh-small-simt", MXH_SMALL, {"gemm": "simt"}, True, "numpy", None),
    ("mxh-swap16", MXH_SMALL, {"wgmma_swap_rows": 4096}, True, "numpy", None),
    (
        "mxh-swap16x128",
        MXH_SMALL,
        {"wgmma_swap_rows": 4096, "wgmma_swap_tile_n": 128},
        True,
        "numpy",
        None,
    ),
    ("mxh-main", MXH_SMALL, {"wgmma_swap_rows": 0}, True, "numpy", None),
    (
        "mxh-swap32",
        MXH_SMALL,
        {"wgmma_swap_rows": 4096, "wgmma_swap_tile_m": 32},
        True,
        "numpy",
        None,
    ),
    (
        "mxh-tail",
        P["gpt-oss-120b-mxfp4"].replace(
            hidden=352, intermediate=160, experts=8, weight_format="mxfp4_hopper"
        ),
        None,
        True,
        "numpy",
        None,
    ),
    # Small layers compared with the transformers modules by hf_lowprec_parity.py
    # (reference None: not part of lowprec_check.py).
    (
        "hf-qwen3-fp8",
        P["qwen3-30b-a3b-fp8"].replace(hidden=384, intermediate=256, experts=16),
        None,
        True,
        None,
        None,
    ),
    (
        "hf-ds-fp8",
        P["deepseek-v3-fp8"].replace(
            hidden=512, intermediate=128, experts=16, n_group=4, topk_group=2
        ),
        None,
        True,
        None,
        None,
    ),
    (
        "hf-gptoss-mxfp4",
        P["gpt-oss-120b-mxfp4"].replace(hidden=512, intermediate=256, experts=16),
        None,
        True,
        None,
        None,
    ),
    ("qwen3-30b-a3b-fp8", P["qwen3-30b-a3b-fp8"], None, True, "torch", "qwen3-30b-a3b-bf16"),
    ("deepseek-v3-fp8", P["deepseek-v3-fp8"], None, True, "torch", "deepseek-v3-bf16"),
    ("gpt-oss-120b-mxfp4", P["gpt-oss-120b-mxfp4"], None, True, "torch", "gpt-oss-120b-bf16"),
    (
        "qwen3-30b-a3b-bf16",
        P["qwen3-30b-a3b"].replace(transpose_weights=True),
        None,
        True,
        None,
        None,
    ),
    ("deepseek-v3-bf16", P["deepseek-v3"].replace(transpose_weights=True), None, True, None, None),
    (
        "gpt-oss-120b-bf16",
        P["gpt-oss-120b"].replace(transpose_weights=True),
        None,
        True,
        None,
        None,
    ),
]


def main(argv):
    argv = list(argv)
    only = []
    if "--only" in argv:  # --only a,b: just these cases (into their own OUT)
        i = argv.index("--only")
        only = [s for s in argv[i + 1].split(",") if s]
        del argv[i : i + 2]
    out = os.path.abspath(
        argv[1] if len(argv) > 1 else os.path.join(REPO, "gpu-artifacts", "lowprec")
    )
    os.makedirs(out, exist_ok=True)
    cases = []
    for name, cfg, options, fuse, reference, twin in CASES:
        if only and name not in only:
            continue
        module = moe_mlir.ffn_from_config(cfg, T=None, dtype="bf16")
        lib = gpu.compile_gpu(module, os.path.join(out, name + ".so"), fuse=fuse, options=options)
        fields = dataclasses.asdict(cfg)
        cases.append(
            dict(
                name=name,
                library=os.path.basename(lib),
                config=fields,
                reference_attrs={
                    k: v for k, v in cfg.ffn_attributes().items() if k not in ("k", "scoring")
                },
                options=options or {},
                fuse=fuse,
                reference=reference,
                bf16_twin=twin,
            )
        )
        print("built", name, flush=True)
    commit = subprocess.run(
        ["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(dict(commit=commit + ("-dirty" if dirty else ""), cases=cases), f, indent=1)
    shutil.copy(os.path.join(HERE, "lowprec_check.py"), out)
    shutil.copy(os.path.join(HERE, "hf_lowprec_parity.py"), out)
    shutil.copy(os.path.join(REPO, "test", "Differential", "reference.py"), out)
    dst = os.path.join(out, "moe_mlir_runtime")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(
        os.path.join(REPO, "python", "runtime", "moe_mlir_runtime"),
        dst,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
