//===- DeviceMemory.cpp - host buffers of a GPU module to device memory ---===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUDEVICEMEMORYPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

/// True for ops inside a kernel (their buffers are already device-side or
/// private/workgroup memory).
static bool inKernel(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUFuncOp>() ||
         op->getParentOfType<gpu::GPUModuleOp>();
}

namespace {
struct MoeGpuDeviceMemoryPass
    : mlir::moe::impl::MoeGpuDeviceMemoryPassBase<MoeGpuDeviceMemoryPass> {
  void runOnOperation() override {
    SmallVector<Operation *> work;
    getOperation()->walk([&](Operation *op) {
      if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
              memref::GetGlobalOp>(op) &&
          !inKernel(op))
        work.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    bool failed = false;
    for (Operation *op : work) {
      rewriter.setInsertionPoint(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        if (alloc.getType().getMemorySpace()) {
          alloc.emitError("moe-gpu-device-memory: allocation in memory space ")
              << alloc.getType().getMemorySpace() << " outside a kernel";
          failed = true;
          continue;
        }
        auto gpuAlloc = gpu::AllocOp::create(
            rewriter, alloc.getLoc(), alloc.getType(), /*asyncToken=*/Type(),
            /*asyncDependencies=*/ValueRange{}, alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/false);
        rewriter.replaceOp(alloc, gpuAlloc.getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(rewriter, dealloc.getLoc(),
                               /*asyncToken=*/Type(), ValueRange{},
                               dealloc.getMemref());
        rewriter.eraseOp(dealloc);
      } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        auto srcType = cast<MemRefType>(copy.getSource().getType());
        auto dstType = cast<MemRefType>(copy.getTarget().getType());
        if (!srcType.getLayout().isIdentity() ||
            !dstType.getLayout().isIdentity()) {
          copy.emitError("moe-gpu-device-memory: copy between non-identity "
                         "layouts is not supported on the device path");
          failed = true;
          continue;
        }
        gpu::MemcpyOp::create(rewriter, copy.getLoc(), /*asyncToken=*/Type(),
                              ValueRange{}, copy.getTarget(), copy.getSource());
        rewriter.eraseOp(copy);
      } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        global.emitError("moe-gpu-device-memory: host constant '")
            << global.getName()
            << "' used outside a kernel is not supported on the device path";
        failed = true;
      }
    }
    if (failed)
      signalPassFailure();
  }
};
} // namespace
