//===- TensorMapParams.cpp - tensor maps as by-value kernel parameters ----===//
//
// Part of the moe-mlir project.
//
// Kernel arguments holding a TMA tensor map by value (!llvm.array<16 x
// i64>, used only for its address) become byval grid-constant pointers (see
// the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUTENSORMAPPARAMSPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {
/// CUtensorMap: 128 bytes, 64-byte aligned.
constexpr int64_t kMapWords = 16, kMapAlign = 64;

/// The casts to !llvm.ptr that are all of `arg`'s uses (empty if any use is
/// something else).
static SmallVector<UnrealizedConversionCastOp> addressUses(BlockArgument arg) {
  SmallVector<UnrealizedConversionCastOp> casts;
  for (Operation *user : arg.getUsers()) {
    auto cast = dyn_cast<UnrealizedConversionCastOp>(user);
    if (!cast || cast.getNumOperands() != 1 || cast.getNumResults() != 1 ||
        cast.getResult(0).getType() !=
            LLVM::LLVMPointerType::get(arg.getContext()))
      return {};
    casts.push_back(cast);
  }
  return casts;
}

struct MoeGpuTensorMapParamsPass
    : mlir::moe::impl::MoeGpuTensorMapParamsPassBase<
          MoeGpuTensorMapParamsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Type i64 = IntegerType::get(ctx, 64);
    auto mapType = LLVM::LLVMArrayType::get(i64, kMapWords);
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    getOperation().walk([&](LLVM::LLVMFuncOp func) {
      if (!func->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()) ||
          func.isExternal())
        return;
      Block &entry = func.getBody().front();
      SmallVector<Type> inputs(func.getFunctionType().getParams());
      bool changed = false;
      for (BlockArgument arg : entry.getArguments()) {
        if (arg.getType() != mapType || arg.use_empty())
          continue;
        SmallVector<UnrealizedConversionCastOp> casts = addressUses(arg);
        if (casts.empty())
          continue;
        unsigned i = arg.getArgNumber();
        arg.setType(ptrType);
        for (UnrealizedConversionCastOp cast : casts) {
          cast.getResult(0).replaceAllUsesWith(arg);
          cast.erase();
        }
        inputs[i] = ptrType;
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(mapType));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                        IntegerAttr::get(i64, kMapAlign));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                        UnitAttr::get(ctx));
        changed = true;
      }
      if (changed)
        func.setFunctionType(LLVM::LLVMFunctionType::get(
            func.getFunctionType().getReturnType(), inputs,
            func.getFunctionType().isVarArg()));
    });
  }
};
} // namespace
