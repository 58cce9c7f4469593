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
  auto report = [&](const llvm::Twine &message) {
    if (errorCallback) {
      std::string text = message.str();
      errorCallback(wrap(llvm::StringRef(text)), userData);
    }
    return failure();
  };
  if (failed(moe::parseMoeLowerToNvvmOptions(unwrap(options), parsed, report)))
    return mlirLogicalResultFailure();
  if (std::optional<std::string> error =
          moe::validateMoeLowerToNvvmOptions(parsed)) {
    (void)report("moe-lower-to-nvvm: " + *error);
    return mlirLogicalResultFailure();
  }
  moe::buildMoeLowerToNvvmPipeline(*unwrap(passManager), parsed);
  return mlirLogicalResultSuccess();
}
