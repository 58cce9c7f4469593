// RUN: moe-opt %s | moe-opt | FileCheck %s --check-prefix=RT
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s --check-prefix=RT
// RUN: moe-opt %s --moe-decompose | FileCheck %s --check-prefix=DEC
// RUN: moe-opt %s --moe-decompose --moe-fuse | FileCheck %s --check-prefix=FUSE
// RUN: moe-opt %s --moe-decompose --moe-fuse --moe-lower-to-cpu > /dev/null
// RUN: moe-opt %s --moe-decompose --moe-fuse --moe-lower-to-nvvm > /dev/null

// Low-precision expert weights: the custom forms round-trip (through the
// generic form too), moe.ffn's formats and scales reach both grouped
// matmuls of its chain and survive every fusion into the expert_gemms,
// and both the CPU and the GPU pipelines compile them (the GPU kernels:
// test/Conversion/MoeToGPU/gemm-lowprec.mlir).

// RT-LABEL: func.func @fp8
// RT: moe.grouped_matmul %{{.*}}, %{{.*}} offsets(%{{.*}} : tensor<5xi32>) scales(%{{.*}} : tensor<4x2x2xf32>) {scale_fmt = #moe.scale_fmt<ue8m0>, transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x192x256xf8E4M3FN> -> tensor<?x192xf32>
func.func @fp8(%a: tensor<?x256xbf16>, %w: tensor<4x192x256xf8E4M3FN>, %s: tensor<4x2x2xf32>, %off: tensor<5xi32>) -> tensor<?x192xf32> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>, scale_fmt = #moe.scale_fmt<ue8m0>} : tensor<?x256xbf16>, tensor<4x192x256xf8E4M3FN> -> tensor<?x192xf32>
  return %r : tensor<?x192xf32>
}

// RT-LABEL: func.func @mxfp4
// RT: moe.grouped_matmul %{{.*}}, %{{.*}} offsets(%{{.*}} : tensor<5xi32>) bias(%{{.*}} : tensor<4x48xbf16>) scales(%{{.*}} : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
func.func @mxfp4(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xi8>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>, %b: tensor<4x48xbf16>) -> tensor<?x48xbf16> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<4x48xbf16>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
  return %r : tensor<?x48xbf16>
}

// gpt-oss-style: MXFP4 weights with expert biases, interleaved clamped SwiGLU.
// RT-LABEL: func.func @ffn_mxfp4
// RT: moe.ffn %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} expert_bias(%{{.*}}, %{{.*}} : tensor<4x64xbf16>, tensor<4x64xbf16>) scales(%[[SU:.*]], %[[SD:.*]] : tensor<4x64x2xf8E8M0FNU>, tensor<4x64x1xf8E8M0FNU>) k = 2
// RT-SAME: weight_format = #moe.weight_format<mxfp4>
// DEC-LABEL: func.func @ffn_mxfp4(
// DEC-SAME: %[[WU:[a-z0-9]+]]: tensor<4x64x32xi8>, %[[WD:[a-z0-9]+]]: tensor<4x64x16xi8>, %[[BU:[a-z0-9]+]]: tensor<4x64xbf16>, %[[BD:[a-z0-9]+]]: tensor<4x64xbf16>, %[[SU:[a-z0-9]+]]: tensor<4x64x2xf8E8M0FNU>, %[[SD:[a-z0-9]+]]: tensor<4x64x1xf8E8M0FNU>)
// DEC: moe.grouped_matmul %{{.*}}, %[[WU]] offsets(%{{.*}}) bias(%[[BU]] : tensor<4x64xbf16>) scales(%[[SU]] : tensor<4x64x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x64x32xi8> -> tensor<?x64xbf16>
// DEC: moe.glu
// DEC: moe.grouped_matmul %{{.*}}, %[[WD]] offsets(%{{.*}}) bias(%[[BD]] : tensor<4x64xbf16>) scales(%[[SD]] : tensor<4x64x1xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x32xbf16>, tensor<4x64x16xi8> -> tensor<?x64xbf16>
// FUSE-LABEL: func.func @ffn_mxfp4(
// FUSE: moe.expert_gemm {{.*}} scales(%{{.*}} : tensor<4x64x2xf8E8M0FNU>) {activation = #moe.activation<silu>, {{.*}}weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x64x32xi8> -> tensor<?x32xbf16>
// FUSE: moe.expert_gemm {{.*}} scatter({{.*}}) scale({{.*}}) scales(%{{.*}} : tensor<4x64x1xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x32xbf16>, tensor<4x64x16xi8> -> tensor<?x64xbf16>
func.func @ffn_mxfp4(%x: tensor<?x64xbf16>, %l: tensor<?x4xf32>, %wu: tensor<4x64x32xi8>, %wd: tensor<4x64x16xi8>, %bu: tensor<4x64xbf16>, %bd: tensor<4x64xbf16>, %su: tensor<4x64x2xf8E8M0FNU>, %sd: tensor<4x64x1xf8E8M0FNU>) -> tensor<?x64xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd expert_bias(%bu, %bd : tensor<4x64xbf16>, tensor<4x64xbf16>) scales(%su, %sd : tensor<4x64x2xf8E8M0FNU>, tensor<4x64x1xf8E8M0FNU>) k = 2 scoring = softmax activation = silu layout = interleaved {transpose_weights = true, weight_format = #moe.weight_format<mxfp4>, alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x64xbf16>, tensor<?x4xf32>, tensor<4x64x32xi8>, tensor<4x64x16xi8> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// DeepSeek-style: FP8 block weights (H = 200, I = 96: partial blocks),
// routing bias, ue8m0 activation scales, on both GEMMs.
// DEC-LABEL: func.func @ffn_fp8(
// DEC: moe.grouped_matmul {{.*}} scales(%{{.*}} : tensor<8x2x2xf32>) {scale_fmt = #moe.scale_fmt<ue8m0>, transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x200xbf16>, tensor<8x192x200xf8E4M3FN> -> tensor<?x192xbf16>
// DEC: moe.grouped_matmul {{.*}} scales(%{{.*}} : tensor<8x2x1xf32>) {scale_fmt = #moe.scale_fmt<ue8m0>, transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x96xbf16>, tensor<8x200x96xf8E4M3FN> -> tensor<?x200xbf16>
// FUSE-LABEL: func.func @ffn_fp8(
// FUSE-COUNT-2: moe.expert_gemm {{.*}}scale_fmt = #moe.scale_fmt<ue8m0>{{.*}}weight_format = #moe.weight_format<fp8_block>
func.func @ffn_fp8(%x: tensor<?x200xbf16>, %l: tensor<?x8xf32>, %bias: tensor<8xf32>, %wu: tensor<8x192x200xf8E4M3FN>, %wd: tensor<8x200x96xf8E4M3FN>, %su: tensor<8x2x2xf32>, %sd: tensor<8x2x1xf32>) -> tensor<?x200xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd bias(%bias : tensor<8xf32>) scales(%su, %sd : tensor<8x2x2xf32>, tensor<8x2x1xf32>) k = 2 scoring = sigmoid activation = silu layout = concat {normalize = true, transpose_weights = true, weight_format = #moe.weight_format<fp8_block>, scale_fmt = #moe.scale_fmt<ue8m0>} : tensor<?x200xbf16>, tensor<?x8xf32>, tensor<8x192x200xf8E4M3FN>, tensor<8x200x96xf8E4M3FN> -> tensor<?x200xbf16>
  return %y : tensor<?x200xbf16>
}
