//===- MoeDialect.cpp - moe dialect registration --------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/IR/MoeDialect.h"
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;

#include "moe-mlir/Dialect/Moe/IR/MoeOpsDialect.cpp.inc"

#include "moe-mlir/Dialect/Moe/IR/MoeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "moe-mlir/Dialect/Moe/IR/MoeAttrDefs.cpp.inc"

void MoeDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "moe-mlir/Dialect/Moe/IR/MoeAttrDefs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "moe-mlir/Dialect/Moe/IR/MoeOps.cpp.inc"
      >();
}
