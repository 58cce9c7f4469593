//===- ExpertComputeToGPU.cpp - the expert GEMM and GLU kernels ----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.expert_gemm (and moe.grouped_matmul, rewritten to it) is one kernel
// over the ragged expert groups, built by the GEMM emitter in Gemm/ from
// the configuration the cost model picks (Gemm/GemmConfig.cpp): the Hopper
// wgmma engine on sm_90a where the op allows it, else the portable SIMT
// engine. The Hopper engine's loaders need unit inner strides and 16-byte
// aligned rows, which only the run time knows: the kernel is guarded by
// that check and falls back to the SIMT engine when it fails. Rows no
// expert owns are zero-filled first, by the cheapest kernel the op's
// context allows (none, when nothing reads them; see uncoveredFillOf).
//
// moe.glu is one elementwise kernel (one thread per output element).
//
//===----------------------------------------------------------------------===//

#include "Gemm/GemmKernel.h"
#include "Gemm/NVVMBuilder.h"
#include "KernelBuilder.h"
#include "Patterns.h"

#include "Utils/Glu.h"
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

/// Blocks of the zero fill of rows outside the experts' range (2 per SM on
/// an H100/H200: a well-formed dispatch leaves no such row, so the kernel
/// is mostly a launch).
constexpr int64_t kZeroFillBlocks = 264;

namespace {

/// How the output rows no expert writes get their zeros (Rows / Flags
/// only, unless the `elide-fills` option is set).
///
/// Every GEMM row in [offsets[0], offsets[E]) (clamped) is owned by some
/// expert (a path from offsets[0] to offsets[E] crosses every row in
/// between upwards) and both engines write all rows their experts own, so
/// only the GEMM rows outside that range ("uncovered") matter:
/// - Unread: the result feeds only expert GEMMs that read it as their lhs,
///   without a gather, over the same offsets: they read the covered rows
///   alone (the first GEMM of a fused layer), so nothing is filled.
/// - Rows: without a scatter, output row r is GEMM row r: the uncovered
///   rows are zeroed (a well-formed dispatch has none).
/// - PermutedRows: the scatter is a dispatch's reverse_indices, a
///   permutation of [0, M) (moe.get_indices): every output row is
///   the target of exactly one GEMM row, so the targets of the uncovered
///   rows are zeroed.
/// - Flags: any other scatter: a flag per output row is set for each
///   in-range target of a covered row, and the unflagged rows are zeroed.

/// Whether `scatter` is the reverse_indices result of a dispatch op.
bool isDispatchPermutation(Value scatter) {
  Operation *def = scatter.getDefiningOp();
  if (auto op = dyn_cast_if_present<RouteDispatchOp>(def))
    return op.getReverseIndices() == scatter;
  if (auto op = dyn_cast_if_present<DispatchOp>(def))
    return op.getReverseIndices() == scatter;
  if (auto op = dyn_cast_if_present<GetIndicesOp>(def))
    return op.getReverseIndices() == scatter;
  return false;
}

UncoveredFill uncoveredFillOf(ExpertGemmOp op, bool elide) {
  if (!elide)
    return op.getScatter() ? UncoveredFill::Flags : UncoveredFill::Rows;
  if (op.getScatter())
    return isDispatchPermutation(op.getScatter()) ? UncoveredFill::PermutedRows
                                                  : UncoveredFill::Flags;
  Value result = op.getResult();
  bool unread = !result.use_empty() &&
                llvm::all_of(result.getUses(), [&](OpOperand &use) {
                  auto user = dyn_cast<ExpertGemmOp>(use.getOwner());
                  return user && &use == &user.getLhsMutable() &&
                         !user.getGather() &&
                         user.getOffsets() == op.getOffsets();
                });
  return unread ? UncoveredFill::Unread : UncoveredFill::Rows;
}

/// The fp8_block GEMM that `op` (GEMM1 of a fused layer) may quantize its
/// output rows for: its only user, reading them as its lhs (no gather,
/// the same offsets, so only the rows `op` writes), when `op`'s Hopper main
/// kernel has 256-column concat tiles (a tile holds whole 128-column
/// groups of 16-bit outputs, in GEMM row order) and `user` is not lowered
/// yet. Null otherwise.
ExpertGemmOp quantizedHandoffUser(ExpertGemmOp op, const GemmOperands &g,
                                  const GemmKernelConfig &config,
                                  const llvm::DenseSet<Operation *> &lowered) {
  if (config.engine != GemmEngine::Wgmma || !config.fp8 || config.swapAB ||
      config.tileN != 256 || !g.glu || g.glu->layout != GluLayout::concat ||
      g.outN % 128 != 0 || g.scatter || g.scale ||
      g.outElem.getIntOrFloatBitWidth() != 16)
    return {};
  Value result = op.getResult();
  if (!result.hasOneUse())
    return {};
  OpOperand &use = *result.getUses().begin();
  auto user = dyn_cast<ExpertGemmOp>(use.getOwner());
  if (!user || &use != &user.getLhsMutable() ||
      user.getFormat() != WeightFormat::fp8_block || user.getGather() ||
      user.getOffsets() != op.getOffsets() || lowered.contains(user))
    return {};
  return user;
}

} // namespace

/// Zeroes output row `row`, threads `thread` (of `threads`) over its
/// columns.
static void zeroOutputRow(LoweringBuilder &b, const GemmOperands &g, Value zero,
                          Value row, Value thread, int64_t threads) {
  forEach(b, thread, b.idx(g.outN), b.idx(threads),
          [&](LoweringBuilder &b, Value c) { b.store(zero, g.out, {row, c}); });
}

void gpu_lowering::zeroUncoveredStrided(LoweringBuilder &b,
                                        const GemmOperands &g,
                                        UncoveredFill fill, Value block,
                                        Value grid, Value thread,
                                        int64_t threads) {
  assert((fill == UncoveredFill::Rows || fill == UncoveredFill::PermutedRows) &&
         "zeroUncoveredStrided: Rows or PermutedRows");
  Value zero = b.scalar(g.outElem);
  RaggedTiles ragged{g.offsets, g.m, g.numExperts, 1};
  auto zeroRow = [&](LoweringBuilder &b, Value row) {
    zeroOutputRow(b, g, zero, row, thread, threads);
  };
  Value lo = ragged.offsetAt(b, b.idx(0));
  Value hi = b.maxIdx(ragged.offsetAt(b, b.idx(g.numExperts)), lo);
  Value count = b.add(lo, b.sub(g.m, hi));
  forEach(b, block, count, grid, [&](LoweringBuilder &b, Value i) {
    Value row = b.select(b.cmpi(CmpI::ult, i, lo), i, b.add(hi, b.sub(i, lo)));
    if (fill == UncoveredFill::Rows)
      return zeroRow(b, row);
    Value dest = b.load(g.scatter, {row});
    when(b, b.inRange(dest, b.i32(0), b.toI32(g.m)),
         [&](LoweringBuilder &b) { zeroRow(b, b.toIndex(dest)); });
  });
}

namespace {

void zeroUncoveredRows(LoweringBuilder &b, const GemmOperands &g,
                       UncoveredFill fill) {
  if (fill == UncoveredFill::Unread)
    return;
  if (fill == UncoveredFill::Rows || fill == UncoveredFill::PermutedRows) {
    // The uncovered rows are [0, lo) and [max(lo, hi), m): the blocks
    // stride over their count only (each block reads two offsets and, for
    // a well-formed dispatch, stops; the stride over all rows checking
    // each cost 13 us at 32K rows and 52 us at 128K on the H200).
    Value grid = b.minIdx(g.m, b.idx(kZeroFillBlocks));
    launch(b, grid, b.idx(1), kBlockThreads, {},
           [&](LoweringBuilder &b, const KernelIds &ids, ArrayRef<Value>) {
             zeroUncoveredStrided(b, g, fill, ids.blockX, ids.gridX,
                                  ids.threadX, kBlockThreads);
           });
    return;
  }
  Value zero = b.scalar(g.outElem);
  RaggedTiles ragged{g.offsets, g.m, g.numExperts, 1};
  Value written =
      allocScratch(b, {ShapedType::kDynamic}, b.getI32Type(), {g.m});
  fillBuffer(b, written, b.i32(0));
  launchForEach(b, g.m, [&](LoweringBuilder &b, Value row) {
    Value dest = b.load(g.scatter, {row});
    Value lo = ragged.offsetAt(b, b.idx(0));
    Value hi = ragged.offsetAt(b, b.idx(g.numExperts));
    Value covered =
        b.andi(b.cmpi(CmpI::uge, row, lo), b.cmpi(CmpI::ult, row, hi));
    Value ok = b.andi(covered, b.inRange(dest, b.i32(0), b.toI32(g.m)));
    when(b, ok, [&](LoweringBuilder &b) {
      b.store(b.i32(1), written, {b.toIndex(dest)});
    });
  });
  // One thread per row reads its flag; a block lists its unflagged rows in
  // shared memory and zeroes them together (none for a permutation). (A
  // block striding over rows, one flag load after another, cost 9 us at
  // 32K rows and 33-43 us at 128K on the H200.)
  Value blocks = b.ceilDiv(g.m, kBlockThreads);
  MemRefType listType = workgroupType({kBlockThreads}, b.getI32Type());
  MemRefType countType = workgroupType({1}, b.getI32Type());
  launch(
      b, blocks, b.idx(1), kBlockThreads, {listType, countType},
      [&](LoweringBuilder &b, const KernelIds &ids, ArrayRef<Value> shared) {
        Value list = shared[0], count = shared[1];
        Value zeroIdx = b.idx(0);
        when(b, b.cmpi(CmpI::eq, ids.threadX, zeroIdx),
             [&](LoweringBuilder &b) { b.store(b.i32(0), count, {zeroIdx}); });
        gpu::BarrierOp::create(b);
        Value row = b.add(b.mul(ids.blockX, b.idx(kBlockThreads)), ids.threadX);
        when(b, b.cmpi(CmpI::ult, row, g.m), [&](LoweringBuilder &b) {
          when(b, b.cmpi(CmpI::eq, b.load(written, {row}), b.i32(0)),
               [&](LoweringBuilder &b) {
                 Value at = memref::AtomicRMWOp::create(
                     b, arith::AtomicRMWKind::addi, b.i32(1), count,
                     ValueRange{zeroIdx});
                 b.store(b.toI32(row), list, {b.toIndex(at)});
               });
        });
        gpu::BarrierOp::create(b);
        Value n = b.toIndex(b.load(count, {zeroIdx}));
        forEach(b, zeroIdx, n, b.idx(1), [&](LoweringBuilder &b, Value j) {
          zeroOutputRow(b, g, zero, b.toIndex(b.load(list, {j})), ids.threadX,
                        kBlockThreads);
        });
      });
}

/// The fp8_block handoff between the two GEMMs of a layer: GEMM1's main
/// kernel writes the e4m3 codes and scales of its output rows in its
/// epilogue (quantizedHandoffUser), and GEMM2 multiplies them instead of
/// quantizing GEMM1's output in a kernel of its own. GEMM1's other paths
/// (small-M kernels, SIMT fallback) store their output and quantize it
/// after them. State of one conversion, shared by the pattern's runs:
/// the handoffs by their reading GEMM, and the GEMMs lowered so far (a
/// GEMM2 lowered first quantizes for itself, and GEMM1 then does not).
struct QuantizedHandoffs {
  llvm::DenseMap<Operation *, QuantizedRows> byReader;
  llvm::DenseSet<Operation *> lowered;
};

struct ExpertGemmToGPU : OpRewritePattern<ExpertGemmOp> {
  ExpertGemmToGPU(MLIRContext *ctx, const ConvertMoeToGPUPassOptions &options)
      : OpRewritePattern(ctx), options(options),
        handoffs(std::make_shared<QuantizedHandoffs>()) {}

  LogicalResult matchAndRewrite(ExpertGemmOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<GemmKernelConfig> config = chooseGemmConfig(op, options);
    if (failed(config))
      return failure();
    LoweringBuilder b(op.getLoc(), rewriter);
    GemmOperands g = gemmOperandsOf(b, op);
    // fp8_block: the activations are quantized first (one kernel), unless
    // the GEMM that produced them did it.
    if (g.fp8()) {
      auto handoff = handoffs->byReader.find(op);
      if (handoff != handoffs->byReader.end()) {
        g.lhs = handoff->second.codes;
        g.lhsScale = handoff->second.scales;
      } else {
        quantizeActivations(b, g);
      }
    }
    if (ExpertGemmOp user =
            quantizedHandoffUser(op, g, *config, handoffs->lowered)) {
      g.quantizedOut = allocQuantizedRows(
          b, g.m, g.outN, user.getScaleFmt() == ScaleFmt::ue8m0);
      handoffs->byReader[user] = *g.quantizedOut;
    }
    handoffs->lowered.insert(op);
    UncoveredFill fill = uncoveredFillOf(op, options.elideFills);
    // elide-fills: the Hopper kernel zeroes the uncovered rows itself (its
    // consumer warpgroups, before their first tile): one launch fewer;
    // its SIMT fallback keeps the fill kernel.
    bool fillInKernel =
        options.elideFills && config->engine == GemmEngine::Wgmma &&
        (fill == UncoveredFill::Rows || fill == UncoveredFill::PermutedRows);
    if (!fillInKernel)
      zeroUncoveredRows(b, g, fill);
    if (config->engine == GemmEngine::Simt) {
      emitSimtExpertGemm(b, g, config->simt);
    } else {
      ModuleOp module = op->getParentOfType<ModuleOp>();
      auto zero64 = [](LoweringBuilder &b) -> Value {
        return arith::ConstantIntOp::create(b, b.getI64Type(), 0);
      };
      // if (cond) the Hopper kernel `kernel` else `otherwise`. With a
      // quantized handoff each path yields whether it stored `out` (true)
      // or the codes and scales (false: the main kernel); else nothing
      // (null).
      auto hopperIf = [&](LoweringBuilder &b, Value cond,
                          const GemmKernelConfig &kernel, Value rhsMap,
                          function_ref<Value(LoweringBuilder &)> otherwise) {
        SmallVector<Type, 1> types;
        if (g.quantizedOut)
          types.push_back(b.getI1Type());
        SmallVector<Value> stored = b.ifElse(
            cond, types,
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              emitWgmmaExpertGemm(b, g, kernel, rhsMap,
                                  fillInKernel ? fill : UncoveredFill::Unread);
              if (!g.quantizedOut)
                return {};
              return {b.i1(kernel.swapAB)};
            },
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              Value v = otherwise(b);
              if (!v)
                return {};
              return {v};
            });
        return stored.empty() ? Value() : stored[0];
      };
      // The main Hopper kernel under its run-time checks (aligned
      // operands, a tensor map), else the SIMT kernel.
      auto emitMain = [&](LoweringBuilder &b) {
        Value ok = wgmmaOperandsAligned(b, g);
        if (g.quantizedOut)
          ok =
              b.andi(ok, nvvm::rowsAligned16(b, g.quantizedOut->codes, {0}, 1));
        Value rhsMap;
        if (config->rhsTma) {
          rhsMap = emitRhsTensorMap(b, module, g, *config);
          ok = b.andi(ok, b.cmpi(arith::CmpIPredicate::ne, rhsMap, zero64(b)));
        }
        return hopperIf(b, ok, *config, rhsMap, [&](LoweringBuilder &b) {
          if (fillInKernel)
            zeroUncoveredRows(b, g, fill);
          emitSimtExpertGemm(b, g, config->simt);
          return g.quantizedOut ? b.i1(true) : Value();
        });
      };
      // The small-M kernels beside it, chosen on the host from the rows
      // (T x k, known at call time): the first whose swapRows x E bounds
      // them; no synchronisation, one compiled function for every T,
      // CUDA-graph capturable. A kernel's tensor map is made only when the
      // rows are few enough for it; when its checks fail the next kernel's
      // path runs (one SIMT fallback for all).
      SmallVector<GemmKernelConfig> swaps =
          chooseSwapConfigs(op, options, *config);
      std::function<Value(LoweringBuilder &, size_t)> emitFrom =
          [&](LoweringBuilder &b, size_t tier) -> Value {
        if (tier == swaps.size())
          return emitMain(b);
        const GemmKernelConfig &swap = swaps[tier];
        Value fewRows = b.cmpi(arith::CmpIPredicate::ule, g.m,
                               b.idx(swap.swapRows * g.numExperts));
        Value swapMap = b.ifElse(
            fewRows, {b.getI64Type()},
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              return {emitRhsTensorMap(b, module, g, swap)};
            },
            [&](LoweringBuilder &b) -> SmallVector<Value> {
              return {zero64(b)};
            })[0];
        Value useSwap =
            b.andi(b.andi(fewRows, wgmmaOperandsAligned(b, g)),
                   b.cmpi(arith::CmpIPredicate::ne, swapMap, zero64(b)));
        return hopperIf(b, useSwap, swap, swapMap, [&](LoweringBuilder &b) {
          return emitFrom(b, tier + 1);
        });
      };
      Value storedOut = emitFrom(b, 0);
      // The paths that stored `out` (small-M, SIMT) quantize it after them.
      if (g.quantizedOut)
        when(b, storedOut, [&](LoweringBuilder &b) {
          quantizeRows(b, g.out, g.m, g.outN, *g.quantizedOut);
        });
    }
    rewriter.replaceOp(op, toTensor(b, g.out));
    return success();
  }

  ConvertMoeToGPUPassOptions options;
  std::shared_ptr<QuantizedHandoffs> handoffs;
};

struct GluToGPU : OpRewritePattern<GluOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GluOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    int64_t n = resultType.getDimSize(1);
    GluParams p = gluParamsOf(op);
    Value input = toBuffer(b, op.getInput());
    Value rows = b.memDim(input, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, rows));
    launchRowsCols(
        b, rows, b.idx(n), [&](LoweringBuilder &b, Value row, Value col) {
          auto [gateCol, upCol] = gluPairColumns(b, p.layout, n, col);
          Value gate = b.toF32(b.load(input, {row, gateCol}));
          Value up = b.toF32(b.load(input, {row, upCol}));
          Value y = gluValue(b, p, gate, up, /*approximate=*/true);
          b.store(b.fromF32(y, f), out, {row, col});
        });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

} // namespace

void mlir::moe::populateExpertComputeToGPUPatterns(
    RewritePatternSet &patterns, const ConvertMoeToGPUPassOptions &gemm) {
  patterns.add<ExpertGemmToGPU>(patterns.getContext(), gemm);
  patterns.add<GluToGPU>(patterns.getContext());
}
