// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=NOMOE

// Data movement:
// - gather / combine / the scatter copy: rows on grid.x (max(rows, 1)
//   blocks), 256-column blocks on grid.y, guard `row < rows && col < cols`;
// - scatter: a -1 filled owner map, an atomic max of the source row into
//   owner[dst] (later row wins), then the copy of row owner[d] or zero;
// - multi-hot converters: one thread per token row.

// NOMOE-NOT: moe.

//===----------------------------------------------------------------------===//
// moe.gather
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @gather_dynamic(
// CHECK: %[[X:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x64xbf16> to memref<?x64xbf16, strided<[?, ?], offset: ?>>
// CHECK: %[[IDX:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?xi32> to memref<?xi32, strided<[?], offset: ?>>
// CHECK: %[[M:[a-z0-9_]+]] = memref.dim %[[IDX]], %c0
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[X]], %c0{{(_[0-9]+)?}}
// CHECK: %[[T32:[a-z0-9_]+]] = arith.index_cast %[[T]] : index to i32
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?x64xbf16>
// CHECK: %[[CB:[a-z0-9_]+]] = arith.ceildivui %c64, %c256 : index
// CHECK: %[[GY:[a-z0-9_]+]] = arith.maxui %[[CB]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[GX:[a-z0-9_]+]] = arith.maxui %[[M]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %[[BY:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[GX]], %{{[a-z0-9_]+}} = %[[GY]], %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}},
// CHECK: %[[C0:[a-z0-9_]+]] = arith.muli %[[BY]], %c256{{(_[0-9]+)?}} : index
// CHECK: %[[COL:[a-z0-9_]+]] = arith.addi %[[C0]], %[[TX]] : index
// CHECK: %[[COK:[a-z0-9_]+]] = arith.cmpi ult, %[[COL]], %c64 : index
// CHECK: %[[ROK:[a-z0-9_]+]] = arith.cmpi ult, %[[BX]], %[[M]] : index
// CHECK: %[[OK:[a-z0-9_]+]] = arith.andi %[[ROK]], %[[COK]] : i1
// CHECK: scf.if %[[OK]] {
// CHECK: %[[SRC:[a-z0-9_]+]] = memref.load %[[IDX]][%[[BX]]]
// Sources outside [0, T) read a zero row.
// CHECK: arith.cmpi slt, %[[SRC]], %[[T32]] : i32
// CHECK: arith.cmpi sge, %[[SRC]], %c0_i32 : i32
// CHECK: %[[V:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (bf16) {
// CHECK: %[[SI:[a-z0-9_]+]] = arith.index_cast %[[SRC]] : i32 to index
// CHECK: memref.load %[[X]][%[[SI]], %[[COL]]]
// CHECK: } else {
// CHECK: arith.constant 0.000000e+00 : bf16
// CHECK: memref.store %[[V]], %[[OUT]][%[[BX]], %[[COL]]] : memref<?x64xbf16>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<?x64xbf16> to tensor<?x64xbf16>
func.func @gather_dynamic(%x: tensor<?x64xbf16>, %t: tensor<?xi32>) -> tensor<?x64xbf16> {
  %r = moe.gather %x[%t] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
  return %r : tensor<?x64xbf16>
}

//===----------------------------------------------------------------------===//
// moe.scatter
//===----------------------------------------------------------------------===//

// H = 300: two 256-column blocks.
// CHECK-LABEL: func.func @scatter_dynamic(
// CHECK: %[[Y:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x300xf32>
// CHECK: %[[IDX:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?xi32>
// CHECK: %[[M:[a-z0-9_]+]] = memref.dim %[[Y]], %c0
// CHECK: %[[M32:[a-z0-9_]+]] = arith.index_cast %[[M]] : index to i32
// Owner map, filled with -1.
// CHECK: %[[OWN:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: gpu.launch
// CHECK: memref.store %c-1_i32, %[[OWN]][%{{[a-z0-9_]+}}] : memref<?xi32>
// CHECK: gpu.terminator
// One thread per source row: owner[dst] = max(owner[dst], i) for dst in [0, M).
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[M]], %c256{{(_[0-9]+)?}} : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GRID]],
// CHECK: arith.cmpi ult, %[[I:[a-z0-9_]+]], %[[M]] : index
// CHECK: %[[DST:[a-z0-9_]+]] = memref.load %[[IDX]][%[[I]]]
// CHECK: arith.cmpi slt, %[[DST]], %[[M32]] : i32
// CHECK: arith.cmpi sge, %[[DST]], %c0_i32 : i32
// CHECK: %[[DI:[a-z0-9_]+]] = arith.index_cast %[[DST]] : i32 to index
// CHECK: %[[I32:[a-z0-9_]+]] = arith.index_cast %[[I]] : index to i32
// CHECK: memref.atomic_rmw maxs %[[I32]], %[[OWN]][%[[DI]]] : (i32, memref<?xi32>) -> i32
// CHECK: gpu.terminator
// Copy row owner[d], or zero when no row targets d.
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?x300xf32>
// CHECK: %[[CB:[a-z0-9_]+]] = arith.ceildivui %c300, %c256{{(_[0-9]+)?}} : index
// CHECK: %[[GY:[a-z0-9_]+]] = arith.maxui %[[CB]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[GX:[a-z0-9_]+]] = arith.maxui %[[M]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[GX]], %{{[a-z0-9_]+}} = %[[GY]],
// CHECK: %[[SRC:[a-z0-9_]+]] = memref.load %[[OWN]][%[[BX]]] : memref<?xi32>
// CHECK: %[[HAS:[a-z0-9_]+]] = arith.cmpi sge, %[[SRC]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[V:[a-z0-9_]+]] = scf.if %[[HAS]] -> (f32) {
// CHECK: memref.load %[[Y]]
// CHECK: } else {
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK: memref.store %[[V]], %[[OUT]][%[[BX]], %{{[a-z0-9_]+}}] : memref<?x300xf32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<?x300xf32> to tensor<?x300xf32>
func.func @scatter_dynamic(%y: tensor<?x300xf32>, %rev: tensor<?xi32>) -> tensor<?x300xf32> {
  %s = moe.scatter %y[%rev] : tensor<?x300xf32>, tensor<?xi32> -> tensor<?x300xf32>
  return %s : tensor<?x300xf32>
}

//===----------------------------------------------------------------------===//
// moe.combine
//===----------------------------------------------------------------------===//

// Weighted (f32 weights, bf16 rows): f32 sum over k = 2 slots in slot order,
// each slot scaled by its weight, truncated once at the end. A thread sums 8
// adjacent columns (16 bytes): by 16-byte loads and one 16-byte store when
// the host-side layout check holds, else (scf.if's else) element by element.
// CHECK-LABEL: func.func @combine_weighted(
// CHECK: %[[P:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x2x64xbf16> to memref<?x2x64xbf16, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[W:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x2xf32> to memref<?x2xf32, strided<[?, ?], offset: ?>>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[P]], %c0
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x64xbf16>
// CHECK: %[[GX:[a-z0-9_]+]] = arith.maxui %[[T]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[GX]],
// CHECK: %[[C0:[a-z0-9_]+]] = arith.muli %{{[a-z0-9_]+}}, %c8{{(_[0-9]+)?}} : index
// CHECK: llvm.load %{{[a-z0-9_]+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK: memref.load %[[W]][%[[BX]], %c0{{(_[0-9]+)?}}]
// CHECK-COUNT-8: arith.mulf
// CHECK: llvm.load %{{[a-z0-9_]+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK: memref.load %[[W]][%[[BX]], %c1{{(_[0-9]+)?}}]
// CHECK-COUNT-8: arith.truncf %{{[a-z0-9_]+}} : f32 to bf16
// CHECK: llvm.store %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK-NEXT: } else {
// CHECK: %[[COL:[a-z0-9_]+]] = arith.addi %[[C0]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[SUM:[a-z0-9_]+]] = scf.for %[[J:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c2{{(_[0-9]+)?}} step %{{[a-z0-9_]+}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{[a-z0-9_]+}}) -> (f32) {
// CHECK-NEXT: %[[XB:[a-z0-9_]+]] = memref.load %[[P]][%[[BX]], %[[J]], %[[COL]]]
// CHECK-NEXT: %[[XF:[a-z0-9_]+]] = arith.extf %[[XB]] : bf16 to f32
// CHECK-NEXT: %[[WV:[a-z0-9_]+]] = memref.load %[[W]][%[[BX]], %[[J]]]
// CHECK-NEXT: %[[PR:[a-z0-9_]+]] = arith.mulf %[[WV]], %[[XF]] : f32
// CHECK-NEXT: %[[NX:[a-z0-9_]+]] = arith.addf %[[ACC]], %[[PR]] : f32
// CHECK-NEXT: scf.yield %[[NX]] : f32
// CHECK: %[[R:[a-z0-9_]+]] = arith.truncf %[[SUM]] : f32 to bf16
// CHECK: memref.store %[[R]], %[[OUT]][%[[BX]], %[[COL]]] : memref<?x64xbf16>
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
func.func @combine_weighted(%p: tensor<?x2x64xbf16>, %w: tensor<?x2xf32>) -> tensor<?x64xbf16> {
  %r = moe.combine %p weights(%w : tensor<?x2xf32>) : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
  return %r : tensor<?x64xbf16>
}

// Unweighted, static T = 4: a plain f32 sum over k = 3, no multiply.
// CHECK-LABEL: func.func @combine_unweighted(
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc() : memref<4x16xf16>
// CHECK: arith.maxui %c4, %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch
// CHECK-COUNT-3: llvm.load %{{[a-z0-9_]+}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
// CHECK: } else {
// CHECK: %[[SUM:[a-z0-9_]+]] = scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %c3{{(_[0-9]+)?}} step %{{[a-z0-9_]+}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{[a-z0-9_]+}}) -> (f32) {
// CHECK-NEXT: memref.load
// CHECK-NEXT: %[[XF:[a-z0-9_]+]] = arith.extf %{{[a-z0-9_]+}} : f16 to f32
// CHECK-NEXT: %[[NX:[a-z0-9_]+]] = arith.addf %[[ACC]], %[[XF]] : f32
// CHECK-NEXT: scf.yield %[[NX]] : f32
// CHECK: arith.truncf %[[SUM]] : f32 to f16
// CHECK-NOT: arith.mulf
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
func.func @combine_unweighted(%p: tensor<4x3x16xf16>) -> tensor<4x16xf16> {
  %r = moe.combine %p : tensor<4x3x16xf16> -> tensor<4x16xf16>
  return %r : tensor<4x16xf16>
}

//===----------------------------------------------------------------------===//
// moe.indices_to_multihot / moe.multihot_to_indices
//===----------------------------------------------------------------------===//

// One thread per row: clear the E = 16 entries (false / 0 / -1), then visit
// the k = 2 slots in order and set the entries of in-range experts.
// CHECK-LABEL: func.func @indices_to_multihot(
// CHECK: %[[IDS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x2xi32>
// CHECK: %[[PR:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x2xbf16>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IDS]], %c0
// CHECK: %[[HOT:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x16xi1>
// CHECK: %[[DENSE:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x16xbf16>
// CHECK: %[[POS:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x16xi32>
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[T]], %c256 : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GRID]],
// CHECK: arith.cmpi ult, %[[ROW:[a-z0-9_]+]], %[[T]] : index
// CHECK: scf.for %[[C:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c16 step
// CHECK: memref.store %false, %[[HOT]][%[[ROW]], %[[C]]] : memref<?x16xi1>
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[DENSE]][%[[ROW]], %[[C]]] : memref<?x16xbf16>
// CHECK: memref.store %c-1_i32, %[[POS]][%[[ROW]], %[[C]]] : memref<?x16xi32>
// CHECK: scf.for %[[J:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c2 step
// CHECK: %[[E:[a-z0-9_]+]] = memref.load %[[IDS]][%[[ROW]], %[[J]]]
// CHECK: arith.cmpi slt, %[[E]], %c16_i32 : i32
// CHECK: arith.cmpi sge, %[[E]], %c0_i32 : i32
// CHECK: %[[EI:[a-z0-9_]+]] = arith.index_cast %[[E]] : i32 to index
// CHECK: memref.store %true, %[[HOT]][%[[ROW]], %[[EI]]] : memref<?x16xi1>
// CHECK: %[[PV:[a-z0-9_]+]] = memref.load %[[PR]][%[[ROW]], %[[J]]]
// CHECK: memref.store %[[PV]], %[[DENSE]][%[[ROW]], %[[EI]]] : memref<?x16xbf16>
// CHECK: %[[J32:[a-z0-9_]+]] = arith.index_cast %[[J]] : index to i32
// CHECK: memref.store %[[J32]], %[[POS]][%[[ROW]], %[[EI]]] : memref<?x16xi32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[HOT]] restrict writable : memref<?x16xi1> to tensor<?x16xi1>
// CHECK: bufferization.to_tensor %[[DENSE]] restrict writable : memref<?x16xbf16> to tensor<?x16xbf16>
// CHECK: bufferization.to_tensor %[[POS]] restrict writable : memref<?x16xi32> to tensor<?x16xi32>
func.func @indices_to_multihot(%ids: tensor<?x2xi32>, %p: tensor<?x2xbf16>) -> (tensor<?x16xi1>, tensor<?x16xbf16>, tensor<?x16xi32>) {
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 16
      : tensor<?x2xi32>, tensor<?x2xbf16> -> tensor<?x16xi1>, tensor<?x16xbf16>, tensor<?x16xi32>
  return %mh, %pm, %pos : tensor<?x16xi1>, tensor<?x16xbf16>, tensor<?x16xi32>
}

// One thread per row: zero the k = 4 slots, then visit the E = 8 experts
// in order and copy those whose position is in [0, k).
// CHECK-LABEL: func.func @multihot_to_indices(
// CHECK: %[[DENSE:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x8xf16>
// CHECK: %[[POS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x8xi32>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[DENSE]], %c0
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc(%[[T]]) : memref<?x4xf16>
// CHECK: gpu.launch
// CHECK: arith.cmpi ult, %[[ROW:[a-z0-9_]+]], %[[T]] : index
// CHECK: scf.for %[[J:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c4 step
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[OUT]][%[[ROW]], %[[J]]] : memref<?x4xf16>
// CHECK: scf.for %[[C:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c8 step
// CHECK: %[[S:[a-z0-9_]+]] = memref.load %[[POS]][%[[ROW]], %[[C]]]
// CHECK: arith.cmpi slt, %[[S]], %c4_i32 : i32
// CHECK: arith.cmpi sge, %[[S]], %c0_i32 : i32
// CHECK: %[[SI:[a-z0-9_]+]] = arith.index_cast %[[S]] : i32 to index
// CHECK: %[[V:[a-z0-9_]+]] = memref.load %[[DENSE]][%[[ROW]], %[[C]]]
// CHECK: memref.store %[[V]], %[[OUT]][%[[ROW]], %[[SI]]] : memref<?x4xf16>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<?x4xf16> to tensor<?x4xf16>
func.func @multihot_to_indices(%pm: tensor<?x8xf16>, %pos: tensor<?x8xi32>) -> tensor<?x4xf16> {
  %r = moe.multihot_to_indices %pm, %pos k = 4 : tensor<?x8xf16>, tensor<?x8xi32> -> tensor<?x4xf16>
  return %r : tensor<?x4xf16>
}
