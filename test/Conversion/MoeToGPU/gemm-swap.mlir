// The Hopper small-M ("swap AB") expert GEMM kernels (Gemm/GemmConfig.cpp,
// chooseSwapConfigs; Gemm/WgmmaEngine.cpp). Beside the main Hopper kernel,
// for K-major weights by TMA: the host compares the GEMM's rows with
// wgmma-swap-rows x experts (default 8 x E) and launches the small-M
// kernel when the rows are that few, its tensor map was made and the
// operands are aligned; otherwise the main kernel's path (its own checks,
// the SIMT kernel as the fallback). The small-M kernel puts 64 weight rows per consumer warpgroup
// on the wgmma M side and tile-m tokens on N (m64n<tile-m>k16, both
// operands K-major, the first MMA of a tile without accumulating), and
// stages its f32 results in shared memory ([token][weight row], pitch
// tile-n + 4) before the epilogue's 16-byte stores. A stage holds 128 K
// elements as two K-adjacent 64-element slices.
//
//   tiles (m x n)   threads  blocks/SM  stages  shared (+1 KiB slack)  TMA box rows
//   16 x 64         256      2          5       107776 + 1024          32
//   32 x 128        384      1          5       222720 + 1024          64
//   64 x 128        384      1          3       182272 + 1024          64
//
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false" | FileCheck %s --check-prefix=DEF
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-swap-rows=4 wgmma-swap-tile-m=32 wgmma-swap-tile-n=128" | FileCheck %s --check-prefix=T32
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-swap-tile-m=64 wgmma-swap-tile-n=128" | FileCheck %s --check-prefix=T64
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=OFF \
// RUN:   --implicit-check-not="n = 16, k = 16"
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-tma=false" | FileCheck %s --check-prefix=OFF \
// RUN:   --implicit-check-not="n = 16, k = 16"
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-swap-mn-major=false" \
// RUN:   | FileCheck %s --check-prefix=MNOFF
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-swap-rows=8" \
// RUN:   | FileCheck %s --check-prefix=MN8
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false programmatic-launch=false" \
// RUN:   | FileCheck %s --check-prefix=NOPDL --implicit-check-not=griddepcontrol
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false" | FileCheck %s --check-prefix=WIDE
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-wide-swap-rows=0" \
// RUN:   | FileCheck %s --check-prefix=NOWIDE --implicit-check-not="n = 32, k = 16"
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-wide-swap-rows=-2" 2>&1 | FileCheck %s --check-prefix=PASS-WROWS
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-wide-swap-tile-m=16" 2>&1 | FileCheck %s --check-prefix=PIPE-WTM
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-swap-tile-m=8" 2>&1 | FileCheck %s --check-prefix=PASS-TM
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-swap-tile-n=256" 2>&1 | FileCheck %s --check-prefix=PASS-TN
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-swap-rows=-2" 2>&1 | FileCheck %s --check-prefix=PASS-ROWS
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-swap-tile-m=48" 2>&1 | FileCheck %s --check-prefix=PIPE-TM
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-swap-tile-n=32" 2>&1 | FileCheck %s --check-prefix=PIPE-TN

// PASS-WROWS: error: convert-moe-to-gpu: wgmma-wide-swap-rows must be -1 (cost model), 0 (none) or positive (got -2)
// PIPE-WTM: error: moe-lower-to-nvvm: wgmma-wide-swap-tile-m must be 32 or 64 (got 16)
// PASS-TM: error: convert-moe-to-gpu: wgmma-swap-tile-m must be 16, 32 or 64 (got 8)
// PASS-TN: error: convert-moe-to-gpu: wgmma-swap-tile-n must be 64 or 128 (got 256)
// PASS-ROWS: error: convert-moe-to-gpu: wgmma-swap-rows must be -1 (cost model), 0 (never) or positive (got -2)
// PIPE-TM: error: moe-lower-to-nvvm: wgmma-swap-tile-m must be 16, 32 or 64 (got 48)
// PIPE-TN: error: moe-lower-to-nvvm: wgmma-swap-tile-n must be 64 or 128 (got 32)

// Plain GEMM, E = 8, N = 256, K = 128 (two K steps).
// The small-M kernel first (rows <= 8 x 8 = 64), its tensor map with
// boxes of 64 K x 32 rows and no L2 promotion (the main kernel's: 256B),
// grid min(items, 2 x 132), 5 stages of two K slices of 16 token
// rows + 64 weight rows (full: 128 cp.async arrivals + the TMA; empty: 128
// consumer threads), one cp.async per producer thread and slice, the TMA
// copies of 2 x 64 x 128 bytes, the MMAs (first without accumulating), the
// staging barrier of the one consumer warpgroup and the 16-byte stores;
// then the main kernel (384 threads, m64n128k16) with its tensor map and
// the one SIMT fallback of both.
// The wide small-M kernel (K-major weights): above 8 and up to 32 rows per
// expert (256 here), the same tensor map, 32 token rows per tile (m64n32k16;
// 4 stages of (32 + 64) x 128 K, 109056 B), then the main kernel;
// wgmma-wide-swap-rows=0 leaves it out.
// WIDE-LABEL: func.func @plain(
// WIDE: arith.cmpi ule, %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// WIDE: dynamic_shared_memory_size %c108800_i32
// WIDE: <m = 64, n = 16, k = 16>
// WIDE: arith.cmpi ule, %{{[a-z0-9_]+}}, %c256{{(_[0-9]+)?}} : index
// WIDE: call @moeRuntimeTensorMap3D({{.*}}, %c64_i64{{(_[0-9]+)?}}, %c32_i64{{(_[0-9]+)?}}, %c1_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c0_i64{{(_[0-9]+)?}})
// WIDE: threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c109056_i32
// WIDE: <m = 64, n = 32, k = 16>
// WIDE: <m = 64, n = 128, k = 16>
// NOWIDE-LABEL: func.func @plain(
// NOWIDE: <m = 64, n = 16, k = 16>
// NOWIDE: <m = 64, n = 128, k = 16>
// DEF-LABEL: func.func @plain(
// DEF: %[[FEW:[a-z0-9_]+]] = arith.cmpi ule, %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// DEF-NEXT: %[[MAP:[a-z0-9_]+]] = scf.if %[[FEW]] -> (i64) {
// DEF: call @moeRuntimeTensorMap3D({{.*}}, %c64_i64, %c32_i64, %c1_i64, %c3_i64, %c0_i64{{(_[0-9]+)?}})
// DEF: arith.cmpi ne, %[[MAP]], %c0_i64{{(_[0-9]+)?}} : i64
// DEF: arith.minui %{{[a-z0-9_]+}}, %c264{{(_[0-9]+)?}} : index
// DEF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c108800_i32 {
// DEF-COUNT-10: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{129|128}}_i32
// DEF-NOT: nvvm.mbarrier.init
// DEF-NOT: nvvm.setmaxregister
// Launched programmatically (programmatic-launch): after the barriers are
// set up, every thread waits for the previous kernel, then lets the next
// one start.
// DEF: gpu.barrier
// DEF-NEXT: nvvm.griddepcontrol wait
// DEF-NEXT: nvvm.griddepcontrol launch_dependents
// Each role finds its block's first item by the whole warp (RaggedTiles::
// locate): a scan of the lanes' tile counts, the total from lane 31, a
// butterfly of (count, end); the small-M kernel finds every later item the
// same way (no walk from the previous item over the empty experts).
// DEF-COUNT-5: gpu.shuffle  up
// DEF: gpu.shuffle  idx %{{[a-z0-9_]+}}, %c31_i32
// DEF-COUNT-10: gpu.shuffle  xor
// DEF: %[[LOC:[0-9]+]]:3 = scf.for %{{.*}} iter_args(%{{[a-z0-9_]+}} = %{{[0-9]+}}, %{{[a-z0-9_]+}} = %{{[0-9]+}}, %{{[a-z0-9_]+}} = %c0{{(_[0-9]+)?}})
// DEF-NOT: scf.while
// DEF-COUNT-5: gpu.shuffle  up
// DEF: gpu.shuffle  idx %{{[a-z0-9_]+}}, %c31_i32
// DEF-COUNT-10: gpu.shuffle  xor
// DEF-NOT: scf.while
// DEF-COUNT-2: nvvm.cp.async.shared.global
// DEF-NOT: nvvm.cp.async.shared.global
// DEF: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c16384_i32
// DEF-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global
// DEF-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global
// DEF: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 16, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !llvm.struct<({{(f32, ){7}f32}})> ->
// DEF-COUNT-7: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 16, k = 16>, D[<f32>, <one>]
// DEF-NOT: nvvm.wgmma.mma_async
// DEF: nvvm.wgmma.wait.group.sync.aligned 1
// DEF: nvvm.wgmma.wait.group.sync.aligned 0
// DEF-COUNT-8: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 4 : i64} : f32, !llvm.ptr<3>
// DEF: nvvm.barrier id = %c1_i32{{(_[0-9]+)?}} number_of_threads = %c128_i32{{(_[0-9]+)?}}
// DEF: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// DEF: nvvm.barrier id = %c1_i32{{(_[0-9]+)?}} number_of_threads = %c128_i32{{(_[0-9]+)?}}
// DEF: gpu.terminator
// DEF: call @moeRuntimeTensorMap3D({{.*}}, %c64_i64{{(_[0-9]+)?}}, %c64_i64{{(_[0-9]+)?}}, %c1_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}})
// DEF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// DEF: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>]
// DEF: gpu.terminator
// DEF: gpu.launch {{.*}} workgroup(
// DEF-NOT: gpu.launch
// DEF: return

// Rows <= 4 x 8, 32 tokens x 128 weight rows: two consumer warpgroups
// (no setmaxnreg: their m64n32 accumulators fit in the registers at entry,
// where ptxas ignored it, C7508), one block per SM, boxes of 64 rows.
// T32-LABEL: func.func @plain(
// T32: arith.cmpi ule, %{{[a-z0-9_]+}}, %c32{{(_[0-9]+)?}} : index
// T32: call @moeRuntimeTensorMap3D({{.*}}, %c64_i64{{(_[0-9]+)?}}, %c64_i64{{(_[0-9]+)?}}, %c1_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c0_i64{{(_[0-9]+)?}})
// T32: arith.minui %{{[a-z0-9_]+}}, %c132{{(_[0-9]+)?}} : index
// T32: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c223744_i32 {
// T32-COUNT-10: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{129|256}}_i32
// T32-NOT: nvvm.setmaxregister
// T32-COUNT-4: nvvm.cp.async.shared.global
// T32-NOT: nvvm.cp.async.shared.global
// T32: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c32768_i32
// T32-NOT: nvvm.setmaxregister
// T32: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 32, k = 16>, D[<f32>, <zero>]
// T32: nvvm.barrier id = %c1_i32{{(_[0-9]+)?}} number_of_threads = %c256_i32{{(_[0-9]+)?}}

// T64-LABEL: func.func @plain(
// T64: arith.cmpi ule, %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// T64: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c183296_i32 {
// T64-COUNT-6: nvvm.mbarrier.init
// T64-NOT: nvvm.mbarrier.init
// T64-COUNT-8: nvvm.cp.async.shared.global
// T64-NOT: nvvm.cp.async.shared.global
// T64: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>]

// programmatic-launch=false: no griddepcontrol anywhere.
// NOPDL-LABEL: func.func @plain(

// OFF-LABEL: func.func @plain(
// OFF-NOT: arith.cmpi ule, %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// OFF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384{{(_[0-9]+)?}},
func.func @plain(%x: tensor<?x128xbf16>, %w: tensor<8x256x128xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x128xbf16>, tensor<8x256x128xbf16> -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// MN-major weights ([E, K, N]): the small-M kernel too, by default up to
// 1 row per expert (8 here; wgmma-swap-rows sets it, as for K-major
// weights), and the wide one above it up to 32 (256 here): its weights
// come in the main kernel's MN-major boxes (64 columns x 64 K rows, one per
// consumer warpgroup) and are wgmma's transposed A operand (layout col;
// the descriptor's leading offset 8192 B, a k16 step 2048 B).
// wgmma-swap-mn-major=false: the main kernel only.
// DEF-LABEL: func.func @mn_major(
// DEF: arith.cmpi ule, %{{[a-z0-9_]+}}, %c8{{(_[0-9]+)?}} : index
// DEF: call @moeRuntimeTensorMap3D({{.*}}, %c64_i64{{(_[0-9]+)?}}, %c64_i64{{(_[0-9]+)?}}, %c1_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c0_i64{{(_[0-9]+)?}})
// DEF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c108800_i32 {
// DEF: nvvm.cp.async.bulk.tensor.shared.cluster.global
// DEF: %c4611686293338849280_i64
// DEF: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 16, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// DEF: gpu.terminator
// DEF: arith.cmpi ule, %{{[a-z0-9_]+}}, %c256{{(_[0-9]+)?}} : index
// DEF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c109056_i32 {
// DEF: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 32, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// DEF: gpu.terminator
// DEF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384{{(_[0-9]+)?}},
// DEF: return
// MN8-LABEL: func.func @mn_major(
// MN8: arith.cmpi ule, %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// MN8: n = 16, k = 16
// MNOFF-LABEL: func.func @mn_major(
// MNOFF-NOT: n = 16, k = 16
// MNOFF-NOT: dynamic_shared_memory_size %c108800_i32
// MNOFF: return
func.func @mn_major(%x: tensor<?x64xbf16>, %w: tensor<8x64x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// Interleaved SwiGLU with bias, gathered lhs, scale and scatter: 32 output
// columns per 64-row tile; the epilogue reads each output column's gate
// and up (weight rows 2c, 2c + 1) from the staging, with the bias, and
// stores 8 bf16 at once.
// DEF-LABEL: func.func @glu(
// DEF: scf.if
// DEF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}},
// DEF: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 16, k = 16>
// DEF: nvvm.barrier id = %c1_i32{{(_[0-9]+)?}} number_of_threads = %c128_i32{{(_[0-9]+)?}}
// DEF-COUNT-16: llvm.load %{{[a-z0-9_]+}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// DEF: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
func.func @glu(%x: tensor<?x64xbf16>, %g: tensor<?xi32>, %w: tensor<8x128x64xbf16>, %b: tensor<8x128xbf16>, %off: tensor<9xi32>, %s: tensor<?xi32>, %sc: tensor<?xf32>) -> tensor<?x64xbf16> {
  %y = moe.expert_gemm %x[%g : tensor<?xi32>], %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x128xbf16>) scatter(%s : tensor<?xi32>) scale(%sc : tensor<?xf32>) {transpose_rhs = true, activation = #moe.activation<silu>, layout = #moe.glu_layout<interleaved>} : tensor<?x64xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// -----

// MN-major with a concat GLU: the gate and up halves of a 64-row tile
// would be 32-column boxes, narrower than the swizzle atom: no small-M
// kernel even with wgmma-swap-mn-major.
// DEF-LABEL: func.func @mn_major_concat(
// DEF-NOT: n = 16, k = 16
// DEF: return
func.func @mn_major_concat(%x: tensor<?x64xbf16>, %w: tensor<8x64x256xbf16>, %off: tensor<9xi32>) -> tensor<?x128xbf16> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>} : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}
