// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
// RUN: moe-opt %s --verify-roundtrip | FileCheck %s

// Round-trips every public moe op in its custom form, with every enum value,
// optional operands present and absent, every flag, f32/f16/bf16, and static,
// dynamic and zero T / M. Attributes equal to their default are elided by the
// printer; the CHECK-NOT lines pin that down.

//===----------------------------------------------------------------------===//
// moe.topk
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @topk_static_f32
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>)
func.func @topk_static_f32(%x: tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>) {
  // CHECK: %[[V:[a-z0-9_]+]], %[[I:[a-z0-9_]+]] = moe.topk %[[X]] k = 2 : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  // CHECK: return %[[V]], %[[I]]
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return %v, %i : tensor<4x2xf32>, tensor<4x2xi32>
}

// k = E, dynamic T.
// CHECK-LABEL: func.func @topk_dynamic_f16_k_equals_e
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x8xf16>)
func.func @topk_dynamic_f16_k_equals_e(%x: tensor<?x8xf16>) -> (tensor<?x8xf16>, tensor<?x8xi32>) {
  // CHECK: moe.topk %[[X]] k = 8 : tensor<?x8xf16> -> tensor<?x8xf16>, tensor<?x8xi32>
  %v, %i = moe.topk %x k = 8 : tensor<?x8xf16> -> tensor<?x8xf16>, tensor<?x8xi32>
  return %v, %i : tensor<?x8xf16>, tensor<?x8xi32>
}

// CHECK-LABEL: func.func @topk_zero_tokens_bf16
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<0x8xbf16>)
func.func @topk_zero_tokens_bf16(%x: tensor<0x8xbf16>) -> (tensor<0x1xbf16>, tensor<0x1xi32>) {
  // CHECK: moe.topk %[[X]] k = 1 : tensor<0x8xbf16> -> tensor<0x1xbf16>, tensor<0x1xi32>
  %v, %i = moe.topk %x k = 1 : tensor<0x8xbf16> -> tensor<0x1xbf16>, tensor<0x1xi32>
  return %v, %i : tensor<0x1xbf16>, tensor<0x1xi32>
}

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

// Only the required attributes; every default is elided on print.
// CHECK-LABEL: func.func @route_softmax_defaults
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x8xf32>)
func.func @route_softmax_defaults(%l: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // CHECK: %[[W:[a-z0-9_]+]], %[[I:[a-z0-9_]+]] = moe.route %[[L]] k = 2 scoring = softmax : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  // CHECK: return %[[W]], %[[I]]
  %w, %i = moe.route %l k = 2 scoring = softmax : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// Every default written out explicitly: all of them are elided on print.
// CHECK-LABEL: func.func @route_explicit_defaults
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<4x8xf32>)
func.func @route_explicit_defaults(%l: tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>) {
  // CHECK: moe.route %[[L]] k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  // CHECK-NOT: normalize
  // CHECK-NOT: group_score
  %w, %i = moe.route %l k = 2 scoring = softmax
      {normalize = false, n_group = 1 : i64, topk_group = 1 : i64,
       group_score = #moe.group_score<max>, scaling = 1.0 : f32}
      : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return %w, %i : tensor<4x2xf32>, tensor<4x2xi32>
}

// Mixtral: softmax + normalize, f16 logits, f32 weights.
// CHECK-LABEL: func.func @route_softmax_normalize_f16_logits_f32_weights
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x8xf16>)
func.func @route_softmax_normalize_f16_logits_f32_weights(%l: tensor<?x8xf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // CHECK: moe.route %[[L]] k = 2 scoring = softmax {normalize = true} : tensor<?x8xf16> -> tensor<?x2xf32>, tensor<?x2xi32>
  %w, %i = moe.route %l k = 2 scoring = softmax {normalize = true}
      : tensor<?x8xf16> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// DeepSeek-V3 "noaux_tc": sigmoid + bias + top2_sum group limiting + scaling.
// CHECK-LABEL: func.func @route_sigmoid_bias_top2_sum
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x16xbf16>, %[[B:[a-z0-9_]+]]: tensor<16xf32>)
func.func @route_sigmoid_bias_top2_sum(%l: tensor<?x16xbf16>, %b: tensor<16xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>) {
  // CHECK: %[[W:[a-z0-9_]+]], %[[I:[a-z0-9_]+]] = moe.route %[[L]] bias(%[[B]] : tensor<16xf32>) k = 4 scoring = sigmoid
  // CHECK-SAME: group_score = #moe.group_score<top2_sum>
  // CHECK-SAME: n_group = 4 : i64
  // CHECK-SAME: normalize = true
  // CHECK-SAME: scaling = 2.500000e+00 : f32
  // CHECK-SAME: topk_group = 2 : i64
  // CHECK-SAME: : tensor<?x16xbf16> -> tensor<?x4xf32>, tensor<?x4xi32>
  // CHECK: return %[[W]], %[[I]]
  %w, %i = moe.route %l bias(%b : tensor<16xf32>) k = 4 scoring = sigmoid
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64,
       group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32}
      : tensor<?x16xbf16> -> tensor<?x4xf32>, tensor<?x4xi32>
  return %w, %i : tensor<?x4xf32>, tensor<?x4xi32>
}

// group_limited_greedy: softmax + max group score (the default, elided).
// CHECK-LABEL: func.func @route_softmax_group_max
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<4x8xf32>)
func.func @route_softmax_group_max(%l: tensor<4x8xf32>) -> (tensor<4x3xbf16>, tensor<4x3xi32>) {
  // CHECK: moe.route %[[L]] k = 3 scoring = softmax
  // CHECK-NOT: group_score
  // CHECK-SAME: {n_group = 4 : i64, topk_group = 2 : i64}
  // CHECK-SAME: : tensor<4x8xf32> -> tensor<4x3xbf16>, tensor<4x3xi32>
  %w, %i = moe.route %l k = 3 scoring = softmax
      {n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<max>}
      : tensor<4x8xf32> -> tensor<4x3xbf16>, tensor<4x3xi32>
  return %w, %i : tensor<4x3xbf16>, tensor<4x3xi32>
}

// Sigmoid with bias and no groups, zero tokens, f16 weights.
// CHECK-LABEL: func.func @route_sigmoid_bias_zero_tokens
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<0x8xf16>, %[[B:[a-z0-9_]+]]: tensor<8xf32>)
func.func @route_sigmoid_bias_zero_tokens(%l: tensor<0x8xf16>, %b: tensor<8xf32>) -> (tensor<0x8xf16>, tensor<0x8xi32>) {
  // CHECK: moe.route %[[L]] bias(%[[B]] : tensor<8xf32>) k = 8 scoring = sigmoid : tensor<0x8xf16> -> tensor<0x8xf16>, tensor<0x8xi32>
  %w, %i = moe.route %l bias(%b : tensor<8xf32>) k = 8 scoring = sigmoid
      : tensor<0x8xf16> -> tensor<0x8xf16>, tensor<0x8xi32>
  return %w, %i : tensor<0x8xf16>, tensor<0x8xi32>
}

//===----------------------------------------------------------------------===//
// moe.cumsum
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @cumsum_static
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<4x2xi32>)
func.func @cumsum_static(%ids: tensor<4x2xi32>) -> tensor<24xi32> {
  // CHECK: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 6 : tensor<4x2xi32> -> tensor<24xi32>
  // CHECK: return %[[CS]]
  %cs = moe.cumsum %ids num_experts = 6 : tensor<4x2xi32> -> tensor<24xi32>
  return %cs : tensor<24xi32>
}

// CHECK-LABEL: func.func @cumsum_dynamic
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<?x2xi32>)
func.func @cumsum_dynamic(%ids: tensor<?x2xi32>) -> tensor<?xi32> {
  // CHECK: moe.cumsum %[[IDS]] num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
  %cs = moe.cumsum %ids num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
  return %cs : tensor<?xi32>
}

// CHECK-LABEL: func.func @cumsum_zero_tokens
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<0x2xi32>)
func.func @cumsum_zero_tokens(%ids: tensor<0x2xi32>) -> tensor<0xi32> {
  // CHECK: moe.cumsum %[[IDS]] num_experts = 8 : tensor<0x2xi32> -> tensor<0xi32>
  %cs = moe.cumsum %ids num_experts = 8 : tensor<0x2xi32> -> tensor<0xi32>
  return %cs : tensor<0xi32>
}

//===----------------------------------------------------------------------===//
// moe.get_indices
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @get_indices_static
// CHECK-SAME: (%[[CS:[a-z0-9_]+]]: tensor<24xi32>, %[[IDS:[a-z0-9_]+]]: tensor<4x2xi32>)
func.func @get_indices_static(%cs: tensor<24xi32>, %ids: tensor<4x2xi32>) -> (tensor<8xi32>, tensor<8xi32>) {
  // CHECK: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]] : tensor<24xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
  // CHECK: return %[[REV]], %[[TOK]]
  %rev, %tok = moe.get_indices %cs, %ids : tensor<24xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
  return %rev, %tok : tensor<8xi32>, tensor<8xi32>
}

// CHECK-LABEL: func.func @get_indices_dynamic
// CHECK-SAME: (%[[CS:[a-z0-9_]+]]: tensor<?xi32>, %[[IDS:[a-z0-9_]+]]: tensor<?x4xi32>)
func.func @get_indices_dynamic(%cs: tensor<?xi32>, %ids: tensor<?x4xi32>) -> (tensor<?xi32>, tensor<?xi32>) {
  // CHECK: moe.get_indices %[[CS]], %[[IDS]] : tensor<?xi32>, tensor<?x4xi32> -> tensor<?xi32>, tensor<?xi32>
  %rev, %tok = moe.get_indices %cs, %ids : tensor<?xi32>, tensor<?x4xi32> -> tensor<?xi32>, tensor<?xi32>
  return %rev, %tok : tensor<?xi32>, tensor<?xi32>
}

// Static T with a dynamic cumsum length (E is only known through the
// producer) and T = 0.
// CHECK-LABEL: func.func @get_indices_mixed_and_zero
func.func @get_indices_mixed_and_zero(%cs: tensor<?xi32>, %ids: tensor<3x2xi32>,
                                      %cs0: tensor<0xi32>, %ids0: tensor<0x2xi32>)
    -> (tensor<6xi32>, tensor<6xi32>, tensor<0xi32>, tensor<0xi32>) {
  // CHECK: moe.get_indices %{{.*}}, %{{.*}} : tensor<?xi32>, tensor<3x2xi32> -> tensor<6xi32>, tensor<6xi32>
  // CHECK: moe.get_indices %{{.*}}, %{{.*}} : tensor<0xi32>, tensor<0x2xi32> -> tensor<0xi32>, tensor<0xi32>
  %rev, %tok = moe.get_indices %cs, %ids : tensor<?xi32>, tensor<3x2xi32> -> tensor<6xi32>, tensor<6xi32>
  %rev0, %tok0 = moe.get_indices %cs0, %ids0 : tensor<0xi32>, tensor<0x2xi32> -> tensor<0xi32>, tensor<0xi32>
  return %rev, %tok, %rev0, %tok0 : tensor<6xi32>, tensor<6xi32>, tensor<0xi32>, tensor<0xi32>
}

//===----------------------------------------------------------------------===//
// moe.get_indptr
//===----------------------------------------------------------------------===//

// Exclusive (the default, elided) with i32 and with i64.
// CHECK-LABEL: func.func @get_indptr_exclusive
// CHECK-SAME: (%[[CS:[a-z0-9_]+]]: tensor<?xi32>)
func.func @get_indptr_exclusive(%cs: tensor<?xi32>) -> (tensor<9xi32>, tensor<9xi64>) {
  // CHECK: %[[A:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
  // CHECK: %[[B:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi64>
  // CHECK-NOT: inclusive
  // CHECK: return %[[A]], %[[B]]
  %a = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
  %b = moe.get_indptr %cs num_experts = 8 {inclusive = false} : tensor<?xi32> -> tensor<9xi64>
  return %a, %b : tensor<9xi32>, tensor<9xi64>
}

// Inclusive with i32 and with i64, static cumsum.
// CHECK-LABEL: func.func @get_indptr_inclusive
// CHECK-SAME: (%[[CS:[a-z0-9_]+]]: tensor<32xi32>)
func.func @get_indptr_inclusive(%cs: tensor<32xi32>) -> (tensor<8xi32>, tensor<8xi64>) {
  // CHECK: moe.get_indptr %[[CS]] num_experts = 8 {inclusive = true} : tensor<32xi32> -> tensor<8xi32>
  // CHECK: moe.get_indptr %[[CS]] num_experts = 8 {inclusive = true} : tensor<32xi32> -> tensor<8xi64>
  %a = moe.get_indptr %cs num_experts = 8 {inclusive = true} : tensor<32xi32> -> tensor<8xi32>
  %b = moe.get_indptr %cs num_experts = 8 {inclusive = true} : tensor<32xi32> -> tensor<8xi64>
  return %a, %b : tensor<8xi32>, tensor<8xi64>
}

// CHECK-LABEL: func.func @get_indptr_zero_tokens
func.func @get_indptr_zero_tokens(%cs: tensor<0xi32>) -> tensor<5xi32> {
  // CHECK: moe.get_indptr %{{.*}} num_experts = 4 : tensor<0xi32> -> tensor<5xi32>
  %a = moe.get_indptr %cs num_experts = 4 : tensor<0xi32> -> tensor<5xi32>
  return %a : tensor<5xi32>
}

//===----------------------------------------------------------------------===//
// moe.gather and moe.scatter
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @gather_static_f32
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x16xf32>, %[[T:[a-z0-9_]+]]: tensor<8xi32>)
func.func @gather_static_f32(%x: tensor<4x16xf32>, %t: tensor<8xi32>) -> tensor<8x16xf32> {
  // CHECK: %[[R:[a-z0-9_]+]] = moe.gather %[[X]][%[[T]]] : tensor<4x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
  // CHECK: return %[[R]]
  %r = moe.gather %x[%t] : tensor<4x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @gather_dynamic_bf16
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[T:[a-z0-9_]+]]: tensor<?xi32>)
func.func @gather_dynamic_bf16(%x: tensor<?x64xbf16>, %t: tensor<?xi32>) -> tensor<?x64xbf16> {
  // CHECK: moe.gather %[[X]][%[[T]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
  %r = moe.gather %x[%t] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
  return %r : tensor<?x64xbf16>
}

// Dynamic T, static M; and T = M = 0.
// CHECK-LABEL: func.func @gather_mixed_f16
func.func @gather_mixed_f16(%x: tensor<?x8xf16>, %t: tensor<6xi32>, %x0: tensor<0x8xf16>, %t0: tensor<0xi32>)
    -> (tensor<6x8xf16>, tensor<0x8xf16>) {
  // CHECK: moe.gather %{{.*}}[%{{.*}}] : tensor<?x8xf16>, tensor<6xi32> -> tensor<6x8xf16>
  // CHECK: moe.gather %{{.*}}[%{{.*}}] : tensor<0x8xf16>, tensor<0xi32> -> tensor<0x8xf16>
  %r = moe.gather %x[%t] : tensor<?x8xf16>, tensor<6xi32> -> tensor<6x8xf16>
  %r0 = moe.gather %x0[%t0] : tensor<0x8xf16>, tensor<0xi32> -> tensor<0x8xf16>
  return %r, %r0 : tensor<6x8xf16>, tensor<0x8xf16>
}

// CHECK-LABEL: func.func @scatter_static_f16
// CHECK-SAME: (%[[Y:[a-z0-9_]+]]: tensor<8x16xf16>, %[[R:[a-z0-9_]+]]: tensor<8xi32>)
func.func @scatter_static_f16(%y: tensor<8x16xf16>, %rev: tensor<8xi32>) -> tensor<8x16xf16> {
  // CHECK: %[[S:[a-z0-9_]+]] = moe.scatter %[[Y]][%[[R]]] : tensor<8x16xf16>, tensor<8xi32> -> tensor<8x16xf16>
  // CHECK: return %[[S]]
  %s = moe.scatter %y[%rev] : tensor<8x16xf16>, tensor<8xi32> -> tensor<8x16xf16>
  return %s : tensor<8x16xf16>
}

// Dynamic M on one side only is compatible; the result follows the input.
// CHECK-LABEL: func.func @scatter_dynamic
func.func @scatter_dynamic(%y: tensor<?x64xbf16>, %rev: tensor<?xi32>, %y2: tensor<?x32xf32>, %rev2: tensor<8xi32>)
    -> (tensor<?x64xbf16>, tensor<?x32xf32>) {
  // CHECK: moe.scatter %{{.*}}[%{{.*}}] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
  // CHECK: moe.scatter %{{.*}}[%{{.*}}] : tensor<?x32xf32>, tensor<8xi32> -> tensor<?x32xf32>
  %s = moe.scatter %y[%rev] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
  %s2 = moe.scatter %y2[%rev2] : tensor<?x32xf32>, tensor<8xi32> -> tensor<?x32xf32>
  return %s, %s2 : tensor<?x64xbf16>, tensor<?x32xf32>
}

// CHECK-LABEL: func.func @scatter_zero_rows
func.func @scatter_zero_rows(%y: tensor<0x16xf32>, %rev: tensor<0xi32>) -> tensor<0x16xf32> {
  // CHECK: moe.scatter %{{.*}}[%{{.*}}] : tensor<0x16xf32>, tensor<0xi32> -> tensor<0x16xf32>
  %s = moe.scatter %y[%rev] : tensor<0x16xf32>, tensor<0xi32> -> tensor<0x16xf32>
  return %s : tensor<0x16xf32>
}

//===----------------------------------------------------------------------===//
// moe.grouped_matmul
//===----------------------------------------------------------------------===//

// No bias, f32 accumulation result from bf16 operands, dynamic M.
// CHECK-LABEL: func.func @grouped_matmul_no_bias
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[O:[a-z0-9_]+]]: tensor<9xi32>)
func.func @grouped_matmul_no_bias(%a: tensor<?x64xbf16>, %w: tensor<8x64x256xbf16>, %off: tensor<9xi32>) -> tensor<?x256xf32> {
  // CHECK: %[[R:[a-z0-9_]+]] = moe.grouped_matmul %[[A]], %[[W]] offsets(%[[O]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xf32>
  // CHECK-NOT: bias
  // CHECK-NOT: transpose_rhs
  // CHECK: return %[[R]]
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>)
      : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xf32>
  return %r : tensor<?x256xf32>
}

// Bias present, O = F (f16), static M, explicit transpose_rhs = false
// (elided on print).
// CHECK-LABEL: func.func @grouped_matmul_bias
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<16x32xf16>, %[[W:[a-z0-9_]+]]: tensor<4x32x48xf16>, %[[O:[a-z0-9_]+]]: tensor<5xi32>, %[[B:[a-z0-9_]+]]: tensor<4x48xf16>)
func.func @grouped_matmul_bias(%a: tensor<16x32xf16>, %w: tensor<4x32x48xf16>, %off: tensor<5xi32>, %b: tensor<4x48xf16>) -> tensor<16x48xf16> {
  // CHECK: moe.grouped_matmul %[[A]], %[[W]] offsets(%[[O]] : tensor<5xi32>) bias(%[[B]] : tensor<4x48xf16>) : tensor<16x32xf16>, tensor<4x32x48xf16> -> tensor<16x48xf16>
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<4x48xf16>) {transpose_rhs = false}
      : tensor<16x32xf16>, tensor<4x32x48xf16> -> tensor<16x48xf16>
  return %r : tensor<16x48xf16>
}

// The x @ w^T "linear" layout: rhs is E x N x K.
// CHECK-LABEL: func.func @grouped_matmul_transpose_rhs
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<?x64xf32>, %[[W:[a-z0-9_]+]]: tensor<8x256x64xf32>, %[[O:[a-z0-9_]+]]: tensor<9xi32>)
func.func @grouped_matmul_transpose_rhs(%a: tensor<?x64xf32>, %w: tensor<8x256x64xf32>, %off: tensor<9xi32>) -> tensor<?x256xf32> {
  // CHECK: moe.grouped_matmul %[[A]], %[[W]] offsets(%[[O]] : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xf32>, tensor<8x256x64xf32> -> tensor<?x256xf32>
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true}
      : tensor<?x64xf32>, tensor<8x256x64xf32> -> tensor<?x256xf32>
  return %r : tensor<?x256xf32>
}

// Transposed with bias, bf16 in and out, M = 0.
// CHECK-LABEL: func.func @grouped_matmul_transpose_rhs_bias_zero_rows
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<0x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<8x32x64xbf16>, %[[O:[a-z0-9_]+]]: tensor<9xi32>, %[[B:[a-z0-9_]+]]: tensor<8x32xbf16>)
func.func @grouped_matmul_transpose_rhs_bias_zero_rows(%a: tensor<0x64xbf16>, %w: tensor<8x32x64xbf16>, %off: tensor<9xi32>, %b: tensor<8x32xbf16>) -> tensor<0x32xbf16> {
  // CHECK: moe.grouped_matmul %[[A]], %[[W]] offsets(%[[O]] : tensor<9xi32>) bias(%[[B]] : tensor<8x32xbf16>) {transpose_rhs = true} : tensor<0x64xbf16>, tensor<8x32x64xbf16> -> tensor<0x32xbf16>
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>) bias(%b : tensor<8x32xbf16>) {transpose_rhs = true}
      : tensor<0x64xbf16>, tensor<8x32x64xbf16> -> tensor<0x32xbf16>
  return %r : tensor<0x32xbf16>
}

//===----------------------------------------------------------------------===//
// moe.glu
//===----------------------------------------------------------------------===//

// silu + concat with every default: nothing but the keywords is printed.
// CHECK-LABEL: func.func @glu_silu_concat
// CHECK-SAME: (%[[H:[a-z0-9_]+]]: tensor<?x256xbf16>)
func.func @glu_silu_concat(%h: tensor<?x256xbf16>) -> tensor<?x128xbf16> {
  // CHECK: %[[R:[a-z0-9_]+]] = moe.glu %[[H]] silu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
  // CHECK: return %[[R]]
  %r = moe.glu %h silu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
  return %r : tensor<?x128xbf16>
}

// moe.glu_grad: the gradient and the glu's input, the glu's attributes.
// CHECK-LABEL: func.func @glu_grad
// CHECK-SAME: (%[[D:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[H:[a-z0-9_]+]]: tensor<?x256xbf16>)
func.func @glu_grad(%d: tensor<?x128xbf16>, %h: tensor<?x256xbf16>) -> tensor<?x256xbf16> {
  // CHECK: moe.glu_grad %[[D]], %[[H]] silu interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32} : tensor<?x128xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>
  %r = moe.glu_grad %d, %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32}
      : tensor<?x128xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>
  return %r : tensor<?x256xbf16>
}

// moe.grouped_matmul_wgrad: the ragged-contracting mode, with and without
// the f32 accumulate-into operand.
// CHECK-LABEL: func.func @grouped_matmul_wgrad
// CHECK-SAME: (%[[D:[a-z0-9_]+]]: tensor<?x96xbf16>, %[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[O:[a-z0-9_]+]]: tensor<9xi32>, %[[A:[a-z0-9_]+]]: tensor<8x96x64xf32>)
func.func @grouped_matmul_wgrad(%dy: tensor<?x96xbf16>, %x: tensor<?x64xbf16>, %off: tensor<9xi32>, %acc: tensor<8x96x64xf32>) -> (tensor<8x96x64xbf16>, tensor<8x96x64xf32>) {
  // CHECK: moe.grouped_matmul_wgrad %[[D]], %[[X]] offsets(%[[O]] : tensor<9xi32>) : tensor<?x96xbf16>, tensor<?x64xbf16> -> tensor<8x96x64xbf16>
  %a = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<9xi32>)
      : tensor<?x96xbf16>, tensor<?x64xbf16> -> tensor<8x96x64xbf16>
  // CHECK: moe.grouped_matmul_wgrad %[[D]], %[[X]] offsets(%[[O]] : tensor<9xi32>) accumulate(%[[A]] : tensor<8x96x64xf32>) : tensor<?x96xbf16>, tensor<?x64xbf16> -> tensor<8x96x64xf32>
  %b = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<9xi32>) accumulate(%acc : tensor<8x96x64xf32>)
      : tensor<?x96xbf16>, tensor<?x64xbf16> -> tensor<8x96x64xf32>
  return %a, %b : tensor<8x96x64xbf16>, tensor<8x96x64xf32>
}

// moe.grouped_matmul_wgrad with gathered operands (either or both).
// CHECK-LABEL: func.func @grouped_matmul_wgrad_gathered
// CHECK-SAME: (%[[D:[a-z0-9_]+]]: tensor<?x96xbf16>, %[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[T:[a-z0-9_]+]]: tensor<?xi32>, %[[O:[a-z0-9_]+]]: tensor<9xi32>)
func.func @grouped_matmul_wgrad_gathered(%dy: tensor<?x96xbf16>, %x: tensor<?x64xbf16>, %tok: tensor<?xi32>, %off: tensor<9xi32>) -> (tensor<8x96x64xf32>, tensor<8x64x96xf32>) {
  // CHECK: moe.grouped_matmul_wgrad %[[D]], %[[X]][%[[T]] : tensor<?xi32>] offsets(%[[O]] : tensor<9xi32>) : tensor<?x96xbf16>, tensor<?x64xbf16> -> tensor<8x96x64xf32>
  %a = moe.grouped_matmul_wgrad %dy, %x[%tok : tensor<?xi32>] offsets(%off : tensor<9xi32>)
      : tensor<?x96xbf16>, tensor<?x64xbf16> -> tensor<8x96x64xf32>
  // CHECK: moe.grouped_matmul_wgrad %[[X]][%[[T]] : tensor<?xi32>], %[[D]][%[[T]] : tensor<?xi32>] offsets(%[[O]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<?x96xbf16> -> tensor<8x64x96xf32>
  %b = moe.grouped_matmul_wgrad %x[%tok : tensor<?xi32>], %dy[%tok : tensor<?xi32>] offsets(%off : tensor<9xi32>)
      : tensor<?x64xbf16>, tensor<?x96xbf16> -> tensor<8x64x96xf32>
  return %a, %b : tensor<8x96x64xf32>, tensor<8x64x96xf32>
}

// moe.combine_grad: with and without the forward's weights.
// CHECK-LABEL: func.func @combine_grad
// CHECK-SAME: (%[[G:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<?x4xf32>)
func.func @combine_grad(%g: tensor<?x64xbf16>, %w: tensor<?x4xf32>) -> (tensor<?x4x64xbf16>, tensor<?x2x64xbf16>) {
  // CHECK: moe.combine_grad %[[G]] weights(%[[W]] : tensor<?x4xf32>) : tensor<?x64xbf16> -> tensor<?x4x64xbf16>
  %a = moe.combine_grad %g weights(%w : tensor<?x4xf32>) : tensor<?x64xbf16> -> tensor<?x4x64xbf16>
  // CHECK: moe.combine_grad %[[G]] : tensor<?x64xbf16> -> tensor<?x2x64xbf16>
  %b = moe.combine_grad %g : tensor<?x64xbf16> -> tensor<?x2x64xbf16>
  return %a, %b : tensor<?x4x64xbf16>, tensor<?x2x64xbf16>
}

// moe.route_grad: the forward's scoring, normalize and scaling only.
// CHECK-LABEL: func.func @route_grad
// CHECK-SAME: (%[[G:[a-z0-9_]+]]: tensor<?x8xf32>, %[[L:[a-z0-9_]+]]: tensor<?x256xbf16>, %[[I:[a-z0-9_]+]]: tensor<?x8xi32>)
func.func @route_grad(%g: tensor<?x8xf32>, %l: tensor<?x256xbf16>, %i: tensor<?x8xi32>) -> (tensor<?x256xf32>, tensor<?x256xbf16>) {
  // CHECK: moe.route_grad %[[G]], %[[L]], %[[I]] scoring = sigmoid {normalize = true, scaling = 2.500000e+00 : f32} : tensor<?x8xf32>, tensor<?x256xbf16>, tensor<?x8xi32> -> tensor<?x256xf32>
  %a = moe.route_grad %g, %l, %i scoring = sigmoid {normalize = true, scaling = 2.5 : f32}
      : tensor<?x8xf32>, tensor<?x256xbf16>, tensor<?x8xi32> -> tensor<?x256xf32>
  // CHECK: moe.route_grad %[[G]], %[[L]], %[[I]] scoring = softmax : tensor<?x8xf32>, tensor<?x256xbf16>, tensor<?x8xi32> -> tensor<?x256xbf16>
  %b = moe.route_grad %g, %l, %i scoring = softmax {normalize = false, scaling = 1.0 : f32}
      : tensor<?x8xf32>, tensor<?x256xbf16>, tensor<?x8xi32> -> tensor<?x256xbf16>
  return %a, %b : tensor<?x256xf32>, tensor<?x256xbf16>
}

// moe.row_dot: with and without the f32 accumulate-into operand.
// CHECK-LABEL: func.func @row_dot
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[B:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[C:[a-z0-9_]+]]: tensor<?xf32>)
func.func @row_dot(%a: tensor<?x128xbf16>, %b: tensor<?x128xbf16>, %c: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xbf16>) {
  // CHECK: moe.row_dot %[[A]], %[[B]] accumulate(%[[C]] : tensor<?xf32>) : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?xf32>
  %x = moe.row_dot %a, %b accumulate(%c : tensor<?xf32>) : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?xf32>
  // CHECK: moe.row_dot %[[A]], %[[B]] : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?xbf16>
  %y = moe.row_dot %a, %b : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?xbf16>
  return %x, %y : tensor<?xf32>, tensor<?xbf16>
}

// moe.ffn_grad: Mixtral-style (four results), and gpt-oss-style with the
// routing bias, expert biases (six results), transposed weights and the
// clamped SwiGLU; f32 logits on bf16 activations.
// CHECK-LABEL: func.func @ffn_grad
// CHECK-SAME: (%[[DY:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>,
// CHECK-SAME: %[[LF:[a-z0-9_]+]]: tensor<?x8xf32>, %[[WUT:[a-z0-9_]+]]: tensor<8x256x64xbf16>, %[[WDT:[a-z0-9_]+]]: tensor<8x64x128xbf16>, %[[B:[a-z0-9_]+]]: tensor<8xf32>, %[[BU:[a-z0-9_]+]]: tensor<8x256xbf16>, %[[BD:[a-z0-9_]+]]: tensor<8x64xbf16>)
func.func @ffn_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>,
                    %lf: tensor<?x8xf32>, %wut: tensor<8x256x64xbf16>, %wdt: tensor<8x64x128xbf16>, %b: tensor<8xf32>, %bu: tensor<8x256xbf16>, %bd: tensor<8x64xbf16>) {
  // CHECK: moe.ffn_grad %[[DY]], %[[X]], %[[L]], %[[WU]], %[[WD]] k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
  // CHECK-SAME: : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  %0:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  // CHECK: moe.ffn_grad %[[DY]], %[[X]], %[[LF]], %[[WUT]], %[[WDT]] bias(%[[B]] : tensor<8xf32>) expert_bias(%[[BU]], %[[BD]] : tensor<8x256xbf16>, tensor<8x64xbf16>) k = 4 scoring = sigmoid activation = silu layout = interleaved
  // CHECK-SAME: {alpha = 1.702000e+00 : f32, group_score = #moe.group_score<top2_sum>, limit = 7.000000e+00 : f32, n_group = 4 : i64, normalize = true, scaling = 2.500000e+00 : f32, topk_group = 2 : i64, transpose_weights = true, up_bias = 1.000000e+00 : f32}
  // CHECK-SAME: -> tensor<?x64xbf16>, tensor<?x8xf32>, tensor<8x256x64xf32>, tensor<8x64x128xf32>, tensor<8x256xf32>, tensor<8x64xf32>
  %1:6 = moe.ffn_grad %dy, %x, %lf, %wut, %wdt bias(%b : tensor<8xf32>) expert_bias(%bu, %bd : tensor<8x256xbf16>, tensor<8x64xbf16>)
      k = 4 scoring = sigmoid activation = silu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32,
       alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xf32>, tensor<8x256x64xbf16>, tensor<8x64x128xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xf32>, tensor<8x256x64xf32>, tensor<8x64x128xf32>, tensor<8x256xf32>, tensor<8x64xf32>
  return
}

// moe.ffn_train (moe.ffn's syntax, four results) and moe.ffn_grad's saved
// form fed from it: Mixtral-style with dynamic T, and gpt-oss-style with
// the routing bias, expert biases (the saved group comes after them),
// transposed weights and static T (h has T * k = 8 rows).
// CHECK-LABEL: func.func @ffn_train_and_saved_grad
// CHECK-SAME: (%[[DY:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>,
// CHECK-SAME: %[[DY4:[a-z0-9_]+]]: tensor<4x64xf32>, %[[X4:[a-z0-9_]+]]: tensor<4x64xf32>, %[[L4:[a-z0-9_]+]]: tensor<4x8xf32>, %[[WUT:[a-z0-9_]+]]: tensor<8x256x64xf32>, %[[WDT:[a-z0-9_]+]]: tensor<8x64x128xf32>, %[[B:[a-z0-9_]+]]: tensor<8xf32>, %[[BU:[a-z0-9_]+]]: tensor<8x256xf32>, %[[BD:[a-z0-9_]+]]: tensor<8x64xf32>)
func.func @ffn_train_and_saved_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>,
                                    %dy4: tensor<4x64xf32>, %x4: tensor<4x64xf32>, %l4: tensor<4x8xf32>, %wut: tensor<8x256x64xf32>, %wdt: tensor<8x64x128xf32>, %b: tensor<8xf32>, %bu: tensor<8x256xf32>, %bd: tensor<8x64xf32>) {
  // CHECK: %[[Y:[a-z0-9_]+]], %[[H:[a-z0-9_]+]], %[[W:[a-z0-9_]+]], %[[I:[a-z0-9_]+]] = moe.ffn_train %[[X]], %[[L]], %[[WU]], %[[WD]] k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
  // CHECK-SAME: : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  // CHECK: moe.ffn_grad %[[DY]], %[[X]], %[[L]], %[[WU]], %[[WD]] saved(%[[H]], %[[W]], %[[I]] : tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
  // CHECK-SAME: -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  %0:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>)
      k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  // CHECK: %{{.*}}, %[[H4:[a-z0-9_]+]], %[[W4:[a-z0-9_]+]], %[[I4:[a-z0-9_]+]] = moe.ffn_train %[[X4]], %[[L4]], %[[WUT]], %[[WDT]] bias(%[[B]] : tensor<8xf32>) expert_bias(%[[BU]], %[[BD]] : tensor<8x256xf32>, tensor<8x64xf32>) k = 2 scoring = sigmoid activation = silu layout = interleaved
  // CHECK-SAME: {alpha = 1.702000e+00 : f32, group_score = #moe.group_score<top2_sum>, limit = 7.000000e+00 : f32, n_group = 4 : i64, normalize = true, topk_group = 2 : i64, transpose_weights = true, up_bias = 1.000000e+00 : f32}
  // CHECK-SAME: -> tensor<4x64xf32>, tensor<8x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>
  %y4, %h4, %w4, %i4 = moe.ffn_train %x4, %l4, %wut, %wdt bias(%b : tensor<8xf32>) expert_bias(%bu, %bd : tensor<8x256xf32>, tensor<8x64xf32>)
      k = 2 scoring = sigmoid activation = silu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>,
       alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x256x64xf32>, tensor<8x64x128xf32>
      -> tensor<4x64xf32>, tensor<8x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>
  // CHECK: moe.ffn_grad %[[DY4]], %[[X4]], %[[L4]], %[[WUT]], %[[WDT]] bias(%[[B]] : tensor<8xf32>) expert_bias(%[[BU]], %[[BD]] : tensor<8x256xf32>, tensor<8x64xf32>) saved(%[[H4]], %[[W4]], %[[I4]] : tensor<8x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>) k = 2 scoring = sigmoid
  // CHECK-SAME: -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x256x64xf32>, tensor<8x64x128xf32>, tensor<8x256xf32>, tensor<8x64xf32>
  %1:6 = moe.ffn_grad %dy4, %x4, %l4, %wut, %wdt bias(%b : tensor<8xf32>) expert_bias(%bu, %bd : tensor<8x256xf32>, tensor<8x64xf32>)
      saved(%h4, %w4, %i4 : tensor<8x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>)
      k = 2 scoring = sigmoid activation = silu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>,
       alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x256x64xf32>, tensor<8x64x128xf32>
      -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x256x64xf32>, tensor<8x64x128xf32>, tensor<8x256xf32>, tensor<8x64xf32>
  return
}

// Explicit defaults are elided; no limit is printed when there is none.
// CHECK-LABEL: func.func @glu_explicit_defaults
// CHECK-SAME: (%[[H:[a-z0-9_]+]]: tensor<4x8xf32>)
func.func @glu_explicit_defaults(%h: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // CHECK: moe.glu %[[H]] silu concat : tensor<4x8xf32> -> tensor<4x4xf32>
  // CHECK-NOT: alpha
  // CHECK-NOT: limit
  // CHECK-NOT: up_bias
  %r = moe.glu %h silu concat {alpha = 1.0 : f32, up_bias = 0.0 : f32} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// gpt-oss SwiGLU: silu + interleaved + alpha + limit + up_bias.
// CHECK-LABEL: func.func @glu_silu_interleaved_limit
// CHECK-SAME: (%[[H:[a-z0-9_]+]]: tensor<?x256xf16>)
func.func @glu_silu_interleaved_limit(%h: tensor<?x256xf16>) -> tensor<?x128xf16> {
  // CHECK: moe.glu %[[H]] silu interleaved
  // CHECK-SAME: {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32}
  // CHECK-SAME: : tensor<?x256xf16> -> tensor<?x128xf16>
  %r = moe.glu %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32}
      : tensor<?x256xf16> -> tensor<?x128xf16>
  return %r : tensor<?x128xf16>
}

// gelu (erf) + concat, limit only.
// CHECK-LABEL: func.func @glu_gelu_concat_limit_only
// CHECK-SAME: (%[[H:[a-z0-9_]+]]: tensor<8x64xf32>)
func.func @glu_gelu_concat_limit_only(%h: tensor<8x64xf32>) -> tensor<8x32xf32> {
  // CHECK: moe.glu %[[H]] gelu concat {limit = 1.000000e+01 : f32} : tensor<8x64xf32> -> tensor<8x32xf32>
  %r = moe.glu %h gelu concat {limit = 10.0 : f32} : tensor<8x64xf32> -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// gelu (erf) + interleaved, negative up_bias, no limit.
// CHECK-LABEL: func.func @glu_gelu_interleaved
// CHECK-SAME: (%[[H:[a-z0-9_]+]]: tensor<?x16xbf16>)
func.func @glu_gelu_interleaved(%h: tensor<?x16xbf16>) -> tensor<?x8xbf16> {
  // CHECK: moe.glu %[[H]] gelu interleaved {up_bias = -5.000000e-01 : f32} : tensor<?x16xbf16> -> tensor<?x8xbf16>
  // CHECK-NOT: limit
  %r = moe.glu %h gelu interleaved {up_bias = -0.5 : f32} : tensor<?x16xbf16> -> tensor<?x8xbf16>
  return %r : tensor<?x8xbf16>
}

// gelu_tanh with both layouts, M = 0.
// CHECK-LABEL: func.func @glu_gelu_tanh
func.func @glu_gelu_tanh(%h: tensor<0x32xf16>, %g: tensor<?x32xf32>) -> (tensor<0x16xf16>, tensor<?x16xf32>) {
  // CHECK: moe.glu %{{.*}} gelu_tanh concat : tensor<0x32xf16> -> tensor<0x16xf16>
  // CHECK: moe.glu %{{.*}} gelu_tanh interleaved {alpha = 2.000000e+00 : f32} : tensor<?x32xf32> -> tensor<?x16xf32>
  %r = moe.glu %h gelu_tanh concat : tensor<0x32xf16> -> tensor<0x16xf16>
  %s = moe.glu %g gelu_tanh interleaved {alpha = 2.0 : f32} : tensor<?x32xf32> -> tensor<?x16xf32>
  return %r, %s : tensor<0x16xf16>, tensor<?x16xf32>
}

//===----------------------------------------------------------------------===//
// moe.combine
//===----------------------------------------------------------------------===//

// Weighted, W (f32) differs from F (bf16), dynamic T.
// CHECK-LABEL: func.func @combine_weighted
// CHECK-SAME: (%[[P:[a-z0-9_]+]]: tensor<?x2x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<?x2xf32>)
func.func @combine_weighted(%p: tensor<?x2x64xbf16>, %w: tensor<?x2xf32>) -> tensor<?x64xbf16> {
  // CHECK: %[[R:[a-z0-9_]+]] = moe.combine %[[P]] weights(%[[W]] : tensor<?x2xf32>) : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
  // CHECK: return %[[R]]
  %r = moe.combine %p weights(%w : tensor<?x2xf32>) : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
  return %r : tensor<?x64xbf16>
}

// Plain sum (no weights), static T, f16.
// CHECK-LABEL: func.func @combine_unweighted
// CHECK-SAME: (%[[P:[a-z0-9_]+]]: tensor<4x3x16xf16>)
func.func @combine_unweighted(%p: tensor<4x3x16xf16>) -> tensor<4x16xf16> {
  // CHECK: moe.combine %[[P]] : tensor<4x3x16xf16> -> tensor<4x16xf16>
  // CHECK-NOT: weights
  %r = moe.combine %p : tensor<4x3x16xf16> -> tensor<4x16xf16>
  return %r : tensor<4x16xf16>
}

// T = 0, f32 with bf16 weights; dynamic input T with static weights T.
// CHECK-LABEL: func.func @combine_zero_and_mixed
func.func @combine_zero_and_mixed(%p: tensor<0x2x8xf32>, %w: tensor<0x2xbf16>, %q: tensor<?x2x8xf32>, %v: tensor<5x2xf16>)
    -> (tensor<0x8xf32>, tensor<?x8xf32>) {
  // CHECK: moe.combine %{{.*}} weights(%{{.*}} : tensor<0x2xbf16>) : tensor<0x2x8xf32> -> tensor<0x8xf32>
  // CHECK: moe.combine %{{.*}} weights(%{{.*}} : tensor<5x2xf16>) : tensor<?x2x8xf32> -> tensor<?x8xf32>
  %r = moe.combine %p weights(%w : tensor<0x2xbf16>) : tensor<0x2x8xf32> -> tensor<0x8xf32>
  %s = moe.combine %q weights(%v : tensor<5x2xf16>) : tensor<?x2x8xf32> -> tensor<?x8xf32>
  return %r, %s : tensor<0x8xf32>, tensor<?x8xf32>
}

//===----------------------------------------------------------------------===//
// moe.indices_to_multihot and moe.multihot_to_indices
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @indices_to_multihot_static
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<4x2xi32>, %[[P:[a-z0-9_]+]]: tensor<4x2xf32>)
func.func @indices_to_multihot_static(%ids: tensor<4x2xi32>, %p: tensor<4x2xf32>) -> (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>) {
  // CHECK: %[[MH:[a-z0-9_]+]], %[[PM:[a-z0-9_]+]], %[[POS:[a-z0-9_]+]] = moe.indices_to_multihot %[[IDS]], %[[P]] num_experts = 8 : tensor<4x2xi32>, tensor<4x2xf32> -> tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>
  // CHECK: return %[[MH]], %[[PM]], %[[POS]]
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 8
      : tensor<4x2xi32>, tensor<4x2xf32> -> tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>
  return %mh, %pm, %pos : tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>
}

// CHECK-LABEL: func.func @indices_to_multihot_dynamic_bf16
func.func @indices_to_multihot_dynamic_bf16(%ids: tensor<?x2xi32>, %p: tensor<?x2xbf16>) -> (tensor<?x16xi1>, tensor<?x16xbf16>, tensor<?x16xi32>) {
  // CHECK: moe.indices_to_multihot %{{.*}}, %{{.*}} num_experts = 16 : tensor<?x2xi32>, tensor<?x2xbf16> -> tensor<?x16xi1>, tensor<?x16xbf16>, tensor<?x16xi32>
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 16
      : tensor<?x2xi32>, tensor<?x2xbf16> -> tensor<?x16xi1>, tensor<?x16xbf16>, tensor<?x16xi32>
  return %mh, %pm, %pos : tensor<?x16xi1>, tensor<?x16xbf16>, tensor<?x16xi32>
}

// CHECK-LABEL: func.func @indices_to_multihot_zero_tokens_f16
func.func @indices_to_multihot_zero_tokens_f16(%ids: tensor<0x2xi32>, %p: tensor<0x2xf16>) -> (tensor<0x4xi1>, tensor<0x4xf16>, tensor<0x4xi32>) {
  // CHECK: moe.indices_to_multihot %{{.*}}, %{{.*}} num_experts = 4 : tensor<0x2xi32>, tensor<0x2xf16> -> tensor<0x4xi1>, tensor<0x4xf16>, tensor<0x4xi32>
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 4
      : tensor<0x2xi32>, tensor<0x2xf16> -> tensor<0x4xi1>, tensor<0x4xf16>, tensor<0x4xi32>
  return %mh, %pm, %pos : tensor<0x4xi1>, tensor<0x4xf16>, tensor<0x4xi32>
}

// CHECK-LABEL: func.func @multihot_to_indices_static
// CHECK-SAME: (%[[PM:[a-z0-9_]+]]: tensor<4x8xf32>, %[[POS:[a-z0-9_]+]]: tensor<4x8xi32>)
func.func @multihot_to_indices_static(%pm: tensor<4x8xf32>, %pos: tensor<4x8xi32>) -> tensor<4x2xf32> {
  // CHECK: %[[R:[a-z0-9_]+]] = moe.multihot_to_indices %[[PM]], %[[POS]] k = 2 : tensor<4x8xf32>, tensor<4x8xi32> -> tensor<4x2xf32>
  // CHECK: return %[[R]]
  %r = moe.multihot_to_indices %pm, %pos k = 2 : tensor<4x8xf32>, tensor<4x8xi32> -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}

// CHECK-LABEL: func.func @multihot_to_indices_dynamic_f16
func.func @multihot_to_indices_dynamic_f16(%pm: tensor<?x8xf16>, %pos: tensor<?x8xi32>, %pm0: tensor<0x8xbf16>, %pos0: tensor<0x8xi32>)
    -> (tensor<?x4xf16>, tensor<0x1xbf16>) {
  // CHECK: moe.multihot_to_indices %{{.*}}, %{{.*}} k = 4 : tensor<?x8xf16>, tensor<?x8xi32> -> tensor<?x4xf16>
  // CHECK: moe.multihot_to_indices %{{.*}}, %{{.*}} k = 1 : tensor<0x8xbf16>, tensor<0x8xi32> -> tensor<0x1xbf16>
  %r = moe.multihot_to_indices %pm, %pos k = 4 : tensor<?x8xf16>, tensor<?x8xi32> -> tensor<?x4xf16>
  %r0 = moe.multihot_to_indices %pm0, %pos0 k = 1 : tensor<0x8xbf16>, tensor<0x8xi32> -> tensor<0x1xbf16>
  return %r, %r0 : tensor<?x4xf16>, tensor<0x1xbf16>
}

//===----------------------------------------------------------------------===//
// moe.ffn
//===----------------------------------------------------------------------===//

// Mixtral: softmax + normalize, silu + concat, dynamic T, bf16.
// CHECK-LABEL: func.func @ffn_mixtral
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>)
func.func @ffn_mixtral(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> tensor<?x64xbf16> {
  // CHECK: %[[Y:[a-z0-9_]+]] = moe.ffn %[[X]], %[[L]], %[[WU]], %[[WD]] k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
  // CHECK-SAME: : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
  // CHECK: return %[[Y]]
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// DeepSeek-V3: sigmoid + bias + top2_sum groups + scaling, gelu + interleaved,
// static T, f32.
// CHECK-LABEL: func.func @ffn_deepseek
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x32xf32>, %[[L:[a-z0-9_]+]]: tensor<4x16xf32>, %[[WU:[a-z0-9_]+]]: tensor<16x32x64xf32>, %[[WD:[a-z0-9_]+]]: tensor<16x32x32xf32>, %[[B:[a-z0-9_]+]]: tensor<16xf32>)
func.func @ffn_deepseek(%x: tensor<4x32xf32>, %l: tensor<4x16xf32>, %wu: tensor<16x32x64xf32>, %wd: tensor<16x32x32xf32>, %b: tensor<16xf32>) -> tensor<4x32xf32> {
  // CHECK: moe.ffn %[[X]], %[[L]], %[[WU]], %[[WD]] bias(%[[B]] : tensor<16xf32>) k = 4 scoring = sigmoid activation = gelu layout = interleaved
  // CHECK-SAME: group_score = #moe.group_score<top2_sum>
  // CHECK-SAME: n_group = 4 : i64
  // CHECK-SAME: normalize = true
  // CHECK-SAME: scaling = 2.500000e+00 : f32
  // CHECK-SAME: topk_group = 2 : i64
  // CHECK-SAME: : tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x32x64xf32>, tensor<16x32x32xf32> -> tensor<4x32xf32>
  %y = moe.ffn %x, %l, %wu, %wd bias(%b : tensor<16xf32>) k = 4 scoring = sigmoid activation = gelu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64,
       group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32}
      : tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x32x64xf32>, tensor<16x32x32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// gpt-oss: transpose_weights (E x 2I x H and E x H x I), SwiGLU with alpha,
// limit and up_bias, group-limited max routing, dynamic T, f16.
// CHECK-LABEL: func.func @ffn_gpt_oss_transposed
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x32xf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xf16>, %[[WU:[a-z0-9_]+]]: tensor<8x48x32xf16>, %[[WD:[a-z0-9_]+]]: tensor<8x32x24xf16>)
func.func @ffn_gpt_oss_transposed(%x: tensor<?x32xf16>, %l: tensor<?x8xf16>, %wu: tensor<8x48x32xf16>, %wd: tensor<8x32x24xf16>) -> tensor<?x32xf16> {
  // CHECK: moe.ffn %[[X]], %[[L]], %[[WU]], %[[WD]] k = 2 scoring = softmax activation = silu layout = interleaved
  // CHECK-SAME: {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, n_group = 4 : i64, topk_group = 2 : i64, transpose_weights = true, up_bias = 1.000000e+00 : f32}
  // CHECK-SAME: : tensor<?x32xf16>, tensor<?x8xf16>, tensor<8x48x32xf16>, tensor<8x32x24xf16> -> tensor<?x32xf16>
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = interleaved
      {n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<max>,
       alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<?x32xf16>, tensor<?x8xf16>, tensor<8x48x32xf16>, tensor<8x32x24xf16> -> tensor<?x32xf16>
  return %y : tensor<?x32xf16>
}

// T = 0, gelu_tanh + concat, every default elided (transpose_weights = false
// written out).
// CHECK-LABEL: func.func @ffn_zero_tokens_gelu_tanh
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<0x16xf32>, %[[L:[a-z0-9_]+]]: tensor<0x4xf32>, %[[WU:[a-z0-9_]+]]: tensor<4x16x8xf32>, %[[WD:[a-z0-9_]+]]: tensor<4x4x16xf32>)
func.func @ffn_zero_tokens_gelu_tanh(%x: tensor<0x16xf32>, %l: tensor<0x4xf32>, %wu: tensor<4x16x8xf32>, %wd: tensor<4x4x16xf32>) -> tensor<0x16xf32> {
  // CHECK: moe.ffn %[[X]], %[[L]], %[[WU]], %[[WD]] k = 1 scoring = sigmoid activation = gelu_tanh layout = concat : tensor<0x16xf32>, tensor<0x4xf32>, tensor<4x16x8xf32>, tensor<4x4x16xf32> -> tensor<0x16xf32>
  %y = moe.ffn %x, %l, %wu, %wd k = 1 scoring = sigmoid activation = gelu_tanh layout = concat
      {transpose_weights = false, normalize = false}
      : tensor<0x16xf32>, tensor<0x4xf32>, tensor<4x16x8xf32>, tensor<4x4x16xf32> -> tensor<0x16xf32>
  return %y : tensor<0x16xf32>
}

// moe.expert_gemm_glu_grad: gathered rows, routing weights, accumulator.
// CHECK-LABEL: func.func @expert_gemm_glu_grad
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = moe.expert_gemm_glu_grad %{{.*}}[%{{.*}} : tensor<?xi32>], %{{.*}} offsets(%{{.*}} : tensor<9xi32>) preact(%{{.*}} : tensor<?x256xbf16>) weights(%{{.*}} : tensor<?xf32>) accumulate(%{{.*}} : tensor<?xf32>) silu concat {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x128x64xbf16> -> tensor<?x256xbf16>, tensor<?x128xbf16>, tensor<?xf32>
func.func @expert_gemm_glu_grad(%dy: tensor<?x64xbf16>, %tok: tensor<?xi32>, %w2: tensor<8x128x64xbf16>, %off: tensor<9xi32>, %h: tensor<?x256xbf16>, %w: tensor<?xf32>, %acc: tensor<?xf32>) -> (tensor<?x256xbf16>, tensor<?x128xbf16>, tensor<?xf32>) {
  %dh, %wa, %dw = moe.expert_gemm_glu_grad %dy[%tok : tensor<?xi32>], %w2 offsets(%off : tensor<9xi32>)
      preact(%h : tensor<?x256xbf16>) weights(%w : tensor<?xf32>) accumulate(%acc : tensor<?xf32>) silu concat {transpose_rhs = true}
      : tensor<?x64xbf16>, tensor<8x128x64xbf16> -> tensor<?x256xbf16>, tensor<?x128xbf16>, tensor<?xf32>
  return %dh, %wa, %dw : tensor<?x256xbf16>, tensor<?x128xbf16>, tensor<?xf32>
}
