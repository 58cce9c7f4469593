// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-split-short=true" | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-split-short=true wgmma-epilogue=direct" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-split-short=true wgmma-tile-m=64" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-split-short=true wgmma-stages=2" | FileCheck %s --check-prefix=OFF

// wgmma-split-short: in the Hopper kernel with two consumer warpgroups and
// the staged epilogue, a work item of at most 64 rows (all in warpgroup
// 0's half) is split: warpgroup w runs the K steps w, w + 2, ... on those
// rows (A at offset 0 for both) and releases the other's steps once they
// have landed; then warpgroup 1's accumulators are added into warpgroup
// 0's through the epilogue staging (a 256-thread named barrier, id 3,
// around each of the two 64-accumulator rounds of the m64n256 tile), and
// only warpgroup 0 runs the epilogue. Off by default, and never with the
// direct epilogue (no staging), 64-row tiles (one consumer) or 2 stages
// (a warpgroup's own step is released two steps later: with 2 stages its
// next step would wait for that very stage).

// CHECK-LABEL: func.func @down(
// CHECK: nvvm.setmaxregister increase 232
// The split flag, the loop's start (the warpgroup index) and stride (2),
// and the A offset (0 instead of 64 rows per warpgroup).
// CHECK: %[[SPLIT:[a-z0-9_]+]] = arith.cmpi ule, %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[START:[a-z0-9_]+]] = arith.select %[[SPLIT]], %{{[a-z0-9_]+}}, %c0{{(_[0-9]+)?}} : index
// CHECK: %[[STRIDE:[a-z0-9_]+]] = arith.select %[[SPLIT]], %c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}} : index
// CHECK: arith.select %[[SPLIT]], %c0_i64{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} : i64
// CHECK: %[[ACC:[a-z0-9_]+]] = scf.for %{{[a-z0-9_]+}} = %[[START]] to %c4{{(_[0-9]+)?}} step %[[STRIDE]] iter_args(
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>
// The other warpgroup's neighbouring step: wait for it, release it.
// CHECK: arith.andi %[[SPLIT]], %{{[a-z0-9_]+}} : i1
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// The partial sums: five barriers, warpgroup 1 stores 16-byte groups.
// CHECK: scf.if %[[SPLIT]] -> (!llvm.struct<(
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK-COUNT-2: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// CHECK-COUNT-2: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK-NOT: number_of_threads = %c256_i32
// Only warpgroups with rows in the tile store.
// CHECK: arith.cmpi ult, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : index
// CHECK-NEXT: scf.if
// CHECK: nvvm.barrier id = %{{[a-z0-9_]+}} number_of_threads = %c128_i32
// CHECK: gpu.terminator

// OFF-LABEL: func.func @down(
// OFF: scf.for %{{[a-z0-9_]+}} = %c0{{(_[0-9]+)?}} to %c4{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args(
// OFF-NOT: number_of_threads = %c256_i32
// OFF: gpu.terminator
func.func @down(%h: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>, %s: tensor<?xi32>, %sc: tensor<?xf32>) -> tensor<?x512xbf16> {
  %y = moe.expert_gemm %h, %w offsets(%off : tensor<9xi32>) scatter(%s : tensor<?xi32>) scale(%sc : tensor<?xf32>) {transpose_rhs = true}
      : tensor<?x256xbf16>, tensor<8x512x256xbf16> -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
