//===- Pipelines.cpp - moe-mlir pass pipelines ----------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Pipelines/Pipelines.h"

#include "moe-mlir/Conversion/MoeToGPU/MoeToGPU.h"
#include "moe-mlir/Conversion/Passes.h"
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::moe;

/// Elementwise arith/math on tensors (allowed in input modules) -> linalg,
/// cleanups, then one-shot bufferization across function boundaries with
/// identity layouts (what C callers and the runners expect).
static void addTensorCleanupAndBufferize(OpPassManager &pm) {
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  bufferization::OneShotBufferizePassOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  // Its constant globals named and ordered by first use (it meets them in
  // an order that varies from run to run).
  pm.addPass(createMoeOrderConstantGlobalsPass());
}

/// The optional ownership-based deallocation, then bufferization.clone
/// (returning a buffer the function does not own) -> memref.alloc +
/// memref.copy.
static void addDeallocation(OpPassManager &pm, bool deallocate) {
  if (deallocate)
    bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
}

/// The same for the GPU pipeline, where the kernels are already outlined:
/// the upstream deallocation pipeline (bufferization::
/// buildBufferDeallocationPipeline) with its per-function passes
/// (cleanups, realloc expansion, simplification) nested on the host
/// functions. They have nothing to do in the gpu.modules (kernels allocate
/// nothing), which hold most of the IR: run at module level they walk
/// (and canonicalize) every kernel four more times. The kernels' PTX is
/// the same either way.
static void addHostDeallocation(OpPassManager &pm, bool deallocate) {
  if (deallocate) {
    memref::ExpandReallocPassOptions expand;
    expand.emitDeallocs = false;
    pm.addNestedPass<func::FuncOp>(memref::createExpandReallocPass(expand));
    pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
    pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
    OpPassManager &host = pm.nest<func::FuncOp>();
    host.addPass(createCanonicalizerPass());
    host.addPass(bufferization::createBufferDeallocationSimplificationPass());
    pm.addPass(bufferization::createLowerDeallocationsPass());
    OpPassManager &cleanup = pm.nest<func::FuncOp>();
    cleanup.addPass(createCSEPass());
    cleanup.addPass(createCanonicalizerPass());
  }
  pm.addPass(createConvertBufferizationToMemRefPass());
}

/// Host code (scf, math, arith, index, memref, cf, func; with `gpuToLLVM`
/// the host side of gpu ops too) to the LLVM dialect. With `gpuToLLVM`
/// the conversions that work per operation run on the
/// host functions and the kernel modules as nested pipelines, both at once
/// on the context's threads (at module level each walked all of them on
/// one thread; the kernels hold most of the IR).
static void addHostToLLVM(OpPassManager &pm, bool gpuToLLVM) {
  auto perOp = [&](auto create) {
    if (!gpuToLLVM)
      return pm.addPass(create());
    pm.addNestedPass<func::FuncOp>(create());
    pm.addNestedPass<gpu::GPUModuleOp>(create());
  };
  perOp([] { return createSCFToControlFlowPass(); });
  perOp([] { return createConvertMathToLLVMPass(); });
  perOp([] { return createArithToLLVMConversionPass(); });
  perOp([] { return createConvertIndexToLLVMPass(); });
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  if (gpuToLLVM)
    pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  // With gpuToLLVM the kernels (in gpu.modules) were cleaned up by their
  // own pipeline already: only the host functions here.
  if (gpuToLLVM)
    pm.addNestedPass<LLVM::LLVMFuncOp>(createCanonicalizerPass());
  else
    pm.addPass(createCanonicalizerPass());
}

/// The shape rules of the public functions, recorded at the tensor level
/// (moe ops still there).
static void addShapeRules(OpPassManager &pm, StringRef mode) {
  if (mode != "none")
    pm.addPass(createMoeShapeChecksPass());
}

/// The recorded rules as code at function entry (memrefs by now).
static void addShapeChecks(OpPassManager &pm, StringRef mode,
                           StringRef function) {
  if (mode == "none")
    return;
  MoeEmitShapeChecksPassOptions options;
  options.mode = mode.str();
  options.reportFunction = function.str();
  pm.addPass(createMoeEmitShapeChecksPass(options));
}

void mlir::moe::buildMoeFusePipeline(OpPassManager &pm) {
  pm.addPass(createMoeFuseDispatchPass());
  pm.addPass(createMoeFuseGluGradPass());
  pm.addPass(createMoeFuseGatherMatmulPass());
  pm.addPass(createMoeFuseGluPass());
  pm.addPass(createMoeFuseScatterPass());
  pm.addPass(createMoeFuseRouteDispatchPass());
}

void mlir::moe::buildMoeLowerToCpuPipeline(
    OpPassManager &pm, const MoeLowerToCpuOptions &options) {
  // moe -> linalg/scf/tensor/arith/math on tensors, then buffers.
  addShapeRules(pm, options.shapeChecks);
  pm.addPass(createConvertMoeToLinalgPass());
  addTensorCleanupAndBufferize(pm);
  addDeallocation(pm, options.deallocate);
  addShapeChecks(pm, options.shapeChecks, options.shapeCheckFunction);

  // Loops and scalar code.
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true; // bf16 <-> f32 without compiler-rt helpers
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLibmPass()); // erf, tanh, exp: libm
  addHostToLLVM(pm, /*gpuToLLVM=*/false);
}

/// Splits a pipeline's option text into its top-level `key[=value]` items:
/// whitespace outside braces and quotes separates them (the syntax of
/// mlir::detail::PassOptions::parseFromString).
static SmallVector<StringRef> splitOptionItems(StringRef text) {
  SmallVector<StringRef> items;
  size_t start = StringRef::npos;
  int depth = 0;
  char quote = 0;
  for (size_t i = 0, e = text.size(); i <= e; ++i) {
    char c = i < e ? text[i] : ' ';
    if (quote) {
      if (c == quote)
        quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}') {
      --depth;
    } else if (depth == 0 && llvm::isSpace(c)) {
      if (start != StringRef::npos)
        items.push_back(text.slice(start, i));
      start = StringRef::npos;
      continue;
    }
    if (start == StringRef::npos)
      start = i;
  }
  // An unterminated quote: the rest is one item (the parser reports it).
  if (start != StringRef::npos && quote)
    items.push_back(text.drop_front(start));
  return items;
}

/// The names of the pipeline's own options (MoeLowerToNvvmOptions),
/// read off its printed form, so that they are written only in its
/// declaration.
static const llvm::StringSet<> &nvvmPipelineOptionNames() {
  static const llvm::StringSet<> names = [] {
    std::string text;
    llvm::raw_string_ostream os(text);
    MoeLowerToNvvmOptions().print(os);
    StringRef body = StringRef(text).trim();
    if (body.consume_front("{"))
      body.consume_back("}");
    llvm::StringSet<> set;
    for (StringRef item : splitOptionItems(body))
      set.insert(item.split('=').first);
    return set;
  }();
  return names;
}

/// PTX ISA version of `features` ("+ptx86" -> 86; 0 when absent).
static int ptxVersionOf(StringRef features) {
  int ptx = 0;
  size_t at = features.find("+ptx");
  if (at != StringRef::npos)
    features.drop_front(at + 4).take_while(llvm::isDigit).getAsInteger(10, ptx);
  return ptx;
}

LogicalResult mlir::moe::parseMoeLowerToNvvmOptions(
    StringRef text, MoeLowerToNvvmOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  const llvm::StringSet<> &own = nvvmPipelineOptionNames();
  std::string ownText, kernelText;
  for (StringRef item : splitOptionItems(text)) {
    std::string &to =
        own.contains(item.split('=').first) ? ownText : kernelText;
    if (!to.empty())
      to += ' ';
    to += item.str();
  }
  std::string message;
  llvm::raw_string_ostream errors(message);
  if (failed(options.parseFromString(ownText, errors)))
    return errorHandler(message);
  if (failed(parseConvertMoeToGPUOptions(kernelText, options.kernels,
                                         errorHandler)))
    return failure();
  return success();
}

std::optional<std::string>
mlir::moe::validateMoeLowerToNvvmOptions(const MoeLowerToNvvmOptions &options) {
  StringRef format = options.format;
  if (format != "cubin" && format != "ptx" && format != "fatbin" &&
      format != "llvm")
    return "format must be one of cubin, ptx, fatbin, llvm (got '" +
           options.format + "')";
  if (!StringRef(options.chip).starts_with("sm_"))
    return "chip must name an SM architecture such as sm_90a (got '" +
           options.chip + "')";
  if (options.optLevel < 0 || options.optLevel > 3)
    return std::string("opt-level must be in [0, 3]");
  StringRef checks = options.shapeChecks;
  if (checks != "report" && checks != "abort" && checks != "none")
    return "shape-checks must be one of report, abort, none (got '" +
           options.shapeChecks + "')";
  return validateGemmOptions(options.kernels);
}

void mlir::moe::buildMoeLowerToNvvmPipeline(
    OpPassManager &pm, const MoeLowerToNvvmOptions &options) {
  // moe -> gpu.launch kernels on buffers, bridged to tensors.
  addShapeRules(pm, options.shapeChecks);
  ConvertMoeToGPUPassOptions kernels = options.kernels;
  kernels.chip = options.chip;
  // TMA into CTA shared memory needs PTX ISA 8.6: with older features the
  // weights come by cp.async.
  kernels.wgmmaTma = kernels.wgmmaTma && ptxVersionOf(options.features) >= 86;
  pm.addPass(createConvertMoeToGPUPass(kernels));
  if (options.cInterface)
    pm.addPass(createMoeEmitCInterfacePass());
  // Results optionally as caller-provided buffers.
  addTensorCleanupAndBufferize(pm);
  if (options.outParams) {
    bufferization::BufferResultsToOutParamsPassOptions outParams;
    outParams.hoistStaticAllocs = true;
    outParams.modifyPublicFunctions = true;
    pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
    pm.addNestedPass<func::FuncOp>(createMoeForwardOutParamsPass());
  }

  // Any remaining linalg (from the input module) -> parallel loops ->
  // kernels; kernels into gpu.modules (deallocation then sees only host
  // code and gpu.launch_func), then every host buffer into device memory.
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createGpuMapParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  // Constants (hoisted to the function by the canonicalizer) back into the
  // kernels: as kernel arguments they cost a constant-bank load each and
  // hide them from ptxas (run-time divisions by tile sizes, no folding).
  pm.addNestedPass<func::FuncOp>(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // Kernels that wait for their predecessor on the device (griddepcontrol)
  // get the name the runtime launches with programmatic serialization.
  pm.addPass(createMoeGpuProgrammaticLaunchPass());
  // Kernels planned for several blocks per SM with setmaxnreg: the entry
  // register count ptxas needs (nvvm.minctasm).
  pm.addPass(createMoeGpuRegisterBudgetPass());
  addHostDeallocation(pm, options.deallocate);
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  // Checked before any launch; a failed check returns (no kernel runs, no
  // output is written) after moeRuntimeReportShapeError.
  addShapeChecks(pm, options.shapeChecks, "moeRuntimeReportShapeError");
  pm.addPass(createMoeGpuDeviceMemoryPass());
  // Shared buffers with an explicit alignment (LLVM assumes 16 bytes for
  // them when vectorising, NVPTX would declare the element's).
  pm.addNestedPass<gpu::GPUModuleOp>(createMoeGpuAlignWorkgroupMemoryPass());

  // Device code lowered to NVVM for the chip. (The strided-metadata and
  // affine expansions run per kernel module and per host function: both
  // kinds at once, on the context's threads.)
  pm.addNestedPass<gpu::GPUModuleOp>(memref::createExpandStridedMetadataPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createLowerAffinePass());
  pm.addNestedPass<func::FuncOp>(memref::createExpandStridedMetadataPass());
  pm.addNestedPass<func::FuncOp>(createLowerAffinePass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64; // 64-bit addressing in every kernel
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(nvvm));
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());

  // Host code: one stream per call, LLVM dialect, mgpu* runtime calls.
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  addHostToLLVM(pm, /*gpuToLLVM=*/true);

  // Device code -> binary (ptxas from the CUDA toolkit), the modules in
  // parallel.
  MoeGpuModuleToBinaryPassOptions binary;
  std::string toolkit = options.toolkit;
  if (toolkit.empty()) {
    const char *home = std::getenv("CUDA_HOME");
    toolkit = home && *home ? home : "/usr/local/cuda";
  }
  binary.toolkitPath = toolkit;
  std::string format = options.format;
  binary.compilationTarget = format == "cubin"  ? "bin"
                             : format == "ptx"  ? "isa"
                             : format == "llvm" ? "llvm"
                                                : format;
  pm.addPass(createMoeGpuModuleToBinaryPass(binary));
}

void mlir::moe::registerMoePipelines() {
  PassPipelineRegistration<>(
      "moe-fuse",
      "Run the moe fusion passes in order: moe-fuse-dispatch, "
      "moe-fuse-glu-grad, moe-fuse-gather-matmul, moe-fuse-glu, "
      "moe-fuse-scatter, "
      "moe-fuse-route-dispatch",
      buildMoeFusePipeline);
  PassPipelineRegistration<MoeLowerToCpuOptions>(
      "moe-lower-to-cpu",
      "Lower a module of moe ops (mixed with func, arith, math, tensor, "
      "linalg, bufferization) to the LLVM dialect for mlir-runner",
      buildMoeLowerToCpuPipeline);
  // Registered by hand (not PassPipelineRegistration) so that bad option
  // values are reported when the pipeline is parsed.
  registerPassPipeline(
      "moe-lower-to-nvvm",
      "Lower a module of moe ops (mixed with func, arith, math, tensor, "
      "linalg, bufferization) to GPU kernels compiled for an NVIDIA chip "
      "(default sm_90a cubin) and host code in the LLVM dialect",
      [](OpPassManager &pm, StringRef optionsStr,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        MoeLowerToNvvmOptions options;
        if (failed(
                parseMoeLowerToNvvmOptions(optionsStr, options, errorHandler)))
          return failure();
        if (std::optional<std::string> error =
                validateMoeLowerToNvvmOptions(options))
          return errorHandler("moe-lower-to-nvvm: " + *error);
        buildMoeLowerToNvvmPipeline(pm, options);
        return success();
      },
      // (--help lists the pipeline's own options; the kernels' are
      // convert-moe-to-gpu's, listed under that pass.)
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(MoeLowerToNvvmOptions());
      });
}
