//===- MoeFuseDispatch.cpp - cumsum + get_indices/indptr -> dispatch ------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "FusionUtils.h"

#define DEBUG_TYPE "moe-fuse-dispatch"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFUSEDISPATCHPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// cumsum(ids) used only by get_indices(_, ids) and exclusive i32
/// get_indptr  =>  dispatch(ids)
struct FuseDispatch : OpRewritePattern<CumsumOp> {
  FuseDispatch(MLIRContext *ctx, ControlMoeFusionFn control)
      : OpRewritePattern(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(CumsumOp cumsum,
                                PatternRewriter &rewriter) const override {
    Value ids = cumsum.getIndices();
    int64_t e = cumsum.getNumExperts();
    SmallVector<GetIndicesOp> indicesUsers;
    SmallVector<GetIndptrOp> indptrUsers;
    for (Operation *user : cumsum->getUsers()) {
      if (auto gi = dyn_cast<GetIndicesOp>(user)) {
        if (gi.getIndices() != ids || gi.getCumsum() != cumsum.getResult())
          return rewriter.notifyMatchFailure(user, "indices differ");
        indicesUsers.push_back(gi);
        continue;
      }
      if (auto ip = dyn_cast<GetIndptrOp>(user)) {
        if (ip.getInclusive() || ip.getNumExperts() != e ||
            !ip.getResult().getType().getElementType().isInteger(32))
          return rewriter.notifyMatchFailure(
              user, "only exclusive i32 indptr with the same E fuses");
        indptrUsers.push_back(ip);
        continue;
      }
      return rewriter.notifyMatchFailure(user, "cumsum has another user");
    }
    if (indicesUsers.empty() && indptrUsers.empty())
      return rewriter.notifyMatchFailure(cumsum, "no users");
    Operation *consumer = indicesUsers.empty()
                              ? indptrUsers.front().getOperation()
                              : indicesUsers.front().getOperation();
    if (!shouldFuse(control, MoeFusionKind::Dispatch, cumsum, consumer))
      return rewriter.notifyMatchFailure(cumsum, "policy declined");

    auto dispatch = DispatchOp::create(rewriter, cumsum.getLoc(), ids, e);
    for (GetIndicesOp gi : indicesUsers)
      rewriter.replaceOp(gi, {dispatch.getReverseIndices(),
                              dispatch.getTokenIndices()});
    for (GetIndptrOp ip : indptrUsers)
      rewriter.replaceOp(ip, dispatch.getOffsets());
    rewriter.eraseOp(cumsum);
    return success();
  }

  ControlMoeFusionFn control;
};

} // namespace

void mlir::moe::populateMoeFuseDispatchPatterns(
    RewritePatternSet &patterns, const ControlMoeFusionFn &control) {
  patterns.add<FuseDispatch>(patterns.getContext(), control);
}

namespace {
struct MoeFuseDispatchPass
    : mlir::moe::impl::MoeFuseDispatchPassBase<MoeFuseDispatchPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoeFuseDispatchPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
