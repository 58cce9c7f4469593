// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(moe-fuse-gather-matmul))' | FileCheck %s

// CHECK-LABEL: func.func @fuses
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x16xf32>, %[[TOK:[a-z0-9_]+]]: tensor<?xi32>, %[[W:[a-z0-9_]+]]: tensor<4x16x8xf32>, %[[OFF:[a-z0-9_]+]]: tensor<5xi32>)
// CHECK-NOT: moe.gather
// CHECK: %[[R:[a-z0-9_]+]] = moe.expert_gemm %[[X]][%[[TOK]] : tensor<?xi32>], %[[W]] offsets(%[[OFF]] : tensor<5xi32>) : tensor<?x16xf32>, tensor<4x16x8xf32> -> tensor<?x8xf32>
// CHECK: return %[[R]]
func.func @fuses(%x: tensor<?x16xf32>, %tok: tensor<?xi32>, %w: tensor<4x16x8xf32>, %off: tensor<5xi32>) -> tensor<?x8xf32> {
  %rows = moe.gather %x[%tok] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  %h = moe.grouped_matmul %rows, %w offsets(%off : tensor<5xi32>) : tensor<?x16xf32>, tensor<4x16x8xf32> -> tensor<?x8xf32>
  return %h : tensor<?x8xf32>
}

// The gathered rows have another user: unchanged.
// CHECK-LABEL: func.func @gather_has_another_user
// CHECK: moe.gather
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_gemm
func.func @gather_has_another_user(%x: tensor<?x16xf32>, %tok: tensor<?xi32>, %w: tensor<4x16x8xf32>, %off: tensor<5xi32>) -> (tensor<?x8xf32>, tensor<?x16xf32>) {
  %rows = moe.gather %x[%tok] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  %h = moe.grouped_matmul %rows, %w offsets(%off : tensor<5xi32>) : tensor<?x16xf32>, tensor<4x16x8xf32> -> tensor<?x8xf32>
  return %h, %rows : tensor<?x8xf32>, tensor<?x16xf32>
}

// No gather feeding the matmul: unchanged.
// CHECK-LABEL: func.func @no_gather
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_gemm
func.func @no_gather(%x: tensor<?x16xf32>, %w: tensor<4x16x8xf32>, %off: tensor<5xi32>) -> tensor<?x8xf32> {
  %h = moe.grouped_matmul %x, %w offsets(%off : tensor<5xi32>) : tensor<?x16xf32>, tensor<4x16x8xf32> -> tensor<?x8xf32>
  return %h : tensor<?x8xf32>
}

// A weight gradient's gathered operand (either side) is read through the
// indices; the gathered copy goes away.
// CHECK-LABEL: func.func @wgrad_gathers
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x16xbf16>, %[[TOK:[a-z0-9_]+]]: tensor<?xi32>, %[[DH:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi32>)
// CHECK-NOT: moe.gather
// CHECK: %[[A:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[DH]], %[[X]][%[[TOK]] : tensor<?xi32>] offsets(%[[OFF]] : tensor<5xi32>) : tensor<?x8xbf16>, tensor<?x16xbf16> -> tensor<4x8x16xf32>
// CHECK: %[[B:[a-z0-9_]+]] = moe.grouped_matmul_wgrad %[[X]][%[[TOK]] : tensor<?xi32>], %[[DH]] offsets(%[[OFF]] : tensor<5xi32>) : tensor<?x16xbf16>, tensor<?x8xbf16> -> tensor<4x16x8xf32>
// CHECK: return %[[A]], %[[B]]
func.func @wgrad_gathers(%x: tensor<?x16xbf16>, %tok: tensor<?xi32>, %dh: tensor<?x8xbf16>, %off: tensor<5xi32>) -> (tensor<4x8x16xf32>, tensor<4x16x8xf32>) {
  %rows = moe.gather %x[%tok] : tensor<?x16xbf16>, tensor<?xi32> -> tensor<?x16xbf16>
  %a = moe.grouped_matmul_wgrad %dh, %rows offsets(%off : tensor<5xi32>) : tensor<?x8xbf16>, tensor<?x16xbf16> -> tensor<4x8x16xf32>
  %b = moe.grouped_matmul_wgrad %rows, %dh offsets(%off : tensor<5xi32>) : tensor<?x16xbf16>, tensor<?x8xbf16> -> tensor<4x16x8xf32>
  return %a, %b : tensor<4x8x16xf32>, tensor<4x16x8xf32>
}

// The gathered rows also feed something other than a weight gradient: the
// copy stays, and the weight gradient reads it.
// CHECK-LABEL: func.func @wgrad_gather_has_another_user
// CHECK: %[[ROWS:[a-z0-9_]+]] = moe.gather
// CHECK: moe.grouped_matmul_wgrad %{{.*}}, %[[ROWS]] offsets
func.func @wgrad_gather_has_another_user(%x: tensor<?x16xbf16>, %tok: tensor<?xi32>, %dh: tensor<?x8xbf16>, %off: tensor<5xi32>) -> (tensor<4x8x16xf32>, tensor<?x16xbf16>) {
  %rows = moe.gather %x[%tok] : tensor<?x16xbf16>, tensor<?xi32> -> tensor<?x16xbf16>
  %a = moe.grouped_matmul_wgrad %dh, %rows offsets(%off : tensor<5xi32>) : tensor<?x8xbf16>, tensor<?x16xbf16> -> tensor<4x8x16xf32>
  return %a, %rows : tensor<4x8x16xf32>, tensor<?x16xbf16>
}
