// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-fuse-route-dispatch))' | FileCheck %s

// CHECK-LABEL: func.func @fuses
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x8xf32>, %[[B:[a-z0-9_]+]]: tensor<8xf32>)
// CHECK: %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]], %[[OFF:[a-z0-9_]+]], %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.route_dispatch %[[L]] bias(%[[B]] : tensor<8xf32>) k = 2 scoring = sigmoid {group_score = #moe.group_score<top2_sum>, n_group = 4 : i64, topk_group = 2 : i64}
// CHECK-NOT: moe.route %
// CHECK-NOT: moe.dispatch
// CHECK: return %[[W]], %[[IDS]], %[[OFF]], %[[REV]], %[[TOK]]
func.func @fuses(%l: tensor<?x8xf32>, %b: tensor<8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>) {
  %w, %ids = moe.route %l bias(%b : tensor<8xf32>) k = 2 scoring = sigmoid {n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>} : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %off, %rev, %tok = moe.dispatch %ids num_experts = 8 : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %off, %rev, %tok : tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
}

// Ids that do not come from moe.route: unchanged.
// CHECK-LABEL: func.func @ids_not_routed
// CHECK: moe.dispatch
// CHECK-NOT: moe.route_dispatch
func.func @ids_not_routed(%ids: tensor<?x2xi32>) -> tensor<9xi32> {
  %off, %rev, %tok = moe.dispatch %ids num_experts = 8 : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return %off : tensor<9xi32>
}
