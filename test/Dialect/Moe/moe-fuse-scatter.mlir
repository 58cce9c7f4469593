// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-fuse-scatter))' | FileCheck %s

// CHECK-LABEL: func.func @fuses
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<?x8xf32>, %[[W2:[a-z0-9_]+]]: tensor<4x8x16xf32>, %[[IDS:[a-z0-9_]+]]: tensor<?x2xi32>, %[[WTS:[a-z0-9_]+]]: tensor<?x2xf32>, %[[T:[a-z0-9_]+]]: index)
// CHECK: %[[OFF:[a-z0-9_]+]], %[[REV:[a-z0-9_]+]], %{{.*}} = moe.dispatch %[[IDS]]
// CHECK: %[[FLAT:[a-z0-9_]+]] = tensor.collapse_shape %[[WTS]] {{\[}}[0, 1]] : tensor<?x2xf32> into tensor<?xf32>
// CHECK: %[[O:[a-z0-9_]+]] = moe.expert_gemm %[[A]], %[[W2]] offsets(%[[OFF]] : tensor<5xi32>) scatter(%[[REV]] : tensor<?xi32>) scale(%[[FLAT]] : tensor<?xf32>)
// CHECK-NOT: moe.scatter
// CHECK: %[[P:[a-z0-9_]+]] = tensor.expand_shape %[[O]] {{\[}}[0, 1], [2]] output_shape [%[[T]], 2, 16]
// CHECK: %[[Y:[a-z0-9_]+]] = moe.combine %[[P]] : tensor<?x2x16xf32> -> tensor<?x16xf32>
// CHECK: return %[[Y]]
func.func @fuses(%a: tensor<?x8xf32>, %w2: tensor<4x8x16xf32>, %ids: tensor<?x2xi32>, %wts: tensor<?x2xf32>, %t: index) -> tensor<?x16xf32> {
  %off, %rev, %tok = moe.dispatch %ids num_experts = 4 : tensor<?x2xi32> -> tensor<5xi32>, tensor<?xi32>, tensor<?xi32>
  %o = moe.grouped_matmul %a, %w2 offsets(%off : tensor<5xi32>) : tensor<?x8xf32>, tensor<4x8x16xf32> -> tensor<?x16xf32>
  %s = moe.scatter %o[%rev] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  %p = tensor.expand_shape %s [[0, 1], [2]] output_shape [%t, 2, 16] : tensor<?x16xf32> into tensor<?x2x16xf32>
  %y = moe.combine %p weights(%wts : tensor<?x2xf32>) : tensor<?x2x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// Scatter indices that are not a dispatch permutation: the order rows are
// written in could matter, so nothing fuses.
// CHECK-LABEL: func.func @arbitrary_scatter_indices
// CHECK: moe.scatter
// CHECK: moe.combine {{.*}} weights(
func.func @arbitrary_scatter_indices(%a: tensor<8x8xf32>, %w2: tensor<4x8x16xf32>, %off: tensor<5xi32>, %rev: tensor<8xi32>, %wts: tensor<4x2xf32>) -> tensor<4x16xf32> {
  %o = moe.grouped_matmul %a, %w2 offsets(%off : tensor<5xi32>) : tensor<8x8xf32>, tensor<4x8x16xf32> -> tensor<8x16xf32>
  %s = moe.scatter %o[%rev] : tensor<8x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
  %p = tensor.expand_shape %s [[0, 1], [2]] output_shape [4, 2, 16] : tensor<8x16xf32> into tensor<4x2x16xf32>
  %y = moe.combine %p weights(%wts : tensor<4x2xf32>) : tensor<4x2x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// The scattered copy is also returned: unchanged.
// CHECK-LABEL: func.func @scatter_has_another_user
// CHECK: moe.scatter
// CHECK: moe.combine {{.*}} weights(
func.func @scatter_has_another_user(%a: tensor<8x8xf32>, %w2: tensor<4x8x16xf32>, %ids: tensor<4x2xi32>, %wts: tensor<4x2xf32>) -> (tensor<4x16xf32>, tensor<8x16xf32>) {
  %off, %rev, %tok = moe.dispatch %ids num_experts = 4 : tensor<4x2xi32> -> tensor<5xi32>, tensor<8xi32>, tensor<8xi32>
  %o = moe.grouped_matmul %a, %w2 offsets(%off : tensor<5xi32>) : tensor<8x8xf32>, tensor<4x8x16xf32> -> tensor<8x16xf32>
  %s = moe.scatter %o[%rev] : tensor<8x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
  %p = tensor.expand_shape %s [[0, 1], [2]] output_shape [4, 2, 16] : tensor<8x16xf32> into tensor<4x2x16xf32>
  %y = moe.combine %p weights(%wts : tensor<4x2xf32>) : tensor<4x2x16xf32> -> tensor<4x16xf32>
  return %y, %s : tensor<4x16xf32>, tensor<8x16xf32>
}

// Without routing weights (a layer's input gradient: each token's rows
// summed): the epilogue scatters without a scale.
// CHECK-LABEL: func.func @fuses_unweighted
// CHECK: %[[OFF:[a-z0-9_]+]], %[[REV:[a-z0-9_]+]], %{{.*}} = moe.dispatch
// CHECK: %[[O:[a-z0-9_]+]] = moe.expert_gemm %{{.*}}, %{{.*}} offsets(%[[OFF]] : tensor<5xi32>) scatter(%[[REV]] : tensor<?xi32>) :
// CHECK-NOT: scale(
// CHECK-NOT: moe.scatter
// CHECK: %[[P:[a-z0-9_]+]] = tensor.expand_shape %[[O]]
// CHECK: moe.combine %[[P]] : tensor<?x2x16xf32> -> tensor<?x16xf32>
func.func @fuses_unweighted(%a: tensor<?x8xf32>, %w2: tensor<4x8x16xf32>, %ids: tensor<?x2xi32>, %t: index) -> tensor<?x16xf32> {
  %off, %rev, %tok = moe.dispatch %ids num_experts = 4 : tensor<?x2xi32> -> tensor<5xi32>, tensor<?xi32>, tensor<?xi32>
  %o = moe.grouped_matmul %a, %w2 offsets(%off : tensor<5xi32>) : tensor<?x8xf32>, tensor<4x8x16xf32> -> tensor<?x16xf32>
  %s = moe.scatter %o[%rev] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  %p = tensor.expand_shape %s [[0, 1], [2]] output_shape [%t, 2, 16] : tensor<?x16xf32> into tensor<?x2x16xf32>
  %y = moe.combine %p : tensor<?x2x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
