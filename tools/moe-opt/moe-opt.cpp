//===- moe-opt.cpp - moe-mlir optimizer driver ----------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// An MlirOptMain driver with our dialect and passes plus only the upstream
// dialects and passes that moe IR is mixed with and our pipelines use.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/InitAllDialects.h"
#include "moe-mlir/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::moe::registerAllDialects(registry);
  mlir::moe::registerAllPasses();
  // Generic cleanups used in tests and pipelines.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "moe-mlir optimizer driver\n", registry));
}
