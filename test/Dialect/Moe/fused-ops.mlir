// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
// RUN: moe-opt %s --verify-roundtrip | FileCheck %s

// Round-trips the internal fused moe ops (moe.dispatch, moe.expert_gemm,
// moe.route_dispatch) in their custom form. Attributes equal to their default
// are elided by the printer; the CHECK-NOT lines pin that down.

//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @dispatch_static_t
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<4x2xi32>)
func.func @dispatch_static_t(%ids: tensor<4x2xi32>) -> (tensor<9xi32>, tensor<8xi32>, tensor<8xi32>) {
  // CHECK: %[[O:[a-z0-9_]+]], %[[R:[a-z0-9_]+]], %[[T:[a-z0-9_]+]] = moe.dispatch %[[IDS]] num_experts = 8 : tensor<4x2xi32> -> tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  // CHECK: return %[[O]], %[[R]], %[[T]]
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<4x2xi32> -> tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return %o, %r, %t : tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
}

// CHECK-LABEL: func.func @dispatch_dynamic_t
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<?x2xi32>)
func.func @dispatch_dynamic_t(%ids: tensor<?x2xi32>) -> (tensor<9xi32>, tensor<?xi32>, tensor<?xi32>) {
  // CHECK: %[[O:[a-z0-9_]+]], %[[R:[a-z0-9_]+]], %[[T:[a-z0-9_]+]] = moe.dispatch %[[IDS]] num_experts = 8 : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK: return %[[O]], %[[R]], %[[T]]
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return %o, %r, %t : tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
}

//===----------------------------------------------------------------------===//
// moe.expert_gemm
//===----------------------------------------------------------------------===//

// No fused stage: a plain grouped matmul.
// CHECK-LABEL: func.func @expert_gemm_plain
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x64x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>)
func.func @expert_gemm_plain(%x: tensor<?x64xbf16>, %w: tensor<8x64x128xbf16>, %off: tensor<9xi32>) -> tensor<?x128xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x128xbf16> -> tensor<?x128xbf16>
  // CHECK-NOT: {
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x128xbf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// Gather prologue: M is the gather length, not lhs's rows.
// CHECK-LABEL: func.func @expert_gemm_gather
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x64xf32>, %[[G:[a-z0-9_]+]]: tensor<8xi32>, %[[W:[a-z0-9_]+]]: tensor<8x64x32xf32>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>)
func.func @expert_gemm_gather(%x: tensor<4x64xf32>, %g: tensor<8xi32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) -> tensor<8x32xf32> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]][%[[G]] : tensor<8xi32>], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<4x64xf32>, tensor<8x64x32xf32> -> tensor<8x32xf32>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x[%g : tensor<8xi32>], %w offsets(%off : tensor<9xi32>) : tensor<4x64xf32>, tensor<8x64x32xf32> -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// CHECK-LABEL: func.func @expert_gemm_bias
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xf16>, %[[W:[a-z0-9_]+]]: tensor<4x64x32xf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi32>, %[[B:[a-z0-9_]+]]: tensor<4x32xf16>)
func.func @expert_gemm_bias(%x: tensor<?x64xf16>, %w: tensor<4x64x32xf16>, %off: tensor<5xi32>, %b: tensor<4x32xf16>) -> tensor<?x32xf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<5xi32>) bias(%[[B]] : tensor<4x32xf16>) : tensor<?x64xf16>, tensor<4x64x32xf16> -> tensor<?x32xf16>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<4x32xf16>) : tensor<?x64xf16>, tensor<4x64x32xf16> -> tensor<?x32xf16>
  return %y : tensor<?x32xf16>
}

// CHECK-LABEL: func.func @expert_gemm_scatter
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x64x64xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>, %[[S:[a-z0-9_]+]]: tensor<?xi32>)
func.func @expert_gemm_scatter(%x: tensor<?x64xbf16>, %w: tensor<8x64x64xbf16>, %off: tensor<9xi32>, %s: tensor<?xi32>) -> tensor<?x64xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) scatter(%[[S]] : tensor<?xi32>) : tensor<?x64xbf16>, tensor<8x64x64xbf16> -> tensor<?x64xbf16>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) scatter(%s : tensor<?xi32>) : tensor<?x64xbf16>, tensor<8x64x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// Scatter and scale together; scale's element type is free (f32 here).
// CHECK-LABEL: func.func @expert_gemm_scatter_scale
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x64x64xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>, %[[S:[a-z0-9_]+]]: tensor<?xi32>, %[[SC:[a-z0-9_]+]]: tensor<?xf32>)
func.func @expert_gemm_scatter_scale(%x: tensor<?x64xbf16>, %w: tensor<8x64x64xbf16>, %off: tensor<9xi32>, %s: tensor<?xi32>, %sc: tensor<?xf32>) -> tensor<?x64xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) scatter(%[[S]] : tensor<?xi32>) scale(%[[SC]] : tensor<?xf32>) : tensor<?x64xbf16>, tensor<8x64x64xbf16> -> tensor<?x64xbf16>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) scatter(%s : tensor<?xi32>) scale(%sc : tensor<?xf32>) : tensor<?x64xbf16>, tensor<8x64x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// Scale without scatter (d = m).
// CHECK-LABEL: func.func @expert_gemm_scale
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<6x64xf32>, %[[W:[a-z0-9_]+]]: tensor<2x64x16xf32>, %[[OFF:[a-z0-9_]+]]: tensor<3xi32>, %[[SC:[a-z0-9_]+]]: tensor<6xf32>)
func.func @expert_gemm_scale(%x: tensor<6x64xf32>, %w: tensor<2x64x16xf32>, %off: tensor<3xi32>, %sc: tensor<6xf32>) -> tensor<6x16xf32> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<3xi32>) scale(%[[SC]] : tensor<6xf32>) : tensor<6x64xf32>, tensor<2x64x16xf32> -> tensor<6x16xf32>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<3xi32>) scale(%sc : tensor<6xf32>) : tensor<6x64xf32>, tensor<2x64x16xf32> -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// GLU epilogue with default alpha / limit / up_bias: N' = N / 2.
// CHECK-LABEL: func.func @expert_gemm_glu
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[TOK:[a-z0-9_]+]]: tensor<?xi32>, %[[W:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>)
func.func @expert_gemm_glu(%x: tensor<?x64xbf16>, %tok: tensor<?xi32>, %w: tensor<8x64x256xbf16>, %off: tensor<9xi32>) -> tensor<?x128xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]][%[[TOK]] : tensor<?xi32>], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>} : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x128xbf16>
  // CHECK-NOT: alpha
  // CHECK-NOT: up_bias
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x[%tok : tensor<?xi32>], %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>} : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// gpt-oss SwiGLU: interleaved, alpha, limit, up_bias.
// CHECK-LABEL: func.func @expert_gemm_glu_alpha_limit_up_bias
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>)
func.func @expert_gemm_glu_alpha_limit_up_bias(%x: tensor<?x64xbf16>, %w: tensor<8x64x256xbf16>, %off: tensor<9xi32>) -> tensor<?x128xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) {activation = #moe.activation<silu>, alpha = 1.702000e+00 : f32, layout = #moe.glu_layout<interleaved>, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32} : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x128xbf16>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<interleaved>, alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// The other activations.
// CHECK-LABEL: func.func @expert_gemm_glu_gelu_activations
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xf16>, %[[W:[a-z0-9_]+]]: tensor<4x64x64xf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi32>)
func.func @expert_gemm_glu_gelu_activations(%x: tensor<?x64xf16>, %w: tensor<4x64x64xf16>, %off: tensor<5xi32>) -> (tensor<?x32xf16>, tensor<?x32xf16>) {
  // CHECK: %[[A:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<5xi32>) {activation = #moe.activation<gelu>, layout = #moe.glu_layout<concat>} : tensor<?x64xf16>, tensor<4x64x64xf16> -> tensor<?x32xf16>
  // CHECK: %[[B:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<5xi32>) {activation = #moe.activation<gelu_tanh>, layout = #moe.glu_layout<interleaved>} : tensor<?x64xf16>, tensor<4x64x64xf16> -> tensor<?x32xf16>
  // CHECK: return %[[A]], %[[B]]
  %a = moe.expert_gemm %x, %w offsets(%off : tensor<5xi32>) {activation = #moe.activation<gelu>, layout = #moe.glu_layout<concat>} : tensor<?x64xf16>, tensor<4x64x64xf16> -> tensor<?x32xf16>
  %b = moe.expert_gemm %x, %w offsets(%off : tensor<5xi32>) {activation = #moe.activation<gelu_tanh>, layout = #moe.glu_layout<interleaved>} : tensor<?x64xf16>, tensor<4x64x64xf16> -> tensor<?x32xf16>
  return %a, %b : tensor<?x32xf16>, tensor<?x32xf16>
}

// rhs is E x N x K.
// CHECK-LABEL: func.func @expert_gemm_transpose_rhs
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x32x64xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>, %[[B:[a-z0-9_]+]]: tensor<8x32xbf16>)
func.func @expert_gemm_transpose_rhs(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %off: tensor<9xi32>, %b: tensor<8x32xbf16>) -> tensor<?x32xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) bias(%[[B]] : tensor<8x32xbf16>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x32x64xbf16> -> tensor<?x32xbf16>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x32xbf16>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x32x64xbf16> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// transpose_rhs = false is the default and is elided.
// CHECK-LABEL: func.func @expert_gemm_transpose_rhs_false_elided
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x64x32xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>)
func.func @expert_gemm_transpose_rhs_false_elided(%x: tensor<?x64xbf16>, %w: tensor<8x64x32xbf16>, %off: tensor<9xi32>) -> tensor<?x32xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x32xbf16> -> tensor<?x32xbf16>
  // CHECK-NOT: transpose_rhs
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = false} : tensor<?x64xbf16>, tensor<8x64x32xbf16> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// An f32 result from bf16 operands, with every stage fused.
// CHECK-LABEL: func.func @expert_gemm_f32_result_from_bf16
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[G:[a-z0-9_]+]]: tensor<?xi32>, %[[W:[a-z0-9_]+]]: tensor<8x256x64xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<9xi32>, %[[B:[a-z0-9_]+]]: tensor<8x256xbf16>, %[[S:[a-z0-9_]+]]: tensor<?xi32>, %[[SC:[a-z0-9_]+]]: tensor<?xbf16>)
func.func @expert_gemm_f32_result_from_bf16(%x: tensor<?x64xbf16>, %g: tensor<?xi32>, %w: tensor<8x256x64xbf16>, %off: tensor<9xi32>, %b: tensor<8x256xbf16>, %s: tensor<?xi32>, %sc: tensor<?xbf16>) -> tensor<?x128xf32> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.expert_gemm %[[X]][%[[G]] : tensor<?xi32>], %[[W]] offsets(%[[OFF]] : tensor<9xi32>) bias(%[[B]] : tensor<8x256xbf16>) scatter(%[[S]] : tensor<?xi32>) scale(%[[SC]] : tensor<?xbf16>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x256x64xbf16> -> tensor<?x128xf32>
  // CHECK: return %[[Y]]
  %y = moe.expert_gemm %x[%g : tensor<?xi32>], %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x256xbf16>) scatter(%s : tensor<?xi32>) scale(%sc : tensor<?xbf16>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x256x64xbf16> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

//===----------------------------------------------------------------------===//
// moe.route_dispatch
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @route_dispatch_softmax
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x8xf32>)
func.func @route_dispatch_softmax(%l: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>) {
  // CHECK: %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]], %[[O:[a-z0-9_]+]], %[[R:[a-z0-9_]+]], %[[T:[a-z0-9_]+]] = moe.route_dispatch %[[L]] k = 2 scoring = softmax {normalize = true} : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK: return %[[W]], %[[IDS]], %[[O]], %[[R]], %[[T]]
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {normalize = true} : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %o, %r, %t : tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
}

// Static T, bf16 logits, every attribute at its default (elided).
// CHECK-LABEL: func.func @route_dispatch_static_defaults
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<4x8xbf16>)
func.func @route_dispatch_static_defaults(%l: tensor<4x8xbf16>) -> (tensor<4x2xbf16>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>) {
  // CHECK: %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]], %[[O:[a-z0-9_]+]], %[[R:[a-z0-9_]+]], %[[T:[a-z0-9_]+]] = moe.route_dispatch %[[L]] k = 2 scoring = softmax : tensor<4x8xbf16> -> tensor<4x2xbf16>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  // CHECK-NOT: {
  // CHECK: return %[[W]], %[[IDS]], %[[O]], %[[R]], %[[T]]
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {normalize = false, n_group = 1 : i64, topk_group = 1 : i64, group_score = #moe.group_score<max>, scaling = 1.0 : f32} : tensor<4x8xbf16> -> tensor<4x2xbf16>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return %w, %ids, %o, %r, %t : tensor<4x2xbf16>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
}

// DeepSeek-V3 style: sigmoid + bias + group-limited top2_sum, f32 weights.
// CHECK-LABEL: func.func @route_dispatch_bias_groups
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x256xbf16>, %[[B:[a-z0-9_]+]]: tensor<256xf32>)
func.func @route_dispatch_bias_groups(%l: tensor<?x256xbf16>, %b: tensor<256xf32>) -> (tensor<?x8xf32>, tensor<?x8xi32>, tensor<257xi32>, tensor<?xi32>, tensor<?xi32>) {
  // CHECK: %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]], %[[O:[a-z0-9_]+]], %[[R:[a-z0-9_]+]], %[[T:[a-z0-9_]+]] = moe.route_dispatch %[[L]] bias(%[[B]] : tensor<256xf32>) k = 8 scoring = sigmoid {group_score = #moe.group_score<top2_sum>, n_group = 8 : i64, normalize = true, scaling = 2.500000e+00 : f32, topk_group = 4 : i64} : tensor<?x256xbf16> -> tensor<?x8xf32>, tensor<?x8xi32>, tensor<257xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK: return %[[W]], %[[IDS]], %[[O]], %[[R]], %[[T]]
  %w, %ids, %o, %r, %t = moe.route_dispatch %l bias(%b : tensor<256xf32>) k = 8 scoring = sigmoid {normalize = true, n_group = 8 : i64, topk_group = 4 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32} : tensor<?x256xbf16> -> tensor<?x8xf32>, tensor<?x8xi32>, tensor<257xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %o, %r, %t : tensor<?x8xf32>, tensor<?x8xi32>, tensor<257xi32>, tensor<?xi32>, tensor<?xi32>
}

// Group-limited softmax with the max group score and no bias.
// CHECK-LABEL: func.func @route_dispatch_groups_no_bias
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x16xf16>)
func.func @route_dispatch_groups_no_bias(%l: tensor<?x16xf16>) -> (tensor<?x4xf16>, tensor<?x4xi32>, tensor<17xi32>, tensor<?xi32>, tensor<?xi32>) {
  // CHECK: %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]], %[[O:[a-z0-9_]+]], %[[R:[a-z0-9_]+]], %[[T:[a-z0-9_]+]] = moe.route_dispatch %[[L]] k = 4 scoring = softmax {n_group = 4 : i64, topk_group = 2 : i64} : tensor<?x16xf16> -> tensor<?x4xf16>, tensor<?x4xi32>, tensor<17xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK-NOT: group_score
  // CHECK: return %[[W]], %[[IDS]], %[[O]], %[[R]], %[[T]]
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 4 scoring = softmax {n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<max>} : tensor<?x16xf16> -> tensor<?x4xf16>, tensor<?x4xi32>, tensor<17xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %o, %r, %t : tensor<?x4xf16>, tensor<?x4xi32>, tensor<17xi32>, tensor<?xi32>, tensor<?xi32>
}
