// RUN: moe-opt %s "--convert-moe-to-gpu=route-dispatch-small=false" | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=NOMOE
// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=NOI64
// RUN: moe-opt %s "--convert-moe-to-gpu=chip=sm_75 gemm=simt" | FileCheck %s --check-prefix=SM75
// RUN: not moe-opt %s --convert-moe-to-gpu=warp-select=i32 2>&1 | FileCheck %s --check-prefix=BAD

// Routing ops with E <= 512 (and n_group <= 32) become one-warp-per-row
// kernels: 128-thread blocks of 4 warps, grid max(ceil(T / 4), 1), warp
// w = tid / 32 of block b takes row 4 * b + w behind a warp-uniform guard
// `row < T`, lane l = tid % 32 holds the entries l * R + r (R = ceil(E /
// 32)). An entry's selection key is the i32 order key of its value (NaN
// 1, 0 = not selectable); each of the k picks is the lanes' best key, its
// warp maximum (redux.sync umax), the lowest entry holding it (umin), and
// the pick leaving the candidates; a lane of at most 4 entries sorts them
// once and offers its head. On chips before sm_80 (SM75) the two
// reductions are butterflies of 5 xor shuffles. No i64 is left in these
// kernels (NOI64): the first form, i64 keys (order key) << 32 | ~entry
// and a butterfly maximum below the previous pick's, was removed with its
// option warp-select (bench/NOTES.md v22), which is now unknown (BAD).
// Operands are read through read-only to_buffer views, results are
// written to fresh allocations returned by `to_tensor restrict writable`.
// Larger E or n_group keep the one-thread-per-row kernel. With
// route-dispatch-small=false, moe.route_dispatch becomes the route kernel
// followed by the three dispatch kernels.

// NOMOE-NOT: moe.

// BAD: no such option warp-select

// (route_dispatch's cluster kernel forms 64-bit shared addresses.)
// NOI64-NOT: i64
// NOI64-LABEL: func.func @route_dispatch(

// Before sm_80 (no redux.sync): both warp reductions are butterflies of 5
// xor shuffles (umax, then umin).
// SM75-LABEL: func.func @topk_dynamic(
// SM75-NOT: nvvm.redux
// SM75: scf.for {{.*}} -> (i32, i32, i32) {
// SM75-COUNT-5: gpu.shuffle  xor
// SM75: arith.maxui
// SM75-COUNT-5: gpu.shuffle  xor
// SM75: arith.minui
// SM75: scf.yield
// SM75-NOT: nvvm.redux
// SM75: return

//===----------------------------------------------------------------------===//
// moe.topk
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @topk_dynamic(
// CHECK-SAME: %[[ARG:[a-zA-Z0-9_]+]]: tensor<?x8xf32>
// CHECK: %[[IN:[a-zA-Z0-9_]+]] = bufferization.to_buffer %[[ARG]] read_only : tensor<?x8xf32> to memref<?x8xf32, strided<[?, ?], offset: ?>>
// CHECK: %[[T:[a-zA-Z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[VALS:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: %[[IDX:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK-NOT: memref.alloc
// CHECK: %[[NB:[a-zA-Z0-9_]+]] = arith.ceildivui %[[T]], %c4 : index
// CHECK: %[[GRID:[a-zA-Z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %[[GRID]], %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TX:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %c128{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}})
// CHECK: %[[WARP:[a-zA-Z0-9_]+]] = arith.divui %[[TX]], %c32{{(_[0-9]+)?}} : index
// CHECK: %[[LANE:[a-zA-Z0-9_]+]] = arith.remui %[[TX]], %c32{{(_[0-9]+)?}} : index
// CHECK: %[[BASE:[a-zA-Z0-9_]+]] = arith.muli %[[BX]], %c4{{(_[0-9]+)?}} : index
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = arith.addi %[[BASE]], %[[WARP]] : index
// CHECK: %[[OK:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[ROW]], %[[T]] : index
// CHECK: scf.if %[[OK]] {
// E = 8 < 32: one entry per lane, lanes >= 8 read a clamped column and get
// key 0 (never selected).
// CHECK: %[[COL:[a-zA-Z0-9_]+]] = arith.minui %{{[a-zA-Z0-9_]+}}, %c7 : index
// CHECK: %[[V:[a-zA-Z0-9_]+]] = memref.load %[[IN]][%[[ROW]], %[[COL]]]
// Order key: -0 -> +0, sign-flipped bits, NaN 0 and then 1 (0 is "not
// selectable"); the lane's entry index.
// CHECK: arith.cmpf oeq, %[[V]], %{{[a-zA-Z0-9_]+}} : f32
// CHECK: arith.bitcast %{{[a-zA-Z0-9_]+}} : f32 to i32
// CHECK: arith.cmpf uno, %[[V]], %[[V]] : f32
// CHECK: %[[OK0:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %c0_i32{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_]+}} : i32
// CHECK: %[[NAN:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[OK0]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[KEY:[a-zA-Z0-9_]+]] = arith.select %[[NAN]], %c1_i32, %[[OK0]] : i32
// CHECK: %[[INE:[a-zA-Z0-9_]+]] = arith.cmpi ult, %{{[a-zA-Z0-9_]+}}, %c8 : index
// CHECK: %[[SEL:[a-zA-Z0-9_]+]] = arith.select %[[INE]], %[[KEY]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[ENTRY:[a-zA-Z0-9_]+]] = arith.index_cast %{{[a-zA-Z0-9_]+}} : index to i32
// k = 2 passes. A lane's entries are sorted once (key descending, entry
// ascending; one entry here, so no exchange): the state is the lane's keys,
// entries and its slot pick.
// CHECK: %[[PICKS:[a-zA-Z0-9_]+]]:3 = scf.for %[[J:[a-zA-Z0-9_]+]] = %{{[a-zA-Z0-9_#]+}} to %c2 step %{{[a-zA-Z0-9_#]+}} iter_args(%[[K0:[a-zA-Z0-9_]+]] = %[[SEL]], %[[E0:[a-zA-Z0-9_]+]] = %[[ENTRY]], %[[MINE:[a-zA-Z0-9_]+]] = %{{[a-zA-Z0-9_#]+}}) -> (i32, i32, i32) {
// CHECK-NOT: gpu.shuffle
// The warp's best head key, the lowest head entry offering it.
// CHECK: %[[BEST:[a-zA-Z0-9_]+]] = nvvm.redux.sync  umax %[[K0]], %c-1_i32{{(_[0-9]+)?}} : i32 -> i32
// CHECK: %[[HOLDS:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[K0]], %[[BEST]] : i32
// CHECK: %[[OFFER:[a-zA-Z0-9_]+]] = arith.select %[[HOLDS]], %[[E0]], %c-1_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[LOW:[a-zA-Z0-9_]+]] = nvvm.redux.sync  umin %[[OFFER]], %c-1_i32{{(_[0-9]+)?}} : i32 -> i32
// The pick, clamped to [0, E - 1] (0 when no key is left); its owner pops
// its head.
// CHECK: %[[LEFT:[a-zA-Z0-9_]+]] = arith.cmpi ne, %[[BEST]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: arith.maxsi %[[LOW]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[CL:[a-zA-Z0-9_]+]] = arith.minsi %{{[a-zA-Z0-9_]+}}, %c7_i32 : i32
// CHECK: %[[PICK:[a-zA-Z0-9_]+]] = arith.select %[[LEFT]], %[[CL]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[MATCH:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[E0]], %[[LOW]] : i32
// CHECK: %[[POP:[a-zA-Z0-9_]+]] = arith.andi %[[MATCH]], %[[LEFT]] : i1
// CHECK: %[[K1:[a-zA-Z0-9_]+]] = arith.select %[[POP]], %c0_i32{{(_[0-9]+)?}}, %[[K0]] : i32
// CHECK: %[[E1:[a-zA-Z0-9_]+]] = arith.select %[[POP]], %c-1_i32{{(_[0-9]+)?}}, %[[E0]] : i32
// Lane j keeps pick j.
// CHECK: %[[IS:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[J]], %{{[a-zA-Z0-9_]+}} : index
// CHECK: %[[NEXT:[a-zA-Z0-9_]+]] = arith.select %[[IS]], %[[PICK]], %[[MINE]] : i32
// CHECK: scf.yield %[[K1]], %[[E1]], %[[NEXT]] : i32, i32, i32
// CHECK-NOT: gpu.shuffle
// Lane j < k stores slot j: the value at the pick and the pick.
// CHECK: %[[SLOT:[a-zA-Z0-9_]+]] = arith.addi %{{[a-zA-Z0-9_]+}}, %[[LANE]] : index
// CHECK: %[[HAS:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[SLOT]], %c2{{(_[0-9]+)?}} : index
// CHECK: scf.if %[[HAS]] {
// CHECK: %[[PI:[a-zA-Z0-9_]+]] = arith.index_cast %[[PICKS]]#2 : i32 to index
// CHECK: %[[PV:[a-zA-Z0-9_]+]] = memref.load %[[IN]][%[[ROW]], %[[PI]]]
// CHECK: memref.store %[[PV]], %[[VALS]][%[[ROW]], %[[SLOT]]] : memref<?x2xf32>
// CHECK: memref.store %[[PICKS]]#2, %[[IDX]][%[[ROW]], %[[SLOT]]] : memref<?x2xi32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: %[[RV:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[VALS]] restrict writable : memref<?x2xf32> to tensor<?x2xf32>
// CHECK: %[[RI:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[IDX]] restrict writable : memref<?x2xi32> to tensor<?x2xi32>
// CHECK: return %[[RV]], %[[RI]]
func.func @topk_dynamic(%x: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// T = 0: the grid is clamped to one block whose warps all fail the guard.
// CHECK-LABEL: func.func @topk_zero_tokens(
// CHECK-NOT: memref.dim
// CHECK: memref.alloc() : memref<0x2xf16>
// CHECK: memref.alloc() : memref<0x2xi32>
// CHECK: %[[NB:[a-zA-Z0-9_]+]] = arith.ceildivui %[[C0:c0(_[0-9]+)?]], %c4 : index
// CHECK: %[[GRID:[a-zA-Z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-zA-Z0-9_#]+}} = %[[GRID]],
// CHECK: arith.cmpi ult, %{{[a-zA-Z0-9_#]+}}, %[[C0]] : index
// CHECK: return
func.func @topk_zero_tokens(%x: tensor<0x8xf16>) -> (tensor<0x2xf16>, tensor<0x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<0x8xf16> -> tensor<0x2xf16>, tensor<0x2xi32>
  return %v, %i : tensor<0x2xf16>, tensor<0x2xi32>
}

// k = 40 > 32 over E = 40: R = 2 entries per lane (lanes >= 20 hold none),
// two slot registers per lane (slots l and l + 32), stored behind
// `slot < 40` for the second only. A lane's two entries are sorted by one
// compare-exchange (a larger key, or the same key and a lower entry, goes
// first); the two keys, the two entries and the two slot registers are
// loop-carried, and the pick's owner pops its head (the second moves up).
// CHECK-LABEL: func.func @topk_two_regs(
// CHECK: gpu.launch
// CHECK: arith.muli %{{[a-zA-Z0-9_]+}}, %c2{{(_[0-9]+)?}} : index
// CHECK: arith.minui %{{[a-zA-Z0-9_]+}}, %c39 : index
// CHECK: %[[LT2:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[EB:[a-zA-Z0-9_]+]], %[[EA:[a-zA-Z0-9_]+]] : i32
// CHECK: %[[EQ2:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[B:[a-zA-Z0-9_]+]], %[[A:[a-zA-Z0-9_]+]] : i32
// CHECK: %[[TIE:[a-zA-Z0-9_]+]] = arith.andi %[[EQ2]], %[[LT2]] : i1
// CHECK: %[[GT2:[a-zA-Z0-9_]+]] = arith.cmpi ugt, %[[B]], %[[A]] : i32
// CHECK: %[[SWAP:[a-zA-Z0-9_]+]] = arith.ori %[[GT2]], %[[TIE]] : i1
// CHECK: %[[FIRST:[a-zA-Z0-9_]+]] = arith.select %[[SWAP]], %[[B]], %[[A]] : i32
// CHECK: %[[SECOND:[a-zA-Z0-9_]+]] = arith.select %[[SWAP]], %[[A]], %[[B]] : i32
// CHECK: %[[EFIRST:[a-zA-Z0-9_]+]] = arith.select %[[SWAP]], %[[EB]], %[[EA]] : i32
// CHECK: %[[ESECOND:[a-zA-Z0-9_]+]] = arith.select %[[SWAP]], %[[EA]], %[[EB]] : i32
// CHECK: scf.for {{.*}} to %c40{{(_[0-9]+)?}} step {{.*}} iter_args(%[[H:[a-zA-Z0-9_]+]] = %[[FIRST]], %[[N:[a-zA-Z0-9_]+]] = %[[SECOND]], %[[HE:[a-zA-Z0-9_]+]] = %[[EFIRST]], %[[NE:[a-zA-Z0-9_]+]] = %[[ESECOND]], {{.*}}) -> (i32, i32, i32, i32, i32, i32) {
// CHECK-NOT: gpu.shuffle
// CHECK: %[[BEST2:[a-zA-Z0-9_]+]] = nvvm.redux.sync  umax %[[H]], %c-1_i32{{(_[0-9]+)?}} : i32 -> i32
// CHECK: %[[HOLDS2:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[H]], %[[BEST2]] : i32
// CHECK: %[[OFFER2:[a-zA-Z0-9_]+]] = arith.select %[[HOLDS2]], %[[HE]], %c-1_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[LOW2:[a-zA-Z0-9_]+]] = nvvm.redux.sync  umin %[[OFFER2]], %c-1_i32{{(_[0-9]+)?}} : i32 -> i32
// CHECK: %[[MATCH2:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[HE]], %[[LOW2]] : i32
// CHECK: %[[POP2:[a-zA-Z0-9_]+]] = arith.andi %[[MATCH2]], %{{[a-zA-Z0-9_]+}} : i1
// CHECK: %[[H1:[a-zA-Z0-9_]+]] = arith.select %[[POP2]], %[[N]], %[[H]] : i32
// CHECK: %[[N1:[a-zA-Z0-9_]+]] = arith.select %[[POP2]], %c0_i32{{(_[0-9]+)?}}, %[[N]] : i32
// CHECK: %[[HE1:[a-zA-Z0-9_]+]] = arith.select %[[POP2]], %[[NE]], %[[HE]] : i32
// CHECK: %[[NE1:[a-zA-Z0-9_]+]] = arith.select %[[POP2]], %c-1_i32{{(_[0-9]+)?}}, %[[NE]] : i32
// CHECK-NOT: gpu.shuffle
// CHECK: scf.yield %[[H1]], %[[N1]], %[[HE1]], %[[NE1]], %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} : i32, i32, i32, i32, i32, i32
// CHECK-NOT: scf.if
// CHECK: memref.store %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}}[%{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}}] : memref<?x40xf32>
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_]+}}[%{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}}] : memref<?x40xi32>
// CHECK: arith.cmpi ult, %{{[a-zA-Z0-9_]+}}, %c40{{(_[0-9]+)?}} : index
// CHECK: scf.if
// CHECK: memref.store
// CHECK: memref.store
// CHECK: gpu.terminator
func.func @topk_two_regs(%x: tensor<?x40xf32>) -> (tensor<?x40xf32>, tensor<?x40xi32>) {
  %v, %i = moe.topk %x k = 40 : tensor<?x40xf32> -> tensor<?x40xf32>, tensor<?x40xi32>
  return %v, %i : tensor<?x40xf32>, tensor<?x40xi32>
}

// Five registers per lane (E = 160 > 4 * 32): no sort; each pass takes
// every lane's best of its five keys (the first of the largest: its
// entries ascend), the warp's best, the lowest entry offering it, and the
// pick's key is cleared.
// CHECK-LABEL: func.func @topk_five_regs(
// CHECK: scf.for {{.*}} to %c3{{(_[0-9]+)?}} step {{.*}} -> (i32, i32, i32, i32, i32, i32) {
// CHECK-COUNT-5: arith.cmpi ugt
// CHECK: %[[LKEY:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} : i32
// CHECK-NEXT: %[[LENT:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} : i32
// CHECK: %[[BEST5:[a-zA-Z0-9_]+]] = nvvm.redux.sync  umax %[[LKEY]], %c-1_i32{{(_[0-9]+)?}} : i32 -> i32
// CHECK: %[[HOLDS5:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[LKEY]], %[[BEST5]] : i32
// CHECK: arith.select %[[HOLDS5]], %[[LENT]], %c-1_i32{{(_[0-9]+)?}} : i32
// CHECK: nvvm.redux.sync  umin
// CHECK-COUNT-5: arith.cmpi eq
// CHECK: scf.yield
func.func @topk_five_regs(%x: tensor<?x160xf32>) -> (tensor<?x3xf32>, tensor<?x3xi32>) {
  %v, %i = moe.topk %x k = 3 : tensor<?x160xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  return %v, %i : tensor<?x3xf32>, tensor<?x3xi32>
}

// E = 1024 > 512: one thread per row (256-thread blocks), k selection
// passes over the row, no shuffles.
// CHECK-LABEL: func.func @topk_wide(
// CHECK: arith.ceildivui %{{[a-zA-Z0-9_]+}}, %c256 : index
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-zA-Z0-9_#]+}} = %c256{{(_[0-9]+)?}},
// CHECK-NOT: gpu.shuffle
// CHECK: scf.for %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}} to %c2 step
// CHECK: scf.for %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}} to %c1024 step
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.terminator
func.func @topk_wide(%x: tensor<?x1024xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<?x1024xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

// Softmax + normalize from f16 logits, E = 8: 512-thread blocks of 16
// rows (one per warp; a warp past T computes on row 0 and stores nothing,
// so that all reach the barriers), the row max as a maximumf butterfly,
// the exponentials once, written to a padded 16 x 33 shared row per warp;
// lane j of warp 0 adds row j's in expert order (32 entries, those past E
// are 0) and hands the sums back through shared memory; the scores; no
// scratch buffers. Each pick also fetches its score from the lane holding
// it (entry / R) and adds it to the normalising sum in slot order.
// CHECK-LABEL: func.func @route_softmax(
// CHECK: %[[IN:[a-zA-Z0-9_]+]] = bufferization.to_buffer %{{[a-zA-Z0-9_#]+}} read_only : tensor<?x8xf16> to memref<?x8xf16, strided<[?, ?], offset: ?>>
// CHECK: %[[T:[a-zA-Z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[W:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: %[[IDX:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK-NOT: memref.alloc
// CHECK: %[[NB:[a-zA-Z0-9_]+]] = arith.ceildivui %[[T]], %c16 : index
// CHECK: %[[GRID:[a-zA-Z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-zA-Z0-9_#]+}} = %[[GRID]], {{.*}}) threads(%[[TX:[a-zA-Z0-9_]+]], {{.*}}) in (%{{[a-zA-Z0-9_#]+}} = %c512{{(_[0-9]+)?}}, {{.*}}) workgroup(%[[EXPS:[a-zA-Z0-9_]+]] : memref<16x33xf32, #gpu.address_space<workgroup>>, %[[SUMS:[a-zA-Z0-9_]+]] : memref<16xf32, #gpu.address_space<workgroup>>) {
// CHECK: %[[WARP:[a-zA-Z0-9_]+]] = arith.divui %[[TX]], %c32 : index
// CHECK: %[[LANE:[a-zA-Z0-9_]+]] = arith.remui %[[TX]], %c32{{(_[0-9]+)?}} : index
// CHECK: %[[ROW0:[a-zA-Z0-9_]+]] = arith.addi %{{[a-zA-Z0-9_]+}}, %[[WARP]] : index
// CHECK: %[[OK:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[ROW0]], %[[T]] : index
// CHECK: %[[ANY:[a-zA-Z0-9_]+]] = arith.cmpi ugt, %[[T]], %c0{{(_[0-9]+)?}} : index
// CHECK: scf.if %[[ANY]] {
// CHECK: %[[ROW:[a-zA-Z0-9_]+]] = arith.select %[[OK]], %[[ROW0]], %c0{{(_[0-9]+)?}} : index
// Sanitised logit (NaN -> -inf, +inf -> max finite), -inf past E.
// CHECK: arith.extf %{{[a-zA-Z0-9_#]+}} : f16 to f32
// CHECK: arith.cmpf uno
// CHECK: %[[X:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}}, %cst : f32
// Row max.
// CHECK: %[[M0:[a-zA-Z0-9_]+]] = arith.maximumf %cst, %[[X]] : f32
// CHECK: gpu.shuffle  xor %[[M0]], %c16_i32
// CHECK: gpu.shuffle  xor %{{[a-zA-Z0-9_]+}}, %c1_i32
// CHECK: %[[MAX:[a-zA-Z0-9_]+]] = arith.maximumf %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} : f32
// CHECK: %[[D:[a-zA-Z0-9_]+]] = arith.subf %[[X]], %[[MAX]] : f32
// CHECK: %[[EX:[a-zA-Z0-9_]+]] = math.exp %[[D]] : f32
// Row sum, in expert order, by lane j of warp 0 for row j.
// CHECK: memref.store %[[EX]], %[[EXPS]][%[[WARP]], %{{[a-zA-Z0-9_]+}}] : memref<16x33xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK: %[[L0:[a-zA-Z0-9_]+]] = memref.load %[[EXPS]][%[[LANE]], %c0{{(_[0-9]+)?}}] : memref<16x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P0:[a-zA-Z0-9_]+]] = arith.addf %cst{{(_[0-9]+)?}}, %[[L0]] : f32
// CHECK: %[[L1:[a-zA-Z0-9_]+]] = memref.load %[[EXPS]][%[[LANE]], %c1{{(_[0-9]+)?}}] : memref<16x33xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P1:[a-zA-Z0-9_]+]] = arith.addf %[[P0]], %[[L1]] : f32
// CHECK-COUNT-30: arith.addf
// CHECK: memref.store %{{[a-zA-Z0-9_]+}}, %[[SUMS]][%[[LANE]]] : memref<16xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-NEXT: %[[SUM:[a-zA-Z0-9_]+]] = memref.load %[[SUMS]][%[[WARP]]] : memref<16xf32, #gpu.address_space<workgroup>>
// CHECK: %[[DEAD:[a-zA-Z0-9_]+]] = arith.cmpf oeq, %[[MAX]], %cst : f32
// CHECK: %[[Q:[a-zA-Z0-9_]+]] = arith.divf %[[EX]], %[[SUM]] : f32
// CHECK: %[[S:[a-zA-Z0-9_]+]] = arith.select %[[DEAD]], %{{[a-zA-Z0-9_]+}}, %[[Q]] : f32
// The selection key of the score (0 past E).
// CHECK: arith.bitcast %{{[a-zA-Z0-9_]+}} : f32 to i32
// CHECK: %[[SKEY:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %c1_i32{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_]+}} : i32
// CHECK: %[[RKEY:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %[[SKEY]], %c0_i32{{(_[0-9]+)?}} : i32
// Selection of the k = 2 picks, carrying the lane's key, entry and score,
// the score sum and the lane's slot (pick, score).
// CHECK: scf.for %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}} to %c2 step %{{[a-zA-Z0-9_#]+}} iter_args(%[[RK:[a-zA-Z0-9_]+]] = %[[RKEY]], %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}}, %[[RS:[a-zA-Z0-9_]+]] = %[[S]], %[[PSUM:[a-zA-Z0-9_]+]] = %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}}) -> (i32, i32, f32, f32, i32, f32) {
// CHECK-NOT: gpu.shuffle
// CHECK: nvvm.redux.sync  umax %[[RK]], %c-1_i32{{(_[0-9]+)?}} : i32 -> i32
// CHECK: nvvm.redux.sync  umin
// CHECK-NOT: gpu.shuffle
// CHECK: %[[OWNER:[a-zA-Z0-9_]+]] = arith.divui %{{[a-zA-Z0-9_]+}}, %c1_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[PS:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}} = gpu.shuffle  idx %[[RS]], %[[OWNER]], %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: arith.addf %[[PSUM]], %[[PS]] : f32
// CHECK: scf.yield
// Normalisation by the sum of the picked scores (1 when it is not > 0).
// CHECK: %[[POS:[a-zA-Z0-9_]+]] = arith.cmpf ogt, %[[LOOP:[a-zA-Z0-9_]+]]#3, %{{[a-zA-Z0-9_]+}} : f32
// CHECK: %[[DEN:[a-zA-Z0-9_]+]] = arith.select %[[POS]], %[[LOOP]]#3, %{{[a-zA-Z0-9_]+}} : f32
// CHECK: scf.if %[[OK]]
// CHECK: scf.if
// CHECK: memref.store %[[LOOP]]#4, %[[IDX]][%[[ROW]], %{{[a-zA-Z0-9_#]+}}] : memref<?x2xi32>
// CHECK: arith.divf %[[LOOP]]#5, %[[DEN]] : f32
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[W]][%[[ROW]], %{{[a-zA-Z0-9_#]+}}] : memref<?x2xf32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[W]] restrict writable
// CHECK: bufferization.to_tensor %[[IDX]] restrict writable
// CHECK: return
func.func @route_softmax(%l: tensor<?x8xf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %w, %i = moe.route %l k = 2 scoring = softmax {normalize = true} : tensor<?x8xf16> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// E = 256 (8 entries per lane, more than kSharedSumRegs = 4): 128-thread
// blocks of 4 rows, no shared memory, the row sum handed from lane to lane
// (32 idx shuffles, 8 adds each). R = 8 > 4: no sort, the 8 keys are
// loop-carried (with the score sum and the slot's pick and score).
// CHECK-LABEL: func.func @route_softmax_wide(
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-zA-Z0-9_#]+}} = %c128{{(_[0-9]+)?}}, {{.*}}) {
// CHECK: math.exp
// CHECK-COUNT-8: arith.addf
// CHECK: gpu.shuffle  idx %{{[a-zA-Z0-9_]+}}, %c0_i32,
// CHECK-COUNT-31: gpu.shuffle  idx
// CHECK: scf.for {{.*}} to %c8{{(_[0-9]+)?}} step {{.*}} -> (i32, i32, i32, i32, i32, i32, i32, i32, f32, i32, f32) {
// CHECK-COUNT-8: arith.cmpi ugt
// CHECK: nvvm.redux.sync  umax
// CHECK: nvvm.redux.sync  umin
// CHECK: scf.yield
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @route_softmax_wide(%l: tensor<?x256xbf16>) -> (tensor<?x8xf32>, tensor<?x8xi32>) {
  %w, %i = moe.route %l k = 8 scoring = softmax {normalize = true} : tensor<?x256xbf16> -> tensor<?x8xf32>, tensor<?x8xi32>
  return %w, %i : tensor<?x8xf32>, tensor<?x8xi32>
}

// Sigmoid + bias + group-limited top2_sum (E = 16, 8 groups of 2, keep 3)
// + scaling: no scratch buffers. The bias goes into the selection key only.
// A group is 2 lanes here: each lane's top-2, one xor-1 merge step (two
// shuffles), the sum, group g's score broadcast from lane 2g; the kept
// mask has bit g set when fewer than 3 groups rank before g (ugt for a
// later group, uge for an earlier one); experts of dropped groups get key
// 0.
// CHECK-LABEL: func.func @route_sigmoid_bias_groups(
// CHECK: %[[IN:[a-zA-Z0-9_]+]] = bufferization.to_buffer %{{[a-zA-Z0-9_#]+}} read_only : tensor<?x16xbf16> to memref<?x16xbf16, strided<[?, ?], offset: ?>>
// CHECK: %[[BIAS:[a-zA-Z0-9_]+]] = bufferization.to_buffer %{{[a-zA-Z0-9_#]+}} read_only : tensor<16xf32> to memref<16xf32, strided<[?], offset: ?>>
// CHECK: %[[T:[a-zA-Z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[W:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x4xf32>
// CHECK: %[[IDX:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x4xi32>
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch
// CHECK: scf.if
// Sigmoid scores: no softmax row max.
// CHECK-NOT: arith.maximumf
// CHECK: arith.extf %{{[a-zA-Z0-9_#]+}} : bf16 to f32
// CHECK: %[[NEG:[a-zA-Z0-9_]+]] = arith.negf
// CHECK-NEXT: %[[E:[a-zA-Z0-9_]+]] = math.exp %[[NEG]] : f32
// CHECK: %[[D:[a-zA-Z0-9_]+]] = arith.addf %{{[a-zA-Z0-9_#]+}}, %[[E]] : f32
// CHECK: %[[S:[a-zA-Z0-9_]+]] = arith.divf %{{[a-zA-Z0-9_#]+}}, %[[D]] : f32
// CHECK: %[[B:[a-zA-Z0-9_]+]] = memref.load %[[BIAS]][%{{[a-zA-Z0-9_#]+}}] : memref<16xf32, strided<[?], offset: ?>>
// CHECK: arith.addf %[[S]], %[[B]] : f32
// CHECK-NOT: arith.maximumf
// CHECK: %[[BKEY:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %c1_i32{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_]+}} : i32
// CHECK: %[[SEL:[a-zA-Z0-9_]+]] = arith.select %{{[a-zA-Z0-9_]+}}, %[[BKEY]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[G0:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}} = gpu.shuffle  xor %{{[a-zA-Z0-9_]+}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32 : f32
// CHECK: %[[G1:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}} = gpu.shuffle  xor %{{[a-zA-Z0-9_]+}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: %[[GS:[a-zA-Z0-9_]+]] = arith.addf %{{[a-zA-Z0-9_]+}}, %{{[a-zA-Z0-9_]+}} : f32
// CHECK: gpu.shuffle  idx %[[GS]], %c0_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle  idx %[[GS]], %c2_i32, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle  idx %[[GS]], %c14_i32, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: %[[LG:[a-zA-Z0-9_]+]] = arith.divui %{{[a-zA-Z0-9_]+}}, %c2{{(_[0-9]+)?}} : index
// Group 0: all 7 others rank before it only with a strictly larger key.
// CHECK-COUNT-7: arith.cmpi ugt
// CHECK: arith.cmpi slt, %{{[a-zA-Z0-9_]+}}, %c3_i32 : i32
// CHECK: arith.cmpi uge
// CHECK: %[[GI:[a-zA-Z0-9_]+]] = arith.minui %[[LG]], %c31 : index
// CHECK-NEXT: %[[G32:[a-zA-Z0-9_]+]] = arith.index_cast %[[GI]] : index to i32
// CHECK: %[[SH:[a-zA-Z0-9_]+]] = arith.shrui %{{[a-zA-Z0-9_]+}}, %[[G32]] : i32
// CHECK: %[[ALLOWED:[a-zA-Z0-9_]+]] = arith.cmpi ne, %{{[a-zA-Z0-9_]+}}, %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[KEY:[a-zA-Z0-9_]+]] = arith.select %[[ALLOWED]], %[[SEL]], %c0_i32{{(_[0-9]+)?}} : i32
// Selection of k = 4 over the allowed keys (the lane's key, entry and
// unbiased score, the score sum, the slot's pick and score).
// CHECK: scf.for %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}} to %c4{{(_[0-9]+)?}} step %{{[a-zA-Z0-9_#]+}} iter_args(%[[GK:[a-zA-Z0-9_]+]] = %[[KEY]], %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}} = %[[S]], {{.*}}) -> (i32, i32, f32, f32, i32, f32) {
// CHECK-NOT: gpu.shuffle
// CHECK: nvvm.redux.sync  umax %[[GK]], %c-1_i32{{(_[0-9]+)?}} : i32 -> i32
// CHECK: nvvm.redux.sync  umin
// CHECK: scf.yield
// Weights: unbiased sigmoid score / normaliser * 2.5.
// CHECK: %[[POS:[a-zA-Z0-9_]+]] = arith.cmpf ogt, %[[LOOP:[a-zA-Z0-9_]+]]#3, %{{[a-zA-Z0-9_#]+}} : f32
// CHECK: %[[DEN:[a-zA-Z0-9_]+]] = arith.select %[[POS]], %[[LOOP]]#3, %{{[a-zA-Z0-9_#]+}} : f32
// CHECK: memref.store %[[LOOP]]#4, %[[IDX]][%{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}] : memref<?x4xi32>
// CHECK: %[[SCALE:[a-zA-Z0-9_]+]] = arith.constant 2.500000e+00 : f32
// CHECK-NEXT: %[[Q:[a-zA-Z0-9_]+]] = arith.divf %[[LOOP]]#5, %[[DEN]] : f32
// CHECK-NEXT: %[[WV:[a-zA-Z0-9_]+]] = arith.mulf %[[Q]], %[[SCALE]] : f32
// CHECK-NEXT: memref.store %[[WV]], %[[W]][%{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}] : memref<?x4xf32>
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

// group_score = max, no normalisation (E = 8, 4 groups of 2, keep 2): the
// group score is the merged maximum alone (one shuffle per merge step, no
// addf of two maxima), no score sum is carried.
// CHECK-LABEL: func.func @route_softmax_group_max(
// CHECK-NOT: memref.alloc(%
// CHECK: gpu.launch
// CHECK: arith.divf
// CHECK: %[[M:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}} = gpu.shuffle  xor %{{[a-zA-Z0-9_]+}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK-NEXT: %[[GT:[a-zA-Z0-9_]+]] = arith.cmpf ogt, %{{[a-zA-Z0-9_]+}}, %[[M]] : f32
// CHECK-NEXT: %[[GSC:[a-zA-Z0-9_]+]] = arith.select %[[GT]], %{{[a-zA-Z0-9_]+}}, %[[M]] : f32
// CHECK-NEXT: arith.constant
// CHECK-NEXT: arith.constant
// CHECK-NEXT: gpu.shuffle  idx %[[GSC]], %c0_i32
// CHECK: scf.for {{.*}} to %c3{{(_[0-9]+)?}} step {{.*}} -> (i32, i32, f32, i32, f32) {
// CHECK: nvvm.redux.sync  umax
// CHECK: nvvm.redux.sync  umin
// CHECK: scf.yield
// CHECK: return
func.func @route_softmax_group_max(%l: tensor<4x8xf32>) -> (tensor<4x3xbf16>, tensor<4x3xi32>) {
  %w, %i = moe.route %l k = 3 scoring = softmax
      {n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<max>}
      : tensor<4x8xf32> -> tensor<4x3xbf16>, tensor<4x3xi32>
  return %w, %i : tensor<4x3xbf16>, tensor<4x3xi32>
}

// n_group = 64 > 32: the one-thread-per-row kernel with its T x n_group
// scratch buffers for the group scores and the kept mask.
// CHECK-LABEL: func.func @route_many_groups(
// CHECK: memref.alloc(%{{[a-zA-Z0-9_]+}}) : memref<?x64xf32>
// CHECK: memref.alloc(%{{[a-zA-Z0-9_]+}}) : memref<?x64xi32>
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-zA-Z0-9_#]+}} = %c256{{(_[0-9]+)?}},
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.terminator
func.func @route_many_groups(%l: tensor<?x128xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>) {
  %w, %i = moe.route %l k = 4 scoring = sigmoid
      {n_group = 64 : i64, topk_group = 4 : i64}
      : tensor<?x128xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  return %w, %i : tensor<?x4xf32>, tensor<?x4xi32>
}

//===----------------------------------------------------------------------===//
// moe.route_dispatch
//===----------------------------------------------------------------------===//

// With route-dispatch-small=false: the route kernel (one warp per row),
// then the three dispatch kernels on
// the route's indices (see dispatch.mlir); no E*T-sized buffer.
// CHECK-LABEL: func.func @route_dispatch(
// CHECK: %[[IN:[a-zA-Z0-9_]+]] = bufferization.to_buffer %{{[a-zA-Z0-9_#]+}} read_only : tensor<?x8xf32>
// CHECK: %[[T:[a-zA-Z0-9_]+]] = memref.dim %[[IN]], %c0
// CHECK: %[[W:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK: %[[IDX:[a-zA-Z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK: gpu.launch blocks({{.*}}) threads({{.*}}) in (%{{[a-zA-Z0-9_#]+}} = %c512{{(_[0-9]+)?}},
// CHECK: math.exp
// CHECK: scf.for {{.*}} to %c2{{(_[0-9]+)?}} step {{.*}} -> (i32, i32, f32, f32, i32, f32) {
// CHECK: nvvm.redux.sync  umax
// CHECK: nvvm.redux.sync  umin
// CHECK: gpu.shuffle  idx
// CHECK: gpu.terminator
// CHECK: %[[WT:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[W]] restrict writable : memref<?x2xf32> to tensor<?x2xf32>
// CHECK: %[[IT:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[IDX]] restrict writable : memref<?x2xi32> to tensor<?x2xi32>
// CHECK: %[[IB:[a-zA-Z0-9_]+]] = bufferization.to_buffer %[[IT]] read_only : tensor<?x2xi32> to memref<?x2xi32, strided<[?, ?], offset: ?>>
// CHECK: %[[T2:[a-zA-Z0-9_]+]] = memref.dim %[[IB]], %c0
// CHECK: %[[M:[a-zA-Z0-9_]+]] = arith.muli %[[T2]], %c2{{(_[0-9]+)?}} : index
// CHECK: %[[OFF:[a-zA-Z0-9_]+]] = memref.alloc() : memref<9xi32>
// CHECK: %[[REV:[a-zA-Z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[TOK:[a-zA-Z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK-COUNT-3: memref.alloc
// CHECK-NOT: memref.alloc
// CHECK-COUNT-3: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: %[[O:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[OFF]] restrict writable : memref<9xi32> to tensor<9xi32>
// CHECK: %[[R:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[REV]] restrict writable
// CHECK: %[[TK:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[TOK]] restrict writable
// CHECK: return %[[WT]], %[[IT]], %[[O]], %[[R]], %[[TK]]
func.func @route_dispatch(%l: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>) {
  %w, %ids, %o, %r, %t = moe.route_dispatch %l k = 2 scoring = softmax {normalize = true} : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return %w, %ids, %o, %r, %t : tensor<?x2xf32>, tensor<?x2xi32>, tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
}
