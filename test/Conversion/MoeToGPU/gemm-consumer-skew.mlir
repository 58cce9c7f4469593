// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-consumer-skew=2 wgmma-swap-rows=0" | FileCheck %s
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-consumer-skew=0 wgmma-idle-skip=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=NONE \
// RUN:   --implicit-check-not=bar.sync --implicit-check-not=bar.arrive
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-consumer-skew=7 wgmma-swap-rows=0" | FileCheck %s --check-prefix=CAPPED
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-consumer-skew=8" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-consumer-skew=-2" 2>&1 | FileCheck %s --check-prefix=RANGE

// Skewed consumer warpgroups in the main Hopper kernel: warpgroup 1 waits
// (bar.sync 3, 256: a predicated nvvm.inline_ptx, cw == 1) before its first
// K step, and warpgroup 0 arrives (bar.arrive 3, 256, cw == 0) after
// issuing `skew` K steps: the first step, the loop over steps [1, skew),
// the arrival, then the loop over [skew, kSteps). K = 1024: 16 K steps of
// 64, 4 stages (128 x 256 tiles).

// CHECK-LABEL: func.func @gemm(
// CHECK: nvvm.inline_ptx "bar.sync 3, 256;", predicate = %{{.*}}
// CHECK: nvvm.wgmma.mma_async
// CHECK: scf.for %{{.*}} = %c1{{.*}} to %c2{{.*}} step
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.inline_ptx "bar.arrive 3, 256;", predicate = %{{.*}}
// CHECK: scf.for %{{.*}} = %c2{{.*}} to %c16{{.*}} step
// CHECK: nvvm.wgmma.mma_async

// NONE-LABEL: func.func @gemm(
// NONE: scf.for %{{.*}} = %c1{{.*}} to %c16{{.*}} step

// At most stages - 1 (3 of 4 stages).
// CAPPED: nvvm.inline_ptx "bar.sync 3, 256;"
// CAPPED: scf.for %{{.*}} = %c1{{.*}} to %c3{{.*}} step
// CAPPED: nvvm.inline_ptx "bar.arrive 3, 256;"
// CAPPED: scf.for %{{.*}} = %c3{{.*}} to %c16{{.*}} step

// RANGE: error: moe-lower-to-nvvm: wgmma-consumer-skew must be -1 (cost model) or in [0, 7] (got {{-?[0-9]+}})
func.func @gemm(%a: tensor<?x1024xbf16>, %w: tensor<8x1024x512xbf16>,
                %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>)
      : tensor<?x1024xbf16>, tensor<8x1024x512xbf16> -> tensor<?x512xbf16>
  return %r : tensor<?x512xbf16>
}
