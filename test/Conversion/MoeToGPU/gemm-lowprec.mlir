// Low-precision expert weights on the GPU (weight_format fp8_block /
// mxfp4; Gemm/ActivationQuant.cpp, Gemm/GemmConfig.cpp, the Hopper
// engine's FP8 path in Gemm/Wgmma*.cpp).
//
// fp8_block: one kernel quantizes the activations (a warp per row and
// 128-column group: amax by shuffles, e4m3 codes as i8, f32 scales), then
// the Hopper kernel multiplies e4m3 x e4m3 (m64n128k32, four MMAs per
// 128-K stage into a block accumulator, promoted with the scales the
// producer copies with each stage: 4-byte cp.async), its weights by TMA as
// UINT8 (CUtensorMapDataType 0) in boxes of 128 K x 64 rows; at few rows
// per expert the small-M kernels (weights as wgmma A: m64n16k32 and the
// wide m64n32k32, e4m3) run instead, promoted the same way with the
// tokens' scales; the SIMT kernel is the fallback.
// mxfp4 (bf16 activations): every tier is the small-M form (m64n16k16,
// m64n32k16, the main m64n128k16) with the weights as wgmma's register A
// operand (inline PTX): the packed e2m1 pairs by TMA as bytes (box 128
// bytes = 256 K), the E8M0 scale words by 4-byte cp.async, decoded by
// byte permutes (nvvm.prmt) and one bf16x2 multiply; other activation
// types take the SIMT kernel (gemm=wgmma: an error on the op), as do tile
// widths the FP8 path cannot take and shapes it cannot load.
//
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=gemm=simt" | FileCheck %s --check-prefix=SIMT \
// RUN:   --implicit-check-not=nvvm.wgmma --implicit-check-not=moeRuntimeTensorMap3D
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tma=false" | FileCheck %s --check-prefix=CPA \
// RUN:   --implicit-check-not=moeRuntimeTensorMap3D
// RUN: moe-opt %s -split-input-file "--convert-moe-to-gpu=gemm=wgmma" -verify-diagnostics > /dev/null
// RUN: not moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tile-n=256" 2>&1 | FileCheck %s --check-prefix=TN256
// RUN: not moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tile-n=64" 2>&1 | FileCheck %s --check-prefix=TN64
// RUN: not moe-opt %s -split-input-file "--convert-moe-to-gpu=wgmma-tile-n=256 wgmma-tma=false" 2>&1 | FileCheck %s --check-prefix=TN256CPA

// TN256: error: 'moe.expert_gemm' op wgmma-tile-n 256 does not tile these fp8_block weights (the columns must be a multiple of 256, at least 512: each half of a tile is one scale block)
// TN256: error: 'moe.expert_gemm' op wgmma-tile-n 256 does not tile these fp8_block weights (a concat GLU's output columns must be a multiple of 128, at least 256: each half of a tile is one scale block)
// TN256CPA: error: 'moe.expert_gemm' op wgmma-tile-n 256 does not tile these fp8_block weights (it needs the weights by TMA, wgmma-tma)
// TN64: error: 'moe.expert_gemm' op wgmma-tile-n 64 does not tile fp8_block weights (128 or 256: whole scale blocks)

// CHECK-LABEL: func.func @fp8(
// The activation quantization: amax over a half warp (a group; each warp
// quantizes two), codes by cvt.rn.satfinite.e4m3x2.f32, and scales.
// CHECK: gpu.launch
// CHECK-COUNT-4: gpu.shuffle xor
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: memref.store %{{.*}} : memref<?x256xi8>
// CHECK: memref.store %{{.*}} : memref<?x2xf32>
// The small-M kernels (16 and 32 tokens per tile), then the main kernel.
// CHECK: gpu.launch
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK: math.fma
// CHECK: gpu.launch
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 32, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// The main kernel's weight tensor map: UINT8, 128-K x 64-row boxes.
// CHECK: call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c256_i64{{.*}}, %c256_i64{{.*}}, %c4_i64{{.*}}, %{{.*}}, %{{.*}}, %c128_i64{{.*}}, %c64_i64{{.*}}, %c1_i64
// CHECK: gpu.launch
// CHECK: nvvm.setmaxregister decrease 88
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 4, cache = ca
// CHECK: nvvm.setmaxregister increase 208
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>, D[<f32>, <one>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: math.fma
// SIMT-LABEL: func.func @fp8(
// SIMT-COUNT-2: gpu.launch
// CPA-LABEL: func.func @fp8(
// CPA: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>
func.func @fp8(%a: tensor<?x256xbf16>, %w: tensor<4x256x256xf8E4M3FN>, %s: tensor<4x2x2xf32>, %off: tensor<5xi32>) -> tensor<?x256xbf16> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x256x256xf8E4M3FN> -> tensor<?x256xbf16>
  return %r : tensor<?x256xbf16>
}

// -----

// 256-column FP8 tiles (the columns a multiple of 256, at least 512): a K
// step's MMAs are two m64n128 halves into the one block accumulator, each
// waited for and promoted with its own scale block into the m64n256 tile
// accumulator (entry 127 read by the epilogue); weight boxes of 128 K x 128
// rows; producer / consumer registers 64 / 216.
// CHECK-LABEL: func.func @fp8_wide(
// CHECK: call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c256_i64{{.*}}, %c512_i64{{.*}}, %c4_i64{{.*}}, %{{.*}}, %{{.*}}, %c128_i64{{.*}}, %c128_i64{{.*}}, %c1_i64
// CHECK: nvvm.setmaxregister decrease 64
// CHECK: nvvm.setmaxregister increase 216
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: arith.mulf
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.for
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: math.fma
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: math.fma
// CHECK: llvm.extractvalue %{{.*}}[127] : !llvm.struct<(f32,
func.func @fp8_wide(%a: tensor<?x256xbf16>, %w: tensor<4x512x256xf8E4M3FN>, %s: tensor<4x4x2xf32>, %off: tensor<5xi32>) -> tensor<?x512xbf16> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x4x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x512x256xf8E4M3FN> -> tensor<?x512xbf16>
  return %r : tensor<?x512xbf16>
}

// -----

// K = 200 is no whole number of 16-byte e4m3 rows: the SIMT kernel.
// CHECK-LABEL: func.func @fp8_k200(
// CHECK-NOT: nvvm.wgmma
// CHECK: return
func.func @fp8_k200(%a: tensor<?x200xbf16>, %w: tensor<4x128x200xf8E4M3FN>, %s: tensor<4x1x2xf32>, %off: tensor<5xi32>) -> tensor<?x128xf32> {
  // expected-error @+2 {{cannot use gemm=wgmma: the wgmma engine needs K a positive multiple of 16 for fp8_block weights (16-byte rows of e4m3)}}
  // expected-error @+1 {{failed to legalize operation 'moe.grouped_matmul'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x1x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x200xbf16>, tensor<4x128x200xf8E4M3FN> -> tensor<?x128xf32>
  return %r : tensor<?x128xf32>
}

// -----

// A concat GLU whose up half would straddle a 128-column scale block
// (96 output columns): the SIMT kernel.
// CHECK-LABEL: func.func @fp8_concat96(
// CHECK-NOT: nvvm.wgmma
// CHECK: return
func.func @fp8_concat96(%a: tensor<?x256xbf16>, %w: tensor<4x192x256xf8E4M3FN>, %s: tensor<4x2x2xf32>, %off: tensor<5xi32>) -> tensor<?x96xbf16> {
  // expected-error @+2 {{cannot use gemm=wgmma: the wgmma engine needs the output columns a multiple of 64 for fp8_block weights with a concat GLU}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %r = moe.expert_gemm %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x2xf32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x192x256xf8E4M3FN> -> tensor<?x96xbf16>
  return %r : tensor<?x96xbf16>
}

// -----

// A concat GLU of 192 output columns: its halves fit one scale block at
// 128-column tiles (64 gate + 64 up columns), not at 256 (TN256 above).
// CHECK-LABEL: func.func @fp8_concat192(
// CHECK: nvvm.setmaxregister decrease 88
// CHECK: nvvm.setmaxregister increase 208
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 32>
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
func.func @fp8_concat192(%a: tensor<?x256xbf16>, %w: tensor<4x384x256xf8E4M3FN>, %s: tensor<4x3x2xf32>, %off: tensor<5xi32>) -> tensor<?x192xbf16> {
  %r = moe.expert_gemm %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x3x2xf32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x384x256xf8E4M3FN> -> tensor<?x192xbf16>
  return %r : tensor<?x192xbf16>
}

// -----

// The FP8 handoff between the two GEMMs of a layer: GEMM1 (a concat GLU on
// 256-column tiles, each holding one whole 128-column group of h) writes
// the e4m3 codes and scales of its output rows in its main kernel's
// epilogue (a row's amax over the quad by two shuffles, the codes by
// cvt.rn.satfinite, one 16-byte store of 16 codes a thread); its other
// paths (small-M kernels, SIMT) store h and say so, and then one kernel
// quantizes it; GEMM2 multiplies the codes without a quantization kernel
// of its own. With 128-column tiles (the CPA run, weights by cp.async)
// there is no handoff: GEMM2 quantizes h itself.
// CHECK-LABEL: func.func @fp8_handoff(
// CHECK: gpu.launch
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: %[[CODES:.*]] = memref.alloc(%{{.*}}) : memref<?x256xi8>
// CHECK: %[[SCALES:.*]] = memref.alloc(%{{.*}}) : memref<?x2xf32>
// CHECK: %[[STORED:.*]] = scf.if %{{.*}} -> (i1) {
// CHECK: nvvm.setmaxregister  increase 216
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : f32
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: scf.if %[[STORED]] {
// CHECK: gpu.launch
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: memref.store %{{.*}}, %[[CODES]]
// CHECK: memref.store %{{.*}}, %[[SCALES]]
// CHECK: bufferization.to_tensor
// CHECK-NOT: nvvm.convert.f32x2.to.f8x2
// CHECK: return
// CPA-LABEL: func.func @fp8_handoff(
// CPA-NOT: -> (i1)
// CPA-COUNT-2: nvvm.convert.f32x2.to.f8x2
// CPA: bufferization.to_tensor
// CPA: nvvm.convert.f32x2.to.f8x2
// CPA: return
func.func @fp8_handoff(%x: tensor<?x256xbf16>, %w1: tensor<4x512x256xf8E4M3FN>, %s1: tensor<4x4x2xf32>, %w2: tensor<4x256x256xf8E4M3FN>, %s2: tensor<4x2x2xf32>, %off: tensor<5xi32>) -> tensor<?x256xbf16> {
  %h = moe.expert_gemm %x, %w1 offsets(%off : tensor<5xi32>) scales(%s1 : tensor<4x4x2xf32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x512x256xf8E4M3FN> -> tensor<?x256xbf16>
  %y = moe.expert_gemm %h, %w2 offsets(%off : tensor<5xi32>) scales(%s2 : tensor<4x2x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x256x256xf8E4M3FN> -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// h read twice (GEMM2 and the function's result): no handoff.
// CHECK-LABEL: func.func @fp8_no_handoff(
// CHECK-NOT: -> (i1)
// CHECK: return
func.func @fp8_no_handoff(%x: tensor<?x256xbf16>, %w1: tensor<4x512x256xf8E4M3FN>, %s1: tensor<4x4x2xf32>, %w2: tensor<4x256x256xf8E4M3FN>, %s2: tensor<4x2x2xf32>, %off: tensor<5xi32>) -> (tensor<?x256xbf16>, tensor<?x256xbf16>) {
  %h = moe.expert_gemm %x, %w1 offsets(%off : tensor<5xi32>) scales(%s1 : tensor<4x4x2xf32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x512x256xf8E4M3FN> -> tensor<?x256xbf16>
  %y = moe.expert_gemm %h, %w2 offsets(%off : tensor<5xi32>) scales(%s2 : tensor<4x2x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x256x256xf8E4M3FN> -> tensor<?x256xbf16>
  return %h, %y : tensor<?x256xbf16>, tensor<?x256xbf16>
}

// -----

// mxfp4: three register-A kernels (16, 32, 128 tokens; the tensor maps:
// UINT8, K / 2 = 32 bytes a row, 48 rows, 4 experts, boxes of 128 bytes x
// 32 / 64 rows), each with the scale-word copies, the e2m1 decoding and
// its wgmmas; the SIMT kernel is the fallback (with gemm=simt the SIMT kernel
// decodes the e2m1 pairs and E8M0 scales.)
// CHECK-LABEL: func.func @mxfp4(
// CHECK: func.call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c32_i64, %c48_i64, %c4_i64, %{{.*}}, %{{.*}}, %c128_i64, %c32_i64
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 4, cache = ca
// CHECK: nvvm.prmt
// CHECK: llvm.fmul {{.*}} : vector<2xbf16>
// CHECK: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16
// CHECK: func.call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c32_i64, %c48_i64, %c4_i64, %{{.*}}, %{{.*}}, %c128_i64, %c32_i64
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK: func.call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c32_i64, %c48_i64, %c4_i64, %{{.*}}, %{{.*}}, %c128_i64, %c64_i64
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: return
// SIMT-LABEL: func.func @mxfp4(
func.func @mxfp4(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xi8>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>, %b: tensor<4x48xbf16>) -> tensor<?x48xbf16> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<4x48xbf16>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
  return %r : tensor<?x48xbf16>
}

// -----

// mxfp4_hopper: the 16-token kernel's stages are 256 K (weight boxes of 128
// bytes, 128-byte swizzle: CU_TENSOR_MAP_SWIZZLE_128B = 3); the 32-token
// and main kernels' are 128 K (boxes of 64 bytes x 32 / 96 rows, 64-byte
// swizzle = 2), so that twice as many stages fit.
// CHECK-LABEL: func.func @mxfp4_hopper(
// CHECK: func.call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c32_i64, %c48_i64, %c4_i64, %{{.*}}, %{{.*}}, %c128_i64, %c32_i64{{.*}}, %c1_i64{{.*}}, %c3_i64
// CHECK: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16
// CHECK: func.call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c32_i64, %c48_i64, %c4_i64, %{{.*}}, %{{.*}}, %c64_i64, %c32_i64{{.*}}, %c1_i64{{.*}}, %c2_i64
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK: func.call @moeRuntimeTensorMap3D(%{{.*}}, %c0_i64{{.*}}, %c32_i64, %c48_i64, %c4_i64, %{{.*}}, %{{.*}}, %c64_i64, %c96_i64{{.*}}, %c1_i64{{.*}}, %c2_i64
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: return
// SIMT-LABEL: func.func @mxfp4_hopper(
func.func @mxfp4_hopper(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xi8>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>) -> tensor<?x48xbf16> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4_hopper>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
  return %r : tensor<?x48xbf16>
}

// -----

// mxfp4 with f16 activations: no register-A kernel (e2m1 x 2^k is not
// exact in f16): the SIMT kernel; gemm=wgmma an error.
// CHECK-LABEL: func.func @mxfp4_f16(
// CHECK-NOT: wgmma
// CHECK: return
func.func @mxfp4_f16(%a: tensor<?x64xf16>, %w: tensor<4x48x32xi8>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>) -> tensor<?x48xf16> {
  // expected-error @+2 {{cannot use gemm=wgmma: the wgmma engine needs bf16 activations with mxfp4 weights (got f16)}}
  // expected-error @+1 {{failed to legalize operation 'moe.grouped_matmul'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xf16>, tensor<4x48x32xi8> -> tensor<?x48xf16>
  return %r : tensor<?x48xf16>
}
