//===- ModuleToBinary.cpp - gpu.module -> gpu.binary, in parallel ---------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/IR/Threading.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUMODULETOBINARYPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {
struct MoeGpuModuleToBinaryPass
    : mlir::moe::impl::MoeGpuModuleToBinaryPassBase<MoeGpuModuleToBinaryPass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<gpu::CompilationTarget> target =
        llvm::StringSwitch<std::optional<gpu::CompilationTarget>>(
            compilationTarget)
            .Case("offloading", gpu::CompilationTarget::Offload)
            .Case("llvm", gpu::CompilationTarget::Offload)
            .Case("assembly", gpu::CompilationTarget::Assembly)
            .Case("isa", gpu::CompilationTarget::Assembly)
            .Case("binary", gpu::CompilationTarget::Binary)
            .Case("bin", gpu::CompilationTarget::Binary)
            .Case("fatbinary", gpu::CompilationTarget::Fatbin)
            .Case("fatbin", gpu::CompilationTarget::Fatbin)
            .Default(std::nullopt);
    if (!target) {
      getOperation()->emitError("moe-gpu-module-to-binary: invalid format '")
          << compilationTarget << "'";
      return signalPassFailure();
    }
    gpu::TargetOptions options(toolkitPath, {}, {}, {}, *target);
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    SmallVector<gpu::GPUModuleOp> gpuModules(
        module.getBody()->getOps<gpu::GPUModuleOp>());
    unsigned threads =
        ctx->isMultithreadingEnabled() ? ctx->getNumThreads() : 1;
    if (threads <= 1 || gpuModules.size() <= 1) {
      if (failed(gpu::transformGpuModulesToBinaries(module, nullptr, options)))
        signalPassFailure();
      return;
    }

    // One container per module, largest (operations in the module) first:
    // the thread pool hands the next container to the first free thread,
    // so the longest compilations start first and the rest fill in around
    // them (a static split by size left one thread idle for up to a few
    // hundred ms, since ptxas time is not proportional to size).
    auto sizeOf = [](gpu::GPUModuleOp m) {
      int64_t n = 0;
      m->walk([&](Operation *) { ++n; });
      return n;
    };
    SmallVector<std::pair<int64_t, gpu::GPUModuleOp>> bySize;
    for (gpu::GPUModuleOp m : gpuModules)
      bySize.push_back({sizeOf(m), m});
    llvm::stable_sort(bySize,
                      [](auto &a, auto &b) { return a.first > b.first; });
    OpBuilder builder(ctx);
    SmallVector<ModuleOp> containers;
    // Where the binaries go: before the first op after the first module
    // that is not a module itself (that one stays in place).
    SmallVector<std::string> order;
    for (gpu::GPUModuleOp m : gpuModules)
      order.push_back(m.getName().str());
    Block::iterator next = std::next(Block::iterator(gpuModules[0]));
    while (next != module.getBody()->end() && isa<gpu::GPUModuleOp>(*next))
      ++next;
    OpBuilder::InsertPoint anchor(module.getBody(), next);
    for (auto &[size, m] : bySize) {
      containers.push_back(ModuleOp::create(builder, module.getLoc()));
      m->moveBefore(containers.back().getBody(),
                    containers.back().getBody()->end());
    }
    LogicalResult result =
        failableParallelForEach(ctx, containers, [&](ModuleOp container) {
          return gpu::transformGpuModulesToBinaries(container, nullptr,
                                                    options);
        });
    // The binaries (or, after a failure, the modules) go back either way,
    // in the modules' order, where the first module was.
    llvm::StringMap<Operation *> byName;
    for (ModuleOp container : containers)
      for (Operation &op : *container.getBody())
        if (auto name =
                op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
          byName[name.getValue()] = &op;
    for (StringRef name : order)
      if (Operation *op = byName.lookup(name))
        op->moveBefore(anchor.getBlock(), anchor.getPoint());
    for (ModuleOp container : containers)
      container->erase();
    if (failed(result))
      signalPassFailure();
  }
};
} // namespace
