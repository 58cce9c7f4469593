//===- OrderConstantGlobals.cpp - deterministic constant globals ----------===//
//
// Part of the moe-mlir project.
//
// Bufferization's `__constant_*` globals renamed and ordered by first use,
// so that the output does not depend on the order in which one-shot
// bufferization met them (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEORDERCONSTANTGLOBALSPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {
constexpr llvm::StringLiteral kPrefix = "__constant_";

/// `name` without a trailing `_<digits>` uniquing suffix.
static StringRef baseName(StringRef name) {
  size_t pos = name.rfind('_');
  if (pos == StringRef::npos || pos + 1 == name.size() || pos < kPrefix.size())
    return name;
  StringRef digits = name.drop_front(pos + 1);
  if (!llvm::all_of(digits, llvm::isDigit))
    return name;
  return name.take_front(pos);
}

struct MoeOrderConstantGlobalsPass
    : mlir::moe::impl::MoeOrderConstantGlobalsPassBase<
          MoeOrderConstantGlobalsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Bufferization's constants: private, constant, named __constant_*.
    llvm::MapVector<StringAttr, memref::GlobalOp> byName;
    for (auto global : module.getOps<memref::GlobalOp>())
      if (global.getConstant() && global.isPrivate() &&
          global.getSymName().starts_with(kPrefix))
        byName.insert({global.getSymNameAttr(), global});
    if (byName.size() < 2)
      return;
    // First-use order, then the unused ones in module order.
    llvm::MapVector<StringAttr, memref::GlobalOp> order;
    module.walk([&](memref::GetGlobalOp get) {
      auto it = byName.find(get.getNameAttr().getAttr());
      if (it != byName.end())
        order.insert(*it);
    });
    for (auto &entry : byName)
      order.insert(entry);

    // Names held by other symbols stay theirs.
    llvm::StringSet<> taken;
    for (Operation &op : module.getBody()->getOperations())
      if (auto name =
              op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        if (!byName.count(name))
          taken.insert(name.getValue());
    // New names: per base, the base, then base_0, base_1, ...
    llvm::StringMap<int64_t> next;
    SmallVector<std::pair<memref::GlobalOp, std::string>> renames;
    for (auto &[name, global] : order) {
      StringRef base = baseName(name.getValue());
      std::string candidate;
      do {
        int64_t n = next[base]++;
        candidate = n == 0 ? base.str() : (base + "_" + Twine(n - 1)).str();
      } while (taken.contains(candidate));
      taken.insert(candidate);
      renames.push_back({global, candidate});
    }
    // Rename through temporary names (the new names may be old ones).
    MLIRContext *ctx = &getContext();
    auto rename = [&](memref::GlobalOp global, StringRef to) {
      StringAttr from = global.getSymNameAttr();
      StringAttr toAttr = StringAttr::get(ctx, to);
      if (failed(SymbolTable::replaceAllSymbolUses(from, toAttr, module)))
        return failure();
      global.setSymName(to);
      return success();
    };
    for (auto [i, entry] : llvm::enumerate(renames))
      if (failed(rename(entry.first, ("__moe_order_tmp_" + Twine(i)).str()))) {
        module.emitError("moe-order-constant-globals: cannot rename ")
            << entry.first.getSymName();
        return signalPassFailure();
      }
    for (auto &[global, name] : renames)
      if (failed(rename(global, name))) {
        module.emitError("moe-order-constant-globals: cannot rename to ")
            << name;
        return signalPassFailure();
      }
    // Move them, in order, to where the first of them stood.
    llvm::SmallPtrSet<Operation *, 16> renamed;
    for (auto &entry : renames)
      renamed.insert(entry.first);
    Block *body = module.getBody();
    Operation *first = nullptr;
    for (Operation &op : body->getOperations())
      if (renamed.contains(&op)) {
        first = &op;
        break;
      }
    Operation *before = first;
    while (before && renamed.contains(before))
      before = before->getNextNode();
    for (auto &entry : renames)
      entry.first->moveBefore(body,
                              before ? Block::iterator(before) : body->end());
  }
};
} // namespace
