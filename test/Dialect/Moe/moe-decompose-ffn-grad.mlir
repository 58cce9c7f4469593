// RUN: moe-opt %s --moe-decompose | FileCheck %s --implicit-check-not=moe.ffn_grad
// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-decompose))' | FileCheck %s --implicit-check-not=moe.ffn_grad

// --moe-decompose expands moe.ffn_grad into the forward's routing, dispatch
// metadata and pre-activation (recomputed exactly as moe.ffn decomposes),
// then the backward chain (the op reference of moe.ffn_grad):
//   g = grouped_matmul(gather(dy), w_down transposed)
//   dweights = route_grad(scatter(row_dot(g, a [+ <dy, b_down>])))
//   dh = glu_grad(w * g, h), dx = combine(scatter(grouped_matmul(dh, w_up^T)))
//   dw_down = wgrad(a, w * dO), dw_up = wgrad(x_rows, dh) (operands swapped
//   for transposed weights), bias gradients = wgrad of a ones column.

// Mixtral-style, dynamic T, bf16.
// CHECK-LABEL: func.func @ffn_grad_dynamic_t
// CHECK-SAME: (%[[DY:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>)
// The forward, recomputed.
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] k = 2 scoring = softmax {normalize = true} : tensor<?x8xbf16> -> tensor<?x2xf32>, tensor<?x2xi32>
// CHECK-NEXT: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 8
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]]
// CHECK-NEXT: %[[OFF:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[WU]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xbf16>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = moe.glu %[[H]] silu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
// The routing weight of every row, in expert order.
// CHECK:      %[[WE:[a-z0-9_]+]] = tensor.expand_shape %[[W]] {{\[}}[0], [1, 2]] output_shape [%{{.*}}, 2, 1] : tensor<?x2xf32> into tensor<?x2x1xf32>
// CHECK-NEXT: %[[WF:[a-z0-9_]+]] = tensor.collapse_shape %[[WE]] {{\[}}[0, 1], [2]] : tensor<?x2x1xf32> into tensor<?x1xf32>
// CHECK-NEXT: %[[WR:[a-z0-9_]+]] = moe.gather %[[WF]][%[[REV]]] : tensor<?x1xf32>, tensor<?xi32> -> tensor<?x1xf32>
// The down projection's input gradient and the routing weights' gradient.
// CHECK-NEXT: %[[DO:[a-z0-9_]+]] = moe.gather %[[DY]][%[[TOK]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[G:[a-z0-9_]+]] = moe.grouped_matmul %[[DO]], %[[WD]] offsets(%[[OFF]] : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x128x64xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: %[[DWR:[a-z0-9_]+]] = moe.row_dot %[[G]], %[[A]] : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?xf32>
// CHECK:      %[[DWE:[a-z0-9_]+]] = tensor.expand_shape %[[DWR]] {{\[}}[0, 1]] output_shape [%{{.*}}, 1] : tensor<?xf32> into tensor<?x1xf32>
// CHECK-NEXT: %[[DWS:[a-z0-9_]+]] = moe.scatter %[[DWE]][%[[REV]]] : tensor<?x1xf32>, tensor<?xi32> -> tensor<?x1xf32>
// CHECK:      %[[DWC:[a-z0-9_]+]] = tensor.collapse_shape %[[DWS]] {{\[}}[0, 1]] : tensor<?x1xf32> into tensor<?xf32>
// CHECK-NEXT: %[[DWTK:[a-z0-9_]+]] = tensor.expand_shape %[[DWC]] {{\[}}[0, 1]] output_shape [%{{.*}}, 2] : tensor<?xf32> into tensor<?x2xf32>
// CHECK-NEXT: %[[DL:[a-z0-9_]+]] = moe.route_grad %[[DWTK]], %[[L]], %[[IDS]] scoring = softmax {normalize = true} : tensor<?x2xf32>, tensor<?x8xbf16>, tensor<?x2xi32> -> tensor<?x8xbf16>
// Through the GLU and the up projection; dx sums the k slots.
// CHECK:      %[[GE:[a-z0-9_]+]] = tensor.expand_shape %[[G]] {{\[}}[0, 1], [2]] output_shape [%{{.*}}, 1, 128] : tensor<?x128xbf16> into tensor<?x1x128xbf16>
// CHECK-NEXT: %[[DA:[a-z0-9_]+]] = moe.combine %[[GE]] weights(%[[WR]] : tensor<?x1xf32>) : tensor<?x1x128xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: %[[DH:[a-z0-9_]+]] = moe.glu_grad %[[DA]], %[[H]] silu concat : tensor<?x128xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>
// CHECK-NEXT: %[[DXR:[a-z0-9_]+]] = moe.grouped_matmul %[[DH]], %[[WU]] offsets(%[[OFF]] : tensor<9xi32>) {transpose_rhs = true} : tensor<?x256xbf16>, tensor<8x64x256xbf16> -> tensor<?x64xbf16>
// CHECK:      %[[DXS:[a-z0-9_]+]] = moe.scatter %[[DXR]][%[[REV]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[DXK:[a-z0-9_]+]] = tensor.expand_shape %[[DXS]] {{\[}}[0, 1], [2]] output_shape [%{{.*}}, 2, 64] : tensor<?x64xbf16> into tensor<?x2x64xbf16>
// CHECK-NEXT: %[[DX:[a-z0-9_]+]] = moe.combine %[[DXK]] : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
// The weight gradients, f32; dW2 contracts the routing-weighted activation
// with the upstream gradient's rows.
// CHECK:      %[[AE:[a-z0-9_]+]] = tensor.expand_shape %[[A]] {{\[}}[0, 1], [2]] output_shape [%{{.*}}, 1, 128] : tensor<?x128xbf16> into tensor<?x1x128xbf16>
// CHECK-NEXT: %[[WA:[a-z0-9_]+]] = moe.combine %[[AE]] weights(%[[WR]] : tensor<?x1xf32>) : tensor<?x1x128xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: %[[DWD:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[WA]], %[[DO]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x128xbf16>, tensor<?x64xbf16> -> tensor<8x128x64xf32>
// CHECK-NEXT: %[[DWU:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[ROWS]], %[[DH]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<?x256xbf16> -> tensor<8x64x256xf32>
// CHECK-NEXT: return %[[DX]], %[[DL]], %[[DWU]], %[[DWD]]
func.func @ffn_grad_dynamic_t(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>) {
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
}

// gpt-oss / DeepSeek-V3 mix, static T, f32: the routing bias and group
// attributes flow to moe.route (route_grad gets scoring, normalize and
// scaling only); transposed weights swap the dgrad transposes and the wgrad
// operands; the expert biases feed the up GEMM, the bias term <dO, b_down>
// (a grouped matmul against b_down as E x H x 1, accumulated into row_dot)
// and the two bias gradients (wgrad of a ones column, collapsed to E x N);
// the clamped SwiGLU's attributes reach glu and glu_grad.
// CHECK-LABEL: func.func @ffn_grad_static_t_biases_transposed
// CHECK-SAME: (%[[DY:[a-z0-9_]+]]: tensor<4x32xf32>, %[[X:[a-z0-9_]+]]: tensor<4x32xf32>, %[[L:[a-z0-9_]+]]: tensor<4x16xf32>, %[[WU:[a-z0-9_]+]]: tensor<16x48x32xf32>, %[[WD:[a-z0-9_]+]]: tensor<16x32x24xf32>, %[[B:[a-z0-9_]+]]: tensor<16xf32>, %[[BU:[a-z0-9_]+]]: tensor<16x48xf32>, %[[BD:[a-z0-9_]+]]: tensor<16x32xf32>)
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] bias(%[[B]] : tensor<16xf32>) k = 4 scoring = sigmoid
// CHECK-SAME: {group_score = #moe.group_score<top2_sum>, n_group = 4 : i64, normalize = true, scaling = 2.500000e+00 : f32, topk_group = 2 : i64}
// CHECK:      %[[OFF:[a-z0-9_]+]] = moe.get_indptr
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]]
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[WU]] offsets(%[[OFF]] : tensor<17xi32>) bias(%[[BU]] : tensor<16x48xf32>) {transpose_rhs = true} : tensor<16x32xf32>, tensor<16x48x32xf32> -> tensor<16x48xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = moe.glu %[[H]] silu interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32} : tensor<16x48xf32> -> tensor<16x24xf32>
// CHECK:      %[[WR:[a-z0-9_]+]] = moe.gather %{{.*}} : tensor<16x1xf32>, tensor<16xi32> -> tensor<16x1xf32>
// CHECK-NEXT: %[[DO:[a-z0-9_]+]] = moe.gather %[[DY]]
// CHECK-NEXT: %[[G:[a-z0-9_]+]] = moe.grouped_matmul %[[DO]], %[[WD]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x32xf32>, tensor<16x32x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[BDC:[a-z0-9_]+]] = tensor.expand_shape %[[BD]] {{\[}}[0], [1, 2]] output_shape [16, 32, 1] : tensor<16x32xf32> into tensor<16x32x1xf32>
// CHECK-NEXT: %[[BT:[a-z0-9_]+]] = moe.grouped_matmul %[[DO]], %[[BDC]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x32xf32>, tensor<16x32x1xf32> -> tensor<16x1xf32>
// CHECK-NEXT: %[[BTC:[a-z0-9_]+]] = tensor.collapse_shape %[[BT]] {{\[}}[0, 1]] : tensor<16x1xf32> into tensor<16xf32>
// CHECK-NEXT: %[[DWR:[a-z0-9_]+]] = moe.row_dot %[[G]], %[[A]] accumulate(%[[BTC]] : tensor<16xf32>) : tensor<16x24xf32>, tensor<16x24xf32> -> tensor<16xf32>
// CHECK:      moe.route_grad %{{.*}}, %[[L]], %[[IDS]] scoring = sigmoid {normalize = true, scaling = 2.500000e+00 : f32} : tensor<4x4xf32>, tensor<4x16xf32>, tensor<4x4xi32> -> tensor<4x16xf32>
// CHECK:      %[[DA:[a-z0-9_]+]] = moe.combine %{{.*}} weights(%[[WR]] : tensor<16x1xf32>) : tensor<16x1x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[DH:[a-z0-9_]+]] = moe.glu_grad %[[DA]], %[[H]] silu interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32}
// CHECK-NEXT: moe.grouped_matmul %[[DH]], %[[WU]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x48xf32>, tensor<16x48x32xf32> -> tensor<16x32xf32>
// CHECK:      %[[WA:[a-z0-9_]+]] = moe.combine %{{.*}} weights(%[[WR]] : tensor<16x1xf32>) : tensor<16x1x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[DWD:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[DO]], %[[WA]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x32xf32>, tensor<16x24xf32> -> tensor<16x32x24xf32>
// CHECK-NEXT: %[[DWU:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[DH]], %[[ROWS]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x48xf32>, tensor<16x32xf32> -> tensor<16x48x32xf32>
// CHECK-NEXT: %[[ONE:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[ONES:[a-z0-9_]+]] = tensor.splat %[[ONE]] : tensor<16x1xf32>
// The bias gradient of the down projection sums the routing-weighted rows.
// CHECK:      %[[DOW:[a-z0-9_]+]] = moe.combine %{{.*}} weights(%[[WR]] : tensor<16x1xf32>) : tensor<16x1x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[DBU:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[ONES]], %[[DH]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x1xf32>, tensor<16x48xf32> -> tensor<16x1x48xf32>
// CHECK-NEXT: %[[DBUC:[a-z0-9_]+]] = tensor.collapse_shape %[[DBU]] {{\[}}[0, 1], [2]] : tensor<16x1x48xf32> into tensor<16x48xf32>
// CHECK-NEXT: %[[DBD:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[ONES]], %[[DOW]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x1xf32>, tensor<16x32xf32> -> tensor<16x1x32xf32>
// CHECK-NEXT: %[[DBDC:[a-z0-9_]+]] = tensor.collapse_shape %[[DBD]] {{\[}}[0, 1], [2]] : tensor<16x1x32xf32> into tensor<16x32xf32>
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[DWU]], %[[DWD]], %[[DBUC]], %[[DBDC]]
func.func @ffn_grad_static_t_biases_transposed(%dy: tensor<4x32xf32>, %x: tensor<4x32xf32>, %l: tensor<4x16xf32>, %wu: tensor<16x48x32xf32>, %wd: tensor<16x32x24xf32>, %b: tensor<16xf32>, %bu: tensor<16x48xf32>, %bd: tensor<16x32xf32>) -> (tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>, tensor<16x48xf32>, tensor<16x32xf32>) {
  %r:6 = moe.ffn_grad %dy, %x, %l, %wu, %wd bias(%b : tensor<16xf32>) expert_bias(%bu, %bd : tensor<16x48xf32>, tensor<16x32xf32>) k = 4 scoring = sigmoid activation = silu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32, alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>
      -> tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>, tensor<16x48xf32>, tensor<16x32xf32>
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>, tensor<16x48xf32>, tensor<16x32xf32>
}

// Weight gradients in the weights' type (bf16): the two wgrads return bf16,
// each sum rounded once from f32.
// CHECK-LABEL: func.func @ffn_grad_bf16_weight_grads
// CHECK:       moe.grouped_matmul_wgrad {{.*}} -> tensor<8x128x64xbf16>
// CHECK:       moe.grouped_matmul_wgrad {{.*}} -> tensor<8x64x256xbf16>
func.func @ffn_grad_bf16_weight_grads(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>) {
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
}
