// RUN: moe-opt %s --convert-moe-to-linalg | FileCheck %s --implicit-check-not=moe.

// The data-movement ops as linalg.generic / scf on tensors; every index
// read from data is checked before it is used.

// moe.gather: one linalg.generic over (M, H); a row index outside [0, T)
// yields 0.0 instead of a read.
// CHECK-LABEL: func.func @gather(
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: scf.if
// CHECK: tensor.extract
// CHECK: } else {
// CHECK-NEXT: %[[ZERO:[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: scf.yield %[[ZERO]] : f32
func.func @gather(%x: tensor<?x16xf32>, %i: tensor<?xi32>) -> tensor<?x16xf32> {
  %g = moe.gather %x[%i] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}

// moe.scatter: the output starts zero (rows nothing writes stay zero); a
// target outside [0, M) drops the row.
// CHECK-LABEL: func.func @scatter(
// CHECK: linalg.fill ins(%cst : f32)
// CHECK: scf.for
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: scf.if
func.func @scatter(%x: tensor<?x16xf32>, %i: tensor<?xi32>) -> tensor<?x16xf32> {
  %s = moe.scatter %x[%i] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  return %s : tensor<?x16xf32>
}

// moe.combine: an f32 accumulator (the k slots a reduction dimension, in
// order), each bf16 slot widened and scaled by its weight, then one
// truncation to bf16.
// CHECK-LABEL: func.func @combine(
// CHECK: linalg.fill ins(%cst : f32) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @combine(%x: tensor<?x2x16xbf16>, %w: tensor<?x2xf32>) -> tensor<?x16xbf16> {
  %s = moe.combine %x weights(%w : tensor<?x2xf32>) : tensor<?x2x16xbf16> -> tensor<?x16xbf16>
  return %s : tensor<?x16xbf16>
}

// moe.combine_grad: one parallel generic over (t, j, h), the bf16 gradient
// row widened, scaled by the slot's weight, truncated once.
// CHECK-LABEL: func.func @combine_grad(
// CHECK-SAME: %[[G:[a-z0-9_]+]]: tensor<?x16xbf16>, %[[W:[a-z0-9_]+]]: tensor<?x2xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[G]], %[[W]] : tensor<?x16xbf16>, tensor<?x2xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.mulf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: -> tensor<?x2x16xbf16>
func.func @combine_grad(%g: tensor<?x16xbf16>, %w: tensor<?x2xf32>) -> tensor<?x2x16xbf16> {
  %d = moe.combine_grad %g weights(%w : tensor<?x2xf32>) : tensor<?x16xbf16> -> tensor<?x2x16xbf16>
  return %d : tensor<?x2x16xbf16>
}

// moe.indices_to_multihot: mask false, probabilities 0, positions -1 to
// start; each slot whose id is in [0, E) sets its expert's three entries.
// CHECK-LABEL: func.func @to_multihot(
// CHECK: linalg.fill ins(%false : i1)
// CHECK: linalg.fill ins(%cst : f32)
// CHECK: linalg.fill ins(%c-1_i32 : i32)
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2
// CHECK: arith.cmpi slt, %{{.*}}, %c8_i32
// CHECK: arith.cmpi sge, %{{.*}}, %c0_i32
// CHECK: scf.if
func.func @to_multihot(%i: tensor<?x2xi32>, %p: tensor<?x2xf32>) -> (tensor<?x8xi1>, tensor<?x8xf32>, tensor<?x8xi32>) {
  %m, %pm, %pos = moe.indices_to_multihot %i, %p num_experts = 8 : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x8xi1>, tensor<?x8xf32>, tensor<?x8xi32>
  return %m, %pm, %pos : tensor<?x8xi1>, tensor<?x8xf32>, tensor<?x8xi32>
}

// moe.multihot_to_indices: slots start 0; each expert whose position is in
// [0, k) writes its probability there.
// CHECK-LABEL: func.func @to_indices(
// CHECK: linalg.fill ins(%cst : f32)
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8
// CHECK: arith.cmpi slt, %{{.*}}, %c2_i32
// CHECK: arith.cmpi sge, %{{.*}}, %c0_i32
// CHECK: scf.if
func.func @to_indices(%pm: tensor<?x8xf32>, %pos: tensor<?x8xi32>) -> tensor<?x2xf32> {
  %p = moe.multihot_to_indices %pm, %pos k = 2 : tensor<?x8xf32>, tensor<?x8xi32> -> tensor<?x2xf32>
  return %p : tensor<?x2xf32>
}
