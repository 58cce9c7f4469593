//===- LaunchReport.cpp - kernel launches per host function --------------===//
//
// Part of the moe-mlir project.
//
// Counts the kernel launches of each host function of the GPU lowering:
// launch sites, and the fewest / most launches of one call over the host's
// scf.if branches (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPULAUNCHREPORTPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

/// Launches of one call of a piece of host code: the fewest and the most
/// over its branches (`unbounded`: a launch inside a loop).
struct Launches {
  int64_t fewest = 0, most = 0;
  bool unbounded = false;

  Launches then(const Launches &o) const {
    return {fewest + o.fewest, most + o.most, unbounded || o.unbounded};
  }
  Launches orElse(const Launches &o) const {
    return {std::min(fewest, o.fewest), std::max(most, o.most),
            unbounded || o.unbounded};
  }
};

bool isLaunch(Operation *op) {
  return isa<gpu::LaunchOp, gpu::LaunchFuncOp>(op);
}

Launches countRegion(Region &region);

Launches countOp(Operation *op) {
  if (isLaunch(op))
    return {1, 1, false};
  if (op->getNumRegions() == 0)
    return {};
  if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
    Launches thenCount = countRegion(ifOp.getThenRegion());
    Launches elseCount = countRegion(ifOp.getElseRegion());
    return thenCount.orElse(elseCount);
  }
  Launches inside;
  for (Region &region : op->getRegions())
    inside = inside.then(countRegion(region));
  if (isa<LoopLikeOpInterface>(op) && inside.most > 0)
    return {0, inside.most, true};
  return inside;
}

Launches countRegion(Region &region) {
  Launches total;
  for (Block &block : region)
    for (Operation &op : block)
      total = total.then(countOp(&op));
  return total;
}

struct MoeGpuLaunchReportPass
    : mlir::moe::impl::MoeGpuLaunchReportPassBase<MoeGpuLaunchReportPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](FunctionOpInterface func) {
      if (isa<gpu::GPUFuncOp>(func.getOperation()) || func.isExternal())
        return;
      int64_t sites = 0;
      func.walk([&](Operation *op) { sites += isLaunch(op); });
      Launches call = countRegion(func.getFunctionBody());
      llvm::raw_ostream &os = llvm::errs();
      os << "moe-gpu-launch-report";
      if (!label.empty())
        os << " [" << label << "]";
      os << " @" << func.getName() << ": " << sites << " launch sites, ";
      if (call.unbounded)
        os << "at least " << call.fewest
           << " launches per call (a launch in a loop)";
      else if (call.fewest == call.most)
        os << call.most << " launches per call";
      else
        os << call.fewest << " to " << call.most << " launches per call";
      os << "\n";
    });
  }
};

} // namespace
