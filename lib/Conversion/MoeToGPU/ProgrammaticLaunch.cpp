//===- ProgrammaticLaunch.cpp - mark kernels for programmatic launch ------===//
//
// Part of the moe-mlir project.
//
// Kernels that wait for their predecessor with griddepcontrol.wait get the
// name suffix the runtime launches with programmatic stream serialization
// (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUPROGRAMMATICLAUNCHPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

/// The suffix the CUDA runtime recognises (lib/Runtime/CUDA/Kernels.cpp).
static constexpr llvm::StringLiteral kSuffix = "__pdl";

namespace {
struct MoeGpuProgrammaticLaunchPass
    : mlir::moe::impl::MoeGpuProgrammaticLaunchPassBase<
          MoeGpuProgrammaticLaunchPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUFuncOp> marked;
    module.walk([&](gpu::GPUFuncOp func) {
      if (!func.isKernel() || func.getName().ends_with(kSuffix))
        return;
      bool waits = false;
      func.walk([&](NVVM::GriddepcontrolOp op) {
        if (op.getKind() == NVVM::GridDepActionKind::wait)
          waits = true;
      });
      if (waits)
        marked.push_back(func);
    });
    for (gpu::GPUFuncOp func : marked) {
      auto gpuModule = func->getParentOfType<gpu::GPUModuleOp>();
      SymbolTable table(gpuModule);
      std::string name = (func.getName() + kSuffix).str();
      if (table.lookup(name)) {
        func.emitError("moe-gpu-programmatic-launch: kernel name '")
            << name << "' is taken";
        return signalPassFailure();
      }
      if (failed(table.rename(func, name))) {
        func.emitError("moe-gpu-programmatic-launch: cannot rename kernel");
        return signalPassFailure();
      }
      // The launches refer to @gpu_module::@kernel from outside the
      // gpu.module: update those nested references too.
      auto newRef =
          SymbolRefAttr::get(gpuModule.getNameAttr(),
                             {FlatSymbolRefAttr::get(&getContext(), name)});
      module.walk([&](gpu::LaunchFuncOp launch) {
        if (launch.getKernelModuleName() == gpuModule.getNameAttr() &&
            launch.getKernelName().getValue() ==
                StringRef(name).drop_back(kSuffix.size()))
          launch.setKernelAttr(newRef);
      });
    }
  }
};
} // namespace
