// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-decompose))' | FileCheck %s --implicit-check-not=moe.ffn
// RUN: moe-opt %s --moe-decompose | FileCheck %s --implicit-check-not=moe.ffn

// --moe-decompose expands moe.ffn into exactly the chain of docs/Contract.md section 3:
//   route -> cumsum -> get_indices -> get_indptr -> gather(token_indices)
//   -> grouped_matmul(w_up) -> glu -> grouped_matmul(w_down)
//   -> scatter(reverse_indices) -> tensor.expand_shape to T x k x H
//   -> combine(weights)
// Routing weights come out in f32; expert activations stay in the layer's
// element type. Every route and glu attribute flows to its primitive, and
// transpose_weights becomes transpose_rhs on both grouped matmuls.

// Mixtral-style, dynamic T, bf16: T is read back with tensor.dim for the
// reshape.
// CHECK-LABEL: func.func @decompose_dynamic_t
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>)
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] k = 2 scoring = softmax {normalize = true} : tensor<?x8xbf16> -> tensor<?x2xf32>, tensor<?x2xi32>
// CHECK-NEXT: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]] : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
// CHECK-NEXT: %[[OFF:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[UP:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[WU]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xbf16>
// CHECK-NEXT: %[[ACT:[a-z0-9_]+]] = moe.glu %[[UP]] silu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: %[[DOWN:[a-z0-9_]+]] = moe.grouped_matmul %[[ACT]], %[[WD]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x128xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[SC:[a-z0-9_]+]] = moe.scatter %[[DOWN]][%[[REV]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-NEXT: %[[T:[a-z0-9_]+]] = tensor.dim %[[X]], %[[C0]] : tensor<?x64xbf16>
// CHECK-NEXT: %[[PS:[a-z0-9_]+]] = tensor.expand_shape %[[SC]] {{\[}}[0, 1], [2]] output_shape [%[[T]], 2, 64] : tensor<?x64xbf16> into tensor<?x2x64xbf16>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = moe.combine %[[PS]] weights(%[[W]] : tensor<?x2xf32>) : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT: return %[[Y]] : tensor<?x64xbf16>
// CHECK-NOT: moe.ffn
func.func @decompose_dynamic_t(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// DeepSeek-V3-style, static T, f32: the routing bias and every group-limited
// routing attribute flow to moe.route; static sizes everywhere (M = T*k = 16,
// E*T = 64, no tensor.dim).
// CHECK-LABEL: func.func @decompose_static_t_bias_group_limited_sigmoid
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x32xf32>, %[[L:[a-z0-9_]+]]: tensor<4x16xf32>, %[[WU:[a-z0-9_]+]]: tensor<16x32x64xf32>, %[[WD:[a-z0-9_]+]]: tensor<16x32x32xf32>, %[[B:[a-z0-9_]+]]: tensor<16xf32>)
// CHECK-NOT:  arith.constant
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] bias(%[[B]] : tensor<16xf32>) k = 4 scoring = sigmoid
// CHECK-SAME: {group_score = #moe.group_score<top2_sum>, n_group = 4 : i64, normalize = true, scaling = 2.500000e+00 : f32, topk_group = 2 : i64}
// CHECK-SAME: : tensor<4x16xf32> -> tensor<4x4xf32>, tensor<4x4xi32>
// CHECK-NEXT: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 16 : tensor<4x4xi32> -> tensor<64xi32>
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]] : tensor<64xi32>, tensor<4x4xi32> -> tensor<16xi32>, tensor<16xi32>
// CHECK-NEXT: %[[OFF:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 16 : tensor<64xi32> -> tensor<17xi32>
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<4x32xf32>, tensor<16xi32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[UP:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[WU]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x32xf32>, tensor<16x32x64xf32> -> tensor<16x64xf32>
// CHECK-NEXT: %[[ACT:[a-z0-9_]+]] = moe.glu %[[UP]] gelu interleaved : tensor<16x64xf32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[DOWN:[a-z0-9_]+]] = moe.grouped_matmul %[[ACT]], %[[WD]] offsets(%[[OFF]] : tensor<17xi32>) : tensor<16x32xf32>, tensor<16x32x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[SC:[a-z0-9_]+]] = moe.scatter %[[DOWN]][%[[REV]]] : tensor<16x32xf32>, tensor<16xi32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[PS:[a-z0-9_]+]] = tensor.expand_shape %[[SC]] {{\[}}[0, 1], [2]] output_shape [4, 4, 32] : tensor<16x32xf32> into tensor<4x4x32xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = moe.combine %[[PS]] weights(%[[W]] : tensor<4x4xf32>) : tensor<4x4x32xf32> -> tensor<4x32xf32>
// CHECK-NEXT: return %[[Y]] : tensor<4x32xf32>
// CHECK-NOT: moe.ffn
func.func @decompose_static_t_bias_group_limited_sigmoid(%x: tensor<4x32xf32>, %l: tensor<4x16xf32>, %wu: tensor<16x32x64xf32>, %wd: tensor<16x32x32xf32>, %b: tensor<16xf32>) -> tensor<4x32xf32> {
  %y = moe.ffn %x, %l, %wu, %wd bias(%b : tensor<16xf32>) k = 4 scoring = sigmoid activation = gelu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64,
       group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32}
      : tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x32x64xf32>, tensor<16x32x32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// gpt-oss-style, f16: transpose_weights becomes transpose_rhs on both grouped
// matmuls (w_up is E x 2I x H = 8x48x32, w_down E x H x I = 8x32x24), and the
// SwiGLU attributes (alpha, limit, up_bias) flow to moe.glu, and none of
// them leaks onto moe.route.
// CHECK-LABEL: func.func @decompose_transpose_weights_glu_limit
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x32xf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xf16>, %[[WU:[a-z0-9_]+]]: tensor<8x48x32xf16>, %[[WD:[a-z0-9_]+]]: tensor<8x32x24xf16>)
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] k = 2 scoring = softmax : tensor<?x8xf16> -> tensor<?x2xf32>, tensor<?x2xi32>
// CHECK-NEXT: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]]
// CHECK-NEXT: %[[OFF:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<?x32xf16>, tensor<?xi32> -> tensor<?x32xf16>
// CHECK-NEXT: %[[UP:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[WU]] offsets(%[[OFF]] : tensor<9xi32>) {transpose_rhs = true} : tensor<?x32xf16>, tensor<8x48x32xf16> -> tensor<?x48xf16>
// CHECK-NEXT: %[[ACT:[a-z0-9_]+]] = moe.glu %[[UP]] silu interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32} : tensor<?x48xf16> -> tensor<?x24xf16>
// CHECK-NEXT: %[[DOWN:[a-z0-9_]+]] = moe.grouped_matmul %[[ACT]], %[[WD]] offsets(%[[OFF]] : tensor<9xi32>) {transpose_rhs = true} : tensor<?x24xf16>, tensor<8x32x24xf16> -> tensor<?x32xf16>
// CHECK-NEXT: %[[SC:[a-z0-9_]+]] = moe.scatter %[[DOWN]][%[[REV]]] : tensor<?x32xf16>, tensor<?xi32> -> tensor<?x32xf16>
// CHECK-NEXT: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-NEXT: %[[T:[a-z0-9_]+]] = tensor.dim %[[X]], %[[C0]] : tensor<?x32xf16>
// CHECK-NEXT: %[[PS:[a-z0-9_]+]] = tensor.expand_shape %[[SC]] {{\[}}[0, 1], [2]] output_shape [%[[T]], 2, 32] : tensor<?x32xf16> into tensor<?x2x32xf16>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = moe.combine %[[PS]] weights(%[[W]] : tensor<?x2xf32>) : tensor<?x2x32xf16> -> tensor<?x32xf16>
// CHECK-NEXT: return %[[Y]] : tensor<?x32xf16>
// CHECK-NOT: moe.ffn
func.func @decompose_transpose_weights_glu_limit(%x: tensor<?x32xf16>, %l: tensor<?x8xf16>, %wu: tensor<8x48x32xf16>, %wd: tensor<8x32x24xf16>) -> tensor<?x32xf16> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = interleaved
      {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<?x32xf16>, tensor<?x8xf16>, tensor<8x48x32xf16>, tensor<8x32x24xf16> -> tensor<?x32xf16>
  return %y : tensor<?x32xf16>
}

// T = 0 (static): every intermediate is empty but well typed; the exclusive
// offsets still have E + 1 elements.
// CHECK-LABEL: func.func @decompose_zero_tokens
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<0x16xf32>, %[[L:[a-z0-9_]+]]: tensor<0x4xf32>, %[[WU:[a-z0-9_]+]]: tensor<4x16x8xf32>, %[[WD:[a-z0-9_]+]]: tensor<4x4x16xf32>)
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] k = 1 scoring = sigmoid : tensor<0x4xf32> -> tensor<0x1xf32>, tensor<0x1xi32>
// CHECK-NEXT: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 4 : tensor<0x1xi32> -> tensor<0xi32>
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]] : tensor<0xi32>, tensor<0x1xi32> -> tensor<0xi32>, tensor<0xi32>
// CHECK-NEXT: %[[OFF:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 4 : tensor<0xi32> -> tensor<5xi32>
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<0x16xf32>, tensor<0xi32> -> tensor<0x16xf32>
// CHECK-NEXT: %[[UP:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[WU]] offsets(%[[OFF]] : tensor<5xi32>) : tensor<0x16xf32>, tensor<4x16x8xf32> -> tensor<0x8xf32>
// CHECK-NEXT: %[[ACT:[a-z0-9_]+]] = moe.glu %[[UP]] gelu_tanh concat : tensor<0x8xf32> -> tensor<0x4xf32>
// CHECK-NEXT: %[[DOWN:[a-z0-9_]+]] = moe.grouped_matmul %[[ACT]], %[[WD]] offsets(%[[OFF]] : tensor<5xi32>) : tensor<0x4xf32>, tensor<4x4x16xf32> -> tensor<0x16xf32>
// CHECK-NEXT: %[[SC:[a-z0-9_]+]] = moe.scatter %[[DOWN]][%[[REV]]] : tensor<0x16xf32>, tensor<0xi32> -> tensor<0x16xf32>
// CHECK-NEXT: %[[PS:[a-z0-9_]+]] = tensor.expand_shape %[[SC]] {{\[}}[0, 1], [2]] output_shape [0, 1, 16] : tensor<0x16xf32> into tensor<0x1x16xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = moe.combine %[[PS]] weights(%[[W]] : tensor<0x1xf32>) : tensor<0x1x16xf32> -> tensor<0x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<0x16xf32>
func.func @decompose_zero_tokens(%x: tensor<0x16xf32>, %l: tensor<0x4xf32>, %wu: tensor<4x16x8xf32>, %wd: tensor<4x4x16xf32>) -> tensor<0x16xf32> {
  %y = moe.ffn %x, %l, %wu, %wd k = 1 scoring = sigmoid activation = gelu_tanh layout = concat
      : tensor<0x16xf32>, tensor<0x4xf32>, tensor<4x16x8xf32>, tensor<4x4x16xf32> -> tensor<0x16xf32>
  return %y : tensor<0x16xf32>
}

// Two stacked layers: both are expanded, the second one's gather reads the
// first one's combine, and each keeps its own routing.
// CHECK-LABEL: func.func @decompose_two_layers
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<8x16xf32>, %[[L1:[a-z0-9_]+]]: tensor<8x4xf32>, %[[L2:[a-z0-9_]+]]: tensor<8x4xf32>, %[[WU:[a-z0-9_]+]]: tensor<4x16x8xf32>, %[[WD:[a-z0-9_]+]]: tensor<4x4x16xf32>)
// CHECK:      moe.route %[[L1]] k = 2 scoring = softmax {normalize = true}
// CHECK:      moe.gather %[[X]][
// CHECK:      %[[Y1:[a-z0-9_]+]] = moe.combine
// CHECK-NEXT: moe.route %[[L2]] k = 1 scoring = sigmoid :
// CHECK:      moe.gather %[[Y1]][
// CHECK:      moe.glu %{{.*}} gelu interleaved
// CHECK:      %[[Y2:[a-z0-9_]+]] = moe.combine
// CHECK-NEXT: return %[[Y2]] : tensor<8x16xf32>
func.func @decompose_two_layers(%x: tensor<8x16xf32>, %l1: tensor<8x4xf32>, %l2: tensor<8x4xf32>, %wu: tensor<4x16x8xf32>, %wd: tensor<4x4x16xf32>) -> tensor<8x16xf32> {
  %y1 = moe.ffn %x, %l1, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<8x16xf32>, tensor<8x4xf32>, tensor<4x16x8xf32>, tensor<4x4x16xf32> -> tensor<8x16xf32>
  %y2 = moe.ffn %y1, %l2, %wu, %wd k = 1 scoring = sigmoid activation = gelu layout = interleaved
      : tensor<8x16xf32>, tensor<8x4xf32>, tensor<4x16x8xf32>, tensor<4x4x16xf32> -> tensor<8x16xf32>
  return %y2 : tensor<8x16xf32>
}

// No moe.ffn: the function, including other moe ops and unrelated dialects,
// comes out unchanged.
// CHECK-LABEL: func.func @no_ffn_unchanged
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x16xf32>, %[[L:[a-z0-9_]+]]: tensor<4x8xf32>, %[[S:[a-z0-9_]+]]: f32)
// CHECK-NEXT: %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
// CHECK-NEXT: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 8 : tensor<4x2xi32> -> tensor<32xi32>
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]] : tensor<32xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
// CHECK-NEXT: %[[G:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<4x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[SC:[a-z0-9_]+]] = moe.scatter %[[G]][%[[REV]]] : tensor<8x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[D:[a-z0-9_]+]] = arith.addf %[[S]], %[[S]] : f32
// CHECK-NEXT: return %[[SC]], %[[W]], %[[D]] : tensor<8x16xf32>, tensor<4x2xf32>, f32
// CHECK-NEXT: }
func.func @no_ffn_unchanged(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %s: f32) -> (tensor<8x16xf32>, tensor<4x2xf32>, f32) {
  %w, %ids = moe.route %l k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x2xi32> -> tensor<32xi32>
  %rev, %tok = moe.get_indices %cs, %ids : tensor<32xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
  %g = moe.gather %x[%tok] : tensor<4x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
  %sc = moe.scatter %g[%rev] : tensor<8x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
  %d = arith.addf %s, %s : f32
  return %sc, %w, %d : tensor<8x16xf32>, tensor<4x2xf32>, f32
}
