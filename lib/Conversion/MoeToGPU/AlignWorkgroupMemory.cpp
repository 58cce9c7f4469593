//===- AlignWorkgroupMemory.cpp - explicit alignment of shared buffers ----===//
//
// Part of the moe-mlir project.
//
// Every workgroup attribution of a kernel gets an explicit llvm.align (see
// the pass description in Passes.td for the fault it prevents).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/Support/MathExtras.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUALIGNWORKGROUPMEMORYPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {
struct MoeGpuAlignWorkgroupMemoryPass
    : mlir::moe::impl::MoeGpuAlignWorkgroupMemoryPassBase<
          MoeGpuAlignWorkgroupMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    int64_t align = alignment;
    if (align <= 0 || !llvm::isPowerOf2_64(align)) {
      getOperation().emitError()
          << "moe-gpu-align-workgroup-memory: alignment must be a power of "
             "two (got "
          << static_cast<int64_t>(alignment) << ")";
      return signalPassFailure();
    }
    Builder b(&getContext());
    StringRef name = LLVM::LLVMDialect::getAlignAttrName();
    getOperation().walk([&](gpu::GPUFuncOp func) {
      for (unsigned i = 0, e = func.getNumWorkgroupAttributions(); i < e; ++i) {
        auto have = dyn_cast_or_null<IntegerAttr>(
            func.getWorkgroupAttributionAttr(i, name));
        if (have && have.getInt() >= alignment)
          continue;
        func.setWorkgroupAttributionAttr(i, name,
                                         b.getI64IntegerAttr(alignment));
      }
    });
  }
};
} // namespace
