// RUN: moe-opt %s "--convert-moe-to-gpu=gemm=simt route-dispatch-small=false" | FileCheck %s
// RUN: moe-opt %s "--convert-moe-to-gpu=gemm=simt route-dispatch-small=false" | FileCheck %s --check-prefix=COUNT
// RUN: moe-opt %s "--convert-moe-to-gpu=gemm=simt elide-fills=false route-dispatch-small=false" | FileCheck %s --check-prefix=ALL
// RUN: moe-opt %s "--convert-moe-to-gpu=route-dispatch-small=false wgmma-swap-mn-major=false" | FileCheck %s --check-prefix=WGMMA

// With elide-fills (the default), how moe.expert_gemm zeroes the output rows no expert
// writes depends on the op's context (ExpertComputeToGPU.cpp,
// uncoveredFillOf). The SIMT engine keeps one GEMM kernel per op, so the
// kernels counted here are the fills plus one GEMM each (route_dispatch
// as route + dispatch: route-dispatch-small=false). With elide-fills=false
// (ALL) every GEMM zeroes its uncovered rows, with a scatter through
// per-row flags: route 1 + dispatch 3 + (1 + 1) + (3 + 1) in @fused_pair,
// dispatch 3 + (1 + 1) + (3 + 1) in @first_result_escapes, (1 + 1) + (3 +
// 1) + (1 + 1) in @other_readers.
// ALL-LABEL: func.func @fused_pair(
// ALL-COUNT-10: gpu.launch
// ALL-NOT: gpu.launch
// ALL: return
// ALL-LABEL: func.func @first_result_escapes(
// ALL-COUNT-9: gpu.launch
// ALL-NOT: gpu.launch
// ALL: return
// ALL-LABEL: func.func @other_readers(
// ALL-COUNT-8: gpu.launch
// ALL-NOT: gpu.launch
// ALL: return

// The two GEMMs of a fused layer. The first one's result is read only by
// the second, as its lhs without a gather and over the same offsets: the
// second reads only the rows in [offsets[0], offsets[E]), which the first
// writes, so the first has no fill. The second scatters through the
// dispatch's reverse_indices, a permutation of [0, M): its fill zeroes the
// scatter targets of the uncovered GEMM rows only (one kernel striding over
// their count, no per-row flags).
// CHECK-LABEL: func.func @fused_pair(
// CHECK: %[[H:[a-z0-9_]+]] = memref.alloc(%{{[a-z0-9_]+}}) : memref<?x32xbf16>
// CHECK-NOT: arith.minui %{{[a-z0-9_]+}}, %c264
// first GEMM (SIMT kernel, 2 x 64-row tiles of the 32 output columns)
// CHECK: gpu.launch
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[H]]
// CHECK: gpu.terminator
// second GEMM's fill: the uncovered rows' targets through the scatter
// CHECK: %[[OFF:[a-z0-9_]+]] = bufferization.to_buffer %{{.*}} : tensor<9xi32>
// CHECK: %[[REV:[a-z0-9_]+]] = bufferization.to_buffer %{{.*}} : tensor<?xi32>
// CHECK: %[[Y:[a-z0-9_]+]] = memref.alloc(%{{[a-z0-9_]+}}) : memref<?x64xbf16>
// CHECK-NOT: memref<?xi32>
// CHECK: arith.minui %{{[a-z0-9_]+}}, %c264
// CHECK: gpu.launch
// CHECK: memref.load %[[OFF]][%c0
// CHECK: memref.load %[[OFF]][%c8
// CHECK: scf.for
// CHECK: %[[ROW:[a-z0-9_]+]] = arith.select
// CHECK: %[[DEST:[a-z0-9_]+]] = memref.load %[[REV]][%[[ROW]]]
// CHECK: scf.if
// CHECK: %[[D:[a-z0-9_]+]] = arith.index_cast %[[DEST]] : i32 to index
// CHECK: memref.store %cst{{(_[0-9]+)?}}, %[[Y]][%[[D]], %{{[a-z0-9_]+}}] : memref<?x64xbf16>
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[Y]]
// CHECK: gpu.terminator
// CHECK: return
// COUNT-LABEL: func.func @fused_pair(
// route 1, dispatch 3, first GEMM 1, second GEMM fill 1 + 1
// COUNT-COUNT-7: gpu.launch
// COUNT-NOT: gpu.launch
// COUNT: return
// With the Hopper engine (WGMMA) the second GEMM's kernel zeroes the
// uncovered rows' targets itself: its consumer warpgroups, after their
// setmaxnreg and before their first tile (no launch of its own); the SIMT
// fallback in the layout guard's else branch keeps the fill kernel.
// WGMMA-LABEL: func.func @fused_pair(
// WGMMA: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x32xbf16>
// WGMMA-NOT: %c264
// WGMMA: %[[REV:[a-z0-9_]+]] = bufferization.to_buffer %{{.*}} : tensor<?xi32>
// WGMMA: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x64xbf16>
// WGMMA-NOT: gpu.launch blocks
// WGMMA: scf.if
// WGMMA: gpu.launch clusters
// WGMMA: nvvm.setmaxregister  increase 224
// WGMMA: scf.for
// WGMMA: memref.load %[[REV]]
// WGMMA: nvvm.wgmma.mma_async
// WGMMA: } else {
// WGMMA: %c264
// WGMMA: gpu.launch blocks
// WGMMA: memref.load %[[REV]]
// WGMMA: gpu.launch blocks
// WGMMA: return
func.func @fused_pair(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x64xbf16>, %wd: tensor<8x32x64xbf16>) -> tensor<?x64xbf16> {
  %w, %ids, %off, %rev, %tok = moe.route_dispatch %l k = 2 scoring = softmax {normalize = true}
      : tensor<?x8xbf16> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  %h = moe.expert_gemm %x[%tok : tensor<?xi32>], %wu offsets(%off : tensor<9xi32>)
      {activation = #moe.activation<silu>, layout = #moe.glu_layout<interleaved>}
      : tensor<?x64xbf16>, tensor<8x64x64xbf16> -> tensor<?x32xbf16>
  %y = moe.expert_gemm %h, %wd offsets(%off : tensor<9xi32>) scatter(%rev : tensor<?xi32>)
      : tensor<?x32xbf16>, tensor<8x32x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// The same pair with moe.dispatch (its reverse_indices is a permutation
// too) and the first result also returned: the caller may read every row,
// so the first GEMM zeroes its uncovered rows (no scatter: the rows
// themselves).
// CHECK-LABEL: func.func @first_result_escapes(
// CHECK: %[[H:[a-z0-9_]+]] = memref.alloc(%{{[a-z0-9_]+}}) : memref<?x32xbf16>
// CHECK: arith.minui %{{[a-z0-9_]+}}, %c264
// CHECK: gpu.launch
// CHECK: memref.store %cst{{(_[0-9]+)?}}, %[[H]]
// CHECK: gpu.terminator
// COUNT-LABEL: func.func @first_result_escapes(
// dispatch 3, first GEMM fill 1 + 1, second GEMM fill 1 + 1
// COUNT-COUNT-7: gpu.launch
// COUNT-NOT: gpu.launch
// COUNT: return
func.func @first_result_escapes(%x: tensor<?x64xbf16>, %ids: tensor<?x2xi32>, %wu: tensor<8x64x32xbf16>, %wd: tensor<8x32x64xbf16>) -> (tensor<?x32xbf16>, tensor<?x64xbf16>) {
  %off, %rev, %tok = moe.dispatch %ids num_experts = 8 : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  %h = moe.expert_gemm %x[%tok : tensor<?xi32>], %wu offsets(%off : tensor<9xi32>)
      : tensor<?x64xbf16>, tensor<8x64x32xbf16> -> tensor<?x32xbf16>
  %y = moe.expert_gemm %h, %wd offsets(%off : tensor<9xi32>) scatter(%rev : tensor<?xi32>)
      : tensor<?x32xbf16>, tensor<8x32x64xbf16> -> tensor<?x64xbf16>
  return %h, %y : tensor<?x32xbf16>, tensor<?x64xbf16>
}

// The second GEMM reads the first result over other offsets, or through a
// gather: rows the first leaves uncovered may be read, so it zeroes them.
// A scatter that is a function argument may be anything: per-row flags
// (clear, set, zero the unflagged rows: three kernels).
// CHECK-LABEL: func.func @other_readers(
// CHECK: %[[H:[a-z0-9_]+]] = memref.alloc(%{{[a-z0-9_]+}}) : memref<?x32xbf16>
// CHECK: arith.minui %{{[a-z0-9_]+}}, %c264
// CHECK: gpu.launch
// CHECK: memref.store %cst{{(_[0-9]+)?}}, %[[H]]
// CHECK: gpu.terminator
// CHECK: memref.alloc(%{{[a-z0-9_]+}}) : memref<?xi32>
// CHECK: memref.atomic_rmw addi
// COUNT-LABEL: func.func @other_readers(
// first GEMM fill 1 + 1, second (other offsets, flags) 3 + 1, third
// (gather) fill 1 + 1
// COUNT-COUNT-8: gpu.launch
// COUNT-NOT: gpu.launch
// COUNT: return
func.func @other_readers(%x: tensor<?x64xbf16>, %off: tensor<9xi32>, %off2: tensor<9xi32>, %s: tensor<?xi32>, %g: tensor<?xi32>, %wu: tensor<8x64x32xbf16>, %wd: tensor<8x32x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  %h = moe.expert_gemm %x, %wu offsets(%off : tensor<9xi32>)
      : tensor<?x64xbf16>, tensor<8x64x32xbf16> -> tensor<?x32xbf16>
  %y = moe.expert_gemm %h, %wd offsets(%off2 : tensor<9xi32>) scatter(%s : tensor<?xi32>)
      : tensor<?x32xbf16>, tensor<8x32x64xbf16> -> tensor<?x64xbf16>
  %z = moe.expert_gemm %h[%g : tensor<?xi32>], %wd offsets(%off : tensor<9xi32>)
      : tensor<?x32xbf16>, tensor<8x32x64xbf16> -> tensor<?x64xbf16>
  return %y, %z : tensor<?x64xbf16>, tensor<?x64xbf16>
}
