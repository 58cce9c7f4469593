//===- moe-aot.cpp - compile an MLIR module to a self-contained .so -------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
//   moe-aot INPUT.mlir -o libOUT.so [--pipeline "<moe-opt flags>"]
//           [--keep-temps DIR] [--runtime PATH] [--cuda-lib-dir DIR]
//           [--cxx CXX] [-v]
//
// A thin CLI over lib/AOT (moe::aot), the compile path the Python package's
// moe_mlir.gpu.compile_gpu uses too. Steps (each printed with its time under
// -v):
//   1. parse INPUT, run the pipeline      (default: --moe-lower-to-nvvm)
//   2. emit an object file                (LLVM TargetMachine, -O2, PIC)
//   3. link it with libmoe_cuda_runtime.a (moe::aot::linkCommand)
// The result needs only the CUDA driver (libcuda.so.1) at run time. It
// exports the functions of the module (`_mlir_ciface_<name>` for functions
// marked `llvm.emit_c_interface`), the mgpu* runtime and the moeRuntime*
// embedder API (include/moe-mlir/Runtime/MoeCudaRuntime.h); GPU binaries
// embedded in it are loaded when it is loaded.
//
// --pipeline takes moe-opt pass flags, one shell-quoted string; a pipeline
// that is a single flag must be attached with '=':
// `--pipeline=--moe-lower-to-nvvm`. Every moe pass and pipeline and every
// upstream pass can be named.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/AOT/AOT.h"
#include "moe-mlir/InitAllDialects.h"
#include "moe-mlir/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory aotCategory("moe-aot options");
static cl::opt<std::string>
    inputFilename(cl::Positional, cl::desc("<input .mlir ('-': stdin)>"),
                  cl::Required, cl::cat(aotCategory));
static cl::opt<std::string> outputFilename("o", cl::Required,
                                           cl::desc("output shared library"),
                                           cl::value_desc("libOUT.so"),
                                           cl::cat(aotCategory));
static cl::opt<std::string>
    pipelineFlags("pipeline", cl::init("--moe-lower-to-nvvm"),
                  cl::desc("moe-opt pass flags, one shell-quoted string"),
                  cl::cat(aotCategory));
static cl::opt<std::string>
    keepTemps("keep-temps", cl::value_desc("DIR"),
              cl::desc("write and keep the intermediate files in DIR"),
              cl::cat(aotCategory));
static cl::opt<std::string> runtimeLibrary("runtime", cl::value_desc("PATH"),
                                           cl::desc("libmoe_cuda_runtime.a"),
                                           cl::cat(aotCategory));
static cl::opt<std::string>
    cudaLibDir("cuda-lib-dir", cl::value_desc("DIR"),
               cl::desc("directory holding libcuda.so (the driver's link "
                        "stub is enough)"),
               cl::cat(aotCategory));
static cl::opt<std::string>
    cxx("cxx",
        cl::desc("C++ compiler driver used to link (default: $CXX or c++)"),
        cl::cat(aotCategory));
static cl::opt<std::string> sourceName(
    "source-name", cl::value_desc("NAME"),
    cl::desc("the input's name in locations (diagnostics and the messages of "
             "run-time shape checks; default: the input path)"),
    cl::cat(aotCategory));
static cl::opt<bool> verifyEach(
    "verify-each",
    cl::desc("verify the IR after every pass (default: once, after the "
             "whole pipeline; the input is verified when it is parsed)"),
    cl::init(false), cl::cat(aotCategory));
static cl::opt<bool> verbose("v", cl::desc("print each step and its time"),
                             cl::cat(aotCategory));
static cl::alias verboseLong("verbose", cl::aliasopt(verbose),
                             cl::cat(aotCategory));

namespace {

/// Records `message` as the error and fails.
LogicalResult fail(std::string &error, const llvm::Twine &message) {
  error = message.str();
  return failure();
}

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void note(const llvm::Twine &text) {
  if (verbose)
    llvm::errs() << "moe-aot: " << text << "\n";
}

void done(StringRef step, Clock::time_point start) {
  if (verbose)
    llvm::errs() << "moe-aot: [" << step << "] done in "
                 << llvm::format("%.2f", secondsSince(start)) << " s\n";
}

bool isFile(const llvm::Twine &path) {
  return llvm::sys::fs::is_regular_file(path);
}

/// <prefix>/lib next to <prefix>/bin first (the build tree's, or an
/// install's), then the one configured at build time.
LogicalResult findRuntimeLibrary(const char *argv0, std::string &path,
                                 std::string &error) {
  if (!runtimeLibrary.empty()) {
    if (isFile(runtimeLibrary)) {
      path = runtimeLibrary;
      return success();
    }
  } else {
    std::string exe = llvm::sys::fs::getMainExecutable(
        argv0, reinterpret_cast<void *>(&findRuntimeLibrary));
    SmallString<256> candidate(llvm::sys::path::parent_path(exe));
    llvm::sys::path::append(candidate, "..", "lib", "libmoe_cuda_runtime.a");
    llvm::sys::path::remove_dots(candidate, /*remove_dot_dot=*/true);
    if (isFile(candidate)) {
      path = candidate.str().str();
      return success();
    }
    StringRef configured = moe::aot::configuredRuntimeLibrary();
    if (!configured.empty() && isFile(configured)) {
      path = configured.str();
      return success();
    }
  }
  return fail(error, "cannot find the CUDA runtime library "
                     "libmoe_cuda_runtime.a (was moe-mlir configured without "
                     "the CUDA toolkit?); pass --runtime PATH");
}

LogicalResult findCudaLibraryDir(std::string &path, std::string &error) {
  std::vector<std::string> candidates;
  if (!cudaLibDir.empty()) {
    candidates.push_back(cudaLibDir);
  } else {
    candidates.push_back(moe::aot::configuredCudaLibraryDir().str());
    const char *home = std::getenv("CUDA_HOME");
    if (!home)
      home = std::getenv("CUDA_PATH");
    if (home) {
      candidates.push_back(std::string(home) + "/lib64/stubs");
      candidates.push_back(std::string(home) + "/lib64");
    }
    candidates.push_back("/usr/local/cuda/lib64/stubs");
    candidates.push_back("/usr/local/cuda/lib64");
  }
  for (const std::string &dir : candidates)
    if (!dir.empty() && isFile(dir + "/libcuda.so")) {
      path = dir;
      return success();
    }
  return fail(error, "cannot find libcuda.so (the driver or its link stub); "
                     "pass --cuda-lib-dir DIR");
}

LogicalResult compile(MLIRContext &context, const char *argv0,
                      StringRef tempDir, std::string &error) {
  moe::aot::LinkOptions link;
  if (failed(findRuntimeLibrary(argv0, link.runtimeLibrary, error)) ||
      failed(findCudaLibraryDir(link.cudaLibraryDir, error)))
    return failure();
  if (!cxx.empty())
    link.cxx = cxx;
  else if (const char *env = std::getenv("CXX"))
    link.cxx = env;

  FailureOr<std::string> pipeline =
      moe::aot::pipelineFromFlags(pipelineFlags, error);
  if (failed(pipeline))
    return fail(error, "cannot read --pipeline: " + error);
  PassManager pm(&context, ModuleOp::getOperationName());
  // A compiler, not a pass test bench: the verifiers run on the parsed
  // input and on the result, not between passes (about 10% of the compile
  // time of a layer); --verify-each brings them back.
  pm.enableVerifier(verifyEach);
  std::string parseErrors;
  llvm::raw_string_ostream parseErrorStream(parseErrors);
  if (failed(parsePassPipeline(*pipeline, pm, parseErrorStream)))
    return fail(error, "invalid pipeline '" + *pipeline +
                           "': " + StringRef(parseErrors).trim().str());

  if (inputFilename != "-" && !isFile(inputFilename))
    return fail(error, "no such input file: " + inputFilename);
  StringRef stem = inputFilename == "-"
                       ? StringRef("stdin")
                       : llvm::sys::path::stem(inputFilename.getValue());
  auto temp = [&](StringRef suffix) {
    SmallString<256> path(tempDir);
    llvm::sys::path::append(path, stem + suffix);
    return path.str().str();
  };

  // Diagnostics (parse, verify, passes) go to stderr with their locations.
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  Clock::time_point start = Clock::now();
  note("[pipeline] " + inputFilename + " | " + *pipeline);
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &openError);
  if (!input)
    return fail(error, openError);
  if (!sourceName.empty())
    input = llvm::MemoryBuffer::getMemBufferCopy(input->getBuffer(),
                                                 sourceName.getValue());
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return fail(error, "cannot parse " + inputFilename);
  if (failed(pm.run(*module)))
    return fail(error, "pipeline '" + *pipeline + "' failed");
  if (!verifyEach && failed(verify(*module)))
    return fail(error, "pipeline '" + *pipeline +
                           "' produced IR that does not verify (rerun with "
                           "--verify-each to find the pass)");
  done("pipeline", start);
  if (!keepTemps.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(temp(".lowered.mlir"), ec);
    if (!ec)
      module->print(out);
    if (failed(moe::aot::writeLLVMIR(*module, temp(".ll"), error)))
      return failure();
  }

  start = Clock::now();
  std::string object = temp(".o");
  note("[object] " + object);
  if (failed(moe::aot::emitObjectFile(*module, object, {}, error)))
    return fail(error, "object: " + error);
  done("object", start);

  start = Clock::now();
  std::string output = outputFilename;
  SmallString<256> absolute(output);
  if (!llvm::sys::fs::make_absolute(absolute))
    output = absolute.str().str();
  std::string commandLine;
  for (const std::string &arg : moe::aot::linkCommand(object, output, link))
    commandLine += (commandLine.empty() ? "" : " ") + arg;
  note("[link] " + commandLine);
  if (failed(moe::aot::linkSharedLibrary(object, output, link, error)))
    return failure();
  done("link", start);
  return success();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAllPasses();
  moe::registerAllPasses();
  cl::HideUnrelatedOptions(aotCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Compile an MLIR module into a shared library that needs only the "
      "CUDA driver at run time.\n");

  DialectRegistry registry;
  moe::registerAllDialects(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);

  Clock::time_point start = Clock::now();
  std::string error;
  LogicalResult result = success();
  if (!keepTemps.empty()) {
    if (std::error_code ec =
            llvm::sys::fs::create_directories(keepTemps.getValue()))
      result = fail(error, "cannot create " + keepTemps + ": " + ec.message());
    else
      result = compile(context, argv[0], keepTemps, error);
  } else {
    SmallString<128> tempDir;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("moe-aot", tempDir)) {
      result =
          fail(error, "cannot create a temporary directory: " + ec.message());
    } else {
      result = compile(context, argv[0], tempDir, error);
      llvm::sys::fs::remove_directories(tempDir);
    }
  }
  if (failed(result)) {
    llvm::errs() << "moe-aot: error: " << error << "\n";
    return 1;
  }
  if (verbose)
    llvm::errs() << "moe-aot: wrote " << outputFilename << " in "
                 << llvm::format("%.2f", secondsSince(start)) << " s\n";
  return 0;
}
