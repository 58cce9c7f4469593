// RUN: moe-opt %s --moe-decompose | FileCheck %s --implicit-check-not=moe.ffn_train --implicit-check-not=moe.ffn_grad
// RUN: moe-opt %s | FileCheck %s --check-prefix=BYTES

// The saved-tensor form of issue 47's training backward: moe.ffn_train is
// moe.ffn's chain with h (the up projection's pre-activation, dispatch
// order), the routing weights and the ids as extra results; moe.ffn_grad
// with saved(h, weights, indices) derives the dispatch metadata from the
// saved ids, recomputes only glu(h), and has no moe.route and no forward
// up-projection GEMM: its only grouped matmuls are the two dgrads.

// moe.ffn_train: exactly moe.ffn's chain (test/Dialect/Moe/moe-decompose.mlir);
// y is the combine, h the first grouped matmul, weights and ids the route's.
// CHECK-LABEL: func.func @ffn_train_dynamic_t
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>)
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %[[L]] k = 2 scoring = softmax {normalize = true} : tensor<?x8xbf16> -> tensor<?x2xf32>, tensor<?x2xi32>
// CHECK-NEXT: %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 8
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]]
// CHECK-NEXT: %[[OFF:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[WU]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x256xbf16> -> tensor<?x256xbf16>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = moe.glu %[[H]] silu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: %[[D:[a-z0-9_]+]] = moe.grouped_matmul %[[A]], %[[WD]] offsets(%[[OFF]] : tensor<9xi32>) : tensor<?x128xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[S:[a-z0-9_]+]] = moe.scatter %[[D]][%[[REV]]]
// CHECK:      %[[E:[a-z0-9_]+]] = tensor.expand_shape %[[S]]
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = moe.combine %[[E]] weights(%[[W]] : tensor<?x2xf32>) : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT: return %[[Y]], %[[H]], %[[W]], %[[IDS]] : tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
func.func @ffn_train_dynamic_t(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) {
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  return %y, %h, %w, %i : tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
}

// The expert biases and the routing bias reach the chain as in moe.ffn's;
// h includes w_up_bias (the up GEMM's bias operand); static T gives
// T * k = 16 rows of h.
// CHECK-LABEL: func.func @ffn_train_static_t_biases
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route %{{.*}} bias(%{{.*}} : tensor<16xf32>) k = 4 scoring = sigmoid
// CHECK:      %[[H:[a-z0-9_]+]] = moe.grouped_matmul %{{.*}}, %{{.*}} offsets(%{{.*}} : tensor<17xi32>) bias(%{{.*}} : tensor<16x48xf32>) {transpose_rhs = true} : tensor<16x32xf32>, tensor<16x48x32xf32> -> tensor<16x48xf32>
// CHECK-NEXT: moe.glu %[[H]] silu interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32}
// CHECK-NEXT: moe.grouped_matmul {{.*}} bias(%{{.*}} : tensor<16x32xf32>) {transpose_rhs = true}
// CHECK:      %[[Y:[a-z0-9_]+]] = moe.combine
// CHECK-NEXT: return %[[Y]], %[[H]], %[[W]], %[[IDS]] : tensor<4x32xf32>, tensor<16x48xf32>, tensor<4x4xf32>, tensor<4x4xi32>
func.func @ffn_train_static_t_biases(%x: tensor<4x32xf32>, %l: tensor<4x16xf32>, %wu: tensor<16x48x32xf32>, %wd: tensor<16x32x24xf32>, %b: tensor<16xf32>, %bu: tensor<16x48xf32>, %bd: tensor<16x32xf32>) -> (tensor<4x32xf32>, tensor<16x48xf32>, tensor<4x4xf32>, tensor<4x4xi32>) {
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd bias(%b : tensor<16xf32>) expert_bias(%bu, %bd : tensor<16x48xf32>, tensor<16x32xf32>) k = 4 scoring = sigmoid activation = silu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32, alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>
      -> tensor<4x32xf32>, tensor<16x48xf32>, tensor<4x4xf32>, tensor<4x4xi32>
  return %y, %h, %w, %i : tensor<4x32xf32>, tensor<16x48xf32>, tensor<4x4xf32>, tensor<4x4xi32>
}

// moe.ffn_grad's saved form: no route, no forward up GEMM, no down GEMM of
// the forward; the metadata comes from the saved ids, glu from the saved h,
// and the two grouped matmuls are the dgrads (w_down, then w_up, both
// transposed); route_grad and the wgrads use the saved ids and h.
// CHECK-LABEL: func.func @ffn_grad_saved
// CHECK-SAME: (%[[DY:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>, %[[H:[a-z0-9_]+]]: tensor<?x256xbf16>, %[[W:[a-z0-9_]+]]: tensor<?x2xf32>, %[[IDS:[a-z0-9_]+]]: tensor<?x2xi32>)
// CHECK-NOT:  moe.route %
// CHECK:      %[[CS:[a-z0-9_]+]] = moe.cumsum %[[IDS]] num_experts = 8
// CHECK-NEXT: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]]
// CHECK-NEXT: %[[OFF:[a-z0-9_]+]] = moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
// CHECK-NEXT: %[[ROWS:[a-z0-9_]+]] = moe.gather %[[X]][%[[TOK]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = moe.glu %[[H]] silu concat : tensor<?x256xbf16> -> tensor<?x128xbf16>
// CHECK-NOT:  moe.grouped_matmul {{.*}}offsets
// CHECK:      %[[WE:[a-z0-9_]+]] = tensor.expand_shape %[[W]] {{\[}}[0], [1, 2]]
// CHECK-NOT:  moe.route %
// CHECK-NOT:  moe.grouped_matmul {{.*}}offsets
// CHECK:      %[[DO:[a-z0-9_]+]] = moe.gather %[[DY]][%[[TOK]]]
// CHECK-NEXT: %[[G:[a-z0-9_]+]] = moe.grouped_matmul %[[DO]], %[[WD]] offsets(%[[OFF]] : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x128x64xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: %[[DWR:[a-z0-9_]+]] = moe.row_dot %[[G]], %[[A]]
// CHECK-NOT:  moe.route %
// CHECK-NOT:  moe.grouped_matmul {{.*}}offsets
// CHECK:      moe.route_grad %{{.*}}, %[[L]], %[[IDS]] scoring = softmax {normalize = true}
// CHECK-NOT:  moe.grouped_matmul {{.*}}offsets
// CHECK:      %[[DH:[a-z0-9_]+]] = moe.glu_grad %{{.*}}, %[[H]] silu concat
// CHECK-NEXT: moe.grouped_matmul %[[DH]], %[[WU]] offsets(%[[OFF]] : tensor<9xi32>) {transpose_rhs = true} : tensor<?x256xbf16>, tensor<8x64x256xbf16> -> tensor<?x64xbf16>
// CHECK-NOT:  moe.grouped_matmul %
// CHECK:      moe.combine %{{.*}} weights(
// CHECK-NEXT: moe.grouped_matmul_wgrad
// CHECK-NEXT: moe.grouped_matmul_wgrad %[[ROWS]], %[[DH]]
// CHECK-NEXT: return
func.func @ffn_grad_saved(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>, %h: tensor<?x256xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> (tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>) {
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
}

// With the routing bias, the expert biases and transposed weights: the
// saved group follows the expert biases; still no route and no up GEMM
// (the third grouped matmul is <dO, b_down> against b_down as E x H x 1).
// CHECK-LABEL: func.func @ffn_grad_saved_biases_transposed
// CHECK-SAME: %[[H:[a-z0-9_]+]]: tensor<16x48xf32>, %[[W:[a-z0-9_]+]]: tensor<4x4xf32>, %[[IDS:[a-z0-9_]+]]: tensor<4x4xi32>)
// CHECK-NOT:  moe.route %
// CHECK:      moe.cumsum %[[IDS]] num_experts = 16
// CHECK:      %[[A:[a-z0-9_]+]] = moe.glu %[[H]] silu interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32}
// CHECK-NOT:  moe.route %
// CHECK:      moe.grouped_matmul %{{.*}} : tensor<16x32xf32>, tensor<16x32x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: tensor.expand_shape
// CHECK-NEXT: moe.grouped_matmul %{{.*}} : tensor<16x32xf32>, tensor<16x32x1xf32> -> tensor<16x1xf32>
// CHECK-NOT:  moe.route %
// CHECK:      moe.glu_grad %{{.*}}, %[[H]] silu interleaved
// CHECK-NEXT: moe.grouped_matmul %{{.*}} : tensor<16x48xf32>, tensor<16x48x32xf32> -> tensor<16x32xf32>
// CHECK-NOT:  moe.grouped_matmul %
// CHECK:      return
func.func @ffn_grad_saved_biases_transposed(%dy: tensor<4x32xf32>, %x: tensor<4x32xf32>, %l: tensor<4x16xf32>, %wu: tensor<16x48x32xf32>, %wd: tensor<16x32x24xf32>, %b: tensor<16xf32>, %bu: tensor<16x48xf32>, %bd: tensor<16x32xf32>, %h: tensor<16x48xf32>, %w: tensor<4x4xf32>, %i: tensor<4x4xi32>) -> (tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>, tensor<16x48xf32>, tensor<16x32xf32>) {
  %r:6 = moe.ffn_grad %dy, %x, %l, %wu, %wd bias(%b : tensor<16xf32>) expert_bias(%bu, %bd : tensor<16x48xf32>, tensor<16x32xf32>) saved(%h, %w, %i : tensor<16x48xf32>, tensor<4x4xf32>, tensor<4x4xi32>) k = 4 scoring = sigmoid activation = silu layout = interleaved
      {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32, alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32, transpose_weights = true}
      : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>
      -> tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>, tensor<16x48xf32>, tensor<16x32xf32>
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x48x32xf32>, tensor<16x32x24xf32>, tensor<16x48xf32>, tensor<16x32xf32>
}

// The pair: the backward reads the forward's h (its up GEMM) and routing
// (its route), and builds one route and one up GEMM in all.
// CHECK-LABEL: func.func @ffn_train_then_grad
// CHECK:      %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]] = moe.route
// CHECK:      %[[ROWS:[a-z0-9_]+]] = moe.gather
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]]
// CHECK-NOT:  moe.route %
// CHECK:      moe.cumsum %[[IDS]]
// CHECK:      moe.glu %[[H]]
// CHECK:      moe.route_grad %{{.*}}, %{{.*}}, %[[IDS]]
// CHECK:      moe.glu_grad %{{.*}}, %[[H]]
// CHECK:      return
func.func @ffn_train_then_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>) {
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return %y, %r#0, %r#1, %r#2, %r#3 : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
}

// The saved bytes per token, for Mixtral-8x7B's layer (H 4096, I 14336,
// E 8, k 2, bf16; T dynamic): moe.ffn_train's saved results are h
// (T*k) x 2I bf16 = 2 * 28672 * 2 = 114688 bytes a token, weights T x 2 f32
// = 8 and ids T x 2 i32 = 8: k * 2I * sizeof(F) + 8k = 114704 bytes a token,
// beside x's H * sizeof(F) = 8192 that the caller keeps anyway. The
// verifier accepts exactly these result types (invalid.mlir: every other
// is an error).
// BYTES-LABEL: func.func @saved_bytes_mixtral
// BYTES: moe.ffn_train
// BYTES-SAME: -> tensor<?x4096xbf16>, tensor<?x28672xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
func.func @saved_bytes_mixtral(%x: tensor<?x4096xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x4096x28672xbf16>, %wd: tensor<8x14336x4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?x28672xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) {
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x4096xbf16>, tensor<?x8xbf16>, tensor<8x4096x28672xbf16>, tensor<8x14336x4096xbf16>
      -> tensor<?x4096xbf16>, tensor<?x28672xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  return %y, %h, %w, %i : tensor<?x4096xbf16>, tensor<?x28672xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
}
