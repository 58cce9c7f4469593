// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --implicit-check-not=moe.
// RUN: moe-opt %s --moe-decompose --moe-fuse --moe-lower-to-nvvm=format=ptx | FileCheck %s --check-prefix=PTX --implicit-check-not="= moe."
// RUN: moe-opt %s --convert-moe-to-gpu=gemm=simt | FileCheck %s --check-prefix=SIMT
// RUN: moe-opt %s --convert-moe-to-gpu=chip=sm_80 | FileCheck %s --check-prefix=SIMT

// The backward primitives' GPU kernels (BackwardToGPU.cpp): one thread per
// result element (route_grad: per row; row_dot: a warp per row), every sum
// in a fixed order, no atomics (deterministic); ffn_grad and ffn_train
// decompose into these and the forward kernels, and the whole module
// reaches PTX (PTX lines).

// glu_grad: rows x N threads, both halves of a pair per thread (gpt-oss's
// interleaved clamped SwiGLU: gate at 2c, up at 2c + 1).
// CHECK-LABEL: func.func @glu_grad
// CHECK:       %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x64xbf16>
// CHECK:       gpu.launch
// CHECK:         math.exp
// CHECK:         memref.store %{{.*}}, %[[OUT]][%{{.*}}, %[[G:.*]]] : memref<?x64xbf16>
// CHECK:         memref.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}] : memref<?x64xbf16>
// CHECK:       bufferization.to_tensor %[[OUT]]
func.func @glu_grad(%d: tensor<?x32xbf16>, %h: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %r = moe.glu_grad %d, %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x32xbf16>, tensor<?x64xbf16> -> tensor<?x64xbf16>
  return %r : tensor<?x64xbf16>
}

// row_dot: one warp per row: lane l's columns l, l + 32, ... in order in
// f32, a butterfly of five xor shuffles, then lane 0 adds acc[m].
// CHECK-LABEL: func.func @row_dot
// CHECK:       gpu.launch
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c40{{.*}} step %c32{{.*}} iter_args(%[[S:.*]] = %{{.*}}) -> (f32)
// CHECK:           arith.mulf
// CHECK:           arith.addf %[[S]]
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK:         scf.if
// CHECK:           memref.load %{{.*}}[%{{.*}}] : memref<?xf32
// CHECK:           arith.addf
// CHECK:           memref.store
func.func @row_dot(%a: tensor<?x40xbf16>, %b: tensor<?x40xbf16>, %acc: tensor<?xf32>) -> tensor<?xf32> {
  %r = moe.row_dot %a, %b accumulate(%acc : tensor<?xf32>) : tensor<?x40xbf16>, tensor<?x40xbf16> -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// combine_grad: one thread per (token, slot, column): w[t, j] * g[t, h].
// CHECK-LABEL: func.func @combine_grad
// CHECK:       %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x2x32xbf16>
// CHECK:       gpu.launch
// CHECK:         arith.mulf
// CHECK:         memref.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x2x32xbf16>
func.func @combine_grad(%g: tensor<?x32xbf16>, %w: tensor<?x2xf32>) -> tensor<?x2x32xbf16> {
  %r = moe.combine_grad %g weights(%w : tensor<?x2xf32>) : tensor<?x32xbf16> -> tensor<?x2x32xbf16>
  return %r : tensor<?x2x32xbf16>
}

// route_grad: one thread per token: the softmax's max and sum over the 8
// experts, the 2 picks' contributions once (unrolled, the divisions of the
// renormalisation there), then per expert the sum of its picks' (dsDot,
// then the result row).
// CHECK-LABEL: func.func @route_grad
// CHECK:       gpu.launch
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c8
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c8
// CHECK-NOT:     scf.for
// CHECK:         arith.divf
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c8{{.*}} -> (f32)
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c8
// CHECK:           memref.store %{{.*}} : memref<?x8xf32>
func.func @route_grad(%g: tensor<?x2xf32>, %l: tensor<?x8xf32>, %i: tensor<?x2xi32>) -> tensor<?x8xf32> {
  %r = moe.route_grad %g, %l, %i scoring = softmax {normalize = true} : tensor<?x2xf32>, tensor<?x8xf32>, tensor<?x2xi32> -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// grouped_matmul_wgrad (SIMT): one thread per (expert, k, n): the group's
// rows [clamp(off[e]), max(clamp(off[e+1]), lo)) in order from acc[e, k, n]
// (an empty group writes acc, or zero, exactly).
// CHECK-LABEL: func.func @wgrad
// CHECK:       %[[OUT:.*]] = memref.alloc() : memref<4x32x16xf32>
// CHECK:       gpu.launch
// CHECK:         %[[LO:.*]] = arith.minsi
// CHECK:         %[[HI0:.*]] = arith.minsi
// CHECK:         %[[HI:.*]] = arith.maxsi %[[HI0]], %[[LO]]
// CHECK:         %[[ACC:.*]] = memref.load %{{.*}} : memref<4x32x16xf32
// CHECK:         %[[SUM:.*]] = scf.for %{{.*}} = %[[LO]] to %[[HI]] step %{{.*}} iter_args(%{{.*}} = %[[ACC]]) -> (f32)
// CHECK:         memref.store %[[SUM]], %[[OUT]]
// CHECK-NOT:   atomic
func.func @wgrad(%dy: tensor<?x32xbf16>, %x: tensor<?x16xbf16>, %off: tensor<5xi32>, %acc: tensor<4x32x16xf32>) -> tensor<4x32x16xf32> {
  %r = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<5xi32>) accumulate(%acc : tensor<4x32x16xf32>) : tensor<?x32xbf16>, tensor<?x16xbf16> -> tensor<4x32x16xf32>
  return %r : tensor<4x32x16xf32>
}

// grouped_matmul_wgrad on sm_90a, 16-bit operands, K and N multiples of 64:
// the Hopper kernel (Gemm/WgmmaWgrad.cpp) when the rows allow 16-byte
// copies (a host-side check), else the SIMT kernel above. 384 threads
// (producer + two consumer warpgroups), 64-token stages of both operands
// by cp.async (zero-filled past the expert's rows), MN-major A and B
// (layouts col / row), the first MMA of an item not accumulating, one group
// in flight; N = 256 gives 128 x 256 tiles and setmaxnreg 104 / 200.
// The grid is min(items, 132): 4 experts x 1 row tile x 1 column tile. The
// epilogue writes the f32 sums' pairs to the warpgroup's shared chunk
// (st.shared, named barrier of 128), reads 16-byte slots back, adds acc's
// four columns and stores them (16 bytes).
// CHECK-LABEL: func.func @wgrad_hopper
// CHECK:       %[[OUT:.*]] = memref.alloc() : memref<4x128x256xf32>
// CHECK:       scf.if
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c4{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c384
// CHECK:           nvvm.setmaxregister {{ *}}decrease 104
// CHECK:           nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK:           nvvm.cp.async.mbarrier.arrive
// CHECK:           nvvm.setmaxregister {{ *}}increase 200
// CHECK:           nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK-COUNT-3:   nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK-NEXT:      nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:      nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.barrier id = {{.*}} number_of_threads = %c128_i32
// CHECK:           llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<3>
// CHECK:           nvvm.barrier id = {{.*}} number_of_threads = %c128_i32
// CHECK:           llvm.load {{.*}} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:           memref.load %{{.*}} : memref<4x128x256xf32
// CHECK:           llvm.store {{.*}} : vector<4xf32>, !llvm.ptr<1>
// CHECK:       } else {
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK:       bufferization.to_tensor %[[OUT]]
// SIMT-LABEL:  func.func @wgrad_hopper
// SIMT-NOT:    nvvm.wgmma
// SIMT:        return
func.func @wgrad_hopper(%dy: tensor<?x128xbf16>, %x: tensor<?x256xbf16>, %off: tensor<5xi32>, %acc: tensor<4x128x256xf32>) -> tensor<4x128x256xf32> {
  %r = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<5xi32>) accumulate(%acc : tensor<4x128x256xf32>) : tensor<?x128xbf16>, tensor<?x256xbf16> -> tensor<4x128x256xf32>
  return %r : tensor<4x128x256xf32>
}

// f16 results, N = 192: 128 x 192 tiles (m64n192k16), f16 pairs staged in
// shared memory, 16-byte slots stored.
// CHECK-LABEL: func.func @wgrad_hopper_f16
// CHECK:         gpu.launch
// CHECK:           nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 192, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <col>], B[<f16>, <one>, <row>]
// CHECK:           llvm.store {{.*}} : vector<2xf16>, !llvm.ptr<3>
// CHECK:           llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
func.func @wgrad_hopper_f16(%dy: tensor<?x64xf16>, %x: tensor<?x192xf16>, %off: tensor<9xi32>) -> tensor<8x64x192xf16> {
  %r = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<9xi32>) : tensor<?x64xf16>, tensor<?x192xf16> -> tensor<8x64x192xf16>
  return %r : tensor<8x64x192xf16>
}

// A gathered operand (x's rows through the dispatch's indices): each
// producer lane loads two of the next step's indices a step ahead (carried
// by its loop), and a copy takes its row from the owning lane by a shuffle.
// CHECK-LABEL: func.func @wgrad_hopper_gathered
// CHECK:         gpu.launch
// CHECK:           nvvm.setmaxregister {{ *}}decrease 104
// CHECK:           memref.load %{{.*}} : memref<?xi32
// CHECK:           memref.load %{{.*}} : memref<?xi32
// CHECK:           scf.for {{.*}} iter_args(%[[A:.*]] = %{{.*}}, %{{.*}} = %{{.*}}) -> (i32, i32) {
// CHECK:             memref.load %{{.*}} : memref<?xi32
// CHECK:             memref.load %{{.*}} : memref<?xi32
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK:             nvvm.cp.async.shared.global
// CHECK:             gpu.shuffle idx %[[A]]
// CHECK:             nvvm.cp.async.shared.global
// CHECK:           nvvm.setmaxregister {{ *}}increase 200
func.func @wgrad_hopper_gathered(%dy: tensor<?x128xbf16>, %x: tensor<?x256xbf16>, %idx: tensor<?xi32>, %off: tensor<5xi32>) -> tensor<4x128x256xbf16> {
  %r = moe.grouped_matmul_wgrad %dy, %x[%idx : tensor<?xi32>] offsets(%off : tensor<5xi32>) : tensor<?x128xbf16>, tensor<?x256xbf16> -> tensor<4x128x256xbf16>
  return %r : tensor<4x128x256xbf16>
}

// The whole layer's gradient and the training forward.
// CHECK-LABEL: func.func @ffn_grad
// CHECK-COUNT-2: gpu.launch
// PTX-DAG:   gpu.binary
// PTX-DAG:   llvm.func @ffn_grad(
// PTX-DAG:   llvm.func @ffn_train(
func.func @ffn_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x128x64xbf16>, %wd: tensor<8x64x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x128x64xf32>, tensor<8x64x64xf32>) {
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true, transpose_weights = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x128x64xbf16>, tensor<8x64x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x128x64xf32>, tensor<8x64x64xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x128x64xf32>, tensor<8x64x64xf32>
}

func.func @ffn_train(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x128x64xbf16>, %wd: tensor<8x64x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x128xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) {
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true, transpose_weights = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x128x64xbf16>, tensor<8x64x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x128xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  return %y, %h, %w, %i : tensor<?x64xbf16>, tensor<?x128xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
}
