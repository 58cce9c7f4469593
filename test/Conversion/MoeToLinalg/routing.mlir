// RUN: moe-opt %s --convert-moe-to-linalg | FileCheck %s --implicit-check-not=moe.

// convert-moe-to-linalg lowers the routing ops to scf loops on tensors (the
// reference semantics the CPU pipeline runs).

// moe.topk: per row (outer loop), k selection rounds (middle loop), each a
// scan over the E = 8 entries (inner loop) for the best entry below the
// previous pick in the total order: NaN ranks last (cmpf uno), equal values
// go to the lower index (cmpi slt); the id is clamped into [0, E) before it
// indexes the row, so a row of NaNs still reads in bounds.
// CHECK-LABEL: func.func @topk(
// CHECK: %[[T:[a-z0-9_]+]] = tensor.dim %{{.*}}, %c0
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[T]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8
// CHECK: arith.cmpf uno
// CHECK: arith.cmpi slt
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf oeq
// CHECK: scf.yield
// CHECK: arith.maxsi %{{.*}}, %c0_i32
// CHECK-NEXT: arith.minsi %{{.*}}, %c7_i32
// CHECK: tensor.insert
// CHECK: tensor.insert
func.func @topk(%x: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// moe.route, softmax + normalize: NaN logits become -inf (cmpf uno +
// select), the row max (maximumf) and the sum of exp are two scans, the
// scores divide by the sum (a row of -inf gets scores 0: cmpf oeq on the
// max + select); the k picks use topk's order; the weights divide by the
// picks' sum, guarded against 0 (cmpf ogt + select), then scale.
// CHECK-LABEL: func.func @route_softmax(
// CHECK: scf.for
// CHECK: arith.cmpf uno
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: tensor.insert
// CHECK: arith.cmpi slt
// CHECK: arith.minsi %{{.*}}, %c7_i32
// CHECK: arith.addf
// CHECK: arith.cmpf ogt
// CHECK-NEXT: arith.select
// CHECK: arith.divf
// CHECK: arith.mulf
func.func @route_softmax(%l: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %w, %i = moe.route %l k = 2 scoring = softmax {normalize = true} : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// Sigmoid with a correction bias and group-limited selection (DeepSeek-V3
// style): the sigmoid scores (exp, 1 + e, divide), the biased copy (addf
// of the bias) that ranks the experts, and a group scan (4 groups of 4)
// before the picks.
// CHECK-LABEL: func.func @route_groups(
// CHECK: math.exp
// CHECK: tensor.extract %{{.*}} : tensor<16xf32>
// CHECK: arith.addf
// CHECK: scf.for %{{.*}} = %{{.*}} to %c4
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2
func.func @route_groups(%l: tensor<?x16xbf16>, %b: tensor<16xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %w, %i = moe.route %l bias(%b : tensor<16xf32>) k = 2 scoring = sigmoid {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32} : tensor<?x16xbf16> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// moe.route_grad, softmax + normalize: per row the forward's sanitised
// scores (the same scans as moe.route), the picks' sum S and dot D (ids
// outside [0, E) skipped: two cmpi + scf.if), ds at each pick
// (grad - D / S) / S guarded against S = 0 (cmpf ogt + select) times the
// scaling, <ds, s>, then s * (ds - <ds, s>) rounded into the row.
// CHECK-LABEL: func.func @route_grad(
// CHECK: arith.cmpf uno
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: scf.if
// CHECK: arith.cmpf ogt
// CHECK: arith.divf
// CHECK: arith.subf
// CHECK: arith.divf
// CHECK: arith.select
// CHECK: arith.mulf %cst
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @route_grad(%g: tensor<?x2xf32>, %l: tensor<?x8xbf16>, %i: tensor<?x2xi32>) -> tensor<?x8xbf16> {
  %r = moe.route_grad %g, %l, %i scoring = softmax {normalize = true, scaling = 2.5 : f32} : tensor<?x2xf32>, tensor<?x8xbf16>, tensor<?x2xi32> -> tensor<?x8xbf16>
  return %r : tensor<?x8xbf16>
}
