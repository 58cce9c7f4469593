// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu=route-dispatch-small=false | FileCheck %s --check-prefix=SPLIT

// route-dispatch-small (the default): moe.route_dispatch allocates its five
// results, then the host picks, from T: T <= 64, one kernel of max(ceil(T /
// 8), 1) 256-thread blocks, all one thread-block cluster: block b's warps
// route rows 8 b .. 8 b + 7; thread s ranks the block's slot 64 b + s
// within its warp by 32 shuffles, per-warp bucket counts in shared memory
// [8 x (E + 1)] become the earlier warps' counts and the block's totals;
// after a cluster barrier every block reads all blocks' totals (mapa +
// distributed shared memory loads), scans the bucket totals into the
// offsets (block 0 writes them) and places its slots; a last cluster
// barrier keeps every block until its peers have read its totals. Else the
// route kernel and the three dispatch kernels write the same buffers. Off,
// the op is split into route + dispatch: four kernels, no branch.

// CHECK-LABEL: func.func @small(
// CHECK: %[[W:[a-z0-9_]+]] = memref.alloc(%[[T:[a-z0-9_]+]]) : memref<?x8xf32>
// CHECK: %[[IDS:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x8xi32>
// CHECK: %[[M:[a-z0-9_]+]] = arith.muli %[[T]], %c8 : index
// CHECK: %[[OFF:[a-z0-9_]+]] = memref.alloc() : memref<129xi32>
// CHECK: %[[REV:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[TOK:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[SMALL:[a-z0-9_]+]] = arith.cmpi ule, %[[T]], %c64 : index
// CHECK: scf.if %[[SMALL]] {
// CHECK: %[[BLOCKS:[a-z0-9_]+]] = arith.maxui %{{[a-z0-9_]+}}, %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch clusters({{.*}}) in (%{{[a-z0-9_]+}} = %[[BLOCKS]], {{.*}}) blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[BLOCKS]], {{.*}}) threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) workgroup(%[[COUNTS:[a-z0-9_]+]] : memref<8x129xi32, #gpu.address_space<workgroup>>, %[[BTOT:[a-z0-9_]+]] : memref<129xi32, #gpu.address_space<workgroup>>, %[[EARLIER:[a-z0-9_]+]] : memref<129xi32, #gpu.address_space<workgroup>>, %[[OFFS:[a-z0-9_]+]] : memref<129xi32, #gpu.address_space<workgroup>>, %[[WSUM:[a-z0-9_]+]] : memref<8xi32, #gpu.address_space<workgroup>>) {
// The first GEMM, launched programmatically, may start at once.
// CHECK: nvvm.griddepcontrol launch_dependents
// Each warp routes its row: the softmax row max, then the picks.
// CHECK: scf.if
// CHECK: arith.maximumf
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[IDS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[W]]
// CHECK: memref.store %c0_i32{{(_[0-9]+)?}}, %[[COUNTS]]
// CHECK: gpu.barrier
// Slot s: its bucket from the routed ids, its rank in the warp
// (match.any.sync, popc of the lanes below).
// CHECK: memref.load %[[IDS]]
// CHECK: nvvm.match.sync  any
// CHECK: nvvm.read.ptx.sreg.lanemask.lt
// CHECK: llvm.intr.ctpop
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[COUNTS]]
// CHECK: gpu.barrier
// Per bucket: the earlier warps' counts in place, the block's total.
// CHECK: scf.for {{.*}} to %c8{{(_[0-9]+)?}} step
// CHECK: memref.load %[[COUNTS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[COUNTS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[BTOT]]
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// Every block's totals of this thread's bucket, from its shared memory.
// CHECK-COUNT-8: nvvm.mapa
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[EARLIER]]
// The scan of the bucket totals.
// CHECK: gpu.shuffle  up
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[WSUM]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[WSUM]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[OFFS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[OFF]]
// CHECK: gpu.barrier
// Placement: offs[bucket] + earlier blocks' + earlier warps' count + rank.
// CHECK-DAG: memref.load %[[OFFS]]
// CHECK-DAG: memref.load %[[EARLIER]]
// CHECK-DAG: memref.load %[[COUNTS]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[REV]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[TOK]]
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NEXT: gpu.terminator
// CHECK: } else {
// The many-row form: the route kernel, then the three dispatch kernels.
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c512{{(_[0-9]+)?}},
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

// k = 40 > 32 (a block's 8 rows have more slots than threads): split too.
// CHECK-LABEL: func.func @manyk(
// CHECK-NOT: scf.if %{{[a-z0-9_]+}} {
// CHECK-COUNT-4: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @manyk(%l: tensor<?x64xf32>) -> (tensor<?x40xf32>, tensor<?x40xi32>, tensor<65xi32>, tensor<?xi32>, tensor<?xi32>) {
  %w, %ids, %off, %rev, %tok = moe.route_dispatch %l k = 40 scoring = softmax
      : tensor<?x64xf32> -> tensor<?x40xf32>, tensor<?x40xi32>, tensor<65xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %off, %rev, %tok : tensor<?x40xf32>, tensor<?x40xi32>, tensor<65xi32>, tensor<?xi32>, tensor<?xi32>
}
