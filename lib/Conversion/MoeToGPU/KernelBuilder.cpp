//===- KernelBuilder.cpp - gpu.launch helpers for the moe GPU lowering ----===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

MemRefType gpu_lowering::anyLayoutType(RankedTensorType type) {
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  auto layout = StridedLayoutAttr::get(type.getContext(), ShapedType::kDynamic,
                                       strides);
  return MemRefType::get(type.getShape(), type.getElementType(), layout);
}

Value gpu_lowering::toBuffer(LoweringBuilder &b, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(b, anyLayoutType(type), tensor,
                                           /*read_only=*/true);
}

Value gpu_lowering::allocBuffer(LoweringBuilder &b, RankedTensorType type,
                                ValueRange dynSizes) {
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  return memref::AllocOp::create(b, memrefType, dynSizes);
}

Value gpu_lowering::allocScratch(LoweringBuilder &b, ArrayRef<int64_t> shape,
                                 Type element, ValueRange dynSizes) {
  return memref::AllocOp::create(b, MemRefType::get(shape, element), dynSizes);
}

Value gpu_lowering::toTensor(LoweringBuilder &b, Value buffer) {
  auto memrefType = cast<MemRefType>(buffer.getType());
  auto tensorType = RankedTensorType::get(memrefType.getShape(),
                                          memrefType.getElementType());
  return bufferization::ToTensorOp::create(b, tensorType, buffer,
                                           /*restrict=*/true,
                                           /*writable=*/true);
}

SmallVector<Value> gpu_lowering::dynRows(RankedTensorType type, Value rows) {
  SmallVector<Value> dyn;
  if (type.isDynamicDim(0))
    dyn.push_back(rows);
  return dyn;
}

MemRefType gpu_lowering::workgroupType(ArrayRef<int64_t> shape, Type element) {
  auto space = gpu::AddressSpaceAttr::get(element.getContext(),
                                          gpu::AddressSpace::Workgroup);
  return MemRefType::get(shape, element, MemRefLayoutAttrInterface(), space);
}

void gpu_lowering::launch(LoweringBuilder &b, Value gridX, Value gridY,
                          int64_t threads, ArrayRef<MemRefType> workgroup,
                          KernelBody body) {
  Value one = b.idx(1);
  // A grid of 0 blocks is not launchable: run one block, whose threads the
  // bodies' guards turn away.
  Value gx = b.maxIdx(gridX, one);
  SmallVector<Type> wg(workgroup.begin(), workgroup.end());
  auto launchOp = gpu::LaunchOp::create(
      b, gx, gridY, one, b.idx(threads), one, one,
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      /*asyncDependencies=*/ValueRange{}, wg);
  Block &block = launchOp.getBody().front();
  OpBuilder nested = OpBuilder::atBlockEnd(&block);
  LoweringBuilder kb(b.getLoc(), nested);
  KernelIds ids{launchOp.getBlockIds().x, launchOp.getBlockIds().y,
                launchOp.getThreadIds().x, launchOp.getGridSize().x};
  SmallVector<Value> wgValues(launchOp.getWorkgroupAttributions());
  body(kb, ids, wgValues);
  gpu::TerminatorOp::create(kb);
}

void gpu_lowering::forEach(LoweringBuilder &b, Value lb, Value ub, Value step,
                           function_ref<void(LoweringBuilder &, Value)> body) {
  scf::ForOp::create(b, lb, ub, step, ValueRange{},
                     [&](OpBuilder &nested, Location loc, Value iv,
                         ValueRange) {
                       LoweringBuilder nb(loc, nested);
                       body(nb, iv);
                       scf::YieldOp::create(nb);
                     });
}

void gpu_lowering::when(LoweringBuilder &b, Value cond,
                        function_ref<void(LoweringBuilder &)> body) {
  scf::IfOp::create(b, cond, [&](OpBuilder &nested, Location loc) {
    LoweringBuilder nb(loc, nested);
    body(nb);
    scf::YieldOp::create(nb);
  });
}

void gpu_lowering::forEachSlotOfRow(
    LoweringBuilder &b, Value ids, Value row,
    function_ref<void(LoweringBuilder &, Value, Value)> body) {
  int64_t k = cast<MemRefType>(ids.getType()).getDimSize(1);
  forEach(b, b.idx(0), b.idx(k), b.idx(1), [&](LoweringBuilder &b, Value j) {
    body(b, j, b.load(ids, {row, j}));
  });
}

std::pair<Value, Value> gpu_lowering::rowAndSlot(LoweringBuilder &b,
                                                 Value slot, int64_t k) {
  return {arith::DivUIOp::create(b, slot, b.idx(k)),
          arith::RemUIOp::create(b, slot, b.idx(k))};
}

void gpu_lowering::launchForEach(
    LoweringBuilder &b, Value n,
    function_ref<void(LoweringBuilder &, Value)> body) {
  Value grid = b.ceilDiv(n, kBlockThreads);
  launch(b, grid, b.idx(1), kBlockThreads, {},
         [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
           Value i = kb.add(kb.mul(ids.blockX, kb.idx(kBlockThreads)),
                            ids.threadX);
           when(kb, kb.cmpi(CmpI::ult, i, n),
                [&](LoweringBuilder &kb) { body(kb, i); });
         });
}

void gpu_lowering::launchRowsCols(
    LoweringBuilder &b, Value rows, Value cols,
    function_ref<void(LoweringBuilder &, Value, Value)> body) {
  Value colBlocks = b.maxIdx(b.ceilDiv(cols, kBlockThreads), b.idx(1));
  launch(b, rows, colBlocks, kBlockThreads, {},
         [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
           Value col = kb.add(kb.mul(ids.blockY, kb.idx(kBlockThreads)),
                              ids.threadX);
           Value inside = kb.andi(kb.cmpi(CmpI::ult, ids.blockX, rows),
                                  kb.cmpi(CmpI::ult, col, cols));
           when(kb, inside,
                [&](LoweringBuilder &kb) { body(kb, ids.blockX, col); });
         });
}

void gpu_lowering::fillBuffer(LoweringBuilder &b, Value buffer, Value value) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getRank() == 1) {
    launchForEach(b, b.memDim(buffer, 0), [&](LoweringBuilder &kb, Value i) {
      kb.store(value, buffer, {i});
    });
    return;
  }
  assert(type.getRank() == 2 && "fillBuffer: rank 1 or 2");
  launchRowsCols(b, b.memDim(buffer, 0), b.memDim(buffer, 1),
                 [&](LoweringBuilder &kb, Value r, Value c) {
                   kb.store(value, buffer, {r, c});
                 });
}

void gpu_lowering::orderedBuckets(
    LoweringBuilder &b, Value n, int64_t numBuckets,
    function_ref<Value(LoweringBuilder &, Value)> bucketOf,
    function_ref<void(LoweringBuilder &, Value)> onTotals,
    function_ref<void(LoweringBuilder &, Value, Value, Value)> place) {
  Type i32 = b.getI32Type();
  Value counts = allocScratch(b, {kScanThreads, numBuckets}, i32, {});
  Value totals = allocScratch(b, {numBuckets}, i32, {});
  Value chunk = b.ceilDiv(n, kScanThreads);
  launch(
      b, b.idx(1), b.idx(1), kScanThreads, {},
      [&](LoweringBuilder &kb, const KernelIds &ids, ArrayRef<Value>) {
        Value t = ids.threadX;
        Value zero = kb.idx(0), one = kb.idx(1);
        Value nb = kb.idx(numBuckets);
        Value first = kb.minIdx(kb.mul(t, chunk), n);
        Value last = kb.minIdx(kb.add(first, chunk), n);
        // 1. Per-thread histogram of its chunk.
        forEach(kb, zero, nb, one, [&](LoweringBuilder &kb, Value bk) {
          kb.store(kb.i32(0), counts, {t, bk});
        });
        forEach(kb, first, last, one, [&](LoweringBuilder &kb, Value item) {
          Value bucket = bucketOf(kb, item);
          when(kb, kb.cmpi(CmpI::sge, bucket, kb.i32(0)),
               [&](LoweringBuilder &kb) {
                 Value bk = kb.toIndex(bucket);
                 Value c = kb.load(counts, {t, bk});
                 kb.store(kb.add(c, kb.i32(1)), counts, {t, bk});
               });
        });
        gpu::BarrierOp::create(kb);
        // 2. Exclusive scan over threads, one bucket per thread (strided).
        forEach(kb, t, nb, kb.idx(kScanThreads),
                [&](LoweringBuilder &kb, Value bk) {
                  Value total = kb.forLoop(
                      zero, kb.idx(kScanThreads), {kb.i32(0)},
                      [&](LoweringBuilder &kb, Value u,
                          ValueRange acc) -> SmallVector<Value> {
                        Value c = kb.load(counts, {u, bk});
                        kb.store(acc[0], counts, {u, bk});
                        return {kb.add(acc[0], c)};
                      })[0];
                  kb.store(total, totals, {bk});
                });
        gpu::BarrierOp::create(kb);
        when(kb, kb.cmpi(CmpI::eq, t, zero),
             [&](LoweringBuilder &kb) { onTotals(kb, totals); });
        gpu::BarrierOp::create(kb);
        // 3. Ordered placement.
        forEach(kb, first, last, one, [&](LoweringBuilder &kb, Value item) {
          Value bucket = bucketOf(kb, item);
          when(kb, kb.cmpi(CmpI::sge, bucket, kb.i32(0)),
               [&](LoweringBuilder &kb) {
                 Value bk = kb.toIndex(bucket);
                 Value rank = kb.load(counts, {t, bk});
                 kb.store(kb.add(rank, kb.i32(1)), counts, {t, bk});
                 place(kb, item, bucket, rank);
               });
        });
      });
}

void gpu_lowering::inclusiveScan(LoweringBuilder &b, Value buffer, Value n) {
  Type i32 = b.getI32Type();
  Value chunk = b.ceilDiv(n, kScanThreads);
  launch(b, b.idx(1), b.idx(1), kScanThreads,
         {workgroupType({kScanThreads}, i32)},
         [&](LoweringBuilder &kb, const KernelIds &ids,
             ArrayRef<Value> shared) {
           Value partial = shared[0];
           Value t = ids.threadX;
           Value zero = kb.idx(0);
           Value first = kb.minIdx(kb.mul(t, chunk), n);
           Value last = kb.minIdx(kb.add(first, chunk), n);
           Value sum = kb.forLoop(first, last, {kb.i32(0)},
                                  [&](LoweringBuilder &kb, Value i,
                                      ValueRange acc) -> SmallVector<Value> {
                                    return {kb.add(acc[0],
                                                   kb.load(buffer, {i}))};
                                  })[0];
           kb.store(sum, partial, {t});
           gpu::BarrierOp::create(kb);
           when(kb, kb.cmpi(CmpI::eq, t, zero), [&](LoweringBuilder &kb) {
             kb.forLoop(zero, kb.idx(kScanThreads), {kb.i32(0)},
                        [&](LoweringBuilder &kb, Value u,
                            ValueRange acc) -> SmallVector<Value> {
                          Value c = kb.load(partial, {u});
                          kb.store(acc[0], partial, {u});
                          return {kb.add(acc[0], c)};
                        });
           });
           gpu::BarrierOp::create(kb);
           kb.forLoop(first, last, {kb.load(partial, {t})},
                      [&](LoweringBuilder &kb, Value i,
                          ValueRange acc) -> SmallVector<Value> {
                        Value running = kb.add(acc[0], kb.load(buffer, {i}));
                        kb.store(running, buffer, {i});
                        return {running};
                      });
         });
}
