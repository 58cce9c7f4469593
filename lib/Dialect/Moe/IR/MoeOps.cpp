//===- MoeOps.cpp - moe dialect operations --------------------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Verifiers, result type inference and custom directives of the moe ops.
//
// Verification order: ODS checks ranks and element-type families first; the
// InferTypeOpInterface check only compares result counts and ranks (see
// isCompatibleReturnTypes); verify() then checks every static rule of
// the op reference (docs/Contract.md) and, last, that each result type is
// exactly the inferred one. That order makes every broken rule report itself
// instead of a type mismatch it causes.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>
#include <type_traits>

using namespace mlir;
using namespace mlir::moe;

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// Parses an enum attribute written as its bare keyword (`softmax`).
template <typename AttrT>
static ParseResult parseEnumKeyword(OpAsmParser &parser, AttrT &attr) {
  using EnumT = decltype(std::declval<AttrT>().getValue());
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword);
  if (!value)
    return parser.emitError(loc) << "unknown keyword '" << keyword << "'";
  attr = AttrT::get(parser.getContext(), *value);
  return success();
}

/// Prints an enum attribute as its bare keyword.
template <typename AttrT>
static void printEnumKeyword(OpAsmPrinter &printer, Operation *, AttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

/// `keyword(%v : type)`, when the keyword is there.
static ParseResult
parseOptionalOperand(OpAsmParser &parser, StringRef keyword,
                     SmallVectorImpl<OpAsmParser::UnresolvedOperand> &operands,
                     SmallVectorImpl<Type> &types) {
  if (failed(parser.parseOptionalKeyword(keyword)))
    return success();
  OpAsmParser::UnresolvedOperand operand;
  Type type;
  if (parser.parseLParen() || parser.parseOperand(operand) ||
      parser.parseColonType(type) || parser.parseRParen())
    return failure();
  operands.push_back(operand);
  types.push_back(type);
  return success();
}

/// `keyword(%a, %b : type, type)`, when the keyword is there.
static ParseResult parseOptionalOperandPair(
    OpAsmParser &parser, StringRef keyword,
    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &operands,
    SmallVectorImpl<Type> &types) {
  if (failed(parser.parseOptionalKeyword(keyword)))
    return success();
  OpAsmParser::UnresolvedOperand a, b;
  Type aType, bType;
  if (parser.parseLParen() || parser.parseOperand(a) || parser.parseComma() ||
      parser.parseOperand(b) || parser.parseColon() ||
      parser.parseType(aType) || parser.parseComma() ||
      parser.parseType(bType) || parser.parseRParen())
    return failure();
  operands.append({a, b});
  types.append({aType, bType});
  return success();
}

/// moe.grouped_matmul's optional operands: `bias(%b : type)` and
/// `scales(%s : type)`, each optional, in that order.
static ParseResult parseGemmOptionalOperands(
    OpAsmParser &parser,
    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &operands,
    SmallVectorImpl<Type> &types) {
  if (failed(parseOptionalOperand(parser, "bias", operands, types)))
    return failure();
  return parseOptionalOperand(parser, "scales", operands, types);
}

static void printGemmOptionalOperands(OpAsmPrinter &printer, GroupedMatmulOp op,
                                      OperandRange, TypeRange) {
  // The verifier keeps the operand count and weight_format in step (an op
  // that fails it prints in the generic form).
  for (auto [keyword, value] : {std::make_pair("bias", op.getBias()),
                                std::make_pair("scales", op.getRhsScale())})
    if (value)
      printer << keyword << "(" << value << " : " << value.getType() << ") ";
}

/// moe.ffn's optional operands: `bias(%b : type)`,
/// `expert_bias(%up, %down : type, type)` and
/// `scales(%up_scale, %down_scale : type, type)`, each optional, in that
/// order; the second sets `expert_bias`.
static ParseResult parseFfnOptionalOperands(
    OpAsmParser &parser,
    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &operands,
    SmallVectorImpl<Type> &types, BoolAttr &expertBias) {
  if (failed(parseOptionalOperand(parser, "bias", operands, types)))
    return failure();
  if (failed(parser.parseOptionalKeyword("expert_bias")))
    return parseOptionalOperandPair(parser, "scales", operands, types);
  OpAsmParser::UnresolvedOperand up, down;
  Type upType, downType;
  if (parser.parseLParen() || parser.parseOperand(up) || parser.parseComma() ||
      parser.parseOperand(down) || parser.parseColon() ||
      parser.parseType(upType) || parser.parseComma() ||
      parser.parseType(downType) || parser.parseRParen())
    return failure();
  operands.append({up, down});
  types.append({upType, downType});
  expertBias = BoolAttr::get(parser.getContext(), true);
  return parseOptionalOperandPair(parser, "scales", operands, types);
}

/// moe.ffn_grad's: moe.ffn's, then `saved(%h, %weights, %indices : type,
/// type, type)` (moe.ffn_train's saved results), optional.
static ParseResult parseFfnGradOptionalOperands(
    OpAsmParser &parser,
    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &operands,
    SmallVectorImpl<Type> &types, BoolAttr &expertBias) {
  if (failed(parseFfnOptionalOperands(parser, operands, types, expertBias)))
    return failure();
  if (failed(parser.parseOptionalKeyword("saved")))
    return success();
  OpAsmParser::UnresolvedOperand saved[3];
  Type savedTypes[3];
  if (parser.parseLParen() || parser.parseOperand(saved[0]) ||
      parser.parseComma() || parser.parseOperand(saved[1]) ||
      parser.parseComma() || parser.parseOperand(saved[2]) ||
      parser.parseColon() || parser.parseType(savedTypes[0]) ||
      parser.parseComma() || parser.parseType(savedTypes[1]) ||
      parser.parseComma() || parser.parseType(savedTypes[2]) ||
      parser.parseRParen())
    return failure();
  operands.append(std::begin(saved), std::end(saved));
  types.append(std::begin(savedTypes), std::end(savedTypes));
  return success();
}

/// moe.ffn's, moe.ffn_train's and moe.ffn_grad's (the latter two have no
/// scales; moe.ffn_grad's saved group has its own printer below).
template <typename OpTy>
static void printFfnOptionalOperands(OpAsmPrinter &printer, OpTy op,
                                     OperandRange, TypeRange, BoolAttr) {
  // The verifier keeps the operand count and expert_bias in step (an op
  // that fails it prints in the generic form).
  if (Value bias = op.getBias())
    printer << "bias(" << bias << " : " << bias.getType() << ") ";
  Value up = op.getWUpBias(), down = op.getWDownBias();
  if (up && down)
    printer << "expert_bias(" << up << ", " << down << " : " << up.getType()
            << ", " << down.getType() << ") ";
  Value upScale = op.getWUpScale(), downScale = op.getWDownScale();
  if (upScale && downScale)
    printer << "scales(" << upScale << ", " << downScale << " : "
            << upScale.getType() << ", " << downScale.getType() << ") ";
}

static void printFfnGradOptionalOperands(OpAsmPrinter &printer, FfnGradOp op,
                                         OperandRange operands, TypeRange types,
                                         BoolAttr expertBias) {
  printFfnOptionalOperands(printer, op, operands, types, expertBias);
  if (!op.hasSaved())
    return;
  Value h = op.getSavedH(), w = op.getSavedWeights(),
        ids = op.getSavedIndices();
  printer << "saved(" << h << ", " << w << ", " << ids << " : " << h.getType()
          << ", " << w.getType() << ", " << ids.getType() << ") ";
}

/// Inference only needs the result count and ranks to line up; verify()
/// demands exact types with a precise diagnostic.
/// (Moe_InferredOp's isCompatibleReturnTypes, generated for each op.)
static bool sameCountAndRanks(TypeRange l, TypeRange r) {
  if (l.size() != r.size())
    return false;
  for (auto [a, b] : llvm::zip(l, r)) {
    auto ta = dyn_cast<RankedTensorType>(a);
    auto tb = dyn_cast<RankedTensorType>(b);
    if (!ta || !tb || ta.getRank() != tb.getRank())
      return false;
  }
  return true;
}

#define GET_OP_CLASSES
#include "moe-mlir/Dialect/Moe/IR/MoeOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

static constexpr int64_t kDyn = ShapedType::kDynamic;
static constexpr int64_t kI32Limit = int64_t(1) << 31;

static bool isDyn(int64_t d) { return ShapedType::isDynamic(d); }

/// Two dims that may be dynamic agree unless both are static and differ.
static bool dimsAgree(int64_t a, int64_t b) {
  return isDyn(a) || isDyn(b) || a == b;
}

static std::string dimStr(int64_t d) {
  return isDyn(d) ? std::string("?") : std::to_string(d);
}

static int64_t dimOf(Value v, unsigned i) {
  return cast<ShapedType>(v.getType()).getDimSize(i);
}

/// Product of two dims, dynamic if either is (or if it overflows; verify()
/// reports the size rule that the overflow breaks).
static int64_t mulDims(int64_t a, int64_t b) {
  int64_t product;
  if (isDyn(a) || isDyn(b) || llvm::MulOverflow(a, b, product))
    return kDyn;
  return product;
}

/// `a * b < 2^31` for two static, non-negative sizes, without overflowing.
static bool productFitsI32(int64_t a, int64_t b) {
  int64_t product;
  return !llvm::MulOverflow(a, b, product) && product < kI32Limit;
}

/// An expert count that the i32 dispatch metadata can address: `E * T` must
/// fit i32 for every `T >= 1` (docs/Contract.md section 1), so `E < 2^31`.
static LogicalResult verifyExpertCountFitsI32(Operation *op, int64_t e,
                                              StringRef name) {
  if (e >= kI32Limit)
    return op->emitOpError()
           << "expected " << name << " = " << e << " to fit i32 (< 2^31)";
  return success();
}

/// A `num_experts` attribute: at least 1, and addressable by the i32
/// dispatch metadata (verifyExpertCountFitsI32).
static LogicalResult verifyNumExperts(Operation *op, int64_t e) {
  if (e < 1)
    return op->emitOpError() << "expected num_experts >= 1, got " << e;
  return verifyExpertCountFitsI32(op, e, "num_experts");
}

/// `a * b` (named `what`, e.g. "E * T") fits i32 when both are static
/// (docs/Contract.md section 1).
static LogicalResult verifyProductFitsI32(Operation *op, StringRef what,
                                          int64_t a, int64_t b) {
  if (isDyn(a) || isDyn(b) || productFitsI32(a, b))
    return success();
  return op->emitOpError() << "expected " << what << " = " << a << " * " << b
                           << " to fit i32 (< 2^31)";
}

/// A static `cumsum` operand length (`E * T`) fits i32 (docs/Contract.md
/// section 1).
static LogicalResult verifyCumsumLength(Operation *op, Value cumsum) {
  int64_t len = dimOf(cumsum, 0);
  if (!isDyn(len) && len >= kI32Limit)
    return op->emitOpError() << "expected the 'cumsum' length " << len
                             << " (E * T) to fit i32 (< 2^31)";
  return success();
}

/// A dim for result inference: `d` when it is a valid size, else dynamic
/// (verify() reports the broken rule that made it invalid).
static int64_t sizeOrDyn(int64_t d) { return d >= 0 ? d : kDyn; }

static RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type elementType) {
  return RankedTensorType::get(shape, elementType);
}

/// `v`'s type when it is a ranked tensor of rank `rank`, else null (result
/// inference fails; the verifier reports the operand).
static RankedTensorType tensorOfRank(Value v, int64_t rank) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() == rank ? type : RankedTensorType();
}

/// `dimension `dim` of `name` (symbol)` must be static and non-zero.
static LogicalResult verifyStaticDim(Operation *op, Value v, unsigned dim,
                                     StringRef name, StringRef symbol) {
  if (isDyn(dimOf(v, dim)))
    return op->emitOpError() << "expected " << symbol << " (dimension " << dim
                             << " of '" << name << "') to be static";
  // E, k, H, K, N, I are sizes of the model, never empty (only T and M are).
  if (dimOf(v, dim) == 0)
    return op->emitOpError() << "expected " << symbol << " (dimension " << dim
                             << " of '" << name << "') to be non-zero";
  return success();
}

/// Dimension `da` of `a` and dimension `db` of `b` name the same size.
static LogicalResult verifySameDim(Operation *op, Value a, unsigned da,
                                   StringRef aName, Value b, unsigned db,
                                   StringRef bName, StringRef symbol) {
  int64_t x = dimOf(a, da), y = dimOf(b, db);
  if (!dimsAgree(x, y))
    return op->emitOpError()
           << "expected dimension " << db << " of '" << bName << "' (" << symbol
           << ") to match dimension " << da << " of '" << aName << "', got "
           << dimStr(y) << " vs " << dimStr(x);
  return success();
}

/// `b` has `a`'s element type.
static LogicalResult verifySameElementType(Operation *op, Value a,
                                           StringRef aName, Value b,
                                           StringRef bName) {
  Type x = cast<ShapedType>(a.getType()).getElementType();
  Type y = cast<ShapedType>(b.getType()).getElementType();
  if (x != y)
    return op->emitOpError() << "expected '" << bName << "' element type " << x
                             << " (as '" << aName << "'), got " << y;
  return success();
}

/// Static `k`: dimension 1 of a `T x k` operand.
static LogicalResult verifyStaticK(Operation *op, Value v, StringRef name) {
  return verifyStaticDim(op, v, 1, name, "k");
}

/// Result types are exactly the inferred ones. Called last by verify().
template <typename OpTy>
static LogicalResult verifyResultTypesExactly(OpTy op) {
  SmallVector<Type> inferred;
  if (failed(OpTy::inferReturnTypes(op.getContext(), op.getLoc(),
                                    typename OpTy::Adaptor(op), inferred)))
    return op.emitOpError("failed to infer result types");
  for (auto [i, actual, expected] :
       llvm::enumerate(op->getResultTypes(), inferred)) {
    if (actual != expected)
      return op.emitOpError() << "expected result #" << i << " to be "
                              << expected << ", got " << actual;
  }
  return success();
}

namespace {
/// The routing attributes (Moe_RoutingAttrs in MoeOps.td) and bias of
/// moe.route, moe.route_dispatch and moe.ffn.
struct RoutingParams {
  int64_t k, nGroup, topkGroup;
  GroupScore groupScore;
  float scaling;
  Value bias;

  template <typename OpTy> static RoutingParams of(OpTy op) {
    return {static_cast<int64_t>(op.getK()),
            static_cast<int64_t>(op.getNGroup()),
            static_cast<int64_t>(op.getTopkGroup()),
            op.getGroupScore(),
            op.getScaling().convertToFloat(),
            op.getBias()};
  }
};
} // namespace

/// The routing rules shared by moe.route, moe.route_dispatch and moe.ffn
/// (moe.route's description) for `numExperts` experts.
static LogicalResult verifyRouting(Operation *op, int64_t numExperts,
                                   const RoutingParams &params) {
  auto [k, nGroup, topkGroup, groupScore, scaling, bias] = params;
  if (nGroup < 1)
    return op->emitOpError() << "expected n_group >= 1, got " << nGroup;
  if (numExperts % nGroup != 0)
    return op->emitOpError() << "expected E = " << numExperts
                             << " to be divisible by n_group = " << nGroup;
  if (topkGroup < 1 || topkGroup > nGroup)
    return op->emitOpError()
           << "expected topk_group in [1, n_group = " << nGroup << "], got "
           << topkGroup;
  int64_t perGroup = numExperts / nGroup;
  if (groupScore == GroupScore::top2_sum && perGroup < 2)
    return op->emitOpError()
           << "expected at least two experts per group for top2_sum, got "
           << perGroup;
  int64_t selectable = topkGroup * perGroup;
  if (k < 1 || k > selectable)
    return op->emitOpError()
           << "expected k in [1, topk_group * E / n_group = " << selectable
           << "], got " << k;
  if (!std::isfinite(scaling))
    return op->emitOpError() << "expected a finite scaling, got " << scaling;
  if (bias) {
    int64_t len = dimOf(bias, 0);
    if (len != numExperts)
      return op->emitOpError() << "expected 'bias' to have E = " << numExperts
                               << " elements, got " << dimStr(len);
  }
  return success();
}

/// The GLU attribute rules shared by moe.glu and moe.ffn.
static LogicalResult verifyGluAttrs(Operation *op, float alpha,
                                    std::optional<float> limit, float upBias) {
  if (!std::isfinite(alpha))
    return op->emitOpError() << "expected a finite alpha, got " << alpha;
  if (!std::isfinite(upBias))
    return op->emitOpError() << "expected a finite up_bias, got " << upBias;
  if (limit && !(std::isfinite(*limit) && *limit > 0.0f))
    return op->emitOpError()
           << "expected limit to be finite and > 0, got " << *limit;
  return success();
}

//===----------------------------------------------------------------------===//
// TopKOp
//===----------------------------------------------------------------------===//

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location>, Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto input = tensorOfRank(adaptor.getInput(), 2);
  if (!input || !adaptor.getKAttr())
    return failure();
  int64_t k = sizeOrDyn(adaptor.getK());
  types.push_back(tensorOf({input.getDimSize(0), k}, input.getElementType()));
  types.push_back(
      tensorOf({input.getDimSize(0), k}, IntegerType::get(ctx, 32)));
  return success();
}

LogicalResult TopKOp::verify() {
  if (failed(verifyStaticDim(*this, getInput(), 1, "input", "E")))
    return failure();
  int64_t e = dimOf(getInput(), 1), k = getK();
  if (k < 1 || k > e)
    return emitOpError() << "expected k in [1, E = " << e << "], got " << k;
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// RouteOp
//===----------------------------------------------------------------------===//

LogicalResult RouteOp::verify() {
  if (failed(verifyStaticDim(*this, getLogits(), 1, "logits", "E")))
    return failure();
  if (failed(verifyRouting(*this, dimOf(getLogits(), 1),
                           RoutingParams::of(*this))))
    return failure();
  int64_t t = dimOf(getLogits(), 0);
  SmallVector<int64_t> expected = {t, static_cast<int64_t>(getK())};
  for (auto [name, value] : {std::make_pair("weights", getWeights()),
                             std::make_pair("indices", getIndices())}) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getShape() != ArrayRef<int64_t>(expected))
      return emitOpError() << "expected '" << name << "' to be " << dimStr(t)
                           << "x" << getK() << " (T x k), got " << type;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CumsumOp
//===----------------------------------------------------------------------===//

LogicalResult CumsumOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location>,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto indices = tensorOfRank(adaptor.getIndices(), 2);
  if (!indices || !adaptor.getNumExpertsAttr())
    return failure();
  int64_t e = adaptor.getNumExperts();
  int64_t len = e >= 1 ? mulDims(e, indices.getDimSize(0)) : kDyn;
  types.push_back(tensorOf({len}, IntegerType::get(ctx, 32)));
  return success();
}

LogicalResult CumsumOp::verify() {
  int64_t e = getNumExperts();
  if (failed(verifyNumExperts(*this, e)) ||
      failed(verifyStaticK(*this, getIndices(), "indices")) ||
      failed(verifyProductFitsI32(*this, "E * T", e, dimOf(getIndices(), 0))))
    return failure();
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// GetIndicesOp
//===----------------------------------------------------------------------===//

LogicalResult GetIndicesOp::inferReturnTypes(MLIRContext *ctx,
                                             std::optional<Location>,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  auto indices = tensorOfRank(adaptor.getIndices(), 2);
  if (!indices)
    return failure();
  int64_t len = mulDims(indices.getDimSize(0), indices.getDimSize(1));
  auto i32 = IntegerType::get(ctx, 32);
  types.push_back(tensorOf({len}, i32));
  types.push_back(tensorOf({len}, i32));
  return success();
}

LogicalResult GetIndicesOp::verify() {
  if (failed(verifyStaticK(*this, getIndices(), "indices")) ||
      failed(verifyCumsumLength(*this, getCumsum())))
    return failure();
  int64_t t = dimOf(getIndices(), 0), len = dimOf(getCumsum(), 0);
  if (failed(verifyProductFitsI32(*this, "T * k", t, dimOf(getIndices(), 1))))
    return failure();
  if (!isDyn(t) && !isDyn(len) &&
      ((t == 0 && len != 0) || (t > 0 && len % t != 0)))
    return emitOpError() << "expected the 'cumsum' length " << len
                         << " to be a multiple E * T of T = " << t;
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// GetIndptrOp
//===----------------------------------------------------------------------===//

LogicalResult GetIndptrOp::verify() {
  int64_t e = getNumExperts();
  if (failed(verifyNumExperts(*this, e)) ||
      failed(verifyCumsumLength(*this, getCumsum())))
    return failure();
  int64_t len = dimOf(getCumsum(), 0);
  if (!isDyn(len) && len % e != 0)
    return emitOpError() << "expected the 'cumsum' length " << len
                         << " to be a multiple of num_experts = " << e;
  int64_t expected = getInclusive() ? e : e + 1;
  int64_t actual = dimOf(getResult(), 0);
  if (actual != expected)
    return emitOpError() << "expected the result to have "
                         << (getInclusive() ? "E = " : "E + 1 = ") << expected
                         << " elements, got " << dimStr(actual);
  return success();
}

//===----------------------------------------------------------------------===//
// GatherOp and ScatterOp
//===----------------------------------------------------------------------===//

/// Row movement ops: `input` is `rows x H` with static `H`.
template <typename OpTy> static LogicalResult verifyRowMovement(OpTy op) {
  static_assert(llvm::is_one_of<OpTy, GatherOp, ScatterOp>::value,
                "only for moe.gather and moe.scatter");
  if (failed(verifyStaticDim(op, op.getInput(), 1, "input", "H")))
    return failure();
  if constexpr (std::is_same_v<OpTy, ScatterOp>) {
    if (failed(verifySameDim(op, op.getInput(), 0, "input", op.getIndices(), 0,
                             "indices", "M")))
      return failure();
  }
  return verifyResultTypesExactly(op);
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto input = tensorOfRank(adaptor.getInput(), 2);
  auto indices = tensorOfRank(adaptor.getIndices(), 1);
  if (!input || !indices)
    return failure();
  types.push_back(tensorOf({indices.getDimSize(0), input.getDimSize(1)},
                           input.getElementType()));
  return success();
}

LogicalResult GatherOp::verify() { return verifyRowMovement(*this); }

LogicalResult ScatterOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location>,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto input = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!input)
    return failure();
  types.push_back(input);
  return success();
}

LogicalResult ScatterOp::verify() { return verifyRowMovement(*this); }

//===----------------------------------------------------------------------===//
// GroupedMatmulOp
//===----------------------------------------------------------------------===//

/// The weight-format rules of an expert GEMM's weights `rhs` (named
/// `rhsName`; E x N x K', transposed unless plain) for `k` columns of
/// activations of type `f`, with their scales `scale` (`scaleName`):
/// plain weights are F and have no scales; fp8_block weights are e4m3 with
/// f32 scales E x ceil(N/128) x ceil(K/128); mxfp4 weights are bytes of two
/// e2m1 (K' = K/2, K a multiple of 32) with f8E8M0FNU scales E x N x K/32.
/// `scale_fmt` applies to fp8_block only.
static LogicalResult verifyWeightFormat(Operation *op, WeightFormat format,
                                        ScaleFmt scaleFmt, Type f, int64_t k,
                                        Value rhs, StringRef rhsName,
                                        Value scale, StringRef scaleName,
                                        bool transposed) {
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  Type w = rhsType.getElementType();
  StringRef formatName = stringifyWeightFormat(format);
  if (scaleFmt != ScaleFmt::f32 && format != WeightFormat::fp8_block)
    return op->emitOpError()
           << "expected scale_fmt f32 with weight_format " << formatName
           << " (activation scales are fp8_block's)";
  if (format == WeightFormat::plain) {
    if (w != f)
      return op->emitOpError() << "expected '" << rhsName << "' element type "
                               << f << " (as the activations), got " << w;
    if (scale)
      return op->emitOpError()
             << "expected no '" << scaleName << "' with weight_format plain";
    return success();
  }
  if (!transposed)
    return op->emitOpError()
           << "expected weight_format " << formatName << " weights as E x N x"
           << " K, K contiguous (transposed, the checkpoints' layout)";
  bool fp8 = format == WeightFormat::fp8_block;
  Type expectedW = fp8 ? Type(Float8E4M3FNType::get(op->getContext()))
                       : Type(IntegerType::get(op->getContext(), 8));
  if (w != expectedW)
    return op->emitOpError()
           << "expected '" << rhsName << "' element type " << expectedW
           << " with weight_format " << formatName << ", got " << w;
  int64_t e = rhsType.getDimSize(0), n = rhsType.getDimSize(1);
  if (!fp8 && k % 32 != 0)
    return op->emitOpError()
           << "expected K a multiple of 32 with weight_format " << formatName
           << " (32-value blocks), got " << k;
  int64_t storedK = fp8 ? k : k / 2;
  if (rhsType.getDimSize(2) != storedK)
    return op->emitOpError()
           << "expected dimension 2 of '" << rhsName << "' to be "
           << (fp8 ? "K = " : "K/2 = ") << storedK << " with weight_format "
           << formatName << ", got " << dimStr(rhsType.getDimSize(2));
  if (!scale)
    return op->emitOpError() << "expected '" << scaleName
                             << "' with weight_format " << formatName;
  auto scaleType = dyn_cast<RankedTensorType>(scale.getType());
  Type expectedS = fp8 ? Type(Float32Type::get(op->getContext()))
                       : Type(Float8E8M0FNUType::get(op->getContext()));
  SmallVector<int64_t> shape =
      fp8 ? SmallVector<int64_t>{e, (n + 127) / 128, (k + 127) / 128}
          : SmallVector<int64_t>{e, n, k / 32};
  auto expected = RankedTensorType::get(shape, expectedS);
  if (scaleType != expected)
    return op->emitOpError()
           << "expected '" << scaleName << "' to be " << expected << " ("
           << (fp8 ? "E x ceil(N/128) x ceil(K/128)" : "E x N x K/32")
           << ") with weight_format " << formatName << ", got "
           << scale.getType();
  return success();
}

/// The operand rules shared by moe.grouped_matmul and moe.expert_gemm:
/// static non-zero K, E, N; one element type F; K agrees; E + 1 offsets;
/// bias E x N of F; the weight format's rules (verifyWeightFormat).
static LogicalResult verifyGemmOperands(Operation *op, Value lhs, Value rhs,
                                        Value offsets, Value bias,
                                        bool transposed, WeightFormat format,
                                        ScaleFmt scaleFmt, Value rhsScale) {
  if (failed(verifyStaticDim(op, lhs, 1, "lhs", "K")))
    return failure();
  static constexpr StringLiteral rhsSymbols[] = {"E", "K", "N"};
  static constexpr StringLiteral rhsSymbolsT[] = {"E", "N", "K"};
  for (unsigned i = 0; i < 3; ++i)
    if (failed(verifyStaticDim(op, rhs, i, "rhs",
                               transposed ? rhsSymbolsT[i] : rhsSymbols[i])))
      return failure();
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  Type f = cast<RankedTensorType>(lhs.getType()).getElementType();
  unsigned kDim = transposed ? 2 : 1, nDim = transposed ? 1 : 2;
  int64_t e = rhsType.getDimSize(0), n = rhsType.getDimSize(nDim);
  if (format == WeightFormat::plain &&
      failed(verifySameElementType(op, lhs, "lhs", rhs, "rhs")))
    return failure();
  if (format == WeightFormat::plain &&
      failed(verifySameDim(op, lhs, 1, "lhs", rhs, kDim, "rhs", "K")))
    return failure();
  if (failed(verifyWeightFormat(op, format, scaleFmt, f, dimOf(lhs, 1), rhs,
                                "rhs", rhsScale, "rhs_scale", transposed)))
    return failure();
  // Compared as `len - 1 == E`: `E + 1` may overflow for a huge static E.
  int64_t offsetsLen = dimOf(offsets, 0);
  if (isDyn(offsetsLen) || offsetsLen - 1 != e)
    return op->emitOpError()
           << "expected 'offsets' to have E + 1 = " << uint64_t(e) + 1
           << " elements, got " << dimStr(offsetsLen);
  if (bias) {
    auto biasType = dyn_cast<RankedTensorType>(bias.getType());
    if (!biasType || biasType.getRank() != 2)
      return op->emitOpError() << "expected 'bias' to be a 2-D tensor (E x N),"
                                  " got "
                               << bias.getType();
    if (failed(verifySameElementType(op, lhs, "lhs", bias, "bias")))
      return failure();
    if (biasType.getShape() != ArrayRef<int64_t>{e, n})
      return op->emitOpError() << "expected 'bias' to be " << e << "x" << n
                               << " (E x N), got " << biasType;
  }
  return success();
}

// Operands 3.. : [bias] [rhs_scale] (verify() checks the count against
// weight_format).
Value GroupedMatmulOp::getBias() {
  size_t n = getOptionalOperands().size();
  size_t scales = getFormat() == WeightFormat::plain ? 0 : 1;
  return n == scales + 1 ? getOptionalOperands()[0] : Value();
}

Value GroupedMatmulOp::getRhsScale() {
  size_t n = getOptionalOperands().size();
  return getFormat() != WeightFormat::plain && n >= 1
             ? getOptionalOperands()[n - 1]
             : Value();
}

LogicalResult GroupedMatmulOp::verify() {
  size_t optional = getOptionalOperands().size();
  size_t scales = getFormat() == WeightFormat::plain ? 0 : 1;
  if (optional != scales && optional != scales + 1)
    return emitOpError() << "expected " << 3 + scales << " or " << 4 + scales
                         << " operands (lhs, rhs, offsets, [bias]"
                         << (scales ? ", rhs_scale" : "")
                         << ") with weight_format "
                         << stringifyWeightFormat(getFormat()) << ", got "
                         << 3 + optional;
  if (failed(verifyGemmOperands(*this, getLhs(), getRhs(), getOffsets(),
                                getBias(), getTransposeRhs(), getFormat(),
                                getScaleFmt(), getRhsScale())))
    return failure();
  auto lhsType = getLhs().getType();
  Type f = lhsType.getElementType();
  int64_t n = getRhs().getType().getDimSize(getTransposeRhs() ? 1 : 2);
  auto resultType = getResult().getType();
  Type o = resultType.getElementType();
  if (o != f && !o.isF32())
    return emitOpError() << "expected result element type " << f
                         << " or f32, got " << o;
  int64_t m = lhsType.getDimSize(0);
  if (resultType.getShape() != ArrayRef<int64_t>{m, n})
    return emitOpError() << "expected the result to be " << dimStr(m) << "x"
                         << n << " (M x N), got " << resultType;
  return success();
}

//===----------------------------------------------------------------------===//
// RouteGradOp
//===----------------------------------------------------------------------===//

LogicalResult RouteGradOp::verify() {
  Value grad = getGrad(), logits = getLogits(), indices = getIndices();
  if (failed(verifyStaticDim(*this, logits, 1, "logits", "E")) ||
      failed(verifyStaticDim(*this, grad, 1, "grad", "k")))
    return failure();
  if (failed(verifySameDim(*this, logits, 0, "logits", grad, 0, "grad", "T")) ||
      failed(verifySameDim(*this, logits, 0, "logits", indices, 0, "indices",
                           "T")) ||
      failed(verifySameDim(*this, grad, 1, "grad", indices, 1, "indices", "k")))
    return failure();
  if (!std::isfinite(getScaling().convertToFloat()))
    return emitOpError() << "expected a finite scaling, got "
                         << getScaling().convertToFloat();
  Type f = getLogits().getType().getElementType();
  auto resultType = getResult().getType();
  Type o = resultType.getElementType();
  if (o != f && !o.isF32())
    return emitOpError() << "expected result element type " << f
                         << " or f32, got " << o;
  if (!dimsAgree(dimOf(getResult(), 0), dimOf(logits, 0)) ||
      dimOf(getResult(), 1) != dimOf(logits, 1))
    return emitOpError() << "expected the result to be "
                         << dimStr(dimOf(logits, 0)) << "x" << dimOf(logits, 1)
                         << " (T x E), got " << resultType;
  return success();
}

//===----------------------------------------------------------------------===//
// GroupedMatmulWgradOp
//===----------------------------------------------------------------------===//

LogicalResult GroupedMatmulWgradOp::verify() {
  Value lhs = getLhs(), rhs = getRhs();
  if (failed(verifyStaticDim(*this, lhs, 1, "lhs", "K")) ||
      failed(verifyStaticDim(*this, rhs, 1, "rhs", "N")))
    return failure();
  if (failed(verifySameElementType(*this, lhs, "lhs", rhs, "rhs")))
    return failure();
  // The contracted row counts: a gathered operand's is its indices' length.
  Value lhsRows = getLhsGather() ? getLhsGather() : lhs;
  Value rhsRows = getRhsGather() ? getRhsGather() : rhs;
  StringRef lhsName = getLhsGather() ? "lhs_gather" : "lhs";
  StringRef rhsName = getRhsGather() ? "rhs_gather" : "rhs";
  if (failed(
          verifySameDim(*this, lhsRows, 0, lhsName, rhsRows, 0, rhsName, "M")))
    return failure();
  Type f = getLhs().getType().getElementType();
  int64_t offsetsLen = dimOf(getOffsets(), 0);
  if (isDyn(offsetsLen) || offsetsLen < 2)
    return emitOpError() << "expected 'offsets' to have E + 1 >= 2 static "
                            "elements, got "
                         << dimStr(offsetsLen);
  int64_t e = offsetsLen - 1, k = dimOf(lhs, 1), n = dimOf(rhs, 1);
  auto resultType = getResult().getType();
  Type o = resultType.getElementType();
  if (o != f && !o.isF32())
    return emitOpError() << "expected result element type " << f
                         << " or f32, got " << o;
  if (resultType.getShape() != ArrayRef<int64_t>{e, k, n})
    return emitOpError() << "expected the result to be " << e << "x" << k << "x"
                         << n << " (E x K x N), got " << resultType;
  if (Value acc = getAcc()) {
    if (cast<RankedTensorType>(acc.getType()).getShape() !=
        resultType.getShape())
      return emitOpError() << "expected 'acc' to be " << e << "x" << k << "x"
                           << n << "xf32 (E x K x N), got " << acc.getType();
    if (!o.isF32())
      return emitOpError() << "expected an f32 result with 'acc', got " << o;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GluOp
//===----------------------------------------------------------------------===//

LogicalResult GluOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  auto input = tensorOfRank(adaptor.getInput(), 2);
  if (!input)
    return failure();
  int64_t cols = input.getDimSize(1);
  int64_t half = (!isDyn(cols) && cols % 2 == 0) ? cols / 2 : kDyn;
  types.push_back(
      tensorOf({input.getDimSize(0), half}, input.getElementType()));
  return success();
}

/// moe.glu's and moe.glu_grad's input (`M x 2N`, 2N static and even) and
/// their GLU attributes.
template <typename OpTy> static LogicalResult verifyGluInput(OpTy op) {
  if (failed(verifyStaticDim(op, op.getInput(), 1, "input", "2N")))
    return failure();
  int64_t cols = dimOf(op.getInput(), 1);
  if (cols % 2 != 0)
    return op.emitOpError() << "expected an even number of input columns "
                               "(2N), got "
                            << cols;
  std::optional<float> limit;
  if (auto l = op.getLimit())
    limit = l->convertToFloat();
  return verifyGluAttrs(op, op.getAlpha().convertToFloat(), limit,
                        op.getUpBias().convertToFloat());
}

LogicalResult GluOp::verify() {
  if (failed(verifyGluInput(*this)))
    return failure();
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// GluGradOp
//===----------------------------------------------------------------------===//

LogicalResult GluGradOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location>,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto input = tensorOfRank(adaptor.getInput(), 2);
  if (!input)
    return failure();
  types.push_back(input);
  return success();
}

LogicalResult GluGradOp::verify() {
  if (failed(verifyGluInput(*this)))
    return failure();
  int64_t cols = dimOf(getInput(), 1);
  if (failed(verifySameDim(*this, getInput(), 0, "input", getGrad(), 0, "grad",
                           "M")))
    return failure();
  int64_t gradCols = dimOf(getGrad(), 1);
  if (gradCols != cols / 2)
    return emitOpError() << "expected 'grad' to have " << cols / 2
                         << " columns (N, half of the input's), got "
                         << dimStr(gradCols);
  if (failed(
          verifySameElementType(*this, getInput(), "input", getGrad(), "grad")))
    return failure();
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// CombineOp
//===----------------------------------------------------------------------===//

LogicalResult CombineOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location>,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto input = tensorOfRank(adaptor.getInput(), 3);
  if (!input)
    return failure();
  types.push_back(tensorOf({input.getDimSize(0), input.getDimSize(2)},
                           input.getElementType()));
  return success();
}

LogicalResult CombineOp::verify() {
  if (failed(verifyStaticK(*this, getInput(), "input")) ||
      failed(verifyStaticDim(*this, getInput(), 2, "input", "H")))
    return failure();
  if (Value weights = getWeights()) {
    if (failed(verifySameDim(*this, getInput(), 0, "input", weights, 0,
                             "weights", "T")))
      return failure();
    if (dimOf(weights, 1) != dimOf(getInput(), 1))
      return emitOpError() << "expected dimension 1 of 'weights' (k) to be "
                           << dimOf(getInput(), 1) << ", got "
                           << dimStr(dimOf(weights, 1));
  }
  return verifyResultTypesExactly(*this);
}

LogicalResult CombineGradOp::verify() {
  Value grad = getGrad(), result = getResult();
  if (failed(verifyStaticDim(*this, grad, 1, "grad", "H")) ||
      failed(verifyStaticDim(*this, result, 1, "result", "k")))
    return failure();
  Type f = getGrad().getType().getElementType();
  auto resultType = getResult().getType();
  if (resultType.getElementType() != f)
    return emitOpError() << "expected result element type " << f
                         << " (as 'grad'), got " << resultType.getElementType();
  if (failed(verifySameDim(*this, grad, 0, "grad", result, 0, "result", "T")))
    return failure();
  if (dimOf(result, 2) != dimOf(grad, 1))
    return emitOpError() << "expected dimension 2 of 'result' (H) to be "
                         << dimOf(grad, 1) << ", got "
                         << dimStr(dimOf(result, 2));
  if (Value weights = getWeights()) {
    if (failed(
            verifySameDim(*this, grad, 0, "grad", weights, 0, "weights", "T")))
      return failure();
    if (dimOf(weights, 1) != dimOf(result, 1))
      return emitOpError() << "expected dimension 1 of 'weights' (k) to be "
                           << dimOf(result, 1) << ", got "
                           << dimStr(dimOf(weights, 1));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// RowDotOp
//===----------------------------------------------------------------------===//

LogicalResult RowDotOp::verify() {
  Value lhs = getLhs(), rhs = getRhs();
  if (failed(verifyStaticDim(*this, lhs, 1, "lhs", "N")))
    return failure();
  if (failed(verifySameElementType(*this, lhs, "lhs", rhs, "rhs")) ||
      failed(verifySameDim(*this, lhs, 0, "lhs", rhs, 0, "rhs", "M")))
    return failure();
  Type f = getLhs().getType().getElementType();
  if (dimOf(rhs, 1) != dimOf(lhs, 1))
    return emitOpError() << "expected dimension 1 of 'rhs' (N) to be "
                         << dimOf(lhs, 1) << ", got " << dimStr(dimOf(rhs, 1));
  auto resultType = getResult().getType();
  Type o = resultType.getElementType();
  if (o != f && !o.isF32())
    return emitOpError() << "expected result element type " << f
                         << " or f32, got " << o;
  if (failed(
          verifySameDim(*this, lhs, 0, "lhs", getResult(), 0, "result", "M")))
    return failure();
  if (Value acc = getAcc()) {
    if (failed(verifySameDim(*this, lhs, 0, "lhs", acc, 0, "acc", "M")))
      return failure();
    if (!o.isF32())
      return emitOpError() << "expected an f32 result with 'acc', got " << o;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// IndicesToMultihotOp and MultihotToIndicesOp
//===----------------------------------------------------------------------===//

LogicalResult
IndicesToMultihotOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  auto indices = tensorOfRank(adaptor.getIndices(), 2);
  auto probs = dyn_cast<RankedTensorType>(adaptor.getProbs().getType());
  if (!indices || !probs || !adaptor.getNumExpertsAttr())
    return failure();
  int64_t e = adaptor.getNumExperts();
  SmallVector<int64_t> shape = {indices.getDimSize(0), e >= 1 ? e : kDyn};
  types.push_back(tensorOf(shape, IntegerType::get(ctx, 1)));
  types.push_back(tensorOf(shape, probs.getElementType()));
  types.push_back(tensorOf(shape, IntegerType::get(ctx, 32)));
  return success();
}

LogicalResult IndicesToMultihotOp::verify() {
  int64_t e = getNumExperts();
  if (e < 1)
    return emitOpError() << "expected num_experts >= 1, got " << e;
  if (failed(verifyStaticK(*this, getIndices(), "indices")) ||
      failed(verifySameDim(*this, getIndices(), 0, "indices", getProbs(), 0,
                           "probs", "T")))
    return failure();
  if (dimOf(getProbs(), 1) != dimOf(getIndices(), 1))
    return emitOpError() << "expected dimension 1 of 'probs' (k) to be "
                         << dimOf(getIndices(), 1) << ", got "
                         << dimStr(dimOf(getProbs(), 1));
  return verifyResultTypesExactly(*this);
}

LogicalResult
MultihotToIndicesOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  auto probs = tensorOfRank(adaptor.getProbsMultihot(), 2);
  if (!probs || !adaptor.getKAttr())
    return failure();
  types.push_back(tensorOf({probs.getDimSize(0), sizeOrDyn(adaptor.getK())},
                           probs.getElementType()));
  return success();
}

LogicalResult MultihotToIndicesOp::verify() {
  int64_t k = getK();
  if (k < 1)
    return emitOpError() << "expected k >= 1, got " << k;
  if (failed(verifyStaticDim(*this, getProbsMultihot(), 1, "probs_multihot",
                             "E")) ||
      failed(verifySameDim(*this, getProbsMultihot(), 0, "probs_multihot",
                           getPositionMap(), 0, "position_map", "T")))
    return failure();
  if (dimOf(getPositionMap(), 1) != dimOf(getProbsMultihot(), 1))
    return emitOpError() << "expected dimension 1 of 'position_map' (E) to be "
                         << dimOf(getProbsMultihot(), 1) << ", got "
                         << dimStr(dimOf(getPositionMap(), 1));
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// FfnOp
//===----------------------------------------------------------------------===//

// Operands 4.. : [bias] [w_up_bias, w_down_bias] [w_up_scale,
// w_down_scale] (verify() checks the count against expert_bias and
// weight_format). moe.ffn_grad has the same after its `dy`, never scales.
template <typename OpTy> static size_t ffnScaleOperands(OpTy op) {
  return op.getFormat() == WeightFormat::plain ? 0 : 2;
}

/// moe.ffn_grad's saved group (h, weights, indices) at the end; none on
/// moe.ffn and moe.ffn_train.
template <typename OpTy> static size_t ffnSavedOperands(OpTy op) {
  if constexpr (std::is_same_v<OpTy, FfnGradOp>)
    return op.hasSaved() ? 3 : 0;
  return 0;
}

Value FfnOp::getBias() {
  size_t n = getOptionalOperands().size(), expert = getExpertBias() ? 2 : 0;
  return n == expert + ffnScaleOperands(*this) + 1 ? getOptionalOperands()[0]
                                                   : Value();
}

Value FfnOp::getWUpBias() {
  size_t n = getOptionalOperands().size(), scales = ffnScaleOperands(*this);
  return getExpertBias() && n >= scales + 2
             ? getOptionalOperands()[n - scales - 2]
             : Value();
}

Value FfnOp::getWDownBias() {
  size_t n = getOptionalOperands().size(), scales = ffnScaleOperands(*this);
  return getExpertBias() && n >= scales + 2
             ? getOptionalOperands()[n - scales - 1]
             : Value();
}

Value FfnOp::getWUpScale() {
  size_t n = getOptionalOperands().size();
  return ffnScaleOperands(*this) && n >= 2 ? getOptionalOperands()[n - 2]
                                           : Value();
}

Value FfnOp::getWDownScale() {
  size_t n = getOptionalOperands().size();
  return ffnScaleOperands(*this) && n >= 2 ? getOptionalOperands()[n - 1]
                                           : Value();
}

int64_t FfnOp::getIntermediateSize() {
  auto wDown = getWDown().getType();
  int64_t stored = wDown.getDimSize(getTransposeWeights() ? 2 : 1);
  // mxfp4: two values a byte along K.
  return isMxfp4(getFormat()) ? 2 * stored : stored;
}

LogicalResult FfnOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  auto x = dyn_cast<RankedTensorType>(adaptor.getX().getType());
  if (!x)
    return failure();
  types.push_back(x);
  return success();
}

/// The rules of moe.ffn's operands and attributes, shared with
/// moe.ffn_grad (everything but the result types).
template <typename OpTy> static LogicalResult verifyFfnOperands(OpTy op) {
  // x, logits, w_up, w_down, then [bias] and, with expert_bias,
  // w_up_bias and w_down_bias; moe.ffn_grad's saved group last.
  size_t all = op.getOptionalOperands().size();
  size_t saved = ffnSavedOperands(op);
  size_t optional = all - saved;
  size_t expert = op.getExpertBias() ? 2 : 0;
  size_t scales = ffnScaleOperands(op);
  // moe.ffn_grad's `dy` comes first.
  constexpr bool isGrad = std::is_same_v<OpTy, FfnGradOp>;
  size_t lead = op->getNumOperands() - all;
  if (optional != expert + scales && optional != expert + scales + 1) {
    size_t fewest = lead + expert + scales;
    auto diag = op.emitOpError() << "expected ";
    if (isGrad)
      diag << fewest << ", " << fewest + 1 << ", " << fewest + 3 << " or "
           << fewest + 4;
    else
      diag << fewest << " or " << fewest + 1;
    return diag << " operands (" << (isGrad ? "dy, " : "")
                << "x, logits, w_up, w_down, [bias]"
                << (expert ? ", w_up_bias, w_down_bias" : "")
                << (scales ? ", w_up_scale, w_down_scale" : "")
                << (isGrad ? ", [h, weights, indices]" : "")
                << ") with expert_bias = " << (expert ? "true" : "false")
                << (scales ? " and weight_format " : "")
                << (scales ? stringifyWeightFormat(op.getFormat()) : "")
                << ", got " << lead + all;
  }
  if (Value bias = op.getBias()) {
    auto type = dyn_cast<RankedTensorType>(bias.getType());
    if (!type || type.getRank() != 1 || !type.getElementType().isF32())
      return op.emitOpError() << "expected 'bias' to be a 1-D f32 tensor, got "
                              << bias.getType();
  }
  if (failed(verifyStaticDim(op, op.getX(), 1, "x", "H")) ||
      failed(verifyStaticDim(op, op.getLogits(), 1, "logits", "E")) ||
      failed(verifySameDim(op, op.getX(), 0, "x", op.getLogits(), 0, "logits",
                           "T")))
    return failure();
  Type f = op.getX().getType().getElementType();
  // The router may run in f32 on activations of a narrower type (DeepSeek-V3
  // routes on f32 logits while x is bf16): logits are F or f32.
  Type logitsType = op.getLogits().getType().getElementType();
  if (logitsType != f && !logitsType.isF32())
    return op.emitOpError() << "expected 'logits' element type " << f
                            << " (as 'x') or f32, got " << logitsType;
  WeightFormat format = op.getFormat();
  bool plain = format == WeightFormat::plain;
  for (auto [name, value] :
       {std::make_pair("w_up", plain ? Value(op.getWUp()) : Value()),
        std::make_pair("w_down", plain ? Value(op.getWDown()) : Value()),
        std::make_pair("w_up_bias", op.getWUpBias()),
        std::make_pair("w_down_bias", op.getWDownBias())}) {
    if (!value)
      continue;
    Type elementType = cast<ShapedType>(value.getType()).getElementType();
    if (elementType != f)
      return op.emitOpError() << "expected '" << name << "' element type " << f
                              << " (as 'x'), got " << elementType;
  }
  int64_t h = op.getHiddenSize(), e = op.getNumExperts();
  bool t = op.getTransposeWeights();
  if (!plain && !t)
    return op.emitOpError() << "expected transpose_weights with weight_format "
                            << stringifyWeightFormat(format)
                            << " (the checkpoints' E x N x K layout)";
  // mxfp4: two values a byte along K (H of w_up, I of w_down).
  int64_t pack = isMxfp4(format) ? 2 : 1;
  if (h % pack != 0)
    return op.emitOpError() << "expected an even H with weight_format "
                            << stringifyWeightFormat(format) << ", got " << h;
  // w_up: E x H x 2I (E x 2I x H when transposed).
  auto wUp = op.getWUp().getType();
  if (wUp.hasStaticShape() == false)
    return op.emitOpError()
           << "expected 'w_up' to have a static shape, got " << wUp;
  int64_t twoI = wUp.getDimSize(t ? 1 : 2);
  SmallVector<int64_t> upShape = t ? SmallVector<int64_t>{e, twoI, h / pack}
                                   : SmallVector<int64_t>{e, h, twoI};
  if (wUp.getShape() != ArrayRef<int64_t>(upShape) || twoI % 2 != 0)
    return op.emitOpError()
           << "expected 'w_up' to be "
           << (t ? (pack == 2 ? "E x 2I x H/2" : "E x 2I x H") : "E x H x 2I")
           << " with E = " << e << ", H = " << h << " and an even 2I, got "
           << wUp;
  int64_t i = twoI / 2;
  if (i % pack != 0)
    return op.emitOpError() << "expected an even I with weight_format "
                            << stringifyWeightFormat(format) << ", got " << i;
  auto wDown = op.getWDown().getType();
  SmallVector<int64_t> downShape =
      t ? SmallVector<int64_t>{e, h, i / pack} : SmallVector<int64_t>{e, i, h};
  if (wDown.getShape() != ArrayRef<int64_t>(downShape))
    return op.emitOpError()
           << "expected 'w_down' to be "
           << (t ? (pack == 2 ? "E x H x I/2" : "E x H x I") : "E x I x H")
           << " = " << e << "x" << downShape[1] << "x" << downShape[2]
           << ", got " << wDown;
  if (failed(verifyWeightFormat(
          op, format, op.getScaleFmt(), op.getX().getType().getElementType(), h,
          op.getWUp(), "w_up", op.getWUpScale(), "w_up_scale", t)) ||
      failed(verifyWeightFormat(
          op, format, op.getScaleFmt(), op.getX().getType().getElementType(), i,
          op.getWDown(), "w_down", op.getWDownScale(), "w_down_scale", t)))
    return failure();
  for (auto [name, value, width, what] :
       {std::make_tuple("w_up_bias", op.getWUpBias(), 2 * i, "E x 2I"),
        std::make_tuple("w_down_bias", op.getWDownBias(), h, "E x H")}) {
    if (!value)
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getShape() != ArrayRef<int64_t>{e, width})
      return op.emitOpError() << "expected '" << name << "' to be " << what
                              << " = " << e << "x" << width << ", got " << type;
  }
  if (failed(verifyRouting(op, e, RoutingParams::of(op))))
    return failure();
  std::optional<float> limit;
  if (auto l = op.getLimit())
    limit = l->convertToFloat();
  if (failed(verifyGluAttrs(op, op.getAlpha().convertToFloat(), limit,
                            op.getUpBias().convertToFloat())))
    return failure();
  // The dispatch chain's i32 metadata: E * T and T * k fit i32
  // (docs/Contract.md section 1).
  // verifyRouting() established k <= E, so E * T bounds T * k as well.
  if (failed(verifyExpertCountFitsI32(op, e, "E")) ||
      failed(verifyProductFitsI32(op, "E * T", e, dimOf(op.getX(), 0))))
    return failure();
  return success();
}

LogicalResult FfnOp::verify() {
  if (failed(verifyFfnOperands(*this)))
    return failure();
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// FfnTrainOp and FfnGradOp
//===----------------------------------------------------------------------===//

// The optional operands as moe.ffn's, without scales (weight_format plain),
// then (moe.ffn_grad) the saved group: [bias] [w_up_bias, w_down_bias]
// [h, weights, indices].
static Value ffnBias(OperandRange optional, bool expertBias, size_t saved) {
  size_t n = optional.size() - saved, expert = expertBias ? 2 : 0;
  return n == expert + 1 ? optional[0] : Value();
}

static Value ffnExpertBias(OperandRange optional, bool expertBias, size_t saved,
                           unsigned which) {
  size_t n = optional.size() - saved;
  return expertBias && n >= 2 ? optional[n - 2 + which] : Value();
}

Value FfnTrainOp::getBias() {
  return ffnBias(getOptionalOperands(), getExpertBias(), 0);
}

Value FfnTrainOp::getWUpBias() {
  return ffnExpertBias(getOptionalOperands(), getExpertBias(), 0, 0);
}

Value FfnTrainOp::getWDownBias() {
  return ffnExpertBias(getOptionalOperands(), getExpertBias(), 0, 1);
}

int64_t FfnTrainOp::getIntermediateSize() {
  return getWDown().getType().getDimSize(getTransposeWeights() ? 2 : 1);
}

LogicalResult FfnTrainOp::inferReturnTypes(MLIRContext *ctx,
                                           std::optional<Location>,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto x = dyn_cast<RankedTensorType>(adaptor.getX().getType());
  auto wUp = dyn_cast<RankedTensorType>(adaptor.getWUp().getType());
  if (!x || !wUp || x.getRank() != 2 || wUp.getRank() != 3)
    return failure();
  int64_t t = x.getDimSize(0), k = adaptor.getK();
  int64_t twoI = wUp.getDimSize(adaptor.getTransposeWeights() ? 1 : 2);
  types.push_back(x);
  types.push_back(
      RankedTensorType::get({mulDims(t, k), twoI}, x.getElementType()));
  types.push_back(RankedTensorType::get({t, k}, Float32Type::get(ctx)));
  types.push_back(RankedTensorType::get({t, k}, IntegerType::get(ctx, 32)));
  return success();
}

/// Training (moe.ffn_train, moe.ffn_grad) needs plain weights. Checked
/// first: quantized weights' scales would otherwise be reported as surplus
/// operands.
static LogicalResult verifyTrainingWeights(Operation *op, WeightFormat format) {
  if (format == WeightFormat::plain)
    return success();
  return op->emitOpError() << "needs bf16/f16/f32 weights (weight_format "
                              "plain; training on quantized weights is out "
                              "of scope), got weight_format "
                           << stringifyWeightFormat(format);
}

LogicalResult FfnTrainOp::verify() {
  if (failed(verifyTrainingWeights(*this, getFormat())) ||
      failed(verifyFfnOperands(*this)))
    return failure();
  return verifyResultTypesExactly(*this);
}

bool FfnGradOp::hasSaved() {
  size_t expert = getExpertBias() ? 2 : 0;
  return getOptionalOperands().size() >= expert + 3;
}

Value FfnGradOp::getSavedH() {
  size_t n = getOptionalOperands().size();
  return hasSaved() ? getOptionalOperands()[n - 3] : Value();
}

Value FfnGradOp::getSavedWeights() {
  size_t n = getOptionalOperands().size();
  return hasSaved() ? getOptionalOperands()[n - 2] : Value();
}

Value FfnGradOp::getSavedIndices() {
  size_t n = getOptionalOperands().size();
  return hasSaved() ? getOptionalOperands()[n - 1] : Value();
}

Value FfnGradOp::getBias() {
  return ffnBias(getOptionalOperands(), getExpertBias(), hasSaved() ? 3 : 0);
}

Value FfnGradOp::getWUpBias() {
  return ffnExpertBias(getOptionalOperands(), getExpertBias(),
                       hasSaved() ? 3 : 0, 0);
}

Value FfnGradOp::getWDownBias() {
  return ffnExpertBias(getOptionalOperands(), getExpertBias(),
                       hasSaved() ? 3 : 0, 1);
}

int64_t FfnGradOp::getIntermediateSize() {
  return getWDown().getType().getDimSize(getTransposeWeights() ? 2 : 1);
}

/// moe.ffn_grad's saved tensors: exactly the types moe.ffn_train returns
/// for these operands (dynamic and static rows agree).
static LogicalResult verifySavedOperands(FfnGradOp op) {
  Type f = op.getX().getType().getElementType();
  Type f32 = Float32Type::get(op.getContext());
  Type i32 = IntegerType::get(op.getContext(), 32);
  int64_t t = dimOf(op.getX(), 0), k = op.getK();
  int64_t twoI = 2 * op.getIntermediateSize();
  for (auto [name, value, rows, cols, type, what] :
       {std::make_tuple("h", op.getSavedH(), mulDims(t, k), twoI, f,
                        "(T*k) x 2I"),
        std::make_tuple("weights", op.getSavedWeights(), t, k, f32, "T x k"),
        std::make_tuple("indices", op.getSavedIndices(), t, k, i32, "T x k")}) {
    auto actual = cast<RankedTensorType>(value.getType());
    if (actual.getRank() != 2 || !dimsAgree(actual.getDimSize(0), rows) ||
        actual.getDimSize(1) != cols || actual.getElementType() != type)
      return op.emitOpError()
             << "expected saved '" << name << "' to be " << what << " = "
             << dimStr(rows) << "x" << cols << " of " << type
             << " (as moe.ffn_train returns it), got " << actual;
  }
  return success();
}

LogicalResult FfnGradOp::verify() {
  if (failed(verifyTrainingWeights(*this, getFormat())) ||
      failed(verifyFfnOperands(*this)))
    return failure();
  if (hasSaved() && failed(verifySavedOperands(*this)))
    return failure();
  Value dy = getDy(), x = getX();
  if (failed(verifySameDim(*this, x, 0, "x", dy, 0, "dy", "T")))
    return failure();
  if (dimOf(dy, 1) != getHiddenSize() ||
      getDy().getType().getElementType() != getX().getType().getElementType())
    return emitOpError() << "expected 'dy' to be T x H = "
                         << dimStr(dimOf(x, 0)) << "x" << getHiddenSize()
                         << " of " << getX().getType().getElementType()
                         << " (as 'x'), got " << dy.getType();
  // dx and dlogits: exactly the types of x and logits.
  for (auto [name, result, like, what] :
       {std::make_tuple("dx", getDx(), getX(), "'x'"),
        std::make_tuple("dlogits", getDlogits(), getLogits(), "'logits'")})
    if (result.getType() != like.getType())
      return emitOpError() << "expected '" << name << "' to be "
                           << like.getType() << " (as " << what << "), got "
                           << result.getType();
  // The weight gradients: the weights' shapes, f32 or the weights' type
  // (rounded once from the f32 sums), both the same.
  Type f32 = Float32Type::get(getContext());
  int64_t e = getNumExperts(), h = getHiddenSize();
  int64_t twoI = 2 * getIntermediateSize();
  for (auto [name, result, like] :
       {std::make_tuple("dw_up", getDwUp(), getWUp()),
        std::make_tuple("dw_down", getDwDown(), getWDown())}) {
    auto shape = like.getType().getShape();
    Type w = like.getType().getElementType();
    auto expected = RankedTensorType::get(shape, f32);
    if (result.getType() != expected &&
        result.getType() != RankedTensorType::get(shape, w)) {
      InFlightDiagnostic diag = emitOpError() << "expected '" << name
                                              << "' to be " << expected;
      if (w != f32)
        diag << " or " << RankedTensorType::get(shape, w);
      return diag << " (the weights' shape, f32 or the weights' type), got "
                  << result.getType();
    }
  }
  if (getDwUp().getType().getElementType() !=
      getDwDown().getType().getElementType())
    return emitOpError() << "expected 'dw_up' and 'dw_down' of one element "
                            "type, got "
                         << getDwUp().getType().getElementType() << " and "
                         << getDwDown().getType().getElementType();
  size_t biasGrads = getBiasGrads().size();
  size_t wantBiasGrads = getExpertBias() ? 2 : 0;
  if (biasGrads != wantBiasGrads)
    return emitOpError() << "expected " << 4 + wantBiasGrads
                         << " results (dx, dlogits, dw_up, dw_down"
                         << (wantBiasGrads ? ", dw_up_bias, dw_down_bias" : "")
                         << ") with expert_bias = "
                         << (wantBiasGrads ? "true" : "false") << ", got "
                         << 4 + biasGrads;
  for (auto [name, result, width, what] :
       {std::make_tuple("dw_up_bias", getDwUpBias(), twoI, "E x 2I"),
        std::make_tuple("dw_down_bias", getDwDownBias(), h, "E x H")}) {
    if (!result)
      continue;
    auto expected = RankedTensorType::get({e, width}, f32);
    if (result.getType() != expected)
      return emitOpError() << "expected '" << name << "' to be " << expected
                           << " (" << what << ", f32), got "
                           << result.getType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// DispatchOp
//===----------------------------------------------------------------------===//

LogicalResult DispatchOp::inferReturnTypes(MLIRContext *ctx,
                                           std::optional<Location>,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto indices = tensorOfRank(adaptor.getIndices(), 2);
  if (!indices || !adaptor.getNumExpertsAttr())
    return failure();
  auto i32 = IntegerType::get(ctx, 32);
  int64_t e = adaptor.getNumExperts();
  int64_t len = mulDims(indices.getDimSize(0), indices.getDimSize(1));
  types.push_back(tensorOf({e >= 1 ? e + 1 : kDyn}, i32));
  types.push_back(tensorOf({len}, i32));
  types.push_back(tensorOf({len}, i32));
  return success();
}

LogicalResult DispatchOp::verify() {
  if (failed(verifyNumExperts(*this, getNumExperts())) ||
      failed(verifyStaticK(*this, getIndices(), "indices")))
    return failure();
  return verifyResultTypesExactly(*this);
}

//===----------------------------------------------------------------------===//
// ExpertGemmOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertGemmOp::verify() {
  if (failed(verifyGemmOperands(*this, getLhs(), getRhs(), getOffsets(),
                                getBias(), getTransposeRhs(), getFormat(),
                                getScaleFmt(), getRhsScale())))
    return failure();
  auto lhsType = getLhs().getType();
  Type f = lhsType.getElementType();
  int64_t n = getGemmN();
  int64_t m = getGather() ? dimOf(getGather(), 0) : lhsType.getDimSize(0);
  for (auto [name, value] : {std::make_pair("scatter", getScatter()),
                             std::make_pair("scale", getScale())}) {
    if (value && !dimsAgree(dimOf(value, 0), m))
      return emitOpError() << "expected '" << name
                           << "' to have M = " << dimStr(m) << " elements, got "
                           << dimStr(dimOf(value, 0));
  }
  if (getActivation().has_value() != getLayout().has_value())
    return emitOpError(
        "expected 'activation' and 'layout' to be set together (GLU "
        "epilogue)");
  int64_t outN = n;
  if (hasGluEpilogue()) {
    if (n % 2 != 0)
      return emitOpError() << "expected an even N for the GLU epilogue, got "
                           << n;
    outN = n / 2;
  }
  std::optional<float> limit;
  if (auto l = getLimit())
    limit = l->convertToFloat();
  if (!hasGluEpilogue() && limit)
    return emitOpError("expected no 'limit' without a GLU epilogue");
  if (failed(verifyGluAttrs(*this, getAlpha().convertToFloat(), limit,
                            getUpBias().convertToFloat())))
    return failure();
  auto resultType = getResult().getType();
  Type o = resultType.getElementType();
  if (o != f && !o.isF32())
    return emitOpError() << "expected result element type " << f
                         << " or f32, got " << o;
  if (resultType.getShape() != ArrayRef<int64_t>{m, outN})
    return emitOpError() << "expected the result to be " << dimStr(m) << "x"
                         << outN << " (M x N'), got " << resultType;
  return success();
}

//===----------------------------------------------------------------------===//
// ExpertGemmGluGradOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertGemmGluGradOp::verify() {
  if (failed(verifyGemmOperands(*this, getLhs(), getRhs(), getOffsets(),
                                /*bias=*/Value(), getTransposeRhs(),
                                WeightFormat::plain, ScaleFmt::f32,
                                /*rhsScale=*/Value())))
    return failure();
  Type f = getLhs().getType().getElementType();
  int64_t n = getRhs().getType().getDimSize(getTransposeRhs() ? 1 : 2);
  Value rows = getGather() ? getGather() : getLhs();
  StringRef rowsName = getGather() ? "gather" : "lhs";
  Value preact = getPreact();
  if (failed(verifySameElementType(*this, getLhs(), "lhs", preact, "preact")) ||
      failed(
          verifySameDim(*this, rows, 0, rowsName, preact, 0, "preact", "M")) ||
      failed(verifySameDim(*this, rows, 0, rowsName, getWeights(), 0, "weights",
                           "M")))
    return failure();
  if (dimOf(preact, 1) != 2 * n)
    return emitOpError() << "expected 'preact' to have 2N' = " << 2 * n
                         << " columns (the GLU input of the GEMM's " << n
                         << " columns), got " << dimStr(dimOf(preact, 1));
  if (Value acc = getAcc())
    if (failed(verifySameDim(*this, rows, 0, rowsName, acc, 0, "acc", "M")))
      return failure();
  std::optional<float> limit;
  if (auto l = getLimit())
    limit = l->convertToFloat();
  if (failed(verifyGluAttrs(*this, getAlpha().convertToFloat(), limit,
                            getUpBias().convertToFloat())))
    return failure();
  int64_t m = dimOf(rows, 0);
  auto expect = [&](Value result, StringRef name, ArrayRef<int64_t> shape,
                    bool f32Allowed) -> LogicalResult {
    auto type = cast<RankedTensorType>(result.getType());
    Type o = type.getElementType();
    if (o != f && !(f32Allowed && o.isF32()))
      return emitOpError() << "expected '" << name << "' of element type " << f
                           << (f32Allowed ? " or f32" : "") << ", got " << o;
    if (type.getRank() != static_cast<int64_t>(shape.size()) ||
        !llvm::all_of(llvm::zip(type.getShape(), shape), [](auto p) {
          return dimsAgree(std::get<0>(p), std::get<1>(p));
        }))
      return emitOpError() << "expected '" << name << "' to be "
                           << (shape.size() == 2 ? dimStr(shape[0]) + "x" +
                                                       std::to_string(shape[1])
                                                 : dimStr(shape[0]))
                           << ", got " << type;
    return success();
  };
  if (failed(expect(getInputGrad(), "input_grad", {m, 2 * n}, false)) ||
      failed(expect(getScaledAct(), "scaled_act", {m, n}, false)) ||
      failed(expect(getWeightGrad(), "weight_grad", {m}, true)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// RouteDispatchOp
//===----------------------------------------------------------------------===//

LogicalResult RouteDispatchOp::verify() {
  if (failed(verifyStaticDim(*this, getLogits(), 1, "logits", "E")))
    return failure();
  int64_t e = dimOf(getLogits(), 1), k = getK();
  if (failed(verifyRouting(*this, e, RoutingParams::of(*this))))
    return failure();
  int64_t t = dimOf(getLogits(), 0);
  int64_t m = isDyn(t) ? kDyn : t * k;
  SmallVector<std::pair<Value, SmallVector<int64_t>>> expected = {
      {getWeights(), {t, k}},
      {getIndices(), {t, k}},
      {getOffsets(), {e + 1}},
      {getReverseIndices(), {m}},
      {getTokenIndices(), {m}}};
  for (auto [i, pair] : llvm::enumerate(expected)) {
    auto type = cast<RankedTensorType>(pair.first.getType());
    if (type.getShape() != ArrayRef<int64_t>(pair.second)) {
      std::string shape;
      for (int64_t d : pair.second)
        shape += (shape.empty() ? "" : "x") + dimStr(d);
      return emitOpError() << "expected result #" << i << " to have shape "
                           << shape << ", got " << type;
    }
  }
  return success();
}
