//===- WgmmaMxfp4.cpp - the Hopper engine's MXFP4 weights -----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// mxfp4 weights (gpt-oss: [E, N, K/2] bytes of two e2m1 codes, low nibble
// first, with E8M0 scales [E, N, K/32]) times bf16 activations on the
// tensor cores. Only wgmma's A operand may come from registers, so every
// mxfp4 kernel is the small-M form (WgmmaEngine.cpp: weights on the M
// side, 64 weight rows per consumer warpgroup, the tokens on N):
//
// - A stage is 256 K: the tileM token rows (bf16, four 128-byte swizzled
//   slices of 64 K, by the producer's cp.async as for 16-bit weights), the
//   tileN weight rows (one 128-byte row of packed codes each, by TMA as
//   bytes, 128-byte swizzled) and their scales: the stage's 8 scale bytes
//   of a row are not 4-byte aligned in general (gpt-oss: 90 a row), so the
//   producer copies the three aligned words that hold them (cp.async 4,
//   zero-filled past the buffer) and the consumers shift them into place.
//   The mxfp4_hopper main kernel's stages are 128 K (two token slices,
//   64-byte weight rows 64-byte swizzled, two scale words a row), so that
//   twice as many stages fit.
// - Per 32-K block (one scale per weight row) a consumer thread loads the
//   16 bytes of each of its two fragment rows (16 * warp + lane / 4, + 8)
//   and keeps byte lane % 4 of each 4-byte word: the pairs K 2 (lane % 4)
//   (+1) and + 8 of the block's two k16 steps, i.e. its m16n8k16 A
//   fragment. A byte becomes a bf16 pair by two byte permutes from
//   tables of the eight e2m1 magnitudes (exact bf16 values), the signs
//   moved into bit 15 / 31, and one bf16x2 multiply by the block's scale
//   2^(s - 127) (exact: two significant bits; s = 255 is NaN, s = 0 the
//   subnormal 2^-127), the same values --moe-lower-to-cpu multiplies.
// - Two register-A wgmmas per block (one commit group), one group in
//   flight, so consecutive blocks' fragments are distinct registers (the
//   loop runs over pairs of blocks); a stage is released once the next
//   stage's first group was waited for (its MMAs read the token tiles).
//
//===----------------------------------------------------------------------===//

#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::wgmma;

std::pair<Value, Value>
WgmmaKernel::mxWeightRow(LoweringBuilder &b, const WorkItem &item, Value r) {
  if (!concat) {
    Value col = b.add(b.mul(item.colTile, b.idx(tileN)), r);
    return {col, b.cmpi(CmpI::ult, col, b.idx(g.gemmN))};
  }
  int64_t half = tileN / 2;
  Value up = b.cmpi(CmpI::uge, r, b.idx(half));
  Value outCol = b.add(b.mul(item.colTile, b.idx(half)),
                       b.select(up, b.sub(r, b.idx(half)), r));
  Value ok = b.cmpi(CmpI::ult, outCol, b.idx(g.outN));
  return {b.select(up, b.add(outCol, b.idx(g.outN)), outCol), ok};
}

Value WgmmaKernel::mxScaleRow(LoweringBuilder &b, Value expert, Value col) {
  Value offset =
      b.add(b.mul(expert, rhsScaleStride0), b.mul(col, rhsScaleStride1));
  return add64(b, rhsScaleAddr, nvvm::toI64(b, offset));
}

void WgmmaKernel::loadMxScales(LoweringBuilder &b, Value tid, Value stage,
                               Value kt, const WorkItem &item) {
  Value slots = mxScaleSlots(b, stage);
  // One past the last scale byte (the last expert's last row's K / 32).
  int64_t blocks = g.kDim / 32;
  Value end = add64(
      b, mxScaleRow(b, b.idx(g.numExperts - 1), b.idx(g.gemmN - 1)), blocks);
  Value four = nvvm::i64(b, 4);
  Value kBytes = nvvm::toI64(b, b.mul(kt, b.idx(mxStageBlocks())));
  // Word w of row r: copy idx = tid + 128 i = words r + w.
  const int64_t words = mxScaleWordsPerRow();
  int64_t copies = words * tileN;
  for (int64_t i = 0; i < (copies + 127) / 128; ++i) {
    Value idx = b.add(tid, b.idx(128 * i));
    auto body = [&](LoweringBuilder &b) {
      Value r = arith::DivUIOp::create(b, idx, b.idx(words));
      Value w = arith::RemUIOp::create(b, idx, b.idx(words));
      auto [col, ok] = mxWeightRow(b, item, r);
      col = b.minIdx(col, b.idx(g.gemmN - 1));
      Value first = add64(b, mxScaleRow(b, item.expert, col), kBytes);
      Value word = arith::AndIOp::create(b, first, nvvm::i64(b, ~int64_t(3)));
      Value src =
          arith::AddIOp::create(b, word, nvvm::toI64(b, b.mul(w, b.idx(4))));
      // Bytes of the word inside the buffer (a word may straddle its end).
      Value left = arith::SubIOp::create(b, end, src);
      Value bytes = arith::MaxSIOp::create(
          b, arith::MinSIOp::create(b, left, four), nvvm::i64(b, 0));
      bytes = b.select(ok, bytes, nvvm::i64(b, 0));
      Value dst =
          add64(b, slots,
                nvvm::toI64(b, b.add(b.mul(r, b.idx(16)), b.mul(w, b.idx(4)))));
      nvvm::cpAsync4(b, dst, src,
                     arith::TruncIOp::create(b, b.getI32Type(), bytes));
    };
    if (128 * (i + 1) <= copies)
      body(b);
    else
      when(b, b.cmpi(CmpI::ult, idx, b.idx(copies)), body);
  }
}

/// The bf16 of E8M0 byte `byte` (i32, 0..255), 2^(s - 127), in both halves
/// of an i32: s = 0 is the subnormal 2^-127 (0x0040), 255 NaN (0x7FC0).
static Value e8m0Bf16Pair(LoweringBuilder &b, Value byte) {
  Value bits = arith::ShLIOp::create(b, byte, b.i32(7));
  bits = b.select(b.cmpi(CmpI::eq, byte, b.i32(0)), b.i32(0x40), bits);
  bits = b.select(b.cmpi(CmpI::eq, byte, b.i32(0xFF)), b.i32(0x7FC0), bits);
  return arith::OrIOp::create(b, bits,
                              arith::ShLIOp::create(b, bits, b.i32(16)));
}

WgmmaKernel::MxThread WgmmaKernel::mxThread(LoweringBuilder &b, Value tid,
                                            Value cw, const WorkItem &item) {
  MxThread t;
  t.ct = arith::AndIOp::create(b, tid, b.idx(127));
  Value warp = arith::ShRUIOp::create(b, t.ct, b.idx(5));
  t.lane = arith::AndIOp::create(b, t.ct, b.idx(31));
  t.rows[0] = b.add(b.add(b.mul(cw, b.idx(64)), b.mul(warp, b.idx(16))),
                    arith::ShRUIOp::create(b, t.lane, b.idx(2)));
  t.rows[1] = b.add(t.rows[0], b.idx(8));
  // The rows' 16-byte chunk swizzle: row % 8 (128-byte rows), row / 2 % 4
  // (64-byte rows); rows[1] = rows[0] + 8 has the same.
  t.swizzle =
      mxRowBytes() == 128
          ? arith::AndIOp::create(
                b, arith::ShRUIOp::create(b, t.lane, b.idx(2)), b.idx(7))
          : arith::AndIOp::create(
                b, arith::ShRUIOp::create(b, t.lane, b.idx(3)), b.idx(3));
  for (int64_t h = 0; h < 2; ++h) {
    Value col =
        b.minIdx(mxWeightRow(b, item, t.rows[h]).first, b.idx(g.gemmN - 1));
    Value first = mxScaleRow(b, item.expert, col);
    t.scaleShift[h] = arith::ShLIOp::create(
        b,
        arith::TruncIOp::create(
            b, b.getI32Type(),
            arith::AndIOp::create(b, first, nvvm::i64(b, 3))),
        b.i32(3));
  }
  return t;
}

void WgmmaKernel::mxStageScaleWords(LoweringBuilder &b, Value stage,
                                    const MxThread &t, Value words[2][2]) {
  Value slots = mxScaleSlots(b, stage);
  for (int64_t h = 0; h < 2; ++h) {
    Value v = nvvm::loadShared16(
        b, add64(b, slots, nvvm::toI64(b, b.mul(t.rows[h], b.idx(16)))));
    Value w[3];
    for (int64_t i = 0; i < 3; ++i)
      w[i] = LLVM::ExtractElementOp::create(b, v, b.i32(i));
    words[h][0] = LLVM::FshrOp::create(b, w[1], w[0], t.scaleShift[h]);
    // (A 128-K stage has four scale bytes: the slot's third word is not
    // copied.)
    words[h][1] = mxStageBlocks() > 4
                      ? LLVM::FshrOp::create(b, w[2], w[1], t.scaleShift[h])
                      : Value();
  }
}

void WgmmaKernel::consumeMxfp4(LoweringBuilder &b, Value tid, Value cw,
                               const WorkItem &item) {
  Type i32 = b.getI32Type();
  Type accType = nvvm::wgmmaAccumulatorType(b, tileM);
  SwapTargets targets = prefetchSwapTargets(b, tid, item);
  MxThread thread = mxThread(b, tid, cw, item);
  Value ct = thread.ct, lane = thread.lane, swizzle = thread.swizzle;
  ArrayRef<Value> rows = thread.rows;
  // Byte lane % 4 of every word is the thread's: the selector that
  // gathers it from two words (prmt).
  Value quad = b.toI32(arith::AndIOp::create(b, lane, b.idx(3)));
  Value gather = arith::OrIOp::create(
      b, quad,
      arith::ShLIOp::create(b, arith::AddIOp::create(b, quad, b.i32(4)),
                            b.i32(4)));
  // The e2m1 magnitude tables (bytes 0-7: codes 0-7), low and high byte of
  // their bf16: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  Value loA = b.i32(int32_t(0xC0800000u)), loB = b.i32(int32_t(0xC0804000u));
  Value hiA = b.i32(0x3F3F3F00), hiB = b.i32(0x40404040);
  auto permute = [&](LoweringBuilder &b, Value lo, Value hi,
                     Value selector) -> Value {
    return NVVM::PermuteOp::create(b, i32, lo, hi, selector,
                                   NVVM::PermuteMode::DEFAULT);
  };
  auto vec2 = VectorType::get({2}, b.getBF16Type());
  // The thread's four bf16 pairs of a row's 16-byte chunk w (byte lane % 4
  // of each word: the pairs of K 2q (+1), 2q + 8 (+1), 16 + 2q (+1), 24 +
  // 2q (+1)) times `scale` (bf16x2), by byte permutes: x gathers the four
  // bytes; the tables give each magnitude's low and high byte (selector
  // nibbles: the codes with the sign cleared, else prmt replicates the
  // sign); two more permutes interleave them into pairs; a sign-
  // replicating permute of x and x << 4 puts each code's sign (bit 3 of its
  // nibble) into the msb of a byte, masked into bits 15 / 31.
  auto dequant = [&](LoweringBuilder &b, Value w[4],
                     Value scale) -> SmallVector<Value, 4> {
    Value x = permute(b, permute(b, w[0], w[1], gather),
                      permute(b, w[2], w[3], gather), b.i32(0x5410));
    Value mag = arith::AndIOp::create(b, x, b.i32(0x77777777));
    Value upper = arith::ShRUIOp::create(b, mag, b.i32(16));
    Value low[2] = {permute(b, loA, loB, mag), permute(b, loA, loB, upper)};
    Value high[2] = {permute(b, hiA, hiB, mag), permute(b, hiA, hiB, upper)};
    Value shifted = arith::ShLIOp::create(b, x, b.i32(4));
    static constexpr int32_t interleave[2] = {0x5140, 0x7362};
    static constexpr int32_t signs[4] = {0xCC88, 0xDD99, 0xEEAA, 0xFFBB};
    SmallVector<Value, 4> pairs;
    for (int64_t i = 0; i < 4; ++i) {
      Value bits =
          permute(b, low[i / 2], high[i / 2], b.i32(interleave[i % 2]));
      Value sign = permute(b, shifted, x, b.i32(signs[i]));
      bits = arith::OrIOp::create(
          b, bits, arith::AndIOp::create(b, sign, b.i32(int32_t(0x80008000u))));
      Value pair = LLVM::BitcastOp::create(b, vec2, bits);
      Value scaled = LLVM::FMulOp::create(b, pair, scale);
      pairs.push_back(LLVM::BitcastOp::create(b, i32, scaled));
    }
    return pairs;
  };
  assert(stageK == kMxfp4StageK && "mxfp4: 256 K a stage");
  const int64_t blocks = g.kDim / 32;
  const bool kTail = blocks % (kMxfp4StageK / 32) != 0;
  // Scale block j (index, 0..7) of K step kt on `stage`: its two MMAs.
  // (A rolled loop over the blocks: unrolled, ptxas hoisted the stage's
  // loads and took 140 registers, over the 128 of two blocks per SM.)
  auto mxBlock = [&](LoweringBuilder &b, Value stage, Value kt, Value j,
                     Value scaleWords[2][2], Value acc, bool firstMma) {
    Value tile = mxWeightTile(b, stage);
    Value quarter =
        b.toI32(b.mul(arith::AndIOp::create(b, j, b.idx(3)), b.idx(8)));
    Value upper = b.cmpi(CmpI::uge, j, b.idx(4));
    Value scale[2], chunk[2][4];
    for (int64_t h = 0; h < 2; ++h) {
      // The block's scale as bf16 2^(s - 127): s = 0 is the subnormal
      // 2^-127, s = 255 NaN; blocks past K multiply zeros by zero.
      Value word = b.select(upper, scaleWords[h][1], scaleWords[h][0]);
      Value pair = e8m0Bf16Pair(
          b, arith::AndIOp::create(b, arith::ShRUIOp::create(b, word, quarter),
                                   b.i32(0xFF)));
      if (kTail)
        pair = b.select(
            b.cmpi(CmpI::ult, b.add(b.mul(kt, b.idx(8)), j), b.idx(blocks)),
            pair, b.i32(0));
      scale[h] = LLVM::BitcastOp::create(b, vec2, pair);
      // Chunk j of the row, at chunk j ^ (row % 8) (128-byte swizzle).
      Value at = b.add(b.mul(rows[h], b.idx(128)),
                       b.mul(arith::XOrIOp::create(b, swizzle, j), b.idx(16)));
      Value v = nvvm::loadShared16(b, add64(b, tile, nvvm::toI64(b, at)));
      for (int64_t i = 0; i < 4; ++i)
        chunk[h][i] = LLVM::ExtractElementOp::create(b, v, b.i32(i));
    }
    // Pair i of row h: k16 step i / 2, K half i % 2 (fragment register
    // 2 (i % 2) + h).
    SmallVector<Value, 4> pairs[2] = {dequant(b, chunk[0], scale[0]),
                                      dequant(b, chunk[1], scale[1])};
    SmallVector<Value, 4> a[2];
    for (int64_t t = 0; t < 2; ++t)
      a[t] = {pairs[0][2 * t], pairs[1][2 * t], pairs[0][2 * t + 1],
              pairs[1][2 * t + 1]};
    // The block's token columns: slice j / 2 of the stage, 64 bytes in
    // for odd j (run-time offsets go into the address, hopper notes P1);
    // +32 bytes (2 in the descriptor) per k16 step.
    Value at = b.add(
        b.mul(arith::ShRUIOp::create(b, j, b.idx(1)), b.idx(sliceBytes())),
        b.mul(arith::AndIOp::create(b, j, b.idx(1)), b.idx(64)));
    Value desc = nvvm::wgmmaDescriptor(b, add64(b, stage, nvvm::toI64(b, at)));
    nvvm::wgmmaFence(b);
    for (int64_t t = 0; t < 2; ++t)
      acc = nvvm::wgmmaRegisterA(b, acc, a[t], add64(b, desc, 2 * t), tileM,
                                 /*accumulate=*/!(firstMma && t == 0));
    nvvm::wgmmaCommit(b);
    nvvm::wgmmaWait(b, 1);
    return acc;
  };
  // One K step (256 K, 8 scale blocks) on its stage.
  auto mxStep = [&](LoweringBuilder &b, Value kt, Value acc, bool first) {
    Value step = b.add(item.step, kt);
    auto [s, round] = stageOf(b, step);
    nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
    nvvm::fenceProxyAsyncShared(b);
    Value stage = stageAddress(b, s);
    Value scaleWords[2][2];
    mxStageScaleWords(b, stage, thread, scaleWords);
    acc = mxBlock(b, stage, kt, b.idx(0), scaleWords, acc, first);
    // The previous stage's last group has now completed.
    if (!first) {
      Value prev =
          arith::RemUIOp::create(b, b.sub(step, b.idx(1)), b.idx(stages));
      releaseStage(b, ct, prev);
    }
    acc = mxBlock(b, stage, kt, b.idx(1), scaleWords, acc, false);
    // The blocks in pairs: a wgmma reads its A registers while it runs,
    // and writing them before its group is waited for is undefined (the
    // PTX ISA); one group stays in flight, so consecutive blocks need
    // their own registers (in a rolled loop of single blocks each block
    // overwrote the running one's fragments: wrong results on an H100
    // whenever the MMAs queued, with n >= 32 or two consumer warpgroups).
    return b.forLoop(b.idx(1), b.idx(kMxfp4StageK / 64), {acc},
                     [&](LoweringBuilder &b, Value pair,
                         ValueRange in) -> SmallVector<Value> {
                       Value j = b.mul(pair, b.idx(2));
                       Value next =
                           mxBlock(b, stage, kt, j, scaleWords, in[0], false);
                       return {mxBlock(b, stage, kt, b.add(j, b.idx(1)),
                                       scaleWords, next, false)};
                     })[0];
  };
  Value acc = mxStep(b, b.idx(0), LLVM::PoisonOp::create(b, accType), true);
  acc = b.forLoop(
      b.idx(1), b.idx(kSteps), {acc},
      [&](LoweringBuilder &b, Value kt, ValueRange in) -> SmallVector<Value> {
        return {mxStep(b, kt, in[0], false)};
      })[0];
  nvvm::wgmmaWait(b, 0);
  Value last = arith::RemUIOp::create(
      b, b.sub(b.add(item.step, b.idx(kSteps)), b.idx(1)), b.idx(stages));
  releaseStage(b, ct, last);
  epilogueSwapped(b, tid, cw, item, acc, targets);
}

// mxfp4_hopper: each 32-K block's nibbles are stored in the register
// fragment order (moe.grouped_matmul; e2m1HopperCode has the bit map), so
// a consumer thread's whole A fragment of a block row is the block's word
// lane % 4 (one 4-byte shared load, no byte gathering), and its four bf16
// pairs come out of the word by rotates and masks: each pair's codes land
// as bf16 bits s, e1, e0, m at 15, 8, 7, 6 (and 31, 24, 23, 22), i.e. the
// bf16 code * 2^-126 (e = 0 is the subnormal 0.5 * 2^-126), three pairs by
// one rotate each, the fourth by three shifts of its masked bits. One
// bf16x2 multiply by 2^(s - 1) then gives code * 2^(s - 127) exactly for
// s < 128; a thread whose stage scales reach 128 (2^(s - 1) is not a bf16)
// multiplies by 2^126 first and then by 2^(s - 127) as consumeMxfp4 does
// (255: NaN; blocks past K have their scale bytes zeroed). The MMAs go in
// groups of two blocks (four wgmmas, one commit), one group in flight.
void WgmmaKernel::consumeMxfp4Hopper(LoweringBuilder &b, Value tid, Value cw,
                                     const WorkItem &item) {
  Type i32 = b.getI32Type();
  Type accType = nvvm::wgmmaAccumulatorType(b, tileM);
  SwapTargets targets = prefetchSwapTargets(b, tid, item);
  MxThread thread = mxThread(b, tid, cw, item);
  Value ct = thread.ct, swizzle = thread.swizzle;
  ArrayRef<Value> rows = thread.rows;
  // The thread's word of a 16-byte block chunk.
  Value wordAt =
      b.mul(arith::AndIOp::create(b, thread.lane, b.idx(3)), b.idx(4));
  auto vec2 = VectorType::get({2}, b.getBF16Type());
  auto mulPair = [&](LoweringBuilder &b, Value bits, Value factor) -> Value {
    Value pair = LLVM::BitcastOp::create(b, vec2, bits);
    Value scaled =
        LLVM::FMulOp::create(b, pair, LLVM::BitcastOp::create(b, vec2, factor));
    return LLVM::BitcastOp::create(b, i32, scaled);
  };
  auto rotl = [&](LoweringBuilder &b, Value x, int32_t s) -> Value {
    return LLVM::FshlOp::create(b, x, x, b.i32(s));
  };
  // The four bf16 pairs (times 2^126) of a block row's word: K 2q (+1),
  // 2q + 8, 2q + 16, 2q + 24 (q = lane % 4).
  const Value mask = b.i32(int32_t(0x81C081C0u));
  auto decode = [&](LoweringBuilder &b, Value x) -> std::array<Value, 4> {
    // The fourth pair: its masked bits shifted right by 7 and by 2 (one
    // mul.hi by 2^25 + 2^30; the copies share no bit, so no carries) and
    // left by 4 (at three blocks per SM 1% faster than three rotates,
    // bench/NOTES.md v72).
    Value rest = arith::AndIOp::create(b, x, b.i32(0x6C006C00));
    Value right =
        arith::MulUIExtendedOp::create(b, rest, b.i32(0x42000000)).getHigh();
    Value p3 = arith::AddIOp::create(b, right,
                                     arith::ShLIOp::create(b, rest, b.i32(4)));
    return {arith::AndIOp::create(b, x, mask),
            arith::AndIOp::create(b, rotl(b, x, 3), mask),
            arith::AndIOp::create(b, rotl(b, x, 6), mask),
            arith::AndIOp::create(b, p3, mask)};
  };
  const int64_t blocks = g.kDim / 32;
  // A stage is one or two halves of four blocks (128 K).
  const int64_t halves = stageK / 128;
  const bool kTail = blocks % mxStageBlocks() != 0;
  // Blocks j0, j0 + 1 (j0 = 4 half + c0, c0 static: 0 or 2) of K step kt
  // on `stage`: decode, scale, four MMAs, commit, wait for the previous
  // group. `words[h]`: row h's four stage scale bytes of this half.
  // `rowWords[h]`: row h's word of chunk 0 on the stage; `swizzleHalf`:
  // the chunk swizzle with the half's 4 folded in; `descHalf`: the token
  // descriptor of the half's first block.
  auto group = [&](LoweringBuilder &b, Value rowWords[2], Value swizzleHalf,
                   Value descStage, Value descHalf, int64_t c0, Value words[2],
                   Value big, Value acc) -> Value {
    SmallVector<Value> raw;
    for (int64_t i = 0; i < 2; ++i) {
      Value chunk = arith::XOrIOp::create(b, swizzleHalf, b.idx(c0 + i));
      for (int64_t h = 0; h < 2; ++h) {
        Value x = nvvm::loadShared(
            b, i32,
            add64(b, rowWords[h], nvvm::toI64(b, b.mul(chunk, b.idx(16)))));
        for (Value v : decode(b, x))
          raw.push_back(v);
      }
    }
    // raw[8 i + 4 h + p]: block i, row h, pair p.
    SmallVector<Type> types(16, i32);
    SmallVector<Value> pairs = b.ifElse(
        big, types,
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          SmallVector<Value> out;
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t h = 0; h < 2; ++h) {
              Value factor = e8m0Bf16Pair(
                  b,
                  arith::AndIOp::create(
                      b,
                      arith::ShRUIOp::create(b, words[h], b.i32(8 * (c0 + i))),
                      b.i32(0xFF)));
              for (int64_t p = 0; p < 4; ++p)
                out.push_back(mulPair(
                    b, mulPair(b, raw[8 * i + 4 * h + p], b.i32(0x7E807E80)),
                    factor));
            }
          return out;
        },
        [&](LoweringBuilder &b) -> SmallVector<Value> {
          SmallVector<Value> out;
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t h = 0; h < 2; ++h) {
              // 2^(s - 1) in both halves: (s + 126) << 7.
              Value byte = NVVM::PermuteOp::create(b, i32, words[h], b.i32(0),
                                                   b.i32(0x4440 | (c0 + i)),
                                                   NVVM::PermuteMode::DEFAULT);
              Value factor = arith::AddIOp::create(
                  b, arith::MulIOp::create(b, byte, b.i32(0x00800080)),
                  b.i32(0x3F003F00));
              for (int64_t p = 0; p < 4; ++p)
                out.push_back(mulPair(b, raw[8 * i + 4 * h + p], factor));
            }
          return out;
        });
    nvvm::wgmmaFence(b);
    for (int64_t i = 0; i < 2; ++i) {
      // The block's token columns: slice (c0 + i) / 2 of the half, 64 bytes
      // in for odd blocks; +32 bytes (2 in the descriptor) per k16 step.
      int64_t c = c0 + i;
      int64_t offset = ((c / 2) * sliceBytes() + (c % 2) * 64) / 16;
      for (int64_t t = 0; t < 2; ++t) {
        // The address field (bits 0-13) never carries out: only the low
        // word changes, the high one is wgmmaDescriptor's constant.
        Value low = arith::AddIOp::create(b, descHalf, b.i32(offset + 2 * t));
        Value desc = arith::OrIOp::create(
            b, arith::ExtUIOp::create(b, b.getI64Type(), low),
            arith::AndIOp::create(b, descStage,
                                  nvvm::i64(b, int64_t(~0xFFFFFFFFull))));
        SmallVector<Value, 4> a = {
            pairs[8 * i + 2 * t], pairs[8 * i + 4 + 2 * t],
            pairs[8 * i + 2 * t + 1], pairs[8 * i + 4 + 2 * t + 1]};
        acc = nvvm::wgmmaRegisterA(b, acc, a, desc, tileM,
                                   /*accumulate=*/true);
      }
    }
    nvvm::wgmmaCommit(b);
    nvvm::wgmmaWait(b, 1);
    return acc;
  };
  // One K step (stageK: halves of 4 blocks, two groups each) on its stage.
  auto step = [&](LoweringBuilder &b, Value kt, Value acc) -> Value {
    Value globalStep = b.add(item.step, kt);
    auto [s, round] = stageOf(b, globalStep);
    nvvm::mbarrierWait(b, fullBarrier(b, s), parity(b, round));
    nvvm::fenceProxyAsyncShared(b);
    Value stage = stageAddress(b, s);
    Value tile = mxWeightTile(b, stage);
    Value descStage = nvvm::wgmmaDescriptor(b, stage);
    Value rowWords[2];
    for (int64_t h = 0; h < 2; ++h)
      rowWords[h] = add64(
          b, tile,
          nvvm::toI64(b, b.add(b.mul(rows[h], b.idx(mxRowBytes())), wordAt)));
    Value scaleWords[2][2];
    mxStageScaleWords(b, stage, thread, scaleWords);
    return b.forLoop(
        b.idx(0), b.idx(halves), {acc},
        [&](LoweringBuilder &b, Value half,
            ValueRange in) -> SmallVector<Value> {
          Value upper = b.cmpi(CmpI::ne, half, b.idx(0));
          Value words[2];
          for (int64_t h = 0; h < 2; ++h)
            words[h] = halves == 1 ? scaleWords[h][0]
                                   : b.select(upper, scaleWords[h][1],
                                              scaleWords[h][0]);
          if (kTail) {
            // Scale bytes of blocks past K: zero (their weights are). Only
            // the last K step has such blocks, and how many is static: its
            // mask per half is a constant (computing it every half-stage
            // cost ~15 issue slots of ~190).
            auto keepOf = [&](int64_t half) -> int32_t {
              int64_t left = blocks - (kSteps - 1) * mxStageBlocks() - 4 * half;
              left = std::clamp<int64_t>(left, 0, 4);
              return left == 4 ? -1 : int32_t((1u << (8 * left)) - 1);
            };
            Value keep = b.i32(keepOf(0));
            if (halves == 2)
              keep = b.select(upper, b.i32(keepOf(1)), keep);
            keep = b.select(b.cmpi(CmpI::eq, kt, b.idx(kSteps - 1)), keep,
                            b.i32(-1));
            for (int64_t h = 0; h < 2; ++h)
              words[h] = arith::AndIOp::create(b, words[h], keep);
          }
          Value big = b.cmpi(CmpI::ne,
                             arith::AndIOp::create(
                                 b, arith::OrIOp::create(b, words[0], words[1]),
                                 b.i32(int32_t(0x80808080u))),
                             b.i32(0));
          Value swizzleHalf =
              arith::XOrIOp::create(b, swizzle, b.mul(half, b.idx(4)));
          Value descHalf = arith::AddIOp::create(
              b, arith::TruncIOp::create(b, i32, descStage),
              b.toI32(b.mul(half, b.idx(2 * sliceBytes() / 16))));
          Value acc = group(b, rowWords, swizzleHalf, descStage, descHalf, 0,
                            words, big, in[0]);
          // After the stage's first group: the previous stage's last
          // group has completed (one group in flight).
          Value release =
              arith::AndIOp::create(b, b.cmpi(CmpI::eq, half, b.idx(0)),
                                    b.cmpi(CmpI::ne, kt, b.idx(0)));
          b.ifThen(release, {}, [&](LoweringBuilder &b) -> SmallVector<Value> {
            Value prev = arith::RemUIOp::create(b, b.sub(globalStep, b.idx(1)),
                                                b.idx(stages));
            releaseStage(b, ct, prev);
            return {};
          });
          return {group(b, rowWords, swizzleHalf, descStage, descHalf, 2, words,
                        big, acc)};
        })[0];
  };
  // (Two accumulators alternating between the groups, so that consecutive
  // groups' MMAs are independent, measured no faster: bench/NOTES.md v72.)
  Value acc = b.forLoop(
      b.idx(0), b.idx(kSteps), {LLVM::ZeroOp::create(b, accType)},
      [&](LoweringBuilder &b, Value kt, ValueRange in) -> SmallVector<Value> {
        return {step(b, kt, in[0])};
      })[0];
  nvvm::wgmmaWait(b, 0);
  Value last = arith::RemUIOp::create(
      b, b.sub(b.add(item.step, b.idx(kSteps)), b.idx(1)), b.idx(stages));
  releaseStage(b, ct, last);
  epilogueSwapped(b, tid, cw, item, acc, targets);
}
