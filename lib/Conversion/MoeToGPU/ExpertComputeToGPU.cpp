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
// expert owns are zero-filled first (only those outside [offsets[0],
// offsets[E]) without a scatter; see zeroUncoveredRows).
//
// moe.glu is one elementwise kernel (one thread per output element).
//
//===----------------------------------------------------------------------===//

#include "Gemm/GemmKernel.h"
#include "KernelBuilder.h"
#include "Patterns.h"

#include "../Utils/FusedForms.h"
#include "../Utils/Glu.h"
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;

/// Blocks of the zero-fill kernel (8 per SM on an H100/H200).
constexpr int64_t kZeroFillBlocks = 1056;

namespace {

/// The output rows no expert writes must read zero. Every GEMM row in
/// [offsets[0], offsets[E]) (clamped) is owned by some expert (a path from
/// offsets[0] to offsets[E] crosses every row in between upwards) and both
/// engines write all rows their experts own. Without a scatter, output row
/// r is GEMM row r: only the rows outside that range are zeroed (a
/// well-formed dispatch has none). With a scatter, the rows written are the
/// in-range scatter targets of those GEMM rows: a flag per output row is
/// set for each, and the unflagged rows are zeroed (a permutation leaves
/// none) instead of zero-filling the whole output first.
void zeroUncoveredRows(LoweringBuilder &b, const GemmOperands &g) {
  Value zero = b.scalar(g.outElem);
  RaggedTiles ragged{g.offsets, g.m, g.numExperts, 1};
  auto covered = [&](LoweringBuilder &b, Value row) {
    Value lo = ragged.offsetAt(b, b.idx(0));
    Value hi = ragged.offsetAt(b, b.idx(g.numExperts));
    return b.andi(b.cmpi(CmpI::uge, row, lo), b.cmpi(CmpI::ult, row, hi));
  };
  Value written;
  if (g.scatter) {
    written = allocScratch(b, {ShapedType::kDynamic}, b.getI32Type(), {g.m});
    fillBuffer(b, written, b.i32(0));
    launchForEach(b, g.m, [&](LoweringBuilder &b, Value row) {
      Value dest = b.load(g.scatter, {row});
      Value ok = b.andi(covered(b, row),
                        b.inRange(dest, b.i32(0), b.toI32(g.m)));
      when(b, ok, [&](LoweringBuilder &b) {
        b.store(b.i32(1), written, {b.toIndex(dest)});
      });
    });
  }
  // Blocks stride over the output rows (a bounded grid: launching one
  // block per row cost ~20 us at 32K rows for a fill with nothing to do);
  // rows that are written are skipped at once.
  Value grid = b.minIdx(g.m, b.idx(kZeroFillBlocks));
  launch(b, grid, b.idx(1), kBlockThreads, {},
         [&](LoweringBuilder &b, const KernelIds &ids, ArrayRef<Value>) {
           forEach(b, ids.blockX, g.m, ids.gridX, [&](LoweringBuilder &b,
                                                      Value row) {
             Value unwritten =
                 written
                     ? b.cmpi(CmpI::eq, b.load(written, {row}), b.i32(0))
                     : b.noti(covered(b, row));
             when(b, unwritten, [&](LoweringBuilder &b) {
               forEach(b, ids.threadX, b.idx(g.outN), b.idx(kBlockThreads),
                       [&](LoweringBuilder &b, Value c) {
                         b.store(zero, g.out, {row, c});
                       });
             });
           });
         });
}

struct ExpertGemmToGPU : OpRewritePattern<ExpertGemmOp> {
  ExpertGemmToGPU(MLIRContext *ctx, const MoeGemmOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(ExpertGemmOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<GemmKernelConfig> config = chooseGemmConfig(op, options);
    if (failed(config))
      return failure();
    LoweringBuilder b(op.getLoc(), rewriter);
    GemmOperands g = gemmOperandsOf(b, op);
    zeroUncoveredRows(b, g);
    if (config->engine == GemmEngine::Simt) {
      emitSimtExpertGemm(b, g, config->simt);
    } else {
      Value ok = wgmmaOperandsAligned(b, g);
      Value rhsMap;
      if (config->rhsTma) {
        rhsMap = emitRhsTensorMap(b, op->getParentOfType<ModuleOp>(), g,
                                  *config);
        ok = b.andi(ok, b.cmpi(arith::CmpIPredicate::ne, rhsMap,
                               arith::ConstantIntOp::create(
                                   b, b.getI64Type(), 0)));
      }
      scf::IfOp::create(
          b, ok,
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder nb(loc, nested);
            emitWgmmaExpertGemm(nb, g, *config, rhsMap);
            scf::YieldOp::create(nb);
          },
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder nb(loc, nested);
            emitSimtExpertGemm(nb, g, config->simt);
            scf::YieldOp::create(nb);
          });
    }
    rewriter.replaceOp(op, toTensor(b, g.out));
    return success();
  }

  MoeGemmOptions options;
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
    bool concat = p.layout == GluLayout::concat;
    Value input = toBuffer(b, op.getInput());
    Value rows = b.memDim(input, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, rows));
    launchRowsCols(b, rows, b.idx(n),
                   [&](LoweringBuilder &b, Value row, Value col) {
                     Value gateCol = concat ? col : b.mul(col, b.idx(2));
                     Value upCol = concat ? b.add(col, b.idx(n))
                                          : b.add(gateCol, b.idx(1));
                     Value gate = b.toF32(b.load(input, {row, gateCol}));
                     Value up = b.toF32(b.load(input, {row, upCol}));
                     b.store(b.fromF32(gluValue(b, p, gate, up, /*approximate=*/true), f), out,
                             {row, col});
                   });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

} // namespace

void mlir::moe::populateExpertComputeToGPUPatterns(RewritePatternSet &patterns,
                                                   const MoeGemmOptions &gemm) {
  patterns.add<ExpertGemmToGPU>(patterns.getContext(), gemm);
  patterns.add<GluToGPU>(patterns.getContext());
}
