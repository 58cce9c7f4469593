//===- AOT.cpp - ahead-of-time compilation to a shared library ------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/AOT/AOT.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/StringSaver.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <mutex>

using namespace mlir;

namespace {

void initAllTargetsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

std::unique_ptr<llvm::Module>
translate(ModuleOp module, llvm::LLVMContext &llvmContext, std::string &error) {
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    error = "failed to translate the module to LLVM IR (is it lowered to "
            "the LLVM dialect?)";
  return llvmModule;
}

} // namespace

LogicalResult moe::aot::emitObjectFile(ModuleOp module, StringRef path,
                                       const ObjectOptions &options,
                                       std::string &error) {
  if (options.optLevel > 3) {
    error = "opt level must be 0..3, got " + std::to_string(options.optLevel);
    return failure();
  }
  initAllTargetsOnce();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translate(module, llvmContext, error);
  if (!llvmModule)
    return failure();

  llvm::Triple triple(options.triple.empty()
                          ? llvm::sys::getDefaultTargetTriple()
                          : options.triple);
  std::string lookupError;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target) {
    error = "no LLVM target for triple '" + triple.str() + "': " + lookupError;
    return failure();
  }
  llvm::TargetOptions targetOptions;
  auto level = static_cast<llvm::CodeGenOptLevel>(options.optLevel);
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, options.cpu, options.features, targetOptions,
      options.pic ? llvm::Reloc::PIC_ : llvm::Reloc::Static, std::nullopt,
      level));
  if (!machine) {
    error = "cannot create a target machine for '" + triple.str() + "'";
    return failure();
  }
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  if (options.optLevel > 0) {
    auto transformer = makeOptimizingTransformer(
        options.optLevel, /*sizeLevel=*/0, machine.get());
    if (llvm::Error err = transformer(llvmModule.get())) {
      error = "LLVM optimisation failed: " + llvm::toString(std::move(err));
      return failure();
    }
  }

  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot open '" + path.str() + "': " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, out, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  codegen.run(*llvmModule);
  out.flush();
  if (out.has_error()) {
    error = "cannot write '" + path.str() + "': " + out.error().message();
    out.clear_error();
    return failure();
  }
  return success();
}

LogicalResult moe::aot::writeLLVMIR(ModuleOp module, StringRef path,
                                    std::string &error) {
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translate(module, llvmContext, error);
  if (!llvmModule)
    return failure();
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot open '" + path.str() + "': " + ec.message();
    return failure();
  }
  llvmModule->print(out, nullptr);
  return success();
}

std::vector<std::string> moe::aot::linkCommand(StringRef object,
                                               StringRef output,
                                               const LinkOptions &options) {
  // -Bsymbolic: the module's calls bind to its own copy of the runtime even
  // when another library in the process exports mgpu* too. libstdc++ is
  // linked in but not re-exported.
  return {options.cxx,
          "-shared",
          "-o",
          output.str(),
          object.str(),
          options.runtimeLibrary,
          "-L" + options.cudaLibraryDir,
          "-lcuda",
          "-static-libstdc++",
          "-static-libgcc",
          "-Wl,--exclude-libs,libstdc++.a",
          "-Wl,-Bsymbolic",
          "-Wl,-z,defs"};
}

LogicalResult moe::aot::linkSharedLibrary(StringRef object, StringRef output,
                                          const LinkOptions &options,
                                          std::string &error) {
  std::vector<std::string> command = linkCommand(object, output, options);
  std::string commandLine;
  for (const std::string &arg : command)
    commandLine += (commandLine.empty() ? "" : " ") + arg;

  std::string program = options.cxx;
  if (!StringRef(program).contains('/')) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(program);
    if (!found) {
      error = "link: cannot find '" + program + "' on PATH";
      return failure();
    }
    program = *found;
  }
  SmallString<128> logPath;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("moe-aot-link", "log", logPath)) {
    error = "link: cannot create a temporary file: " + ec.message();
    return failure();
  }
  SmallVector<StringRef> args(command.begin(), command.end());
  std::optional<StringRef> redirects[] = {std::nullopt, logPath.str(),
                                          logPath.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(program, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &execError);
  std::string log;
  if (auto buffer = llvm::MemoryBuffer::getFile(logPath))
    log = StringRef((*buffer)->getBuffer()).rtrim().str();
  llvm::sys::fs::remove(logPath);
  if (rc == 0)
    return success();
  error = "link failed (exit code " + std::to_string(rc) + "): " + commandLine;
  if (!execError.empty())
    error += "\n" + execError;
  if (!log.empty())
    error += "\n" + log;
  return failure();
}

FailureOr<std::string> moe::aot::pipelineFromFlags(StringRef flags,
                                                   std::string &error) {
  llvm::BumpPtrAllocator allocator;
  llvm::StringSaver saver(allocator);
  SmallVector<const char *> tokens;
  llvm::cl::TokenizeGNUCommandLine(flags, saver, tokens);
  std::string pipeline;
  for (const char *token : tokens) {
    StringRef flag(token);
    if (!flag.starts_with("-")) {
      error = "'" + flag.str() +
              "' is not a pass flag (--name or "
              "--name=options)";
      return failure();
    }
    flag = flag.drop_while([](char c) { return c == '-'; });
    auto [name, options] = flag.split('=');
    if (name.empty()) {
      error = "'" + StringRef(token).str() + "' names no pass";
      return failure();
    }
    std::string element = name.str();
    if (flag.contains('='))
      element += "{" + options.str() + "}";
    // A pass of one op (convert-gpu-to-nvvm: gpu.module) is nested on it,
    // as moe-opt's implicit nesting does.
    OpPassManager probe;
    std::string parseErrors;
    llvm::raw_string_ostream parseErrorStream(parseErrors);
    if (failed(parsePassPipeline(element, probe, parseErrorStream))) {
      error = "invalid pass '" + element +
              "': " + StringRef(parseErrors).trim().str();
      return failure();
    }
    if (probe.size() == 1) {
      std::optional<StringRef> opName = probe.begin()->getOpName();
      if (opName && *opName != ModuleOp::getOperationName())
        element = opName->str() + "(" + element + ")";
    }
    if (!pipeline.empty())
      pipeline += ",";
    pipeline += element;
  }
  return pipeline;
}

StringRef moe::aot::configuredRuntimeLibrary() {
  return MOE_AOT_RUNTIME_LIBRARY;
}

StringRef moe::aot::configuredCudaLibraryDir() {
  return MOE_AOT_CUDA_LIBRARY_DIR;
}
