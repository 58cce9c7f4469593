//===- FusionUtils.cpp - helpers shared by the moe fusion passes ----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"

#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::moe;

bool ExpertGemmParts::match(Value v) {
  Builder b(v.getContext());
  if (auto gmm = v.getDefiningOp<GroupedMatmulOp>()) {
    op = gmm;
    lhs = gmm.getLhs();
    rhs = gmm.getRhs();
    offsets = gmm.getOffsets();
    bias = gmm.getBias();
    rhsScale = gmm.getRhsScale();
    gather = scatter = scale = Value();
    transposeRhs = gmm.getTransposeRhsAttr();
    weightFormat = gmm.getWeightFormatAttr();
    scaleFmt = gmm.getScaleFmtAttr();
    activation = nullptr;
    layout = nullptr;
    alpha = b.getF32FloatAttr(1.0f);
    limit = nullptr;
    upBias = b.getF32FloatAttr(0.0f);
    return true;
  }
  if (auto gemm = v.getDefiningOp<ExpertGemmOp>()) {
    op = gemm;
    lhs = gemm.getLhs();
    rhs = gemm.getRhs();
    offsets = gemm.getOffsets();
    gather = gemm.getGather();
    bias = gemm.getBias();
    scatter = gemm.getScatter();
    scale = gemm.getScale();
    rhsScale = gemm.getRhsScale();
    transposeRhs = gemm.getTransposeRhsAttr();
    weightFormat = gemm.getWeightFormatAttr();
    scaleFmt = gemm.getScaleFmtAttr();
    activation = gemm.getActivationAttr();
    layout = gemm.getLayoutAttr();
    alpha = gemm.getAlphaAttr();
    limit = gemm.getLimitAttr();
    upBias = gemm.getUpBiasAttr();
    return true;
  }
  return false;
}

ExpertGemmOp ExpertGemmParts::build(OpBuilder &builder, Location loc,
                                    Type type) const {
  return ExpertGemmOp::create(builder, loc, type, lhs, rhs, offsets, gather,
                              bias, scatter, scale, rhsScale, transposeRhs,
                              activation, layout, alpha, limit, upBias,
                              weightFormat, scaleFmt);
}

void mlir::moe::applyFusionPatterns(Operation *root,
                                    RewritePatternSet &&patterns) {
  walkAndApplyPatterns(root, std::move(patterns));
}
