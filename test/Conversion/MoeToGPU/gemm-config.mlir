// The expert GEMM's kernel configuration (Gemm/GemmConfig.cpp): engine,
// tiles and pipeline depth, from the cost model and the pass options.
//
// Engine choice. The default (gemm=auto, chip=sm_90a) takes the Hopper
// wgmma kernel (under the host-side layout guard, with the SIMT kernel as
// the else branch) for bf16 / f16 lhs and rhs with K % 8 == 0, and with
// N % 8 == 0 when rhs is [E, K, N] (transpose_rhs = false); every other op
// gets the SIMT kernel alone, as does every op with chip=sm_80 or
// gemm=simt. gemm=wgmma on an op the Hopper kernel cannot run is an error
// on that op, with the reason.
//
// (The small-M kernel beside the main one is left out here,
// wgmma-swap-rows=0: gemm-swap.mlir checks it.)
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=CLUSTER
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=AUTO \
// RUN:   --implicit-check-not=nvvm.cluster --implicit-check-not=nvvm.mapa --implicit-check-not=multicast_mask
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=chip=sm_80 elide-fills=false wgmma-swap-rows=0" \
// RUN:   | FileCheck %s --check-prefix=SIMT --implicit-check-not=nvvm. --implicit-check-not=dynamic_shared_memory
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=gemm=simt elide-fills=false wgmma-swap-rows=0" \
// RUN:   | FileCheck %s --check-prefix=SIMT --implicit-check-not=nvvm. --implicit-check-not=dynamic_shared_memory
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=gemm=wgmma elide-fills=false wgmma-swap-rows=0" -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=FORCE
// RUN: not moe-opt %s -split-input-file "--convert-moe-to-gpu=chip=sm_80 gemm=wgmma elide-fills=false wgmma-swap-rows=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=CHIP
//
// Hopper kernel configuration, of the kernel without clusters (the
// wgmma-cluster=1 runs; the 2-CTA cluster kernel is below, CLUSTER) (on
// @bf16_kmajor: K = 64, N = 256, below the
// 512 rhs columns from which the cost model takes 256-column tiles, see
// gemm-config-tile-n.mlir). Block:
// 128 threads per warpgroup, one producer + tile-m / 64 consumers
// (setmaxregister only with two consumers); a stage holds
// (tile-m + tile-n) rows of 128 bytes; the cost model takes as many stages
// as fit in 227 KiB (at most 8); dynamic shared memory is 1 KiB of
// barriers + stages + the epilogue staging (16 KiB per consumer
// warpgroup) + 512 B (the item handoff's row-table weights) + 1 KiB of
// alignment slack; two mbarriers per stage
// (full: 128 producer arrivals + 1 for the TMA transaction; empty: 128 per
// consumer warpgroup); per stage each producer thread issues tile-m / 16
// 16-byte cp.async of lhs rows, and thread 0 the TMA copy of the rhs tile,
// tile-n rows of 128 bytes (expect_tx); with wgmma-tma=false the rhs rows
// are cp.async copies too (tile-n / 16 more per thread, full barrier 128).
//                       threads stages  shared  lhs copies  rhs bytes  wgmma n
//   default 128 x 128:  384     6       231936  8           16384      128
//   wgmma-tile-n=256:   384     4       231936  8           32768      256
//   wgmma-tile-n=64:    384     8       231936  8           8192       64
//   wgmma-tile-m=64:    256     8       215552  4           16384      128
//   wgmma-stages=3:     384     3       133632  8           16384      128
//   wgmma-tma=false:    384     6       231936  8 + 8 rhs   -          128
//   wgmma-tma=false wgmma-tile-n=256:
//                       384     4       231936  8 + 16 rhs  -          256
//
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tile-n=256 wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=TN256
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tile-n=64 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=TN64
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tile-m=64 wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=TM64
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-stages=3 wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=ST3
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tma=false elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=CPA \
// RUN:   --implicit-check-not=moeRuntimeTensorMap3D --implicit-check-not=cp.async.bulk
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tma=false wgmma-tile-n=256 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=CPA256 \
// RUN:   --implicit-check-not=moeRuntimeTensorMap3D --implicit-check-not=cp.async.bulk
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-cluster=2 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=CLUSTER
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-cluster=2 wgmma-tma=false elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=OP-CL-TMA
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-cluster=2 wgmma-tile-n=64 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=OP-CL-TN
//
// Invalid option values are rejected (validateGemmOptions), by the pass
// before it converts anything and by --moe-lower-to-nvvm when the pipeline
// is parsed. The largest stage counts that fit are accepted.
//
// RUN: not moe-opt %s "--convert-moe-to-gpu=gemm=foo elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-GEMM
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-tile-m=96 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-TM
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-cluster=3 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-CL
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-tile-n=100 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-TN
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-stages=9 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-ST9
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-stages=1 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-ST1
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-stages=8 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-SMEM128
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-stages=7 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=OP-ST7
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-tile-n=256 wgmma-stages=5 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-SMEM256
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-tile-m=64 wgmma-tile-n=256 wgmma-stages=6 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-SMEM64
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-stages=6 wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=FIT6
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tile-n=256 wgmma-stages=4 wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=FIT4
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-producer-registers=56 wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=PR56
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-producer-registers=24 wgmma-cluster=1 elide-fills=false wgmma-swap-rows=0" | FileCheck %s --check-prefix=PR24
// RUN: not moe-opt %s "--convert-moe-to-gpu=wgmma-producer-registers=44 elide-fills=false wgmma-swap-rows=0" 2>&1 | FileCheck %s --check-prefix=PASS-PR
//
// RUN: not moe-opt %s "--moe-lower-to-nvvm=gemm=foo elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-GEMM
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-tile-m=96 elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-TM
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-cluster=-1 elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-CL
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-tile-n=100 elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-TN
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-stages=9 elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-ST9
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-stages=8 elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-SMEM128
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-tile-n=256 wgmma-stages=5 elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-SMEM256
// RUN: not moe-opt %s "--moe-lower-to-nvvm=wgmma-producer-registers=168 elide-fills=false" 2>&1 | FileCheck %s --check-prefix=PIPE-PR

// PASS-GEMM: error: convert-moe-to-gpu: gemm must be one of auto, simt, wgmma (got 'foo')
// PASS-TM: error: convert-moe-to-gpu: wgmma-tile-m must be 64 or 128 (got 96)
// PASS-CL: error: convert-moe-to-gpu: wgmma-cluster must be 0 (cost model), 1 or 2 (got 3)
// OP-CL-TMA: error: 'moe.expert_gemm' op wgmma-cluster=2 needs the weight tiles by TMA (wgmma-tma) and tile-n >= 128
// OP-CL-TN: error: 'moe.expert_gemm' op wgmma-cluster=2 needs the weight tiles by TMA (wgmma-tma) and tile-n >= 128
// PASS-TN: error: convert-moe-to-gpu: wgmma-tile-n must be a multiple of 16 in [64, 256] (got 100)
// PASS-ST9: error: convert-moe-to-gpu: wgmma-stages must be in [2, 8] (got 9)
// PASS-ST1: error: convert-moe-to-gpu: wgmma-stages must be in [2, 8] (got 1)
// PASS-SMEM128: error: convert-moe-to-gpu: wgmma-stages 8 with a 128 x 128 tile needs more than 227 KiB of shared memory
// 7 stages of a 128 x 128 tile fit without the epilogue staging (GLU ops)
// but not with it: the op reports it.
// OP-ST7: error: 'moe.expert_gemm' op wgmma-stages 7 does not fit the 128 x 128 tile in shared memory (at most 6 stages)
// PASS-SMEM256: error: convert-moe-to-gpu: wgmma-stages 5 with a 128 x 256 tile needs more than 227 KiB of shared memory
// PASS-SMEM64: error: convert-moe-to-gpu: wgmma-stages 6 with a 64 x 256 tile needs more than 227 KiB of shared memory
// PASS-PR: error: convert-moe-to-gpu: wgmma-producer-registers must be 0 (cost model) or a multiple of 8 in [24, 160] (got 44)
// PIPE-PR: error: moe-lower-to-nvvm: wgmma-producer-registers must be 0 (cost model) or a multiple of 8 in [24, 160] (got 168)

// PIPE-GEMM: error: moe-lower-to-nvvm: gemm must be one of auto, simt, wgmma (got 'foo')
// PIPE-TM: error: moe-lower-to-nvvm: wgmma-tile-m must be 64 or 128 (got 96)
// PIPE-CL: error: moe-lower-to-nvvm: wgmma-cluster must be 0 (cost model), 1 or 2 (got -1)
// PIPE-TN: error: moe-lower-to-nvvm: wgmma-tile-n must be a multiple of 16 in [64, 256] (got 100)
// PIPE-ST9: error: moe-lower-to-nvvm: wgmma-stages must be in [2, 8] (got 9)
// PIPE-SMEM128: error: moe-lower-to-nvvm: wgmma-stages 8 with a 128 x 128 tile needs more than 227 KiB of shared memory
// PIPE-SMEM256: error: moe-lower-to-nvvm: wgmma-stages 5 with a 128 x 256 tile needs more than 227 KiB of shared memory

// AUTO-LABEL: func.func @bf16_kmajor(
// AUTO: gpu.launch
// AUTO: gpu.terminator
// AUTO: scf.if %{{[a-z0-9_]+}} {
// AUTO: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// AUTO-COUNT-12: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{129|256}}_i32
// AUTO-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// AUTO-NOT: nvvm.mbarrier.init
// AUTO: nvvm.setmaxregister decrease 56
// AUTO-COUNT-8: nvvm.cp.async.shared.global
// AUTO-NOT: nvvm.cp.async.shared.global
// AUTO: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c16384_i32
// AUTO: nvvm.cp.async.bulk.tensor.shared.cluster.global
// AUTO-NOT: nvvm.cp.async.shared.global
// AUTO: nvvm.setmaxregister increase 224
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] :
// AUTO: nvvm.wgmma.wait.group.sync.aligned 0
// AUTO: nvvm.barrier id = %{{[a-z0-9_]+}} number_of_threads = %c128_i32
// AUTO: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// AUTO: gpu.terminator
// AUTO-NEXT: }
// AUTO-NEXT: } else {
// AUTO-NOT: nvvm.
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: nvvm.
// AUTO-NOT: gpu.launch
// AUTO: return

// 2-CTA clusters (the cost model's choice with TMA weights and tile-n >=
// 128, or wgmma-cluster=2; the AUTO lines above are the kernel without
// them, wgmma-cluster=1). On the host, inside the layout guard: coupled =
// rows >= E x tile-m (8 x 128 here) picks the launch: 2-CTA clusters and
// an even grid of at most 66 clusters, else one block per cluster (a
// plain launch) and the grid of the kernel without clusters; the same
// kernel either way. In the kernel: the empty barriers count two arrivals
// per consumer warpgroup (4), a cluster barrier follows the barrier init
// and precedes the exit; thread 0 expects the whole weight tile (16384
// bytes) and, for a shared tile, multicasts its half (one box) to both
// CTAs (mask 0b11), else loads both boxes into its own CTA; one consumer
// thread per warpgroup releases a stage here and on the peer (mapa of rank
// ^ 1; uncoupled, of this CTA).
// CLUSTER-LABEL: func.func @bf16_kmajor(
// CLUSTER: scf.if %{{[a-z0-9_]+}} {
// CLUSTER: %[[G1:[a-z0-9_]+]] = arith.maxui %{{[a-z0-9_]+}}, %c1{{(_[0-9]+)?}} : index
// CLUSTER: %[[PAIRS:[a-z0-9_]+]] = arith.cmpi uge, %{{[a-z0-9_]+}}, %c1024 : index
// CLUSTER: arith.minui %{{[a-z0-9_]+}}, %c66 : index
// CLUSTER: %[[G2:[a-z0-9_]+]] = arith.muli %{{[a-z0-9_]+}}, %c2{{(_[0-9]+)?}} : index
// CLUSTER-NEXT: %[[GRID:[a-z0-9_]+]] = arith.select %[[PAIRS]], %[[G2]], %[[G1]] : index
// CLUSTER: %[[CX:[a-z0-9_]+]] = arith.select %[[PAIRS]], %c2{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}} : index
// CLUSTER: gpu.launch clusters({{.*}}) in (%{{[a-z0-9_]+}} = %[[CX]], %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GRID]], {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// CLUSTER-COUNT-12: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{129|4}}_i32
// CLUSTER: nvvm.fence.mbarrier.init
// CLUSTER: nvvm.cluster.arrive
// CLUSTER-NEXT: nvvm.cluster.wait
// CLUSTER: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c16384_i32
// CLUSTER: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %c3_i16 : !llvm.ptr<7>, !llvm.ptr
// CLUSTER: } else {
// CLUSTER: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} multicast_mask = %c3_i16 : !llvm.ptr<7>, !llvm.ptr
// CLUSTER: } else {
// CLUSTER-COUNT-2: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} {isCTAOnly = true} : !llvm.ptr<3>, !llvm.ptr
// CLUSTER: nvvm.cp.async.mbarrier.arrive
// CLUSTER: nvvm.wgmma.mma_async
// CLUSTER: nvvm.mbarrier.arrive %{{[a-z0-9_]+}} : !llvm.ptr<3> -> i64
// CLUSTER: nvvm.read.ptx.sreg.cluster.ctarank : i32
// CLUSTER: nvvm.mapa %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : !llvm.ptr<3> -> !llvm.ptr<7>
// CLUSTER-NEXT: nvvm.mbarrier.arrive %{{[a-z0-9_]+}} : !llvm.ptr<7>
// CLUSTER: nvvm.cluster.arrive
// CLUSTER-NEXT: nvvm.cluster.wait
// CLUSTER-NEXT: gpu.terminator
// CLUSTER-NEXT: }
// CLUSTER-NEXT: } else {
// CLUSTER-NOT: nvvm.
// CLUSTER: gpu.launch {{.*}} workgroup(
// CLUSTER-NOT: gpu.launch
// CLUSTER: return

// Output path: a plain GEMM's tile is staged in shared memory (2 x 16
// KiB, one stage less) and its rows written with 16-byte stores (the AUTO
// lines above).

// SIMT-LABEL: func.func @bf16_kmajor(
// SIMT: gpu.launch
// SIMT: gpu.launch {{.*}} workgroup(
// SIMT-NOT: gpu.launch
// SIMT: return

// FORCE-LABEL: func.func @bf16_kmajor(
// FORCE: dynamic_shared_memory_size %c231936_i32
// FORCE: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] :
// FORCE: } else {

// TN256-LABEL: func.func @bf16_kmajor(
// TN256: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// TN256-COUNT-8: nvvm.mbarrier.init
// TN256-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// TN256-NOT: nvvm.mbarrier.init
// TN256: nvvm.setmaxregister decrease 56
// TN256-COUNT-8: nvvm.cp.async.shared.global
// TN256-NOT: nvvm.cp.async.shared.global
// TN256: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c32768_i32
// TN256: nvvm.setmaxregister increase 224
// TN256: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, {{.*}} : !llvm.struct<({{(f32, ){127}f32}})> ->

// Accumulators of 64 columns fit the registers at entry: no setmaxnreg.
// TN64-LABEL: func.func @bf16_kmajor(
// TN64: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// TN64-COUNT-16: nvvm.mbarrier.init
// TN64-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// TN64-NOT: nvvm.mbarrier.init
// TN64-NOT: nvvm.setmaxregister
// TN64-COUNT-8: nvvm.cp.async.shared.global
// TN64-NOT: nvvm.cp.async.shared.global
// TN64: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c8192_i32
// TN64-NOT: nvvm.setmaxregister
// TN64: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, {{.*}} : !llvm.struct<({{(f32, ){31}f32}})> ->

// wgmma-producer-registers: the producer keeps P, the consumers take what
// it gives up (168 + (168 - P) / 2, rounded down to 8).
// PR56-LABEL: func.func @bf16_kmajor(
// PR56: nvvm.setmaxregister decrease 56
// PR56: nvvm.setmaxregister increase 224
// PR56: nvvm.wgmma.mma_async
// PR24-LABEL: func.func @bf16_kmajor(
// PR24: nvvm.setmaxregister decrease 24
// PR24: nvvm.setmaxregister increase 240
// PR24: nvvm.wgmma.mma_async

// One consumer warpgroup: 64-row tiles (grid from ceil(M / 64)), 256
// threads, 128 consumer arrivals on the empty barriers, no register moves.
// TM64-LABEL: func.func @bf16_kmajor(
// TM64: gpu.terminator
// TM64: scf.if %{{[a-z0-9_]+}} {
// TM64: arith.ceildivui %{{[a-z0-9_]+}}, %c64{{(_[0-9]+)?}} : index
// TM64: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) dynamic_shared_memory_size %c215552_i32 {
// TM64-COUNT-16: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|129}}_i32{{(_[0-9]+)?}} :
// TM64-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// TM64-NOT: nvvm.mbarrier.init
// TM64-NOT: nvvm.setmaxregister
// TM64-COUNT-4: nvvm.cp.async.shared.global
// TM64-NOT: nvvm.cp.async.shared.global
// TM64: nvvm.mbarrier.arrive.expect_tx %{{[a-z0-9_]+}}, %c16384_i32
// TM64-NOT: nvvm.setmaxregister
// TM64: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,
// TM64-NOT: nvvm.setmaxregister
// TM64: } else {

// ST3-LABEL: func.func @bf16_kmajor(
// ST3: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c133632_i32 {
// ST3-COUNT-6: nvvm.mbarrier.init
// ST3-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// ST3-NOT: nvvm.mbarrier.init
// ST3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,

// CPA-LABEL: func.func @bf16_kmajor(
// CPA: dynamic_shared_memory_size %c231936_i32 {
// CPA-COUNT-6: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c128_i32
// CPA: nvvm.setmaxregister decrease 104
// CPA-COUNT-16: nvvm.cp.async.shared.global
// CPA-NOT: nvvm.cp.async.shared.global
// CPA: nvvm.setmaxregister increase 200
// CPA: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,

// CPA256-LABEL: func.func @bf16_kmajor(
// CPA256: dynamic_shared_memory_size %c231936_i32 {
// CPA256: nvvm.setmaxregister decrease 104
// CPA256-COUNT-24: nvvm.cp.async.shared.global
// CPA256-NOT: nvvm.cp.async.shared.global
// CPA256: nvvm.setmaxregister increase 200
// CPA256: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>,

// FIT7-LABEL: func.func @bf16_kmajor(
// FIT6: dynamic_shared_memory_size %c231936_i32 {
// FIT4-LABEL: func.func @bf16_kmajor(
// FIT4: dynamic_shared_memory_size %c231936_i32 {
func.func @bf16_kmajor(%x: tensor<?x64xbf16>, %w: tensor<8x256x64xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  // CHIP: gemm-config.mlir:[[@LINE+1]]:8: error: 'moe.expert_gemm' op cannot use gemm=wgmma: the wgmma engine needs chip sm_90a (got 'sm_80')
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x256x64xbf16> -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// bf16, rhs [E, K, N] (MN-major: wgmma B `row`).
// AUTO-LABEL: func.func @bf16_mnmajor(
// AUTO: gpu.launch
// AUTO: gpu.terminator
// AUTO: scf.if %{{[a-z0-9_]+}} {
// AUTO: gpu.launch {{.*}} dynamic_shared_memory_size %c231936_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] :
// AUTO: gpu.terminator
// AUTO-NEXT: }
// AUTO-NEXT: } else {
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: gpu.launch
// AUTO: return

// SIMT-LABEL: func.func @bf16_mnmajor(
// SIMT: gpu.launch
// SIMT: gpu.launch {{.*}} workgroup(
// SIMT-NOT: gpu.launch
// SIMT: return

// FORCE-LABEL: func.func @bf16_mnmajor(
// FORCE: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] :
func.func @bf16_mnmajor(%x: tensor<?x64xbf16>, %w: tensor<8x64x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// f16, both rhs layouts (through moe.grouped_matmul).
// AUTO-LABEL: func.func @f16_kmajor(
// AUTO: gpu.terminator
// AUTO: scf.if %{{[a-z0-9_]+}} {
// AUTO: gpu.launch {{.*}} dynamic_shared_memory_size %c231936_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>] :
// AUTO: gpu.terminator
// AUTO-NEXT: }
// AUTO-NEXT: } else {
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: gpu.launch
// AUTO: return

// SIMT-LABEL: func.func @f16_kmajor(
// SIMT: gpu.launch
// SIMT: gpu.launch {{.*}} workgroup(
// SIMT-NOT: gpu.launch
// SIMT: return

// FORCE-LABEL: func.func @f16_kmajor(
// FORCE: nvvm.wgmma.mma_async {{.*}} A[<f16>, <one>, <row>], B[<f16>, <one>, <col>] :
func.func @f16_kmajor(%x: tensor<?x32xf16>, %w: tensor<4x48x32xf16>, %off: tensor<5xi32>) -> tensor<?x48xf16> {
  %y = moe.grouped_matmul %x, %w offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<?x32xf16>, tensor<4x48x32xf16> -> tensor<?x48xf16>
  return %y : tensor<?x48xf16>
}

// -----

// AUTO-LABEL: func.func @f16_mnmajor(
// AUTO: gpu.terminator
// AUTO: scf.if %{{[a-z0-9_]+}} {
// AUTO: gpu.launch {{.*}} dynamic_shared_memory_size %c231936_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>] :
// AUTO: gpu.terminator
// AUTO-NEXT: }
// AUTO-NEXT: } else {
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: gpu.launch
// AUTO: return

// SIMT-LABEL: func.func @f16_mnmajor(
// SIMT: gpu.launch
// SIMT: gpu.launch {{.*}} workgroup(
// SIMT-NOT: gpu.launch
// SIMT: return

// FORCE-LABEL: func.func @f16_mnmajor(
// FORCE: nvvm.wgmma.mma_async {{.*}} A[<f16>, <one>, <row>], B[<f16>, <one>, <row>] :
func.func @f16_mnmajor(%x: tensor<?x32xf16>, %w: tensor<4x32x48xf16>, %off: tensor<5xi32>) -> tensor<?x48xf16> {
  %y = moe.grouped_matmul %x, %w offsets(%off : tensor<5xi32>) : tensor<?x32xf16>, tensor<4x32x48xf16> -> tensor<?x48xf16>
  return %y : tensor<?x48xf16>
}

// -----

// bf16 operands with an f32 result: the Hopper kernel (only the operand
// types matter).
// AUTO-LABEL: func.func @bf16_f32_result(
// AUTO: gpu.terminator
// AUTO: scf.if %{{[a-z0-9_]+}} {
// AUTO: gpu.launch {{.*}} dynamic_shared_memory_size %c231936_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] :
// AUTO: } else {
// AUTO: return
func.func @bf16_f32_result(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %off: tensor<9xi32>) -> tensor<?x32xf32> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x32x64xbf16> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// K-major rhs: N % 8 != 0 is fine (rows of the rhs tile are rhs columns).
// AUTO-LABEL: func.func @bf16_kmajor_n36(
// AUTO: gpu.terminator
// AUTO: scf.if %{{[a-z0-9_]+}} {
// AUTO: gpu.launch {{.*}} dynamic_shared_memory_size %c231936_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] :
// AUTO: } else {
// AUTO: return

// FORCE-LABEL: func.func @bf16_kmajor_n36(
// FORCE: nvvm.wgmma.mma_async
func.func @bf16_kmajor_n36(%x: tensor<?x64xbf16>, %w: tensor<8x36x64xbf16>, %off: tensor<9xi32>) -> tensor<?x36xbf16> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x36x64xbf16> -> tensor<?x36xbf16>
  return %y : tensor<?x36xbf16>
}

// -----

// f32 operands: the SIMT kernel alone; gemm=wgmma is an error. (With
// chip=sm_80 gemm=wgmma the chip is the reason, checked first.)
// AUTO-LABEL: func.func @f32(
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO: gpu.launch
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO-NOT: gpu.launch
// AUTO: return

// SIMT-LABEL: func.func @f32(
// SIMT: gpu.launch
// SIMT: gpu.launch {{.*}} workgroup(
// SIMT-NOT: gpu.launch
// SIMT: return
func.func @f32(%x: tensor<?x64xf32>, %w: tensor<8x64x256xf32>, %off: tensor<9xi32>) -> tensor<?x256xf32> {
  // CHIP: gemm-config.mlir:[[@LINE+3]]:8: error: 'moe.expert_gemm' op cannot use gemm=wgmma: the wgmma engine needs chip sm_90a (got 'sm_80')
  // expected-error @+2 {{'moe.expert_gemm' op cannot use gemm=wgmma: the wgmma engine needs bf16 or f16 lhs and rhs of one type}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// -----

// f32 through moe.grouped_matmul: the error is on the expert_gemm it
// becomes, at the grouped_matmul's location.
// AUTO-LABEL: func.func @f32_grouped_matmul(
// AUTO-NOT: nvvm.
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: nvvm.
// AUTO: return
func.func @f32_grouped_matmul(%x: tensor<?x64xf32>, %w: tensor<8x64x256xf32>, %off: tensor<9xi32>) -> tensor<?x256xf32> {
  // expected-error @+2 {{'moe.expert_gemm' op cannot use gemm=wgmma: the wgmma engine needs bf16 or f16 lhs and rhs of one type}}
  // expected-error @+1 {{failed to legalize operation 'moe.grouped_matmul'}}
  %y = moe.grouped_matmul %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// -----

// K = 60 (rows of 120 bytes, not 16-byte multiples): the SIMT kernel alone;
// gemm=wgmma is an error.
// AUTO-LABEL: func.func @bf16_k60(
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO: gpu.launch
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO-NOT: gpu.launch
// AUTO: return

// SIMT-LABEL: func.func @bf16_k60(
// SIMT: gpu.launch
// SIMT: gpu.launch {{.*}} workgroup(
// SIMT-NOT: gpu.launch
// SIMT: return
func.func @bf16_k60(%x: tensor<?x60xbf16>, %w: tensor<8x64x60xbf16>, %off: tensor<9xi32>) -> tensor<?x64xbf16> {
  // expected-error @+2 {{'moe.expert_gemm' op cannot use gemm=wgmma: the wgmma engine needs K a positive multiple of 8 (16-byte rows)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x60xbf16>, tensor<8x64x60xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// -----

// MN-major rhs with N = 36 (rhs rows copied in 8-column chunks): the SIMT
// kernel alone; gemm=wgmma is an error.
// AUTO-LABEL: func.func @bf16_mnmajor_n36(
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO: gpu.launch
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO: gpu.launch {{.*}} workgroup(
// AUTO-NOT: nvvm.
// AUTO-NOT: dynamic_shared_memory
// AUTO-NOT: gpu.launch
// AUTO: return
func.func @bf16_mnmajor_n36(%x: tensor<?x64xbf16>, %w: tensor<8x64x36xbf16>, %off: tensor<9xi32>) -> tensor<?x36xbf16> {
  // expected-error @+2 {{'moe.expert_gemm' op cannot use gemm=wgmma: the wgmma engine needs the output columns a multiple of 8 when transpose_rhs = false}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x36xbf16> -> tensor<?x36xbf16>
  return %y : tensor<?x36xbf16>
}
