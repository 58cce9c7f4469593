//===- moe-consumer.cpp - an out-of-tree tool built on moe-mlir -----------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// What another compiler does to embed moe-mlir through its C++ API: one
// MLIRContext with mlir::moe::registerAllDialects, a module with a moe.ffn
// (parsed from the file given on the command line, or built with the op
// builders), then the pipelines moe-opt runs (--moe-decompose --moe-fuse,
// then --moe-lower-to-cpu) through a PassManager.
//
//   moe-consumer [input.mlir]
//
// Prints the fused module, then one summary line about the lowered one;
// exits non-zero on any failure.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"
#include "moe-mlir/Dialect/Moe/Transforms/Passes.h"
#include "moe-mlir/InitAllDialects.h"
#include "moe-mlir/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// @layer: a Mixtral-style moe.ffn (T dynamic, H 32, E 8, I 64, top-2
/// softmax routing, SiLU GLU, concat layout), built with the op builders.
static OwningOpRef<ModuleOp> buildLayer(MLIRContext &context) {
  context.loadDialect<func::FuncDialect, moe::MoeDialect>();
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  Type f32 = b.getF32Type();
  int64_t dyn = ShapedType::kDynamic;
  auto x = RankedTensorType::get({dyn, 32}, f32);
  auto logits = RankedTensorType::get({dyn, 8}, f32);
  auto wUp = RankedTensorType::get({8, 32, 128}, f32);
  auto wDown = RankedTensorType::get({8, 64, 32}, f32);
  auto func = func::FuncOp::create(
      b, loc, "layer", b.getFunctionType({x, logits, wUp, wDown}, {x}));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto ffn = moe::FfnOp::create(
      b, loc, x, body->getArgument(0), body->getArgument(1),
      body->getArgument(2), body->getArgument(3),
      /*optional_operands (bias, expert biases)=*/ValueRange(),
      /*k=*/2, moe::ScoringFn::softmax, /*normalize=*/true, /*n_group=*/1,
      /*topk_group=*/1, moe::GroupScore::max, /*scaling=*/llvm::APFloat(1.0f),
      moe::Activation::silu, moe::GluLayout::concat,
      /*alpha=*/llvm::APFloat(1.0f), /*limit=*/FloatAttr(),
      /*up_bias=*/llvm::APFloat(0.0f));
  func::ReturnOp::create(b, loc, ffn.getResult());
  return module;
}

/// Number of ops in `root` from dialect `ns`.
static int countOps(Operation *root, StringRef ns) {
  int n = 0;
  root->walk([&](Operation *op) {
    if (op->getName().getDialectNamespace() == ns)
      ++n;
  });
  return n;
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  moe::registerAllDialects(registry);
  MLIRContext context(registry);

  OwningOpRef<ModuleOp> module =
      argc > 1 ? parseSourceFile<ModuleOp>(argv[1], &context)
               : buildLayer(context);
  if (!module || failed(verify(*module))) {
    llvm::errs() << "moe-consumer: invalid input module\n";
    return 1;
  }

  // moe.ffn -> primitive chain -> fused ops (what `moe-opt --moe-decompose
  // --moe-fuse` runs).
  PassManager fuse(&context);
  fuse.addPass(moe::createMoeDecomposePass());
  moe::buildMoeFusePipeline(fuse);
  if (failed(fuse.run(*module))) {
    llvm::errs() << "moe-consumer: --moe-decompose --moe-fuse failed\n";
    return 1;
  }
  module->print(llvm::outs());

  // -> LLVM dialect (what `moe-opt --moe-lower-to-cpu` runs).
  PassManager lower(&context);
  moe::buildMoeLowerToCpuPipeline(lower, moe::MoeLowerToCpuOptions());
  if (failed(lower.run(*module)) || failed(verify(*module))) {
    llvm::errs() << "moe-consumer: --moe-lower-to-cpu failed\n";
    return 1;
  }
  int llvmFuncs = 0;
  module->walk([&](LLVM::LLVMFuncOp) { ++llvmFuncs; });
  int moeOps = countOps(module->getOperation(), "moe");
  llvm::outs() << "moe-consumer: lowered to the LLVM dialect: " << llvmFuncs
               << " llvm.func, " << moeOps << " moe ops left\n";
  return llvmFuncs > 0 && moeOps == 0 ? 0 : 1;
}
