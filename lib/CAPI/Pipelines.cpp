//===- Pipelines.cpp - moe-mlir C API: pass pipelines ---------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir-c/Pipelines.h"

#include "moe-mlir/Pipelines/Pipelines.h"

#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Support.h"

using namespace mlir;

void mlirMoeBuildFusePipeline(MlirOpPassManager passManager) {
  moe::buildMoeFusePipeline(*unwrap(passManager));
}

void mlirMoeBuildLowerToCpuPipeline(MlirOpPassManager passManager,
                                    bool deallocate) {
  moe::MoeLowerToCpuOptions options;
  options.deallocate = deallocate;
  moe::buildMoeLowerToCpuPipeline(*unwrap(passManager), options);
}

MlirLogicalResult mlirMoeBuildLowerToNvvmPipeline(
    MlirOpPassManager passManager, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData) {
  moe::MoeLowerToNvvmOptions parsed;
  std::string message;
  llvm::raw_string_ostream errors(message);
  if (failed(parsed.parseFromString(unwrap(options), errors))) {
    if (errorCallback)
      errorCallback(wrap(llvm::StringRef(message)), userData);
    return mlirLogicalResultFailure();
  }
  moe::buildMoeLowerToNvvmPipeline(*unwrap(passManager), parsed);
  return mlirLogicalResultSuccess();
}
