// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-fuse-glu-grad))' --split-input-file | FileCheck %s

// The down projection's backward as moe.ffn_grad decomposes it: one fused
// op, placed at the row_dot (whose users come before the glu_grad), the
// gather absorbed; the gathered rows stay for their other user.
// CHECK-LABEL: func.func @fuses
// CHECK-SAME: (%[[DY:[a-z0-9_]+]]: tensor<?x16xbf16>, %[[TOK:[a-z0-9_]+]]: tensor<?xi32>, %[[W2:[a-z0-9_]+]]: tensor<4x8x16xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi32>, %[[H:[a-z0-9_]+]]: tensor<?x16xbf16>, %[[W:[a-z0-9_]+]]: tensor<?x1xf32>, %[[M:[a-z0-9_]+]]: index)
// CHECK:      %[[DYR:[a-z0-9_]+]] = moe.gather %[[DY]][%[[TOK]]]
// CHECK-NEXT: %[[WF:[a-z0-9_]+]] = tensor.collapse_shape %[[W]] {{\[}}[0, 1]] : tensor<?x1xf32> into tensor<?xf32>
// CHECK-NEXT: %[[DH:[a-z0-9_]+]], %[[WA:[a-z0-9_]+]], %[[DW:[a-z0-9_]+]] = moe.expert_gemm_glu_grad %[[DY]][%[[TOK]] : tensor<?xi32>], %[[W2]] offsets(%[[OFF]] : tensor<5xi32>) preact(%[[H]] : tensor<?x16xbf16>) weights(%[[WF]] : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x16xbf16>, tensor<4x8x16xbf16> -> tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<?xf32>
// CHECK-NEXT: %[[NEG:[a-z0-9_]+]] = arith.negf %[[DW]]
// CHECK-NOT:  moe.glu
// CHECK-NOT:  moe.row_dot
// CHECK-NOT:  moe.combine
// CHECK:      return %[[DH]], %[[WA]], %[[NEG]], %[[DYR]]
func.func @fuses(%dy: tensor<?x16xbf16>, %tok: tensor<?xi32>, %w2: tensor<4x8x16xbf16>, %off: tensor<5xi32>, %h: tensor<?x16xbf16>, %w: tensor<?x1xf32>, %m: index) -> (tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<?xf32>, tensor<?x16xbf16>) {
  %dyr = moe.gather %dy[%tok] : tensor<?x16xbf16>, tensor<?xi32> -> tensor<?x16xbf16>
  %g = moe.grouped_matmul %dyr, %w2 offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<?x16xbf16>, tensor<4x8x16xbf16> -> tensor<?x8xbf16>
  %a = moe.glu %h silu concat : tensor<?x16xbf16> -> tensor<?x8xbf16>
  %dw = moe.row_dot %g, %a : tensor<?x8xbf16>, tensor<?x8xbf16> -> tensor<?xf32>
  %neg = arith.negf %dw : tensor<?xf32>
  %ge = tensor.expand_shape %g [[0, 1], [2]] output_shape [%m, 1, 8] : tensor<?x8xbf16> into tensor<?x1x8xbf16>
  %da = moe.combine %ge weights(%w : tensor<?x1xf32>) : tensor<?x1x8xbf16> -> tensor<?x8xbf16>
  %dh = moe.glu_grad %da, %h silu concat : tensor<?x8xbf16>, tensor<?x16xbf16> -> tensor<?x16xbf16>
  %ae = tensor.expand_shape %a [[0, 1], [2]] output_shape [%m, 1, 8] : tensor<?x8xbf16> into tensor<?x1x8xbf16>
  %wa = moe.combine %ae weights(%w : tensor<?x1xf32>) : tensor<?x1x8xbf16> -> tensor<?x8xbf16>
  return %dh, %wa, %neg, %dyr : tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<?xf32>, tensor<?x16xbf16>
}

// -----

// gpt-oss's form: interleaved clamped SwiGLU, the bias dot as the row_dot's
// accumulator, nn.Linear-less [E, I, H] weights.
// CHECK-LABEL: func.func @swiglu_acc
// CHECK: moe.expert_gemm_glu_grad %{{.*}}, %{{.*}} offsets(%{{.*}} : tensor<5xi32>) preact(%{{.*}} : tensor<6x16xf32>) weights(%{{.*}} : tensor<6xf32>) accumulate(%{{.*}} : tensor<6xf32>) silu interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, transpose_rhs = true, up_bias = 1.000000e+00 : f32} : tensor<6x4xf32>, tensor<4x8x4xf32> -> tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>
// CHECK-NOT: moe.glu_grad
func.func @swiglu_acc(%dyr: tensor<6x4xf32>, %w2: tensor<4x8x4xf32>, %off: tensor<5xi32>, %h: tensor<6x16xf32>, %w: tensor<6x1xf32>, %bt: tensor<6xf32>) -> (tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>) {
  %g = moe.grouped_matmul %dyr, %w2 offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<6x4xf32>, tensor<4x8x4xf32> -> tensor<6x8xf32>
  %a = moe.glu %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<6x16xf32> -> tensor<6x8xf32>
  %dw = moe.row_dot %g, %a accumulate(%bt : tensor<6xf32>) : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6xf32>
  %ge = tensor.expand_shape %g [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %da = moe.combine %ge weights(%w : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  %dh = moe.glu_grad %da, %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<6x8xf32>, tensor<6x16xf32> -> tensor<6x16xf32>
  %ae = tensor.expand_shape %a [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %wa = moe.combine %ae weights(%w : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  return %dh, %wa, %dw : tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>
}

// -----

// The glu and the glu_grad disagree (alpha): unchanged.
// CHECK-LABEL: func.func @glu_params_differ
// CHECK: moe.row_dot
// CHECK: moe.glu_grad
// CHECK-NOT: moe.expert_gemm_glu_grad
func.func @glu_params_differ(%dyr: tensor<6x4xf32>, %w2: tensor<4x8x4xf32>, %off: tensor<5xi32>, %h: tensor<6x16xf32>, %w: tensor<6x1xf32>) -> (tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>) {
  %g = moe.grouped_matmul %dyr, %w2 offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<6x4xf32>, tensor<4x8x4xf32> -> tensor<6x8xf32>
  %a = moe.glu %h silu concat {alpha = 2.0 : f32} : tensor<6x16xf32> -> tensor<6x8xf32>
  %dw = moe.row_dot %g, %a : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6xf32>
  %ge = tensor.expand_shape %g [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %da = moe.combine %ge weights(%w : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  %dh = moe.glu_grad %da, %h silu concat : tensor<6x8xf32>, tensor<6x16xf32> -> tensor<6x16xf32>
  %ae = tensor.expand_shape %a [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %wa = moe.combine %ae weights(%w : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  return %dh, %wa, %dw : tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>
}

// -----

// The GEMM's result is also returned (another user): unchanged.
// CHECK-LABEL: func.func @g_has_another_user
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_gemm_glu_grad
func.func @g_has_another_user(%dyr: tensor<6x4xf32>, %w2: tensor<4x8x4xf32>, %off: tensor<5xi32>, %h: tensor<6x16xf32>, %w: tensor<6x1xf32>) -> (tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>, tensor<6x8xf32>) {
  %g = moe.grouped_matmul %dyr, %w2 offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<6x4xf32>, tensor<4x8x4xf32> -> tensor<6x8xf32>
  %a = moe.glu %h silu concat : tensor<6x16xf32> -> tensor<6x8xf32>
  %dw = moe.row_dot %g, %a : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6xf32>
  %ge = tensor.expand_shape %g [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %da = moe.combine %ge weights(%w : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  %dh = moe.glu_grad %da, %h silu concat : tensor<6x8xf32>, tensor<6x16xf32> -> tensor<6x16xf32>
  %ae = tensor.expand_shape %a [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %wa = moe.combine %ae weights(%w : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  return %dh, %wa, %dw, %g : tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>, tensor<6x8xf32>
}

// -----

// The activation is scaled by other weights than the gradient: unchanged.
// CHECK-LABEL: func.func @different_weights
// CHECK-NOT: moe.expert_gemm_glu_grad
func.func @different_weights(%dyr: tensor<6x4xf32>, %w2: tensor<4x8x4xf32>, %off: tensor<5xi32>, %h: tensor<6x16xf32>, %w: tensor<6x1xf32>, %v: tensor<6x1xf32>) -> (tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>) {
  %g = moe.grouped_matmul %dyr, %w2 offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<6x4xf32>, tensor<4x8x4xf32> -> tensor<6x8xf32>
  %a = moe.glu %h silu concat : tensor<6x16xf32> -> tensor<6x8xf32>
  %dw = moe.row_dot %g, %a : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6xf32>
  %ge = tensor.expand_shape %g [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %da = moe.combine %ge weights(%w : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  %dh = moe.glu_grad %da, %h silu concat : tensor<6x8xf32>, tensor<6x16xf32> -> tensor<6x16xf32>
  %ae = tensor.expand_shape %a [[0, 1], [2]] output_shape [6, 1, 8] : tensor<6x8xf32> into tensor<6x1x8xf32>
  %wa = moe.combine %ae weights(%v : tensor<6x1xf32>) : tensor<6x1x8xf32> -> tensor<6x8xf32>
  return %dh, %wa, %dw : tensor<6x16xf32>, tensor<6x8xf32>, tensor<6xf32>
}
