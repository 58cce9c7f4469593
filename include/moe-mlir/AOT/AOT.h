//===- AOT.h - ahead-of-time compilation to a shared library ----*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The one compile path of moe-mlir's GPU artifacts, shared by the moe-aot
// tool and the Python package (moe_mlir.gpu.compile_gpu, through the
// extension): a module lowered to the LLVM dialect (for example by
// --moe-lower-to-nvvm, host code with the kernels embedded) becomes an
// object file through an LLVM TargetMachine, and the object is linked with
// the static CUDA runtime into a shared library that needs only the CUDA
// driver (libcuda.so.1) at run time:
//
//   c++ -shared -o OUT obj libmoe_cuda_runtime.a -L<driver stub dir> -lcuda
//       -static-libstdc++ -static-libgcc -Wl,--exclude-libs,libstdc++.a
//       -Wl,-Bsymbolic -Wl,-z,defs
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_AOT_AOT_H
#define MOE_MLIR_AOT_AOT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mlir {
namespace moe {
namespace aot {

/// How a module in the LLVM dialect becomes an object file.
struct ObjectOptions {
  /// The target triple; empty: the host's.
  std::string triple;
  /// The CPU and its features; empty: the generic CPU.
  std::string cpu;
  std::string features;
  bool pic = true;
  /// LLVM's -O level, 0..3 (as `llc -O2`).
  unsigned optLevel = 2;
};

/// Translates `module` to LLVM IR, optimises it and writes an object file to
/// `path`. On failure returns failure with `error` set; a failed translation
/// also emits MLIR diagnostics on the module's context.
LogicalResult emitObjectFile(ModuleOp module, StringRef path,
                             const ObjectOptions &options, std::string &error);

/// Writes the LLVM IR `module` translates to (text) to `path`.
LogicalResult writeLLVMIR(ModuleOp module, StringRef path, std::string &error);

/// What the link needs.
struct LinkOptions {
  /// The C++ compiler driver that links.
  std::string cxx = "c++";
  /// libmoe_cuda_runtime.a.
  std::string runtimeLibrary;
  /// A directory holding libcuda.so (the driver's link stub is enough).
  std::string cudaLibraryDir;
};

/// The link command line, argv[0] first (`cxx` as given, not resolved).
std::vector<std::string> linkCommand(StringRef object, StringRef output,
                                     const LinkOptions &options);

/// Runs linkCommand. On failure `error` holds the command and the linker's
/// output.
LogicalResult linkSharedLibrary(StringRef object, StringRef output,
                                const LinkOptions &options, std::string &error);

/// Turns moe-opt style pass flags (`--moe-decompose
/// "--moe-lower-to-nvvm=chip=sm_90a tile-m=64"`, shell-quoted) into a
/// textual pipeline (`moe-decompose,moe-lower-to-nvvm{chip=sm_90a
/// tile-m=64}`); a pass that runs on one kind of op other than
/// builtin.module is nested on it (`gpu.module(convert-gpu-to-nvvm)`), as
/// moe-opt's implicit nesting does. The passes must be registered. Fails on
/// an argument that is not a flag or names no registered pass.
FailureOr<std::string> pipelineFromFlags(StringRef flags, std::string &error);

/// The runtime archive and the driver stub directory configured at build
/// time ("" when moe-mlir was configured without the CUDA runtime).
StringRef configuredRuntimeLibrary();
StringRef configuredCudaLibraryDir();

} // namespace aot
} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_AOT_AOT_H
