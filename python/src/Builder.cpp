//===- Builder.cpp - typed builders of the moe ops ------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// FunctionBuilder: one func.func built op by op with OpBuilder and the
// ODS-generated builders of the moe ops. No IR is assembled from strings.
//
// Every op goes through createVerified(): the generated builder fills an
// OperationState, result types come from the op's type inference (or, for
// the ops whose result element type is a choice, from the arguments), the
// op is created and verified at once. An op that does not verify is erased
// again and its diagnostics become a BuildError pointing at the Python line
// that built it.
//
//===----------------------------------------------------------------------===//

#include "MoeMlirPython.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::moe;

namespace moe_py {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

[[noreturn]] static void buildError(const std::string &summary) {
  MlirBuildError error;
  error.summary = summary;
  throw error;
}

/// An enum attribute from its keyword, or a BuildError listing the choices.
template <typename AttrT, typename EnumT>
static AttrT enumAttr(MLIRContext *ctx, const std::string &value,
                      std::optional<EnumT> (*symbolize)(llvm::StringRef),
                      llvm::StringRef (*stringify)(EnumT), EnumT last,
                      const char *what) {
  if (std::optional<EnumT> e = symbolize(value))
    return AttrT::get(ctx, *e);
  std::string choices;
  for (uint32_t i = 0; i <= static_cast<uint32_t>(last); ++i) {
    if (i)
      choices += ", ";
    choices += stringify(static_cast<EnumT>(i)).str();
  }
  buildError("invalid " + std::string(what) + " '" + value +
             "' (expected one of " + choices + ")");
}

static ScoringFnAttr scoringAttr(MLIRContext *ctx, const std::string &v) {
  return enumAttr<ScoringFnAttr, ScoringFn>(ctx, v, symbolizeScoringFn,
                                            stringifyScoringFn,
                                            ScoringFn::sigmoid, "scoring");
}
static GroupScoreAttr groupScoreAttr(MLIRContext *ctx, const std::string &v) {
  return enumAttr<GroupScoreAttr, GroupScore>(
      ctx, v, symbolizeGroupScore, stringifyGroupScore, GroupScore::top2_sum,
      "group_score");
}
static ActivationAttr activationAttr(MLIRContext *ctx, const std::string &v) {
  return enumAttr<ActivationAttr, Activation>(
      ctx, v, symbolizeActivation, stringifyActivation, Activation::gelu_tanh,
      "activation");
}
static GluLayoutAttr layoutAttr(MLIRContext *ctx, const std::string &v) {
  return enumAttr<GluLayoutAttr, GluLayout>(ctx, v, symbolizeGluLayout,
                                            stringifyGluLayout,
                                            GluLayout::interleaved, "layout");
}

static WeightFormatAttr weightFormatAttr(MLIRContext *ctx,
                                         const std::string &v) {
  return enumAttr<WeightFormatAttr, WeightFormat>(
      ctx, v, symbolizeWeightFormat, stringifyWeightFormat,
      WeightFormat::mxfp4_hopper, "weight_format");
}
static ScaleFmtAttr scaleFmtAttr(MLIRContext *ctx, const std::string &v) {
  return enumAttr<ScaleFmtAttr, ScaleFmt>(ctx, v, symbolizeScaleFmt,
                                          stringifyScaleFmt, ScaleFmt::ue8m0,
                                          "scale_fmt");
}

static RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type element) {
  return RankedTensorType::get(shape, element);
}

/// Dimension `i` of a ranked tensor value, dynamic if it has none.
static int64_t dimOr(Value v, unsigned i) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() <= static_cast<int64_t>(i))
    return ShapedType::kDynamic;
  return t.getDimSize(i);
}

static Type elementOr(Value v, Type fallback) {
  if (auto t = dyn_cast<ShapedType>(v.getType()))
    return t.getElementType();
  return fallback;
}

static std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

/// Fills an OperationState with the generated builder `OpTy::build(b,
/// state, TypeRange{}, args...)`, gives it result types (inferred when
/// `Infer`, else `types`), creates it and verifies it. When inference fails
/// the op is created with the placeholder `types` so that the verifier can
/// name the operand that is wrong.
template <typename OpTy, bool Infer, typename... Args>
static Operation *createVerified(OpBuilder &b, Location loc,
                                 ArrayRef<Type> types, Args &&...args) {
  MLIRContext *ctx = b.getContext();
  DiagnosticCollector diags(ctx);
  OperationState state(loc, OpTy::getOperationName());
  TypeRange noTypes;
  OpTy::build(b, state, noTypes, std::forward<Args>(args)...);
  bool inferred = false;
  if constexpr (Infer) {
    SmallVector<Type> results;
    if (succeeded(OpTy::inferReturnTypes(ctx, state.location, state.operands,
                                         state.attributes.getDictionary(ctx),
                                         state.getRawProperties(),
                                         state.regions, results))) {
      state.addTypes(results);
      inferred = true;
    }
  }
  if (!inferred)
    state.addTypes(types);
  Operation *op = b.create(state);
  if (failed(mlir::verify(op))) {
    op->erase();
    diags.fail("invalid '" + OpTy::getOperationName().str() + "'",
               /*build=*/true);
  }
  if (Infer && !inferred) {
    // Verified with placeholder types: still not buildable.
    std::string operands;
    for (Value v : op->getOperands())
      operands += (operands.empty() ? "" : ", ") + typeStr(v.getType());
    op->erase();
    emitError(loc) << "cannot infer the result types of '"
                   << OpTy::getOperationName() << "' from operands ("
                   << operands << ")";
    diags.fail("invalid '" + OpTy::getOperationName().str() + "'",
               /*build=*/true);
  }
  return op;
}

//===----------------------------------------------------------------------===//
// PyValue
//===----------------------------------------------------------------------===//

PyValue::PyValue(std::shared_ptr<FuncState> owner, Value value)
    : owner(std::move(owner)), value(value) {
  if (auto described = describeType(value.getType()))
    info = *described;
  else
    info = TypeInfo{{}, typeStr(value.getType()), "other"};
}

//===----------------------------------------------------------------------===//
// PyFunctionBuilder
//===----------------------------------------------------------------------===//

PyFunctionBuilder::PyFunctionBuilder(
    const PyModule &module, const std::string &name,
    const std::vector<std::pair<std::vector<int64_t>, std::string>> &inputs,
    const std::string &visibility, const PyLoc &loc)
    : state(std::make_shared<FuncState>()) {
  state->module = module.state;
  state->name = name;
  MLIRContext *context = ctx();
  ModuleOp mod = *state->module->module;
  if (visibility != "public" && visibility != "private")
    buildError("invalid visibility '" + visibility +
               "' (expected public or private)");
  if (SymbolTable::lookupSymbolIn(mod, name))
    buildError("the module already has a symbol named '" + name + "'");

  SmallVector<Type> argTypes;
  for (const auto &[shape, dtype] : inputs) {
    Type element = parseElementType(context, dtype);
    SmallVector<int64_t> dims;
    for (int64_t d : shape) {
      // -1 (None in Python) is dynamic.
      if (d < -1)
        buildError("invalid dimension " + std::to_string(d) +
                   " (use None for a dynamic one)");
      dims.push_back(d == -1 ? ShapedType::kDynamic : d);
    }
    argTypes.push_back(tensorOf(dims, element));
  }

  OpBuilder b = OpBuilder::atBlockEnd(mod.getBody());
  Location l = location(loc);
  auto func = func::FuncOp::create(b, l, name,
                                   FunctionType::get(context, argTypes, {}));
  func.setVisibility(visibility == "public" ? SymbolTable::Visibility::Public
                                            : SymbolTable::Visibility::Private);
  Block *entry = func.addEntryBlock();
  (void)entry;
  state->func = func;
  state->module->openBuilders++;
}

Location PyFunctionBuilder::location(const PyLoc &loc) {
  const auto &[file, line, col] = loc;
  if (file.empty())
    return UnknownLoc::get(ctx());
  return FileLineColLoc::get(ctx(), file, std::max(line, 0), std::max(col, 0));
}

Value PyFunctionBuilder::use(const PyValue &value, const char *what) {
  if (!state->open)
    buildError("function '" + name() + "' is finished (ret() was called)");
  if (value.owner != state)
    buildError(std::string("'") + what +
               "' is a value of another function or builder");
  return value.value;
}

std::vector<PyValue> PyFunctionBuilder::wrap(Operation *op) {
  std::vector<PyValue> out;
  for (Value v : op->getResults())
    out.emplace_back(state, v);
  return out;
}

std::string PyFunctionBuilder::name() const { return state->name; }

std::vector<PyValue> PyFunctionBuilder::arguments() const {
  std::vector<PyValue> out;
  if (!state->open)
    return out;
  for (BlockArgument arg : state->func.getArguments())
    out.emplace_back(state, arg);
  return out;
}

void PyFunctionBuilder::ret(const PyLoc &loc,
                            const std::vector<PyValue> &values) {
  SmallVector<Value> results;
  for (const PyValue &v : values)
    results.push_back(use(v, "ret"));
  func::FuncOp func = state->func;
  OpBuilder b = OpBuilder::atBlockEnd(&func.getBody().front());
  func::ReturnOp::create(b, location(loc), results);
  func.setFunctionType(FunctionType::get(ctx(), func.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  state->open = false;
  state->module->openBuilders--;
  DiagnosticCollector diags(ctx());
  if (failed(mlir::verify(func))) {
    func.erase();
    diags.fail("function '" + name() + "' failed to verify", /*build=*/true);
  }
}

void PyFunctionBuilder::abandon() {
  if (!state || !state->open)
    return;
  state->func.erase();
  state->open = false;
  state->module->openBuilders--;
}

//===----------------------------------------------------------------------===//
// The moe ops
//===----------------------------------------------------------------------===//

std::vector<PyValue> PyFunctionBuilder::topk(const PyLoc &loc,
                                             const PyValue &input, int64_t k) {
  Value in = use(input, "input");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type fb[] = {tensorOf({ShapedType::kDynamic, k}, f32),
               tensorOf({ShapedType::kDynamic, k}, i32)};
  return wrap(createVerified<TopKOp, true>(b, location(loc), fb, in,
                                           b.getI64IntegerAttr(k)));
}

std::vector<PyValue> PyFunctionBuilder::route(
    const PyLoc &loc, const PyValue &logits, const std::optional<PyValue> &bias,
    int64_t k, const std::string &scoring, bool normalize, int64_t nGroup,
    int64_t topkGroup, const std::string &groupScore, double scaling,
    const std::string &weightsDtype) {
  Value lg = use(logits, "logits");
  Value bs = bias ? use(*bias, "bias") : Value();
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type w = parseElementType(ctx(), weightsDtype);
  int64_t t = dimOr(lg, 0);
  Type types[] = {tensorOf({t, k}, w), tensorOf({t, k}, b.getI32Type())};
  return wrap(createVerified<RouteOp, false>(
      b, location(loc), types, lg, bs, b.getI64IntegerAttr(k),
      scoringAttr(ctx(), scoring), b.getBoolAttr(normalize),
      b.getI64IntegerAttr(nGroup), b.getI64IntegerAttr(topkGroup),
      groupScoreAttr(ctx(), groupScore),
      b.getF32FloatAttr(static_cast<float>(scaling))));
}

PyValue PyFunctionBuilder::cumsum(const PyLoc &loc, const PyValue &indices,
                                  int64_t numExperts) {
  Value ids = use(indices, "indices");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type fb[] = {tensorOf({ShapedType::kDynamic}, b.getI32Type())};
  return wrap(createVerified<CumsumOp, true>(
      b, location(loc), fb, ids, b.getI64IntegerAttr(numExperts)))[0];
}

std::vector<PyValue> PyFunctionBuilder::getIndices(const PyLoc &loc,
                                                   const PyValue &cumsum,
                                                   const PyValue &indices) {
  Value cs = use(cumsum, "cumsum");
  Value ids = use(indices, "indices");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type v = tensorOf({ShapedType::kDynamic}, b.getI32Type());
  Type fb[] = {v, v};
  return wrap(
      createVerified<GetIndicesOp, true>(b, location(loc), fb, cs, ids));
}

PyValue PyFunctionBuilder::getIndptr(const PyLoc &loc, const PyValue &cumsum,
                                     int64_t numExperts, bool inclusive,
                                     const std::string &dtype) {
  Value cs = use(cumsum, "cumsum");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type r = parseElementType(ctx(), dtype);
  int64_t n =
      numExperts >= 0 ? numExperts + (inclusive ? 0 : 1) : ShapedType::kDynamic;
  Type types[] = {tensorOf({n}, r)};
  return wrap(createVerified<GetIndptrOp, false>(
      b, location(loc), types, cs, b.getI64IntegerAttr(numExperts),
      b.getBoolAttr(inclusive)))[0];
}

PyValue PyFunctionBuilder::gather(const PyLoc &loc, const PyValue &input,
                                  const PyValue &indices) {
  Value in = use(input, "input");
  Value ids = use(indices, "indices");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type fb[] = {
      tensorOf({ShapedType::kDynamic, ShapedType::kDynamic}, b.getF32Type())};
  return wrap(createVerified<GatherOp, true>(b, location(loc), fb, in, ids))[0];
}

PyValue PyFunctionBuilder::groupedMatmul(
    const PyLoc &loc, const PyValue &lhs, const PyValue &rhs,
    const PyValue &offsets, const std::optional<PyValue> &bias,
    bool transposeRhs, const std::optional<std::string> &outDtype,
    const std::string &weightFormat, const std::string &scaleFmt,
    const std::optional<PyValue> &rhsScale) {
  Value l = use(lhs, "lhs");
  Value r = use(rhs, "rhs");
  Value off = use(offsets, "offsets");
  Value bs = bias ? use(*bias, "bias") : Value();
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type o = outDtype ? parseElementType(ctx(), *outDtype)
                    : elementOr(l, b.getF32Type());
  Type types[] = {tensorOf({dimOr(l, 0), dimOr(r, transposeRhs ? 1 : 2)}, o)};
  SmallVector<Value> optional;
  if (bs)
    optional.push_back(bs);
  if (rhsScale)
    optional.push_back(use(*rhsScale, "rhs_scale"));
  return wrap(createVerified<GroupedMatmulOp, false>(
      b, location(loc), types, l, r, off, ValueRange(optional),
      b.getBoolAttr(transposeRhs), weightFormatAttr(ctx(), weightFormat),
      scaleFmtAttr(ctx(), scaleFmt)))[0];
}

PyValue PyFunctionBuilder::glu(const PyLoc &loc, const PyValue &input,
                               const std::string &activation,
                               const std::string &layout, double alpha,
                               std::optional<double> limit, double upBias) {
  Value in = use(input, "input");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type fb[] = {
      tensorOf({ShapedType::kDynamic, ShapedType::kDynamic}, b.getF32Type())};
  FloatAttr limitAttr =
      limit ? b.getF32FloatAttr(static_cast<float>(*limit)) : FloatAttr();
  return wrap(createVerified<GluOp, true>(
      b, location(loc), fb, in, activationAttr(ctx(), activation),
      layoutAttr(ctx(), layout), b.getF32FloatAttr(static_cast<float>(alpha)),
      limitAttr, b.getF32FloatAttr(static_cast<float>(upBias))))[0];
}

PyValue PyFunctionBuilder::scatter(const PyLoc &loc, const PyValue &input,
                                   const PyValue &indices) {
  Value in = use(input, "input");
  Value ids = use(indices, "indices");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type fb[] = {
      tensorOf({ShapedType::kDynamic, ShapedType::kDynamic}, b.getF32Type())};
  return wrap(
      createVerified<ScatterOp, true>(b, location(loc), fb, in, ids))[0];
}

PyValue PyFunctionBuilder::combine(const PyLoc &loc, const PyValue &input,
                                   const std::optional<PyValue> &weights) {
  Value in = use(input, "input");
  Value w = weights ? use(*weights, "weights") : Value();
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type fb[] = {
      tensorOf({ShapedType::kDynamic, ShapedType::kDynamic}, b.getF32Type())};
  return wrap(createVerified<CombineOp, true>(b, location(loc), fb, in, w))[0];
}

std::vector<PyValue>
PyFunctionBuilder::indicesToMultihot(const PyLoc &loc, const PyValue &indices,
                                     const PyValue &probs, int64_t numExperts) {
  Value ids = use(indices, "indices");
  Value p = use(probs, "probs");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  int64_t dyn = ShapedType::kDynamic;
  Type fb[] = {tensorOf({dyn, dyn}, b.getI1Type()),
               tensorOf({dyn, dyn}, b.getF32Type()),
               tensorOf({dyn, dyn}, b.getI32Type())};
  return wrap(createVerified<IndicesToMultihotOp, true>(
      b, location(loc), fb, ids, p, b.getI64IntegerAttr(numExperts)));
}

PyValue PyFunctionBuilder::multihotToIndices(const PyLoc &loc,
                                             const PyValue &probsMultihot,
                                             const PyValue &positionMap,
                                             int64_t k) {
  Value pm = use(probsMultihot, "probs_multihot");
  Value pos = use(positionMap, "position_map");
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Type fb[] = {
      tensorOf({ShapedType::kDynamic, ShapedType::kDynamic}, b.getF32Type())};
  return wrap(createVerified<MultihotToIndicesOp, true>(
      b, location(loc), fb, pm, pos, b.getI64IntegerAttr(k)))[0];
}

/// A type carried as a value (the op of ffnFamily's `create`).
template <typename T> struct OpTag {
  using type = T;
};

std::vector<PyValue> PyFunctionBuilder::ffnFamily(
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
    const std::optional<PyValue> &wDownScale, const std::vector<PyValue> &saved,
    const std::string &weightGrads) {
  if (op != "ffn" && op != "ffn_train" && op != "ffn_grad")
    buildError("ffn_family: op must be ffn, ffn_train or ffn_grad, got '" + op +
               "'");
  bool grad = op == "ffn_grad";
  if (grad != dy.has_value())
    buildError(grad ? "ffn_grad needs dy" : op + " takes no dy");
  if (weightGrads != "f32" && weightGrads != "weights")
    buildError("weight_grads must be 'f32' or 'weights', got '" + weightGrads +
               "'");
  if (!saved.empty() && (!grad || saved.size() != 3))
    buildError("saved tensors are (h, weights, indices), for ffn_grad only");
  Value dyv = grad ? use(*dy, "dy") : Value();
  Value xv = use(x, "x");
  Value lg = use(logits, "logits");
  Value up = use(wUp, "w_up");
  Value down = use(wDown, "w_down");
  Value bs = bias ? use(*bias, "bias") : Value();
  Value upBs = wUpBias ? use(*wUpBias, "w_up_bias") : Value();
  Value downBs = wDownBias ? use(*wDownBias, "w_down_bias") : Value();
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Location l = location(loc);
  FloatAttr limitAttr =
      limit ? b.getF32FloatAttr(static_cast<float>(*limit)) : FloatAttr();
  // expert_bias follows the operands; the verifier reports one expert bias
  // without the other (the operand count).
  bool expertBias = upBs || downBs;
  SmallVector<Value> optional;
  for (Value v : {bs, upBs, downBs})
    if (v)
      optional.push_back(v);
  // The weight scales come last (the op's getWUpScale / getWDownScale); the
  // verifier reports a missing one against weight_format.
  if (wUpScale)
    optional.push_back(use(*wUpScale, "w_up_scale"));
  if (wDownScale)
    optional.push_back(use(*wDownScale, "w_down_scale"));
  // moe.ffn_grad's saved (h, weights, indices) follow everything else.
  const char *savedNames[] = {"h", "weights", "indices"};
  for (auto [i, v] : llvm::enumerate(saved))
    optional.push_back(use(v, savedNames[i]));
  auto attrs = std::make_tuple(
      b.getI64IntegerAttr(k), scoringAttr(ctx(), scoring),
      b.getBoolAttr(normalize), b.getI64IntegerAttr(nGroup),
      b.getI64IntegerAttr(topkGroup), groupScoreAttr(ctx(), groupScore),
      b.getF32FloatAttr(static_cast<float>(scaling)),
      activationAttr(ctx(), activation), layoutAttr(ctx(), layout),
      b.getF32FloatAttr(static_cast<float>(alpha)), limitAttr,
      b.getF32FloatAttr(static_cast<float>(upBias)),
      b.getBoolAttr(transposeWeights), b.getBoolAttr(expertBias),
      weightFormatAttr(ctx(), weightFormat), scaleFmtAttr(ctx(), scaleFmt));
  auto create = [&](auto tag, ArrayRef<Type> types, auto... leading) {
    using OpTy = typename decltype(tag)::type;
    constexpr bool infer = !std::is_same_v<OpTy, FfnGradOp>;
    return std::apply(
        [&](auto... a) {
          return createVerified<OpTy, infer>(b, l, types, leading..., lg, up,
                                             down, ValueRange(optional), a...);
        },
        attrs);
  };
  Type f32 = b.getF32Type();
  Type fb[] = {tensorOf({ShapedType::kDynamic, ShapedType::kDynamic}, f32)};
  if (op == "ffn")
    return wrap(create(OpTag<FfnOp>{}, fb, xv));
  if (op == "ffn_train")
    return wrap(create(OpTag<FfnTrainOp>{}, fb, xv));
  // moe.ffn_grad's results: dx and dlogits of x's and the logits' types, the
  // weight gradients of the weights' shapes (f32, or with weight_grads =
  // "weights" the weights' types), the expert-bias gradients f32.
  auto f32Like = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t ? Type(RankedTensorType::get(t.getShape(), f32)) : v.getType();
  };
  auto dwLike = [&](Value v) {
    return weightGrads == "weights" ? v.getType() : f32Like(v);
  };
  SmallVector<Type> types = {xv.getType(), lg.getType(), dwLike(up),
                             dwLike(down)};
  if (expertBias && upBs && downBs)
    types.append({f32Like(upBs), f32Like(downBs)});
  return wrap(create(OpTag<FfnGradOp>{}, types, dyv, xv));
}

PyValue PyFunctionBuilder::expandSlots(const PyLoc &loc, const PyValue &input,
                                       int64_t k) {
  Value in = use(input, "input");
  auto type = dyn_cast<RankedTensorType>(in.getType());
  if (!type || type.getRank() != 2)
    buildError("expand_slots expects an M x H tensor, got " +
               typeStr(in.getType()));
  if (k < 1)
    buildError("expand_slots expects k >= 1, got " + std::to_string(k));
  int64_t m = type.getDimSize(0), h = type.getDimSize(1);
  if (!ShapedType::isDynamic(m) && m % k != 0)
    buildError("expand_slots: M = " + std::to_string(m) +
               " is not a multiple of k = " + std::to_string(k));
  OpBuilder b = OpBuilder::atBlockEnd(&state->func.getBody().front());
  Location l = location(loc);
  DiagnosticCollector diags(ctx());
  int64_t t = ShapedType::isDynamic(m) ? m : m / k;
  OpFoldResult rows = b.getIndexAttr(t);
  if (ShapedType::isDynamic(m)) {
    Value dim = tensor::DimOp::create(b, l, in, 0);
    Value kv = arith::ConstantIndexOp::create(b, l, k);
    rows = arith::DivUIOp::create(b, l, dim, kv).getResult();
  }
  SmallVector<OpFoldResult> outputShape = {
      rows, b.getIndexAttr(k),
      ShapedType::isDynamic(h)
          ? OpFoldResult(tensor::DimOp::create(b, l, in, 1).getResult())
          : OpFoldResult(b.getIndexAttr(h))};
  auto op = tensor::ExpandShapeOp::create(
      b, l, tensorOf({t, k, h}, type.getElementType()), in,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}}, outputShape);
  if (failed(mlir::verify(op))) {
    op->erase();
    diags.fail("invalid 'tensor.expand_shape'", /*build=*/true);
  }
  return PyValue(state, op.getResult());
}

} // namespace moe_py
