// RUN: moe-opt %s --moe-decompose --moe-cost-report=label=unfused --convert-moe-to-gpu \
// RUN:   --moe-gpu-launch-report=label=unfused -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNFUSED
// RUN: moe-opt %s --moe-decompose --moe-fuse --moe-cost-report=label=fused --convert-moe-to-gpu \
// RUN:   --moe-gpu-launch-report=label=fused -o /dev/null 2>&1 | FileCheck %s --check-prefix=FUSED

// What the tensor-level cost report counts (compute ops) against what the
// GPU lowering launches, for the Mixtral-shaped example layer of
// test/Dialect/Moe/moe-fuse.mlir (bf16, H 64, I 128, E 8, k 2, concat GLU).
// Unfused: route, the three dispatch ops, gather, two grouped matmuls, glu,
// scatter, combine (10 ops); the GPU lowering launches 17 to 19 kernels per
// call (the GEMMs' Hopper kernel or its SIMT fallback, fills). Fused: 4
// ops; 4 launches at few rows (the route + dispatch cluster kernel, the two
// GEMMs, the combine), at most 8 (4 route + dispatch kernels for more rows,
// the second GEMM's SIMT fallback with its fill).
// UNFUSED: moe-cost-report [unfused] @mixtral: 10 compute ops,
// UNFUSED: moe-gpu-launch-report [unfused] @mixtral: 25 launch sites, 17 to 19 launches per call
// FUSED: moe-cost-report [fused] @mixtral: 4 compute ops,
// FUSED: moe-gpu-launch-report [fused] @mixtral: 13 launch sites, 4 to 8 launches per call
func.func @mixtral(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// A launch inside a host loop: its count per call is not bounded.
// UNFUSED: moe-gpu-launch-report [unfused] @looped: 2 launch sites, at least 1 launches per call (a launch in a loop)
func.func @looped(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    gpu.terminator
  }
  scf.for %i = %c0 to %n step %c1 {
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      gpu.terminator
    }
  }
  return
}
