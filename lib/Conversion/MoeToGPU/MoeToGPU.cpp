//===- MoeToGPU.cpp - moe to gpu.launch kernels ---------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/MoeToGPU/MoeToGPU.h"

#include "Patterns.h"
#include "moe-mlir/Conversion/Passes.h"
#include "moe-mlir/Dialect/Moe/IR/MoeDialect.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_CONVERTMOETOGPUPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

void mlir::moe::populateMoeToGPUConversionPatterns(
    RewritePatternSet &patterns, const ConvertMoeToGPUPassOptions &options) {
  populateMoeDecomposePatterns(patterns); // moe.ffn, ffn_train, ffn_grad
  populateMoeFusedFormPatterns(patterns); // grouped_matmul, route_dispatch
  populateRoutingToGPUPatterns(patterns, options.chip,
                               options.routeDispatchSmall,
                               options.programmaticLaunch);
  populateDispatchToGPUPatterns(patterns, options.chip);
  populateMovementToGPUPatterns(patterns);
  populateExpertComputeToGPUPatterns(patterns, options);
  populateBackwardToGPUPatterns(patterns, options);
}

namespace {
struct LaunchFuncMemoryEffects
    : MemoryEffectOpInterface::ExternalModel<LaunchFuncMemoryEffects,
                                             gpu::LaunchFuncOp> {
  void
  getEffects(Operation *op,
             SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
                 &effects) const {
    bool anyBuffer = false;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<BaseMemRefType>(operand.get().getType()))
        continue;
      anyBuffer = true;
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    }
    // After the LLVM lowering the operands are raw pointers: the kernel may
    // still write memory, so it must never look dead.
    if (!anyBuffer) {
      effects.emplace_back(MemoryEffects::Read::get(),
                           SideEffects::DefaultResource::get());
      effects.emplace_back(MemoryEffects::Write::get(),
                           SideEffects::DefaultResource::get());
    }
  }
};
} // namespace

void mlir::moe::registerGpuLaunchFuncMemoryEffects(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, gpu::GPUDialect *) {
    gpu::LaunchFuncOp::attachInterface<LaunchFuncMemoryEffects>(*ctx);
  });
}

namespace {
struct ConvertMoeToGPUPass
    : mlir::moe::impl::ConvertMoeToGPUPassBase<ConvertMoeToGPUPass> {
  using Base::Base;

  /// The option values as the generated struct (the options' one list of
  /// fields, Conversion/Passes.td).
  ConvertMoeToGPUPassOptions values() const {
    ConvertMoeToGPUPassOptions o;
    o.tileM = tileM;
    o.tileN = tileN;
    o.tileK = tileK;
    o.gemm = gemm;
    o.chip = chip;
    o.wgmmaTileM = wgmmaTileM;
    o.wgmmaTileN = wgmmaTileN;
    o.wgmmaStages = wgmmaStages;
    o.wgmmaTma = wgmmaTma;
    o.wgmmaCluster = wgmmaCluster;
    o.wgmmaSwapRows = wgmmaSwapRows;
    o.wgmmaSwapTileM = wgmmaSwapTileM;
    o.wgmmaSwapMnMajor = wgmmaSwapMnMajor;
    o.wgmmaWideSwapRows = wgmmaWideSwapRows;
    o.wgmmaWideSwapTileM = wgmmaWideSwapTileM;
    o.wgmmaProducerRegisters = wgmmaProducerRegisters;
    o.wgmmaSwapTileN = wgmmaSwapTileN;
    o.elideFills = elideFills;
    o.programmaticLaunch = programmaticLaunch;
    o.routeDispatchSmall = routeDispatchSmall;
    return o;
  }

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConvertMoeToGPUPassOptions gemmOptions = values();
    if (auto error = validateGemmOptions(gemmOptions)) {
      getOperation()->emitError("convert-moe-to-gpu: ") << *error;
      return signalPassFailure();
    }
    ConversionTarget target(*ctx);
    target.addIllegalDialect<MoeDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    populateMoeToGPUConversionPatterns(patterns, gemmOptions);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace

LogicalResult mlir::moe::parseConvertMoeToGPUOptions(
    StringRef text, ConvertMoeToGPUPassOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  ConvertMoeToGPUPass pass(options);
  if (failed(pass.initializeOptions(text, errorHandler)))
    return failure();
  options = pass.values();
  return success();
}
