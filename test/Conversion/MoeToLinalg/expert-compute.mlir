// RUN: moe-opt %s --convert-moe-to-linalg | FileCheck %s --implicit-check-not=moe.

// The expert computations on tensors: the grouped matmul as one matmul-like
// linalg.generic per expert over its row range, the GLU elementwise, and
// moe.ffn through its decomposition.

// moe.grouped_matmul: a zero-filled f32 output (rows outside the experts'
// ranges stay zero), a loop over the E = 8 experts, each slicing its rows
// of lhs and its weight matrix, with bf16 operands widened to f32 before
// the multiply-add.
// CHECK-LABEL: func.func @grouped_matmul(
// CHECK: linalg.fill ins(%cst : f32) outs(%{{.*}} : tensor<?x32xf32>)
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8
// CHECK: tensor.extract_slice
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<64x32xbf16>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: tensor.insert_slice
func.func @grouped_matmul(%a: tensor<?x64xbf16>, %w: tensor<8x64x32xbf16>, %off: tensor<9xi32>) -> tensor<?x32xf32> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x32xbf16> -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// moe.glu, gpt-oss style (interleaved, alpha 1.702, limit 7, up_bias 1):
// gate and up as strided slices, gate clamped above, up clamped to
// [-limit, limit], silu(alpha * gate) = gate / (1 + exp(-alpha * gate)),
// times (up + 1).
// CHECK-LABEL: func.func @glu(
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [%{{.*}}, 32] [1, 2]
// CHECK: tensor.extract_slice %{{.*}}[0, 1] [%{{.*}}, 32] [1, 2]
// CHECK: linalg.generic
// CHECK: arith.minimumf
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: arith.mulf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: arith.addf
// CHECK: arith.mulf
func.func @glu(%h: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %r = moe.glu %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x64xf32> -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}

// moe.glu_grad, the same attributes: one generic with two results (the
// gate's and the up's gradient, each zeroed past its clamp with a select),
// inserted into the input's interleaved columns.
// CHECK-LABEL: func.func @glu_grad(
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [%{{.*}}, 32] [1, 2]
// CHECK: tensor.extract_slice %{{.*}}[0, 1] [%{{.*}}, 32] [1, 2]
// CHECK: %[[G:.*]]:2 = linalg.generic
// CHECK: arith.cmpf ole
// CHECK: math.exp
// CHECK: arith.select
// CHECK: arith.select
// CHECK: linalg.yield
// CHECK: %[[I0:.*]] = tensor.insert_slice %[[G]]#0 into %{{.*}}[0, 0] [%{{.*}}, 32] [1, 2]
// CHECK: %[[I1:.*]] = tensor.insert_slice %[[G]]#1 into %[[I0]][0, 1] [%{{.*}}, 32] [1, 2]
// CHECK: return %[[I1]]
func.func @glu_grad(%d: tensor<?x32xf32>, %h: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = moe.glu_grad %d, %h silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x32xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}

// moe.grouped_matmul_wgrad: per expert, the group's rows of both operands
// contracted over the rows (d2) into a K x N block initialised from the
// accumulator's slice, then inserted at the expert.
// CHECK-LABEL: func.func @grouped_matmul_wgrad(
// CHECK-SAME: %[[L:[a-z0-9_]+]]: tensor<?x96xbf16>, %[[R:[a-z0-9_]+]]: tensor<?x64xbf16>, %{{.*}}: tensor<9xi32>, %[[A:[a-z0-9_]+]]: tensor<8x96x64xf32>
// CHECK: scf.for %[[E:.*]] = %{{.*}} iter_args(%[[OUT:.*]] = %[[A]])
// CHECK: %[[INIT:.*]] = tensor.extract_slice %[[A]][%[[E]], 0, 0] [1, 96, 64]
// CHECK: %[[LR:.*]] = tensor.extract_slice %[[L]][%{{.*}}, 0] [%{{.*}}, 96]
// CHECK: %[[RR:.*]] = tensor.extract_slice %[[R]][%{{.*}}, 0] [%{{.*}}, 64]
// CHECK: %[[B:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[LR]], %[[RR]] : tensor<?x96xbf16>, tensor<?x64xbf16>) outs(%[[INIT]] : tensor<96x64xf32>)
// CHECK: tensor.insert_slice %[[B]] into %[[OUT]][%[[E]], 0, 0] [1, 96, 64]
func.func @grouped_matmul_wgrad(%dy: tensor<?x96xbf16>, %x: tensor<?x64xbf16>, %off: tensor<9xi32>, %acc: tensor<8x96x64xf32>) -> tensor<8x96x64xf32> {
  %r = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<9xi32>) accumulate(%acc : tensor<8x96x64xf32>) : tensor<?x96xbf16>, tensor<?x64xbf16> -> tensor<8x96x64xf32>
  return %r : tensor<8x96x64xf32>
}

// moe.row_dot: one generic over (row, column), the column a reduction, into
// the accumulator; without one into zeros, then rounded to the result type.
// CHECK-LABEL: func.func @row_dot(
// CHECK-SAME: %[[A:[a-z0-9_]+]]: tensor<?x32xbf16>, %[[B:[a-z0-9_]+]]: tensor<?x32xbf16>, %[[C:[a-z0-9_]+]]: tensor<?xf32>
// CHECK: %[[D:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<?x32xbf16>, tensor<?x32xbf16>) outs(%[[C]] : tensor<?xf32>)
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK-SAME: -> tensor<?xf32>
// CHECK: %[[E:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<?x32xbf16>, tensor<?x32xbf16>) outs(%[[Z]] : tensor<?xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[D]]
func.func @row_dot(%a: tensor<?x32xbf16>, %b: tensor<?x32xbf16>, %c: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xbf16>) {
  %x = moe.row_dot %a, %b accumulate(%c : tensor<?xf32>) : tensor<?x32xbf16>, tensor<?x32xbf16> -> tensor<?xf32>
  %y = moe.row_dot %a, %b : tensor<?x32xbf16>, tensor<?x32xbf16> -> tensor<?xbf16>
  return %x, %y : tensor<?xf32>, tensor<?xbf16>
}

// moe.ffn: decomposed and lowered in the same pass, nothing of moe is
// left (implicit check); the two expert matmuls remain, one per GEMM.
// CHECK-LABEL: func.func @ffn(
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: tensor<64x96xbf16>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: tensor<48x64xbf16>
func.func @ffn(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// moe.ffn_grad: decomposed and lowered in the same pass, nothing of moe is
// left (implicit check): among the rest the row_dot reduction (routing
// weights' gradient) and the wgrad contractions of both weights and of the
// ones column (the expert-bias gradients).
// CHECK-LABEL: func.func @ffn_grad(
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<48x64xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<64x96xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<1x96xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<1x64xf32>)
func.func @ffn_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>, %bu: tensor<8x96xbf16>, %bd: tensor<8x64xbf16>)
    -> (tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>, tensor<8x96xf32>, tensor<8x64xf32>) {
  %r:6 = moe.ffn_grad %dy, %x, %l, %wu, %wd expert_bias(%bu, %bd : tensor<8x96xbf16>, tensor<8x64xbf16>) k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>, tensor<8x96xf32>, tensor<8x64xf32>
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>, tensor<8x96xf32>, tensor<8x64xf32>
}

// moe.ffn_train and moe.ffn_grad's saved form fed from it: both decomposed
// and lowered in the same pass, nothing of moe left (implicit check); the
// backward's row_dot and both wgrad contractions among the rest
// (moe-decompose-ffn-train.mlir checks which GEMMs the saved form has).
// CHECK-LABEL: func.func @ffn_train_then_saved_grad(
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<48x64xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<64x96xf32>)
// CHECK: return
func.func @ffn_train_then_saved_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>)
    -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>) {
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x96xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<?x96xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>
  return %y, %r#0, %r#1, %r#2, %r#3 : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>
}
