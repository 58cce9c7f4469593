//===- NVVMBuilder.h - thin layer over the NVVM ops of the Hopper engine -*- C++
//-*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The Hopper engine mixes memref-level code (the epilogue, the metadata)
// with raw-pointer NVVM ops (cp.async, mbarrier, wgmma). Every NVVM op it
// creates goes through these helpers, so that upstream renames (MLIR 22
// removed the `.shared` mbarrier ops; barrier0 goes after 22) touch one
// file. Addresses are i64 byte addresses; shared-memory addresses are in
// the shared window.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_MOETOGPU_GEMM_NVVMBUILDER_H
#define MOE_MLIR_LIB_CONVERSION_MOETOGPU_GEMM_NVVMBUILDER_H

#include "Utils/LoweringBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir {
namespace moe {
namespace gpu_lowering {
namespace nvvm {

inline Value i64(LoweringBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, b.getI64Type(), v);
}
inline Value toI64(LoweringBuilder &b, Value index) {
  return arith::IndexCastUIOp::create(b, b.getI64Type(), index);
}
/// 64-bit address arithmetic (i64 values, i64 or constant operands).
inline Value add64(LoweringBuilder &b, Value a, Value c) {
  return arith::AddIOp::create(b, a, c);
}
inline Value add64(LoweringBuilder &b, Value a, int64_t c) {
  return c ? add64(b, a, i64(b, c)) : a;
}
inline Value mul64(LoweringBuilder &b, Value a, int64_t c) {
  return arith::MulIOp::create(b, a, i64(b, c));
}
inline Value globalPtr(LoweringBuilder &b, Value address) {
  return LLVM::IntToPtrOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), 1), address);
}
inline Value sharedPtr(LoweringBuilder &b, Value address) {
  return LLVM::IntToPtrOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), 3), address);
}

/// Byte address (i64) of element 0 of a memref (aligned pointer + offset).
inline Value bufferAddress(LoweringBuilder &b, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  auto meta = memref::ExtractStridedMetadataOp::create(b, memref);
  Value aligned = memref::ExtractAlignedPointerAsIndexOp::create(b, memref);
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  Value offset = b.mul(meta.getOffset(), b.idx(bytes));
  return toI64(b, b.add(aligned, offset));
}
/// Stride (elements, index) of dimension `d` of a memref.
inline Value bufferStride(LoweringBuilder &b, Value memref, unsigned d) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, memref);
  return meta.getStrides()[d];
}

/// Whether `memref`'s rows allow 16-byte accesses (i1): unit stride along
/// `inner`, the strides of the `outer` dimensions multiples of 16 bytes,
/// the base 16-byte aligned.
inline Value rowsAligned16(LoweringBuilder &b, Value memref,
                           ArrayRef<unsigned> outer, unsigned inner) {
  int64_t bytes =
      cast<MemRefType>(memref.getType()).getElementTypeBitWidth() / 8;
  auto eq = [&](Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, x, y);
  };
  Value ok = eq(bufferStride(b, memref, inner), b.idx(1));
  for (unsigned d : outer) {
    Value rowBytes = b.mul(bufferStride(b, memref, d), b.idx(bytes));
    ok = b.andi(ok,
                eq(arith::RemUIOp::create(b, rowBytes, b.idx(16)), b.idx(0)));
  }
  Value low = arith::AndIOp::create(b, bufferAddress(b, memref), i64(b, 15));
  return b.andi(ok, eq(low, i64(b, 0)));
}

/// The dynamic shared memory of the launch, rounded up to `align` bytes
/// (the launch asks for `align` bytes more): its shared-window address.
inline Value dynamicSharedBase(LoweringBuilder &b, int64_t align) {
  auto type = MemRefType::get(
      {ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  Value smem = gpu::DynamicSharedMemoryOp::create(b, type);
  Value base =
      toI64(b, memref::ExtractAlignedPointerAsIndexOp::create(b, smem));
  Value up = arith::AddIOp::create(b, base, i64(b, align - 1));
  return arith::AndIOp::create(b, up, i64(b, -align));
}

inline void mbarrierInit(LoweringBuilder &b, Value address, int64_t count) {
  NVVM::MBarrierInitOp::create(b, sharedPtr(b, address), b.i32(count),
                               /*predicate=*/Value());
}
inline void mbarrierWait(LoweringBuilder &b, Value address, Value parity) {
  NVVM::MBarrierTryWaitParityOp::create(b, sharedPtr(b, address), parity,
                                        b.i32(10000000));
}
inline void mbarrierArrive(LoweringBuilder &b, Value address) {
  NVVM::MBarrierArriveOp::create(
      b, b.getI64Type(), sharedPtr(b, address), /*count=*/Value(),
      NVVM::MemScopeKindAttr::get(b.getContext(), NVVM::MemScopeKind::CTA));
}
/// Arrives on the barrier and adds `bytes` to the transactions it waits for.
inline void mbarrierArriveExpectTx(LoweringBuilder &b, Value address,
                                   Value bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(
      b, Type(), sharedPtr(b, address), bytes,
      NVVM::MemScopeKindAttr::get(b.getContext(), NVVM::MemScopeKind::CTA),
      /*relaxed=*/nullptr, /*predicate=*/Value());
}
inline void mbarrierArriveExpectTx(LoweringBuilder &b, Value address,
                                   int64_t bytes) {
  mbarrierArriveExpectTx(b, address, b.i32(bytes));
}
/// TMA copy of one box of a 3-D tensor map (`map`: its global address as
/// an i64, or a generic !llvm.ptr, e.g. a by-value kernel parameter) to
/// shared address `dst`, completing on the barrier at `barrier`;
/// coordinates innermost first (i32). Boxes past the tensor's end read
/// zeros and still count their whole size. With `ctaMask` (i16, in a
/// cluster) the box is multicast: it lands at the same CTA-relative offset
/// in every CTA of the mask and completes the bytes on each one's barrier
/// at `barrier`'s offset.
inline void tmaLoad3D(LoweringBuilder &b, Value dst, Value map, Value barrier,
                      ArrayRef<Value> coordinates, Value ctaMask = Value()) {
  Value dstPtr = sharedPtr(b, dst);
  if (ctaMask)
    dstPtr = LLVM::AddrSpaceCastOp::create(
        b, LLVM::LLVMPointerType::get(b.getContext(), 7), dstPtr);
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      b, dstPtr,
      isa<LLVM::LLVMPointerType>(map.getType())
          ? map
          : LLVM::IntToPtrOp::create(
                b, LLVM::LLVMPointerType::get(b.getContext()), map)
                .getResult(),
      coordinates, sharedPtr(b, barrier), /*im2colOffsets=*/ValueRange{},
      /*multicastMask=*/ctaMask, /*l2CacheHint=*/Value(),
      NVVM::TMALoadModeAttr::get(b.getContext(), NVVM::TMALoadMode::TILE),
      /*isCTAOnly=*/b.getBoolAttr(!ctaMask), /*group=*/NVVM::CTAGroupKindAttr(),
      /*predicate=*/Value());
}
/// Arrives on the barrier at CTA-relative shared address `address` of
/// cluster CTA `rank` (i32). Release at CTA scope, as CUTLASS's consumer
/// release does: what it orders are this CTA's completed reads of its own
/// shared memory (a release.cluster fence on every K step measured far
/// slower; bench/NOTES.md v12).
inline void mbarrierArriveRemote(LoweringBuilder &b, Value address,
                                 Value rank) {
  Value remote =
      NVVM::MapaOp::create(b, LLVM::LLVMPointerType::get(b.getContext(), 7),
                           sharedPtr(b, address), rank);
  NVVM::MBarrierArriveOp::create(
      b, Type(), remote, /*count=*/Value(),
      NVVM::MemScopeKindAttr::get(b.getContext(), NVVM::MemScopeKind::CTA));
}
/// Loads the i32 at CTA-relative shared address `address` (i64) of cluster
/// CTA `rank` (i32): distributed shared memory (ld.shared::cluster).
inline Value loadSharedClusterI32(LoweringBuilder &b, Value address,
                                  Value rank) {
  Value remote =
      NVVM::MapaOp::create(b, LLVM::LLVMPointerType::get(b.getContext(), 7),
                           sharedPtr(b, address), rank);
  return LLVM::LoadOp::create(b, b.getI32Type(), remote, /*alignment=*/4);
}
/// barrier.cluster.arrive + wait (every thread of every CTA of the
/// cluster; without a cluster launch, of the block).
inline void clusterSync(LoweringBuilder &b) {
  NVVM::ClusterArriveOp::create(b, UnitAttr());
  NVVM::ClusterWaitOp::create(b, UnitAttr());
}
/// griddepcontrol.wait: until the kernel this one was launched after
/// (programmatically, moe-gpu-programmatic-launch) has completed and its
/// memory is visible. A kernel that contains it must run it before any
/// global memory access.
inline void waitForPredecessor(LoweringBuilder &b) {
  NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::wait);
}
/// griddepcontrol.launch_dependents: the next kernel on the stream, if
/// launched programmatically, may start once every block of this one has
/// run this (or exited).
inline void allowDependents(LoweringBuilder &b) {
  NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::launch_dependents);
}
inline void fenceMbarrierInit(LoweringBuilder &b) {
  NVVM::FenceMbarrierInitOp::create(b);
}

/// 16-byte cp.async (cache global) of `srcSize` bytes (0 or 16; the rest
/// is zero-filled).
inline void cpAsync16(LoweringBuilder &b, Value dst, Value src, Value srcSize) {
  NVVM::CpAsyncOp::create(b, sharedPtr(b, dst), globalPtr(b, src),
                          b.getI32IntegerAttr(16),
                          NVVM::LoadCacheModifierKindAttr::get(
                              b.getContext(), NVVM::LoadCacheModifierKind::CG),
                          srcSize);
}
/// 4-byte cp.async (cache all levels) of `srcSize` bytes (0 or 4; the rest
/// is zero-filled).
inline void cpAsync4(LoweringBuilder &b, Value dst, Value src, Value srcSize) {
  NVVM::CpAsyncOp::create(b, sharedPtr(b, dst), globalPtr(b, src),
                          b.getI32IntegerAttr(4),
                          NVVM::LoadCacheModifierKindAttr::get(
                              b.getContext(), NVVM::LoadCacheModifierKind::CA),
                          srcSize);
}
/// The barrier counts one arrival when this thread's earlier cp.asyncs
/// have landed (`noinc`: the arrival is part of the expected count).
inline void cpAsyncArriveNoinc(LoweringBuilder &b, Value barrier) {
  NVVM::CpAsyncMBarrierArriveOp::create(b, sharedPtr(b, barrier),
                                        b.getBoolAttr(true));
}
/// Orders generic-proxy writes (cp.async) before async-proxy reads (wgmma).
inline void fenceProxyAsyncShared(LoweringBuilder &b) {
  NVVM::FenceProxyOp::create(
      b,
      NVVM::ProxyKindAttr::get(b.getContext(), NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

/// `v` (i64) through an opaque move: LLVM cannot hoist what is computed
/// from the result out of loops (used to keep per-store shared addresses
/// from being hoisted and kept live in registers).
inline Value opaque(LoweringBuilder &b, Value v) {
  return LLVM::InlineAsmOp::create(
             b, b.getI64Type(), ValueRange{v}, "mov.b64 $0, $1;", "=l,l",
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             /*asm_dialect=*/LLVM::AsmDialectAttr(),
             /*operand_attrs=*/ArrayAttr())
      .getResult(0);
}

/// Stores `values` (one, or two of one type as a vector) at shared
/// address `address`.
inline void storeShared(LoweringBuilder &b, Value address,
                        ArrayRef<Value> values) {
  Value v = values[0];
  unsigned bytes = v.getType().getIntOrFloatBitWidth() / 8;
  if (values.size() > 1) {
    auto type = VectorType::get({int64_t(values.size())}, v.getType());
    v = LLVM::PoisonOp::create(b, type);
    for (auto [i, x] : llvm::enumerate(values))
      v = LLVM::InsertElementOp::create(
          b, v, x, arith::ConstantIntOp::create(b, b.getI32Type(), i));
    bytes *= values.size();
  }
  LLVM::StoreOp::create(b, v, sharedPtr(b, address), bytes);
}
inline Value loadShared(LoweringBuilder &b, Type type, Value address) {
  return LLVM::LoadOp::create(b, type, sharedPtr(b, address),
                              type.getIntOrFloatBitWidth() / 8);
}
/// The 16 bytes at shared address `src` (16-byte aligned) as vector<4xi32>.
inline Value loadShared16(LoweringBuilder &b, Value src) {
  auto type = VectorType::get({4}, b.getI32Type());
  return LLVM::LoadOp::create(b, type, sharedPtr(b, src), 16);
}
/// Stores the 16-byte vector `v` at global address `dst`
/// (16-byte aligned).
inline void storeGlobal16(LoweringBuilder &b, Value v, Value dst) {
  LLVM::StoreOp::create(b, v, globalPtr(b, dst), 16);
}
/// Stores `values` (of one type, 16 bytes in all) at global address
/// `address` (16-byte aligned) as one vector store.
inline void storeGlobal(LoweringBuilder &b, Value address,
                        ArrayRef<Value> values) {
  auto type = VectorType::get({int64_t(values.size())}, values[0].getType());
  Value v = LLVM::PoisonOp::create(b, type);
  for (auto [i, x] : llvm::enumerate(values))
    v = LLVM::InsertElementOp::create(
        b, v, x, arith::ConstantIntOp::create(b, b.getI32Type(), i));
  storeGlobal16(b, v, address);
}
/// bar.sync `id` (i32), `threads`: a barrier of part of the block.
inline void namedBarrier(LoweringBuilder &b, Value id, int64_t threads) {
  NVVM::BarrierOp::create(b, Type(), id, b.i32(threads),
                          NVVM::BarrierReductionAttr(), Value());
}

inline void setMaxRegisters(LoweringBuilder &b, int64_t count, bool increase) {
  NVVM::SetMaxRegisterOp::create(
      b, b.getI32IntegerAttr(count),
      NVVM::SetMaxRegisterActionAttr::get(
          b.getContext(), increase ? NVVM::SetMaxRegisterAction::increase
                                   : NVVM::SetMaxRegisterAction::decrease));
}

/// wgmma shared-memory descriptor of a K-major, 128-byte-swizzled tile at
/// shared address `address` (1024-aligned tile start): SBO 1024 B (8 rows
/// of 128 B), LBO 16 B, swizzle mode 128B. Every run-time offset must be in
/// `address` already: ptxas 12.8/13.0 drop the high word of a descriptor
/// to which a run-time value is added (hopper notes, trap P1); constants
/// (+2 per k16 step) may be added to the result.
///
/// An MN-major 128-byte-swizzled tile (`mnMajor`) is a column of atoms of
/// 64 MN elements x 8 K rows (1024 B, K rows of 128 B, the same swizzle):
/// atoms along K `SBO` = 1024 B apart, atoms along MN `lbo` bytes apart.
inline Value wgmmaDescriptor(LoweringBuilder &b, Value address,
                             int64_t lbo = 16) {
  Value a32 = arith::TruncIOp::create(b, b.getI32Type(), address);
  Value field = arith::ShRUIOp::create(
      b, arith::AndIOp::create(b, a32, b.i32(0x3FFFF)), b.i32(4));
  Value lo = arith::ExtUIOp::create(b, b.getI64Type(), field);
  int64_t high = (int64_t(1) << 62) | (int64_t(1024 >> 4) << 32) |
                 (int64_t(lbo >> 4) << 16);
  return arith::OrIOp::create(b, lo, i64(b, high));
}

/// f32 accumulator fragment of m64nNk16: N/2 f32 per thread.
inline Type wgmmaAccumulatorType(LoweringBuilder &b, int64_t n) {
  return LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(n / 2, b.getF32Type()));
}
/// acc += A(desc a, K-major, or MN-major with `aMnMajor`: the transposed
/// A of wgmma, 16-bit types only) * B(desc b, K-major, or MN-major with
/// `bMnMajor`), m64nNk16, f32 += 16-bit (m64nNk32, f32 += e4m3, with
/// `input` e4m3).
/// With `accumulate` false the MMA ignores `acc` (D = A * B: the first MMA
/// of a tile, so that no zero accumulators are live across the stage wait
/// before it; ptxas serialises the wgmma otherwise, C7520).
inline Value wgmma(LoweringBuilder &b, Value acc, Value descA, Value descB,
                   int64_t n, NVVM::WGMMATypes input, bool aMnMajor,
                   bool bMnMajor, bool accumulate = true) {
  MLIRContext *ctx = b.getContext();
  auto type = NVVM::WGMMATypesAttr::get(ctx, input);
  auto one = NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one);
  // 32 bytes of K per instruction: k16 for 16-bit inputs, k32 for 8-bit
  // (e4m3, K-major operands only).
  int64_t k = input == NVVM::WGMMATypes::e4m3 ? 32 : 16;
  return NVVM::WgmmaMmaAsyncOp::create(
      b, acc.getType(), acc, descA, descB,
      NVVM::MMAShapeAttr::get(ctx, 64, n, k), type, type,
      NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
      NVVM::WGMMAScaleOutAttr::get(ctx, accumulate ? NVVM::WGMMAScaleOut::one
                                                   : NVVM::WGMMAScaleOut::zero),
      one, one,
      NVVM::MMALayoutAttr::get(ctx, aMnMajor ? NVVM::MMALayout::col
                                             : NVVM::MMALayout::row),
      NVVM::MMALayoutAttr::get(ctx, bMnMajor ? NVVM::MMALayout::row
                                             : NVVM::MMALayout::col),
      /*satfinite=*/NVVM::MMAIntOverflowAttr());
}
/// acc += A * B(desc b, K-major), m64nNk16, f32 += bf16, with A from
/// registers: `a` the thread's four i32 (bf16 pairs) of the m16n8k16 A
/// fragment layout per warp (rows 16 * warp + lane / 4 (+ 8), K 2 (lane %
/// 4) (+ 8), +1 in the high half). Inline PTX: the NVVM op takes A by
/// descriptor only. With `accumulate` false D = A * B (see wgmma).
inline Value wgmmaRegisterA(LoweringBuilder &b, Value acc, ArrayRef<Value> a,
                            Value descB, int64_t n, bool accumulate) {
  int64_t count = n / 2;
  // scale-d is a predicate operand: set from an i32 (ptxas folds it).
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $" +
                     std::to_string(count + 5) +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + "k16.f32.bf16.bf16 {";
  std::string constraints;
  for (int64_t i = 0; i < count; ++i) {
    text += (i ? ", $" : "$") + std::to_string(i);
    constraints += "=f,";
  }
  text += "}, {$" + std::to_string(count) + ", $" + std::to_string(count + 1) +
          ", $" + std::to_string(count + 2) + ", $" +
          std::to_string(count + 3) + "}, $" + std::to_string(count + 4) +
          ", p, 1, 1, 0;\n}";
  constraints += "r,r,r,r,l,r";
  SmallVector<Value> operands(a.begin(), a.end());
  operands.push_back(descB);
  operands.push_back(b.i32(accumulate ? 1 : 0));
  // The accumulators in, tied to the outputs (ignored when !accumulate).
  for (int64_t i = 0; i < count; ++i) {
    operands.push_back(LLVM::ExtractValueOp::create(b, acc, i));
    constraints += "," + std::to_string(i);
  }
  return LLVM::InlineAsmOp::create(
             b, acc.getType(), operands, text, constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             /*asm_dialect=*/LLVM::AsmDialectAttr(),
             /*operand_attrs=*/ArrayAttr())
      .getResult(0);
}

inline void wgmmaFence(LoweringBuilder &b) {
  NVVM::WgmmaFenceAlignedOp::create(b);
}
inline void wgmmaCommit(LoweringBuilder &b) {
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
}
inline void wgmmaWait(LoweringBuilder &b, int64_t pending) {
  NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(pending));
}

} // namespace nvvm
} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_MOETOGPU_GEMM_NVVMBUILDER_H
