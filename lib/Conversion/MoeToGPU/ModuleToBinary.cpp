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

/// Operations in `op` (a proxy for its compile time).
int64_t sizeOf(Operation *op) {
  int64_t n = 0;
  op->walk([&](Operation *) { ++n; });
  return n;
}

/// `modules` with their sizes, largest first (stable).
SmallVector<std::pair<int64_t, gpu::GPUModuleOp>>
largestFirst(ArrayRef<gpu::GPUModuleOp> modules) {
  SmallVector<std::pair<int64_t, gpu::GPUModuleOp>> bySize;
  for (gpu::GPUModuleOp m : modules)
    bySize.push_back({sizeOf(m), m});
  llvm::stable_sort(bySize, [](auto &a, auto &b) { return a.first > b.first; });
  return bySize;
}

/// `base`, or `base_<i>` for the first i that names no symbol of `into`
/// or `from` (the modules being merged).
StringAttr uniqueName(StringRef base, gpu::GPUModuleOp into,
                      gpu::GPUModuleOp from) {
  std::string name = base.str();
  for (unsigned i = 0; SymbolTable::lookupSymbolIn(into, name) ||
                       SymbolTable::lookupSymbolIn(from, name);
       ++i)
    name = (base + "_" + Twine(i)).str();
  return StringAttr::get(into.getContext(), name);
}

/// Whether `op` is an external function declaration (no body).
bool isDeclaration(Operation *op) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  return fn && fn.isExternal();
}

/// Kernels of `module`: its functions that a gpu.launch_func can name.
SmallVector<Operation *> kernelsOf(gpu::GPUModuleOp module) {
  SmallVector<Operation *> kernels;
  for (Operation &op : *module.getBody())
    if (op.hasAttr(gpu::GPUDialect::getKernelFuncAttrName()) ||
        op.hasAttr("nvvm.kernel"))
      kernels.push_back(&op);
  return kernels;
}

/// Where the launches of a module's kernels point after the merge: old
/// "module::kernel" -> the new reference.
using KernelMap = llvm::StringMap<SymbolRefAttr>;

/// The name a kernel gets in a merged module: `<module>` for a module's
/// only kernel, `<module>_<kernel>` otherwise; the `__pdl` suffix of
/// programmatic launches (moe-gpu-programmatic-launch, read by the
/// runtime) kept.
std::string mergedKernelName(StringRef module, StringRef kernel,
                             bool onlyKernel) {
  std::string name = onlyKernel ? module.str() : (module + "_" + kernel).str();
  if (kernel.ends_with("__pdl") && !StringRef(name).ends_with("__pdl"))
    name += "__pdl";
  return name;
}

/// Renames the kernels of `from` (a module to be merged into `into`, or
/// `into` itself) after their module and records their new references.
void renameKernels(gpu::GPUModuleOp from, gpu::GPUModuleOp into,
                   KernelMap &moved) {
  SmallVector<Operation *> kernels = kernelsOf(from);
  for (Operation *kernel : kernels) {
    StringAttr oldAttr = SymbolTable::getSymbolName(kernel);
    StringRef old = oldAttr.getValue();
    std::string base =
        mergedKernelName(from.getName(), old, kernels.size() == 1);
    StringAttr attr = base == old ? oldAttr : uniqueName(base, into, from);
    moved[(from.getName() + "::" + old).str()] =
        SymbolRefAttr::get(into.getNameAttr(), {FlatSymbolRefAttr::get(attr)});
    if (attr == oldAttr)
      continue;
    if (failed(SymbolTable::replaceAllSymbolUses(kernel, attr, from)))
      kernel->emitWarning("moe-gpu-module-to-binary: uses not renamed");
    SymbolTable::setSymbolName(kernel, attr);
  }
}

/// Moves the contents of `from` into `into` and erases `from`. Symbols
/// that clash are renamed (with their uses inside `from`), except
/// identical external declarations (e.g. a libdevice function), which are
/// shared.
void mergeInto(gpu::GPUModuleOp into, gpu::GPUModuleOp from) {
  SymbolTable intoTable(into);
  for (Operation &op : llvm::make_early_inc_range(*from.getBody())) {
    auto symbol =
        op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
    if (Operation *clash = symbol ? intoTable.lookup(symbol) : nullptr) {
      if (isDeclaration(&op) && isDeclaration(clash) &&
          OperationEquivalence::isEquivalentTo(
              &op, clash, OperationEquivalence::ignoreValueEquivalence,
              /*markEquivalent=*/nullptr,
              OperationEquivalence::IgnoreLocations)) {
        op.erase();
        continue;
      }
      StringAttr attr = uniqueName(symbol.getValue(), into, from);
      if (failed(SymbolTable::replaceAllSymbolUses(&op, attr, from)))
        op.emitWarning("moe-gpu-module-to-binary: uses not renamed");
      SymbolTable::setSymbolName(&op, attr);
    }
    op.moveBefore(into.getBody(), into.getBody()->end());
    if (symbol)
      intoTable.insert(&op, into.getBody()->end());
  }
  from->erase();
}

/// Merges `modules` into at most `groups` gpu.modules per set of module
/// attributes (targets, offloading handler): largest module first, each
/// into the group with the fewest operations so far; a group keeps the
/// name of its largest module. Every kernel is renamed after the module
/// it came from, and the launches follow.
void mergeModules(ModuleOp top, ArrayRef<gpu::GPUModuleOp> modules,
                  unsigned groups) {
  struct Group {
    gpu::GPUModuleOp module;
    int64_t size;
  };
  SmallVector<std::pair<DictionaryAttr, SmallVector<Group>>> sets;
  KernelMap moved;
  for (auto &[size, m] : largestFirst(modules)) {
    NamedAttrList attrList(m->getAttrDictionary());
    attrList.erase(SymbolTable::getSymbolAttrName());
    DictionaryAttr attrs = attrList.getDictionary(m.getContext());
    auto *set = llvm::find_if(sets, [&](auto &s) { return s.first == attrs; });
    if (set == sets.end()) {
      sets.push_back({attrs, {}});
      set = std::prev(sets.end());
    }
    SmallVector<Group> &gs = set->second;
    if (gs.size() < groups) {
      renameKernels(m, m, moved);
      gs.push_back({m, size});
      continue;
    }
    Group *smallest = llvm::min_element(
        gs, [](const Group &a, const Group &b) { return a.size < b.size; });
    renameKernels(m, smallest->module, moved);
    mergeInto(smallest->module, m);
    smallest->size += size;
  }
  top.walk([&](gpu::LaunchFuncOp launch) {
    SymbolRefAttr kernel = launch.getKernel();
    auto it = moved.find((kernel.getRootReference().getValue() +
                          "::" + kernel.getLeafReference().getValue())
                             .str());
    if (it != moved.end())
      launch.setKernelAttr(it->second);
  });
}

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
    // Fewer, larger modules: each module costs a fixed set-up in LLVM (a
    // target machine, the NVPTX passes) and in ptxas (a process). A fixed
    // count (not the thread count), so that the binaries are the same on
    // every machine.
    if (modules > 0 && gpuModules.size() > modules) {
      mergeModules(module, gpuModules, modules);
      gpuModules.assign(module.getBody()->getOps<gpu::GPUModuleOp>().begin(),
                        module.getBody()->getOps<gpu::GPUModuleOp>().end());
    }
    if (threads <= 1 || gpuModules.size() <= 1) {
      if (failed(gpu::transformGpuModulesToBinaries(module, nullptr, options)))
        signalPassFailure();
      return;
    }

    // One container per module, largest (operations in the module) first:
    // the thread pool hands the next container to the first free thread.
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
    for (auto &[size, m] : largestFirst(gpuModules)) {
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
