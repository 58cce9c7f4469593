#!/usr/bin/env bash
# Build machine: regenerate the probes' MLIR, compile them to cubins (sm_90a, +ptx86), summarise
# ptxas -v and the SASS, and check the runners' host logic against emulated kernels.
#   bash bench/probes/lowprec/build.sh        -> *.mlir, *.cubin, *.ptxas.txt, *.sass.txt, build_log.txt
# Needs mlir-opt (LLVM 22), ptxas (CUDA 13), numpy; for the SASS summary a cuobjdump + nvdisasm
# (this image's CUDA has neither: pip download nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, unzip
# both wheels, put their nvidia/cu13/bin on PATH or set CUOBJDUMP).
set -euo pipefail
cd "$(dirname "$0")"
{
  python3 gen_lowprec.py
  python3 compile.py ./*.mlir
  python3 selftest_host.py
} 2>&1 | tee build_log.txt
