//===- Registration.cpp - moe-mlir C API: registration --------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir-c/Registration.h"

#include "moe-mlir/InitAllDialects.h"
#include "moe-mlir/InitAllPasses.h"

#include "mlir/CAPI/IR.h"
#include "mlir/Transforms/Passes.h"

void mlirMoeRegisterAllDialects(MlirDialectRegistry registry) {
  mlir::moe::registerAllDialects(*unwrap(registry));
}

void mlirMoeRegisterAllPasses(void) {
  // Registering a pipeline name twice is a fatal error in assert builds of
  // MLIR, so embedders that call this from several places must not trip it.
  static const bool registered = [] {
    mlir::moe::registerAllPasses();
    // The generic cleanups moe-opt offers next to our passes.
    mlir::registerCanonicalizerPass();
    mlir::registerCSEPass();
    return true;
  }();
  (void)registered;
}
