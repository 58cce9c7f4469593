//===- ClusterDims.cpp - cluster shapes onto outlined kernels -------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// A kernel built for thread-block clusters marks an op of its gpu.launch
// body with `moe.cluster_dim`; after outlining, the marker becomes the
// gpu.func's `nvvm.cluster_dim` (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUCLUSTERDIMSPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

static constexpr StringLiteral kMarker = "moe.cluster_dim";
static constexpr StringLiteral kNvvmClusterDim = "nvvm.cluster_dim";

namespace {
struct MoeGpuClusterDimsPass
    : mlir::moe::impl::MoeGpuClusterDimsPassBase<MoeGpuClusterDimsPass> {
  void runOnOperation() override {
    bool failed = false;
    getOperation()->walk([&](Operation *op) {
      auto shape = op->getAttrOfType<DenseI32ArrayAttr>(kMarker);
      if (!op->hasAttr(kMarker))
        return;
      if (!shape || shape.size() != 3 ||
          llvm::any_of(shape.asArrayRef(), [](int32_t d) { return d < 1; })) {
        op->emitError("'") << kMarker
                           << "' must be array<i32: x, y, z> with positive "
                              "sizes";
        failed = true;
        return;
      }
      auto func = op->getParentOfType<gpu::GPUFuncOp>();
      if (!func || !func.isKernel()) {
        op->emitError("'") << kMarker
                           << "' outside a gpu.func kernel (run this pass "
                              "after gpu-kernel-outlining)";
        failed = true;
        return;
      }
      auto existing = func->getAttrOfType<DenseI32ArrayAttr>(kNvvmClusterDim);
      if (existing && existing != shape) {
        op->emitError("cluster shape ")
            << shape << " conflicts with the kernel's " << existing;
        failed = true;
        return;
      }
      func->setAttr(kNvvmClusterDim, shape);
      op->removeAttr(kMarker);
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
