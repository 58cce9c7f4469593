// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-idle-skip=true wgmma-swap-rows=0" | FileCheck %s
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-swap-rows=0" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-idle-skip=true wgmma-consumer-skew=2 wgmma-swap-rows=0" | FileCheck %s --check-prefix=OFF

// Idle skip in the main Hopper kernel (wgmma-idle-skip): a consumer warpgroup
// with no rows in the tile (tileRows <= 64 * warpgroup) runs the first K
// step's MMAs, then the MMA loop over [1, steps) with steps = 16 K steps
// (K = 1024) or 1, a runtime bound rather than a branch around the wgmma;
// after the last wgmma has completed (wait_group 0) and its stage is
// released, a loop over [steps, 16) waits for each remaining stage's full
// barrier and releases it (no MMA); then both consumer warpgroups meet
// on named barrier 4 (256 threads) before the epilogue. Off (the default,
// or with skewed consumer warpgroups): the static loop over [1, 16), no
// drain loop, no barrier 4.

// CHECK-LABEL: func.func @gemm(
// CHECK: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[HALF:.*]] = arith.muli %{{.*}}, %c64{{.*}} : index
// CHECK: %[[HAS:.*]] = arith.cmpi ugt, %{{.*}}, %[[HALF]] : index
// CHECK: %[[STEPS:.*]] = arith.select %[[HAS]], %[[C16]], %c1{{.*}} : index
// CHECK: scf.for %{{.*}} = %c1{{.*}} to %[[STEPS]] step
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.mbarrier.arrive
// CHECK: scf.for %{{.*}} = %[[STEPS]] to %c16{{.*}} step
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c256_i32

// OFF-LABEL: func.func @gemm(
// OFF-NOT: arith.cmpi ugt
// OFF: scf.for %{{.*}} = %c{{[12]}}{{.*}} to %c16{{.*}} step
// OFF: nvvm.wgmma.mma_async
// OFF: nvvm.wgmma.wait.group.sync.aligned 0
// OFF-NOT: scf.for %{{.*}} = %{{[0-9]+}} to %c16
// OFF-NOT: nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c256_i32
// OFF: return
func.func @gemm(%a: tensor<?x1024xbf16>, %w: tensor<8x1024x512xbf16>,
                %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>)
      : tensor<?x1024xbf16>, tensor<8x1024x512xbf16> -> tensor<?x512xbf16>
  return %r : tensor<?x512xbf16>
}
