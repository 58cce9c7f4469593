//===- MoeEmitShapeChecks.cpp - shape checks at function entry ------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Turns the `moe.shape_checks` records of --moe-shape-checks into code at the
// entry of the (bufferized) function: a failed check calls the report
// function and returns before the body runs (report mode), or prints the
// message to stderr and aborts (abort mode).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#define DEBUG_TYPE "moe-emit-shape-checks"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEEMITSHAPECHECKSPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// One record of `moe.shape_checks`.
struct Check {
  std::string kind;
  int64_t lhs[2] = {0, 0};
  std::optional<std::array<int64_t, 2>> rhs;
  int64_t num = 1, den = 1, value = 0;
  std::string message;
  /// Names a result: checked only when the results are out-parameters.
  bool output = false;
};

FailureOr<SmallVector<Check>> parseChecks(func::FuncOp func, Attribute attr) {
  auto fail = [&](const Twine &why) -> FailureOr<SmallVector<Check>> {
    func.emitError() << "invalid 'moe.shape_checks': " << why;
    return failure();
  };
  auto list = dyn_cast<ArrayAttr>(attr);
  if (!list)
    return fail("expected an array of dictionaries");
  SmallVector<Check> checks;
  for (Attribute a : list) {
    auto dict = dyn_cast<DictionaryAttr>(a);
    if (!dict)
      return fail("expected an array of dictionaries");
    Check c;
    auto kind = dict.getAs<StringAttr>("kind");
    auto message = dict.getAs<StringAttr>("message");
    auto lhs = dict.getAs<DenseI64ArrayAttr>("lhs");
    auto rhs = dict.getAs<DenseI64ArrayAttr>("rhs");
    if (!kind || !message || !lhs || lhs.size() != 2 ||
        (rhs && rhs.size() != 2))
      return fail("each record needs 'kind', 'message' and 'lhs' (and 'rhs' "
                  "as [argument, dimension])");
    c.kind = kind.str();
    c.output = dict.contains("output");
    c.message = message.str();
    c.lhs[0] = lhs[0];
    c.lhs[1] = lhs[1];
    if (rhs)
      c.rhs = std::array<int64_t, 2>{rhs[0], rhs[1]};
    for (auto [name, slot] :
         {std::make_pair("num", &c.num), std::make_pair("den", &c.den),
          std::make_pair("value", &c.value)}) {
      if (Attribute v = dict.get(name)) {
        auto i = dyn_cast<IntegerAttr>(v);
        if (!i)
          return fail(Twine("'") + name + "' must be an integer");
        *slot = i.getInt();
      }
    }
    bool known = c.kind == "nonneg" || c.kind == "const" || c.kind == "max" ||
                 c.kind == "eq" || c.kind == "multiple";
    if (!known)
      return fail("unknown kind '" + c.kind + "'");
    if (c.kind == "eq" && (!c.rhs || c.num < 1 || c.den < 1))
      return fail("an 'eq' record needs 'rhs' and positive 'num' / 'den'");
    if (c.kind == "multiple" && !c.rhs && c.value < 1)
      return fail("a 'multiple' record needs 'rhs' or a positive 'value'");
    // The message becomes a printf format with the sizes in this order.
    StringRef m = c.message;
    size_t first = m.find("{0}"), second = m.find("{1}");
    if ((first != StringRef::npos &&
         m.find("{0}", first + 1) != StringRef::npos) ||
        (second != StringRef::npos &&
         m.find("{1}", second + 1) != StringRef::npos) ||
        (second != StringRef::npos &&
         (first == StringRef::npos || second < first)))
      return fail("a message may hold '{0}' and then '{1}', each once");
    checks.push_back(std::move(c));
  }
  return checks;
}

/// A record's message as a printf format for the two sizes: `{0}` / `{1}`
/// -> `%lld`, a literal `%` -> `%%`.
std::string printfFormat(StringRef message) {
  std::string out;
  for (size_t i = 0; i < message.size(); ++i) {
    if (message.substr(i).starts_with("{0}") ||
        message.substr(i).starts_with("{1}")) {
      out += "%lld";
      i += 2;
    } else {
      out += message[i];
      if (message[i] == '%')
        out += '%';
    }
  }
  return out;
}

class Emitter {
public:
  Emitter(func::FuncOp func, bool report, StringRef reportFunction)
      : func(func), report(report), reportFunction(reportFunction) {}

  LogicalResult run(ArrayRef<Check> checks);

private:
  /// Size of dimension `dim` of argument `arg` as i64, or failure.
  FailureOr<Value> size(OpBuilder &b, int64_t arg, int64_t dim);
  /// The i1 that is true when `c` holds; `lhs` / `rhs` the reported sizes.
  FailureOr<Value> condition(OpBuilder &b, const Check &c, Value &lhs,
                             Value &rhs);
  LogicalResult emitFailure(OpBuilder &b, const Check &c, unsigned index,
                            Value lhs, Value rhs);
  FailureOr<func::FuncOp> reportDeclaration();

  func::FuncOp func;
  bool report;
  std::string reportFunction;
};

FailureOr<Value> Emitter::size(OpBuilder &b, int64_t arg, int64_t dim) {
  Location loc = func.getLoc();
  if (arg < 0 || arg >= static_cast<int64_t>(func.getNumArguments()))
    return func.emitError()
           << "'moe.shape_checks' names argument " << arg
           << " of a function with " << func.getNumArguments() << " arguments";
  Value v = func.getArgument(arg);
  auto type = dyn_cast<MemRefType>(v.getType());
  if (!type)
    return func.emitError()
           << "'moe.shape_checks' names argument " << arg << " of type "
           << v.getType()
           << ", not a ranked memref (run --moe-emit-shape-checks after "
              "bufferization)";
  if (dim < 0 || dim >= type.getRank())
    return func.emitError() << "'moe.shape_checks' names dimension " << dim
                            << " of argument " << arg << " (" << type << ")";
  Value index =
      type.isDynamicDim(dim)
          ? memref::DimOp::create(b, loc, v, dim).getResult()
          : arith::ConstantIndexOp::create(b, loc, type.getDimSize(dim))
                .getResult();
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index).getResult();
}

FailureOr<Value> Emitter::condition(OpBuilder &b, const Check &c, Value &lhs,
                                    Value &rhs) {
  Location loc = func.getLoc();
  FailureOr<Value> a = size(b, c.lhs[0], c.lhs[1]);
  if (failed(a))
    return failure();
  lhs = *a;
  auto i64 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v).getResult();
  };
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y).getResult();
  };
  auto both = [&](Value x, Value y) {
    return arith::AndIOp::create(b, loc, x, y).getResult();
  };
  using P = arith::CmpIPredicate;
  if (c.kind == "nonneg") {
    rhs = i64(0);
    return cmp(P::sge, lhs, rhs);
  }
  if (c.kind == "const" || c.kind == "max") {
    rhs = i64(c.value);
    return cmp(c.kind == "const" ? P::eq : P::sle, lhs, rhs);
  }
  if (c.kind == "multiple" && !c.rhs) {
    rhs = i64(c.value);
    Value rem = arith::RemSIOp::create(b, loc, lhs, rhs);
    return cmp(P::eq, rem, i64(0));
  }
  FailureOr<Value> other = size(b, (*c.rhs)[0], (*c.rhs)[1]);
  if (failed(other))
    return failure();
  rhs = *other;
  if (c.kind == "multiple") {
    // rhs == 0 ? lhs == 0 : lhs % rhs == 0 (no division by zero)
    Value zero = i64(0);
    Value rhsZero = cmp(P::eq, rhs, zero);
    Value divisor = arith::SelectOp::create(b, loc, rhsZero, i64(1), rhs);
    Value rem = arith::RemSIOp::create(b, loc, lhs, divisor);
    return arith::SelectOp::create(b, loc, rhsZero, cmp(P::eq, lhs, zero),
                                   cmp(P::eq, rem, zero))
        .getResult();
  }
  // eq: lhs * den == rhs * num without overflow (num, den coprime):
  // num | lhs, den | rhs and lhs / num == rhs / den.
  if (c.num == 1 && c.den == 1)
    return cmp(P::eq, lhs, rhs);
  Value num = i64(c.num), den = i64(c.den), zero = i64(0);
  Value ok = both(cmp(P::eq, arith::RemSIOp::create(b, loc, lhs, num), zero),
                  cmp(P::eq, arith::RemSIOp::create(b, loc, rhs, den), zero));
  return both(ok, cmp(P::eq, arith::DivSIOp::create(b, loc, lhs, num),
                      arith::DivSIOp::create(b, loc, rhs, den)));
}

FailureOr<func::FuncOp> Emitter::reportDeclaration() {
  auto module = func->getParentOfType<ModuleOp>();
  MLIRContext *ctx = func.getContext();
  auto type =
      FunctionType::get(ctx,
                        {LLVM::LLVMPointerType::get(ctx),
                         IntegerType::get(ctx, 64), IntegerType::get(ctx, 64)},
                        {});
  Operation *existing = SymbolTable::lookupSymbolIn(module, reportFunction);
  if (existing) {
    auto f = dyn_cast<func::FuncOp>(existing);
    if (!f || f.getFunctionType() != type)
      return func.emitError()
             << "'" << reportFunction
             << "' (the shape-check report function) is already defined with "
                "another type; it must be (!llvm.ptr, i64, i64) -> ()";
    return f;
  }
  OpBuilder b(module.getBodyRegion());
  auto f = func::FuncOp::create(b, module.getLoc(), reportFunction, type);
  f.setPrivate();
  return f;
}

/// The external function `name` of LLVM type `type`, declared when missing.
static FailureOr<LLVM::LLVMFuncOp>
libcFunction(func::FuncOp func, StringRef name, LLVM::LLVMFunctionType type) {
  auto module = func->getParentOfType<ModuleOp>();
  Operation *existing = SymbolTable::lookupSymbolIn(module, name);
  if (existing) {
    auto f = dyn_cast<LLVM::LLVMFuncOp>(existing);
    if (!f || f.getFunctionType() != type)
      return func.emitError() << "'" << name
                              << "' is already defined with another type; "
                                 "the shape checks call the C library's";
    return f;
  }
  OpBuilder b(module.getBodyRegion());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
}

LogicalResult Emitter::emitFailure(OpBuilder &b, const Check &c, unsigned index,
                                   Value lhs, Value rhs) {
  Location loc = func.getLoc();
  MLIRContext *ctx = func.getContext();
  auto module = func->getParentOfType<ModuleOp>();
  std::string base =
      ("__moe_shape_check_" + func.getSymName() + "_" + Twine(index)).str();
  std::string name = base;
  for (int n = 0; SymbolTable::lookupSymbolIn(module, name); ++n)
    name = base + "_" + std::to_string(n);
  // Both modes pass the message as a printf format of the two sizes.
  std::string text = printfFormat(c.message) + (report ? "" : "\n");
  text.push_back('\0');
  if (report) {
    FailureOr<func::FuncOp> callee = reportDeclaration();
    if (failed(callee))
      return failure();
    Value message =
        LLVM::createGlobalString(loc, b, name, text, LLVM::Linkage::Internal);
    func::CallOp::create(b, loc, *callee, ValueRange{message, lhs, rhs});
  } else {
    // dprintf(2, message, lhs, rhs); abort(): on stderr, which an abort
    // does not lose (unlike buffered stdout).
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i32 = IntegerType::get(ctx, 32);
    FailureOr<LLVM::LLVMFuncOp> dprintf = libcFunction(
        func, "dprintf",
        LLVM::LLVMFunctionType::get(i32, {i32, ptr}, /*isVarArg=*/true));
    FailureOr<LLVM::LLVMFuncOp> abortFn = libcFunction(
        func, "abort",
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {}));
    if (failed(dprintf) || failed(abortFn))
      return failure();
    Value format =
        LLVM::createGlobalString(loc, b, name, text, LLVM::Linkage::Internal);
    Value fd = arith::ConstantIntOp::create(b, loc, i32, 2);
    LLVM::CallOp::create(b, loc, *dprintf, ValueRange{fd, format, lhs, rhs});
    LLVM::CallOp::create(b, loc, *abortFn, ValueRange{});
  }
  // Returned from (report mode) or never reached (abort mode).
  SmallVector<Value> results;
  for (Type t : func.getResultTypes()) {
    if (auto memref = dyn_cast<MemRefType>(t)) {
      if (!memref.getLayout().isIdentity())
        return func.emitError()
               << "cannot return an empty buffer of type " << t
               << " from a failed shape check (identity layouts only)";
      SmallVector<Value> dynamicSizes(
          memref.getNumDynamicDims(),
          arith::ConstantIndexOp::create(b, loc, 0).getResult());
      results.push_back(memref::AllocOp::create(b, loc, memref, dynamicSizes));
      continue;
    }
    if (isa<IntegerType, IndexType, FloatType>(t)) {
      results.push_back(
          arith::ConstantOp::create(b, loc, t, b.getZeroAttr(t)).getResult());
      continue;
    }
    return func.emitError() << "cannot return a value of type " << t
                            << " from a failed shape check";
  }
  func::ReturnOp::create(b, loc, results);
  return success();
}

LogicalResult Emitter::run(ArrayRef<Check> checks) {
  Region &body = func.getBody();
  Block *entry = &body.front();
  Location loc = func.getLoc();
  // entry: check 0 -> check 1 -> ... -> the old body; each failure returns.
  Block *rest = entry->splitBlock(entry->begin());
  OpBuilder b = OpBuilder::atBlockEnd(entry);
  for (auto [i, c] : llvm::enumerate(checks)) {
    Value lhs, rhs;
    FailureOr<Value> ok = condition(b, c, lhs, rhs);
    if (failed(ok))
      return failure();
    Block *current = b.getInsertionBlock();
    Block *fail = b.createBlock(&body, body.end());
    if (failed(emitFailure(b, c, i, lhs, rhs)))
      return failure();
    Block *next = i + 1 == checks.size() ? rest : b.createBlock(rest);
    b.setInsertionPointToEnd(current);
    cf::CondBranchOp::create(b, loc, *ok, next, fail);
    b.setInsertionPointToEnd(next == rest ? current : next);
    if (next == rest)
      break;
  }
  return success();
}

struct MoeEmitShapeChecksPass
    : mlir::moe::impl::MoeEmitShapeChecksPassBase<MoeEmitShapeChecksPass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "report" && mode != "abort") {
      getOperation().emitError()
          << "moe-emit-shape-checks: mode must be report or abort, got '"
          << mode << "'";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> funcs(getOperation().getOps<func::FuncOp>());
    for (func::FuncOp func : funcs) {
      Attribute attr = func->getAttr("moe.shape_checks");
      if (!attr)
        continue;
      func->removeAttr("moe.shape_checks");
      if (func.isExternal())
        continue;
      FailureOr<SmallVector<Check>> checks = parseChecks(func, attr);
      if (failed(checks))
        return signalPassFailure();
      // Records of results apply when they became out-parameters.
      int64_t arity = func.getNumArguments();
      llvm::erase_if(*checks, [&](const Check &c) {
        return c.output &&
               (c.lhs[0] >= arity || (c.rhs && (*c.rhs)[0] >= arity));
      });
      if (checks->empty())
        continue;
      Emitter emitter(func, mode == "report", reportFunction);
      if (failed(emitter.run(*checks)))
        return signalPassFailure();
    }
  }
};

} // namespace
