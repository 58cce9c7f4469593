#!/usr/bin/env bash
# Here (nvcc, no GPU): writes mma_period.cu (gen.py) and mma_period.cubin
# (sm_90a), both git-ignored; carry the cubin and run run.py there.
set -euo pipefail
cd "$(dirname "$0")"
python3 gen.py
"${NVCC:-/usr/local/cuda/bin/nvcc}" -cubin -arch=sm_90a -O3 -Xptxas -v mma_period.cu -o mma_period.cubin 2>&1 |
  grep -E "Compiling|registers|spill|C75" || true
