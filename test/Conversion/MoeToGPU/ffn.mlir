// RUN: moe-opt %s "--convert-moe-to-gpu=elide-fills=false wgmma-swap-mn-major=false route-dispatch-small=false" | FileCheck %s --check-prefix=SPLIT
// RUN: moe-opt %s "--convert-moe-to-gpu=gemm=simt elide-fills=false route-dispatch-small=false" | FileCheck %s --check-prefix=SIMTS \
// RUN:   --implicit-check-not=nvvm. --implicit-check-not=dynamic_shared_memory
// RUN: moe-opt %s "--convert-moe-to-gpu=wgmma-cluster=1 elide-fills=false route-dispatch-small=false" | FileCheck %s --check-prefix=MEMS --implicit-check-not=moe.
// RUN: moe-opt %s --moe-decompose --moe-fuse "--convert-moe-to-gpu=elide-fills=false wgmma-swap-mn-major=false route-dispatch-small=false" | FileCheck %s --check-prefix=FUSED
// RUN: moe-opt %s --moe-decompose --moe-fuse "--convert-moe-to-gpu=gemm=simt elide-fills=false route-dispatch-small=false" | FileCheck %s --check-prefix=SIMTF \
// RUN:   --implicit-check-not=nvvm. --implicit-check-not=dynamic_shared_memory
// RUN: moe-opt %s --moe-decompose --moe-fuse "--convert-moe-to-gpu=wgmma-cluster=1 elide-fills=false route-dispatch-small=false" | FileCheck %s --check-prefix=MEMF \
// RUN:   --implicit-check-not=moe. --implicit-check-not='memref.atomic_rmw maxs' \
// RUN:   --implicit-check-not='memref<1024xi32' --implicit-check-not='memref<?x96xbf16>'

// (The MEMS and MEMF runs check the Hopper kernels without clusters,
// wgmma-cluster=1; SPLIT and FUSED count the default. The route kernel's
// top-k uses nvvm.redux.sync on sm_80 and later whatever the GEMM engine:
// the nvvm. exclusions (the SIMT runs, the f32 layer) check around the
// counted launches, not inside them, and the route kernel is one of them.)
//
// A small Mixtral-like moe.ffn (softmax + normalize, k = 2, E = 8, H = 64,
// I = 48, silu + concat, bf16, dynamic T), and the same layer in f32.
//
// Unfused, --convert-moe-to-gpu decomposes the op and lowers the chain
// completely. With gemm=simt, in 19 kernels:
//   route 1, cumsum 3 (fill, histogram, scan), get_indices 4 (two fills,
//   dispatched rows, undispatched slots), get_indptr 1, gather 1,
//   grouped_matmul 2 (fill + GEMM), glu 1, grouped_matmul 2, scatter 3
//   (owner fill, atomic max, copy), combine 1.
// After --moe-decompose --moe-fuse: 11 kernels:
//   route 1 + dispatch 3 (route_dispatch: per-chunk ranks and histograms,
//   per-expert scan of the chunk counts, placement), gather-GEMM-GLU 2 (zero fill of
//   the rows no expert owns + GEMM), GEMM-scale-scatter 4 (clear a flag
//   per output row, flag the scatter targets, zero the unflagged rows,
//   GEMM), combine 1.
// By default (gemm=auto, sm_90a) both bf16 GEMMs (K = 64 and K = 48, both
// multiples of 8) get the Hopper wgmma kernel as well, under the host-side
// layout guard, with the SIMT kernel as its else branch: one more kernel
// per GEMM, 21 unfused and 13 fused (one of each pair runs). The f32 layer
// has no Hopper kernel: 19 and 11 kernels by default too.
// (SPLIT and FUSED count with wgmma-swap-mn-major=false: these MN-major
// layers' small-M kernels are tested in gemm-swap.mlir.)

// SPLIT-LABEL: func.func @ffn_mixtral(
// SPLIT-COUNT-21: gpu.launch
// SPLIT-NOT: gpu.launch
// SPLIT: return
// SPLIT-LABEL: func.func @ffn_mixtral_f32(
// SPLIT-NOT: nvvm.
// SPLIT-NOT: dynamic_shared_memory
// SPLIT-COUNT-19: gpu.launch
// SPLIT-NOT: gpu.launch
// SPLIT-NOT: nvvm.
// SPLIT: return

// SIMTS-LABEL: func.func @ffn_mixtral(
// SIMTS-COUNT-19: gpu.launch
// SIMTS-NOT: gpu.launch
// SIMTS: return
// SIMTS-LABEL: func.func @ffn_mixtral_f32(
// SIMTS-COUNT-19: gpu.launch
// SIMTS-NOT: gpu.launch
// SIMTS: return

// The unfused chain materialises the E*T cumsum, the gathered M x H
// activation, the M x 2I pre-activation and the scattered copy.
// MEMS-LABEL: func.func @ffn_mixtral(
// MEMS: %[[L:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x8xbf16>
// MEMS: %[[T:[a-z0-9_]+]] = memref.dim %[[L]], %c0
// route
// MEMS: gpu.launch
// MEMS: math.exp
// cumsum: E*T entries, scanned in workgroup memory
// MEMS: arith.muli %c8{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} : index
// MEMS-NEXT: memref.alloc(%{{[a-z0-9_]+}}) : memref<?xi32>
// MEMS: workgroup(%{{[a-z0-9_]+}} : memref<1024xi32, #gpu.address_space<workgroup>>)
// get_indices: ordered pass
// MEMS: memref.alloc() : memref<1024x1xi32>
// get_indptr
// MEMS: memref.alloc() : memref<9xi32>
// gather: M x H
// MEMS: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x64xbf16>
// first GEMM: M x 2I, no GLU epilogue; under the layout guard the wgmma
// kernel (rhs [E, H, 2I] MN-major: wgmma B `row`), in the else branch the
// SIMT kernel with two workgroup tiles
// MEMS: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x96xbf16>
// MEMS: gpu.launch
// MEMS: scf.if
// MEMS: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// MEMS: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] :
// MEMS: gpu.terminator
// MEMS-NEXT: }
// MEMS-NEXT: } else {
// MEMS-NOT: nvvm.
// MEMS: workgroup(%{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// glu
// MEMS: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x48xbf16>
// MEMS: math.exp
// second GEMM (K = 48): the same pair
// MEMS: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x64xbf16>
// MEMS: scf.if
// MEMS: dynamic_shared_memory_size %c231936_i32 {
// MEMS: nvvm.wgmma.mma_async
// MEMS: gpu.terminator
// MEMS-NEXT: }
// MEMS-NEXT: } else {
// MEMS-NOT: nvvm.
// MEMS: workgroup(%{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// scatter
// MEMS: memref.atomic_rmw maxs
// MEMS: tensor.expand_shape
// combine (weighted)
// MEMS: gpu.launch
// MEMS: arith.mulf
// MEMS: return

// FUSED-LABEL: func.func @ffn_mixtral(
// FUSED-COUNT-13: gpu.launch
// FUSED-NOT: gpu.launch
// FUSED: return
// FUSED-LABEL: func.func @ffn_mixtral_f32(
// FUSED-NOT: nvvm.
// FUSED-NOT: dynamic_shared_memory
// FUSED-COUNT-11: gpu.launch
// FUSED-NOT: gpu.launch
// FUSED-NOT: nvvm.
// FUSED: return

// SIMTF-LABEL: func.func @ffn_mixtral(
// SIMTF-COUNT-11: gpu.launch
// SIMTF-NOT: gpu.launch
// SIMTF: return
// SIMTF-LABEL: func.func @ffn_mixtral_f32(
// SIMTF-COUNT-11: gpu.launch
// SIMTF-NOT: gpu.launch
// SIMTF: return

// Fused: no E*T cumsum (no 1024-entry workgroup scan), no M x H gather
// buffer, no M x 2I pre-activation, no atomic owner map; the first GEMM
// carries the GLU and writes M x I, the second scales by the flattened
// routing weights and scatters into T*k x H.
// MEMF-LABEL: func.func @ffn_mixtral(
// route
// MEMF: %[[W:[a-z0-9_]+]] = memref.alloc(%{{[a-z0-9_]+}}) : memref<?x2xf32>
// MEMF: gpu.launch
// MEMF: %[[WT:[a-z0-9_]+]] = bufferization.to_tensor %[[W]] restrict writable
// dispatch
// (three kernels: chunk ranks + histograms, scan, placement)
// MEMF-COUNT-3: gpu.launch
// gather + GEMM + GLU: the wgmma kernel (gathered lhs rows, GLU on the
// fragments) under the layout guard, the SIMT kernel with three workgroup
// tiles in the else branch
// MEMF-NOT: memref<?x96xbf16>
// MEMF: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x48xbf16>
// MEMF: gpu.launch
// MEMF: scf.if
// MEMF: dynamic_shared_memory_size %c231936_i32 {
// MEMF: nvvm.wgmma.mma_async
// MEMF: math.exp
// MEMF: gpu.terminator
// MEMF-NEXT: }
// MEMF-NEXT: } else {
// MEMF-NOT: nvvm.
// MEMF: workgroup(%{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// MEMF: math.exp
// GEMM + scale + scatter
// MEMF: %[[FLAT:[a-z0-9_]+]] = tensor.collapse_shape %[[WT]] {{\[\[}}0, 1]] : tensor<?x2xf32> into tensor<?xf32>
// MEMF: bufferization.to_buffer %[[FLAT]] read_only
// MEMF: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x64xbf16>
// MEMF: gpu.launch
// MEMF: scf.if
// MEMF: dynamic_shared_memory_size %c231936_i32 {
// MEMF: nvvm.wgmma.mma_async
// MEMF: gpu.terminator
// MEMF-NEXT: }
// MEMF-NEXT: } else {
// MEMF-NOT: nvvm.
// MEMF: workgroup(%{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// MEMF: tensor.expand_shape
// combine, unweighted (the weights were applied by the GEMM)
// MEMF: gpu.launch
// MEMF-NOT: arith.mulf
// MEMF: return
func.func @ffn_mixtral(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

func.func @ffn_mixtral_f32(%x: tensor<?x64xf32>, %l: tensor<?x8xf32>, %wu: tensor<8x64x96xf32>, %wd: tensor<8x48x64xf32>) -> tensor<?x64xf32> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xf32>, tensor<?x8xf32>, tensor<8x64x96xf32>, tensor<8x48x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
