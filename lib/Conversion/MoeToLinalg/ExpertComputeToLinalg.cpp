//===- ExpertComputeToLinalg.cpp - lower grouped_matmul and glu -----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.expert_gemm (moe.grouped_matmul is rewritten to it first, by
// populateMoeFusedFormPatterns) is lowered as an scf.for over experts:
// expert e's row range [clamp(offsets[e]), clamp(offsets[e+1])) of `lhs`
// (read through `gather` when fused) is multiplied by rhs[e] with a
// dynamic-size linalg.generic contraction accumulating in f32, then bias, the
// GLU epilogue, the row scale and rounding are applied, and the block is
// inserted (or scattered row by row). Rows no expert owns stay zero.
// Low-precision weights (weight_format) are decoded in the contraction's
// body, bit-exact (Utils/LowPrecision.h); with fp8_block the rows are first
// quantized to e4m3 per 128 columns (the group's amax over a zero-padded
// [rows, groups, 128] view, its scale, then each element).
//
// moe.glu: one linalg.generic over two slices of the input, the gate and up
// views of its layout (concat: columns [0, N) and [N, 2N); interleaved: the
// even and odd columns, as stride-2 slices), computing in f32.
//
//===----------------------------------------------------------------------===//

#include "Patterns.h"
#include "Utils/Glu.h"
#include "Utils/LowPrecision.h"
#include "Utils/LoweringBuilder.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

using namespace mlir;
using namespace mlir::moe;

/// act(gate) * (up + up_bias) over the gate and up views of `input`
/// (`rows x 2N`), computed in f32 and rounded to `resultType`'s element
/// type. concat: columns [0, N) and [N, 2N); interleaved: even and odd
/// columns (stride-2 slices).
namespace {
/// Where the gate and the up half of a glu input (`M x 2N`) lie: column
/// offsets 0 and `upColumn`, sizes M x N, column stride 1 (concat) or 2
/// (interleaved); to slice them out of the input or insert them into a
/// tensor of its shape.
struct GluHalves {
  SmallVector<OpFoldResult> sizes, strides;
  int64_t upColumn;

  GluHalves(LoweringBuilder &b, Value input, int64_t n, GluLayout layout)
      : sizes(b.sizes(input)), upColumn(layout == GluLayout::concat ? n : 1) {
    sizes[1] = b.getIndexAttr(n);
    strides = {b.getIndexAttr(1),
               b.getIndexAttr(layout == GluLayout::concat ? 1 : 2)};
  }
  SmallVector<OpFoldResult> offsets(LoweringBuilder &b, bool up) const {
    return {b.getIndexAttr(0), b.getIndexAttr(up ? upColumn : 0)};
  }
  Value extract(LoweringBuilder &b, Value input, bool up) const {
    return tensor::ExtractSliceOp::create(b, input, offsets(b, up), sizes,
                                          strides);
  }
  Value insert(LoweringBuilder &b, Value half, Value into, bool up) const {
    return tensor::InsertSliceOp::create(b, half, into, offsets(b, up), sizes,
                                         strides);
  }
};
} // namespace

static Value buildGlu(LoweringBuilder &b, Value input,
                      RankedTensorType resultType, const GluParams &p) {
  Type f = resultType.getElementType();
  int64_t n = resultType.getDimSize(1);
  // Statically no rows: nothing to compute (and a static slice offset into
  // a zero-size dim would not verify).
  if (cast<RankedTensorType>(input.getType()).getDimSize(0) == 0)
    return b.empty(resultType, {});
  GluHalves halves(b, input, n, p.layout);
  Value gateView = halves.extract(b, input, /*up=*/false);
  Value upView = halves.extract(b, input, /*up=*/true);
  AffineMap id = b.getMultiDimIdentityMap(2);
  SmallVector<Value> dyn = b.dynRowsOf(resultType, input);
  Value init = b.empty(resultType, dyn);
  auto generic = linalg::GenericOp::create(
      b, TypeRange{resultType}, ValueRange{gateView, upView}, ValueRange{init},
      ArrayRef<AffineMap>{id, id, id}, b.parallel(2),
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        LoweringBuilder b(loc, nested);
        Value out = gluValue(b, p, b.toF32(args[0]), b.toF32(args[1]));
        linalg::YieldOp::create(b, b.fromF32(out, f));
      });
  return generic.getResult(0);
}

/// Reads rows [lo, lo + rows) of `lhs`, through `gather` when given (rows
/// whose gather index is outside [0, rows(lhs)) read as zero).
static Value buildLhsRows(LoweringBuilder &b, Value lhs, Value gather, Value lo,
                          Value rows) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  int64_t k = lhsType.getDimSize(1);
  SmallVector<OpFoldResult> one2 = {b.getIndexAttr(1), b.getIndexAttr(1)};
  if (!gather)
    return tensor::ExtractSliceOp::create(
        b, lhs, ArrayRef<OpFoldResult>{lo, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{rows, b.getIndexAttr(k)}, one2);
  Type f = lhsType.getElementType();
  Value lhsRows = b.toI32(b.dim(lhs, 0));
  auto type = RankedTensorType::get({ShapedType::kDynamic, k}, f);
  Value init = b.empty(type, {rows});
  AffineMap id = b.getMultiDimIdentityMap(2);
  return linalg::GenericOp::create(
             b, TypeRange{type}, ValueRange{}, ValueRange{init},
             ArrayRef<AffineMap>{id}, b.parallel(2),
             [&](OpBuilder &nested, Location loc, ValueRange) {
               LoweringBuilder b(loc, nested);
               Value r = linalg::IndexOp::create(b, 0);
               Value c = linalg::IndexOp::create(b, 1);
               Value src = b.extract(gather, {b.add(lo, r)});
               Value v = b.ifElse(
                   b.inRange(src, b.i32(0), lhsRows), {f},
                   [&](LoweringBuilder &b) -> SmallVector<Value> {
                     return {b.extract(lhs, {b.toIndex(src), c})};
                   },
                   [&](LoweringBuilder &b) -> SmallVector<Value> {
                     return {b.scalar(f, 0.0)};
                   })[0];
               linalg::YieldOp::create(b, v);
             })
      .getResult(0);
}

/// fp8_block activations: the e4m3 values (as f32) of `rows` rows of
/// `lhsRows` (rows x k) quantized per 128 columns, and their scales (rows x
/// ceil(k / 128), f32).
static std::pair<Value, Value> quantizeRows(LoweringBuilder &b, Value lhsRows,
                                            Value rows, int64_t k, bool ue8m0) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  int64_t groups = llvm::divideCeil(k, 128);
  auto lhsType = cast<RankedTensorType>(lhsRows.getType());
  // |x| maxima per group over a zero-padded (rows, groups, 128) view.
  Value padded = lhsRows;
  if (groups * 128 != k) {
    auto paddedType = RankedTensorType::get(
        {ShapedType::kDynamic, groups * 128}, lhsType.getElementType());
    padded = tensor::PadOp::create(
        b, paddedType, lhsRows,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(0),
                               b.getIndexAttr(groups * 128 - k)},
        b.scalar(lhsType.getElementType(), 0.0));
  }
  auto grouped = tensor::ExpandShapeOp::create(
      b,
      RankedTensorType::get({ShapedType::kDynamic, groups, 128},
                            lhsType.getElementType()),
      padded, ArrayRef<ReassociationIndices>{{0}, {1, 2}},
      ArrayRef<OpFoldResult>{rows, b.getIndexAttr(groups),
                             b.getIndexAttr(128)});
  auto scaleType = RankedTensorType::get({ShapedType::kDynamic, groups}, f32);
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  Value amax =
      linalg::GenericOp::create(
          b, TypeRange{scaleType}, ValueRange{grouped},
          ValueRange{b.filled(scaleType, {rows}, b.f32(0.0))},
          ArrayRef<AffineMap>{b.getMultiDimIdentityMap(3),
                              AffineMap::get(3, 0, {d0, d1}, ctx)},
          ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                        utils::IteratorType::parallel,
                                        utils::IteratorType::reduction},
          [&](OpBuilder &nested, Location loc, ValueRange args) {
            LoweringBuilder b(loc, nested);
            Value v = math::AbsFOp::create(b, b.toF32(args[0]));
            linalg::YieldOp::create(
                b, arith::MaximumFOp::create(b, args[1], v).getResult());
          })
          .getResult(0);
  AffineMap id2 = b.getMultiDimIdentityMap(2);
  Value scales =
      linalg::GenericOp::create(
          b, TypeRange{scaleType}, ValueRange{amax},
          ValueRange{b.empty(scaleType, {rows})}, ArrayRef<AffineMap>{id2, id2},
          b.parallel(2),
          [&](OpBuilder &nested, Location loc, ValueRange args) {
            LoweringBuilder b(loc, nested);
            linalg::YieldOp::create(b, activationScale(b, args[0], ue8m0));
          })
          .getResult(0);
  auto qType = RankedTensorType::get({ShapedType::kDynamic, k}, f32);
  Value quantized =
      linalg::GenericOp::create(
          b, TypeRange{qType}, ValueRange{lhsRows, scales},
          ValueRange{b.empty(qType, {rows})},
          ArrayRef<AffineMap>{
              id2, AffineMap::get(2, 0, {d0, d1.floorDiv(128)}, ctx), id2},
          b.parallel(2),
          [&](OpBuilder &nested, Location loc, ValueRange args) {
            LoweringBuilder b(loc, nested);
            linalg::YieldOp::create(
                b, roundToE4M3(b, b.div(b.toF32(args[0]), args[1])));
          })
          .getResult(0);
  return {quantized, scales};
}

/// An expert's mxfp4_hopper weights (n x k/2 bytes) in gpt-oss's nibble
/// order (element 2j in the low nibble of byte j): each byte's two codes
/// read from the block word that holds them (see e2m1HopperCode).
static Value mxfp4FromHopperOrder(LoweringBuilder &b, Value weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  MLIRContext *ctx = b.getContext();
  Value init =
      tensor::EmptyOp::create(b, type.getShape(), type.getElementType());
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  SmallVector<utils::IteratorType> iters(2, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, TypeRange{type}, ValueRange{}, ValueRange{init},
             ArrayRef<AffineMap>{id}, iters,
             [&](OpBuilder &nested, Location loc, ValueRange) {
               LoweringBuilder b(loc, nested);
               Value row = linalg::IndexOp::create(b, 0);
               Value byte = linalg::IndexOp::create(b, 1);
               Value block = arith::DivUIOp::create(b, byte, b.idx(16));
               Value kk =
                   b.mul(arith::RemUIOp::create(b, byte, b.idx(16)), b.idx(2));
               Value first =
                   b.add(b.mul(block, b.idx(16)), e2m1HopperWordOffset(b, kk));
               Value word = littleEndianWord(b, [&](int64_t t) -> Value {
                 return tensor::ExtractOp::create(
                     b, weight, ValueRange{row, b.add(first, b.idx(t))});
               });
               Value lo = e2m1HopperCode(b, word, kk);
               Value hi = e2m1HopperCode(b, word, b.add(kk, b.idx(1)));
               Value packed = b.ori(lo, arith::ShLIOp::create(b, hi, b.i32(4)));
               Value byte8 = arith::TruncIOp::create(b, b.getI8Type(), packed);
               linalg::YieldOp::create(b, byte8);
             })
      .getResult(0);
}

/// The f32 products of `rows` rows x `n` columns with expert `expert`'s
/// low-precision weights (fp8_block or mxfp4; see moe.grouped_matmul),
/// accumulated in f32 over k.
static Value lowPrecisionProducts(LoweringBuilder &b, WeightFormat format,
                                  bool ue8m0, Value lhsRows, Value rows,
                                  Value rhs, Value rhsScale, Value expert,
                                  int64_t k, int64_t n) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  bool fp8 = format == WeightFormat::fp8_block;
  // Expert e's weights (n x k, or n x k/2 bytes) and scales.
  auto sliceOf = [&](Value source) {
    auto type = cast<RankedTensorType>(source.getType());
    SmallVector<OpFoldResult> offsets = {expert, b.getIndexAttr(0),
                                         b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
    for (int64_t d : type.getShape().drop_front())
      sizes.push_back(b.getIndexAttr(d));
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(
        b,
        RankedTensorType::get(type.getShape().drop_front(),
                              type.getElementType()),
        source, offsets, sizes, strides);
  };
  Value weight = sliceOf(rhs), weightScale = sliceOf(rhsScale);
  if (format == WeightFormat::mxfp4_hopper)
    weight = mxfp4FromHopperOrder(b, weight);
  AffineExpr dm = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
             dk = getAffineDimExpr(2, ctx);
  auto accType = RankedTensorType::get({ShapedType::kDynamic, n}, f32);
  SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                            utils::IteratorType::parallel,
                                            utils::IteratorType::reduction};
  Value zero = b.filled(accType, {rows}, b.f32(0.0));
  AffineMap accMap = AffineMap::get(3, 0, {dm, dn}, ctx);
  if (fp8) {
    auto [quantized, actScales] = quantizeRows(b, lhsRows, rows, k, ue8m0);
    SmallVector<AffineMap> maps = {
        AffineMap::get(3, 0, {dm, dk}, ctx),
        AffineMap::get(3, 0, {dn, dk}, ctx),
        AffineMap::get(3, 0, {dm, dk.floorDiv(128)}, ctx),
        AffineMap::get(3, 0, {dn.floorDiv(128), dk.floorDiv(128)}, ctx),
        accMap};
    return linalg::GenericOp::create(
               b, TypeRange{accType},
               ValueRange{quantized, weight, actScales, weightScale},
               ValueRange{zero}, maps, iters,
               [&](OpBuilder &nested, Location loc, ValueRange args) {
                 LoweringBuilder b(loc, nested);
                 // The dequantized activation times the dequantized weight:
                 // each factor is finite where the operands are (the
                 // scales' product alone, or q * w * s_a, could overflow).
                 Value w = b.mul(decodeE4M3(b, args[1]), args[3]);
                 Value p = b.mul(b.mul(args[0], args[2]), w);
                 linalg::YieldOp::create(b, b.add(args[4], p));
               })
        .getResult(0);
  }
  SmallVector<AffineMap> maps = {
      AffineMap::get(3, 0, {dm, dk}, ctx),
      AffineMap::get(3, 0, {dn, dk.floorDiv(2)}, ctx),
      AffineMap::get(3, 0, {dn, dk.floorDiv(32)}, ctx), accMap};
  return linalg::GenericOp::create(
             b, TypeRange{accType}, ValueRange{lhsRows, weight, weightScale},
             ValueRange{zero}, maps, iters,
             [&](OpBuilder &nested, Location loc, ValueRange args) {
               LoweringBuilder b(loc, nested);
               Value odd = b.cmpi(
                   arith::CmpIPredicate::ne,
                   b.andi(b.toI32(linalg::IndexOp::create(b, 2)), b.i32(1)),
                   b.i32(0));
               Value code = e2m1Code(b, args[1], odd);
               // x * e2m1 is exact; the block scale 2^(s - 127) comes last
               // (e2m1 * 2^127 alone overflows f32).
               Value p = b.mul(b.mul(b.toF32(args[0]), decodeE2M1(b, code)),
                               decodeE8M0(b, args[2]));
               linalg::YieldOp::create(b, b.add(args[3], p));
             })
      .getResult(0);
}

/// Expert `expert`'s row range of a grouped operand with `m` rows: its
/// first row clamp(offsets[expert], 0, m) and its row count (0 for a
/// decreasing pair).
static std::pair<Value, Value> expertRows(LoweringBuilder &b, Value offsets,
                                          Value expert, Value m) {
  auto offsetAt = [&](Value i) {
    return b.clamp(b.toIndex(b.extract(offsets, {i})), b.idx(0), m);
  };
  Value lo = offsetAt(expert);
  Value hi = offsetAt(b.add(expert, b.idx(1)));
  return {lo, arith::MaxSIOp::create(b, b.sub(hi, lo), b.idx(0))};
}

namespace {

/// moe.expert_gemm => scf.for over experts: (gathered) row slice, f32
/// contraction with rhs[e], bias, GLU epilogue, row scale, rounding, then
/// insert_slice of the block (or row-by-row scatter to its destinations).
struct LowerExpertGemm : OpRewritePattern<ExpertGemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertGemmOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value lhs = op.getLhs(), rhs = op.getRhs(), offsets = op.getOffsets();
    Value gather = op.getGather(), bias = op.getBias();
    Value scatter = op.getScatter(), scale = op.getScale();
    auto resultType = op.getResult().getType();
    Type o = resultType.getElementType();
    bool transposed = op.getTransposeRhs();
    auto rhsType = op.getRhs().getType();
    int64_t e = rhsType.getDimSize(0);
    int64_t k = op.getLhs().getType().getDimSize(1);
    int64_t n = op.getGemmN(), outN = resultType.getDimSize(1);
    MLIRContext *ctx = b.getContext();
    Type f32 = b.getF32Type();

    Value m = gather ? b.dim(gather, 0) : b.dim(lhs, 0);
    Value mI32 = b.toI32(m);
    SmallVector<Value> dyn = dynRows(resultType, m);
    Value result = b.filled(resultType, dyn, b.scalar(o));

    AffineExpr dm = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
               dk = getAffineDimExpr(2, ctx);
    SmallVector<AffineMap> mmMaps = {
        AffineMap::get(3, 0, {dm, dk}, ctx),
        AffineMap::get(3, 0,
                       transposed ? ArrayRef<AffineExpr>{dn, dk}
                                  : ArrayRef<AffineExpr>{dk, dn},
                       ctx),
        AffineMap::get(3, 0, {dm, dn}, ctx)};
    SmallVector<utils::IteratorType> mmIters = {utils::IteratorType::parallel,
                                                utils::IteratorType::parallel,
                                                utils::IteratorType::reduction};
    auto weightType = RankedTensorType::get(
        transposed ? ArrayRef<int64_t>{n, k} : ArrayRef<int64_t>{k, n},
        rhsType.getElementType());
    auto accType = RankedTensorType::get({ShapedType::kDynamic, n}, f32);
    auto outAccType = RankedTensorType::get({ShapedType::kDynamic, outN}, f32);
    AffineMap id2 = b.getMultiDimIdentityMap(2);
    SmallVector<OpFoldResult> one2 = {b.getIndexAttr(1), b.getIndexAttr(1)};
    std::optional<GluParams> glu;
    if (op.hasGluEpilogue())
      glu = gluParamsOf(op);
    WeightFormat format = op.getFormat();
    Value rhsScale = op.getRhsScale();
    bool ue8m0 = op.getScaleFmt() == ScaleFmt::ue8m0;

    result = b.forLoop(
        b.idx(0), b.idx(e), {result},
        [&](LoweringBuilder &b, Value expert,
            ValueRange acc) -> SmallVector<Value> {
          Value lo, rows; // (captured below: no structured binding)
          std::tie(lo, rows) = expertRows(b, offsets, expert, m);
          Value lhsRows = buildLhsRows(b, lhs, gather, lo, rows);
          Value block;
          if (format != WeightFormat::plain) {
            block = lowPrecisionProducts(b, format, ue8m0, lhsRows, rows, rhs,
                                         rhsScale, expert, k, n);
          } else {
            SmallVector<OpFoldResult> wSizes = {b.getIndexAttr(1)};
            for (int64_t d : weightType.getShape())
              wSizes.push_back(b.getIndexAttr(d));
            Value weight = tensor::ExtractSliceOp::create(
                b, weightType, rhs,
                ArrayRef<OpFoldResult>{expert, b.getIndexAttr(0),
                                       b.getIndexAttr(0)},
                wSizes,
                ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                       b.getIndexAttr(1)});
            Value zero = b.filled(accType, {rows}, b.f32(0.0));
            block = linalg::GenericOp::create(
                        b, TypeRange{accType}, ValueRange{lhsRows, weight},
                        ValueRange{zero}, mmMaps, mmIters,
                        [&](OpBuilder &nested, Location loc, ValueRange args) {
                          LoweringBuilder b(loc, nested);
                          Value p = b.mul(b.toF32(args[0]), b.toF32(args[1]));
                          linalg::YieldOp::create(b, b.add(args[2], p));
                        })
                        .getResult(0);
          }
          if (bias) {
            auto biasRowType = RankedTensorType::get(
                {n}, cast<ShapedType>(bias.getType()).getElementType());
            Value biasRow = tensor::ExtractSliceOp::create(
                b, biasRowType, bias,
                ArrayRef<OpFoldResult>{expert, b.getIndexAttr(0)},
                ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(n)},
                one2);
            block =
                linalg::GenericOp::create(
                    b, TypeRange{accType}, ValueRange{block, biasRow},
                    ValueRange{b.empty(accType, {rows})},
                    ArrayRef<AffineMap>{
                        id2,
                        AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx),
                        id2},
                    b.parallel(2),
                    [&](OpBuilder &nested, Location loc, ValueRange args) {
                      LoweringBuilder b(loc, nested);
                      linalg::YieldOp::create(b,
                                              b.add(args[0], b.toF32(args[1])));
                    })
                    .getResult(0);
          }
          if (glu)
            block = buildGlu(b, block, outAccType, *glu);
          // Destination of block row r.
          auto destinationOf = [&](LoweringBuilder &b, Value r) -> Value {
            Value row = b.add(lo, r);
            return scatter ? b.extract(scatter, {row}) : b.toI32(row);
          };
          if (scale) {
            block =
                linalg::GenericOp::create(
                    b, TypeRange{outAccType}, ValueRange{block},
                    ValueRange{b.empty(outAccType, {rows})},
                    ArrayRef<AffineMap>{id2, id2}, b.parallel(2),
                    [&](OpBuilder &nested, Location loc, ValueRange args) {
                      LoweringBuilder b(loc, nested);
                      Value d = destinationOf(b, linalg::IndexOp::create(b, 0));
                      Value factor = b.ifElse(
                          b.inRange(d, b.i32(0), mI32), {f32},
                          [&](LoweringBuilder &b) -> SmallVector<Value> {
                            return {b.toF32(b.extract(scale, {b.toIndex(d)}))};
                          },
                          [&](LoweringBuilder &b) -> SmallVector<Value> {
                            return {b.f32(0.0)};
                          })[0];
                      linalg::YieldOp::create(b, b.mul(args[0], factor));
                    })
                    .getResult(0);
          }
          block = b.convertElements(block, o);
          if (!scatter)
            return {tensor::InsertSliceOp::create(
                        b, block, acc[0],
                        ArrayRef<OpFoldResult>{lo, b.getIndexAttr(0)},
                        ArrayRef<OpFoldResult>{rows, b.getIndexAttr(outN)},
                        one2)
                        .getResult()};
          SmallVector<OpFoldResult> rowSizes = {b.getIndexAttr(1),
                                                b.getIndexAttr(outN)};
          return b.forLoop(
              b.idx(0), rows, {acc[0]},
              [&](LoweringBuilder &b, Value r, ValueRange out) {
                Value d = destinationOf(b, r);
                return b.ifThen(
                    b.inRange(d, b.i32(0), mI32), out,
                    [&](LoweringBuilder &b) -> SmallVector<Value> {
                      Value row = tensor::ExtractSliceOp::create(
                          b, block,
                          ArrayRef<OpFoldResult>{r, b.getIndexAttr(0)},
                          rowSizes, one2);
                      return {tensor::InsertSliceOp::create(
                                  b, row, out[0],
                                  ArrayRef<OpFoldResult>{b.toIndex(d),
                                                         b.getIndexAttr(0)},
                                  rowSizes, one2)
                                  .getResult()};
                    });
              });
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.grouped_matmul_wgrad => scf.for over experts: the group's row slices
/// of lhs and rhs (read through their gathers when given) contracted over
/// their rows (an f32 generic initialised
/// with acc[e] or zero), rounded and inserted as result[e]. Empty groups
/// leave acc[e] or zero.
struct LowerGroupedMatmulWgrad : OpRewritePattern<GroupedMatmulWgradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupedMatmulWgradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    Value lhs = op.getLhs(), rhs = op.getRhs(), offsets = op.getOffsets();
    Value acc = op.getAcc();
    auto resultType = op.getResult().getType();
    Type o = resultType.getElementType();
    int64_t e = resultType.getDimSize(0), k = resultType.getDimSize(1),
            n = resultType.getDimSize(2);
    MLIRContext *ctx = b.getContext();
    Type f32 = b.getF32Type();
    Value lhsGather = op.getLhsGather(), rhsGather = op.getRhsGather();
    Value m = lhsGather ? b.dim(lhsGather, 0)
                        : (rhsGather ? b.dim(rhsGather, 0) : b.dim(lhs, 0));
    Value result = acc ? acc : b.filled(resultType, {}, b.scalar(o));
    auto blockType = RankedTensorType::get({k, n}, f32);
    AffineExpr dk = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
               dm = getAffineDimExpr(2, ctx);
    SmallVector<AffineMap> maps = {AffineMap::get(3, 0, {dm, dk}, ctx),
                                   AffineMap::get(3, 0, {dm, dn}, ctx),
                                   AffineMap::get(3, 0, {dk, dn}, ctx)};
    SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                              utils::IteratorType::parallel,
                                              utils::IteratorType::reduction};
    SmallVector<OpFoldResult> one3 = {b.getIndexAttr(1), b.getIndexAttr(1),
                                      b.getIndexAttr(1)};
    SmallVector<OpFoldResult> blockSizes = {
        b.getIndexAttr(1), b.getIndexAttr(k), b.getIndexAttr(n)};
    result = b.forLoop(
        b.idx(0), b.idx(e), {result},
        [&](LoweringBuilder &b, Value expert,
            ValueRange out) -> SmallVector<Value> {
          Value lo, rows; // (captured below: no structured binding)
          std::tie(lo, rows) = expertRows(b, offsets, expert, m);
          // The group's rows of each operand, through its gather if any.
          auto rowsOf = [&](Value v, Value gather) -> Value {
            return buildLhsRows(b, v, gather, lo, rows);
          };
          SmallVector<OpFoldResult> at = {expert, b.getIndexAttr(0),
                                          b.getIndexAttr(0)};
          Value init = acc ? tensor::ExtractSliceOp::create(
                                 b, blockType, acc, at, blockSizes, one3)
                                 .getResult()
                           : b.filled(blockType, {}, b.f32(0.0));
          Value block =
              linalg::GenericOp::create(
                  b, TypeRange{blockType},
                  ValueRange{rowsOf(lhs, lhsGather), rowsOf(rhs, rhsGather)},
                  ValueRange{init}, maps, iters,
                  [&](OpBuilder &nested, Location loc, ValueRange args) {
                    LoweringBuilder b(loc, nested);
                    Value p = b.mul(b.toF32(args[0]), b.toF32(args[1]));
                    linalg::YieldOp::create(b, b.add(args[2], p));
                  })
                  .getResult(0);
          block = b.convertElements(block, o);
          return {tensor::InsertSliceOp::create(b, block, out[0], at,
                                                blockSizes, one3)
                      .getResult()};
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.glu => buildGlu on the whole input.
struct LowerGlu : OpRewritePattern<GluOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GluOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    rewriter.replaceOp(op, buildGlu(b, op.getInput(), op.getResult().getType(),
                                    gluParamsOf(op)));
    return success();
  }
};

/// moe.glu_grad => one generic over the (row, pair) grid computing both
/// halves' gradients (gluGradValues), inserted into the input's layout.
struct LowerGluGrad : OpRewritePattern<GluGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GluGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = cast<RankedTensorType>(op.getResult().getType());
    Value input = op.getInput(), grad = op.getGrad();
    Type f = resultType.getElementType();
    int64_t n = resultType.getDimSize(1) / 2;
    SmallVector<Value> dyn = b.dynRowsOf(resultType, input);
    if (resultType.getDimSize(0) == 0) {
      rewriter.replaceOp(op, b.empty(resultType, dyn));
      return success();
    }
    GluParams p = gluParamsOf(op);
    GluHalves halves(b, input, n, p.layout);
    Value gateView = halves.extract(b, input, /*up=*/false);
    Value upView = halves.extract(b, input, /*up=*/true);
    auto halfType = RankedTensorType::get({resultType.getDimSize(0), n}, f);
    AffineMap id = b.getMultiDimIdentityMap(2);
    auto generic = linalg::GenericOp::create(
        b, TypeRange{halfType, halfType}, ValueRange{grad, gateView, upView},
        ValueRange{b.empty(halfType, dyn), b.empty(halfType, dyn)},
        ArrayRef<AffineMap>{id, id, id, id, id}, b.parallel(2),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          LoweringBuilder b(loc, nested);
          auto [dGate, dUp] = gluGradValues(b, p, b.toF32(args[0]),
                                            b.toF32(args[1]), b.toF32(args[2]));
          linalg::YieldOp::create(
              b, ValueRange{b.fromF32(dGate, f), b.fromF32(dUp, f)});
        });
    Value result = b.empty(resultType, dyn);
    result = halves.insert(b, generic.getResult(0), result, /*up=*/false);
    result = halves.insert(b, generic.getResult(1), result, /*up=*/true);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// moe.row_dot => one generic over (row, column), the column a reduction
/// (in order), into `acc` or zeros (f32), then rounded to the result type.
struct LowerRowDot : OpRewritePattern<RowDotOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RowDotOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    auto accType = RankedTensorType::get(resultType.getShape(), b.getF32Type());
    Value init = op.getAcc();
    if (init) // its static / dynamic M may differ from the result's
      accType = cast<RankedTensorType>(init.getType());
    else
      init = b.filled(accType, b.dynRowsOf(accType, op.getLhs()), b.f32(0.0));
    MLIRContext *ctx = b.getContext();
    AffineMap id = b.getMultiDimIdentityMap(2);
    AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                              utils::IteratorType::reduction};
    Value dot = linalg::GenericOp::create(
                    b, TypeRange{accType}, ValueRange{op.getLhs(), op.getRhs()},
                    ValueRange{init}, ArrayRef<AffineMap>{id, id, row}, iters,
                    [&](OpBuilder &nested, Location loc, ValueRange args) {
                      LoweringBuilder b(loc, nested);
                      Value p = b.mul(b.toF32(args[0]), b.toF32(args[1]));
                      linalg::YieldOp::create(b, b.add(args[2], p));
                    })
                    .getResult(0);
    dot = b.convertElements(dot, resultType.getElementType());
    if (dot.getType() != resultType)
      dot = tensor::CastOp::create(b, resultType, dot);
    rewriter.replaceOp(op, dot);
    return success();
  }
};

/// moe.expert_gemm_glu_grad => the GEMM as an f32 moe.expert_gemm (g,
/// never rounded), then one generic over (row, pair) for the GLU backward
/// of the routing-weighted g and the scaled activation, and one over (row,
/// column), the column a reduction in order, for the routing-weight
/// gradient (acc + <g, a>).
struct LowerExpertGemmGluGrad : OpRewritePattern<ExpertGemmGluGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertGemmGluGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto dhType = op.getInputGrad().getType();
    auto actType = op.getScaledAct().getType();
    auto dwType = op.getWeightGrad().getType();
    Type f = dhType.getElementType();
    int64_t n = actType.getDimSize(1);
    Value h = op.getPreact(), weights = op.getWeights();
    Type f32 = b.getF32Type();
    GluParams p = gluParamsOf(op);
    if (dhType.getDimSize(0) == 0) { // static M = 0: nothing to compute
      rewriter.replaceOp(
          op, {b.empty(dhType, {}), b.empty(actType, {}), b.empty(dwType, {})});
      return success();
    }
    SmallVector<Value> dyn = b.dynRowsOf(dhType, h);
    Value g = buildGradientGemm(b, op);
    GluHalves halves(b, h, n, p.layout);
    Value gate = halves.extract(b, h, /*up=*/false);
    Value up = halves.extract(b, h, /*up=*/true);
    MLIRContext *ctx = b.getContext();
    AffineMap id = b.getMultiDimIdentityMap(2);
    AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    auto halfType = RankedTensorType::get({dhType.getDimSize(0), n}, f);
    auto parts = linalg::GenericOp::create(
        b, TypeRange{halfType, halfType, actType},
        ValueRange{g, gate, up, weights},
        ValueRange{b.empty(halfType, dyn), b.empty(halfType, dyn),
                   b.empty(actType, dyn)},
        ArrayRef<AffineMap>{id, id, id, row, id, id, id}, b.parallel(2),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          LoweringBuilder b(loc, nested);
          Value w = b.toF32(args[3]);
          Value gv = b.toF32(args[1]), uv = b.toF32(args[2]);
          auto [dGate, dUp] = gluGradValues(b, p, b.mul(w, args[0]), gv, uv);
          Value a = gluValue(b, p, gv, uv);
          linalg::YieldOp::create(b, ValueRange{b.fromF32(dGate, f),
                                                b.fromF32(dUp, f),
                                                b.fromF32(b.mul(w, a), f)});
        });
    Value dh = b.empty(dhType, dyn);
    dh = halves.insert(b, parts.getResult(0), dh, /*up=*/false);
    dh = halves.insert(b, parts.getResult(1), dh, /*up=*/true);

    auto accType = RankedTensorType::get({dhType.getDimSize(0)}, f32);
    Value init = op.getAcc();
    if (init)
      accType = cast<RankedTensorType>(init.getType());
    else
      init = b.filled(accType, b.dynRowsOf(accType, h), b.f32(0.0));
    SmallVector<utils::IteratorType> iters = {utils::IteratorType::parallel,
                                              utils::IteratorType::reduction};
    Value dot =
        linalg::GenericOp::create(
            b, TypeRange{accType}, ValueRange{g, gate, up}, ValueRange{init},
            ArrayRef<AffineMap>{id, id, id, row}, iters,
            [&](OpBuilder &nested, Location loc, ValueRange args) {
              LoweringBuilder b(loc, nested);
              Value a = gluValue(b, p, b.toF32(args[1]), b.toF32(args[2]));
              linalg::YieldOp::create(b, b.add(args[3], b.mul(args[0], a)));
            })
            .getResult(0);
    dot = b.convertElements(dot, dwType.getElementType());
    if (dot.getType() != dwType)
      dot = tensor::CastOp::create(b, dwType, dot);
    Value act = parts.getResult(2);
    rewriter.replaceOp(op, {dh, act, dot});
    return success();
  }
};

} // namespace

void mlir::moe::populateExpertComputeLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerExpertGemm, LowerExpertGemmGluGrad, LowerGroupedMatmulWgrad,
               LowerGlu, LowerGluGrad, LowerRowDot>(patterns.getContext());
}
