//===- RegisterBudget.cpp - blocks per SM of setmaxnreg kernels
//------------===//
//
// Part of the moe-mlir project.
//
// Kernels that move registers between warpgroups with setmaxnreg get the
// blocks per SM their budget was planned for (nvvm.minctasm), so that
// ptxas's register count at entry is that budget's (see the pass
// description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUREGISTERBUDGETPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

/// Registers per SM.
static constexpr int64_t kRegistersPerSM = 65536;

namespace {
struct MoeGpuRegisterBudgetPass
    : mlir::moe::impl::MoeGpuRegisterBudgetPassBase<MoeGpuRegisterBudgetPass> {
  void runOnOperation() override {
    getOperation().walk([&](gpu::GPUFuncOp func) {
      if (!func.isKernel())
        return;
      std::optional<ArrayRef<int32_t>> block = func.getKnownBlockSize();
      if (!block)
        return;
      int64_t threads = 1;
      for (int32_t d : *block)
        threads *= d;
      int64_t decrease = 0, increase = 0;
      func.walk([&](NVVM::SetMaxRegisterOp op) {
        int64_t count = op.getRegCount();
        if (op.getAction() == NVVM::SetMaxRegisterAction::decrease)
          decrease = std::max(decrease, count);
        else
          increase = std::max(increase, count);
      });
      if (!decrease || !increase || threads % 128 != 0 || threads < 256)
        return;
      // One warpgroup gives up registers, the others take them: at entry
      // E >= (P + n C) / (1 + n) per thread (n taking warpgroups, rounded
      // up to ptxas's granule of 8).
      int64_t groups = threads / 128, takers = groups - 1;
      int64_t entry = (decrease + takers * increase + groups - 1) / groups;
      entry = (entry + 7) / 8 * 8;
      int64_t blocks = kRegistersPerSM / (threads * entry);
      if (blocks < 2)
        return;
      func->setAttr(
          NVVM::NVVMDialect::getMinctasmAttrName(),
          IntegerAttr::get(IntegerType::get(&getContext(), 32), blocks));
    });
  }
};
} // namespace
