//===- MoeDecompose.cpp - moe.ffn into the primitive chain ----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "FfnChain.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#define DEBUG_TYPE "moe-decompose"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEDECOMPOSEPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.ffn(x, logits, w_up, w_down[, bias][, w_up_bias, w_down_bias]
///        [, w_up_scale, w_down_scale])
///   => route, cumsum, get_indices, get_indptr, gather, grouped_matmul, glu,
///      grouped_matmul, scatter, tensor.expand_shape, combine
/// (the expert biases are the grouped matmuls' biases, the weight scales
/// and formats theirs too; FfnChain.h builds the chain)
struct DecomposeFfn : OpRewritePattern<FfnOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FfnOp op,
                                PatternRewriter &rewriter) const override {
    FfnChain chain = buildFfnRouting(rewriter, op);
    buildFfnUp(rewriter, op, chain);
    rewriter.replaceOp(op, buildFfnOutput(rewriter, op, chain));
    return success();
  }
};

/// moe.ffn_train => moe.ffn's chain; its results are the chain's output,
/// the up projection (h, dispatch order) and moe.route's weights and ids.
struct DecomposeFfnTrain : OpRewritePattern<FfnTrainOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FfnTrainOp op,
                                PatternRewriter &rewriter) const override {
    FfnChain chain = buildFfnRouting(rewriter, op);
    buildFfnUp(rewriter, op, chain);
    Value y = buildFfnOutput(rewriter, op, chain);
    rewriter.replaceOp(op, {y, chain.up, chain.weights, chain.ids});
    return success();
  }
};

} // namespace

void mlir::moe::populateMoeDecomposePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeFfn, DecomposeFfnTrain>(patterns.getContext());
  populateMoeDecomposeFfnGradPatterns(patterns);
}

namespace {
struct MoeDecomposePass
    : mlir::moe::impl::MoeDecomposePassBase<MoeDecomposePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeDecomposePatterns(patterns);
    // One walk, no folding or dead-code elimination: only moe.ffn,
    // moe.ffn_train and moe.ffn_grad change.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
