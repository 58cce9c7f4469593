// RUN: moe-opt %s -split-input-file -verify-diagnostics

// One broken rule per chunk for the internal fused ops: every emitOpError
// site of DispatchOp::verify, ExpertGemmOp::verify, RouteDispatchOp::verify
// and ExpertGemmGluGradOp::verify, and every diagnostic of the shared helpers
// they call (static / non-zero dims, same dims, routing rules, GLU attribute
// rules, exact result types) at least once.

//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

func.func @dispatch_num_experts_zero(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected num_experts >= 1, got 0}}
  %o, %r, %t = moe.dispatch %ids num_experts = 0 : tensor<4x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @dispatch_dynamic_k(%ids: tensor<4x?xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected k (dimension 1 of 'indices') to be static}}
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<4x?xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

func.func @dispatch_zero_k(%ids: tensor<4x0xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected k (dimension 1 of 'indices') to be non-zero}}
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<4x0xi32> -> tensor<9xi32>, tensor<0xi32>, tensor<0xi32>
  return
}

// -----

func.func @dispatch_offsets_not_e_plus_one(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected result #0 to be 'tensor<9xi32>', got 'tensor<8xi32>'}}
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @dispatch_reverse_indices_not_t_times_k(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected result #1 to be 'tensor<8xi32>', got 'tensor<4xi32>'}}
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<4x2xi32> -> tensor<9xi32>, tensor<4xi32>, tensor<8xi32>
  return
}

// -----

// A static T demands a static T * k; a dynamic length is not accepted.
func.func @dispatch_token_indices_dynamic_for_static_t(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected result #2 to be 'tensor<8xi32>', got 'tensor<?xi32>'}}
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<4x2xi32> -> tensor<9xi32>, tensor<8xi32>, tensor<?xi32>
  return
}

//===----------------------------------------------------------------------===//
// moe.expert_gemm
//===----------------------------------------------------------------------===//

// -----

func.func @expert_gemm_dynamic_lhs_k(%x: tensor<?x?xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected K (dimension 1 of 'lhs') to be static}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x?xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_zero_lhs_k(%x: tensor<?x0xf32>, %w: tensor<8x0x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected K (dimension 1 of 'lhs') to be non-zero}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x0xf32>, tensor<8x0x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_dynamic_rhs_e(%x: tensor<?x64xf32>, %w: tensor<?x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected E (dimension 0 of 'rhs') to be static}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<?x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_zero_rhs_e(%x: tensor<?x64xf32>, %w: tensor<0x64x32xf32>, %off: tensor<1xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected E (dimension 0 of 'rhs') to be non-zero}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<1xi32>) : tensor<?x64xf32>, tensor<0x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_dynamic_rhs_k(%x: tensor<?x64xf32>, %w: tensor<8x?x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected K (dimension 1 of 'rhs') to be static}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x?x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_dynamic_rhs_n(%x: tensor<?x64xf32>, %w: tensor<8x64x?xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected N (dimension 2 of 'rhs') to be static}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x?xf32> -> tensor<?x?xf32>
  return
}

// -----

func.func @expert_gemm_zero_rhs_n(%x: tensor<?x64xf32>, %w: tensor<8x64x0xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected N (dimension 2 of 'rhs') to be non-zero}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x0xf32> -> tensor<?x0xf32>
  return
}

// -----

// With transpose_rhs, rhs is E x N x K: dimension 1 is N.
func.func @expert_gemm_transpose_rhs_dynamic_n(%x: tensor<?x64xf32>, %w: tensor<8x?x64xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected N (dimension 1 of 'rhs') to be static}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xf32>, tensor<8x?x64xf32> -> tensor<?x?xf32>
  return
}

// -----

// With transpose_rhs, rhs is E x N x K: dimension 2 is K.
func.func @expert_gemm_transpose_rhs_dynamic_k(%x: tensor<?x64xf32>, %w: tensor<8x32x?xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected K (dimension 2 of 'rhs') to be static}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xf32>, tensor<8x32x?xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_rhs_element_type_mismatch(%x: tensor<?x64xbf16>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'rhs' element type 'bf16' (as 'lhs'), got 'f32'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x32xf32> -> tensor<?x32xbf16>
  return
}

// -----

func.func @expert_gemm_k_mismatch(%x: tensor<?x64xf32>, %w: tensor<8x32x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected dimension 1 of 'rhs' (K) to match dimension 1 of 'lhs', got 32 vs 64}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x32x32xf32> -> tensor<?x32xf32>
  return
}

// -----

// With transpose_rhs, K is dimension 2 of rhs.
func.func @expert_gemm_transpose_rhs_k_mismatch(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected dimension 2 of 'rhs' (K) to match dimension 1 of 'lhs', got 32 vs 64}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @expert_gemm_offsets_not_e_plus_one(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<8xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'offsets' to have E + 1 = 9 elements, got 8}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<8xi32>) : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_offsets_dynamic(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<?xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'offsets' to have E + 1 = 9 elements, got ?}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<?xi32>) : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_bias_shape_mismatch(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>, %b: tensor<8x64xf32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'bias' to be 8x32 (E x N), got 'tensor<8x64xf32>'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x64xf32>) : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_bias_element_type_mismatch(%x: tensor<?x64xbf16>, %w: tensor<8x64x32xbf16>, %off: tensor<9xi32>, %b: tensor<8x32xf32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'bias' element type 'bf16' (as 'lhs'), got 'f32'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x32xf32>) : tensor<?x64xbf16>, tensor<8x64x32xbf16> -> tensor<?x32xbf16>
  return
}

// -----

func.func @expert_gemm_scatter_length_mismatch(%x: tensor<6x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'scatter' to have M = 6 elements, got 4}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) scatter(%s : tensor<4xi32>) : tensor<6x64xf32>, tensor<8x64x32xf32> -> tensor<6x32xf32>
  return
}

// -----

// With a gather, M is the gather length, not lhs's rows.
func.func @expert_gemm_scale_length_mismatch(%x: tensor<4x64xf32>, %g: tensor<8xi32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>, %sc: tensor<4xf32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'scale' to have M = 8 elements, got 4}}
  %y = moe.expert_gemm %x[%g : tensor<8xi32>], %w offsets(%off : tensor<9xi32>) scale(%sc : tensor<4xf32>) : tensor<4x64xf32>, tensor<8x64x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @expert_gemm_activation_without_layout(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'activation' and 'layout' to be set together (GLU epilogue)}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @expert_gemm_layout_without_activation(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'activation' and 'layout' to be set together (GLU epilogue)}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {layout = #moe.glu_layout<concat>} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_glu_odd_n(%x: tensor<?x64xf32>, %w: tensor<8x64x33xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected an even N for the GLU epilogue, got 33}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>} : tensor<?x64xf32>, tensor<8x64x33xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @expert_gemm_limit_without_glu(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected no 'limit' without a GLU epilogue}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {limit = 7.0 : f32} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_glu_alpha_not_finite(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected a finite alpha, got INF}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, alpha = 0x7F800000 : f32} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @expert_gemm_glu_up_bias_not_finite(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected a finite up_bias, got nan}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, up_bias = 0x7FC00000 : f32} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @expert_gemm_glu_limit_not_positive(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected limit to be finite and > 0, got 0}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, limit = 0.0 : f32} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @expert_gemm_glu_limit_not_finite(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected limit to be finite and > 0, got INF}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, limit = 0x7F800000 : f32} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x16xf32>
  return
}

// -----

// Without a GLU epilogue alpha and up_bias are still checked.
func.func @expert_gemm_alpha_not_finite_without_glu(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected a finite alpha, got -INF}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {alpha = 0xFF800000 : f32} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @expert_gemm_result_element_type(%x: tensor<?x64xbf16>, %w: tensor<8x64x32xbf16>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected result element type 'bf16' or f32, got 'f16'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x32xbf16> -> tensor<?x32xf16>
  return
}

// -----

func.func @expert_gemm_result_shape_n(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected the result to be ?x32 (M x N'), got 'tensor<?x16xf32>'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x16xf32>
  return
}

// -----

// The GLU epilogue halves N.
func.func @expert_gemm_result_shape_glu_not_halved(%x: tensor<?x64xf32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected the result to be ?x16 (M x N'), got 'tensor<?x32xf32>'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>} : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

// -----

// M comes from the gather, and must match exactly (no dynamic for static).
func.func @expert_gemm_result_shape_m(%x: tensor<?x64xf32>, %g: tensor<8xi32>, %w: tensor<8x64x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected the result to be 8x32 (M x N'), got 'tensor<?x32xf32>'}}
  %y = moe.expert_gemm %x[%g : tensor<8xi32>], %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x32xf32> -> tensor<?x32xf32>
  return
}

//===----------------------------------------------------------------------===//
// moe.route_dispatch
//===----------------------------------------------------------------------===//

// -----

func.func @route_dispatch_dynamic_e(%l: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected E (dimension 1 of 'logits') to be static}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax : tensor<4x?xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<?xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_zero_e(%l: tensor<4x0xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected E (dimension 1 of 'logits') to be non-zero}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax : tensor<4x0xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<1xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_n_group_zero(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected n_group >= 1, got 0}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {n_group = 0 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_e_not_divisible_by_n_group(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected E = 8 to be divisible by n_group = 3}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {n_group = 3 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_topk_group_zero(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected topk_group in [1, n_group = 4], got 0}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {n_group = 4 : i64, topk_group = 0 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_topk_group_above_n_group(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected topk_group in [1, n_group = 4], got 5}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {n_group = 4 : i64, topk_group = 5 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_top2_sum_one_expert_per_group(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected at least two experts per group for top2_sum, got 1}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = sigmoid {n_group = 8 : i64, topk_group = 4 : i64, group_score = #moe.group_score<top2_sum>} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_k_zero(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected k in [1, topk_group * E / n_group = 8], got 0}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 0 scoring = softmax : tensor<4x8xf32> -> tensor<4x0xf32>, tensor<4x0xi32>, tensor<9xi32>, tensor<0xi32>, tensor<0xi32>
  return
}

// -----

// Only topk_group * E / n_group = 2 * 8 / 4 = 4 experts are selectable.
func.func @route_dispatch_k_above_selectable(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected k in [1, topk_group * E / n_group = 4], got 5}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 5 scoring = softmax {n_group = 4 : i64, topk_group = 2 : i64} : tensor<4x8xf32> -> tensor<4x5xf32>, tensor<4x5xi32>, tensor<9xi32>, tensor<20xi32>, tensor<20xi32>
  return
}

// -----

func.func @route_dispatch_scaling_not_finite(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected a finite scaling, got nan}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {scaling = 0x7FC00000 : f32} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_bias_length_mismatch(%l: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected 'bias' to have E = 8 elements, got 4}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l bias(%b : tensor<4xf32>) k = 2 scoring = sigmoid : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_bias_dynamic(%l: tensor<4x8xf32>, %b: tensor<?xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected 'bias' to have E = 8 elements, got ?}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l bias(%b : tensor<?xf32>) k = 2 scoring = sigmoid : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_weights_shape(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected result #0 to have shape 4x2, got 'tensor<4x3xf32>'}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_indices_shape(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected result #1 to have shape ?x2, got 'tensor<4x2xi32>'}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

func.func @route_dispatch_offsets_shape(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected result #2 to have shape 9, got 'tensor<8xi32>'}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<8xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_reverse_indices_shape(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected result #3 to have shape 8, got 'tensor<?xi32>'}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<8xi32>
  return
}

// -----

func.func @route_dispatch_token_indices_shape(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.route_dispatch' op expected result #4 to have shape ?, got 'tensor<8xi32>'}}
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<8xi32>
  return
}

// -----

func.func @dispatch_num_experts_negative(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected num_experts >= 1, got -3}}
  %off, %rev, %tok = moe.dispatch %ids num_experts = -3 : tensor<4x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @dispatch_num_experts_too_large(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op expected num_experts = 4294967296 to fit i32 (< 2^31)}}
  %off, %rev, %tok = moe.dispatch %ids num_experts = 4294967296 : tensor<4x2xi32> -> tensor<4294967297xi32>, tensor<8xi32>, tensor<8xi32>
  return
}

//===----------------------------------------------------------------------===//
// moe.expert_gemm_glu_grad
//===----------------------------------------------------------------------===//

// -----

func.func @glu_grad_gemm_k(%dy: tensor<?x32xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<?x16xbf16>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected dimension 2 of 'rhs' (K) to match dimension 1 of 'lhs', got 8 vs 32}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<?x16xbf16>) weights(%w : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x32xbf16>, tensor<4x16x8xbf16> -> tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<?xf32>
  return
}

// -----

func.func @glu_grad_gemm_preact_type(%dy: tensor<?x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<?x32xf32>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected 'preact' element type 'bf16' (as 'lhs'), got 'f32'}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<?x32xf32>) weights(%w : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x8xbf16>, tensor<4x16x8xbf16> -> tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?xf32>
  return
}

// -----

func.func @glu_grad_gemm_preact_rows(%dy: tensor<?x8xbf16>, %tok: tensor<6xi32>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<5x32xbf16>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected dimension 0 of 'preact' (M) to match dimension 0 of 'gather', got 5 vs 6}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy[%tok : tensor<6xi32>], %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<5x32xbf16>) weights(%w : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x8xbf16>, tensor<4x16x8xbf16> -> tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?xf32>
  return
}

// -----

func.func @glu_grad_gemm_weights_rows(%dy: tensor<6x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<6x32xbf16>, %w: tensor<7xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected dimension 0 of 'weights' (M) to match dimension 0 of 'lhs', got 7 vs 6}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<6x32xbf16>) weights(%w : tensor<7xf32>) silu concat {transpose_rhs = true} : tensor<6x8xbf16>, tensor<4x16x8xbf16> -> tensor<6x32xbf16>, tensor<6x16xbf16>, tensor<6xf32>
  return
}

// -----

func.func @glu_grad_gemm_acc_rows(%dy: tensor<6x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<6x32xbf16>, %w: tensor<6xf32>, %acc: tensor<5xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected dimension 0 of 'acc' (M) to match dimension 0 of 'lhs', got 5 vs 6}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<6x32xbf16>) weights(%w : tensor<6xf32>) accumulate(%acc : tensor<5xf32>) silu concat {transpose_rhs = true} : tensor<6x8xbf16>, tensor<4x16x8xbf16> -> tensor<6x32xbf16>, tensor<6x16xbf16>, tensor<6xf32>
  return
}

// -----

func.func @glu_grad_gemm_preact_cols(%dy: tensor<?x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<?x30xbf16>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected 'preact' to have 2N' = 32 columns (the GLU input of the GEMM's 16 columns), got 30}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<?x30xbf16>) weights(%w : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x8xbf16>, tensor<4x16x8xbf16> -> tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?xf32>
  return
}

// -----

func.func @glu_grad_gemm_limit(%dy: tensor<?x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<?x32xbf16>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected limit to be finite and > 0, got -1}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<?x32xbf16>) weights(%w : tensor<?xf32>) silu concat {limit = -1.0 : f32, transpose_rhs = true} : tensor<?x8xbf16>, tensor<4x16x8xbf16> -> tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?xf32>
  return
}

// -----

func.func @glu_grad_gemm_input_grad_type(%dy: tensor<?x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<?x32xbf16>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected 'input_grad' of element type 'bf16', got 'f32'}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<?x32xbf16>) weights(%w : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x8xbf16>, tensor<4x16x8xbf16> -> tensor<?x32xf32>, tensor<?x16xbf16>, tensor<?xf32>
  return
}

// -----

func.func @glu_grad_gemm_scaled_act_shape(%dy: tensor<?x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<?x32xbf16>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected 'scaled_act' to be ?x16, got 'tensor<?x32xbf16>'}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<?x32xbf16>) weights(%w : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x8xbf16>, tensor<4x16x8xbf16> -> tensor<?x32xbf16>, tensor<?x32xbf16>, tensor<?xf32>
  return
}

// -----

func.func @glu_grad_gemm_weight_grad_type(%dy: tensor<?x8xbf16>, %w2: tensor<4x16x8xbf16>, %off: tensor<5xi32>, %h: tensor<?x32xbf16>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'moe.expert_gemm_glu_grad' op expected 'weight_grad' of element type 'bf16' or f32, got 'f16'}}
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy, %w2 offsets(%off : tensor<5xi32>) preact(%h : tensor<?x32xbf16>) weights(%w : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x8xbf16>, tensor<4x16x8xbf16> -> tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<?xf16>
  return
}
