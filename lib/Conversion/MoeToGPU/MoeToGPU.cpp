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

void mlir::moe::populateMoeToGPUConversionPatterns(RewritePatternSet &patterns,
                                                   const MoeGemmOptions &gemm) {
  populateMoeDecomposePatterns(patterns); // moe.ffn
  populateMoeFusedFormPatterns(patterns); // grouped_matmul, route_dispatch
  populateRoutingToGPUPatterns(patterns, gemm.chip, gemm.warpSelect == "i32",
                               gemm.routeDispatchSmall,
                               gemm.programmaticLaunch);
  populateDispatchToGPUPatterns(patterns, gemm.chip);
  populateMovementToGPUPatterns(patterns);
  populateExpertComputeToGPUPatterns(patterns, gemm);
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

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    MoeGemmOptions gemmOptions;
    gemmOptions.engine = gemm;
    gemmOptions.chip = chip;
    gemmOptions.simt = MoeGemmTiles{tileM, tileN, tileK};
    gemmOptions.wgmmaTileM = wgmmaTileM;
    gemmOptions.wgmmaTileN = wgmmaTileN;
    gemmOptions.wgmmaStages = wgmmaStages;
    gemmOptions.wgmmaTma = wgmmaTma;
    gemmOptions.wgmmaLhsTma = wgmmaLhsTma;
    gemmOptions.wgmmaEpilogue = wgmmaEpilogue;
    gemmOptions.wgmmaCluster = wgmmaCluster;
    gemmOptions.wgmmaSwapRows = wgmmaSwapRows;
    gemmOptions.wgmmaSwapTileM = wgmmaSwapTileM;
    gemmOptions.wgmmaSwapTileN = wgmmaSwapTileN;
    gemmOptions.wgmmaWideSwapRows = wgmmaWideSwapRows;
    gemmOptions.wgmmaWideSwapTileM = wgmmaWideSwapTileM;
    gemmOptions.wgmmaConsumerSkew = wgmmaConsumerSkew;
    gemmOptions.wgmmaIdleSkip = wgmmaIdleSkip;
    gemmOptions.wgmmaTailUnits = wgmmaTailUnits;
    gemmOptions.wgmmaProducerRegisters = wgmmaProducerRegisters;
    gemmOptions.wgmmaGroupedWalk = wgmmaGroupedWalk;
    gemmOptions.wgmmaSwapMnMajor = wgmmaSwapMnMajor;
    gemmOptions.wgmmaSwapL2Promotion = wgmmaSwapL2Promotion;
    gemmOptions.wgmmaSwapStageK = wgmmaSwapStageK;
    gemmOptions.elideFills = elideFills;
    gemmOptions.warpSelect = warpSelect;
    gemmOptions.routeDispatchSmall = routeDispatchSmall;
    gemmOptions.programmaticLaunch = programmaticLaunch;
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
