// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-fuse-dispatch))' | FileCheck %s

// CHECK-LABEL: func.func @fuses
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<?x2xi32>)
// CHECK-NOT: moe.cumsum
// CHECK: %[[OFF:[a-z0-9_]+]], %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.dispatch %[[IDS]] num_experts = 8 : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
// CHECK-NOT: moe.get_indices
// CHECK-NOT: moe.get_indptr
// CHECK: return %[[OFF]], %[[REV]], %[[TOK]]
func.func @fuses(%ids: tensor<?x2xi32>) -> (tensor<9xi32>, tensor<?xi32>, tensor<?xi32>) {
  %cs = moe.cumsum %ids num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
  %rev, %tok = moe.get_indices %cs, %ids : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  %off = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
  return %off, %rev, %tok : tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
}

// The cumsum itself escapes: it must stay.
// CHECK-LABEL: func.func @cumsum_has_another_user
// CHECK: moe.cumsum
// CHECK: moe.get_indices
// CHECK-NOT: moe.dispatch
func.func @cumsum_has_another_user(%ids: tensor<4x2xi32>) -> (tensor<32xi32>, tensor<8xi32>) {
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x2xi32> -> tensor<32xi32>
  %rev, %tok = moe.get_indices %cs, %ids : tensor<32xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
  return %cs, %rev : tensor<32xi32>, tensor<8xi32>
}

// An inclusive indptr has no moe.dispatch counterpart: unchanged.
// CHECK-LABEL: func.func @inclusive_indptr
// CHECK: moe.cumsum
// CHECK: moe.get_indptr {{.*}}inclusive = true
// CHECK-NOT: moe.dispatch
func.func @inclusive_indptr(%ids: tensor<4x2xi32>) -> tensor<8xi32> {
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x2xi32> -> tensor<32xi32>
  %end = moe.get_indptr %cs num_experts = 8 {inclusive = true} : tensor<32xi32> -> tensor<8xi32>
  return %end : tensor<8xi32>
}

// get_indices on other ids than the cumsum's: unchanged.
// CHECK-LABEL: func.func @different_ids
// CHECK: moe.cumsum
// CHECK-NOT: moe.dispatch
func.func @different_ids(%a: tensor<4x2xi32>, %b: tensor<4x2xi32>) -> tensor<8xi32> {
  %cs = moe.cumsum %a num_experts = 8 : tensor<4x2xi32> -> tensor<32xi32>
  %rev, %tok = moe.get_indices %cs, %b : tensor<32xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
  return %rev : tensor<8xi32>
}
