//===- BackwardToGPU.cpp - the backward primitives as GPU kernels ---------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The portable GPU kernels of the layer's backward (moe.ffn_grad and
// moe.ffn_train decompose into these and the forward primitives): every
// result element is computed by one thread in the order the CPU lowering
// (MoeToLinalg) computes it, so the kernels are deterministic (no atomics,
// no order that depends on scheduling) and write every element (empty
// experts' weight gradients are exactly `acc` or zero).
//
// - moe.glu_grad: one thread per (row, output column): both halves of the
//   pair (gluGradValues, the CPU lowering's function).
// - moe.row_dot: one warp per row: each lane's columns in order in f32,
//   then a fixed butterfly over the lanes, then acc (deterministic).
// - moe.expert_gemm_glu_grad: the GEMM (f32 result) by the forward's
//   engines, then a warp per row as row_dot for the GLU backward, the
//   scaled activation and the routing-weight gradient together.
// - moe.combine_grad: one thread per (token, slot, column).
// - moe.route_grad: one thread per token: the k picks' contributions
//   once, then per expert its picks' sum (the scores on demand).
// - moe.grouped_matmul_wgrad: on sm_90a with 16-bit operands and K, N
//   multiples of 64, the Hopper kernel (Gemm/WgmmaWgrad.cpp); else one
//   thread per (expert, k, n), its group's rows contracted in order in f32.
//
//===----------------------------------------------------------------------===//

#include "Gemm/GemmKernel.h"
#include "KernelBuilder.h"
#include "Patterns.h"

#include "Utils/Glu.h"
#include "Utils/Selection.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"
#include "moe-mlir/Dialect/Moe/Transforms/Transforms.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using CmpI = arith::CmpIPredicate;
using CmpF = arith::CmpFPredicate;

namespace {

/// The end of a warp-per-row dot product: the lanes' partial sums `part`
/// through a fixed butterfly (every lane the same bits), then lane 0
/// stores acc[row] + sum (acc optional) as `o` into out[row].
void storeWarpRowSum(LoweringBuilder &b, Value part, Value lane, Value acc,
                     Value out, Value row, Type o) {
  Value dot = warpAllReduce(
      b, {part},
      [](LoweringBuilder &b, ValueRange x, ValueRange y) -> SmallVector<Value> {
        return {b.add(x[0], y[0])};
      })[0];
  when(b, b.cmpi(CmpI::eq, lane, b.idx(0)), [&](LoweringBuilder &b) {
    Value total = acc ? b.add(b.load(acc, {row}), dot) : dot;
    b.store(b.fromF32(total, o), out, {row});
  });
}

struct GluGradToGPU : OpRewritePattern<GluGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GluGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    int64_t n = resultType.getDimSize(1) / 2;
    GluParams p = gluParamsOf(op);
    Value grad = toBuffer(b, op.getGrad());
    Value input = toBuffer(b, op.getInput());
    Value rows = b.memDim(input, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, rows));
    launchRowsCols(
        b, rows, b.idx(n), [&](LoweringBuilder &b, Value row, Value col) {
          auto [gateCol, upCol] = gluPairColumns(b, p.layout, n, col);
          auto [dGate, dUp] =
              gluGradValues(b, p, b.toF32(b.load(grad, {row, col})),
                            b.toF32(b.load(input, {row, gateCol})),
                            b.toF32(b.load(input, {row, upCol})));
          b.store(b.fromF32(dGate, f), out, {row, gateCol});
          b.store(b.fromF32(dUp, f), out, {row, upCol});
        });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

struct RowDotToGPU : OpRewritePattern<RowDotOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RowDotOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type o = resultType.getElementType();
    int64_t n = op.getLhs().getType().getDimSize(1);
    Value lhs = toBuffer(b, op.getLhs());
    Value rhs = toBuffer(b, op.getRhs());
    Value acc = op.getAcc() ? toBuffer(b, op.getAcc()) : Value();
    Value m = b.memDim(lhs, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, m));
    // One warp per row: lane l sums columns l, l + 32, ... in order (the
    // warp's loads coalesced), then a butterfly over the lanes (every lane
    // the same bits), then acc. (One thread per row read a whole row
    // alone: at I = 14336 a long chain of uncoalesced loads per thread.)
    launchWarpPerRow(b, m, [&](LoweringBuilder &b, Value row, Value lane) {
      Value part = b.forLoop(lane, b.idx(n), b.idx(kWarpSize), {b.f32(0.0)},
                             [&](LoweringBuilder &b, Value col,
                                 ValueRange sum) -> SmallVector<Value> {
                               Value p =
                                   b.mul(b.toF32(b.load(lhs, {row, col})),
                                         b.toF32(b.load(rhs, {row, col})));
                               return {b.add(sum[0], p)};
                             })[0];
      storeWarpRowSum(b, part, lane, acc, out, row, o);
    });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

/// moe.expert_gemm_glu_grad: the GEMM as an f32 moe.expert_gemm (the
/// engines of the forward: the Hopper kernel on sm_90a), then one kernel,
/// a warp per row: lane l takes columns l, l + 32, ... in order (the
/// warp's loads of g, gate and up coalesced), computes a = glu(gate, up),
/// the GLU backward of w * g into input_grad and w * a into scaled_act,
/// and sums g * a; a fixed butterfly over the lanes, then acc, gives the
/// routing-weight gradient (deterministic).
struct ExpertGemmGluGradToGPU : OpRewritePattern<ExpertGemmGluGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertGemmGluGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto dhType = op.getInputGrad().getType();
    auto actType = op.getScaledAct().getType();
    auto dwType = op.getWeightGrad().getType();
    Type f = dhType.getElementType();
    int64_t n = actType.getDimSize(1);
    GluParams p = gluParamsOf(op);
    Value g = toBuffer(b, buildGradientGemm(b, op).getResult());
    Value h = toBuffer(b, op.getPreact());
    Value weights = toBuffer(b, op.getWeights());
    Value acc = op.getAcc() ? toBuffer(b, op.getAcc()) : Value();
    Value m = b.memDim(h, 0);
    Value dh = allocBuffer(b, dhType, dynRows(dhType, m));
    Value act = allocBuffer(b, actType, dynRows(actType, m));
    Value dw = allocBuffer(b, dwType, dynRows(dwType, m));
    launchWarpPerRow(b, m, [&](LoweringBuilder &b, Value row, Value lane) {
      Value w = b.toF32(b.load(weights, {row}));
      Value part = b.forLoop(
          lane, b.idx(n), b.idx(kWarpSize), {b.f32(0.0)},
          [&](LoweringBuilder &b, Value col,
              ValueRange sum) -> SmallVector<Value> {
            auto [gateCol, upCol] = gluPairColumns(b, p.layout, n, col);
            Value gv = b.load(g, {row, col});
            Value gate = b.toF32(b.load(h, {row, gateCol}));
            Value up = b.toF32(b.load(h, {row, upCol}));
            Value a = gluValue(b, p, gate, up);
            auto [dGate, dUp] = gluGradValues(b, p, b.mul(w, gv), gate, up);
            b.store(b.fromF32(dGate, f), dh, {row, gateCol});
            b.store(b.fromF32(dUp, f), dh, {row, upCol});
            b.store(b.fromF32(b.mul(w, a), f), act, {row, col});
            return {b.add(sum[0], b.mul(gv, a))};
          })[0];
      storeWarpRowSum(b, part, lane, acc, dw, row, dwType.getElementType());
    });
    rewriter.replaceOp(op,
                       {toTensor(b, dh), toTensor(b, act), toTensor(b, dw)});
    return success();
  }
};

struct CombineGradToGPU : OpRewritePattern<CombineGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CombineGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type f = resultType.getElementType();
    int64_t k = resultType.getDimSize(1), h = resultType.getDimSize(2);
    Value grad = toBuffer(b, op.getGrad());
    Value weights = op.getWeights() ? toBuffer(b, op.getWeights()) : Value();
    Value t = b.memDim(grad, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, t));
    launchRowsCols(b, b.mul(t, b.idx(k)), b.idx(h),
                   [&](LoweringBuilder &b, Value slot, Value col) {
                     auto [row, j] = rowAndSlot(b, slot, k);
                     Value x = b.toF32(b.load(grad, {row, col}));
                     if (weights)
                       x = b.mul(b.toF32(b.load(weights, {row, j})), x);
                     b.store(b.fromF32(x, f), out, {row, j, col});
                   });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

struct RouteGradToGPU : OpRewritePattern<RouteGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RouteGradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    Type o = resultType.getElementType();
    int64_t e = op.getLogits().getType().getDimSize(1);
    int64_t k = op.getGrad().getType().getDimSize(1);
    bool softmax = op.getScoring() == ScoringFn::softmax;
    bool normalize = op.getNormalize();
    float scalingValue = op.getScaling().convertToFloat();
    Value grad = toBuffer(b, op.getGrad());
    Value logits = toBuffer(b, op.getLogits());
    Value indices = toBuffer(b, op.getIndices());
    Value t = b.memDim(logits, 0);
    Value out = allocBuffer(b, resultType, dynRows(resultType, t));
    launchForEach(b, t, [&](LoweringBuilder &b, Value row) {
      Value zero = b.idx(0), numExperts = b.idx(e);
      Value eI32 = b.i32(e), scaling = b.f32(scalingValue);
      RoutingScores routing(b, e, softmax, [&](LoweringBuilder &b, Value col) {
        return b.load(logits, {row, col});
      });
      // The k picks (unrolled: k is static) and their contributions to ds,
      // once per token: S and D over the valid picks in slot order, then
      // c_j = scaling * d_j (as the CPU lowering adds them).
      SmallVector<Value> id(k), valid(k), g(k), s(k);
      Value sum = b.f32(0.0), dot = b.f32(0.0);
      for (int64_t j = 0; j < k; ++j) {
        id[j] = b.load(indices, {row, b.idx(j)});
        valid[j] = b.inRange(id[j], b.i32(0), eI32);
        g[j] = b.toF32(b.load(grad, {row, b.idx(j)}));
        Value safeId = b.toIndex(b.select(valid[j], id[j], b.i32(0)));
        s[j] = routing.score(b, safeId);
        sum = b.select(valid[j], b.add(sum, s[j]), sum);
        dot = b.select(valid[j], b.add(dot, b.mul(g[j], s[j])), dot);
      }
      Value normalized =
          normalize ? b.cmpf(CmpF::OGT, sum, b.f32(0.0)) : Value();
      SmallVector<Value> c(k);
      for (int64_t j = 0; j < k; ++j) {
        Value d = g[j];
        if (normalized) {
          Value safe = b.select(normalized, sum, b.f32(1.0));
          Value n = b.div(b.sub(g[j], b.div(dot, safe)), safe);
          d = b.select(normalized, n, g[j]);
        }
        c[j] = b.mul(scaling, d);
      }
      // ds[col]: the contributions of the picks of expert col, in slot
      // order from 0.
      auto dsOf = [&](LoweringBuilder &b, Value col) {
        Value colI32 = b.toI32(col), ds = b.f32(0.0);
        for (int64_t j = 0; j < k; ++j)
          ds = b.select(b.andi(valid[j], b.cmpi(CmpI::eq, id[j], colI32)),
                        b.add(ds, c[j]), ds);
        return ds;
      };
      Value dsDot = b.f32(0.0);
      if (softmax)
        dsDot =
            b.forLoop(zero, numExperts, {dsDot},
                      [&](LoweringBuilder &b, Value col,
                          ValueRange acc) -> SmallVector<Value> {
                        return {b.add(acc[0], b.mul(dsOf(b, col),
                                                    routing.score(b, col)))};
                      })[0];
      forEach(b, zero, numExperts, b.idx(1),
              [&](LoweringBuilder &b, Value col) {
                Value s = routing.score(b, col);
                Value d = dsOf(b, col);
                Value v = softmax ? b.mul(s, b.sub(d, dsDot))
                                  : b.mul(b.mul(d, s), b.sub(b.f32(1.0), s));
                b.store(b.fromF32(v, o), out, {row, col});
              });
    });
    rewriter.replaceOp(op, toTensor(b, out));
    return success();
  }
};

/// The portable weight-gradient kernel: one thread per (expert, k, n), its
/// group's rows (through their gathers) contracted in order in f32.
void emitSimtWgrad(LoweringBuilder &b, const gpu_lowering::WgradOperands &w) {
  int64_t k = w.kDim, n = w.nDim;
  launchRowsCols(
      b, b.idx(w.numExperts * k), b.idx(n),
      [&](LoweringBuilder &b, Value ek, Value col) {
        Value expert = arith::DivUIOp::create(b, ek, b.idx(k));
        Value kk = arith::RemUIOp::create(b, ek, b.idx(k));
        auto offsetAt = [&](Value i) {
          return b.clamp(b.toIndex(b.load(w.offsets, {i})), b.idx(0), w.m);
        };
        Value lo = offsetAt(expert);
        Value hi =
            arith::MaxSIOp::create(b, offsetAt(b.add(expert, b.idx(1))), lo);
        Value init = w.acc ? b.load(w.acc, {expert, kk, col}) : b.f32(0.0);
        // Element (row r, column c) of an operand, through its gather.
        auto element = [&](LoweringBuilder &b, Value buf, Value gather,
                           Value rows, Value r, Value c) -> Value {
          if (!gather)
            return b.toF32(b.load(buf, {r, c}));
          auto [src, ok] =
              gpu_lowering::WgradOperands::sourceRow(b, gather, rows, r);
          return b.ifElse(
              ok, {b.getF32Type()},
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.toF32(b.load(buf, {src, c}))};
              },
              [&](LoweringBuilder &b) -> SmallVector<Value> {
                return {b.f32(0.0)};
              })[0];
        };
        Value sum =
            b.forLoop(lo, hi, {init},
                      [&](LoweringBuilder &b, Value r,
                          ValueRange s) -> SmallVector<Value> {
                        Value p = b.mul(
                            element(b, w.lhs, w.lhsGather, w.lhsRows, r, kk),
                            element(b, w.rhs, w.rhsGather, w.rhsRows, r, col));
                        return {b.add(s[0], p)};
                      })[0];
        b.store(b.fromF32(sum, w.outElem), w.out, {expert, kk, col});
      });
}

struct GroupedMatmulWgradToGPU : OpRewritePattern<GroupedMatmulWgradOp> {
  GroupedMatmulWgradToGPU(MLIRContext *ctx,
                          const ConvertMoeToGPUPassOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(GroupedMatmulWgradOp op,
                                PatternRewriter &rewriter) const override {
    LoweringBuilder b(op.getLoc(), rewriter);
    auto resultType = op.getResult().getType();
    gpu_lowering::WgradOperands w;
    w.lhs = toBuffer(b, op.getLhs());
    w.rhs = toBuffer(b, op.getRhs());
    w.offsets = toBuffer(b, op.getOffsets());
    w.acc = op.getAcc() ? toBuffer(b, op.getAcc()) : Value();
    w.lhsGather = op.getLhsGather() ? toBuffer(b, op.getLhsGather()) : Value();
    w.rhsGather = op.getRhsGather() ? toBuffer(b, op.getRhsGather()) : Value();
    w.lhsRows = b.memDim(w.lhs, 0);
    w.rhsRows = b.memDim(w.rhs, 0);
    w.m = w.lhsGather   ? b.memDim(w.lhsGather, 0)
          : w.rhsGather ? b.memDim(w.rhsGather, 0)
                        : w.lhsRows;
    w.numExperts = resultType.getDimSize(0);
    w.kDim = resultType.getDimSize(1);
    w.nDim = resultType.getDimSize(2);
    w.inElem = op.getLhs().getType().getElementType();
    w.outElem = resultType.getElementType();
    w.out = allocBuffer(b, resultType, {});
    // The Hopper kernel where it can run and the rows allow its 16-byte
    // copies (checked on the host at call time), else the portable one.
    if (std::optional<gpu_lowering::WgradConfig> config =
            gpu_lowering::chooseWgradConfig(op, options)) {
      scf::IfOp::create(
          b, gpu_lowering::wgradOperandsAligned(b, w),
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder nb(loc, nested);
            gpu_lowering::emitWgmmaWgrad(nb, w, *config);
            scf::YieldOp::create(nb);
          },
          [&](OpBuilder &nested, Location loc) {
            LoweringBuilder nb(loc, nested);
            emitSimtWgrad(nb, w);
            scf::YieldOp::create(nb);
          });
    } else {
      emitSimtWgrad(b, w);
    }
    rewriter.replaceOp(op, toTensor(b, w.out));
    return success();
  }

  ConvertMoeToGPUPassOptions options;
};

} // namespace

void mlir::moe::populateBackwardToGPUPatterns(
    RewritePatternSet &patterns, const ConvertMoeToGPUPassOptions &options) {
  patterns.add<GluGradToGPU, RowDotToGPU, ExpertGemmGluGradToGPU,
               CombineGradToGPU, RouteGradToGPU>(patterns.getContext());
  patterns.add<GroupedMatmulWgradToGPU>(patterns.getContext(), options);
}
