#!/usr/bin/env bash
#===- examples/run.sh - set up, build, and run the example MoE layer ------===#
#
# On a fresh Debian 12 machine: installs the toolchain (once), builds
# moe-opt, shows the example layer's decomposition into the primitive chain,
# then compiles the layer for the CPU and runs it, printing the T x H output.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup
LLVM=/usr/lib/llvm-22
EXAMPLE=examples/mixtral_layer.mlir

echo "=== moe-opt --moe-decompose ${EXAMPLE} (the layer as the primitive chain)"
build/bin/moe-opt "${EXAMPLE}" --moe-decompose \
  | sed -n '/func.func @moe_layer/,/^  }/p'

echo "=== moe-opt --moe-lower-to-cpu | mlir-runner (compiled and run on the CPU)"
build/bin/moe-opt "${EXAMPLE}" --moe-lower-to-cpu \
  | "${LLVM}/bin/mlir-runner" -e main -entry-point-result=void \
      -shared-libs="${LLVM}/lib/libmlir_runner_utils.so,${LLVM}/lib/libmlir_c_runner_utils.so"
