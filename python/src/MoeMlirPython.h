//===- MoeMlirPython.h - shared types of the moe_mlir extension -*- C++ -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The C++ side of the `moe_mlir` Python package (`moe_mlir._moe`), in the
// style of Triton's python/src: plain C++ classes that own the MLIR objects,
// bound with nanobind in MoeModule.cpp.
//
// Ownership: a PyMlirContext owns an MLIRContext; a PyModule owns a ModuleOp
// and keeps its context alive; a PyFunctionBuilder (one func.func being built)
// keeps its module alive, and every PyValue keeps its builder alive. Nothing
// in Python can outlive the IR it points into.
//
// Errors: every failure throws MlirError (translated to moe_mlir.MLIRError)
// or, for invalid builder arguments, MlirBuildError (moe_mlir.BuildError, a
// subclass of both MLIRError and ValueError). Both carry the diagnostics
// MLIR emitted, formatted `file:line:col: error: message`.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_PYTHON_MOEMLIRPYTHON_H
#define MOE_MLIR_PYTHON_MOEMLIRPYTHON_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace mlir {
class ExecutionEngine;
class PassManager;
} // namespace mlir
namespace nanobind {
class module_;
} // namespace nanobind

namespace moe_py {

//===----------------------------------------------------------------------===//
// Errors and diagnostics
//===----------------------------------------------------------------------===//

/// A failure with the MLIR diagnostics that explain it.
struct MlirError {
  std::string summary;
  std::vector<std::string> diagnostics;
  /// `summary:` followed by one diagnostic per line (the Python message).
  std::string message() const;
};

/// An invalid builder call (bad attribute value, operand types): raised as
/// moe_mlir.BuildError, which is both an MLIRError and a ValueError.
struct MlirBuildError : MlirError {};

/// Collects every diagnostic emitted on a context while in scope, formatted
/// like mlir-opt prints them (`file:line:col: error: msg`, notes indented
/// below). Diagnostics are not printed to stderr while it is active.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext *context);
  ~DiagnosticCollector();
  DiagnosticCollector(const DiagnosticCollector &) = delete;
  DiagnosticCollector &operator=(const DiagnosticCollector &) = delete;

  /// The diagnostics collected so far; clears the collector.
  std::vector<std::string> take();

  /// Throws MlirError (or MlirBuildError) with `summary` and what was
  /// collected.
  [[noreturn]] void fail(const std::string &summary, bool build = false);

private:
  mlir::MLIRContext *context;
  mlir::DiagnosticEngine::HandlerID handlerId;
  std::mutex mutex;
  std::vector<std::string> collected;
};

/// `file:line:col` of the first file location inside `loc`, or "" when it
/// has none.
std::string formatLocation(mlir::Location loc);

//===----------------------------------------------------------------------===//
// Context and module
//===----------------------------------------------------------------------===//

/// An MLIRContext with moe::registerAllDialects and the dialects builders
/// need loaded. Passes and pipelines are registered once per process.
class ContextState {
public:
  ContextState();
  mlir::MLIRContext *get() { return &context; }

private:
  mlir::MLIRContext context;
};

class PyMlirContext {
public:
  PyMlirContext() : state(std::make_shared<ContextState>()) {}
  explicit PyMlirContext(std::shared_ptr<ContextState> state)
      : state(std::move(state)) {}
  /// The process-wide context used when none is given.
  static PyMlirContext getDefault();

  std::shared_ptr<ContextState> state;
};

struct ModuleState {
  std::shared_ptr<ContextState> context; // destroyed after `module`
  mlir::OwningOpRef<mlir::ModuleOp> module;
  int openBuilders = 0;

  mlir::MLIRContext *getContext() { return context->get(); }
};

/// Element type names used by the Python API (`"bf16"`, `"i32"`, ...).
mlir::Type parseElementType(mlir::MLIRContext *context,
                            const std::string &name);
std::string elementTypeName(mlir::Type type);

/// Python view of a ranked tensor / memref / scalar type: (shape with -1
/// for dynamic dims, element type name, kind: "tensor", "memref" or
/// "scalar").
struct TypeInfo {
  std::vector<int64_t> shape;
  std::string dtype;
  std::string kind;
};
std::optional<TypeInfo> describeType(mlir::Type type);

class PyCpuModule;

class PyModule {
public:
  /// An empty module.
  explicit PyModule(PyMlirContext context);
  PyModule(std::shared_ptr<ContextState> context,
           mlir::OwningOpRef<mlir::ModuleOp> module);

  static PyModule parse(const std::string &text, PyMlirContext context,
                        const std::string &sourceName);
  std::string print(bool generic, bool debugInfo) const;
  void verify() const;
  void runPipeline(const std::string &pipeline, bool verifyEach = true);
  PyModule clone() const;
  PyMlirContext context() const { return PyMlirContext(state->context); }

  /// {name: (visibility, [input TypeInfo], [result TypeInfo])} of every
  /// func.func with a body, in module order.
  std::vector<std::tuple<std::string, std::string, std::vector<TypeInfo>,
                         std::vector<TypeInfo>>>
  functions() const;

  /// LLVM IR text of a module in the LLVM dialect (after a lowering).
  std::string translateToLLVMIR() const;
  /// Compiles a module in the LLVM dialect (for example the host side of
  /// `--moe-lower-to-nvvm`, with its embedded GPU binary) to an object file.
  void emitObject(const std::string &path, std::optional<std::string> triple,
                  bool pic, int optLevel, const std::string &cpu,
                  const std::string &features) const;
  /// Lowers a copy with `pipeline` (optional), moe-emit-c-interface and
  /// moe-lower-to-cpu{deallocate=true}, and JIT-compiles it.
  std::unique_ptr<PyCpuModule>
  compileCpu(int optLevel, const std::string &pipeline,
             const std::vector<std::string> &sharedLibs) const;

  std::shared_ptr<ModuleState> state;

private:
  void checkNoOpenBuilders(const char *what) const;
};

//===----------------------------------------------------------------------===//
// Function builder
//===----------------------------------------------------------------------===//

struct FuncState {
  std::shared_ptr<ModuleState> module;
  mlir::func::FuncOp func;
  std::string name;
  bool open = true;
};

/// An SSA value of a function under construction. Its type is recorded
/// when it is created: `value` is only dereferenced while the function is
/// open (a later pipeline may replace the IR it points into).
class PyValue {
public:
  PyValue(std::shared_ptr<FuncState> owner, mlir::Value value);
  const TypeInfo &type() const { return info; }

  std::shared_ptr<FuncState> owner;
  mlir::Value value;
  TypeInfo info;
};

/// (file, line, column) of the Python code that builds an op.
using PyLoc = std::tuple<std::string, int, int>;

/// Builds one func.func with typed moe op builders. Each op is verified when
/// it is created; an invalid one is erased again and reported as
/// MlirBuildError. Implemented in Builder.cpp.
class PyFunctionBuilder {
public:
  PyFunctionBuilder(
      const PyModule &module, const std::string &name,
      const std::vector<std::pair<std::vector<int64_t>, std::string>> &inputs,
      const std::string &visibility, const PyLoc &loc);
  /// A builder dropped before ret() removes its unfinished function.
  ~PyFunctionBuilder() { abandon(); }
  PyFunctionBuilder(const PyFunctionBuilder &) = delete;
  PyFunctionBuilder &operator=(const PyFunctionBuilder &) = delete;

  std::vector<PyValue> arguments() const;
  bool isOpen() const { return state->open; }
  std::string name() const;

  /// func.return of `values`; sets the function's result types, verifies
  /// the function and closes the builder.
  void ret(const PyLoc &loc, const std::vector<PyValue> &values);
  /// Removes the unfinished function from its module.
  void abandon();

  std::vector<PyValue> topk(const PyLoc &loc, const PyValue &input, int64_t k);
  std::vector<PyValue> route(const PyLoc &loc, const PyValue &logits,
                             const std::optional<PyValue> &bias, int64_t k,
                             const std::string &scoring, bool normalize,
                             int64_t nGroup, int64_t topkGroup,
                             const std::string &groupScore, double scaling,
                             const std::string &weightsDtype);
  PyValue cumsum(const PyLoc &loc, const PyValue &indices, int64_t numExperts);
  std::vector<PyValue> getIndices(const PyLoc &loc, const PyValue &cumsum,
                                  const PyValue &indices);
  PyValue getIndptr(const PyLoc &loc, const PyValue &cumsum, int64_t numExperts,
                    bool inclusive, const std::string &dtype);
  PyValue gather(const PyLoc &loc, const PyValue &input,
                 const PyValue &indices);
  PyValue groupedMatmul(const PyLoc &loc, const PyValue &lhs,
                        const PyValue &rhs, const PyValue &offsets,
                        const std::optional<PyValue> &bias, bool transposeRhs,
                        const std::optional<std::string> &outDtype,
                        const std::string &weightFormat,
                        const std::string &scaleFmt,
                        const std::optional<PyValue> &rhsScale);
  PyValue glu(const PyLoc &loc, const PyValue &input,
              const std::string &activation, const std::string &layout,
              double alpha, std::optional<double> limit, double upBias);
  PyValue scatter(const PyLoc &loc, const PyValue &input,
                  const PyValue &indices);
  PyValue combine(const PyLoc &loc, const PyValue &input,
                  const std::optional<PyValue> &weights);
  std::vector<PyValue> indicesToMultihot(const PyLoc &loc,
                                         const PyValue &indices,
                                         const PyValue &probs,
                                         int64_t numExperts);
  PyValue multihotToIndices(const PyLoc &loc, const PyValue &probsMultihot,
                            const PyValue &positionMap, int64_t k);
  /// moe.ffn ("ffn": its result), moe.ffn_train ("ffn_train": y, h,
  /// weights, indices) or moe.ffn_grad ("ffn_grad": `dy` first, `saved` the
  /// forward's h, weights, indices or none; the gradients): the same
  /// operands and attributes. `weightGrads` (ffn_grad): "f32" or
  /// "weights" (the weight gradients in the weights' type).
  std::vector<PyValue> ffnFamily(
      const PyLoc &loc, const std::string &op, const std::optional<PyValue> &dy,
      const PyValue &x, const PyValue &logits, const PyValue &wUp,
      const PyValue &wDown, const std::optional<PyValue> &bias, int64_t k,
      const std::string &scoring, bool normalize, int64_t nGroup,
      int64_t topkGroup, const std::string &groupScore, double scaling,
      const std::string &activation, const std::string &layout, double alpha,
      std::optional<double> limit, double upBias, bool transposeWeights,
      const std::optional<PyValue> &wUpBias,
      const std::optional<PyValue> &wDownBias, const std::string &weightFormat,
      const std::string &scaleFmt, const std::optional<PyValue> &wUpScale,
      const std::optional<PyValue> &wDownScale,
      const std::vector<PyValue> &saved, const std::string &weightGrads);
  /// tensor.expand_shape of an `M x H` tensor to `(M/k) x k x H`.
  PyValue expandSlots(const PyLoc &loc, const PyValue &input, int64_t k);

private:
  mlir::Location location(const PyLoc &loc);
  mlir::Value use(const PyValue &value, const char *what);
  std::vector<PyValue> wrap(mlir::Operation *op);
  mlir::MLIRContext *ctx() { return state->module->getContext(); }

  std::shared_ptr<FuncState> state;
};

//===----------------------------------------------------------------------===//
// CPU execution
//===----------------------------------------------------------------------===//

/// A JIT-compiled module (mlir::ExecutionEngine). Implemented in
/// Execution.cpp.
class PyCpuModule {
public:
  struct Signature {
    std::vector<TypeInfo> inputs;
    std::vector<TypeInfo> results;
    std::string unsupported; // why it cannot be called, or ""
  };

  PyCpuModule(std::unique_ptr<mlir::ExecutionEngine> engine,
              std::vector<std::pair<std::string, Signature>> signatures);
  ~PyCpuModule();

  const std::vector<std::pair<std::string, Signature>> &signatures() const {
    return sigs;
  }
  const Signature &signature(const std::string &name) const;

  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::vector<std::pair<std::string, Signature>> sigs;
};

/// Registers moe passes and pipelines (and the upstream ones moe-opt
/// offers) once per process.
void registerPassesOnce();

/// Parses a textual pass pipeline (`a,b{opt=1}` or `builtin.module(...)`)
/// into `pm`, anchored on builtin.module; throws MlirError when invalid.
void parsePipelineInto(mlir::PassManager &pm, const std::string &pipeline);

/// Binds _CpuModule (Execution.cpp).
void bindExecution(nanobind::module_ &m);

/// Binds function_signatures, what moe_mlir.gpu's manifests are made of
/// (Signatures.cpp).
void bindSignatures(nanobind::module_ &m);

} // namespace moe_py

#endif // MOE_MLIR_PYTHON_MOEMLIRPYTHON_H
