// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu=route-dispatch-small=false | FileCheck %s --check-prefix=SPLIT

// route-dispatch-small (the default): moe.route_dispatch allocates its five
// results, then the host picks, from T: T <= 32 and T * k <= 1024, one kernel of one
// 1024-thread block (each warp routes rows w, w + 32, ...; thread s ranks
// slot s within its warp by 32 shuffles, per-warp bucket counts in shared
// memory [32 x (E + 1)], their prefix over the warps, the block scan of the
// bucket totals into the offsets); else the route kernel and the three
// dispatch kernels write the same buffers. Off, the op is
// split into route + dispatch: four kernels, no branch.

// CHECK-LABEL: func.func @small(
// CHECK: %[[W:[a-z0-9_]+]] = memref.alloc(%[[T:[a-z0-9_]+]]) : memref<?x8xf32>
// CHECK: %[[IDS:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x8xi32>
// CHECK: %[[M:[a-z0-9_]+]] = arith.muli %[[T]], %c8 : index
// CHECK: %[[OFF:[a-z0-9_]+]] = memref.alloc() : memref<129xi32>
// CHECK: %[[REV:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[TOK:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[FEWS:[a-z0-9_]+]] = arith.cmpi ule, %[[M]], %c1024 : index
// CHECK: %[[FEWR:[a-z0-9_]+]] = arith.cmpi ule, %[[T]], %c32 : index
// CHECK: %[[SMALL:[a-z0-9_]+]] = arith.andi %[[FEWR]], %[[FEWS]] : i1
// CHECK: scf.if %[[SMALL]] {
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c1024{{(_[0-9]+)?}}, {{.*}}) workgroup(%[[COUNTS:[a-z0-9_]+]] : memref<32x129xi32, #gpu.address_space<workgroup>>, %[[OFFS:[a-z0-9_]+]] : memref<129xi32, #gpu.address_space<workgroup>>, %[[WSUM:[a-z0-9_]+]] : memref<32xi32, #gpu.address_space<workgroup>>) {
// Each warp routes its rows: the softmax row max, then the picks.
// CHECK: scf.for
// CHECK: arith.maximumf
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[IDS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[W]]
// CHECK: memref.store %c0_i32{{(_[0-9]+)?}}, %[[COUNTS]]
// CHECK: gpu.barrier
// Slot s: its bucket from the routed ids, its rank in the warp.
// CHECK: memref.load %[[IDS]]
// CHECK-COUNT-32: gpu.shuffle  idx
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[COUNTS]]
// CHECK: gpu.barrier
// Per bucket: the earlier warps' counts in place, the total; the scan.
// CHECK: scf.for {{.*}} to %c32{{(_[0-9]+)?}} step
// CHECK: memref.load %[[COUNTS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[COUNTS]]
// CHECK: gpu.shuffle  up
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[WSUM]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[WSUM]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[OFFS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[OFF]]
// CHECK: gpu.barrier
// Placement: offs[bucket] + earlier warps' count + rank.
// CHECK: memref.load %[[OFFS]]
// CHECK: memref.load %[[COUNTS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[REV]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[TOK]]
// CHECK: gpu.terminator
// CHECK: } else {
// The many-row form: the route kernel, then the three dispatch kernels.
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c128{{(_[0-9]+)?}},
// CHECK-COUNT-3: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return

// SPLIT-LABEL: func.func @small(
// SPLIT-NOT: scf.if %{{[a-z0-9_]+}} {
// SPLIT-COUNT-4: gpu.launch
// SPLIT-NOT: gpu.launch
// SPLIT: return
func.func @small(%l: tensor<?x128xbf16>) -> (tensor<?x8xf32>, tensor<?x8xi32>, tensor<129xi32>, tensor<?xi32>, tensor<?xi32>) {
  %w, %ids, %off, %rev, %tok = moe.route_dispatch %l k = 8 scoring = softmax {normalize = true}
      : tensor<?x128xbf16> -> tensor<?x8xf32>, tensor<?x8xi32>, tensor<129xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %off, %rev, %tok : tensor<?x8xf32>, tensor<?x8xi32>, tensor<129xi32>, tensor<?xi32>, tensor<?xi32>
}

// E = 512 > 256 (more bucket counters than the block's shared memory
// allows): split into route + dispatch even with the option.
// CHECK-LABEL: func.func @wide(
// CHECK-NOT: scf.if %{{[a-z0-9_]+}} {
// CHECK-COUNT-4: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @wide(%l: tensor<?x512xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<513xi32>, tensor<?xi32>, tensor<?xi32>) {
  %w, %ids, %off, %rev, %tok = moe.route_dispatch %l k = 2 scoring = softmax
      : tensor<?x512xf32> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<513xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %off, %rev, %tok : tensor<?x2xf32>, tensor<?x2xi32>, tensor<513xi32>, tensor<?xi32>, tensor<?xi32>
}
