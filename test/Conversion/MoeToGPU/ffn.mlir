// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=SPLIT
// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=MEMS --implicit-check-not=moe.
// RUN: moe-opt %s --moe-decompose --moe-fuse --convert-moe-to-gpu | FileCheck %s --check-prefix=FUSED
// RUN: moe-opt %s --moe-decompose --moe-fuse --convert-moe-to-gpu | FileCheck %s --check-prefix=MEMF \
// RUN:   --implicit-check-not=moe. --implicit-check-not=memref.atomic_rmw \
// RUN:   --implicit-check-not='memref<1024xi32' --implicit-check-not='memref<?x96xbf16>'

// A small Mixtral-like moe.ffn (softmax + normalize, k = 2, E = 8, H = 64,
// I = 48, silu + concat, bf16, dynamic T).
//
// Unfused, --convert-moe-to-gpu decomposes the op and lowers the chain
// completely, in 19 kernels:
//   route 1, cumsum 3 (fill, histogram, scan), get_indices 4 (two fills,
//   dispatched rows, undispatched slots), get_indptr 1, gather 1,
//   grouped_matmul 2 (fill + GEMM), glu 1, grouped_matmul 2, scatter 3
//   (owner fill, atomic max, copy), combine 1.
// After --moe-decompose --moe-fuse: 7 kernels:
//   route 1 + dispatch 1 (route_dispatch), gather-GEMM-GLU 2 (fill + GEMM),
//   GEMM-scale-scatter 2 (fill + GEMM), combine 1.

// SPLIT-LABEL: func.func @ffn_mixtral(
// SPLIT-COUNT-19: gpu.launch
// SPLIT-NOT: gpu.launch
// SPLIT: return

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
// first GEMM: M x 2I, two workgroup tiles (no GLU epilogue)
// MEMS: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x96xbf16>
// MEMS: workgroup(%{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// glu
// MEMS: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x48xbf16>
// MEMS: math.exp
// second GEMM
// MEMS: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x64xbf16>
// MEMS: workgroup(
// scatter
// MEMS: memref.atomic_rmw maxs
// MEMS: tensor.expand_shape
// combine (weighted)
// MEMS: gpu.launch
// MEMS: arith.mulf
// MEMS: return

// FUSED-LABEL: func.func @ffn_mixtral(
// FUSED-COUNT-7: gpu.launch
// FUSED-NOT: gpu.launch
// FUSED: return

// Fused: no E*T cumsum (no 1024-entry workgroup scan), no M x H gather
// buffer, no M x 2I pre-activation, no atomic owner map; the first GEMM
// carries the GLU (three workgroup tiles) and writes M x I, the second
// scales by the flattened routing weights and scatters into T*k x H.
// MEMF-LABEL: func.func @ffn_mixtral(
// route
// MEMF: %[[W:[a-z0-9_]+]] = memref.alloc(%{{[a-z0-9_]+}}) : memref<?x2xf32>
// MEMF: gpu.launch
// MEMF: %[[WT:[a-z0-9_]+]] = bufferization.to_tensor %[[W]] restrict writable
// dispatch
// MEMF: memref.alloc() : memref<1024x9xi32>
// MEMF: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c1024{{(_[0-9]+)?}},
// gather + GEMM + GLU
// MEMF-NOT: memref<?x96xbf16>
// MEMF: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x48xbf16>
// MEMF: gpu.launch
// MEMF: workgroup(%{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x64xf32, #gpu.address_space<workgroup>>) {
// MEMF: math.exp
// GEMM + scale + scatter
// MEMF: %[[FLAT:[a-z0-9_]+]] = tensor.collapse_shape %[[WT]] {{\[\[}}0, 1]] : tensor<?x2xf32> into tensor<?xf32>
// MEMF: bufferization.to_buffer %[[FLAT]] read_only
// MEMF: memref.alloc(%{{[a-z0-9_]+}}) : memref<?x64xbf16>
// MEMF: gpu.launch
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
