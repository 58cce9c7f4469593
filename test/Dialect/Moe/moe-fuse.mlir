// RUN: moe-opt %s --moe-decompose --moe-cost-report=label=unfused --moe-fuse --moe-cost-report=label=fused 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report

// After --moe-decompose --moe-fuse no cumsum, gather, glu or scatter is
// left, for every routing style and GLU variant.

// CHECK-LABEL: func.func @mixtral
// CHECK: moe.route_dispatch
// CHECK: moe.expert_gemm {{.*}}[{{.*}}activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>
// CHECK: moe.expert_gemm {{.*}} scatter({{.*}}) scale(
// CHECK: moe.combine
func.func @mixtral(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @deepseek
// CHECK: moe.route_dispatch {{.*}} bias(
// CHECK: activation = #moe.activation<silu>
// CHECK: scatter(
func.func @deepseek(%x: tensor<?x32xf32>, %l: tensor<?x16xf32>, %wu: tensor<16x32x16xf32>, %wd: tensor<16x8x32xf32>, %b: tensor<16xf32>) -> tensor<?x32xf32> {
  %y = moe.ffn %x, %l, %wu, %wd bias(%b : tensor<16xf32>) k = 4 scoring = sigmoid activation = silu layout = concat
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32}
      : tensor<?x32xf32>, tensor<?x16xf32>, tensor<16x32x16xf32>, tensor<16x8x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func.func @gpt_oss
// CHECK: activation = #moe.activation<silu>, {{.*}}layout = #moe.glu_layout<interleaved>, limit = 7.000000e+00 : f32, transpose_rhs = true
func.func @gpt_oss(%x: tensor<5x32xf32>, %l: tensor<5x8xf32>, %wu: tensor<8x32x32xf32>, %wd: tensor<8x32x16xf32>) -> tensor<5x32xf32> {
  %y = moe.ffn %x, %l, %wu, %wd k = 4 scoring = softmax activation = silu layout = interleaved
      {normalize = true, alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<5x32xf32>, tensor<5x8xf32>, tensor<8x32x32xf32>, tensor<8x32x16xf32> -> tensor<5x32xf32>
  return %y : tensor<5x32xf32>
}
// CHECK-NOT: moe.cumsum
// CHECK-NOT: moe.gather
// CHECK-NOT: moe.glu
// CHECK-NOT: moe.scatter

// REPORT: moe-cost-report [unfused] @mixtral: 10 compute ops, 11 intermediates
// REPORT: intermediate moe.cumsum #0 tensor<?xi32> : 32*T bytes
// REPORT: intermediate moe.gather #0 tensor<?x64xbf16> : 256*T bytes
// REPORT: intermediate moe.grouped_matmul #0 tensor<?x256xbf16> : 1024*T bytes
// REPORT: total intermediate bytes: 2368*T + 36
// REPORT: moe-cost-report [fused] @mixtral: 4 compute ops, 6 intermediates
// REPORT-NOT: moe.cumsum
// REPORT-NOT: moe.gather
// REPORT: total intermediate bytes: 792*T + 36
