//===- Pipelines.cpp - moe-mlir pass pipelines ----------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Pipelines/Pipelines.h"

#include "moe-mlir/Conversion/Passes.h"
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::moe;

void mlir::moe::buildMoeFusePipeline(OpPassManager &pm) {
  pm.addPass(createMoeFuseDispatchPass());
  pm.addPass(createMoeFuseGatherMatmulPass());
  pm.addPass(createMoeFuseGluPass());
  pm.addPass(createMoeFuseScatterPass());
  pm.addPass(createMoeFuseRouteDispatchPass());
}

void mlir::moe::buildMoeLowerToCpuPipeline(
    OpPassManager &pm, const MoeLowerToCpuOptions &options) {
  // moe -> linalg/scf/tensor/arith/math on tensors.
  pm.addPass(createConvertMoeToLinalgPass());
  // Elementwise arith/math on tensors (allowed in input modules) -> linalg.
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Tensors -> buffers.
  bufferization::OneShotBufferizePassOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  if (options.deallocate)
    bufferization::buildBufferDeallocationPipeline(pm);

  // Loops and scalar code.
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true; // bf16 <-> f32 without compiler-rt helpers
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLibmPass()); // erf, tanh, exp: libm
  pm.addPass(createSCFToControlFlowPass());

  // LLVM dialect.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::moe::registerMoePipelines() {
  PassPipelineRegistration<>(
      "moe-fuse",
      "Run the moe fusion passes in order: moe-fuse-dispatch, "
      "moe-fuse-gather-matmul, moe-fuse-glu, moe-fuse-scatter, "
      "moe-fuse-route-dispatch",
      buildMoeFusePipeline);
  PassPipelineRegistration<MoeLowerToCpuOptions>(
      "moe-lower-to-cpu",
      "Lower a module of moe ops (mixed with func, arith, math, tensor, "
      "linalg, bufferization) to the LLVM dialect for mlir-runner",
      buildMoeLowerToCpuPipeline);
}
