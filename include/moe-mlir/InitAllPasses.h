//===- InitAllPasses.h - register moe-mlir passes ---------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_INITALLPASSES_H
#define MOE_MLIR_INITALLPASSES_H

#include "moe-mlir/Conversion/Passes.h"
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"
#include "moe-mlir/Pipelines/Pipelines.h"

namespace mlir {
namespace moe {

inline void registerAllPasses() {
  registerMoePasses();
  registerMoeConversionPasses();
  registerMoePipelines();
}

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_INITALLPASSES_H
