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
///
/// Rooted at the cumsum's last user (every user in one block), so a single
/// walk has already visited everything the rewrite erases.
struct FuseDispatch : RewritePattern {
  FuseDispatch(MLIRContext *ctx, ControlMoeFusionFn control)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        control(std::move(control)) {}

  LogicalResult matchAndRewrite(Operation *root,
                                PatternRewriter &rewriter) const override {
    Value cumsumValue;
    if (auto gi = dyn_cast<GetIndicesOp>(root))
      cumsumValue = gi.getCumsum();
    else if (auto ip = dyn_cast<GetIndptrOp>(root))
      cumsumValue = ip.getCumsum();
    else
      return failure();
    auto cumsum = cumsumValue.getDefiningOp<CumsumOp>();
    if (!cumsum)
      return rewriter.notifyMatchFailure(root, "not fed by moe.cumsum");
    Value ids = cumsum.getIndices();
    int64_t e = cumsum.getNumExperts();
    SmallVector<GetIndicesOp> indicesUsers;
    SmallVector<GetIndptrOp> indptrUsers;
    for (Operation *user : cumsum->getUsers()) {
      if (user->getBlock() != root->getBlock() ||
          (user != root && !user->isBeforeInBlock(root)))
        return rewriter.notifyMatchFailure(root, "not the last user");
      if (auto gi = dyn_cast<GetIndicesOp>(user)) {
        if (gi.getIndices() != ids)
          return rewriter.notifyMatchFailure(user, "indices differ");
        indicesUsers.push_back(gi);
        continue;
      }
      if (auto ip = dyn_cast<GetIndptrOp>(user)) {
        if (ip.getInclusive() ||
            static_cast<int64_t>(ip.getNumExperts()) != e ||
            !ip.getResult().getType().getElementType().isInteger(32))
          return rewriter.notifyMatchFailure(
              user, "only exclusive i32 indptr with the same E fuses");
        indptrUsers.push_back(ip);
        continue;
      }
      return rewriter.notifyMatchFailure(user, "cumsum has another user");
    }
    if (!shouldFuse(control, MoeFusionKind::Dispatch, cumsum, root))
      return rewriter.notifyMatchFailure(cumsum, "policy declined");

    rewriter.setInsertionPoint(cumsum);
    auto dispatch = DispatchOp::create(rewriter, cumsum.getLoc(), ids, e);
    for (GetIndicesOp gi : indicesUsers)
      rewriter.replaceOp(
          gi, {dispatch.getReverseIndices(), dispatch.getTokenIndices()});
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
    applyFusionPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
