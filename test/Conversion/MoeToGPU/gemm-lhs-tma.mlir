// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-lhs-tma=true wgmma-swap-rows=0" | FileCheck %s
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-swap-rows=0" | FileCheck %s --check-prefix=OFF

// wgmma-lhs-tma: the main Hopper kernel of a GEMM without a gather loads its
// lhs tiles by TMA too. The host encodes the lhs tensor map per launch into
// a 64-byte aligned stack slot (moeRuntimeEncodeTensorMap3D: [K = 256,
// rows, 1], box 64 x 32 x 1 (a short tile loads only the boxes that cover its rows), 128-byte swizzle), loads it as the launch
// operand (a by-value kernel parameter after moe-gpu-tensor-map-params) and
// takes the SIMT kernel when the encoding fails; in the kernel, producer
// thread 0 expects the rhs bytes of a stage (256 rows of 128 bytes) plus
// 4096 per lhs box that covers the tile's rows (ceil(rows / 32), at most 4)
// and issues the copies: the rhs boxes, then up to four lhs boxes of 32
// rows at 4096-byte steps; the producer issues no cp.async for the lhs. The GEMM with a
// gather (rows of x by token) keeps its cp.async loader and no map.

// CHECK-LABEL: func.func @down(
// CHECK: %[[SLOT:.*]] = llvm.alloca %{{.*}} x !llvm.array<16 x i64> {alignment = 64 : i64}
// CHECK: %[[STATUS:.*]] = call @moeRuntimeEncodeTensorMap3D(%{{.*}}, %{{.*}}, %c9{{.*}}, %c256{{.*}}, %{{.*}}, %c1{{.*}}, %{{.*}}, %{{.*}}, %c64{{.*}}, %c32{{.*}}, %c1{{.*}}, %c3{{.*}}, %c3{{.*}})
// CHECK: %[[MAP:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.array<16 x i64>
// CHECK: arith.cmpi ne, %[[STATUS]], %c0
// CHECK: gpu.launch
// CHECK: %[[PTR:.*]] = builtin.unrealized_conversion_cast %[[MAP]] : !llvm.array<16 x i64> to !llvm.ptr
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: %[[R:.*]] = arith.addi %{{.*}}, %c31{{.*}} : index
// CHECK: %[[B:.*]] = arith.divsi %[[R]], %c32{{.*}} : index
// CHECK: %[[N:.*]] = arith.minui %[[B]], %c4{{.*}} : index
// CHECK: %[[L:.*]] = arith.muli %[[N]], %c4096{{.*}} : index
// CHECK: %[[LI:.*]] = arith.index_cast %[[L]] : index to i32
// CHECK: %[[BYTES:.*]] = arith.addi %c32768_i32{{.*}}, %[[LI]] : i32
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[BYTES]]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[PTR]]
// CHECK: nvvm.wgmma.mma_async
// CHECK: return

// CHECK-LABEL: func.func @gathered(
// CHECK-NOT: moeRuntimeEncodeTensorMap3D
// CHECK: nvvm.cp.async.shared.global
// CHECK: return

// OFF-NOT: moeRuntimeEncodeTensorMap3D
// OFF-NOT: unrealized_conversion_cast
func.func @down(%h: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>,
                %off: tensor<9xi32>, %rev: tensor<?xi32>) -> tensor<?x512xbf16> {
  %y = moe.expert_gemm %h, %w offsets(%off : tensor<9xi32>) scatter(%rev : tensor<?xi32>)
      {transpose_rhs = true}
      : tensor<?x256xbf16>, tensor<8x512x256xbf16> -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

func.func @gathered(%x: tensor<?x256xbf16>, %tok: tensor<?xi32>,
                    %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.expert_gemm %x[%tok : tensor<?xi32>], %w offsets(%off : tensor<9xi32>)
      {transpose_rhs = true}
      : tensor<?x256xbf16>, tensor<8x512x256xbf16> -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
