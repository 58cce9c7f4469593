#!/usr/bin/env bash
#===- bench/fetch_vllm_fused_moe.sh - vendor vLLM's Triton fused_moe ------===#
#
# Usage: bash bench/fetch_vllm_fused_moe.sh [OUT_DIR]   (default <repo>/bench-variants/vllm_fp8)
#
# Runs here (PyPI reachable; no GPU, no torch needed). Recreates OUT_DIR,
# the --vllm-fp8 folder of bench_moe.py --weight-format fp8_block:
#   pip download vllm==$VLLM_VERSION --no-deps   (the wheel is a zip)
#   bench/vendor_vllm_fused_moe.py: the Triton fused_moe_kernel with its
#     block-FP8 (w8a8, block_shape [128,128]) path, its launch function,
#     vLLM's config tables / default-config heuristic, the naive-or-aligned
#     expert assignment and the per-token-group FP8 quantization kernel,
#     copied verbatim into OUT_DIR/vllm_fused_moe_fp8.py, plus
#     bench/vllm_compat.py (stand-ins for the vLLM imports; torch
#     moe_align_block_size, Triton silu_and_mul, torch moe_sum: vLLM's
#     CUDA ops are not on the device machine) and the tile tables.
# The folder is git-ignored: carry it to the GPU machine (~100 KiB).
#
# VLLM_VERSION defaults to 0.26.0: the last vLLM built against torch 2.11
# (triton 3.6), the device machine's versions (0.27.x and later pin torch
# 2.13+, whose kernel uses Triton features 3.6 may lack). The sha256 of
# the 0.26.0 wheel is checked; WHEEL=path skips the download.
#
#===----------------------------------------------------------------------===#
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(git -C "$HERE" rev-parse --show-toplevel)"
OUT="${1:-$REPO/bench-variants/vllm_fp8}"
VLLM_VERSION="${VLLM_VERSION:-0.26.0}"
SHA256_0_26_0="adb1e4c9b46d0dfdb094121ae5aad670a42412dd813ed4e5db069ed6a15006de"

wheel="${WHEEL:-}"
if [ -z "$wheel" ]; then
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  python3 -m pip download "vllm==$VLLM_VERSION" --no-deps --only-binary=:all: -d "$dl" -q
  wheel="$(ls "$dl"/vllm-"$VLLM_VERSION"-*.whl | head -n 1)"
fi
[ -f "$wheel" ] || { echo "fetch_vllm_fused_moe: no wheel ($wheel)" >&2; exit 2; }
if [ "$VLLM_VERSION" = 0.26.0 ]; then
  sum="$(sha256sum "$wheel" | cut -d' ' -f1)"
  if [ "$sum" != "$SHA256_0_26_0" ]; then
    echo "fetch_vllm_fused_moe: $wheel has sha256 $sum, expected $SHA256_0_26_0" >&2
    exit 2
  fi
fi
rm -rf "$OUT"
mkdir -p "$OUT"
python3 "$HERE/vendor_vllm_fused_moe.py" "$wheel" "$OUT"
python3 -m py_compile "$OUT/vllm_fused_moe_fp8.py" "$OUT/vllm_compat.py"
rm -rf "$OUT/__pycache__"
echo "--- $OUT ($(du -sh "$OUT" | cut -f1)):"
cat "$OUT/VERSION.txt"
