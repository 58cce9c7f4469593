//===- EmitCInterface.cpp - C-callable wrappers for public functions ------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEEMITCINTERFACEPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {
struct MoeEmitCInterfacePass
    : mlir::moe::impl::MoeEmitCInterfacePassBase<MoeEmitCInterfacePass> {
  void runOnOperation() override {
    StringRef name = LLVM::LLVMDialect::getEmitCWrapperAttrName();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        func->setAttr(name, UnitAttr::get(&getContext()));
  }
};
} // namespace
