// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-tail-units=true wgmma-swap-rows=0" | FileCheck %s
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-swap-rows=0" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-tail-units=true wgmma-swap-rows=0 wgmma-consumer-skew=2" | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-tail-units=true wgmma-swap-rows=0 wgmma-epilogue=direct" | FileCheck %s --check-prefix=OFF

// Tail units (wgmma-tail-units): an expert's last row tile of at most 64 rows
// runs as units of (its rows, column tiles c and c + 1), consumer warpgroup
// w on column tile c + w, in 2 * 4 stages of 32 K elements (K = 256), instead
// of a whole 128-row tile whose second warpgroup multiplies zeros.
// - Host: a second tensor map of the weights, boxes of 32 K elements x 128
//   rows, 64-byte swizzle (2); the kernel runs only when both maps exist.
// - Registers: producer 64, consumers 208 (the producer's second item path).
// - Producer: per item, a branch yields the item's K steps (8 for a tail
//   unit, 4 for a tile, opaque so that the tail flag is not live across
//   it). A tail unit's thread 0 marks each stage (1 at byte 192 + 4 s of the
//   header) before its expect_tx of 2 x 256 x 64 bytes and four TMA boxes
//   (CTA-only: no multicast) at 4096 + 16384 w + 8192 p of the stage; the
//   tail's rows go to all 128 row-table entries (row t % 64). A tile's
//   stages are marked 0.
// - Consumers: the item's first stage's mark, read once that stage is
//   full, selects every K step's operands: a tile's step is one stage (4
//   k16 MMAs), a tail unit's two (2 k16 MMAs on each: A at the stage for
//   both warpgroups, B at 4096 + 16384 w, the descriptors' xor turning
//   128-byte mode 1 / stride 1024 into 64-byte mode 2 / stride 512:
//   0xC000006000000000), so both kinds run one loop of 4 groups of four
//   MMAs, with no branch inside a wgmma group (the second stage's wait and
//   release are under the mark, outside the groups); the epilogue's column
//   tile is c + w, clamped.

// CHECK-LABEL: func.func @gathered(
// CHECK: call @moeRuntimeTensorMap3D(%{{.*}}, %c9{{.*}}, %c256{{.*}}, %c512{{.*}}, %c8{{.*}}, %{{.*}}, %{{.*}}, %c64{{.*}}, %c128{{.*}}, %c1{{.*}}, %c3{{.*}}, %c3{{.*}})
// CHECK: %[[TAILMAP:.*]] = call @moeRuntimeTensorMap3D(%{{.*}}, %c9{{.*}}, %c256{{.*}}, %c512{{.*}}, %c8{{.*}}, %{{.*}}, %{{.*}}, %c32{{.*}}, %c128{{.*}}, %c1{{.*}}, %c2{{.*}}, %c3{{.*}})
// CHECK: arith.cmpi ne, %[[TAILMAP]], %c0
// CHECK: gpu.launch
// CHECK: nvvm.setmaxregister  decrease 64
// The walk carries the item's number (i32: the handoff's barrier phases).
// CHECK: scf.for {{.*}} -> (index, index, index, i32)
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK: %[[C63:.*]] = arith.constant 63 : index
// CHECK: arith.andi %{{.*}}, %[[C63]] : index
// CHECK: llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %c8_i64
// CHECK: scf.for
// CHECK: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.shared.global
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: %c1_i32{{.*}} = arith.constant 1 : i32
// CHECK: %c192_i64 = arith.constant 192 : i64
// CHECK: llvm.store %c1_i32
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// CHECK-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true}
// CHECK: llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %c8_i64
// CHECK: } else {
// CHECK-COUNT-8: nvvm.cp.async.shared.global
// CHECK: %c192_i64 = arith.constant 192 : i64
// CHECK: llvm.store %c0_i32
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// CHECK: llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %c4_i64
// CHECK: nvvm.setmaxregister  increase 208
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: %c192_i64 = arith.constant 192 : i64
// CHECK: %[[MARK:.*]] = llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// CHECK: %[[TAIL:.*]] = arith.cmpi ne, %[[MARK]], %c0
// The first K step: its first stage again, the second (a tail unit's) under
// the mark, then one group of four MMAs whose descriptors the mark selects.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: scf.if %[[TAIL]] {
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: }
// CHECK: %c16384_i64{{.*}} = arith.constant 16384 : i64
// CHECK: %c4096_i64 = arith.constant 4096 : i64
// CHECK: %[[FLIP:.*]] = arith.constant -4611685606110527488 : i64
// CHECK: arith.xori %{{.*}}, %[[FLIP]] : i64
// CHECK-COUNT-3: arith.xori
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[A0:.*]] = arith.select %[[TAIL]], %{{.*}}, %{{.*}} : i64
// CHECK-NEXT: %[[B0:.*]] = arith.select %[[TAIL]], %{{.*}}, %{{.*}} : i64
// CHECK-NEXT: nvvm.wgmma.mma_async %[[A0]], %[[B0]], {{.*}} D[<f32>, <zero>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// The other K steps: one loop for both kinds (kSteps = 4 groups), the
// previous step's stages released (a tail unit's second under the mark).
// CHECK: %[[STEPS:.*]] = arith.select %[[TAIL]], %c8{{.*}}, %c4{{.*}} : index
// CHECK: scf.for %{{.*}} = %c1{{.*}} to %c4{{.*}} step
// CHECK: scf.if %[[TAIL]] {
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: scf.if %[[TAIL]] {
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: return

// Off (the default; with skewed consumers or the direct epilogue, which tail
// units do not support): one map, no stage marks in the producer, 56 / 224
// registers.
// OFF-LABEL: func.func @gathered(
// OFF: call @moeRuntimeTensorMap3D
// OFF-NOT: call @moeRuntimeTensorMap3D
// OFF: nvvm.setmaxregister  decrease 56
// OFF-NOT: %c192_i64
// OFF: nvvm.setmaxregister  increase 224
// OFF: return
func.func @gathered(%x: tensor<?x256xbf16>, %tok: tensor<?xi32>,
                    %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.expert_gemm %x[%tok : tensor<?xi32>], %w offsets(%off : tensor<9xi32>)
      {transpose_rhs = true}
      : tensor<?x256xbf16>, tensor<8x512x256xbf16> -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
