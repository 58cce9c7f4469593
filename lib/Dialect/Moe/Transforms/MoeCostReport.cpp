//===- MoeCostReport.cpp - kernels and intermediates per function ---------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Prints, per function, the tensor-level compute ops (moe and linalg: each
// one or more kernels on a backend, which --moe-gpu-launch-report counts
// for the GPU lowering) and the tensors that are materialised between them,
// with sizes in bytes as `a*T + b`. Dynamic dims are tracked as multiples of
// the token count T: every dynamic dim of a function argument is T, and each
// op's rule below says how its results' dynamic dims follow from its operands'
// (M = T*k for the dispatch maps, E*T for the cumsum, ...). A dim no rule
// explains is printed as `?`.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "moe-cost-report"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOECOSTREPORTPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// A size `perToken * T + fixed`, or unknown.
struct Size {
  int64_t perToken = 0, fixed = 0;
  bool known = true;

  static Size unknown() { return {0, 0, false}; }
  Size operator+(const Size &o) const {
    if (!known || !o.known)
      return unknown();
    return {perToken + o.perToken, fixed + o.fixed, true};
  }
  void print(raw_ostream &os) const {
    if (!known) {
      os << "?";
      return;
    }
    if (perToken && fixed)
      os << perToken << "*T + " << fixed;
    else if (perToken)
      os << perToken << "*T";
    else
      os << fixed;
  }
};

/// Dynamic-dim coefficients: value -> per-dim multiple of T (static dims
/// hold their size; -1 = unknown).
class TokenDims {
public:
  void setArgument(Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      return;
    SmallVector<int64_t> dims;
    for (int64_t d : type.getShape())
      dims.push_back(ShapedType::isDynamic(d) ? 1 : d);
    coeffs[v] = dims;
  }

  /// Coefficient of dim `d` of `v` (T-multiple when dynamic).
  int64_t of(Value v, unsigned d) const {
    auto it = coeffs.find(v);
    if (it == coeffs.end() || d >= it->second.size())
      return -1;
    return it->second[d];
  }

  void infer(Operation *op) {
    for (OpResult r : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type)
        continue;
      SmallVector<int64_t> dims;
      for (auto [d, size] : llvm::enumerate(type.getShape()))
        dims.push_back(ShapedType::isDynamic(size) ? dynamicDim(op, r, d)
                                                   : size);
      coeffs[r] = dims;
    }
  }

  /// Bytes of `v`.
  Size bytes(Value v) const {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t elementBytes =
        std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    int64_t product = elementBytes;
    int dynamicDims = 0;
    for (auto [d, size] : llvm::enumerate(type.getShape())) {
      int64_t c = ShapedType::isDynamic(size) ? of(v, d) : size;
      if (c < 0)
        return Size::unknown();
      dynamicDims += ShapedType::isDynamic(size);
      product *= c;
    }
    if (dynamicDims > 1)
      return Size::unknown();
    return dynamicDims ? Size{product, 0, true} : Size{0, product, true};
  }

private:
  /// Rules for the dynamic dim `d` of result `r` of `op`.
  int64_t dynamicDim(Operation *op, OpResult r, unsigned d) {
    auto mul = [](int64_t a, int64_t b) { return a < 0 ? -1 : a * b; };
    if (auto cs = dyn_cast<CumsumOp>(op))
      return mul(of(cs.getIndices(), 0), cs.getNumExperts());
    if (auto gi = dyn_cast<GetIndicesOp>(op))
      return mul(of(gi.getIndices(), 0),
                 gi.getIndices().getType().getDimSize(1));
    if (auto ds = dyn_cast<DispatchOp>(op))
      return mul(of(ds.getIndices(), 0),
                 ds.getIndices().getType().getDimSize(1));
    if (auto rd = dyn_cast<RouteDispatchOp>(op))
      return r.getResultNumber() >= 3
                 ? mul(of(rd.getLogits(), 0), static_cast<int64_t>(rd.getK()))
                 : of(rd.getLogits(), 0);
    if (auto g = dyn_cast<GatherOp>(op))
      return of(g.getIndices(), 0);
    if (auto eg = dyn_cast<ExpertGemmOp>(op))
      return eg.getGather() ? of(eg.getGather(), 0) : of(eg.getLhs(), 0);
    if (auto ex = dyn_cast<tensor::ExpandShapeOp>(op)) {
      SmallVector<OpFoldResult> shape = ex.getMixedOutputShape();
      if (auto v = dyn_cast<Value>(shape[d]))
        if (auto dim = v.getDefiningOp<tensor::DimOp>())
          if (auto idx = dim.getConstantIndex())
            return of(dim.getSource(), *idx);
      return -1;
    }
    if (auto co = dyn_cast<tensor::CollapseShapeOp>(op)) {
      int64_t c = 1;
      for (int64_t src : co.getReassociationIndices()[d]) {
        int64_t s = of(co.getSrc(), src);
        if (s < 0)
          return -1;
        c *= s;
      }
      return c;
    }
    if (auto cast = dyn_cast<tensor::CastOp>(op))
      return of(cast.getSource(), d);
    // Row-preserving ops (route, topk, glu, scatter, combine, matmuls,
    // linalg on the same rows): dim 0 follows operand 0's dim 0.
    if (d == 0 && op->getNumOperands() > 0)
      return of(op->getOperand(0), 0);
    return -1;
  }

  DenseMap<Value, SmallVector<int64_t>> coeffs;
};

/// The tensor-level compute ops (each becomes one or more kernels).
static bool isComputeOp(Operation *op) {
  return isa<MoeDialect, linalg::LinalgDialect>(op->getDialect());
}

struct MoeCostReportPass
    : mlir::moe::impl::MoeCostReportPassBase<MoeCostReportPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation()->walk([&](FunctionOpInterface func) {
      if (func.isExternal())
        return;
      report(func, llvm::errs());
    });
    markAllAnalysesPreserved();
  }

  void report(FunctionOpInterface func, raw_ostream &os) {
    TokenDims dims;
    for (BlockArgument arg : func.getArguments())
      dims.setArgument(arg);
    SmallVector<Operation *> computeOps;
    SmallVector<Value> intermediates;
    func.walk([&](Operation *op) {
      dims.infer(op);
      if (!isComputeOp(op) || op->getParentOp() != func.getOperation())
        return;
      computeOps.push_back(op);
      for (Value r : op->getResults()) {
        if (!isa<RankedTensorType>(r.getType()))
          continue;
        bool internal = llvm::any_of(r.getUsers(), [](Operation *user) {
          return !user->hasTrait<OpTrait::ReturnLike>();
        });
        if (internal)
          intermediates.push_back(r);
      }
    });

    os << "moe-cost-report";
    if (!label.empty())
      os << " [" << label << "]";
    os << " @" << func.getName() << ": " << computeOps.size()
       << " compute ops, " << intermediates.size() << " intermediates\n";
    for (Operation *op : computeOps)
      os << "  op " << op->getName() << "\n";
    Size total;
    for (Value v : intermediates) {
      auto r = cast<OpResult>(v);
      Size s = dims.bytes(v);
      total = total + s;
      os << "  intermediate " << r.getOwner()->getName() << " #"
         << r.getResultNumber() << " " << v.getType() << " : ";
      s.print(os);
      os << " bytes\n";
    }
    os << "  total intermediate bytes: ";
    total.print(os);
    os << "\n";
  }
};

} // namespace
