//===- IR.cpp - contexts, modules, diagnostics, pipelines -----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "MoeMlirPython.h"

#include "moe-mlir/InitAllDialects.h"
#include "moe-mlir/InitAllPasses.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace moe_py {

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

std::string MlirError::message() const {
  std::string out = summary;
  if (!diagnostics.empty())
    out += ":";
  for (const std::string &d : diagnostics)
    out += "\n" + d;
  return out;
}

std::string formatLocation(Location loc) {
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    return (file.getFilename().getValue() + ":" + llvm::Twine(file.getLine()) +
            ":" + llvm::Twine(file.getColumn()))
        .str();
  return "";
}

static const char *severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

/// `loc: severity: message`, notes on the following lines.
static std::string formatDiagnostic(Diagnostic &diag) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto one = [&](Diagnostic &d, llvm::StringRef indent) {
    std::string loc = formatLocation(d.getLocation());
    os << indent;
    if (!loc.empty())
      os << loc << ": ";
    os << severityName(d.getSeverity()) << ": " << d.str();
  };
  one(diag, "");
  for (Diagnostic &note : diag.getNotes()) {
    os << "\n";
    one(note, "  ");
  }
  return text;
}

DiagnosticCollector::DiagnosticCollector(MLIRContext *context)
    : context(context) {
  handlerId = context->getDiagEngine().registerHandler(
      [this](Diagnostic &diag) -> LogicalResult {
        std::string text = formatDiagnostic(diag);
        std::lock_guard<std::mutex> lock(mutex);
        collected.push_back(std::move(text));
        return success();
      });
}

DiagnosticCollector::~DiagnosticCollector() {
  context->getDiagEngine().eraseHandler(handlerId);
}

std::vector<std::string> DiagnosticCollector::take() {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::string> out;
  out.swap(collected);
  return out;
}

void DiagnosticCollector::fail(const std::string &summary, bool build) {
  if (build) {
    MlirBuildError error;
    error.summary = summary;
    error.diagnostics = take();
    throw error;
  }
  throw MlirError{summary, take()};
}

//===----------------------------------------------------------------------===//
// Registration and contexts
//===----------------------------------------------------------------------===//

void registerPassesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Pass registration is global to libMLIR.so. Another library of this
    // project loaded into the same process (the C API) may have registered
    // the pipelines already; registering a pipeline twice is fatal.
    if (!PassPipelineInfo::lookup("moe-lower-to-cpu")) {
      moe::registerAllPasses();
    }
    // What moe-opt offers on top (tools/moe-opt/moe-opt.cpp).
    registerCanonicalizerPass();
    registerCSEPass();
  });
}

ContextState::ContextState() {
  DialectRegistry registry;
  moe::registerAllDialects(registry);
  // The offloading handler of gpu.binary (#gpu.select_object), so the host
  // side of --moe-lower-to-nvvm translates to LLVM IR (emit_object).
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  context.appendDialectRegistry(registry);
  // Diagnostics name the op by location; the generic dump of the whole
  // op ("see current operation") would swamp the Python message.
  context.printOpOnDiagnostic(false);
  // What the builders create directly.
  context.loadDialect<moe::MoeDialect, func::FuncDialect, tensor::TensorDialect,
                      arith::ArithDialect>();
  registerPassesOnce();
}

PyMlirContext PyMlirContext::getDefault() {
  // Never destroyed: modules of the default context may live until exit.
  static auto *instance =
      new std::shared_ptr<ContextState>(std::make_shared<ContextState>());
  return PyMlirContext(*instance);
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

Type parseElementType(MLIRContext *ctx, const std::string &name) {
  Builder b(ctx);
  if (name == "f32")
    return b.getF32Type();
  if (name == "f16")
    return b.getF16Type();
  if (name == "bf16")
    return b.getBF16Type();
  if (name == "f64")
    return b.getF64Type();
  if (name == "index")
    return b.getIndexType();
  // Low-precision expert weights and their scales (weight_format).
  if (name == "f8E4M3FN")
    return Float8E4M3FNType::get(ctx);
  if (name == "f8E8M0FNU")
    return Float8E8M0FNUType::get(ctx);
  for (unsigned width : {1u, 8u, 16u, 32u, 64u})
    if (name == "i" + std::to_string(width))
      return b.getIntegerType(width);
  MlirBuildError error;
  error.summary = "unknown element type '" + name +
                  "' (expected one of f32, f16, bf16, f64, f8E4M3FN, "
                  "f8E8M0FNU, i1, i8, i16, i32, i64, index)";
  throw error;
}

std::string elementTypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isF64())
    return "f64";
  if (type.isIndex())
    return "index";
  if (isa<Float8E4M3FNType>(type))
    return "f8E4M3FN";
  if (isa<Float8E8M0FNUType>(type))
    return "f8E8M0FNU";
  if (auto i = dyn_cast<IntegerType>(type))
    if (i.isSignless())
      return "i" + std::to_string(i.getWidth());
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

std::optional<TypeInfo> describeType(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    if (tensor.getEncoding())
      return std::nullopt;
    return TypeInfo{std::vector<int64_t>(tensor.getShape().begin(),
                                         tensor.getShape().end()),
                    elementTypeName(tensor.getElementType()), "tensor"};
  }
  if (auto memref = dyn_cast<MemRefType>(type)) {
    if (!memref.getLayout().isIdentity() || memref.getMemorySpace())
      return std::nullopt;
    return TypeInfo{std::vector<int64_t>(memref.getShape().begin(),
                                         memref.getShape().end()),
                    elementTypeName(memref.getElementType()), "memref"};
  }
  if (isa<FloatType, IntegerType, IndexType>(type))
    return TypeInfo{{}, elementTypeName(type), "scalar"};
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Modules
//===----------------------------------------------------------------------===//

PyModule::PyModule(PyMlirContext context)
    : state(std::make_shared<ModuleState>()) {
  state->context = context.state;
  state->module = ModuleOp::create(UnknownLoc::get(state->getContext()));
}

PyModule::PyModule(std::shared_ptr<ContextState> context,
                   OwningOpRef<ModuleOp> module)
    : state(std::make_shared<ModuleState>()) {
  state->context = std::move(context);
  state->module = std::move(module);
}

PyModule PyModule::parse(const std::string &text, PyMlirContext context,
                         const std::string &sourceName) {
  MLIRContext *ctx = context.state->get();
  DiagnosticCollector diags(ctx);
  ParserConfig config(ctx);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, config, sourceName);
  if (!module)
    diags.fail("failed to parse MLIR module");
  return PyModule(context.state, std::move(module));
}

std::string PyModule::print(bool generic, bool debugInfo) const {
  OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  if (debugInfo)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  // Print invalid IR too (generic form) instead of asserting.
  flags.assumeVerified(false);
  std::string text;
  llvm::raw_string_ostream os(text);
  state->module->print(os, flags);
  return text;
}

void PyModule::verify() const {
  DiagnosticCollector diags(state->getContext());
  if (failed(mlir::verify(*state->module)))
    diags.fail("module failed to verify");
}

void PyModule::checkNoOpenBuilders(const char *what) const {
  if (state->openBuilders > 0)
    throw MlirError{std::string("cannot ") + what +
                        " while a FunctionBuilder of this module is open "
                        "(call ret() or leave its `with` block first)",
                    {}};
}

/// Parses a textual pipeline into a pass manager on builtin.module. Accepts
/// `a,b{opt=1}` (nested into builtin.module) and the full
/// `builtin.module(...)` form.
void parsePipelineInto(PassManager &pm, const std::string &pipeline) {
  llvm::StringRef text = llvm::StringRef(pipeline).trim();
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  std::string anchored = text.starts_with("builtin.module(")
                             ? text.str()
                             : ("builtin.module(" + text + ")").str();
  FailureOr<OpPassManager> parsed = parsePassPipeline(anchored, errorStream);
  if (failed(parsed)) {
    std::vector<std::string> lines;
    llvm::SmallVector<llvm::StringRef> split;
    llvm::StringRef(errors).rtrim().split(split, '\n');
    for (llvm::StringRef line : split)
      lines.push_back(line.str());
    throw MlirError{"invalid pass pipeline '" + text.str() + "'", lines};
  }
  static_cast<OpPassManager &>(pm) = *parsed;
}

void PyModule::runPipeline(const std::string &pipeline, bool verifyEach) {
  checkNoOpenBuilders("run a pipeline");
  MLIRContext *ctx = state->getContext();
  PassManager pm(ctx, ModuleOp::getOperationName());
  parsePipelineInto(pm, pipeline);
  pm.enableVerifier(verifyEach);
  // Transactional: run on a copy so a failing pipeline leaves the module as
  // it was.
  OwningOpRef<ModuleOp> copy = state->module->clone();
  DiagnosticCollector diags(ctx);
  if (failed(pm.run(*copy)))
    diags.fail("pass pipeline '" + llvm::StringRef(pipeline).trim().str() +
               "' failed");
  if (!verifyEach && failed(mlir::verify(*copy)))
    diags.fail("pass pipeline '" + llvm::StringRef(pipeline).trim().str() +
               "' produced IR that does not verify (run it with "
               "verify_each=True to find the pass)");
  state->module = std::move(copy);
}

PyModule PyModule::clone() const {
  checkNoOpenBuilders("clone a module");
  return PyModule(state->context, state->module->clone());
}

std::vector<std::tuple<std::string, std::string, std::vector<TypeInfo>,
                       std::vector<TypeInfo>>>
PyModule::functions() const {
  std::vector<std::tuple<std::string, std::string, std::vector<TypeInfo>,
                         std::vector<TypeInfo>>>
      out;
  auto describeAll = [](TypeRange types) {
    std::vector<TypeInfo> infos;
    for (Type t : types) {
      if (auto info = describeType(t)) {
        infos.push_back(*info);
      } else {
        std::string text;
        llvm::raw_string_ostream os(text);
        t.print(os);
        infos.push_back(TypeInfo{{}, text, "other"});
      }
    }
    return infos;
  };
  for (auto func : state->module->getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    out.emplace_back(func.getSymName().str(),
                     func.isPublic() ? "public" : "private",
                     describeAll(func.getArgumentTypes()),
                     describeAll(func.getResultTypes()));
  }
  return out;
}

} // namespace moe_py
