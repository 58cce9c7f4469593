//===- ForwardOutParams.cpp - results straight into out-parameters --------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFORWARDOUTPARAMSPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {
struct MoeForwardOutParamsPass
    : mlir::moe::impl::MoeForwardOutParamsPassBase<MoeForwardOutParamsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<memref::CopyOp> copies;
    func.walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    for (memref::CopyOp copy : copies) {
      auto out = dyn_cast<BlockArgument>(copy.getTarget());
      if (!out || out.getOwner() != &func.getBody().front() || !out.hasOneUse())
        continue;
      auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != copy->getBlock() ||
          alloc.getType() != out.getType())
        continue;
      // Nothing may use the allocation after the copy (a dealloc included).
      bool usedAfter = llvm::any_of(alloc->getUsers(), [&](Operation *user) {
        Operation *inBlock = copy->getBlock()->findAncestorOpInBlock(*user);
        return user != copy && inBlock && copy->isBeforeInBlock(inBlock);
      });
      if (usedAfter)
        continue;
      alloc.getResult().replaceAllUsesWith(out);
      copy.erase();
      alloc.erase();
    }
  }
};
} // namespace
