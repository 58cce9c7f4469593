//===- TopK.cpp - moe.topk as a GPU kernel --------------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.topk: one warp per row (warpSelectWith) when E <= 512, else one
// thread per row running Selection.h's k selection passes over the row.
//
//===----------------------------------------------------------------------===//

#include "Routing.h"

#include "Utils/Selection.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::routing;

void routing::topkPerThread(LoweringBuilder &b, int64_t k, int64_t e,
                            Value input, Value t, Value values, Value indices) {
  launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
    selectTopK(
        b, k, e, {},
        [&](LoweringBuilder &b, Value col) {
          return b.toF32(b.load(input, {row, col}));
        },
        nullptr,
        [&](LoweringBuilder &b, Value j, Value pick,
            ValueRange) -> SmallVector<Value> {
          b.store(b.load(input, {row, b.toIndex(pick)}), values, {row, j});
          b.store(pick, indices, {row, j});
          return {};
        });
  });
}

void routing::topkPerWarp(LoweringBuilder &b, int64_t k, int64_t e, Value input,
                          Value t, Value values, Value indices,
                          const WarpSelectMode &mode) {
  launchWarpPerRow(b, t, [&](LoweringBuilder &b, Value rowIdx, Value lane) {
    WarpRow row{e, lane};
    SmallVector<Value> keys;
    for (int64_t r = 0; r < row.regs(); ++r) {
      Value v = b.toF32(b.load(input, {rowIdx, row.column(b, r)}));
      Value key = mode.key(b, v);
      if (!row.full())
        key = b.select(row.valid(b, r), key, mode.none(b));
      keys.push_back(key);
    }
    WarpPicks picks =
        warpSelectWith(b, mode, row, k, keys, {}, /*sumScores=*/false);
    forEachLaneSlot(b, row, k, [&](LoweringBuilder &b, Value j, int64_t q) {
      Value pick = picks.picks[q];
      b.store(b.load(input, {rowIdx, b.toIndex(pick)}), values, {rowIdx, j});
      b.store(pick, indices, {rowIdx, j});
    });
  });
}
