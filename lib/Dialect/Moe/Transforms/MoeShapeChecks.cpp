//===- MoeShapeChecks.cpp - the run-time shape rules of public functions --===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Which dynamic sizes of a public function's tensor arguments must agree,
// recorded as `moe.shape_checks` for --moe-emit-shape-checks (which emits
// the checks once the function takes memrefs).
//
// Every dynamic dimension of a ranked tensor in the function is a node of a
// weighted union-find: size(node) = ratio(node) * size(root), ratios
// rational. Op rules unite nodes (`size(a) == r * size(b)`) or bind a class
// to a static size. Argument dimensions that end up in one class must agree
// up to their ratios; one argument dimension per class is the reference the
// others are checked against.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <numeric>

#define DEBUG_TYPE "moe-shape-checks"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOESHAPECHECKSPASS
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

/// A positive rational num / den in lowest terms.
struct Ratio {
  int64_t num = 1, den = 1;

  static Ratio of(int64_t n, int64_t d) {
    int64_t g = std::gcd(n, d);
    return {n / g, d / g};
  }
  Ratio operator*(Ratio o) const {
    return of(num / std::gcd(num, o.den) * (o.num / std::gcd(o.num, den)),
              den / std::gcd(den, o.num) * (o.den / std::gcd(o.den, num)));
  }
  Ratio inverse() const { return {den, num}; }
  bool operator==(Ratio o) const { return num == o.num && den == o.den; }
};

/// A dimension of a ranked tensor value.
struct Dim {
  Value value;
  unsigned index = 0;
};

/// Weighted union-find over the dynamic dimensions of one function.
class SizeClasses {
public:
  explicit SizeClasses(func::FuncOp func) : func(func) {}

  /// size(a) == r * size(b). Static sides bind the other side's class.
  /// `label` names size(a) (and size(b) when r is 1) in messages.
  void equal(Dim a, Dim b, Ratio r = {}, StringRef label = "") {
    std::optional<int64_t> sa = staticSize(a), sb = staticSize(b);
    if (!known(a) || !known(b) || (sa && sb))
      return;
    auto name = [&](int n) {
      if (labels[n].empty())
        labels[n] = label.str();
      return n;
    };
    bool same = r == Ratio{};
    if (sa) {
      bindConstant(same ? name(node(b)) : node(b),
                   Ratio::of(*sa, 1) * r.inverse());
      return;
    }
    if (sb) {
      bindConstant(name(node(a)), Ratio::of(*sb, 1) * r);
      return;
    }
    int na = name(node(a));
    int nb = same ? name(node(b)) : node(b);
    unite(na, nb, r);
  }

  /// Makes `d` a node (argument dimensions: in argument order).
  void add(Dim d) {
    if (known(d) && !staticSize(d))
      node(d);
  }

  /// Dimension `index` of result `position` (returned as `v`): checked when
  /// the results become out-parameters, argument `inputs + position`.
  void addOutput(Value v, unsigned position, unsigned index) {
    Dim d{v, index};
    if (!known(d) || staticSize(d))
      return;
    unsigned argument = func.getNumArguments() + position;
    arguments.push_back({node(d), argument, index});
  }

  /// size(a) * factor must fit in int32 (an i32 index tensor of that size).
  void fitsI32(Dim a, int64_t factor, StringRef what) {
    if (known(a) && !staticSize(a))
      bounds.push_back({node(a), factor, what.str()});
  }

  /// size(a) must be a multiple of size(b) (of `constant` when b is null).
  void multiple(Dim a, Dim b, int64_t constant, StringRef what) {
    if (!known(a) || staticSize(a))
      return;
    if (b.value && (!known(b) || staticSize(b)))
      return;
    multiples.push_back(
        {node(a), b.value ? node(b) : -1, constant, what.str()});
  }

  /// Remembers how argument `v` is used (for messages).
  void describeUse(Value v, StringRef operand, Operation *op) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &func.getBody().front() ||
        uses.count(arg.getArgNumber()))
      return;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "'" << operand << "' of " << op->getName() << " at ";
    if (auto file = op->getLoc()->findInstanceOf<FileLineColLoc>())
      os << file.getFilename().getValue() << ":" << file.getLine() << ":"
         << file.getColumn();
    else
      op->getLoc().print(os);
    uses[arg.getArgNumber()] = text;
  }

  /// The `moe.shape_checks` records of the function.
  ArrayAttr records(Builder &b);

private:
  struct Bound {
    int node;
    int64_t factor;
    std::string what;
  };
  struct Multiple {
    int node, of;
    int64_t constant;
    std::string what;
  };

  bool known(Dim d) const {
    auto type = dyn_cast_or_null<RankedTensorType>(d.value ? d.value.getType()
                                                           : Type());
    return type && d.index < type.getRank();
  }
  std::optional<int64_t> staticSize(Dim d) const {
    int64_t s = cast<RankedTensorType>(d.value.getType()).getDimSize(d.index);
    if (ShapedType::isDynamic(s))
      return std::nullopt;
    return s;
  }

  int node(Dim d) {
    auto key = std::make_pair(d.value, d.index);
    auto it = ids.find(key);
    if (it != ids.end())
      return it->second;
    int id = static_cast<int>(parent.size());
    ids[key] = id;
    parent.push_back(id);
    ratio.push_back({});
    constant.push_back(std::nullopt);
    labels.push_back("");
    if (auto arg = dyn_cast<BlockArgument>(d.value))
      if (arg.getOwner() == &func.getBody().front())
        arguments.push_back({id, arg.getArgNumber(), d.index});
    return id;
  }

  /// Root of `n`, with ratio(n) relative to it.
  std::pair<int, Ratio> find(int n) {
    if (parent[n] == n)
      return {n, Ratio{}};
    auto [root, up] = find(parent[n]);
    ratio[n] = ratio[n] * up;
    parent[n] = root;
    return {root, ratio[n]};
  }

  void unite(int a, int b, Ratio r) {
    auto [ra, pa] = find(a);
    auto [rb, pb] = find(b);
    if (ra == rb)
      return; // a consistent cycle, or one the verifiers reject statically
    // pa * size(ra) = r * pb * size(rb)
    parent[ra] = rb;
    ratio[ra] = r * pb * pa.inverse();
    if (constant[ra] && !constant[rb])
      constant[rb] = *constant[ra] * ratio[ra].inverse();
  }

  void bindConstant(int n, Ratio c) {
    auto [root, p] = find(n);
    if (!constant[root])
      constant[root] = c * p.inverse();
  }

  std::string describe(unsigned argument, unsigned index) {
    std::string text;
    llvm::raw_string_ostream os(text);
    unsigned inputs = func.getNumArguments();
    if (argument >= inputs) {
      os << "dimension " << index << " of result " << argument - inputs
         << " (the out-parameter, argument " << argument << ")";
      return text;
    }
    os << "dimension " << index << " of argument " << argument;
    auto it = uses.find(argument);
    if (it != uses.end())
      os << " (" << it->second << ")";
    return text;
  }

  func::FuncOp func;
  DenseMap<std::pair<Value, unsigned>, int> ids;
  SmallVector<int> parent;
  SmallVector<Ratio> ratio;
  SmallVector<std::optional<Ratio>> constant;
  SmallVector<std::string> labels; // per node
  struct ArgumentNode {
    int node;
    unsigned argument, index;
  };
  SmallVector<ArgumentNode> arguments; // in creation order
  SmallVector<Bound> bounds;
  SmallVector<Multiple> multiples;
  std::map<unsigned, std::string> uses;
};

/// `{` and `}` in a message would read as placeholders; `%` is harmless.
std::string escapeBraces(StringRef text) {
  std::string out;
  for (char c : text)
    out += c == '{' ? '(' : c == '}' ? ')' : c;
  return out;
}

ArrayAttr SizeClasses::records(Builder &b) {
  SmallVector<Attribute> out;
  std::string name = ("@" + func.getSymName()).str();
  auto record = [&](StringRef kind, unsigned arg, unsigned index,
                    std::optional<std::pair<unsigned, unsigned>> rhs,
                    int64_t num, int64_t den, int64_t value,
                    const std::string &message) {
    SmallVector<NamedAttribute> fields;
    fields.push_back(b.getNamedAttr("kind", b.getStringAttr(kind)));
    fields.push_back(b.getNamedAttr(
        "lhs", b.getDenseI64ArrayAttr(
                   {static_cast<int64_t>(arg), static_cast<int64_t>(index)})));
    if (rhs)
      fields.push_back(b.getNamedAttr(
          "rhs", b.getDenseI64ArrayAttr({static_cast<int64_t>(rhs->first),
                                         static_cast<int64_t>(rhs->second)})));
    fields.push_back(b.getNamedAttr("num", b.getI64IntegerAttr(num)));
    fields.push_back(b.getNamedAttr("den", b.getI64IntegerAttr(den)));
    fields.push_back(b.getNamedAttr("value", b.getI64IntegerAttr(value)));
    fields.push_back(
        b.getNamedAttr("message", b.getStringAttr(name + ": " + message)));
    unsigned inputs = func.getNumArguments();
    if (arg >= inputs || (rhs && rhs->first >= inputs))
      fields.push_back(b.getNamedAttr("output", b.getUnitAttr()));
    Attribute dict = b.getDictionaryAttr(fields);
    if (!llvm::is_contained(out, dict))
      out.push_back(dict);
  };
  // The size both sides are, when one name fits both (" (T)").
  auto label = [&](int a, int b) {
    StringRef la = labels[a], lb = b < 0 ? la : StringRef(labels[b]);
    if (la.empty() || lb.empty() || la != lb)
      return std::string();
    return " (" + la.str() + ")";
  };

  // No negative sizes (a C caller's descriptor can say anything).
  for (const ArgumentNode &a : arguments)
    record("nonneg", a.argument, a.index, std::nullopt, 1, 1, 0,
           escapeBraces(describe(a.argument, a.index)) +
               " is {0}, a negative size");

  // Per class: against its static size, or against its first argument.
  DenseMap<int, const ArgumentNode *> reference;
  for (const ArgumentNode &a : arguments) {
    auto [root, p] = find(a.node);
    std::string what = escapeBraces(describe(a.argument, a.index));
    if (constant[root]) {
      Ratio expected = *constant[root] * p;
      int64_t value = expected.den == 1 ? expected.num : -1;
      record("const", a.argument, a.index, std::nullopt, 1, 1, value,
             what + " is {0}, but must be {1}" + label(a.node, -1));
      continue;
    }
    auto [it, inserted] = reference.try_emplace(root, &a);
    if (inserted)
      continue;
    const ArgumentNode &ref = *it->second;
    // size(a) = p * size(root), size(ref) = q * size(root)
    Ratio q = find(ref.node).second;
    Ratio r = p * q.inverse(); // size(a) = r * size(ref)
    std::string relation =
        r == Ratio{} ? "they must be equal"
        : r.den == 1
            ? "the first must be " + std::to_string(r.num) + " times the second"
            : "the first must be " + std::to_string(r.num) + "/" +
                  std::to_string(r.den) + " of the second";
    record("eq", a.argument, a.index, std::make_pair(ref.argument, ref.index),
           r.num, r.den, 0,
           what + " is {0}, but " +
               escapeBraces(describe(ref.argument, ref.index)) + " is {1}: " +
               relation + (r == Ratio{} ? label(a.node, ref.node) : ""));
  }

  // The i32 index tensors: size * factor <= INT32_MAX, checked on the
  // reference (or skipped: a static class is the verifiers').
  for (const Bound &bound : bounds) {
    auto [root, p] = find(bound.node);
    auto it = reference.find(root);
    if (constant[root] || it == reference.end())
      continue;
    const ArgumentNode &ref = *it->second;
    Ratio q = find(ref.node).second;
    // size(node) = p/q * size(ref): size(ref) * (p/q) * factor <= max
    Ratio scale = p * q.inverse() * Ratio::of(bound.factor, 1);
    // size(ref) <= floor(max * den / num)
    int64_t limit = static_cast<int64_t>(
        (static_cast<__int128>(kInt32Max) * scale.den) / scale.num);
    record("max", ref.argument, ref.index, std::nullopt, 1, 1, limit,
           escapeBraces(describe(ref.argument, ref.index)) +
               " is {0}, more than {1}: " + bound.what +
               " would not fit the int32 indices");
  }

  // Multiples, where both sides are argument references of ratio 1.
  for (const Multiple &m : multiples) {
    auto [root, p] = find(m.node);
    auto it = reference.find(root);
    if (constant[root] || it == reference.end() ||
        !(p * find(it->second->node).second.inverse() == Ratio{}))
      continue;
    const ArgumentNode &lhs = *it->second;
    std::string what = escapeBraces(describe(lhs.argument, lhs.index));
    if (m.of < 0) {
      record("multiple", lhs.argument, lhs.index, std::nullopt, 1, 1,
             m.constant,
             what + " is {0}, not a multiple of {1} (" + m.what + ")");
      continue;
    }
    auto [rootOf, pOf] = find(m.of);
    auto jt = reference.find(rootOf);
    if (constant[rootOf] || jt == reference.end() ||
        !(pOf * find(jt->second->node).second.inverse() == Ratio{}))
      continue;
    const ArgumentNode &rhs = *jt->second;
    record("multiple", lhs.argument, lhs.index,
           std::make_pair(rhs.argument, rhs.index), 1, 1, 0,
           what + " is {0}, not a multiple of " +
               escapeBraces(describe(rhs.argument, rhs.index)) + " = {1} (" +
               m.what + ")");
  }
  return b.getArrayAttr(out);
}

/// Dimension `i` of `v`.
Dim dim(Value v, unsigned i = 0) { return {v, i}; }

/// The one dynamic dimension of reassociation group `group` of `type` and
/// the product of the group's other (static) sizes; no dimension when the
/// group has none or several dynamic ones, or a static size 0.
std::pair<std::optional<unsigned>, int64_t>
soleDynamicDim(RankedTensorType type, ArrayRef<int64_t> group) {
  std::optional<unsigned> dynamic;
  int64_t product = 1;
  for (int64_t i : group) {
    if (!type.isDynamicDim(i)) {
      product *= type.getDimSize(i);
    } else if (dynamic) {
      return {std::nullopt, 0};
    } else {
      dynamic = i;
    }
  }
  if (product <= 0)
    return {std::nullopt, 0};
  return {dynamic, product};
}

/// The rules of one op.
void addRules(Operation *op, SizeClasses &sizes) {
  // Dimension `i` of `result` is `size`; when that is a tensor.dim of a
  // constant index, the two dimensions are equal.
  auto equalToDimSource = [&](Value result, unsigned i, OpFoldResult size) {
    if (auto v = dyn_cast<Value>(size))
      if (auto d = v.getDefiningOp<tensor::DimOp>())
        if (auto index = d.getConstantIndex())
          sizes.equal(dim(result, i),
                      dim(d.getSource(), static_cast<unsigned>(*index)));
  };
  auto describe = [&](std::initializer_list<std::pair<Value, StringRef>> l) {
    for (auto [v, name] : l)
      if (v)
        sizes.describeUse(v, name, op);
  };
  auto kOf = [](Value indices) {
    return cast<RankedTensorType>(indices.getType()).getDimSize(1);
  };
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](TopKOp o) {
        describe({{o.getInput(), "input"}});
        sizes.equal(dim(o.getValues()), dim(o.getInput()), {}, "T");
        sizes.equal(dim(o.getIndices()), dim(o.getInput()), {}, "T");
      })
      .Case([&](RouteOp o) {
        describe({{o.getLogits(), "logits"}, {o.getBias(), "bias"}});
        sizes.equal(dim(o.getWeights()), dim(o.getLogits()), {}, "T");
        sizes.equal(dim(o.getIndices()), dim(o.getLogits()), {}, "T");
      })
      .Case([&](CumsumOp o) {
        describe({{o.getIndices(), "indices"}});
        int64_t e = o.getNumExperts();
        sizes.equal(dim(o.getResult()), dim(o.getIndices()), Ratio::of(e, 1),
                    "E * T");
        sizes.fitsI32(dim(o.getIndices()), e, "E * T");
      })
      .Case([&](GetIndicesOp o) {
        describe({{o.getCumsum(), "cumsum"}, {o.getIndices(), "indices"}});
        int64_t k = kOf(o.getIndices());
        if (k > 0) {
          sizes.equal(dim(o.getReverseIndices()), dim(o.getIndices()),
                      Ratio::of(k, 1), "T * k");
          sizes.equal(dim(o.getTokenIndices()), dim(o.getIndices()),
                      Ratio::of(k, 1), "T * k");
          sizes.fitsI32(dim(o.getIndices()), k, "T * k");
        }
        sizes.multiple(dim(o.getCumsum()), dim(o.getIndices()), 0,
                       "the cumsum has E * T elements");
      })
      .Case([&](GetIndptrOp o) {
        describe({{o.getCumsum(), "cumsum"}});
        sizes.multiple(dim(o.getCumsum()), Dim{}, o.getNumExperts(),
                       "the cumsum has E * T elements");
      })
      .Case([&](GatherOp o) {
        describe({{o.getInput(), "input"}, {o.getIndices(), "indices"}});
        sizes.equal(dim(o.getResult()), dim(o.getIndices()), {}, "M");
      })
      .Case([&](ScatterOp o) {
        describe({{o.getInput(), "input"}, {o.getIndices(), "indices"}});
        sizes.equal(dim(o.getIndices()), dim(o.getInput()), {}, "M");
        sizes.equal(dim(o.getResult()), dim(o.getInput()), {}, "M");
      })
      .Case([&](GroupedMatmulOp o) {
        describe({{o.getLhs(), "lhs"}, {o.getOffsets(), "offsets"}});
        sizes.equal(dim(o.getResult()), dim(o.getLhs()), {}, "M");
      })
      .Case([&](GluOp o) {
        describe({{o.getInput(), "input"}});
        sizes.equal(dim(o.getResult()), dim(o.getInput()), {}, "M");
      })
      .Case([&](CombineOp o) {
        describe({{o.getInput(), "input"}, {o.getWeights(), "weights"}});
        if (o.getWeights())
          sizes.equal(dim(o.getWeights()), dim(o.getInput()), {}, "T");
        sizes.equal(dim(o.getResult()), dim(o.getInput()), {}, "T");
      })
      .Case([&](IndicesToMultihotOp o) {
        describe({{o.getIndices(), "indices"}, {o.getProbs(), "probs"}});
        sizes.equal(dim(o.getProbs()), dim(o.getIndices()), {}, "T");
        for (Value r : o->getResults())
          sizes.equal(dim(r), dim(o.getIndices()), {}, "T");
      })
      .Case([&](MultihotToIndicesOp o) {
        describe({{o.getProbsMultihot(), "probs_multihot"},
                  {o.getPositionMap(), "position_map"}});
        sizes.equal(dim(o.getPositionMap()), dim(o.getProbsMultihot()), {},
                    "T");
        sizes.equal(dim(o.getProbs()), dim(o.getProbsMultihot()), {}, "T");
      })
      .Case([&](FfnOp o) {
        describe({{o.getX(), "x"}, {o.getLogits(), "logits"}});
        sizes.equal(dim(o.getLogits()), dim(o.getX()), {}, "T");
        sizes.equal(dim(o.getResult()), dim(o.getX()), {}, "T");
        sizes.fitsI32(dim(o.getX()), o.getK(), "T * k");
      })
      .Case([&](FfnTrainOp o) {
        describe({{o.getX(), "x"}, {o.getLogits(), "logits"}});
        sizes.equal(dim(o.getLogits()), dim(o.getX()), {}, "T");
        sizes.equal(dim(o.getY()), dim(o.getX()), {}, "T");
        sizes.equal(dim(o.getH()), dim(o.getX()), Ratio::of(o.getK(), 1),
                    "T * k");
        sizes.equal(dim(o.getWeights()), dim(o.getX()), {}, "T");
        sizes.equal(dim(o.getIndices()), dim(o.getX()), {}, "T");
        sizes.fitsI32(dim(o.getX()), o.getK(), "T * k");
      })
      .Case([&](FfnGradOp o) {
        describe({{o.getDy(), "dy"},
                  {o.getX(), "x"},
                  {o.getLogits(), "logits"},
                  {o.getSavedH(), "h"},
                  {o.getSavedWeights(), "weights"},
                  {o.getSavedIndices(), "indices"}});
        if (o.hasSaved()) {
          sizes.equal(dim(o.getSavedH()), dim(o.getX()), Ratio::of(o.getK(), 1),
                      "T * k");
          sizes.equal(dim(o.getSavedWeights()), dim(o.getX()), {}, "T");
          sizes.equal(dim(o.getSavedIndices()), dim(o.getX()), {}, "T");
        }
        sizes.equal(dim(o.getDy()), dim(o.getX()), {}, "T");
        sizes.equal(dim(o.getLogits()), dim(o.getX()), {}, "T");
        sizes.equal(dim(o.getDx()), dim(o.getX()), {}, "T");
        sizes.equal(dim(o.getDlogits()), dim(o.getX()), {}, "T");
        sizes.fitsI32(dim(o.getX()), o.getK(), "T * k");
      })
      .Case([&](RowDotOp o) {
        describe(
            {{o.getLhs(), "lhs"}, {o.getRhs(), "rhs"}, {o.getAcc(), "acc"}});
        sizes.equal(dim(o.getRhs()), dim(o.getLhs()), {}, "M");
        if (o.getAcc())
          sizes.equal(dim(o.getAcc()), dim(o.getLhs()), {}, "M");
        sizes.equal(dim(o.getResult()), dim(o.getLhs()), {}, "M");
      })
      .Case([&](GroupedMatmulWgradOp o) {
        describe({{o.getLhs(), "lhs"},
                  {o.getLhsGather(), "lhs_gather"},
                  {o.getRhs(), "rhs"},
                  {o.getRhsGather(), "rhs_gather"}});
        Dim m = o.getLhsGather() ? dim(o.getLhsGather()) : dim(o.getLhs());
        sizes.equal(o.getRhsGather() ? dim(o.getRhsGather()) : dim(o.getRhs()),
                    m, {}, "M");
      })
      .Case([&](ExpertGemmGluGradOp o) {
        describe({{o.getLhs(), "lhs"},
                  {o.getGather(), "gather"},
                  {o.getPreact(), "preact"},
                  {o.getWeights(), "weights"},
                  {o.getAcc(), "acc"}});
        Dim m = o.getGather() ? dim(o.getGather()) : dim(o.getLhs());
        sizes.equal(dim(o.getPreact()), m, {}, "M");
        sizes.equal(dim(o.getWeights()), m, {}, "M");
        if (o.getAcc())
          sizes.equal(dim(o.getAcc()), m, {}, "M");
        for (Value r : o->getResults())
          sizes.equal(dim(r), m, {}, "M");
      })
      .Case([&](DispatchOp o) {
        describe({{o.getIndices(), "indices"}});
        int64_t k = kOf(o.getIndices());
        if (k > 0) {
          sizes.equal(dim(o.getReverseIndices()), dim(o.getIndices()),
                      Ratio::of(k, 1), "T * k");
          sizes.equal(dim(o.getTokenIndices()), dim(o.getIndices()),
                      Ratio::of(k, 1), "T * k");
          sizes.fitsI32(dim(o.getIndices()), k, "T * k");
        }
      })
      .Case([&](ExpertGemmOp o) {
        describe({{o.getLhs(), "lhs"},
                  {o.getGather(), "gather"},
                  {o.getScatter(), "scatter"},
                  {o.getScale(), "scale"}});
        Dim m = o.getGather() ? dim(o.getGather()) : dim(o.getLhs());
        sizes.equal(dim(o.getResult()), m, {}, "M");
        if (o.getScatter())
          sizes.equal(dim(o.getScatter()), m, {}, "M");
        if (o.getScale())
          sizes.equal(dim(o.getScale()), m, {}, "M");
      })
      .Case([&](RouteDispatchOp o) {
        describe({{o.getLogits(), "logits"}, {o.getBias(), "bias"}});
        sizes.equal(dim(o.getWeights()), dim(o.getLogits()), {}, "T");
        sizes.equal(dim(o.getIndices()), dim(o.getLogits()), {}, "T");
        int64_t k = o.getK();
        sizes.equal(dim(o.getReverseIndices()), dim(o.getLogits()),
                    Ratio::of(k, 1), "T * k");
        sizes.equal(dim(o.getTokenIndices()), dim(o.getLogits()),
                    Ratio::of(k, 1), "T * k");
        sizes.fitsI32(dim(o.getLogits()), k, "T * k");
      })
      .Case([&](tensor::CastOp o) {
        auto type = cast<RankedTensorType>(o.getType());
        if (isa<RankedTensorType>(o.getSource().getType()))
          for (unsigned i = 0; i < type.getRank(); ++i)
            sizes.equal(dim(o.getResult(), i), dim(o.getSource(), i));
      })
      .Case([&](tensor::EmptyOp o) {
        for (auto [i, size] : llvm::enumerate(o.getMixedSizes()))
          equalToDimSource(o.getResult(), i, size);
      })
      .Case([&](tensor::ExpandShapeOp o) {
        SmallVector<OpFoldResult> shape = o.getMixedOutputShape();
        for (auto [src, group] : llvm::enumerate(o.getReassociationIndices())) {
          for (int64_t i : group)
            equalToDimSource(o.getResult(), i, shape[i]);
          // The one dynamic result dimension of the group is the source
          // dimension over the product of the others.
          if (auto [d, product] = soleDynamicDim(o.getResultType(), group); d)
            sizes.equal(dim(o.getSrc(), src), dim(o.getResult(), *d),
                        Ratio::of(product, 1));
        }
      })
      .Case([&](tensor::CollapseShapeOp o) {
        for (auto [res, group] : llvm::enumerate(o.getReassociationIndices()))
          if (auto [d, product] = soleDynamicDim(o.getSrcType(), group); d)
            sizes.equal(dim(o.getResult(), res), dim(o.getSrc(), *d),
                        Ratio::of(product, 1));
      })
      .Default([&](Operation *other) {
        // Elementwise ops: every ranked operand and result has one shape.
        if (other->hasTrait<OpTrait::Elementwise>() ||
            other->hasTrait<OpTrait::SameOperandsAndResultShape>()) {
          SmallVector<Value> shaped;
          for (Value v : other->getOperands())
            if (isa<RankedTensorType>(v.getType()))
              shaped.push_back(v);
          for (Value v : other->getResults())
            if (isa<RankedTensorType>(v.getType()))
              shaped.push_back(v);
          if (shaped.empty())
            return;
          for (Value v : llvm::drop_begin(shaped)) {
            auto a = cast<RankedTensorType>(v.getType());
            auto b = cast<RankedTensorType>(shaped.front().getType());
            if (a.getRank() == b.getRank())
              for (unsigned i = 0; i < a.getRank(); ++i)
                sizes.equal(dim(v, i), dim(shaped.front(), i));
          }
          return;
        }
        // Destination-style ops: each result has its init's shape.
        if (auto dps = dyn_cast<DestinationStyleOpInterface>(other)) {
          for (OpResult r : other->getResults()) {
            auto type = dyn_cast<RankedTensorType>(r.getType());
            OpOperand *init = dps.getTiedOpOperand(r);
            if (type && init && isa<RankedTensorType>(init->get().getType()))
              for (unsigned i = 0; i < type.getRank(); ++i)
                sizes.equal(dim(r, i), dim(init->get(), i));
          }
        }
      });
}

struct MoeShapeChecksPass
    : mlir::moe::impl::MoeShapeChecksPassBase<MoeShapeChecksPass> {
  using Base::Base;

  void runOnOperation() override {
    Builder b(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.isPublic())
        continue;
      SizeClasses sizes(func);
      // Argument dims first, so that references are in argument order.
      for (BlockArgument arg : func.getArguments())
        if (auto type = dyn_cast<RankedTensorType>(arg.getType()))
          for (unsigned i = 0; i < type.getRank(); ++i)
            if (type.isDynamicDim(i))
              sizes.add(dim(arg, i));
      func.walk([&](Operation *op) { addRules(op, sizes); });
      // Results: caller-allocated out-parameters after bufferization (the
      // GPU pipeline), whose sizes must then match too.
      if (func.getBody().hasOneBlock())
        if (auto ret = dyn_cast<func::ReturnOp>(
                func.getBody().front().getTerminator()))
          for (auto [i, v] : llvm::enumerate(ret.getOperands()))
            if (auto type = dyn_cast<RankedTensorType>(v.getType()))
              for (unsigned d = 0; d < type.getRank(); ++d)
                sizes.addOutput(v, i, d);
      ArrayAttr records = sizes.records(b);
      if (records.empty())
        func->removeAttr("moe.shape_checks");
      else
        func->setAttr("moe.shape_checks", records);
    }
  }
};

} // namespace
