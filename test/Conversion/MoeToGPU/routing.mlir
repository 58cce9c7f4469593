// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=NOMOE

// Routing ops become one-thread-per-token-row kernels: 256-thread blocks,
// grid max(ceil(T / 256), 1), a guard `row < T`, operands read through
// read-only to_buffer views and results written to fresh allocations
// returned by `to_tensor restrict writable`. moe.route_dispatch becomes the
// route kernel followed by the one-block dispatch kernel.

// NOMOE-NOT: moe.

//===----------------------------------------------------------------------===//
// moe.topk
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @topk_dynamic(
// CHECK-SAME: %[[ARG:[a-z0-9_]+]]: tensor<?x8xf32>
// CHECK: %[[IN:[a-z0-9_]+]] = bufferization.to_buffer %[[ARG]] read_only : tensor<?x8xf32> to memref<?x8xf32, strided<[?, ?], offset: ?>>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[VALS:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: %[[IDX:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[T]], %c256 : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{[a-z0-9_#]+}}, %{{[a-z0-9_#]+}}) in (%{{[a-z0-9_#]+}} = %[[GRID]], %{{[a-z0-9_#]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_#]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TX:[a-z0-9_]+]], %{{[a-z0-9_#]+}}, %{{[a-z0-9_#]+}}) in (%{{[a-z0-9_#]+}} = %c256{{(_[0-9]+)?}}, %{{[a-z0-9_#]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_#]+}} = %c1{{(_[0-9]+)?}})
// CHECK: %[[BASE:[a-z0-9_]+]] = arith.muli %[[BX]], %c256{{(_[0-9]+)?}} : index
// CHECK: %[[ROW:[a-z0-9_]+]] = arith.addi %[[BASE]], %[[TX]] : index
// CHECK: %[[OK:[a-z0-9_]+]] = arith.cmpi ult, %[[ROW]], %[[T]] : index
// CHECK: scf.if %[[OK]]
// k = 2 selection passes over E = 8 experts.
// CHECK: scf.for %[[J:[a-z0-9_]+]] = %{{[a-z0-9_#]+}} to %c2 step
// CHECK: scf.for %{{[a-z0-9_#]+}} = %{{[a-z0-9_#]+}} to %c8 step
// CHECK: memref.load %[[IN]][%[[ROW]], %{{[a-z0-9_#]+}}]
// The pick is clamped to [0, E - 1] before it is used as an index.
// CHECK: arith.maxsi %{{[a-z0-9_#]+}}, %c0_i32
// CHECK: %[[PICK:[a-z0-9_]+]] = arith.minsi %{{[a-z0-9_#]+}}, %c7_i32 : i32
// CHECK: %[[PI:[a-z0-9_]+]] = arith.index_cast %[[PICK]] : i32 to index
// CHECK: %[[V:[a-z0-9_]+]] = memref.load %[[IN]][%[[ROW]], %[[PI]]]
// CHECK: memref.store %[[V]], %[[VALS]][%[[ROW]], %[[J]]] : memref<?x2xf32>
// CHECK: memref.store %[[PICK]], %[[IDX]][%[[ROW]], %[[J]]] : memref<?x2xi32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: %[[RV:[a-z0-9_]+]] = bufferization.to_tensor %[[VALS]] restrict writable : memref<?x2xf32> to tensor<?x2xf32>
// CHECK: %[[RI:[a-z0-9_]+]] = bufferization.to_tensor %[[IDX]] restrict writable : memref<?x2xi32> to tensor<?x2xi32>
// CHECK: return %[[RV]], %[[RI]]
func.func @topk_dynamic(%x: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// T = 0: the grid is clamped to one block whose threads all fail the guard.
// CHECK-LABEL: func.func @topk_zero_tokens(
// CHECK-NOT: memref.dim
// CHECK: memref.alloc() : memref<0x2xf16>
// CHECK: memref.alloc() : memref<0x2xi32>
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[C0:c0(_[0-9]+)?]], %c256 : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_#]+}} = %[[GRID]],
// CHECK: arith.cmpi ult, %{{[a-z0-9_#]+}}, %[[C0]] : index
// CHECK: return
func.func @topk_zero_tokens(%x: tensor<0x8xf16>) -> (tensor<0x2xf16>, tensor<0x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<0x8xf16> -> tensor<0x2xf16>, tensor<0x2xi32>
  return %v, %i : tensor<0x2xf16>, tensor<0x2xi32>
}

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

// Softmax + normalize from f16 logits: a row max (maximumf) and a sum of
// exps before the selection, no scratch buffers (n_group = 1).
// CHECK-LABEL: func.func @route_softmax(
// CHECK: %[[IN:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_#]+}} read_only : tensor<?x8xf16> to memref<?x8xf16, strided<[?, ?], offset: ?>>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[W:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: %[[IDX:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK-NOT: memref.alloc
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[T]], %c256 : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_#]+}} = %[[GRID]], {{.*}}) threads({{.*}}) in (%{{[a-z0-9_#]+}} = %c256{{(_[0-9]+)?}},
// CHECK: %[[OK:[a-z0-9_]+]] = arith.cmpi ult, %[[ROW:[a-z0-9_]+]], %[[T]] : index
// CHECK: scf.if %[[OK]]
// Row max of the sanitised logits.
// CHECK: %[[MAX:[a-z0-9_]+]] = scf.for {{.*}} -> (f32)
// CHECK: arith.extf %{{[a-z0-9_#]+}} : f16 to f32
// CHECK: arith.maximumf
// Row sum of exp(x - max).
// CHECK: %[[SUM:[a-z0-9_]+]] = scf.for {{.*}} -> (f32)
// CHECK: arith.subf %{{[a-z0-9_#]+}}, %[[MAX]] : f32
// CHECK: math.exp
// Selection of the k = 2 picks.
// CHECK: scf.for %{{[a-z0-9_#]+}} = %{{[a-z0-9_#]+}} to %c2 step
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[IDX]][%[[ROW]], %{{[a-z0-9_#]+}}] : memref<?x2xi32>
// Normalisation by the sum of the picked scores (1 when the sum is not > 0).
// CHECK: %[[PSUM:[a-z0-9_]+]] = scf.for {{.*}} -> (f32)
// CHECK: arith.divf %{{[a-z0-9_#]+}}, %[[SUM]] : f32
// CHECK: %[[POS:[a-z0-9_]+]] = arith.cmpf ogt, %[[PSUM]], %{{[a-z0-9_#]+}} : f32
// CHECK: %[[DEN:[a-z0-9_]+]] = arith.select %[[POS]], %[[PSUM]], %{{[a-z0-9_#]+}} : f32
// CHECK: scf.for
// CHECK: arith.divf %{{[a-z0-9_#]+}}, %[[DEN]] : f32
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[W]][%[[ROW]], %{{[a-z0-9_#]+}}] : memref<?x2xf32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[W]] restrict writable
// CHECK: bufferization.to_tensor %[[IDX]] restrict writable
// CHECK: return
func.func @route_softmax(%l: tensor<?x8xf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %w, %i = moe.route %l k = 2 scoring = softmax {normalize = true} : tensor<?x8xf16> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// Sigmoid + bias + group-limited top2_sum (E = 16, 8 groups of 2, keep 3)
// + scaling: T x n_group scratch buffers for the group scores and the kept
// mask, the bias added to the selection key only.
// CHECK-LABEL: func.func @route_sigmoid_bias_groups(
// CHECK: %[[IN:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_#]+}} read_only : tensor<?x16xbf16> to memref<?x16xbf16, strided<[?, ?], offset: ?>>
// CHECK: %[[BIAS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_#]+}} read_only : tensor<16xf32> to memref<16xf32, strided<[?], offset: ?>>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[W:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x4xf32>
// CHECK: %[[IDX:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x4xi32>
// CHECK: %[[GS:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x8xf32>
// CHECK: %[[KEPT:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x8xi32>
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[T]], %c256 : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_#]+}} = %[[GRID]],
// CHECK: %[[OK:[a-z0-9_]+]] = arith.cmpi ult, %[[ROW:[a-z0-9_]+]], %[[T]] : index
// CHECK: scf.if %[[OK]]
// Sigmoid scores: no softmax row max.
// CHECK-NOT: arith.maximumf
// Group scores: the two largest keys of each group of 2, summed.
// CHECK: scf.for %[[G:[a-z0-9_]+]] = %{{[a-z0-9_#]+}} to %c8 step
// CHECK: %[[TOP:[a-z0-9_]+]]:2 = scf.for
// CHECK-NOT: arith.maximumf
// CHECK: arith.extf %{{[a-z0-9_#]+}} : bf16 to f32
// CHECK: %[[NEG:[a-z0-9_]+]] = arith.negf
// CHECK-NEXT: %[[E:[a-z0-9_]+]] = math.exp %[[NEG]] : f32
// CHECK: %[[D:[a-z0-9_]+]] = arith.addf %{{[a-z0-9_#]+}}, %[[E]] : f32
// CHECK: %[[S:[a-z0-9_]+]] = arith.divf %{{[a-z0-9_#]+}}, %[[D]] : f32
// CHECK: %[[B:[a-z0-9_]+]] = memref.load %[[BIAS]][%{{[a-z0-9_#]+}}] : memref<16xf32, strided<[?], offset: ?>>
// CHECK: arith.addf %[[S]], %[[B]] : f32
// CHECK: %[[SUM2:[a-z0-9_]+]] = arith.addf %[[TOP]]#0, %[[TOP]]#1 : f32
// CHECK: memref.store %[[SUM2]], %[[GS]][%[[ROW]], %[[G]]] : memref<?x8xf32>
// Kept when fewer than topk_group = 3 groups rank before it.
// CHECK: scf.for %[[G2:[a-z0-9_]+]] = %{{[a-z0-9_#]+}} to %c8{{(_[0-9]+)?}} step
// CHECK: memref.load %[[GS]][%[[ROW]], %[[G2]]]
// CHECK: %[[BEFORE:[a-z0-9_]+]] = scf.for {{.*}} -> (i32)
// CHECK: %[[LT:[a-z0-9_]+]] = arith.cmpi slt, %[[BEFORE]], %c3_i32 : i32
// CHECK: %[[K:[a-z0-9_]+]] = arith.extui %[[LT]] : i1 to i32
// CHECK: memref.store %[[K]], %[[KEPT]][%[[ROW]], %[[G2]]] : memref<?x8xi32>
// Selection of k = 4 among the experts of kept groups (group = col / 2).
// CHECK: scf.for %{{[a-z0-9_#]+}} = %{{[a-z0-9_#]+}} to %c4 step
// CHECK: scf.for %[[COL:[a-z0-9_]+]] = %{{[a-z0-9_#]+}} to %c16{{(_[0-9]+)?}} step
// CHECK: %[[GRP:[a-z0-9_]+]] = arith.divui %[[COL]], %c2{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[KEPT]][%[[ROW]], %[[GRP]]] : memref<?x8xi32>
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[IDX]][%[[ROW]], %{{[a-z0-9_#]+}}] : memref<?x4xi32>
// Weights: unbiased sigmoid score / normaliser * 2.5.
// CHECK: %[[PSUM:[a-z0-9_]+]] = scf.for {{.*}} -> (f32)
// CHECK: %[[POS:[a-z0-9_]+]] = arith.cmpf ogt, %[[PSUM]], %{{[a-z0-9_#]+}} : f32
// CHECK: %[[DEN:[a-z0-9_]+]] = arith.select %[[POS]], %[[PSUM]], %{{[a-z0-9_#]+}} : f32
// CHECK: %[[SCALE:[a-z0-9_]+]] = arith.constant 2.500000e+00 : f32
// CHECK: %[[Q:[a-z0-9_]+]] = arith.divf %{{[a-z0-9_#]+}}, %[[DEN]] : f32
// CHECK-NEXT: %[[WV:[a-z0-9_]+]] = arith.mulf %[[Q]], %[[SCALE]] : f32
// CHECK-NEXT: memref.store %[[WV]], %[[W]][%[[ROW]], %{{[a-z0-9_#]+}}] : memref<?x4xf32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[W]] restrict writable
// CHECK: bufferization.to_tensor %[[IDX]] restrict writable
// CHECK: return
func.func @route_sigmoid_bias_groups(%l: tensor<?x16xbf16>, %b: tensor<16xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>) {
  %w, %i = moe.route %l bias(%b : tensor<16xf32>) k = 4 scoring = sigmoid
      {normalize = true, n_group = 8 : i64, topk_group = 3 : i64,
       group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32}
      : tensor<?x16xbf16> -> tensor<?x4xf32>, tensor<?x4xi32>
  return %w, %i : tensor<?x4xf32>, tensor<?x4xi32>
}

// group_score = max: the group score is the top key alone (no addf of the
// two running maxima).
// CHECK-LABEL: func.func @route_softmax_group_max(
// CHECK: %[[GS:[a-z0-9_]+]] = memref.alloc(%c4) : memref<?x4xf32>
// CHECK: memref.alloc(%c4) : memref<?x4xi32>
// CHECK: gpu.launch
// CHECK: scf.for %[[G:[a-z0-9_]+]] = %{{[a-z0-9_#]+}} to %c4{{(_[0-9]+)?}} step
// CHECK: %[[TOP:[a-z0-9_]+]]:2 = scf.for
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: memref.store %[[TOP]]#0, %[[GS]][%{{[a-z0-9_#]+}}, %[[G]]] : memref<?x4xf32>
// CHECK: return
func.func @route_softmax_group_max(%l: tensor<4x8xf32>) -> (tensor<4x3xbf16>, tensor<4x3xi32>) {
  %w, %i = moe.route %l k = 3 scoring = softmax
      {n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<max>}
      : tensor<4x8xf32> -> tensor<4x3xbf16>, tensor<4x3xi32>
  return %w, %i : tensor<4x3xbf16>, tensor<4x3xi32>
}

//===----------------------------------------------------------------------===//
// moe.route_dispatch
//===----------------------------------------------------------------------===//

// Route kernel (one thread per row), then the dispatch counting sort on the
// route's indices: one block of 1024 threads with a 1024 x (E + 1) scratch
// of per-thread histograms; no E*T-sized buffer.
// CHECK-LABEL: func.func @route_dispatch(
// CHECK: %[[IN:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_#]+}} read_only : tensor<?x8xf32>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[W:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: %[[IDX:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK: gpu.launch blocks({{.*}}) threads({{.*}}) in (%{{[a-z0-9_#]+}} = %c256{{(_[0-9]+)?}},
// CHECK: math.exp
// CHECK: gpu.terminator
// CHECK: %[[WT:[a-z0-9_]+]] = bufferization.to_tensor %[[W]] restrict writable : memref<?x2xf32> to tensor<?x2xf32>
// CHECK: %[[IT:[a-z0-9_]+]] = bufferization.to_tensor %[[IDX]] restrict writable : memref<?x2xi32> to tensor<?x2xi32>
// CHECK: %[[IB:[a-z0-9_]+]] = bufferization.to_buffer %[[IT]] read_only : tensor<?x2xi32> to memref<?x2xi32, strided<[?, ?], offset: ?>>
// CHECK: %[[T2:[a-z0-9_]+]] = memref.dim %[[IB]], %c0
// CHECK: %[[M:[a-z0-9_]+]] = arith.muli %[[T2]], %c2{{(_[0-9]+)?}} : index
// CHECK: %[[OFF:[a-z0-9_]+]] = memref.alloc() : memref<9xi32>
// CHECK: %[[REV:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[TOK:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[CNT:[a-z0-9_]+]] = memref.alloc() : memref<1024x9xi32>
// CHECK: %[[TOT:[a-z0-9_]+]] = memref.alloc() : memref<9xi32>
// CHECK-NOT: memref.alloc
// CHECK: %[[ONE:[a-z0-9_]+]] = arith.maxui %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_#]+}} = %[[ONE]], %{{[a-z0-9_#]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_#]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TX:[a-z0-9_]+]], %{{[a-z0-9_#]+}}, %{{[a-z0-9_#]+}}) in (%{{[a-z0-9_#]+}} = %c1024{{(_[0-9]+)?}},
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[CNT]][%[[TX]], %{{[a-z0-9_#]+}}] : memref<1024x9xi32>
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[TOT]][%{{[a-z0-9_#]+}}] : memref<9xi32>
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[OFF]][%{{[a-z0-9_#]+}}] : memref<9xi32>
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[REV]][%{{[a-z0-9_#]+}}] : memref<?xi32>
// CHECK: memref.store %{{[a-z0-9_#]+}}, %[[TOK]][%{{[a-z0-9_#]+}}] : memref<?xi32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: %[[O:[a-z0-9_]+]] = bufferization.to_tensor %[[OFF]] restrict writable : memref<9xi32> to tensor<9xi32>
// CHECK: %[[R:[a-z0-9_]+]] = bufferization.to_tensor %[[REV]] restrict writable
// CHECK: %[[TK:[a-z0-9_]+]] = bufferization.to_tensor %[[TOK]] restrict writable
// CHECK: return %[[WT]], %[[IT]], %[[O]], %[[R]], %[[TK]]
func.func @route_dispatch(%l: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>) {
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {normalize = true} : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %o, %r, %t : tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
}
