//===- Passes.h - moe conversion passes -------------------------*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_CONVERSION_PASSES_H
#define MOE_MLIR_CONVERSION_PASSES_H

#include "moe-mlir/Conversion/MoeToGPU/MoeToGPU.h"
#include "moe-mlir/Conversion/MoeToLinalg/MoeToLinalg.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace moe {

#define GEN_PASS_DECL
#include "moe-mlir/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "moe-mlir/Conversion/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_CONVERSION_PASSES_H
