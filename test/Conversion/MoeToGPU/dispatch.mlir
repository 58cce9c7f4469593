// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s --check-prefix=NOMOE
// RUN: moe-opt %s "--convert-moe-to-gpu=chip=sm_60" | FileCheck %s --check-prefix=SM60

// Dispatch metadata kernels:
// - cumsum: zero fill, a per-row histogram (row b only touches e*T + b),
//   then one block of 1024 threads scanning in chunks through a
//   1024-entry workgroup buffer;
// - get_indices: two -1 fills, one thread per row for the dispatched slots,
//   one ordered block for the undispatched ones;
// - get_indptr: one thread per entry;
// - dispatch: a stable counting sort in three multi-block kernels
//   (per-warp chunk ranks and histograms, per-bucket chunk scans, bucket
//   offsets + placement) with O(T*k + E * chunks) buffers; the one-block
//   counting sort only past 8191 experts.

// NOMOE-NOT: moe.

//===----------------------------------------------------------------------===//
// moe.cumsum
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @cumsum_dynamic(
// CHECK: %[[IDS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x2xi32> to memref<?x2xi32, strided<[?, ?], offset: ?>>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IDS]], %c0
// CHECK: %[[LEN:[a-z0-9_]+]] = arith.muli %c8, %[[T]] : index
// CHECK: %[[CS:[a-z0-9_]+]] = memref.alloc(%[[LEN]]) : memref<?xi32>
// CHECK-NOT: memref.alloc
// 1. Zero fill over the E*T entries.
// CHECK: %[[FLEN:[a-z0-9_]+]] = memref.dim %[[CS]], %c0{{(_[0-9]+)?}} : memref<?xi32>
// CHECK: %[[FNB:[a-z0-9_]+]] = arith.ceildivui %[[FLEN]], %c256 : index
// CHECK: %[[FGRID:[a-z0-9_]+]] = arith.maxui %[[FNB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[FGRID]], {{.*}}) threads({{.*}}) in (%{{[a-z0-9_]+}} = %c256{{(_[0-9]+)?}},
// CHECK: %[[FOK:[a-z0-9_]+]] = arith.cmpi ult, %[[FI:[a-z0-9_]+]], %[[FLEN]] : index
// CHECK: scf.if %[[FOK]] {
// CHECK-NEXT: memref.store %c0_i32, %[[CS]][%[[FI]]] : memref<?xi32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.terminator
// 2. Histogram: one thread per row, entry expert * T + row.
// CHECK: %[[T32:[a-z0-9_]+]] = arith.index_cast %[[T]] : index to i32
// CHECK: %[[HNB:[a-z0-9_]+]] = arith.ceildivui %[[T]], %c256{{(_[0-9]+)?}} : index
// CHECK: %[[HGRID:[a-z0-9_]+]] = arith.maxui %[[HNB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[HGRID]],
// CHECK: %[[ROK:[a-z0-9_]+]] = arith.cmpi ult, %[[ROW:[a-z0-9_]+]], %[[T]] : index
// CHECK: scf.if %[[ROK]]
// CHECK: scf.for %[[J:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %c2 step
// CHECK: %[[E:[a-z0-9_]+]] = memref.load %[[IDS]][%[[ROW]], %[[J]]]
// Ids outside [0, 8) are not counted.
// CHECK: arith.cmpi slt, %[[E]], %c8_i32 : i32
// CHECK: arith.cmpi sge, %[[E]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: scf.if
// CHECK: %[[TI:[a-z0-9_]+]] = arith.index_cast %[[T32]] : i32 to index
// CHECK: %[[EI:[a-z0-9_]+]] = arith.index_cast %[[E]] : i32 to index
// CHECK: %[[ET:[a-z0-9_]+]] = arith.muli %[[EI]], %[[TI]] : index
// CHECK: %[[POS:[a-z0-9_]+]] = arith.addi %[[ET]], %[[ROW]] : index
// CHECK: %[[OLD:[a-z0-9_]+]] = memref.load %[[CS]][%[[POS]]] : memref<?xi32>
// CHECK: %[[NEW:[a-z0-9_]+]] = arith.addi %[[OLD]], %c1_i32 : i32
// CHECK: memref.store %[[NEW]], %[[CS]][%[[POS]]] : memref<?xi32>
// CHECK: gpu.terminator
// 3. One block of 1024 threads, chunk = ceil(E*T / 1024) entries each.
// CHECK: %[[CHUNK:[a-z0-9_]+]] = arith.ceildivui %[[LEN]], %c1024 : index
// CHECK: %[[ONE:[a-z0-9_]+]] = arith.maxui %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %c1024{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}, %{{[a-z0-9_]+}} = %c1{{(_[0-9]+)?}}) workgroup(%[[WG:[a-z0-9_]+]] : memref<1024xi32, #gpu.address_space<workgroup>>) {
// CHECK: %[[FIRST0:[a-z0-9_]+]] = arith.muli %[[TX]], %[[CHUNK]] : index
// CHECK: %[[FIRST:[a-z0-9_]+]] = arith.minui %[[FIRST0]], %[[LEN]] : index
// CHECK: %[[LAST0:[a-z0-9_]+]] = arith.addi %[[FIRST]], %[[CHUNK]] : index
// CHECK: %[[LAST:[a-z0-9_]+]] = arith.minui %[[LAST0]], %[[LEN]] : index
// CHECK: %[[PART:[a-z0-9_]+]] = scf.for %{{[a-z0-9_]+}} = %[[FIRST]] to %[[LAST]]
// CHECK: memref.store %[[PART]], %[[WG]][%[[TX]]] : memref<1024xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// Thread 0 scans the 1024 partial sums (exclusive).
// CHECK: arith.cmpi eq, %[[TX]], %c0{{(_[0-9]+)?}} : index
// CHECK: scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %c1024{{(_[0-9]+)?}} step
// CHECK: gpu.barrier
// CHECK-NEXT: %[[BASE:[a-z0-9_]+]] = memref.load %[[WG]][%[[TX]]] : memref<1024xi32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{[a-z0-9_]+}} = %[[FIRST]] to %[[LAST]] step %{{[a-z0-9_]+}} iter_args(%{{[a-z0-9_]+}} = %[[BASE]]) -> (i32)
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[CS]][%{{[a-z0-9_]+}}] : memref<?xi32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: %[[R:[a-z0-9_]+]] = bufferization.to_tensor %[[CS]] restrict writable : memref<?xi32> to tensor<?xi32>
// CHECK: return %[[R]]
func.func @cumsum_dynamic(%ids: tensor<?x2xi32>) -> tensor<?xi32> {
  %cs = moe.cumsum %ids num_experts = 8 : tensor<?x2xi32> -> tensor<?xi32>
  return %cs : tensor<?xi32>
}

// Static T: no memref.dim on the operand, a static result buffer; T = 0
// still launches one block per kernel.
// CHECK-LABEL: func.func @cumsum_zero_tokens(
// CHECK-NOT: memref.dim %0
// CHECK: %[[CS:[a-z0-9_]+]] = memref.alloc() : memref<0xi32>
// CHECK: gpu.launch
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[C0:c0(_[0-9]+)?]], %c256{{(_[0-9]+)?}} : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GRID]],
// CHECK: arith.cmpi ult, %{{[a-z0-9_]+}}, %[[C0]] : index
// CHECK: gpu.launch {{.*}} workgroup(
// CHECK: bufferization.to_tensor %[[CS]] restrict writable : memref<0xi32> to tensor<0xi32>
func.func @cumsum_zero_tokens(%ids: tensor<0x2xi32>) -> tensor<0xi32> {
  %cs = moe.cumsum %ids num_experts = 8 : tensor<0x2xi32> -> tensor<0xi32>
  return %cs : tensor<0xi32>
}

//===----------------------------------------------------------------------===//
// moe.get_indices
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @get_indices_dynamic(
// CHECK: %[[CS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?xi32> to memref<?xi32, strided<[?], offset: ?>>
// CHECK: %[[IDS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?x4xi32> to memref<?x4xi32, strided<[?, ?], offset: ?>>
// CHECK: %[[T:[a-z0-9_]+]] = memref.dim %[[IDS]], %c0
// CHECK: %[[LEN:[a-z0-9_]+]] = memref.dim %[[CS]], %c0
// CHECK: %[[M:[a-z0-9_]+]] = arith.muli %[[T]], %c4 : index
// CHECK: %[[REV:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[TOK:[a-z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// Both results start at -1.
// CHECK: gpu.launch
// CHECK: memref.store %c-1_i32, %[[REV]][%{{[a-z0-9_]+}}] : memref<?xi32>
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: memref.store %c-1_i32{{(_[0-9]+)?}}, %[[TOK]][%{{[a-z0-9_]+}}] : memref<?xi32>
// CHECK: gpu.terminator
// E = len / max(T, 1), 0 when T = 0.
// CHECK: %[[T32:[a-z0-9_]+]] = arith.index_cast %[[T]] : index to i32
// CHECK: %[[LEN32:[a-z0-9_]+]] = arith.index_cast %[[LEN]] : index to i32
// CHECK: %[[M32:[a-z0-9_]+]] = arith.index_cast %[[M]] : index to i32
// CHECK: %[[TPOS:[a-z0-9_]+]] = arith.maxsi %[[T32]], %c1_i32 : i32
// CHECK: %[[EQ:[a-z0-9_]+]] = arith.divsi %[[LEN32]], %[[TPOS]] : i32
// CHECK: %[[NZ:[a-z0-9_]+]] = arith.cmpi sgt, %[[T32]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[NE:[a-z0-9_]+]] = arith.select %[[NZ]], %[[EQ]], %c0_i32{{(_[0-9]+)?}} : i32
// Dispatched slots: one thread per row, position cumsum[e*T + b] - 1 - later.
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %[[T]], %c256{{(_[0-9]+)?}} : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GRID]],
// CHECK: arith.cmpi ult, %[[ROW:[a-z0-9_]+]], %[[T]] : index
// CHECK: %[[E:[a-z0-9_]+]] = memref.load %[[IDS]][%[[ROW]], %{{[a-z0-9_]+}}]
// CHECK: arith.cmpi slt, %[[E]], %[[NE]] : i32
// CHECK: %[[LATER:[a-z0-9_]+]] = scf.for {{.*}} -> (i32)
// CHECK: %[[AT0:[a-z0-9_]+]] = arith.muli %[[E]], %[[T32]] : i32
// CHECK: %[[AT:[a-z0-9_]+]] = arith.addi %[[AT0]], %{{[a-z0-9_]+}} : i32
// CHECK: arith.cmpi slt, %[[AT]], %[[LEN32]] : i32
// CHECK: %[[END:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32)
// CHECK: memref.load %[[CS]]
// CHECK: %[[P0:[a-z0-9_]+]] = arith.subi %[[END]], %c1_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[P:[a-z0-9_]+]] = arith.subi %[[P0]], %[[LATER]] : i32
// CHECK: arith.cmpi slt, %[[P]], %[[M32]] : i32
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[REV]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[TOK]]
// CHECK: gpu.terminator
// Undispatched slots: one ordered block (a single bucket).
// CHECK: %[[CNT:[a-z0-9_]+]] = memref.alloc() : memref<1024x1xi32>
// CHECK: memref.alloc() : memref<1xi32>
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c1024{{(_[0-9]+)?}},
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// Placed after all dispatched rows: cumsum[len - 1] + rank.
// CHECK: %[[LAST:[a-z0-9_]+]] = arith.subi %[[LEN]], %c1{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[CS]][%[[LAST]]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[REV]]
// CHECK: memref.store %{{[a-z0-9_]+}}, %[[TOK]]
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: bufferization.to_tensor %[[REV]] restrict writable
// CHECK: bufferization.to_tensor %[[TOK]] restrict writable
// CHECK: return
func.func @get_indices_dynamic(%cs: tensor<?xi32>, %ids: tensor<?x4xi32>) -> (tensor<?xi32>, tensor<?xi32>) {
  %rev, %tok = moe.get_indices %cs, %ids : tensor<?xi32>, tensor<?x4xi32> -> tensor<?xi32>, tensor<?xi32>
  return %rev, %tok : tensor<?xi32>, tensor<?xi32>
}

//===----------------------------------------------------------------------===//
// moe.get_indptr
//===----------------------------------------------------------------------===//

// Exclusive: E + 1 entries, entry i = cumsum[i*T - 1] for i >= 1 and T > 0,
// else 0.
// CHECK-LABEL: func.func @get_indptr_exclusive(
// CHECK: %[[CS:[a-z0-9_]+]] = bufferization.to_buffer %{{[a-z0-9_]+}} read_only : tensor<?xi32>
// CHECK: %[[LEN:[a-z0-9_]+]] = memref.dim %[[CS]], %c0
// CHECK: %[[T:[a-z0-9_]+]] = arith.divui %[[LEN]], %c8 : index
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc() : memref<9xi32>
// CHECK: %[[NB:[a-z0-9_]+]] = arith.ceildivui %c9, %c256 : index
// CHECK: %[[GRID:[a-z0-9_]+]] = arith.maxui %[[NB]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[GRID]],
// CHECK: arith.cmpi ult, %[[I:[a-z0-9_]+]], %c9 : index
// CHECK: %[[EXP:[a-z0-9_]+]] = arith.subi %[[I]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[TNZ:[a-z0-9_]+]] = arith.cmpi ugt, %[[T]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[IGE:[a-z0-9_]+]] = arith.cmpi uge, %[[I]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[VALID:[a-z0-9_]+]] = arith.andi %[[IGE]], %[[TNZ]] : i1
// CHECK: %[[END:[a-z0-9_]+]] = scf.if %[[VALID]] -> (i32) {
// CHECK: %[[E1:[a-z0-9_]+]] = arith.addi %[[EXP]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[E1T:[a-z0-9_]+]] = arith.muli %[[E1]], %[[T]] : index
// CHECK: %[[AT:[a-z0-9_]+]] = arith.subi %[[E1T]], %c1{{(_[0-9]+)?}} : index
// CHECK: memref.load %[[CS]][%[[AT]]]
// CHECK: } else {
// CHECK: scf.yield %c0_i32 : i32
// CHECK: memref.store %[[END]], %[[OUT]][%[[I]]] : memref<9xi32>
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<9xi32> to tensor<9xi32>
func.func @get_indptr_exclusive(%cs: tensor<?xi32>) -> tensor<9xi32> {
  %a = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
  return %a : tensor<9xi32>
}

// Inclusive: E entries, entry i = cumsum[(i + 1)*T - 1], widened to i64.
// CHECK-LABEL: func.func @get_indptr_inclusive_i64(
// CHECK: %[[OUT:[a-z0-9_]+]] = memref.alloc() : memref<8xi64>
// CHECK: arith.ceildivui %c8{{(_[0-9]+)?}}, %c256 : index
// CHECK: gpu.launch
// CHECK: arith.cmpi ult, %[[I:[a-z0-9_]+]], %c8{{(_[0-9]+)?}} : index
// CHECK: %[[EXP:[a-z0-9_]+]] = arith.subi %[[I]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[END:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
// CHECK: arith.addi %[[EXP]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[W:[a-z0-9_]+]] = arith.extsi %[[END]] : i32 to i64
// CHECK: memref.store %[[W]], %[[OUT]][%[[I]]] : memref<8xi64>
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<8xi64> to tensor<8xi64>
func.func @get_indptr_inclusive_i64(%cs: tensor<32xi32>) -> tensor<8xi64> {
  %b = moe.get_indptr %cs num_experts = 8 {inclusive = true} : tensor<32xi32> -> tensor<8xi64>
  return %b : tensor<8xi64>
}

//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

// Chunks of s * 32 slots, s = max(ceil(T*k / (32 * max(256, 2^20 / 9))),
// clamp(ceil(9 / 32), 1, 8)) = max(ceil(T*k / 3728256), 1). Buffers:
// offsets (E + 1), the two T*k maps, counts ((E + 1) x chunks), bucket
// totals (E + 1), ranks (T*k); nothing of size E*T.
// CHECK-LABEL: func.func @dispatch_dynamic(
// CHECK: %[[IDS:[a-zA-Z0-9_]+]] = bufferization.to_buffer %{{[a-zA-Z0-9_#]+}} read_only : tensor<?x2xi32>
// CHECK: %[[T:[a-zA-Z0-9_]+]] = memref.dim %[[IDS]], %c0
// CHECK: %[[M:[a-zA-Z0-9_]+]] = arith.muli %[[T]], %c2 : index
// CHECK: %[[M32:[a-zA-Z0-9_]+]] = arith.index_cast %[[M]] : index to i32
// CHECK: %[[OFF:[a-zA-Z0-9_]+]] = memref.alloc() : memref<9xi32>
// CHECK: %[[REV:[a-zA-Z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[TOK:[a-zA-Z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK: %[[S0:[a-zA-Z0-9_]+]] = arith.ceildivui %[[M]], %c3728256 : index
// CHECK: %[[STEPS:[a-zA-Z0-9_]+]] = arith.maxui %[[S0]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[CHUNK:[a-zA-Z0-9_]+]] = arith.muli %[[STEPS]], %c32 : index
// CHECK: %[[NC0:[a-zA-Z0-9_]+]] = arith.ceildivui %[[M]], %[[CHUNK]] : index
// CHECK: %[[NC:[a-zA-Z0-9_]+]] = arith.maxui %[[NC0]], %c1 : index
// CHECK: %[[CLEN:[a-zA-Z0-9_]+]] = arith.muli %c9, %[[NC]] : index
// CHECK: %[[CNT:[a-zA-Z0-9_]+]] = memref.alloc(%[[CLEN]]) : memref<?xi32>
// CHECK: %[[TOT:[a-zA-Z0-9_]+]] = memref.alloc() : memref<9xi32>
// CHECK: %[[RANK:[a-zA-Z0-9_]+]] = memref.alloc(%[[M]]) : memref<?xi32>
// CHECK-NOT: memref.alloc
// 1. One warp per chunk, 8 warps a block, a 8 x (E + 1) shared row of
//    running counts per warp, which only that warp touches: warp barriers.
// CHECK: %[[B1:[a-zA-Z0-9_]+]] = arith.ceildivui %[[NC]], %c8 : index
// CHECK: %[[G1:[a-zA-Z0-9_]+]] = arith.maxui %[[B1]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %[[G1]], %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}}) threads(%[[TX:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %c256{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}}, %{{[a-zA-Z0-9_#]+}} = %c1{{(_[0-9]+)?}}) workgroup(%[[RUNNING:[a-zA-Z0-9_]+]] : memref<8x9xi32, #gpu.address_space<workgroup>>) {
// CHECK: %[[LANE:[a-zA-Z0-9_]+]] = arith.remui %[[TX]], %c32{{(_[0-9]+)?}} : index
// CHECK: %[[WARP:[a-zA-Z0-9_]+]] = arith.divui %[[TX]], %c32{{(_[0-9]+)?}} : index
// CHECK: %[[C0:[a-zA-Z0-9_]+]] = arith.muli %[[BX]], %c8{{(_[0-9]+)?}} : index
// CHECK: %[[C:[a-zA-Z0-9_]+]] = arith.addi %[[C0]], %[[WARP]] : index
// CHECK: memref.store %c0_i32, %[[RUNNING]][%[[WARP]], %{{[a-zA-Z0-9_#]+}}] : memref<8x9xi32, #gpu.address_space<workgroup>>
// CHECK: nvvm.bar.warp.sync %c-1_i32
// CHECK-NOT: gpu.barrier
// Bucket of round 0 (the expert, E = 8 for an id outside [0, 8), -1 past
// T*k), loaded before the loop; each round loads the next round's.
// CHECK: %[[IN:[a-zA-Z0-9_]+]] = arith.cmpi ult, %{{[a-zA-Z0-9_#]+}}, %[[M]] : index
// CHECK: %[[BK0:[a-zA-Z0-9_]+]] = scf.if %[[IN]] -> (i32) {
// CHECK: %[[E:[a-zA-Z0-9_]+]] = memref.load %[[IDS]]
// CHECK: %[[INR:[a-zA-Z0-9_]+]] = arith.andi
// CHECK: arith.select %[[INR]], %[[E]], %c8_i32{{(_[0-9]+)?}} : i32
// CHECK: scf.yield %c-1_i32{{(_[0-9]+)?}} : i32
// CHECK: scf.for %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}} to %[[STEPS]] step %{{[a-zA-Z0-9_#]+}} iter_args(%[[BK:[a-zA-Z0-9_]+]] = %[[BK0]]) -> (i32) {
// CHECK: %[[ITEM:[a-zA-Z0-9_]+]] = arith.addi %{{[a-zA-Z0-9_#]+}}, %[[LANE]] : index
// CHECK: %[[NEXT:[a-zA-Z0-9_]+]] = scf.if %{{[a-zA-Z0-9_#]+}} -> (i32) {
// CHECK: memref.load %[[IDS]]
// Rank inside the round: match.any.sync, then popc of the lanes below.
// CHECK: %[[SAME:[a-zA-Z0-9_]+]] = nvvm.match.sync  any %c-1_i32{{(_[0-9]+)?}}, %[[BK]] : i32 -> i32
// CHECK: %[[LT:[a-zA-Z0-9_]+]] = nvvm.read.ptx.sreg.lanemask.lt : i32
// CHECK: %[[BELOW:[a-zA-Z0-9_]+]] = arith.andi %[[SAME]], %[[LT]] : i32
// CHECK: %[[BEFORE:[a-zA-Z0-9_]+]] = llvm.intr.ctpop(%[[BELOW]]) : (i32) -> i32
// CHECK: %[[TOTAL:[a-zA-Z0-9_]+]] = llvm.intr.ctpop(%[[SAME]]) : (i32) -> i32
// CHECK-NOT: gpu.shuffle
// CHECK: %[[VALID:[a-zA-Z0-9_]+]] = arith.cmpi sge, %[[BK]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: scf.if %[[VALID]] {
// CHECK: %[[RB:[a-zA-Z0-9_]+]] = memref.load %[[RUNNING]][%[[WARP]], %{{[a-zA-Z0-9_#]+}}] : memref<8x9xi32, #gpu.address_space<workgroup>>
// CHECK: %[[R:[a-zA-Z0-9_]+]] = arith.addi %[[RB]], %[[BEFORE]] : i32
// CHECK: memref.store %[[R]], %[[RANK]][%[[ITEM]]] : memref<?xi32>
// CHECK: nvvm.bar.warp.sync
// The bucket's last lane of the round adds the round's count.
// CHECK: %[[B1P:[a-zA-Z0-9_]+]] = arith.addi %[[BEFORE]], %c1_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[LAST:[a-zA-Z0-9_]+]] = arith.cmpi eq, %[[TOTAL]], %[[B1P]] : i32
// CHECK: arith.andi %[[VALID]], %[[LAST]] : i1
// CHECK: %[[OLD:[a-zA-Z0-9_]+]] = memref.load %[[RUNNING]][%[[WARP]], %{{[a-zA-Z0-9_#]+}}]
// CHECK: %[[NEW:[a-zA-Z0-9_]+]] = arith.addi %[[OLD]], %[[TOTAL]] : i32
// CHECK: memref.store %[[NEW]], %[[RUNNING]][%[[WARP]], %{{[a-zA-Z0-9_#]+}}]
// CHECK: nvvm.bar.warp.sync
// CHECK: scf.yield %[[NEXT]] : i32
// The chunk's histogram, counts[bucket * chunks + chunk].
// CHECK: arith.cmpi ult, %[[C]], %[[NC]] : index
// CHECK: %[[AT0:[a-zA-Z0-9_]+]] = arith.muli %{{[a-zA-Z0-9_#]+}}, %[[NC]] : index
// CHECK: %[[AT:[a-zA-Z0-9_]+]] = arith.addi %[[AT0]], %[[C]] : index
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[CNT]][%[[AT]]] : memref<?xi32>
// CHECK: gpu.terminator
// 2. One block of 1024 threads per bucket: exclusive prefix over the
//    chunks, 1024 at a time (warp scans with 5 up shuffles, the warp sums
//    through shared memory), then the total.
// CHECK: %[[G2:[a-zA-Z0-9_]+]] = arith.maxui %c9{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX2:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %[[G2]], {{.*}}) threads(%[[TX2:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %c1024{{(_[0-9]+)?}}, {{.*}}) workgroup(%[[WS2:[a-zA-Z0-9_]+]] : memref<32xi32, #gpu.address_space<workgroup>>) {
// CHECK: %[[SUM:[a-zA-Z0-9_]+]] = scf.for %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}} to %[[NC]] step %c1024{{(_[0-9]+)?}} iter_args(%[[ACC:[a-zA-Z0-9_]+]] = %c0_i32) -> (i32) {
// CHECK: memref.load %[[CNT]]
// CHECK-COUNT-5: gpu.shuffle  up
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[WS2]][%{{[a-zA-Z0-9_#]+}}] : memref<32xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for %{{[a-zA-Z0-9_#]+}} = %{{[a-zA-Z0-9_#]+}} to %c32{{(_[0-9]+)?}} step
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[CNT]][%{{[a-zA-Z0-9_#]+}}] : memref<?xi32>
// CHECK: arith.cmpi eq, %[[TX2]], %c0{{(_[0-9]+)?}} : index
// CHECK: memref.store %[[SUM]], %[[TOT]][%[[BX2]]] : memref<9xi32>
// CHECK: gpu.terminator
// 3. One thread per slot: its bucket and rank loaded first; each block
//    scans the totals into the bucket offsets (workgroup), block 0 also
//    writes them to the offsets result; then the slot goes to
//    offsets[bucket] + counts[bucket][chunk] + rank, guarded by 0 <= pos
//    < T*k.
// CHECK: %[[NB3:[a-zA-Z0-9_]+]] = arith.ceildivui %[[M]], %c256{{(_[0-9]+)?}} : index
// CHECK: %[[G3:[a-zA-Z0-9_]+]] = arith.maxui %[[NB3]], %c1{{(_[0-9]+)?}} : index
// CHECK: gpu.launch blocks(%[[BX3:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %[[G3]], {{.*}}) threads(%[[TX3:[a-zA-Z0-9_]+]], %{{[a-zA-Z0-9_#]+}}, %{{[a-zA-Z0-9_#]+}}) in (%{{[a-zA-Z0-9_#]+}} = %c256{{(_[0-9]+)?}}, {{.*}}) workgroup(%[[OFFS:[a-zA-Z0-9_]+]] : memref<9xi32, #gpu.address_space<workgroup>>, %[[WS:[a-zA-Z0-9_]+]] : memref<8xi32, #gpu.address_space<workgroup>>) {
// CHECK: %[[SLOT:[a-zA-Z0-9_]+]] = arith.addi %{{[a-zA-Z0-9_#]+}}, %[[TX3]] : index
// CHECK: %[[INS:[a-zA-Z0-9_]+]] = arith.cmpi ult, %[[SLOT]], %[[M]] : index
// CHECK: %[[MINE:[a-zA-Z0-9_]+]]:2 = scf.if %[[INS]] -> (i32, i32) {
// CHECK: memref.load %[[IDS]]
// CHECK: %[[RK:[a-zA-Z0-9_]+]] = memref.load %[[RANK]][%[[SLOT]]] : memref<?xi32>
// CHECK: memref.load %[[TOT]]
// CHECK-COUNT-5: gpu.shuffle  up
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[WS]][%{{[a-zA-Z0-9_#]+}}] : memref<8xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[OFFS]][%{{[a-zA-Z0-9_#]+}}] : memref<9xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: arith.cmpi eq, %[[BX3]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[O:[a-zA-Z0-9_]+]] = memref.load %[[OFFS]][%{{[a-zA-Z0-9_#]+}}]
// CHECK: memref.store %[[O]], %[[OFF]][%{{[a-zA-Z0-9_#]+}}] : memref<9xi32>
// CHECK: arith.cmpi sge, %[[MINE]]#0, %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: %[[CH:[a-zA-Z0-9_]+]] = arith.divui %[[SLOT]], %[[CHUNK]] : index
// CHECK: %[[PRE:[a-zA-Z0-9_]+]] = memref.load %[[CNT]][%{{[a-zA-Z0-9_#]+}}] : memref<?xi32>
// CHECK: %[[BASE:[a-zA-Z0-9_]+]] = memref.load %[[OFFS]][%{{[a-zA-Z0-9_#]+}}] : memref<9xi32, #gpu.address_space<workgroup>>
// CHECK: %[[P0:[a-zA-Z0-9_]+]] = arith.addi %[[BASE]], %[[PRE]] : i32
// CHECK: %[[POS:[a-zA-Z0-9_]+]] = arith.addi %[[P0]], %[[MINE]]#1 : i32
// CHECK: arith.cmpi slt, %[[POS]], %[[M32]] : i32
// CHECK: arith.cmpi sge, %[[POS]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[REV]]
// CHECK: memref.store %{{[a-zA-Z0-9_#]+}}, %[[TOK]]
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: %[[OT:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[OFF]] restrict writable : memref<9xi32> to tensor<9xi32>
// CHECK: %[[RT:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[REV]] restrict writable : memref<?xi32> to tensor<?xi32>
// CHECK: %[[KT:[a-zA-Z0-9_]+]] = bufferization.to_tensor %[[TOK]] restrict writable : memref<?xi32> to tensor<?xi32>
// CHECK: return %[[OT]], %[[RT]], %[[KT]]
//
// Before sm_70 (no match.sync) the rank is 32 idx shuffles.
// SM60-LABEL: func.func @dispatch_dynamic(
// SM60-NOT: nvvm.match.sync
// SM60: scf.for
// SM60-COUNT-32: gpu.shuffle  idx %{{[a-zA-Z0-9_]+}}, %c{{[0-9]+}}_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : i32
// SM60-NOT: nvvm.match.sync
// SM60-LABEL: func.func @dispatch_static(
func.func @dispatch_dynamic(%ids: tensor<?x2xi32>) -> (tensor<9xi32>, tensor<?xi32>, tensor<?xi32>) {
  %o, %r, %t = moe.dispatch %ids num_experts = 8 : tensor<?x2xi32> -> tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
  return %o, %r, %t : tensor<9xi32>, tensor<?xi32>, tensor<?xi32>
}

// Static T = 4, k = 2, E = 64: one chunk; counts 65 x 1, nothing of size
// E*T; three launches.
// CHECK-LABEL: func.func @dispatch_static(
// CHECK: memref.alloc() : memref<65xi32>
// CHECK: memref.alloc() : memref<8xi32>
// CHECK: memref.alloc() : memref<8xi32>
// CHECK: memref.alloc(%{{[a-zA-Z0-9_]+}}) : memref<?xi32>
// CHECK: memref.alloc() : memref<65xi32>
// CHECK: memref.alloc(%{{[a-zA-Z0-9_]+}}) : memref<?xi32>
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch {{.*}} workgroup(%{{[a-zA-Z0-9_]+}} : memref<8x65xi32, #gpu.address_space<workgroup>>)
// CHECK: gpu.launch
// CHECK: gpu.launch {{.*}} workgroup(%{{[a-zA-Z0-9_]+}} : memref<65xi32, #gpu.address_space<workgroup>>, %{{[a-zA-Z0-9_]+}} : memref<8xi32, #gpu.address_space<workgroup>>)
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @dispatch_static(%ids: tensor<4x2xi32>) -> (tensor<65xi32>, tensor<8xi32>, tensor<8xi32>) {
  %o, %r, %t = moe.dispatch %ids num_experts = 64 : tensor<4x2xi32> -> tensor<65xi32>, tensor<8xi32>, tensor<8xi32>
  return %o, %r, %t : tensor<65xi32>, tensor<8xi32>, tensor<8xi32>
}

// E = 2000: fewer warps a block (4), so that the per-warp counters stay
// within 32 KiB.
// CHECK-LABEL: func.func @dispatch_many_experts(
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-zA-Z0-9_]+}} = %c128{{(_[0-9]+)?}}, {{.*}}) workgroup(%{{[a-zA-Z0-9_]+}} : memref<4x2001xi32, #gpu.address_space<workgroup>>)
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @dispatch_many_experts(%ids: tensor<?x8xi32>) -> (tensor<2001xi32>, tensor<?xi32>, tensor<?xi32>) {
  %o, %r, %t = moe.dispatch %ids num_experts = 2000 : tensor<?x8xi32> -> tensor<2001xi32>, tensor<?xi32>, tensor<?xi32>
  return %o, %r, %t : tensor<2001xi32>, tensor<?xi32>, tensor<?xi32>
}

// E = 10000 > 8191: the one-block counting sort, one launch of 1024
// threads with a 1024 x (E + 1) scratch.
// CHECK-LABEL: func.func @dispatch_huge_expert_count(
// CHECK: memref.alloc() : memref<1024x10001xi32>
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-zA-Z0-9_]+}} = %c1024{{(_[0-9]+)?}},
// CHECK-COUNT-3: gpu.barrier
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @dispatch_huge_expert_count(%ids: tensor<?x2xi32>) -> (tensor<10001xi32>, tensor<?xi32>, tensor<?xi32>) {
  %o, %r, %t = moe.dispatch %ids num_experts = 10000 : tensor<?x2xi32> -> tensor<10001xi32>, tensor<?xi32>, tensor<?xi32>
  return %o, %r, %t : tensor<10001xi32>, tensor<?xi32>, tensor<?xi32>
}
