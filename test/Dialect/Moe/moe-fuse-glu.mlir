// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-fuse-glu))' | FileCheck %s

// CHECK-LABEL: func.func @fuses
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x16xbf16>, %[[W:[a-z0-9_]+]]: tensor<4x16x8xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi32>)
// CHECK: %[[R:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<5xi32>) {activation = #moe.activation<silu>, alpha = 1.702000e+00 : f32, layout = #moe.glu_layout<interleaved>, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32} : tensor<?x16xbf16>, tensor<4x16x8xbf16> -> tensor<?x4xbf16>
// CHECK-NOT: moe.glu
// CHECK: return %[[R]]
func.func @fuses(%x: tensor<?x16xbf16>, %w: tensor<4x16x8xbf16>, %off: tensor<5xi32>) -> tensor<?x4xbf16> {
  %h = moe.grouped_matmul %x, %w offsets(%off : tensor<5xi32>) : tensor<?x16xbf16>, tensor<4x16x8xbf16> -> tensor<?x8xbf16>
  %a = moe.glu %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x8xbf16> -> tensor<?x4xbf16>
  return %a : tensor<?x4xbf16>
}

// The pre-activation is also returned: unchanged.
// CHECK-LABEL: func.func @preactivation_has_another_user
// CHECK: moe.grouped_matmul
// CHECK: moe.glu
func.func @preactivation_has_another_user(%x: tensor<?x16xf32>, %w: tensor<4x16x8xf32>, %off: tensor<5xi32>) -> (tensor<?x4xf32>, tensor<?x8xf32>) {
  %h = moe.grouped_matmul %x, %w offsets(%off : tensor<5xi32>) : tensor<?x16xf32>, tensor<4x16x8xf32> -> tensor<?x8xf32>
  %a = moe.glu %h gelu concat : tensor<?x8xf32> -> tensor<?x4xf32>
  return %a, %h : tensor<?x4xf32>, tensor<?x8xf32>
}

// A GEMM that already scales its rows: the GLU would have to come first.
// CHECK-LABEL: func.func @gemm_already_scaled
// CHECK: moe.expert_gemm {{.*}} scale(
// CHECK: moe.glu
func.func @gemm_already_scaled(%x: tensor<8x16xf32>, %w: tensor<4x16x8xf32>, %off: tensor<5xi32>, %s: tensor<8xf32>) -> tensor<8x4xf32> {
  %h = moe.expert_gemm %x, %w offsets(%off : tensor<5xi32>) scale(%s : tensor<8xf32>) : tensor<8x16xf32>, tensor<4x16x8xf32> -> tensor<8x8xf32>
  %a = moe.glu %h silu concat : tensor<8x8xf32> -> tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}
