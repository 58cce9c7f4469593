//===- Signatures.cpp - public function signatures for GPU manifests ------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// `_moe.function_signatures`: what moe_mlir.gpu writes into an artifact's
// manifest, read off the IR. For every public func.func with a body: its
// name, the facts about each argument and result type (kind, shape, element
// type, memref contiguity, what the GPU runtime cannot pass), the names the
// source text gave the arguments (when the module is parsed here), the role
// of each argument of a lone moe.ffn and whether the body is a single token
// op. Which of these the runtime supports is decided in gpu.py, next to the
// runtime's dtype table.
//
// One dict per function: {"name", "args": [type dict + "name" (as the text
// spells it, without '%'; None for a module not parsed here) + "role" (x,
// logits, w_up, w_down, bias, w_up_bias, w_down_bias, w_up_scale,
// w_down_scale or None)], "results": [type dict], "single_op":
// the name of the body's only op besides func.return or None, "token_op"}.
//
//===----------------------------------------------------------------------===//

#include "MoeMlirPython.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

namespace nb = nanobind;
using namespace mlir;

namespace moe_py {
namespace {

std::string printed(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

/// A memory space as the memref type prints it (`1`, not `1 : i64`).
std::string printedMemorySpace(Attribute space) {
  if (auto integer = dyn_cast<IntegerAttr>(space))
    return std::to_string(integer.getInt());
  std::string text;
  llvm::raw_string_ostream os(text);
  space.print(os);
  return text;
}

nb::object shapeOf(ArrayRef<int64_t> shape) {
  nb::list dims;
  for (int64_t d : shape) {
    if (ShapedType::isDynamic(d))
      dims.append(nb::none());
    else
      dims.append(d);
  }
  return nb::tuple(dims);
}

/// {"kind": "tensor" | "memref" | "scalar" | "other", "type": the printed
/// type, "dtype": element type name (the scalar's name; the printed type for
/// "other"), "shape": dims with None for dynamic ones (None when unranked or
/// not shaped), "contiguous": identity memref layout, "encoding": a tensor
/// encoding is set, "memory_space": the memref's non-default memory space
/// printed, or None}.
nb::dict describe(Type type) {
  nb::dict d;
  d["type"] = printed(type);
  d["shape"] = nb::none();
  d["contiguous"] = true;
  d["encoding"] = false;
  d["memory_space"] = nb::none();
  if (auto tensor = dyn_cast<TensorType>(type)) {
    d["kind"] = "tensor";
    d["dtype"] = elementTypeName(tensor.getElementType());
    if (auto ranked = dyn_cast<RankedTensorType>(type)) {
      d["shape"] = shapeOf(ranked.getShape());
      d["encoding"] = static_cast<bool>(ranked.getEncoding());
    }
    return d;
  }
  if (auto memref = dyn_cast<BaseMemRefType>(type)) {
    d["kind"] = "memref";
    d["dtype"] = elementTypeName(memref.getElementType());
    if (Attribute space = memref.getMemorySpace())
      d["memory_space"] = printedMemorySpace(space);
    if (auto ranked = dyn_cast<MemRefType>(type)) {
      d["shape"] = shapeOf(ranked.getShape());
      d["contiguous"] = ranked.getLayout().isIdentity();
    }
    return d;
  }
  if (isa<FloatType, IntegerType, IndexType>(type)) {
    d["kind"] = "scalar";
    d["dtype"] = elementTypeName(type);
    return d;
  }
  d["kind"] = "other";
  d["dtype"] = printed(type);
  return d;
}

/// The ops whose every dynamic dimension 0, of every operand and result, is
/// the token count T (their verifiers require it).
bool isTokenOp(Operation *op) {
  return isa<moe::FfnOp, moe::RouteOp, moe::TopKOp>(op);
}

nb::list describeFunctions(ModuleOp module, const AsmParserState *asmState,
                           llvm::StringRef source) {
  nb::list out;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    Block &entry = func.getBody().front();

    // Argument names as the source text spells them (`%x` -> "x").
    std::vector<nb::object> names(func.getNumArguments(), nb::none());
    if (asmState) {
      if (const AsmParserState::BlockDefinition *def =
              asmState->getBlockDef(&entry)) {
        for (auto [i, arg] : llvm::enumerate(def->arguments)) {
          const char *begin = arg.loc.Start.getPointer();
          const char *end = arg.loc.End.getPointer();
          if (i >= names.size() || !begin || end <= begin ||
              begin < source.begin() || end > source.end())
            continue;
          names[i] = nb::cast(llvm::StringRef(begin, end - begin)
                                  .drop_front(*begin == '%' ? 1 : 0)
                                  .str());
        }
      }
    }

    // The body without its func.return: a single op?
    Operation *single = nullptr;
    unsigned count = 0;
    func.getBody().walk([&](Operation *op) {
      if (isa<func::ReturnOp>(op))
        return;
      single = op;
      ++count;
    });
    if (count != 1)
      single = nullptr;

    // The roles of the arguments a lone moe.ffn takes, by operand position.
    std::vector<nb::object> roles(func.getNumArguments(), nb::none());
    if (auto ffn = dyn_cast_or_null<moe::FfnOp>(single)) {
      static const char *const kRoles[] = {
          "x",         "logits",      "w_up",       "w_down",      "bias",
          "w_up_bias", "w_down_bias", "w_up_scale", "w_down_scale"};
      Value operands[] = {
          ffn.getX(),         ffn.getLogits(),   ffn.getWUp(),
          ffn.getWDown(),     ffn.getBias(),     ffn.getWUpBias(),
          ffn.getWDownBias(), ffn.getWUpScale(), ffn.getWDownScale()};
      for (auto [role, operand] : llvm::zip_equal(kRoles, operands)) {
        auto arg = dyn_cast_or_null<BlockArgument>(operand);
        if (arg && arg.getOwner() == &entry)
          roles[arg.getArgNumber()] = nb::str(role);
      }
    }

    nb::list args;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      nb::dict d = describe(type);
      d["name"] = names[i];
      d["role"] = roles[i];
      args.append(d);
    }
    nb::list results;
    for (Type type : func.getResultTypes())
      results.append(describe(type));

    nb::dict f;
    f["name"] = func.getSymName().str();
    f["args"] = args;
    f["results"] = results;
    if (single)
      f["single_op"] = single->getName().getStringRef().str();
    else
      f["single_op"] = nb::none();
    f["token_op"] = single && isTokenOp(single);
    out.append(f);
  }
  return out;
}

} // namespace

void bindSignatures(nb::module_ &m) {
  m.def(
      "function_signatures",
      [](const PyModule &module) {
        return describeFunctions(*module.state->module, nullptr, {});
      },
      nb::arg("module"),
      "Signatures of the public func.func ops with a body of a module "
      "(argument names None).");
  m.def(
      "function_signatures",
      [](const std::string &text, PyMlirContext context,
         const std::string &sourceName) {
        MLIRContext *ctx = context.state->get();
        DiagnosticCollector diags(ctx);
        llvm::SourceMgr sourceMgr;
        sourceMgr.AddNewSourceBuffer(
            llvm::MemoryBuffer::getMemBuffer(text, sourceName), llvm::SMLoc());
        Block block;
        AsmParserState asmState;
        ParserConfig config(ctx);
        if (failed(parseAsmSourceFile(sourceMgr, &block, config, &asmState)))
          diags.fail("failed to parse MLIR module");
        OwningOpRef<ModuleOp> module =
            detail::constructContainerOpForParserIfNecessary<ModuleOp>(
                &block, ctx, FileLineColLoc::get(ctx, sourceName, 0, 0));
        if (!module)
          diags.fail("failed to parse MLIR module");
        return describeFunctions(*module, &asmState, text);
      },
      nb::arg("text"), nb::arg("context"), nb::arg("name"),
      "Parses `text` and returns the signatures of its public func.func ops "
      "with a body, with the argument names the text gives them.");
}

} // namespace moe_py
