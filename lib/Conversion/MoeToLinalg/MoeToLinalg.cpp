//===- MoeToLinalg.cpp - moe to linalg/scf/tensor lowering ----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/MoeToLinalg/MoeToLinalg.h"

#include "Patterns.h"
#include "moe-mlir/Conversion/Passes.h"
#include "moe-mlir/Dialect/Moe/IR/MoeDialect.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#define DEBUG_TYPE "convert-moe-to-linalg"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_CONVERTMOETOLINALGPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

void mlir::moe::populateMoeToLinalgConversionPatterns(
    RewritePatternSet &patterns) {
  populateMoeDecomposePatterns(patterns);     // moe.ffn
  populateMoeFusedFormPatterns(patterns);     // grouped_matmul, route_dispatch
  populateRoutingLoweringPatterns(patterns);  // topk, route
  populateDispatchLoweringPatterns(patterns); // cumsum, get_indices,
                                              // get_indptr, dispatch
  populateMovementLoweringPatterns(patterns); // gather, scatter, combine,
                                              // multihot converters
  populateExpertComputeLoweringPatterns(patterns); // expert_gemm, glu
}

namespace {
struct ConvertMoeToLinalgPass
    : mlir::moe::impl::ConvertMoeToLinalgPassBase<ConvertMoeToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<MoeDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    populateMoeToLinalgConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
