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
// that check and falls back to the SIMT engine when it fails. The output
// starts zero-filled: rows no expert owns stay zero.
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

namespace {

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
    fillBuffer(b, g.out, b.scalar(g.outElem));
    if (config->engine == GemmEngine::Simt) {
      emitSimtExpertGemm(b, g, config->simt);
    } else {
      scf::IfOp::create(
          b, wgmmaOperandsAligned(b, g),
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder nb(loc, nested);
            emitWgmmaExpertGemm(nb, g, *config);
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
                     b.store(b.fromF32(gluValue(b, p, gate, up), f), out,
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
