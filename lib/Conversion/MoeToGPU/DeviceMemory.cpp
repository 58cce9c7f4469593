//===- DeviceMemory.cpp - host buffers of a GPU module to device memory ---===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/Conversion/Passes.h"

#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUDEVICEMEMORYPASS
#include "moe-mlir/Conversion/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

/// True for ops inside a kernel (their buffers are already device-side or
/// private/workgroup memory).
static bool inKernel(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUFuncOp>() ||
         op->getParentOfType<gpu::GPUModuleOp>();
}

namespace {
/// Host constants read outside kernels (`memref.get_global` of a constant
/// `memref.global`, e.g. weights given as `dense` / `dense_resource` tensor
/// constants) become device buffers that the compiled library uploads once,
/// when it is loaded, and frees when it is unloaded:
///
///  * the constant's bytes become an internal LLVM global (`__moe_host_<g>`);
///  * a pointer slot (`__moe_device_<g>`, null-initialised) is filled by a
///    global constructor that calls `moeRuntimeUploadConstant(host, bytes)`,
///    and freed by a global destructor (`moeRuntimeFreeConstant`);
///  * each `memref.get_global` outside kernels becomes a load of the slot
///    and a memref descriptor of that device pointer (cast back to the
///    memref type; the LLVM conversion resolves the cast).
///
/// Nothing is copied per call, so the calls stay graph-capturable. A
/// resource whose data was elided (`dense_resource<__elided__>`, in tests)
/// is uploaded as zeros with a warning.
class DeviceConstants {
public:
  explicit DeviceConstants(ModuleOp module)
      : module(module), converter(module.getContext()), symbols(module) {}

  /// Replaces `get` by the device copy of its global.
  LogicalResult replace(memref::GetGlobalOp get, IRRewriter &rewriter);

  /// Emits the constructor and destructor and erases the host globals that
  /// nothing refers to any more; fails (error emitted) when the module
  /// declares a runtime entry point with another signature.
  LogicalResult finish(IRRewriter &rewriter);

private:
  struct Entry {
    LLVM::GlobalOp host;
    LLVM::GlobalOp slot;
    uint64_t bytes;
  };
  FailureOr<Entry *> entryFor(memref::GlobalOp global, Location useLoc);

  ModuleOp module;
  LLVMTypeConverter converter;
  SymbolTable symbols;
  llvm::MapVector<Operation *, Entry> entries; // by memref.global
  uint64_t totalBytes = 0;
};
} // namespace

FailureOr<DeviceConstants::Entry *>
DeviceConstants::entryFor(memref::GlobalOp global, Location useLoc) {
  auto it = entries.find(global);
  if (it != entries.end())
    return &it->second;
  MLIRContext *ctx = module.getContext();
  MemRefType type = global.getType();
  Type element = type.getElementType();
  unsigned bits = 0;
  if (element.isIntOrFloat())
    bits = element.getIntOrFloatBitWidth();
  else if (element.isIndex())
    bits = converter.getIndexTypeBitwidth();
  if (!bits || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getMemorySpace())
    return emitError(useLoc, "moe-gpu-device-memory: host constant '")
           << global.getSymName() << "' of type " << type
           << " cannot be put in device memory (only static, identity-layout "
              "memrefs of integers, floats or index in the default memory "
              "space)";
  uint64_t bytes =
      static_cast<uint64_t>(type.getNumElements()) * ((bits + 7) / 8);
  // The library's code reaches its data PC-relative (the small code
  // model, +-2 GiB): all constants together stay below 1.75 GiB.
  constexpr uint64_t kMaxTotalBytes = uint64_t(7) << 28;
  if (totalBytes + bytes > kMaxTotalBytes)
    return emitError(useLoc, "moe-gpu-device-memory: host constant '")
           << global.getSymName() << "' (" << bytes
           << " bytes) makes the module's constants larger than "
           << kMaxTotalBytes
           << " bytes, more than a compiled library can hold; pass such "
              "weights as function arguments";
  totalBytes += bytes;

  Type array = converter.convertType(element);
  for (int64_t dim : llvm::reverse(type.getShape()))
    array = LLVM::LLVMArrayType::get(array, dim);
  Attribute value = *global.getInitialValue();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob) {
      emitWarning(useLoc, "moe-gpu-device-memory: host constant '")
          << global.getSymName()
          << "' has no data (elided resource): uploaded as zeros";
      value = Attribute();
    }
  }
  if (value && type.getRank() == 0)
    value = cast<ElementsAttr>(value).getSplatValue<Attribute>();

  OpBuilder b(ctx);
  b.setInsertionPoint(global);
  Location loc = global.getLoc();
  uint64_t alignment =
      std::max<uint64_t>(global.getAlignment().value_or(0), 16);
  auto host = LLVM::GlobalOp::create(
      b, loc, array, /*isConstant=*/true, LLVM::Linkage::Internal,
      ("__moe_host_" + global.getSymName()).str(), value, alignment);
  if (!value) {
    Block *init = b.createBlock(&host.getInitializerRegion());
    b.setInsertionPointToStart(init);
    LLVM::ReturnOp::create(b, loc, LLVM::ZeroOp::create(b, loc, array));
    b.setInsertionPoint(global);
  }
  symbols.insert(host);
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto slot = LLVM::GlobalOp::create(
      b, loc, ptr, /*isConstant=*/false, LLVM::Linkage::Internal,
      ("__moe_device_" + global.getSymName()).str(), Attribute(),
      /*alignment=*/8);
  Block *init = b.createBlock(&slot.getInitializerRegion());
  b.setInsertionPointToStart(init);
  LLVM::ReturnOp::create(b, loc, LLVM::ZeroOp::create(b, loc, ptr));
  symbols.insert(slot);
  return &(entries[global] = Entry{host, slot, bytes});
}

LogicalResult DeviceConstants::replace(memref::GetGlobalOp get,
                                       IRRewriter &rewriter) {
  auto global = symbols.lookup<memref::GlobalOp>(get.getNameAttr().getAttr());
  if (!global)
    return get.emitError("moe-gpu-device-memory: no memref.global '")
           << get.getName() << "' in the module";
  if (!global.getConstant() || global.isExternal() || global.isUninitialized())
    return get.emitError("moe-gpu-device-memory: host global '")
           << get.getName()
           << "' used outside a kernel is not a constant with a value; only "
              "constants can be put in device memory";
  FailureOr<Entry *> entry = entryFor(global, get.getLoc());
  if (failed(entry))
    return failure();
  Location loc = get.getLoc();
  rewriter.setInsertionPoint(get);
  auto ptr = LLVM::LLVMPointerType::get(rewriter.getContext());
  Value slot = LLVM::AddressOfOp::create(rewriter, loc, (*entry)->slot);
  Value device = LLVM::LoadOp::create(rewriter, loc, ptr, slot);
  MemRefType type = get.getType();
  Value descriptor =
      MemRefDescriptor::fromStaticShape(rewriter, loc, converter, type, device);
  rewriter.replaceOp(
      get, UnrealizedConversionCastOp::create(rewriter, loc, type, descriptor)
               .getResult(0));
  return success();
}

LogicalResult DeviceConstants::finish(IRRewriter &rewriter) {
  if (entries.empty())
    return success();
  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i64 = IntegerType::get(ctx, 64);
  auto voidType = LLVM::LLVMVoidType::get(ctx);
  FailureOr<LLVM::LLVMFuncOp> upload = LLVM::lookupOrCreateFn(
      b, module, "moeRuntimeUploadConstant", {ptr, i64}, ptr);
  FailureOr<LLVM::LLVMFuncOp> release = LLVM::lookupOrCreateFn(
      b, module, "moeRuntimeFreeConstant", {ptr}, voidType);
  if (failed(upload) || failed(release))
    return failure();

  auto makeFunction = [&](StringRef name, auto body) {
    auto fn = LLVM::LLVMFuncOp::create(
        b, loc, name, LLVM::LLVMFunctionType::get(voidType, {}),
        LLVM::Linkage::Internal);
    symbols.insert(fn);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fn.addEntryBlock(b));
    for (auto &[global, entry] : entries)
      body(entry);
    LLVM::ReturnOp::create(b, loc, ValueRange());
    return fn;
  };
  LLVM::LLVMFuncOp ctor =
      makeFunction("__moe_upload_constants", [&](Entry &entry) {
        Value host = LLVM::AddressOfOp::create(b, loc, entry.host);
        Value bytes = LLVM::ConstantOp::create(
            b, loc, i64, b.getI64IntegerAttr(entry.bytes));
        Value device =
            LLVM::CallOp::create(b, loc, *upload, ValueRange{host, bytes})
                .getResult();
        Value slot = LLVM::AddressOfOp::create(b, loc, entry.slot);
        LLVM::StoreOp::create(b, loc, device, slot);
      });
  LLVM::LLVMFuncOp dtor =
      makeFunction("__moe_free_constants", [&](Entry &entry) {
        Value slot = LLVM::AddressOfOp::create(b, loc, entry.slot);
        Value device = LLVM::LoadOp::create(b, loc, ptr, slot);
        LLVM::CallOp::create(b, loc, *release, ValueRange{device});
        LLVM::StoreOp::create(b, loc, LLVM::ZeroOp::create(b, loc, ptr), slot);
      });
  // Appended to the module's constructor / destructor lists (one op each).
  constexpr int32_t kPriority = 65535;
  struct List {
    SmallVector<Attribute> fns, data;
    SmallVector<int32_t> priorities;
    void add(ArrayAttr f, ArrayAttr p, ArrayAttr d) {
      llvm::append_range(fns, f);
      for (Attribute a : p)
        priorities.push_back(cast<IntegerAttr>(a).getInt());
      llvm::append_range(data, d);
    }
  };
  List ctors, dtors;
  for (auto op :
       llvm::make_early_inc_range(module.getOps<LLVM::GlobalCtorsOp>())) {
    ctors.add(op.getCtors(), op.getPriorities(), op.getData());
    op.erase();
  }
  for (auto op :
       llvm::make_early_inc_range(module.getOps<LLVM::GlobalDtorsOp>())) {
    dtors.add(op.getDtors(), op.getPriorities(), op.getData());
    op.erase();
  }
  ctors.add(b.getArrayAttr(FlatSymbolRefAttr::get(ctor)),
            b.getI32ArrayAttr(kPriority),
            b.getArrayAttr(LLVM::ZeroAttr::get(ctx)));
  dtors.add(b.getArrayAttr(FlatSymbolRefAttr::get(dtor)),
            b.getI32ArrayAttr(kPriority),
            b.getArrayAttr(LLVM::ZeroAttr::get(ctx)));
  LLVM::GlobalCtorsOp::create(b, loc, b.getArrayAttr(ctors.fns),
                              b.getI32ArrayAttr(ctors.priorities),
                              b.getArrayAttr(ctors.data));
  LLVM::GlobalDtorsOp::create(b, loc, b.getArrayAttr(dtors.fns),
                              b.getI32ArrayAttr(dtors.priorities),
                              b.getArrayAttr(dtors.data));
  for (auto &[global, entry] : entries)
    if (SymbolTable::symbolKnownUseEmpty(global, module))
      rewriter.eraseOp(global);
  return success();
}

namespace {
struct MoeGpuDeviceMemoryPass
    : mlir::moe::impl::MoeGpuDeviceMemoryPassBase<MoeGpuDeviceMemoryPass> {
  void runOnOperation() override {
    SmallVector<Operation *> work;
    getOperation()->walk([&](Operation *op) {
      if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp,
              memref::GetGlobalOp>(op) &&
          !inKernel(op))
        work.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    bool failed = false;
    std::optional<DeviceConstants> constants;
    for (Operation *op : work) {
      rewriter.setInsertionPoint(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        if (alloc.getType().getMemorySpace()) {
          alloc.emitError("moe-gpu-device-memory: allocation in memory space ")
              << alloc.getType().getMemorySpace() << " outside a kernel";
          failed = true;
          continue;
        }
        auto gpuAlloc = gpu::AllocOp::create(
            rewriter, alloc.getLoc(), alloc.getType(), /*asyncToken=*/Type(),
            /*asyncDependencies=*/ValueRange{}, alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/false);
        rewriter.replaceOp(alloc, gpuAlloc.getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(rewriter, dealloc.getLoc(),
                               /*asyncToken=*/Type(), ValueRange{},
                               dealloc.getMemref());
        rewriter.eraseOp(dealloc);
      } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        auto srcType = cast<MemRefType>(copy.getSource().getType());
        auto dstType = cast<MemRefType>(copy.getTarget().getType());
        if (!srcType.getLayout().isIdentity() ||
            !dstType.getLayout().isIdentity()) {
          copy.emitError("moe-gpu-device-memory: copy between non-identity "
                         "layouts is not supported on the device path");
          failed = true;
          continue;
        }
        gpu::MemcpyOp::create(rewriter, copy.getLoc(), /*asyncToken=*/Type(),
                              ValueRange{}, copy.getTarget(), copy.getSource());
        rewriter.eraseOp(copy);
      } else if (auto get = dyn_cast<memref::GetGlobalOp>(op)) {
        if (!constants) {
          auto module = dyn_cast<ModuleOp>(getOperation());
          if (!module) {
            get.emitError("moe-gpu-device-memory: host constants outside "
                          "kernels need the pass to run on a builtin.module");
            failed = true;
            continue;
          }
          constants.emplace(module);
        }
        failed |= mlir::failed(constants->replace(get, rewriter));
      }
    }
    if (constants && !failed)
      failed = mlir::failed(constants->finish(rewriter));
    if (failed)
      signalPassFailure();
  }
};
} // namespace
