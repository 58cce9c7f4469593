// RUN: moe-opt %s --convert-moe-to-linalg | FileCheck %s --implicit-check-not=moe.

// The dispatch metadata as sequential scf loops on tensors (the reference
// semantics; the fused moe.dispatch and the GPU kernels compute the same).

// moe.cumsum: an E * T counter tensor zero-filled, one count per slot whose
// id is in [0, E) (cmpi slt E, cmpi sge 0) at position id * T + t, then an
// inclusive running sum over all E * T entries.
// CHECK-LABEL: func.func @cumsum(
// CHECK: %[[T:[a-z0-9_]+]] = tensor.dim %{{.*}}, %c0
// CHECK: %[[N:[a-z0-9_]+]] = arith.muli %c8, %[[T]] : index
// CHECK: %[[Z:[a-z0-9_]+]] = tensor.empty(%[[N]]) : tensor<?xi32>
// CHECK: linalg.fill ins(%c0_i32 : i32) outs(%[[Z]] : tensor<?xi32>)
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2
// CHECK: arith.cmpi slt, %{{.*}}, %c8_i32
// CHECK: arith.cmpi sge, %{{.*}}, %c0_i32
// CHECK: scf.if
// CHECK: arith.muli
// CHECK: arith.addi
// CHECK: arith.addi %{{.*}}, %c1_i32
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args
// CHECK: arith.addi
// CHECK: tensor.insert
func.func @cumsum(%i: tensor<?x2xi32>) -> tensor<?xi32> {
  %c = moe.cumsum %i num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
  return %c : tensor<?xi32>
}

// moe.get_indices: both maps start as -1 (linalg.fill); each slot in range
// goes to its cumsum position (a row naming an expert twice: an inner scan
// over the row's earlier slots, cmpi eq); out-of-range slots take the
// positions after all dispatched rows; every write is bounds-checked.
// CHECK-LABEL: func.func @get_indices(
// CHECK: linalg.fill ins(%c-1_i32 : i32)
// CHECK: linalg.fill ins(%c-1_i32
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2
// CHECK: arith.cmpi eq
// CHECK: scf.if
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: scf.if
// CHECK: tensor.insert
// CHECK: tensor.insert
func.func @get_indices(%c: tensor<?xi32>, %i: tensor<?x2xi32>) -> (tensor<?xi32>, tensor<?xi32>) {
  %r, %t = moe.get_indices %c, %i : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  return %r, %t : tensor<?xi32>, tensor<?xi32>
}

// moe.get_indptr (exclusive): E + 1 offsets, zero-filled, one end offset per
// expert read from the cumsum (guarded for T = 0: cmpi sgt on its length).
// CHECK-LABEL: func.func @get_indptr(
// CHECK: tensor.empty() : tensor<9xi32>
// CHECK: linalg.fill ins(%c0_i32 : i32)
// CHECK: arith.cmpi sgt, %{{.*}}, %c0{{(_[0-9]+)?}} : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8
// CHECK: scf.if
// CHECK: tensor.insert
func.func @get_indptr(%c: tensor<?xi32>) -> tensor<9xi32> {
  %p = moe.get_indptr %c num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
  return %p : tensor<9xi32>
}
