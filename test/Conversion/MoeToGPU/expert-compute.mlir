// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefixes=CHECK,AUTO,TMA
// RUN: moe-opt %s "--convert-moe-to-gpu=elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=CLUSTER
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-tma=false elide-fills=false" | FileCheck %s --check-prefixes=CHECK,AUTO,CPASYNC \
// RUN:   --implicit-check-not=moeRuntimeTensorMap3D --implicit-check-not=cp.async.bulk
// RUN: moe-opt %s "--convert-moe-to-gpu=gemm=simt elide-fills=false" | FileCheck %s --check-prefixes=CHECK,SIMT \
// RUN:   --implicit-check-not=nvvm. --implicit-check-not=dynamic_shared_memory
// RUN: moe-opt %s --convert-moe-to-gpu="tile-m=128 tile-n=64 tile-k=32 elide-fills=false" | FileCheck %s --check-prefix=TILE
// RUN: moe-opt %s "--convert-moe-to-gpu=elide-fills=false" | FileCheck %s --check-prefix=NOMOE
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=STAGED

// Expert compute: moe.grouped_matmul goes through moe.expert_gemm to a zero
// fill of the output rows no expert writes, then the GEMM kernel(s) of the
// configuration that Gemm/GemmConfig.cpp picks (gemm-config.mlir tests the
// choice itself).
//
// SIMT engine (f32 operands; any op with gemm=simt): one tiled kernel
// - grid (max(ceil(M / tile-m) + E, 1), ceil(N / tile-n)), blocks loop over
//   the row tiles of all experts with stride gridDim.x and find their expert
//   with an scf.while over the experts' tile counts;
// - (tile-m/4) * (tile-n/4) threads (256 for the default 64 x 64 tile),
//   each holding 4 x 4 f32 accumulators per GEMM operand;
// - workgroup buffers: the A tile (tile-k x tile-m f32) and one B tile
//   (tile-k x tile-n f32) per accumulator set (two with a GLU epilogue);
// - per K step: every global load, gpu.barrier, the shared-memory stores,
//   gpu.barrier, the math.fma products.
//
// Hopper engine (the default, sm_90a, for bf16 / f16 operands with
// K % 8 == 0, and N % 8 == 0 for rhs [E, K, N]): on the host, an scf.if on the operands' layout (unit inner
// strides, row strides multiples of 8 elements, 16-byte aligned base
// addresses) runs the wgmma kernel; its else branch is the SIMT kernel
// above, unchanged. The wgmma kernel (128 x 128 x 64 tile: every GEMM here
// has fewer than 512 rhs columns, see gemm-config-tile-n.mlir):
// - persistent grid max(min(work items, 132), 1), work items
//   (ceil(M / 128) + E) * ceil(N / 128); 384 threads (a producer warpgroup
//   and two consumer warpgroups); no static workgroup buffers but dynamic
//   shared memory: 1 KiB of barriers + 7 stages of (128 + 128) x 128 B +
//   512 B (the item handoff's row-table weights) + 1 KiB of alignment
//   slack = 231936 bytes;
// - rhs (weight) tiles by TMA (the default, TMA lines): the host asks the
//   runtime for a tensor map of rhs (moeRuntimeTensorMap3D: data type, dims
//   innermost first, byte strides, box, 128-byte swizzle), and a null map
//   (a layout TMA cannot describe) fails the guard too; with wgmma-tma=false
//   (CPASYNC lines) the producer copies them with cp.async;
// - thread 0 initialises a full and an empty (256 consumer arrivals)
//   mbarrier per stage, then fence.mbarrier.init and a block barrier; the
//   full barrier counts the 128 producer threads' cp.async arrivals, plus
//   with TMA thread 0's arrive.expect_tx of the rhs tile bytes (129); two
//   more for the item handoff: tableFull (128 producer arrivals) and
//   tableEmpty (256 consumer arrivals);
// - producer (warpgroup 0): setmaxregister decrease 56 (104 with the
//   rhs by cp.async, whose producer copies both operands); per K step it
//   waits until the stage is empty, issues its 16-byte cp.async (8 lhs rows
//   per thread; with cp.async rhs also 8 rhs rows / K rows), with TMA
//   thread 0 expects 128 x 128 B = 16384 bytes on the full barrier and
//   issues the tensor copies, and every thread arrives (noinc) on the full
//   barrier when its copies land; at the item's handoff step, once the
//   consumers are done with the previous item, it publishes the item's
//   record and row table in shared memory (tableFull);
// - consumers: setmaxregister increase 224 (200); per K step: wait full,
//   fence.proxy async.shared, wgmma fence, 4 wgmma m64n128k16 (f32 += 16-bit,
//   rhs K-major `col` with transpose_rhs, MN-major `row` without), commit,
//   wait for <= 1 group in flight, release the previous stage; then wait
//   for the item's record (tableFull) and the epilogue: bias, GLU and
//   scale on the accumulator fragments, then tableEmpty; the tile staged
//   in shared memory per consumer warpgroup (64 rows x 256 bytes) and
//   whole rows written with 16-byte stores.
//
// By default (CLUSTER lines; the details are in gemm-config.mlir) the
// kernel is built for 2-CTA clusters, launched in clusters (rows >= E x
// 128: row-tile pairs share each weight tile, multicast by TMA) or without
// them, chosen on the host; the AUTO runs describe the kernel without
// clusters (wgmma-cluster=1).
//
// CHECK lines hold in every run: the f32 kernels, and the SIMT kernels of
// the 16-bit ops (alone with gemm=simt, in the else branch otherwise). AUTO
// lines describe the guard and the Hopper kernel (TMA and CPASYNC lines,
// its rhs loader); with gemm=simt (SIMT) nothing of it is left.
// moe.glu is one elementwise rows x columns kernel.

// NOMOE-NOT: moe.

//===----------------------------------------------------------------------===//
// moe.grouped_matmul
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @grouped_matmul(
// CHECK: %[[LHS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x64xf32> to memref<?x64xf32, strided<[?, ?], offset: ?>>
// CHECK: %[[RHS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<8x64x256xf32> to memref<8x64x256xf32, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[OFF:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<9xi32> to memref<9xi32, strided<[?], offset: ?>>
// CHECK: %[[M:[a-z0-9_]+]] = memref.dim %[[LHS]], %c0
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?x256xf32>
// Zero fill first: rows no expert owns stay zero. Without a scatter those
// are the rows outside [lo, hi) = [offsets[0], offsets[E]) (clamped):
// min(rows, 264) blocks stride over their count lo + (M - max(lo, hi))
// (none for a well-formed dispatch), row i < lo ? i : hi + i - lo.
// CHECK: arith.minui %[[M]], %c264 : index
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%[[GX:[a-z0-9_]+]] = %{{[a-z0-9_]+}},
// CHECK: memref.load %[[OFF]][%c0{{(_[0-9]+)?}}]
// CHECK: memref.load %[[OFF]][%c8{{(_[0-9]+)?}}]
// CHECK: %[[HI:[a-z0-9_]+]] = arith.maxui %{{[a-z0-9_]+}}, %[[LO:[a-z0-9_]+]] : index
// CHECK: %[[REST:[a-z0-9_]+]] = arith.subi %[[M]], %[[HI]] : index
// CHECK: %[[COUNT:[a-z0-9_]+]] = arith.addi %[[LO]], %[[REST]] : index
// CHECK: scf.for %[[I:[a-z0-9_]+]] = %[[BX]] to %[[COUNT]] step %[[GX]] {
// CHECK: %[[BELOW:[a-z0-9_]+]] = arith.cmpi ult, %[[I]], %[[LO]] : index
// CHECK: %[[ROW:[a-z0-9_]+]] = arith.select %[[BELOW]], %[[I]], %{{[a-z0-9_]+}} : index
// CHECK: memref.store %cst{{(_[0-9]+)?}}, %[[OUT]][%[[ROW]], %{{[a-z0-9_]+}}] : memref<?x256xf32>
// CHECK: gpu.terminator
// f32 operands: the SIMT kernel alone, in both runs (no guard, no Hopper
// kernel).
// CHECK-NOT: scf.if
// CHECK-NOT: nvvm.
// CHECK: %[[RT:[a-z0-9_]+]] = arith.ceildivui %[[M]], %c64 : index
// CHECK: %[[GX0:[a-z0-9_]+]] = arith.addi %[[RT]], %c8 : index
// CHECK: %[[GX:[a-z0-9_]+]] = arith.maxui %[[GX0]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %[[BY:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in (%[[GDX:[a-z0-9_]+]] = %[[GX]], %{{[a-z0-9_]+}} = %c4, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TID:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) workgroup(%[[AS:[a-z0-9_]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>, %[[BS:[a-z0-9_]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// A 16 x 16 thread grid: tx = tid % 16, ty = tid / 16; column tile n0 = by * 64.
// CHECK: %[[TXI:[a-z0-9_]+]] = arith.remui %[[TID]], %c16{{(_[0-9]+)?}} : index
// CHECK: %[[TYI:[a-z0-9_]+]] = arith.divui %[[TID]], %c16{{(_[0-9]+)?}} : index
// CHECK: %[[N0:[a-z0-9_]+]] = arith.muli %[[BY]], %c64{{(_[0-9]+)?}} : index
// Row tiles of all experts, from the offsets clamped to [0, M).
// CHECK: %[[TOTAL:[a-z0-9_]+]] = scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %c8{{(_[0-9]+)?}} step %{{[a-z0-9_]+}} iter_args(%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}) -> (index) {
// CHECK: memref.load %[[OFF]]
// CHECK: arith.minsi %{{[a-z0-9_]+}}, %[[M]] : index
// CHECK: scf.for %[[TIDX:[a-z0-9_]+]] = %[[BX]] to %[[TOTAL]] step %[[GDX]] {
// The block finds its expert (FOUND#0) by advancing over the experts' tile
// counts while the tile lies past them (never beyond expert E - 1 = 7).
// CHECK: %[[FOUND:[a-z0-9_]+]]:2 = scf.while
// CHECK: arith.cmpi ult, %{{[a-z0-9_]+}}, %c7{{(_[0-9]+)?}} : index
// CHECK: arith.cmpi uge, %[[TIDX]], %{{[a-z0-9_]+}} : index
// CHECK: scf.condition
// K loop with 16 f32 accumulators (4 x 4 outputs per thread).
// CHECK: %[[ACC:[a-z0-9_]+]]:16 = scf.for %[[K0:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c64{{(_[0-9]+)?}} step %{{[a-z0-9_]+}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// All global loads of the step first (independent, so they overlap): the A
// tile (64 x 16 by 256 threads: 4 per thread, source rows fixed per tile) and
// the B tile rhs[e][min(k0 + kk, K-1)][min(n0 + c, N-1)] (coalesced along N,
// zero outside), then the barrier guarding shared memory, the stores
// (As[kk][r] transposed, Bs[kk][c]) and the barrier before the products.
// CHECK-COUNT-4: memref.load %[[LHS]][%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}]
// CHECK-COUNT-4: memref.load %[[RHS]][%[[FOUND]]#0, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] : memref<8x64x256xf32, strided<[?, ?, ?], offset: ?>>
// CHECK: gpu.barrier
// CHECK-COUNT-4: memref.store %{{[a-z0-9_]+}}, %[[AS]][%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] : memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-4: memref.store %{{[a-z0-9_]+}}, %[[BS]][%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] : memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// 16 steps of 4 x 4 fused multiply-adds from shared memory.
// CHECK-NEXT: %c16{{(_[0-9]+)?}} = arith.constant 16 : index
// CHECK: scf.for %[[KK:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c16{{(_[0-9]+)?}} step %{{[a-z0-9_]+}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK: memref.load %[[AS]][%[[KK]], %{{[a-z0-9_]+}}]
// CHECK: memref.load %[[BS]][%[[KK]], %{{[a-z0-9_]+}}]
// CHECK-COUNT-16: math.fma %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : f32
// CHECK-NOT: math.fma
// CHECK: scf.yield
// Epilogue: row r = ty + i*16 of the tile, column n0 + tx + j*16 < N.
// CHECK: arith.addi %[[TYI]], %c0{{(_[0-9]+)?}} : index
// CHECK: arith.addi %[[TXI]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[COL:[a-z0-9_]+]] = arith.addi %[[N0]], %{{[a-z0-9_]+}} : index
// CHECK: arith.cmpi ult, %[[COL]], %c256{{(_[0-9]+)?}} : index
// CHECK: memref.store %[[ACC]]#0, %[[OUT]][%{{[a-z0-9_]+}}, %[[COL]]] : memref<?x256xf32>
// CHECK-COUNT-15: memref.store %[[ACC]]#{{[0-9]+}}, %[[OUT]]
// CHECK-NOT: nvvm.
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<?x256xf32> to tensor<?x256xf32>

// With tile-m=128 tile-n=64 tile-k=32: grid.x from ceil(M / 128), 512
// threads (32 x 16), A tile 32 x 128, B tile 32 x 64, 32-step inner loop.
// TILE-LABEL: func.func @grouped_matmul(
// TILE: %[[M:[a-z0-9_]+]] = memref.dim
// TILE: %[[RT:[a-z0-9_]+]] = arith.ceildivui %[[M]], %c128 : index
// TILE: %[[GX0:[a-z0-9_]+]] = arith.addi %[[RT]], %c8 : index
// TILE: %[[GX:[a-z0-9_]+]] = arith.maxui %[[GX0]], %c1{{(_[0-9]+)?}} : index
// TILE: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GX]], %{{[a-z0-9_]+}} = %c4, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TID:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %c512, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) workgroup(%[[AS:[a-z0-9_]+]] : memref<32x128xf32, #gpu.address_space<workgroup>>, %[[BS:[a-z0-9_]+]] : memref<32x64xf32, #gpu.address_space<workgroup>>) {
// TILE: arith.remui %[[TID]], %c16{{(_[0-9]+)?}} : index
// TILE: arith.divui %[[TID]], %c16{{(_[0-9]+)?}} : index
// TILE: arith.ceildivui %{{[a-z0-9_]+}}, %c128{{(_[0-9]+)?}} : index
// A: 128 x 32 = 4096 values, B: 32 x 64 = 2048 values, 512 threads: 8 A
// and 4 B elements per thread and step, loaded, then stored after a barrier.
// TILE-COUNT-8: memref.load %{{[a-z0-9_]+}}[%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] : memref<?x64xf32
// TILE-COUNT-4: memref.load %{{[a-z0-9_]+}}[%{{[a-z0-9_#]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] : memref<8x64x256xf32
// TILE: gpu.barrier
// TILE-COUNT-8: memref.store %{{[a-z0-9_]+}}, %[[AS]][%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] : memref<32x128xf32, #gpu.address_space<workgroup>>
// TILE-COUNT-4: memref.store %{{[a-z0-9_]+}}, %[[BS]][%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] : memref<32x64xf32, #gpu.address_space<workgroup>>
// TILE-NEXT: gpu.barrier
// TILE: scf.for %[[KK:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c32{{(_[0-9]+)?}} step
// Rows ty, ty + 32, ty + 64, ty + 96 of the 128-row tile.
// TILE: memref.load %[[AS]][%[[KK]], %{{[a-z0-9_]+}}] : memref<32x128xf32, #gpu.address_space<workgroup>>
// TILE: arith.addi %{{[a-z0-9_]+}}, %c32{{(_[0-9]+)?}} : index
// TILE: arith.addi %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// TILE: arith.addi %{{[a-z0-9_]+}}, %c96{{(_[0-9]+)?}} : index
// TILE-COUNT-16: math.fma
// TILE-NOT: math.fma
// TILE: gpu.terminator
// TILE: bufferization.to_tensor
func.func @grouped_matmul(%a: tensor<?x64xf32>, %w: tensor<8x64x256xf32>, %off: tensor<9xi32>) -> tensor<?x256xf32> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
  return %r : tensor<?x256xf32>
}

// transpose_rhs, bf16, K = 64: by default the Hopper kernel under the layout
// guard with the SIMT kernel in its else branch; with gemm=simt the SIMT
// kernel alone. In the SIMT kernel rhs is E x N x K; the B tile is read
// along K (c = q / 16, kk = q % 16) from rhs[e][n0 + c][k0 + kk];
// bias[e][col] is added in the epilogue before the bf16 store.
// CHECK-LABEL: func.func @grouped_matmul_transpose_rhs_bias(
// CHECK: %[[LHS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x64xbf16>
// CHECK: %[[RHS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<8x32x64xbf16>
// CHECK: %[[BIAS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<8x32xbf16>
// CHECK: %[[M:[a-z0-9_]+]] = memref.dim %[[LHS]], %c0
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?x32xbf16>
// CHECK: gpu.launch
// CHECK: memref.store %cst{{(_[0-9]+)?}}, %[[OUT]]
// CHECK: gpu.terminator
// SIMT-NOT: scf.if
// The guard (nvvm::rowsAligned16 per operand): lhs unit inner stride
// (dim 1), row stride (dim 0) a multiple of 16 bytes, 16-byte aligned
// address; rhs the same with dim 2 inner and dims 0 and 1 as rows.
// AUTO: %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}:2, %[[LS:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[LHS]]
// AUTO-NEXT: arith.cmpi eq, %[[LS]]#1, %c1{{(_[0-9]+)?}} : index
// AUTO: %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}:2, %[[LS0:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[LHS]]
// AUTO: %[[LB:[a-z0-9_]+]] = arith.muli %[[LS0]]#0, %c2{{(_[0-9]+)?}} : index
// AUTO: arith.remui %[[LB]], %c16{{(_[0-9]+)?}} : index
// AUTO: memref.extract_aligned_pointer_as_index %[[LHS]]
// AUTO: arith.andi %{{[a-z0-9_]+}}, %c15_i64{{(_[0-9]+)?}} : i64
// AUTO: %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}:3, %[[RS:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[RHS]]
// AUTO-NEXT: arith.cmpi eq, %[[RS]]#2, %c1{{(_[0-9]+)?}} : index
// AUTO: %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}:3, %[[RS0:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[RHS]]
// AUTO: %[[RB0:[a-z0-9_]+]] = arith.muli %[[RS0]]#0, %c2{{(_[0-9]+)?}} : index
// AUTO: arith.remui %[[RB0]], %c16{{(_[0-9]+)?}} : index
// AUTO: %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}:3, %[[RS1:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[RHS]]
// AUTO: %[[RB1:[a-z0-9_]+]] = arith.muli %[[RS1]]#1, %c2{{(_[0-9]+)?}} : index
// AUTO: arith.remui %[[RB1]], %c16{{(_[0-9]+)?}} : index
// AUTO: memref.extract_aligned_pointer_as_index %[[RHS]]
// AUTO: arith.andi %{{[a-z0-9_]+}}, %c15_i64{{(_[0-9]+)?}} : i64
// CPASYNC: arith.andi %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : i1
// CPASYNC-NEXT: %[[OK:[a-z0-9_]+]] = arith.andi %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : i1
// The tensor map: bf16 (9), dims (K = 64, N = 32, E = 8), the byte strides
// of N and E, a 64 x 64 x 1 box (half the 128-row tile), swizzle 128B (3),
// L2 promotion 256B (3).
// TMA: %[[MAP:[a-z0-9_]+]] = call @moeRuntimeTensorMap3D(%{{[a-z0-9_]+}}, %c9_i64, %c64_i64, %c32_i64, %c8_i64, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c64_i64{{(_[0-9]+)?}}, %c64_i64{{(_[0-9]+)?}}, %c1_i64, %c3_i64, %c3_i64{{(_[0-9]+)?}}) : (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> i64
// TMA: %[[HAS:[a-z0-9_]+]] = arith.cmpi ne, %[[MAP]], %c0_i64{{(_[0-9]+)?}} : i64
// TMA-NEXT: %[[OK:[a-z0-9_]+]] = arith.andi %{{[a-z0-9_]+}}, %[[HAS]] : i1
// AUTO-NEXT: scf.if %[[OK]] {
// The wgmma kernel: persistent grid of at most 132 blocks over
// (ceil(M / 128) + 8) x 1 work items, 384 threads, 231936 bytes of dynamic
// shared memory and no workgroup buffers.
// AUTO: %[[RT:[a-z0-9_]+]] = arith.ceildivui %[[M]], %c128{{(_[0-9]+)?}} : index
// AUTO-NEXT: arith.addi %[[RT]], %c8{{(_[0-9]+)?}} : index
// AUTO: %[[G0:[a-z0-9_]+]] = arith.minui %{{[a-z0-9_]+}}, %c132{{(_[0-9]+)?}} : index
// AUTO-NEXT: %[[G:[a-z0-9_]+]] = arith.maxui %[[G0]], %c1{{(_[0-9]+)?}} : index
// AUTO: gpu.launch blocks(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[G]], %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TID:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %c384, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c231936_i32 {
// AUTO-NEXT: gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// Thread 0: 6 stages x (full, empty) barriers.
// AUTO: arith.cmpi eq, %[[TID]], %c0{{(_[0-9]+)?}} : index
// AUTO-NEXT: scf.if
// TMA: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c129_i32 : !llvm.ptr<3>, i32
// CPASYNC: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c128_i32 : !llvm.ptr<3>, i32
// AUTO: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c256_i32 : !llvm.ptr<3>, i32
// TMA-COUNT-10: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{129|256}}_i32{{(_[0-9]+)?}} : !llvm.ptr<3>, i32
// CPASYNC-COUNT-10: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32{{(_[0-9]+)?}} : !llvm.ptr<3>, i32
// The item handoff's tableFull (the producer's 128 threads) and tableEmpty
// (the consumers' 256).
// AUTO: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c128_i32{{(_[0-9]+)?}} : !llvm.ptr<3>, i32
// AUTO: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c256_i32{{(_[0-9]+)?}} : !llvm.ptr<3>, i32
// AUTO-NEXT: nvvm.fence.mbarrier.init
// AUTO-NEXT: }
// AUTO-NEXT: gpu.barrier
// Warpgroup tid / 128 == 0 produces, 1 and 2 consume.
// AUTO: %[[WG:[a-z0-9_]+]] = arith.shrui %[[TID]], %c7{{(_[0-9]+)?}} : index
// AUTO: %[[ISP:[a-z0-9_]+]] = arith.cmpi eq, %[[WG]], %c0{{(_[0-9]+)?}} : index
// AUTO-NEXT: scf.if %[[ISP]] {
// TMA-NEXT: nvvm.setmaxregister decrease 56
// CPASYNC-NEXT: nvvm.setmaxregister decrease 104
// AUTO: nvvm.mbarrier.try_wait.parity
// TMA-COUNT-8: nvvm.cp.async.shared.global %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, 16, cache = cg, %{{[a-z0-9_]+}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CPASYNC-COUNT-16: nvvm.cp.async.shared.global %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, 16, cache = cg, %{{[a-z0-9_]+}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// AUTO-NOT: nvvm.cp.async.shared.global
// TMA: arith.cmpi eq, %[[TID]], %c0{{(_[0-9]+)?}} : index
// TMA-NEXT: scf.if
// TMA: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c16384_i32 : !llvm.ptr<3>, i32
// TMA: llvm.inttoptr %[[MAP]] : i64 to !llvm.ptr
// TMA: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, box[%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] {isCTAOnly = true} : !llvm.ptr<3>, !llvm.ptr
// AUTO-NOT: nvvm.cp.async.shared.global
// AUTO: nvvm.cp.async.mbarrier.arrive %{{[a-z0-9_]+}} {noinc = true} : !llvm.ptr<3>
// AUTO: } else {
// TMA-NEXT: nvvm.setmaxregister increase 224
// CPASYNC-NEXT: nvvm.setmaxregister increase 200
// AUTO: nvvm.mbarrier.try_wait.parity
// AUTO-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// The first K step of a tile (peeled): its first MMA does not accumulate
// (D = A * B, on a poison accumulator: no zeros live across the wait).
// AUTO: nvvm.wgmma.fence.aligned
// AUTO: nvvm.wgmma.mma_async %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !llvm.struct<({{(f32, ){63}f32}})> -> !llvm.struct<({{(f32, ){63}f32}})>
// AUTO-COUNT-3: nvvm.wgmma.mma_async %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !llvm.struct<({{(f32, ){63}f32}})> -> !llvm.struct<({{(f32, ){63}f32}})>
// AUTO-NEXT: nvvm.wgmma.commit.group.sync.aligned
// AUTO-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// The other K steps: wait, four accumulating MMAs, release the step before.
// AUTO: nvvm.mbarrier.try_wait.parity
// AUTO: nvvm.wgmma.fence.aligned
// AUTO-COUNT-4: nvvm.wgmma.mma_async %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !llvm.struct<({{(f32, ){63}f32}})> -> !llvm.struct<({{(f32, ){63}f32}})>
// AUTO-NEXT: nvvm.wgmma.commit.group.sync.aligned
// AUTO-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// AUTO: nvvm.mbarrier.arrive
// AUTO: nvvm.wgmma.wait.group.sync.aligned 0
// AUTO: nvvm.mbarrier.arrive
// Epilogue on the 64 accumulator values of a thread: bias, bf16, two
// adjacent columns per store into the warpgroup's shared staging; a
// warpgroup barrier (bar.sync 1 + consumer, 128); then a loop over the
// staged rows: 16-byte copies to out (element stores where out's rows are
// not 16-byte aligned or at the column tail); a barrier before reuse.
// AUTO: llvm.extractvalue %{{[a-z0-9_]+}}[0]
// AUTO: memref.load %[[BIAS]]
// AUTO: arith.addf
// AUTO: arith.truncf %{{[a-z0-9_]+}} : f32 to bf16
// AUTO: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<3>
// AUTO-COUNT-31: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<3>
// AUTO-NOT: llvm.store {{.*}}!llvm.ptr<3>
// AUTO: nvvm.barrier id = %{{[a-z0-9_]+}} number_of_threads = %c128_i32
// AUTO: scf.for
// AUTO: llvm.load %{{[a-z0-9_]+}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// AUTO: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// AUTO: } else {
// AUTO-COUNT-8: memref.store %{{[a-z0-9_]+}}, %[[OUT]]
// AUTO-NOT: memref.store
// AUTO: nvvm.barrier id = %{{[a-z0-9_]+}} number_of_threads = %c128_i32
// AUTO: gpu.terminator
// AUTO-NEXT: }
// AUTO-NEXT: } else {
// AUTO-NOT: nvvm.
// The SIMT kernel (else branch / alone).
// CHECK: gpu.launch blocks(%{{[a-z0-9_]+}}, %[[BY:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, {{.*}} workgroup(%{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %[[BS:[a-z0-9_]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// CHECK: %[[N0:[a-z0-9_]+]] = arith.muli %[[BY]], %c64{{(_[0-9]+)?}} : index
// CHECK: %[[FOUND:[a-z0-9_]+]]:2 = scf.while
// CHECK: scf.for %[[K0:[a-z0-9_]+]] = {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// B element q = tid + it*256: c = q / 16, kk = q % 16, read (clamped into
// the tensor, zero outside) before the barrier, stored Bs[kk][c] after it.
// CHECK: %[[BC:[a-z0-9_]+]] = arith.divui %{{[a-z0-9_]+}}, %c16{{(_[0-9]+)?}} : index
// CHECK-NEXT: %c16{{(_[0-9]+)?}} = arith.constant 16 : index
// CHECK-NEXT: %[[BK:[a-z0-9_]+]] = arith.remui %{{[a-z0-9_]+}}, %c16{{(_[0-9]+)?}} : index
// CHECK-NEXT: %[[BKG:[a-z0-9_]+]] = arith.addi %[[K0]], %[[BK]] : index
// CHECK-NEXT: %[[BCG:[a-z0-9_]+]] = arith.addi %[[N0]], %[[BC]] : index
// CHECK: arith.cmpi ult, %[[BCG]], %c32{{(_[0-9]+)?}} : index
// CHECK: %[[KS:[a-z0-9_]+]] = arith.minui %[[BKG]], %c63{{(_[0-9]+)?}} : index
// CHECK: %[[CS:[a-z0-9_]+]] = arith.minui %[[BCG]], %c31{{(_[0-9]+)?}} : index
// CHECK: %[[BV:[a-z0-9_]+]] = memref.load %[[RHS]][%[[FOUND]]#0, %[[CS]], %[[KS]]] : memref<8x32x64xbf16, strided<[?, ?, ?], offset: ?>>
// CHECK: arith.extf %[[BV]] : bf16 to f32
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[BS]][%[[BK]], %[[BC]]] : memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-16: math.fma
// Epilogue with bias.
// CHECK: %[[BB:[a-z0-9_]+]] = memref.load %[[BIAS]][%[[FOUND]]#0, %[[COL:[a-z0-9_]+]]] : memref<8x32xbf16, strided<[?, ?], offset: ?>>
// CHECK: %[[BF:[a-z0-9_]+]] = arith.extf %[[BB]] : bf16 to f32
// CHECK: %[[Y:[a-z0-9_]+]] = arith.addf %{{[a-z0-9_#]+}}, %[[BF]] : f32
// CHECK: %[[YT:[a-z0-9_]+]] = arith.truncf %[[Y]] : f32 to bf16
// CHECK: memref.store %[[YT]], %[[OUT]][%{{[a-z0-9_]+}}, %[[COL]]] : memref<?x32xbf16>
// AUTO-NOT: nvvm.
// CHECK: gpu.terminator
// CHECK-NEXT: }
// AUTO-NEXT: }
// CHECK-NEXT: %{{[a-z0-9_]+}} = bufferization.to_tensor %[[OUT]] restrict writable

// The SIMT tile options shape the fallback kernel only: the wgmma kernel
// keeps its 128 x 128 tile (384 threads, 231936 bytes), the else branch
// gets 512 threads and the 32 x 128 / 32 x 64 workgroup tiles.
// TILE-LABEL: func.func @grouped_matmul_transpose_rhs_bias(
// TILE: threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// TILE: gpu.terminator
// TILE-NEXT: }
// TILE-NEXT: } else {
// TILE: threads({{.*}}) in (%{{[a-z0-9_]+}} = %c512{{(_[0-9]+)?}}, {{.*}}) workgroup(%{{[a-z0-9_]+}} : memref<32x128xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<32x64xf32, #gpu.address_space<workgroup>>) {
func.func @grouped_matmul_transpose_rhs_bias(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %off: tensor<9xi32>, %b: tensor<8x32xbf16>) -> tensor<?x32xbf16> {
  %y = moe.grouped_matmul %x, %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x32xbf16>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x32x64xbf16> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}


//===----------------------------------------------------------------------===//
// moe.expert_gemm: gather + bias + GLU (interleaved) + scatter + scale
//===----------------------------------------------------------------------===//

// M is the gather length; two B tiles (gate column 2c, up column 2c + 1)
// and 32 accumulators; the epilogue adds the bias at both columns, applies
// silu(gate) * up, scales by scale[dest] and stores to row scatter[row].
// CLUSTER-LABEL: func.func @expert_gemm_fused(
// CLUSTER: scf.if %{{[a-z0-9_]+}} {
// CLUSTER: %[[PAIRS:[a-z0-9_]+]] = arith.cmpi uge, %{{[a-z0-9_]+}}, %c1024 : index
// CLUSTER: %[[CX:[a-z0-9_]+]] = arith.select %[[PAIRS]], %c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}} : index
// CLUSTER: gpu.launch clusters({{.*}}) in (%{{[a-z0-9_]+}} = %[[CX]], {{.*}} dynamic_shared_memory_size %c231936_i32 {
// CLUSTER: nvvm.cluster.arrive
// CLUSTER: nvvm.mapa
// CLUSTER: nvvm.cluster.arrive
// CLUSTER-NEXT: nvvm.cluster.wait
// CLUSTER-NEXT: gpu.terminator
// CLUSTER-NEXT: }
// CLUSTER-NEXT: } else {
// CLUSTER-NOT: nvvm.
// CLUSTER: gpu.launch {{.*}} workgroup(
// CLUSTER: return

// CHECK-LABEL: func.func @expert_gemm_fused(
// CHECK: %[[LHS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x64xbf16>
// CHECK: %[[RHS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<8x64x256xbf16>
// CHECK: %[[OFF:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<9xi32>
// CHECK: %[[GATHER:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?xi32>
// CHECK: %[[BIAS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<8x256xbf16>
// CHECK: %[[SCATTER:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?xi32>
// CHECK: %[[SCALE:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?xf32>
// CHECK: %[[M:[a-z0-9_]+]] = memref.dim %[[GATHER]], %c0
// CHECK: %[[ROWS:[a-z0-9_]+]] = memref.dim %[[LHS]], %c0{{(_[0-9]+)?}}
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?x128xbf16>
// With a scatter the rows written are the in-range scatter targets of the
// GEMM rows in [offsets[0], offsets[E]): a flag per output row is cleared,
// set for each such target, and the unflagged rows are zeroed.
// CHECK: %[[FLAG:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: gpu.launch
// CHECK: memref.store %c0_i32, %[[FLAG]]
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: %[[T:[a-z0-9_]+]] = memref.load %[[SCATTER]]
// CHECK: memref.load %[[OFF]]
// CHECK: memref.load %[[OFF]]
// CHECK: %[[TI:[a-z0-9_]+]] = arith.index_cast %[[T]] : i32 to index
// CHECK: memref.store %c1_i32{{(_[0-9]+)?}}, %[[FLAG]][%[[TI]]]
// CHECK: gpu.terminator
// One thread per row reads its flag; a block lists its unflagged rows in
// shared memory (atomic count) and zeroes them together.
// CHECK: %[[ZB:[a-z0-9_]+]] = arith.ceildivui %[[M]], %c256{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %{{[a-z0-9_]+}}, {{.*}} workgroup(%[[LIST:[a-z0-9_]+]] : memref<256xi32, #gpu.address_space<workgroup>>, %[[CNT:[a-z0-9_]+]] : memref<1xi32, #gpu.address_space<workgroup>>) {
// CHECK: memref.load %[[FLAG]][%{{[a-z0-9_]+}}]
// CHECK: %[[AT:[a-z0-9_]+]] = memref.atomic_rmw addi %{{[a-z0-9_]+}}, %[[CNT]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[LIST]][%{{[a-z0-9_]+}}]
// CHECK: gpu.barrier
// CHECK: memref.load %[[CNT]]
// CHECK: %[[LROW:[a-z0-9_]+]] = memref.load %[[LIST]]
// CHECK: %[[ROW:[a-z0-9_]+]] = arith.index_cast %[[LROW]] : i32 to index
// CHECK: memref.store %cst, %[[OUT]][%[[ROW]], %{{[a-z0-9_]+}}]
// CHECK: gpu.terminator
// SIMT-NOT: scf.if
// Hopper kernel (default): rhs [E, K, N] is MN-major (wgmma B `row`); the
// producer reads the gathered source rows once per work item (8 rows of the
// 128-row tile per thread) and copies 8 lhs rows + 8 rhs K rows per stage;
// the epilogue pairs gate column 2c and up column 2c + 1 of the fragments
// (32 outputs per thread), with bias, silu, scale[dest] and the scatter.
// AUTO: memref.extract_aligned_pointer_as_index %[[RHS]]
// CPASYNC: arith.andi %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : i1
// CPASYNC-NEXT: %[[OK:[a-z0-9_]+]] = arith.andi %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : i1
// rhs [E, K, N]: dims (N = 256, K = 64, E = 8), a 64 x 64 x 1 box.
// TMA: %[[MAP:[a-z0-9_]+]] = call @moeRuntimeTensorMap3D(%{{[a-z0-9_]+}}, %c9_i64, %c256_i64, %c64_i64, %c8_i64, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c64_i64{{(_[0-9]+)?}}, %c64_i64{{(_[0-9]+)?}}, %c1_i64, %c3_i64, %c3_i64{{(_[0-9]+)?}})
// TMA: %[[HAS:[a-z0-9_]+]] = arith.cmpi ne, %[[MAP]], %c0_i64{{(_[0-9]+)?}} : i64
// TMA-NEXT: %[[OK:[a-z0-9_]+]] = arith.andi %{{[a-z0-9_]+}}, %[[HAS]] : i1
// AUTO-NEXT: scf.if %[[OK]] {
// AUTO: arith.ceildivui %[[M]], %c128{{(_[0-9]+)?}} : index
// AUTO: gpu.launch blocks({{.*}}) threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// AUTO-COUNT-14: nvvm.mbarrier.init
// TMA: nvvm.setmaxregister decrease 56
// CPASYNC: nvvm.setmaxregister decrease 104
// The producer, per item (staged epilogue, item handoff): its row's
// destination scatter[row] and routing weight scale[scatter[row]] first
// (loads that complete under the copies), then the gathered rows.
// AUTO: memref.load %[[SCATTER]]
// AUTO: memref.load %[[SCALE]]
// AUTO-COUNT-8: memref.load %[[GATHER]]
// AUTO-NOT: memref.load %[[GATHER]]
// AUTO: nvvm.mbarrier.try_wait.parity
// TMA-COUNT-8: nvvm.cp.async.shared.global
// CPASYNC-COUNT-16: nvvm.cp.async.shared.global
// AUTO-NOT: nvvm.cp.async.shared.global
// TMA: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c16384_i32
// TMA: nvvm.cp.async.bulk.tensor.shared.cluster.global
// AUTO: nvvm.cp.async.mbarrier.arrive
// At the handoff step: once the previous item's epilogue is done
// (tableEmpty), thread 0 the record (expert, column tile), every thread
// its row's destination and weight into the row table, then tableFull.
// AUTO: nvvm.mbarrier.try_wait.parity
// AUTO-COUNT-2: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// AUTO: llvm.store %{{[a-z0-9_#]+}}, %{{[a-z0-9_]+}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// AUTO: llvm.store %{{[a-z0-9_#]+}}, %{{[a-z0-9_]+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// AUTO: nvvm.mbarrier.arrive
// TMA: nvvm.setmaxregister increase 224
// CPASYNC: nvvm.setmaxregister increase 200
// The consumers load nothing of an item before its MMAs: after them they
// wait for tableFull and read the record and the two fragment rows'
// weights from shared memory.
// AUTO-NOT: memref.load %[[SCATTER]]
// AUTO-NOT: memref.load %[[SCALE]]
// AUTO-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] :
// AUTO: nvvm.wgmma.wait.group.sync.aligned 0
// AUTO: nvvm.mbarrier.try_wait.parity
// AUTO-COUNT-2: llvm.load %{{[a-z0-9_]+}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// AUTO-COUNT-2: llvm.load %{{[a-z0-9_]+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// The GLU tile goes through shared memory too:
// the routing weights of the thread's two rows first (scale[scatter[row]]),
// per output column both biases, silu(gate) * up * weight, one bf16 into
// the staging; a warpgroup barrier; rows copied to out[scatter[row]] in
// 16-byte pieces.
// STAGED-LABEL: func.func @expert_gemm_fused(
// STAGED: nvvm.wgmma.wait.group.sync.aligned 0
// STAGED: memref.load
// STAGED: memref.load
// STAGED: math.exp
// STAGED: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 2 : i64} : bf16, !llvm.ptr<3>
// STAGED-COUNT-31: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 2 : i64} : bf16, !llvm.ptr<3>
// STAGED: nvvm.barrier id = %{{[a-z0-9_]+}} number_of_threads = %c128_i32
// 16-byte stores (aligned rows, whole chunks): 64 output columns are 8
// chunks per row, 16 rows per pass of the 128 threads, 4 rows per round
// (step 64): the four rows' row-table entries, then their four staged
// chunks, then the four stores (each only for a row with a destination).
// STAGED: scf.if
// STAGED-NOT: llvm.store
// STAGED: scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %c64{{(_[0-9]+)?}} step %c64
// STAGED-NOT: llvm.store
// STAGED-COUNT-4: llvm.load %{{[a-z0-9_]+}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// STAGED-NOT: llvm.store
// STAGED-COUNT-4: llvm.load %{{[a-z0-9_]+}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// STAGED-NOT: llvm.load
// STAGED-COUNT-4: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// Else (columns past N or unaligned rows) element stores, one row per
// iteration.
// STAGED: scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %c64{{(_[0-9]+)?}} step %c16
// STAGED: llvm.load %{{[a-z0-9_]+}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// STAGED: memref.store
// STAGED: gpu.terminator
// silu with the approximate exp and divide (afn); one bf16 per output
// column into the staging (32 per thread); the store loop reads each row's
// destination from the row table (-1: nothing stored); 16-byte copies, or
// element stores at a partial chunk.
// AUTO: memref.load %[[BIAS]]
// AUTO: memref.load %[[BIAS]]
// AUTO: math.exp %{{[a-z0-9_]+}} fastmath<afn> : f32
// AUTO: arith.divf %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} fastmath<afn> : f32
// AUTO-COUNT-32: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 2 : i64} : bf16, !llvm.ptr<3>
// AUTO: nvvm.barrier id = %{{[a-z0-9_]+}} number_of_threads = %c128_i32
// AUTO: llvm.load %{{[a-z0-9_]+}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// AUTO-NOT: memref.load %[[SCATTER]]
// AUTO: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// AUTO-COUNT-8: memref.store %{{[a-z0-9_]+}}, %[[OUT]]
// AUTO-NOT: memref.store
// AUTO: gpu.terminator
// AUTO-NEXT: }
// AUTO-NEXT: } else {
// AUTO-NOT: nvvm.
// The SIMT kernel (else branch / alone).
// CHECK: %[[RT:[a-z0-9_]+]] = arith.ceildivui %[[M]], %c64{{(_[0-9]+)?}} : index
// CHECK: %[[GX0:[a-z0-9_]+]] = arith.addi %[[RT]], %c8{{(_[0-9]+)?}} : index
// CHECK: %[[GX:[a-z0-9_]+]] = arith.maxui %[[GX0]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GX]], %{{[a-z0-9_]+}} = %c2{{(_[0-9]+)?}}, {{.*}}) threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) workgroup(%[[AS:[a-z0-9_]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>, %[[GS:[a-z0-9_]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>, %[[US:[a-z0-9_]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// CHECK: %[[FOUND:[a-z0-9_]+]]:2 = scf.while
// Gather prologue, once per tile: source row gather[row] if in
// [0, rows(lhs)), else -1 (a zero row).
// CHECK: %[[SRC:[a-z0-9_]+]] = memref.load %[[GATHER]][%{{[a-z0-9_]+}}] : memref<?xi32, strided<[?], offset: ?>>
// CHECK: %[[ROWS32:[a-z0-9_]+]] = arith.index_cast %[[ROWS]] : index to i32
// CHECK: arith.cmpi slt, %[[SRC]], %[[ROWS32]] : i32
// CHECK: arith.select %{{[a-z0-9_]+}}, %[[SRC]], %c-1_i32 : i32
// CHECK: %[[ACC:[a-z0-9_]+]]:32 = scf.for
// CHECK: arith.cmpi sge, %{{[a-z0-9_]+}}, %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[SI:[a-z0-9_]+]] = arith.index_cast %{{[a-z0-9_]+}} : i32 to index
// CHECK: memref.load %[[LHS]][%[[SI]], %{{[a-z0-9_]+}}]
// Gate tile: column 2c; up tile: column 2c + 1 (columns clamped first).
// CHECK: %[[GC:[a-z0-9_]+]] = arith.muli %{{[a-z0-9_]+}}, %c2{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[RHS]][%[[FOUND]]#0, %{{[a-z0-9_]+}}, %[[GC]]]
// CHECK-COUNT-3: memref.load %[[RHS]]
// CHECK: %[[UC0:[a-z0-9_]+]] = arith.muli %{{[a-z0-9_]+}}, %c2{{(_[0-9]+)?}} : index
// CHECK: %[[UC:[a-z0-9_]+]] = arith.addi %[[UC0]], %c1{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[RHS]][%[[FOUND]]#0, %{{[a-z0-9_]+}}, %[[UC]]]
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[AS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[GS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[US]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[GS]]
// CHECK-COUNT-4: math.fma
// CHECK: memref.load %[[US]]
// CHECK-COUNT-4: math.fma
// CHECK: scf.yield {{.*}} : f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32{{$}}
// Scatter epilogue: destination scatter[row], stored only when in [0, M);
// the factor scale[dest] is loaded at the destination clamped to 0 (in
// bounds even for a dropped row).
// CHECK: %[[DEST:[a-z0-9_]+]] = memref.load %[[SCATTER]][%{{[a-z0-9_]+}}] : memref<?xi32, strided<[?], offset: ?>>
// CHECK: %[[M32:[a-z0-9_]+]] = arith.index_cast %[[M]] : index to i32
// CHECK: %[[LT:[a-z0-9_]+]] = arith.cmpi slt, %[[DEST]], %[[M32]] : i32
// CHECK: %[[GE:[a-z0-9_]+]] = arith.cmpi sge, %[[DEST]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[VALID:[a-z0-9_]+]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK: %[[DS:[a-z0-9_]+]] = arith.select %[[VALID]], %[[DEST]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[D:[a-z0-9_]+]] = arith.index_cast %[[DS]] : i32 to index
// CHECK: %[[FACTOR:[a-z0-9_]+]] = memref.load %[[SCALE]][%[[D]]] : memref<?xf32, strided<[?], offset: ?>>
// CHECK: scf.if %[[VALID]] {
// CHECK: arith.cmpi ult, %[[COL:[a-z0-9_]+]], %c128{{(_[0-9]+)?}} : index
// CHECK: %[[BGC:[a-z0-9_]+]] = arith.muli %[[COL]], %c2{{(_[0-9]+)?}} : index
// CHECK: %[[BG:[a-z0-9_]+]] = memref.load %[[BIAS]][%[[FOUND]]#0, %[[BGC]]]
// CHECK: %[[BGF:[a-z0-9_]+]] = arith.extf %[[BG]] : bf16 to f32
// CHECK: %[[GATE:[a-z0-9_]+]] = arith.addf %[[ACC]]#0, %[[BGF]] : f32
// CHECK: %[[BUC:[a-z0-9_]+]] = arith.addi %{{[a-z0-9_]+}}, %c1{{(_[0-9]+)?}} : index
// CHECK: %[[BU:[a-z0-9_]+]] = memref.load %[[BIAS]][%[[FOUND]]#0, %[[BUC]]]
// CHECK: %[[BUF:[a-z0-9_]+]] = arith.extf %[[BU]] : bf16 to f32
// CHECK: %[[UP:[a-z0-9_]+]] = arith.addf %[[ACC]]#16, %[[BUF]] : f32
// silu(gate) = gate / (1 + exp(-gate)) (approximate exp and divide),
// times (up + 0).
// CHECK: arith.negf
// CHECK: math.exp %{{[a-z0-9_]+}} fastmath<afn> : f32
// CHECK: %[[SILU:[a-z0-9_]+]] = arith.divf %[[GATE]], %{{[a-z0-9_]+}} fastmath<afn> : f32
// CHECK: %[[UPB:[a-z0-9_]+]] = arith.addf %[[UP]], %{{[a-z0-9_]+}} : f32
// CHECK: %[[G:[a-z0-9_]+]] = arith.mulf %[[SILU]], %[[UPB]] : f32
// CHECK: %[[S:[a-z0-9_]+]] = arith.mulf %[[G]], %[[FACTOR]] : f32
// CHECK: %[[ST:[a-z0-9_]+]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: memref.store %[[ST]], %[[OUT]][%[[D]], %[[COL]]] : memref<?x128xbf16>
// AUTO-NOT: nvvm.
// CHECK: gpu.terminator
// CHECK-NEXT: }
// AUTO-NEXT: }
// CHECK-NEXT: %{{[a-z0-9_]+}} = bufferization.to_tensor %[[OUT]] restrict writable : memref<?x128xbf16> to tensor<?x128xbf16>
func.func @expert_gemm_fused(%x: tensor<?x64xbf16>, %g: tensor<?xi32>, %w: tensor<8x64x256xbf16>, %off: tensor<9xi32>, %b: tensor<8x256xbf16>, %s: tensor<?xi32>, %sc: tensor<?xf32>) -> tensor<?x128xbf16> {
  %y = moe.expert_gemm %x[%g : tensor<?xi32>], %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x256xbf16>) scatter(%s : tensor<?xi32>) scale(%sc : tensor<?xf32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<interleaved>} : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// Concat GLU epilogue, f16: by default the Hopper kernel (f16 wgmma, rhs
// MN-major; a 128-column tile holds the gate half and the up half of 64
// output columns, so each thread pairs fragments j and j + 8: 32 outputs),
// the SIMT kernel in the else branch. In the SIMT kernel the up
// accumulator reads rhs column c + N' (N' = 32).
// CHECK-LABEL: func.func @expert_gemm_glu_concat(
// CHECK: %[[RHS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<4x64x64xf16>
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%{{[a-z0-9_]+}}) : memref<?x32xf16>
// CHECK: gpu.terminator
// SIMT-NOT: scf.if
// AUTO: scf.if %{{[a-z0-9_]+}} {
// AUTO: gpu.launch blocks({{.*}}) threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// TMA: nvvm.setmaxregister decrease 56
// CPASYNC: nvvm.setmaxregister decrease 104
// TMA-COUNT-8: nvvm.cp.async.shared.global
// CPASYNC-COUNT-16: nvvm.cp.async.shared.global
// AUTO-NOT: nvvm.cp.async.shared.global
// TMA: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c16384_i32
// TMA: nvvm.cp.async.bulk.tensor.shared.cluster.global
// TMA: nvvm.setmaxregister increase 224
// CPASYNC: nvvm.setmaxregister increase 200
// AUTO-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>] :
// AUTO: math.erf
// AUTO: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<3>
// AUTO: nvvm.barrier id = %{{[a-z0-9_]+}} number_of_threads = %c128_i32
// AUTO: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// AUTO-COUNT-8: memref.store %{{[a-z0-9_]+}}, %[[OUT]]
// AUTO-NOT: memref.store
// AUTO: gpu.terminator
// AUTO-NEXT: }
// AUTO-NEXT: } else {
// AUTO-NOT: nvvm.
// CHECK: workgroup(%[[AS:[a-z0-9_]+]] : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>)
// CHECK: memref.load %[[RHS]][%{{[a-z0-9_#]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}]
// The up tile (second accumulator) reads column min(c, 31) + 32.
// CHECK-COUNT-3: memref.load %[[RHS]]
// CHECK: %[[CS2:[a-z0-9_]+]] = arith.minui %{{[a-z0-9_]+}}, %c31{{(_[0-9]+)?}} : index
// CHECK-NEXT: %c32{{(_[0-9]+)?}} = arith.constant 32 : index
// CHECK-NEXT: %[[UC:[a-z0-9_]+]] = arith.addi %[[CS2]], %c32{{(_[0-9]+)?}} : index
// CHECK-NEXT: memref.load %[[RHS]][%{{[a-z0-9_#]+}}, %{{[a-z0-9_]+}}, %[[UC]]]
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[AS]]
// gelu (erf).
// CHECK: math.erf
// AUTO-NOT: nvvm.
// CHECK: gpu.terminator
// CHECK-NEXT: }
// AUTO-NEXT: }
// CHECK-NEXT: %{{[a-z0-9_]+}} = bufferization.to_tensor %[[OUT]]
func.func @expert_gemm_glu_concat(%x: tensor<?x64xf16>, %w: tensor<4x64x64xf16>, %off: tensor<5xi32>) -> tensor<?x32xf16> {
  %a = moe.expert_gemm %x, %w offsets(%off : tensor<5xi32>) {activation = #moe.activation<gelu>, layout = #moe.glu_layout<concat>} : tensor<?x64xf16>, tensor<4x64x64xf16> -> tensor<?x32xf16>
  return %a : tensor<?x32xf16>
}

//===----------------------------------------------------------------------===//
// moe.glu
//===----------------------------------------------------------------------===//

// Interleaved SwiGLU with alpha / limit / up_bias: gate = 2c, up = 2c + 1,
// gate clamped to <= 7, up to [-7, 7].
// CHECK-LABEL: func.func @glu_interleaved_limit(
// CHECK: %[[IN:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x256xf16>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x128xf16>
// CHECK: %[[CB:[a-z0-9_]+]] = arith.ceildivui %c128, %c256 : index
// CHECK: %[[GY:[a-z0-9_]+]] = arith.maxui %[[CB]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[GX:[a-z0-9_]+]] = arith.maxui %[[T]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[ROW:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[GX]], %{{[a-z0-9_]+}} = %[[GY]],
// CHECK-NOT: workgroup
// CHECK: %[[COL:[a-z0-9_]+]] = arith.addi
// CHECK: %[[GC:[a-z0-9_]+]] = arith.muli %[[COL]], %c2 : index
// CHECK: %[[UC:[a-z0-9_]+]] = arith.addi %[[GC]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[GV:[a-z0-9_]+]] = memref.load %[[IN]][%[[ROW]], %[[GC]]]
// CHECK: %[[GF:[a-z0-9_]+]] = arith.extf %[[GV]] : f16 to f32
// CHECK: %[[UV:[a-z0-9_]+]] = memref.load %[[IN]][%[[ROW]], %[[UC]]]
// CHECK: %[[UF:[a-z0-9_]+]] = arith.extf %[[UV]] : f16 to f32
// CHECK: %[[LIM:[a-z0-9_]+]] = arith.constant 7.000000e+00 : f32
// CHECK: %[[NLIM:[a-z0-9_]+]] = arith.constant -7.000000e+00 : f32
// CHECK: %[[GCL:[a-z0-9_]+]] = arith.minimumf %[[GF]], %[[LIM]] : f32
// CHECK: %[[UCL0:[a-z0-9_]+]] = arith.minimumf %[[UF]], %[[LIM]] : f32
// CHECK: %[[UCL:[a-z0-9_]+]] = arith.maximumf %[[UCL0]], %[[NLIM]] : f32
// CHECK: %[[ALPHA:[a-z0-9_]+]] = arith.constant 1.702000e+00 : f32
// CHECK: arith.mulf %[[ALPHA]], %[[GCL]] : f32
// CHECK: math.exp %{{[a-z0-9_]+}} fastmath<afn> : f32
// CHECK: %[[SILU:[a-z0-9_]+]] = arith.divf %[[GCL]], %{{[a-z0-9_]+}} fastmath<afn> : f32
// CHECK: %[[UB:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[UPB:[a-z0-9_]+]] = arith.addf %[[UCL]], %[[UB]] : f32
// CHECK: %[[R:[a-z0-9_]+]] = arith.mulf %[[SILU]], %[[UPB]] : f32
// CHECK: %[[RT:[a-z0-9_]+]] = arith.truncf %[[R]] : f32 to f16
// CHECK: memref.store %[[RT]], %[[OUT]][%[[ROW]], %[[COL]]] : memref<?x128xf16>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<?x128xf16> to tensor<?x128xf16>
func.func @glu_interleaved_limit(%h: tensor<?x256xf16>) -> tensor<?x128xf16> {
  %r = moe.glu %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32}
      : tensor<?x256xf16> -> tensor<?x128xf16>
  return %r : tensor<?x128xf16>
}

// Concat gelu (erf): gate = c, up = c + 128.
// CHECK-LABEL: func.func @glu_gelu_concat(
// CHECK: %[[IN:[a-z0-9_]+]] = bufferization.to_buffer
// CHECK: gpu.launch blocks(%[[ROW:[a-z0-9_]+]],
// CHECK: %[[COL:[a-z0-9_]+]] = arith.addi
// CHECK: %[[UC:[a-z0-9_]+]] = arith.addi %[[COL]], %c128{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[IN]][%[[ROW]], %[[COL]]]
// CHECK: memref.load %[[IN]][%[[ROW]], %[[UC]]]
// CHECK: math.erf
// CHECK-NOT: math.exp
// CHECK: arith.truncf %{{[a-z0-9_]+}} : f32 to bf16
// CHECK: bufferization.to_tensor
func.func @glu_gelu_concat(%h: tensor<?x256xbf16>) -> tensor<?x128xbf16> {
  %r = moe.glu %h gelu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
  return %r : tensor<?x128xbf16>
}
