//===- Execution.cpp - CPU JIT, LLVM IR and object files ------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// compile_cpu: a copy of the module goes through moe-emit-c-interface and
// moe-lower-to-cpu{deallocate=true} and is JIT-compiled by
// mlir::ExecutionEngine. Calls go through the `_mlir_ciface_<name>` wrappers
// (ranked memrefs passed as pointers to descriptors).
//
// Calling convention, chosen so that dynamic result shapes (T unknown until
// run time) need no caller-side shape logic: results are returned memrefs.
// The ownership-based deallocation pipeline guarantees that a public
// function's returned buffers are fresh allocations owned by the caller
// (it clones anything it does not own, such as arguments or constants).
// Each returned buffer becomes a numpy array without a copy; the array owns
// the allocation (a capsule that calls free() on `allocated`).
//
//===----------------------------------------------------------------------===//

#include "MoeMlirPython.h"

#include "moe-mlir/AOT/AOT.h"
#include "moe-mlir/Conversion/Passes.h"
#include "moe-mlir/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace nb = nanobind;
using namespace mlir;

namespace moe_py {

static void initNativeTargetOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

/// Bytes per element of a memref element type name, 0 if unsupported.
static size_t elementBytes(const std::string &dtype) {
  if (dtype == "f64" || dtype == "i64" || dtype == "index")
    return 8;
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "f16" || dtype == "bf16" || dtype == "i16")
    return 2;
  if (dtype == "i8" || dtype == "i1" || dtype == "f8E4M3FN" ||
      dtype == "f8E8M0FNU")
    return 1;
  return 0;
}

//===----------------------------------------------------------------------===//
// Run-time shape checks
//===----------------------------------------------------------------------===//

// The first failed shape check of the current call on this thread (compiled
// code calls moeRuntimeReportShapeError, resolved to reportShapeError in the
// JIT, and returns before doing any work).
thread_local bool shapeCheckFailed = false;
thread_local std::string shapeCheckMessage;

extern "C" void moePyReportShapeError(const char *message, int64_t a,
                                      int64_t b) {
  if (shapeCheckFailed)
    return;
  shapeCheckFailed = true;
  // A printf format of the two sizes (moe-emit-shape-checks).
  char text[4096];
  std::snprintf(text, sizeof(text), message ? message : "shape check failed",
                static_cast<long long>(a), static_cast<long long>(b));
  shapeCheckMessage = text;
}

//===----------------------------------------------------------------------===//
// LLVM IR and object files
//===----------------------------------------------------------------------===//

std::string PyModule::translateToLLVMIR() const {
  checkNoOpenBuilders("translate a module");
  DiagnosticCollector diags(state->getContext());
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*state->module, llvmContext);
  if (!llvmModule)
    diags.fail("failed to translate the module to LLVM IR (is it lowered "
               "to the LLVM dialect?)");
  std::string text;
  llvm::raw_string_ostream os(text);
  llvmModule->print(os, nullptr);
  return text;
}

void PyModule::emitObject(const std::string &path,
                          std::optional<std::string> triple, bool pic,
                          int optLevel, const std::string &cpu,
                          const std::string &features) const {
  checkNoOpenBuilders("emit an object file");
  if (optLevel < 0 || optLevel > 3)
    throw MlirError{"opt_level must be 0..3, got " + std::to_string(optLevel),
                    {}};
  DiagnosticCollector diags(state->getContext());
  moe::aot::ObjectOptions options;
  options.triple = triple.value_or("");
  options.cpu = cpu;
  options.features = features;
  options.pic = pic;
  options.optLevel = optLevel;
  std::string error;
  if (failed(moe::aot::emitObjectFile(*state->module, path, options, error)))
    diags.fail(error);
}

//===----------------------------------------------------------------------===//
// compile_cpu
//===----------------------------------------------------------------------===//

PyCpuModule::PyCpuModule(
    std::unique_ptr<ExecutionEngine> engine,
    std::vector<std::pair<std::string, Signature>> signatures)
    : engine(std::move(engine)), sigs(std::move(signatures)) {}

PyCpuModule::~PyCpuModule() = default;

const PyCpuModule::Signature &
PyCpuModule::signature(const std::string &name) const {
  for (const auto &[n, sig] : sigs)
    if (n == name)
      return sig;
  throw MlirError{"no public function named '" + name + "'", {}};
}

/// Why a function cannot be called through the numpy interface, or "".
static std::string unsupportedReason(const PyCpuModule::Signature &sig) {
  for (const TypeInfo &t : sig.inputs) {
    if (t.kind == "other" || !elementBytes(t.dtype))
      return "unsupported argument type " + t.dtype;
  }
  for (const TypeInfo &t : sig.results) {
    if (t.kind == "scalar")
      return "scalar results are not supported (return a tensor)";
    if (t.kind == "other" || !elementBytes(t.dtype))
      return "unsupported result type " + t.dtype;
  }
  return "";
}

std::unique_ptr<PyCpuModule>
PyModule::compileCpu(int optLevel, const std::string &pipeline,
                     const std::vector<std::string> &sharedLibs) const {
  checkNoOpenBuilders("compile a module");
  if (optLevel < 0 || optLevel > 3)
    throw MlirError{"opt_level must be 0..3, got " + std::to_string(optLevel),
                    {}};
  MLIRContext *ctx = state->getContext();
  OwningOpRef<ModuleOp> copy = state->module->clone();
  DiagnosticCollector diags(ctx);
  if (failed(mlir::verify(*copy)))
    diags.fail("module failed to verify");

  if (!llvm::StringRef(pipeline).trim().empty()) {
    PassManager pre(ctx, ModuleOp::getOperationName());
    parsePipelineInto(pre, pipeline);
    if (failed(pre.run(*copy)))
      diags.fail("pass pipeline '" + pipeline + "' failed");
  }

  // Signatures of the public functions, before lowering.
  std::vector<std::pair<std::string, PyCpuModule::Signature>> sigs;
  for (auto func : copy->getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    PyCpuModule::Signature sig;
    for (Type t : func.getArgumentTypes())
      sig.inputs.push_back(
          describeType(t).value_or(TypeInfo{{}, "?", "other"}));
    for (Type t : func.getResultTypes())
      sig.results.push_back(
          describeType(t).value_or(TypeInfo{{}, "?", "other"}));
    sig.unsupported = unsupportedReason(sig);
    sigs.emplace_back(func.getSymName().str(), std::move(sig));
  }

  PassManager pm(ctx, ModuleOp::getOperationName());
  pm.addPass(moe::createMoeEmitCInterfacePass());
  moe::MoeLowerToCpuOptions cpuOptions;
  cpuOptions.deallocate = true;      // returned buffers are owned by the caller
  cpuOptions.shapeChecks = "report"; // a Python exception, not an abort
  moe::buildMoeLowerToCpuPipeline(pm, cpuOptions);
  if (failed(pm.run(*copy)))
    diags.fail("moe-lower-to-cpu failed");

  initNativeTargetOnce();
  ExecutionEngineOptions options;
  auto transformer = makeOptimizingTransformer(optLevel, /*sizeLevel=*/0,
                                               /*targetMachine=*/nullptr);
  options.transformer = transformer;
  options.jitCodeGenOptLevel = static_cast<llvm::CodeGenOptLevel>(optLevel);
  llvm::SmallVector<llvm::StringRef> libs(sharedLibs.begin(), sharedLibs.end());
  options.sharedLibPaths = libs;
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  auto engine = ExecutionEngine::create(*copy, options);
  if (!engine) {
    std::string message = llvm::toString(engine.takeError());
    std::vector<std::string> collected = diags.take();
    collected.push_back(message);
    throw MlirError{"JIT compilation failed", collected};
  }
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("moeRuntimeReportShapeError")] = {
        llvm::orc::ExecutorAddr::fromPtr(&moePyReportShapeError),
        llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  (*engine)->initialize();
  return std::make_unique<PyCpuModule>(std::move(*engine), std::move(sigs));
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

/// Writes a Python int / float into `slot` as a scalar of `dtype`.
static void packScalar(const std::string &dtype, nb::handle value,
                       uint64_t &slot) {
  slot = 0;
  if (dtype[0] == 'f' || dtype == "bf16") {
    double d = nb::cast<double>(value);
    if (dtype == "f64") {
      std::memcpy(&slot, &d, 8);
    } else if (dtype == "f32") {
      float f = static_cast<float>(d);
      std::memcpy(&slot, &f, 4);
    } else {
      llvm::APFloat ap(d);
      bool lost;
      ap.convert(dtype == "f16" ? llvm::APFloat::IEEEhalf()
                                : llvm::APFloat::BFloat(),
                 llvm::APFloat::rmNearestTiesToEven, &lost);
      uint16_t bits = static_cast<uint16_t>(ap.bitcastToAPInt().getZExtValue());
      std::memcpy(&slot, &bits, 2);
    }
    return;
  }
  int64_t i = nb::cast<int64_t>(value);
  size_t bytes = elementBytes(dtype);
  if (dtype == "i1")
    i = i != 0;
  std::memcpy(&slot, &i, bytes); // little-endian: low bytes first
}

/// The raw dlpack dtype a result of `dtype` is exported with (bf16 as
/// uint16 and i1 as uint8; the Python layer views them as
/// ml_dtypes.bfloat16 / bool).
static nb::dlpack::dtype rawDtype(const std::string &dtype) {
  using nb::dlpack::dtype_code;
  auto make = [](dtype_code code, int bits) {
    nb::dlpack::dtype d;
    d.code = static_cast<uint8_t>(code);
    d.bits = static_cast<uint8_t>(bits);
    d.lanes = 1;
    return d;
  };
  if (dtype == "f32")
    return make(dtype_code::Float, 32);
  if (dtype == "f64")
    return make(dtype_code::Float, 64);
  if (dtype == "f16")
    return make(dtype_code::Float, 16);
  if (dtype == "bf16" || dtype == "i16")
    return make(dtype == "bf16" ? dtype_code::UInt : dtype_code::Int, 16);
  if (dtype == "i1")
    return make(dtype_code::UInt, 8);
  if (dtype == "i8")
    return make(dtype_code::Int, 8);
  if (dtype == "i32")
    return make(dtype_code::Int, 32);
  return make(dtype_code::Int, 64); // i64, index
}

/// Calls public function `name` with `args`: per tensor argument a tuple
/// (address of C-contiguous data, shape), per scalar argument a Python
/// number. Returns one numpy array per result.
static nb::list invoke(PyCpuModule &self, const std::string &name,
                       nb::sequence args) {
  const PyCpuModule::Signature &sig = self.signature(name);
  if (!sig.unsupported.empty())
    throw MlirError{"function '" + name +
                        "' cannot be called from Python: " + sig.unsupported,
                    {}};
  size_t n = nb::len(args);
  if (n != sig.inputs.size())
    throw MlirError{"function '" + name + "' takes " +
                        std::to_string(sig.inputs.size()) + " arguments, got " +
                        std::to_string(n),
                    {}};

  // Descriptor words: allocated, aligned, offset, sizes[r], strides[r].
  std::vector<std::vector<int64_t>> descriptors(n);
  std::vector<void *> descriptorPtrs(n, nullptr);
  std::vector<uint64_t> scalars(n, 0);
  std::vector<std::pair<uintptr_t, uintptr_t>> inputRanges;
  std::vector<void *> packed;

  size_t resultWords = 0;
  for (const TypeInfo &t : sig.results)
    resultWords += 3 + 2 * t.shape.size();
  std::vector<int64_t> resultStorage(std::max<size_t>(resultWords, 1), 0);
  void *resultPtr = resultStorage.data();
  if (!sig.results.empty())
    packed.push_back(&resultPtr);

  for (size_t i = 0; i < n; ++i) {
    const TypeInfo &t = sig.inputs[i];
    nb::handle arg = args[i];
    if (t.kind == "scalar") {
      packScalar(t.dtype, arg, scalars[i]);
      packed.push_back(&scalars[i]);
      continue;
    }
    auto tuple = nb::cast<nb::tuple>(arg);
    uintptr_t data = nb::cast<uintptr_t>(tuple[0]);
    auto shape = nb::cast<std::vector<int64_t>>(tuple[1]);
    if (shape.size() != t.shape.size())
      throw MlirError{"argument " + std::to_string(i) + " of '" + name +
                          "': expected rank " + std::to_string(t.shape.size()) +
                          ", got " + std::to_string(shape.size()),
                      {}};
    int64_t elements = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0 || (t.shape[d] >= 0 && t.shape[d] != shape[d]))
        throw MlirError{
            "argument " + std::to_string(i) + " of '" + name + "': dimension " +
                std::to_string(d) + " is " + std::to_string(shape[d]) +
                ", the function expects " + std::to_string(t.shape[d]),
            {}};
      elements *= shape[d];
    }
    std::vector<int64_t> &desc = descriptors[i];
    desc = {static_cast<int64_t>(data), static_cast<int64_t>(data), 0};
    desc.insert(desc.end(), shape.begin(), shape.end());
    std::vector<int64_t> strides(shape.size(), 1);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * shape[d + 1];
    desc.insert(desc.end(), strides.begin(), strides.end());
    descriptorPtrs[i] = desc.data();
    packed.push_back(&descriptorPtrs[i]);
    inputRanges.emplace_back(data, data + elements * elementBytes(t.dtype));
  }

  {
    nb::gil_scoped_release release;
    shapeCheckFailed = false;
    if (llvm::Error err =
            self.engine->invokePacked("_mlir_ciface_" + name, packed)) {
      nb::gil_scoped_acquire acquire;
      throw MlirError{"call of '" + name +
                          "' failed: " + llvm::toString(std::move(err)),
                      {}};
    }
  }
  if (shapeCheckFailed) {
    // The call returned before any work, with empty result buffers: free
    // them (once each) and raise.
    shapeCheckFailed = false;
    std::vector<void *> freed;
    size_t at = 0;
    for (const TypeInfo &t : sig.results) {
      void *allocated = reinterpret_cast<void *>(resultStorage[at]);
      at += 3 + 2 * t.shape.size();
      if (allocated && !llvm::is_contained(freed, allocated)) {
        freed.push_back(allocated);
        std::free(allocated);
      }
    }
    throw nb::value_error(shapeCheckMessage.c_str());
  }

  // Results: one numpy array per memref, owning its allocation.
  nb::list out;
  std::vector<std::pair<int64_t, nb::object>> owners;
  size_t o = 0;
  for (const TypeInfo &t : sig.results) {
    size_t rank = t.shape.size();
    auto *allocated = reinterpret_cast<void *>(resultStorage[o]);
    auto *aligned = reinterpret_cast<char *>(resultStorage[o + 1]);
    int64_t offset = resultStorage[o + 2];
    std::vector<size_t> sizes(rank);
    std::vector<int64_t> strides(rank);
    for (size_t d = 0; d < rank; ++d) {
      sizes[d] = static_cast<size_t>(resultStorage[o + 3 + d]);
      strides[d] = resultStorage[o + 3 + rank + d];
    }
    o += 3 + 2 * rank;
    char *data = aligned + offset * static_cast<int64_t>(elementBytes(t.dtype));

    // Returned buffers are owned by the caller; guard anyway against one
    // that aliases an argument (copy it, never free it).
    bool aliasesInput = false;
    for (auto [lo, hi] : inputRanges)
      if (reinterpret_cast<uintptr_t>(data) >= lo &&
          reinterpret_cast<uintptr_t>(data) < hi)
        aliasesInput = true;
    nb::object owner;
    if (allocated && !aliasesInput) {
      auto key = reinterpret_cast<int64_t>(allocated);
      for (auto &[k, obj] : owners)
        if (k == key)
          owner = obj;
      if (!owner.is_valid()) {
        owner = nb::capsule(allocated, [](void *p) noexcept { std::free(p); });
        owners.emplace_back(key, owner);
      }
    }
    static char empty[8];
    nb::ndarray<nb::numpy> array(data ? data : empty, rank, sizes.data(), owner,
                                 strides.data(), rawDtype(t.dtype));
    nb::object result = nb::cast(array);
    if (!owner.is_valid())
      result = result.attr("copy")();
    out.append(result);
  }
  return out;
}

void bindExecution(nb::module_ &m) {
  // The link of a GPU artifact, moe::aot's (lib/AOT), as moe-aot does it.
  m.attr("CONFIGURED_RUNTIME_LIBRARY") =
      moe::aot::configuredRuntimeLibrary().str();
  m.attr("CONFIGURED_CUDA_LIBRARY_DIR") =
      moe::aot::configuredCudaLibraryDir().str();
  m.def(
      "link_command",
      [](const std::string &object, const std::string &output,
         const std::string &cxx, const std::string &runtimeLibrary,
         const std::string &cudaLibraryDir) {
        return moe::aot::linkCommand(object, output,
                                     {cxx, runtimeLibrary, cudaLibraryDir});
      },
      nb::arg("object"), nb::arg("output"), nb::arg("cxx"),
      nb::arg("runtime_library"), nb::arg("cuda_library_dir"));
  m.def(
      "link_shared",
      [](const std::string &object, const std::string &output,
         const std::string &cxx, const std::string &runtimeLibrary,
         const std::string &cudaLibraryDir) {
        std::string error;
        if (failed(moe::aot::linkSharedLibrary(
                object, output, {cxx, runtimeLibrary, cudaLibraryDir}, error)))
          throw MlirError{error, {}};
      },
      nb::arg("object"), nb::arg("output"), nb::arg("cxx"),
      nb::arg("runtime_library"), nb::arg("cuda_library_dir"),
      nb::call_guard<nb::gil_scoped_release>());

  nb::class_<PyCpuModule>(m, "_CpuModule")
      .def_prop_ro(
          "functions",
          [](const PyCpuModule &self) {
            nb::dict out;
            for (const auto &[name, sig] : self.signatures()) {
              auto describe = [](const std::vector<TypeInfo> &types) {
                nb::list l;
                for (const TypeInfo &t : types) {
                  nb::list shape;
                  for (int64_t d : t.shape)
                    shape.append(d < 0 ? nb::object(nb::none())
                                       : nb::object(nb::int_(d)));
                  l.append(nb::make_tuple(nb::tuple(shape), t.dtype, t.kind));
                }
                return l;
              };
              out[nb::str(name.c_str())] = nb::make_tuple(
                  describe(sig.inputs), describe(sig.results), sig.unsupported);
            }
            return out;
          },
          "{name: (inputs, results, unsupported-reason)}")
      .def("invoke", &invoke, nb::arg("name"), nb::arg("args"));
}

} // namespace moe_py
