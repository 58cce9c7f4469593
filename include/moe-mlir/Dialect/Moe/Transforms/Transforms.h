//===- Transforms.h - moe dialect rewrite patterns --------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// populate*Patterns entry points, so passes, pipelines and embedders can
// reuse the rewrites without the pass wrappers.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_TRANSFORMS_TRANSFORMS_H
#define MOE_MLIR_DIALECT_MOE_TRANSFORMS_TRANSFORMS_H

#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {

/// moe.ffn -> the primitive chain of SPEC section 3.
void populateMoeDecomposePatterns(RewritePatternSet &patterns);

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_DIALECT_MOE_TRANSFORMS_TRANSFORMS_H
