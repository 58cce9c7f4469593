//===- GemmConfig.cpp - expert GEMM kernel configuration ------------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The cost model. The Hopper engine (wgmma) runs wherever the chip has it
// and the op fits its operand loaders; everything else takes the portable
// SIMT engine. Tiles: 128 rows (two consumer warpgroups) x 256 rhs columns
// (128 when the rhs has fewer than 512 columns; with K-major weights whose
// columns 256 does not divide, the width in [192, 256] that wastes the
// fewest, e.g. 240 for gpt-oss-120b's 2880) x 64 K, as many pipeline
// stages as fit in shared memory (at most 8); 2-CTA clusters sharing the
// weight tiles when the weights come by TMA and the tile has >= 128
// columns. Pass options override each choice.
//
// Beside it, for few rows per expert, the small-M ("swap AB") kernel:
// weights on the wgmma M side (64 weight rows per block), 16 tokens per
// tile on N, two blocks per SM, as many stages as fit in half the shared
// memory, each stage 128 K elements deep (two 128-byte swizzled slices:
// 0.2-2.5% faster than one at T <= 64, bench/NOTES.md v38), its weight
// loads without L2 promotion (the main kernel's promote 256 bytes; none
// streamed the weights 1-2% faster at T <= 64, v37); the host launches it
// instead when the rows average at most 8 per expert (v27).
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

/// Shared memory a block may use on sm_90 (227 KiB).
constexpr int64_t kMaxSharedBytes = 227 * 1024;
/// The header before the stages (1024 bytes: barriers, the item handoff's
/// record and row targets), in the main kernel the routing weights of its
/// row table (512 bytes), and the 1024 bytes of slack that align the tiles
/// to 1024, and 128 bytes for the kernel's static shared memory (ptxas
/// reports one byte, and a launch whose static and dynamic bytes exceed
/// the 227 KiB fails); the epilogue staging (64 rows x 256 bytes per
/// consumer warpgroup) comes on top (see WgmmaEngine.cpp).
constexpr int64_t kSharedOverheadBytes = 2688;
constexpr int64_t kSwapSharedOverheadBytes = 2048;
static int64_t wgmmaEpilogueBytes(int64_t tileM) {
  return tileM / 64 * kWgmmaStagingBytes;
}

/// One pipeline stage: every row holds stageK 16-bit elements of K.
static int64_t wgmmaStageBytes(int64_t tileM, int64_t tileN,
                               int64_t stageK = 64) {
  return (tileM + tileN) * stageK * 2;
}

std::optional<std::string>
mlir::moe::validateGemmOptions(const ConvertMoeToGPUPassOptions &options) {
  if (auto error = validateGemmTiles(
          MoeGemmTiles{options.tileM, options.tileN, options.tileK}))
    return error;
  StringRef engine = options.gemm;
  if (engine != "auto" && engine != "simt" && engine != "wgmma")
    return "gemm must be one of auto, simt, wgmma (got '" + options.gemm + "')";
  if (options.wgmmaTileM != 0 && options.wgmmaTileM != 64 &&
      options.wgmmaTileM != 128)
    return "wgmma-tile-m must be 64 or 128 (got " +
           std::to_string(options.wgmmaTileM) + ")";
  if (options.wgmmaTileN != 0 &&
      (options.wgmmaTileN < 64 || options.wgmmaTileN > 256 ||
       options.wgmmaTileN % 16 != 0))
    return "wgmma-tile-n must be a multiple of 16 in [64, 256] (got " +
           std::to_string(options.wgmmaTileN) + ")";
  if (options.wgmmaCluster < 0 || options.wgmmaCluster > 2)
    return "wgmma-cluster must be 0 (cost model), 1 or 2 (got " +
           std::to_string(options.wgmmaCluster) + ")";
  if (options.wgmmaSwapRows < -1)
    return "wgmma-swap-rows must be -1 (cost model), 0 (never) or positive "
           "(got " +
           std::to_string(options.wgmmaSwapRows) + ")";
  if (options.wgmmaSwapTileM != 0 && options.wgmmaSwapTileM != 16 &&
      options.wgmmaSwapTileM != 32 && options.wgmmaSwapTileM != 64)
    return "wgmma-swap-tile-m must be 16, 32 or 64 (got " +
           std::to_string(options.wgmmaSwapTileM) + ")";
  if (options.wgmmaWideSwapRows < -1)
    return "wgmma-wide-swap-rows must be -1 (cost model), 0 (none) or "
           "positive (got " +
           std::to_string(options.wgmmaWideSwapRows) + ")";
  if (options.wgmmaWideSwapTileM != 32 && options.wgmmaWideSwapTileM != 64)
    return "wgmma-wide-swap-tile-m must be 32 or 64 (got " +
           std::to_string(options.wgmmaWideSwapTileM) + ")";
  if (options.wgmmaProducerRegisters != 0 &&
      (options.wgmmaProducerRegisters < 24 ||
       options.wgmmaProducerRegisters > 160 ||
       options.wgmmaProducerRegisters % 8 != 0))
    return "wgmma-producer-registers must be 0 (cost model) or a multiple "
           "of 8 in [24, 160] (got " +
           std::to_string(options.wgmmaProducerRegisters) + ")";
  if (options.wgmmaSwapTileN != 0 && options.wgmmaSwapTileN != 64 &&
      options.wgmmaSwapTileN != 128)
    return "wgmma-swap-tile-n must be 64 or 128 (got " +
           std::to_string(options.wgmmaSwapTileN) + ")";
  if (options.wgmmaStages != 0 &&
      (options.wgmmaStages < 2 || options.wgmmaStages > 8))
    return "wgmma-stages must be in [2, 8] (got " +
           std::to_string(options.wgmmaStages) + ")";
  // Checked against the narrowest default tile, without the epilogue
  // staging, here; chooseGemmConfig reports (on the op) stages that do not
  // fit the tile it picks with its staging.
  int64_t tm = options.wgmmaTileM ? options.wgmmaTileM : 128;
  int64_t tn = options.wgmmaTileN ? options.wgmmaTileN : 128;
  if (options.wgmmaStages &&
      kSharedOverheadBytes + options.wgmmaStages * wgmmaStageBytes(tm, tn) >
          kMaxSharedBytes)
    return "wgmma-stages " + std::to_string(options.wgmmaStages) + " with a " +
           std::to_string(tm) + " x " + std::to_string(tn) +
           " tile needs more than 227 KiB of shared memory";
  return std::nullopt;
}

std::optional<std::string>
gpu_lowering::wgmmaUnsupportedReason(ExpertGemmOp op, StringRef chip) {
  if (chip != "sm_90a")
    return "the wgmma engine needs chip sm_90a (got '" + chip.str() + "')";
  Type lhs = op.getLhs().getType().getElementType();
  Type rhs = op.getRhs().getType().getElementType();
  if (isMxfp4(op.getFormat())) {
    // The weights are dequantized into bf16 register fragments (e2m1 x
    // 2^k is exact in bf16, not in f16), multiplied with the activations'
    // bf16 tiles. (Transposed and K % 32 == 0: the verifier's rules.)
    if (!lhs.isBF16()) {
      std::string got;
      llvm::raw_string_ostream(got) << lhs;
      return "the wgmma engine needs bf16 activations with mxfp4 weights "
             "(got " +
             got + ")";
    }
    return std::nullopt;
  }
  if (op.getFormat() == WeightFormat::fp8_block) {
    // The activations are quantized to e4m3 codes first (1-byte rows).
    int64_t k = op.getLhs().getType().getDimSize(1);
    if (ShapedType::isDynamic(k) || k == 0 || k % 16 != 0)
      return std::string("the wgmma engine needs K a positive multiple of "
                         "16 for fp8_block weights (16-byte rows of e4m3)");
    // A concat tile's up half must lie in one 128-column scale block.
    if (op.hasGluEpilogue() && gluParamsOf(op).layout == GluLayout::concat &&
        op.getResult().getType().getDimSize(1) % 64 != 0)
      return std::string("the wgmma engine needs the output columns a "
                         "multiple of 64 for fp8_block weights with a "
                         "concat GLU");
    return std::nullopt;
  }
  if (lhs != rhs || !(lhs.isBF16() || lhs.isF16()))
    return std::string(
        "the wgmma engine needs bf16 or f16 lhs and rhs of one type");
  int64_t k = op.getLhs().getType().getDimSize(1);
  if (ShapedType::isDynamic(k) || k == 0 || k % 8 != 0)
    return std::string("the wgmma engine needs K a positive multiple of 8 "
                       "(16-byte rows)");
  if (!op.getTransposeRhs()) {
    // [E, K, N] rhs is copied in 16-byte chunks along N.
    int64_t outN = op.getResult().getType().getDimSize(1);
    if (outN % 8 != 0)
      return std::string("the wgmma engine needs the output columns a "
                         "multiple of 8 when transpose_rhs = false");
  }
  return std::nullopt;
}

static GemmKernelConfig swapConfig(const ConvertMoeToGPUPassOptions &options,
                                   const GemmKernelConfig &main, int64_t rows,
                                   int64_t tileM,
                                   int64_t mxfp4StageK = kMxfp4StageK);

/// mxfp4 K per stage for `tileM`-token tiles: mxfp4_hopper from 32 tokens
/// (the main and 32-token kernels) 128, four stages instead of two (T =
/// 512 9%, T = 4096 / 16384 10-14% faster, bench/NOTES.md v75); the
/// 16-token tiles' stages are mostly weights and already four deep (at 128
/// K and four blocks per SM they were 5-7% slower), and mxfp4's decode
/// reads 128-byte rows: 256.
static int64_t mxfp4StageK(ExpertGemmOp op, int64_t tileM) {
  return op.getFormat() == WeightFormat::mxfp4_hopper && tileM >= 32
             ? 128
             : kMxfp4StageK;
}

/// mxfp4 weights: every tier is the small-M form (the weights are wgmma's
/// A operand, dequantized in registers: only A may come from registers).
/// The main kernel: 128 tokens (m64n128k16, each weight tile decoded once
/// per 128 tokens) x 192 weight rows for mxfp4_hopper (three consumer
/// warpgroups, one block per SM; 8-10% faster than 128 rows at T = 4096 /
/// 16384 on an H100, bench/NOTES.md v74: fewer token bytes per MMA), in
/// four 128-K stages (two 256-K stages starved the consumers: 10-14%
/// faster, v75), or 128 rows and two 256-K stages for mxfp4 (two
/// consumers: at 192 its decode spills);
/// the 16- and 32-token tiers of chooseSwapConfigs below it, at 64 weight
/// rows. The weight tiles come by TMA (with wgmma-tma=false the SIMT kernel
/// runs); the main kernel's tile options (wgmma-tile-m / -n, wgmma-cluster)
/// do not apply.
static FailureOr<GemmKernelConfig>
chooseMxfp4Config(ExpertGemmOp op, const ConvertMoeToGPUPassOptions &options,
                  GemmKernelConfig config) {
  if (!options.wgmmaTma) {
    if (options.gemm == "wgmma")
      return op.emitOpError("cannot use gemm=wgmma with wgmma-tma=false: "
                            "the mxfp4 kernels load the weights by TMA");
    config.engine = GemmEngine::Simt;
    return config;
  }
  config.mxfp4 = true;
  config.rhsTma = true;
  config.programmatic = options.programmaticLaunch;
  ConvertMoeToGPUPassOptions mainOptions = options;
  bool hopper = op.getFormat() == WeightFormat::mxfp4_hopper;
  mainOptions.wgmmaSwapTileN = hopper ? 192 : 128;
  config = swapConfig(mainOptions, config, /*rows=*/0, /*tileM=*/128,
                      mxfp4StageK(op, 128));
  if (options.wgmmaStages > config.stages)
    return op.emitOpError("wgmma-stages ")
           << options.wgmmaStages << " does not fit the mxfp4 kernel's "
           << config.tileM << " x " << config.tileN
           << " tile in shared memory (at most " << config.stages << " stages)";
  return config;
}

FailureOr<GemmKernelConfig>
gpu_lowering::chooseGemmConfig(ExpertGemmOp op,
                               const ConvertMoeToGPUPassOptions &options) {
  GemmKernelConfig config;
  config.simt = MoeGemmTiles{options.tileM, options.tileN, options.tileK};
  // GEMMs a few columns wide (the backward's <dO, b_down> per row, N = 1):
  // a 32-column SIMT tile. (At 64, f32 operands, N = 1: ptxas spilled 236
  // bytes at 255 registers; at 32, 72 registers.)
  int64_t gemmColumns =
      op.getRhs().getType().getDimSize(op.getTransposeRhs() ? 1 : 2);
  if (gemmColumns <= 4 && options.tileN > 32)
    config.simt.tileN = 32;
  std::optional<std::string> reason = wgmmaUnsupportedReason(op, options.chip);
  if (options.gemm == "simt" || (options.gemm == "auto" && reason)) {
    config.engine = GemmEngine::Simt;
    return config;
  }
  if (reason)
    return op.emitOpError("cannot use gemm=wgmma: ") << *reason;
  config.engine = GemmEngine::Wgmma;
  if (isMxfp4(op.getFormat()))
    return chooseMxfp4Config(op, options, config);
  config.tileM = options.wgmmaTileM ? options.wgmmaTileM : 128;
  // 128 x 256 tiles halve the L2 traffic per FLOP of 128 x 128 (measured
  // on the H200: Mixtral-8x7B T=4096 6.17 -> 5.30 ms, DeepSeek-V3 11.8 ->
  // 9.9 ms, small T unchanged); narrow GEMMs keep 128.
  int64_t gemmN =
      op.getRhs().getType().getDimSize(op.getTransposeRhs() ? 1 : 2);
  bool concat =
      op.hasGluEpilogue() && gluParamsOf(op).layout == GluLayout::concat;
  // Tile widths the operand loaders can fill: MN-major weights come as
  // boxes (or cp.async rows) of 64 columns, a concat tile's halves as
  // 16-row groups of the cp.async loader.
  auto tileNOk = [&](int64_t n) {
    if (!op.getTransposeRhs())
      return n == 64 || n == 128 || n == 256;
    return n % (concat ? 32 : 16) == 0;
  };
  // fp8_block: the promotion keeps a block accumulator beside the tile's;
  // its K step is one 128-K scale block (a 128-byte row of e4m3). A tile
  // is 128 columns (one scale block: m64n128 MMAs into the block
  // accumulator) or 256 (two scale blocks, whose MMAs and promotions run
  // one after the other into the one m64n128 block accumulator; the tile's
  // accumulator is m64n256). 256 halves the activation rows each weight
  // tile's MMAs read (L2 bytes per MMA: bench/NOTES.md v81); it needs each
  // half in one scale block: the columns a multiple of 256 (of 128 output
  // columns with a concat GLU, whose halves are the gate and the up half),
  // and the weights by TMA (a producer that also copies the weight rows
  // needs the registers the second accumulator takes).
  bool fp8 = op.getFormat() == WeightFormat::fp8_block;
  int64_t outN = op.getResult().getType().getDimSize(1);
  bool fp8Wide = fp8 && options.wgmmaTma && gemmN >= 512 &&
                 (concat ? outN % 128 == 0 : gemmN % 256 == 0);
  if (fp8 && options.wgmmaTileN && options.wgmmaTileN != 128 &&
      options.wgmmaTileN != 256)
    return op.emitOpError("wgmma-tile-n ")
           << options.wgmmaTileN
           << " does not tile fp8_block weights (128 or 256: whole scale "
              "blocks)";
  if (fp8 && options.wgmmaTileN == 256 && !fp8Wide)
    return op.emitOpError("wgmma-tile-n 256 does not tile these fp8_block "
                          "weights (")
           << (!options.wgmmaTma ? "it needs the weights by TMA, wgmma-tma"
               : concat ? "a concat GLU's output columns must be a multiple "
                          "of 128, at least 256: each half of a tile is one "
                          "scale block"
                        : "the columns must be a multiple of 256, at least "
                          "512: each half of a tile is one scale block")
           << ")";
  if (options.wgmmaTileN && !tileNOk(options.wgmmaTileN))
    return op.emitOpError("wgmma-tile-n ")
           << options.wgmmaTileN << " cannot tile this op's weights ("
           << (op.getTransposeRhs() ? "a concat GLU needs a multiple of 32"
                                    : "transpose_rhs = false needs 64, 128 "
                                      "or 256")
           << ")";
  config.tileN =
      options.wgmmaTileN ? options.wgmmaTileN : (gemmN >= 512 ? 256 : 128);
  // Wide GEMMs whose columns are not a multiple of 256 (gpt-oss-120b:
  // 2880 and 5760): the width in [192, 256] with the fewest wasted MMA
  // columns in the last column tile, each tile priced 16 columns more for
  // its fixed costs (the lhs rows every tile loads, the epilogue's start).
  // 2880 = 12 x 240 instead of 11.25 x 256.
  if (fp8) {
    config.fp8 = true;
    config.tileN = options.wgmmaTileN ? options.wgmmaTileN
                   : fp8Wide          ? 256
                                      : 128;
    config.stageK = 128;
  }
  if (!fp8 && !options.wgmmaTileN && gemmN >= 512 && op.getTransposeRhs()) {
    auto cost = [&](int64_t n) {
      return llvm::divideCeil(gemmN, n) * (n + 16);
    };
    for (int64_t n = 256; n >= 192; n -= 16)
      if (tileNOk(n) && cost(n) < cost(config.tileN))
        config.tileN = n;
  }
  // The output path is staged through shared memory (whole rows by
  // 16-byte stores; measured on the H200: the down GEMMs 10-37% faster
  // than element stores from the fragments, e.g. Qwen3-30B-A3B T=4096 419
  // -> 264 us; the GLU GEMMs too since the approximate silu, bench/
  // NOTES.md v15: Qwen3 T=4096 445 -> 399 us, gpt-oss-120b T=16384 4210 ->
  // 3757).
  int64_t staging = wgmmaEpilogueBytes(config.tileM);
  // (A stage's rows are 128 bytes of K either way; fp8_block stages also
  // hold their scales: WgmmaKernel::scaleBytes.)
  int64_t fit = (kMaxSharedBytes - kSharedOverheadBytes - staging) /
                (wgmmaStageBytes(config.tileM, config.tileN) +
                 (fp8 ? wgmmaFp8ScaleBytes(config.tileM) : 0));
  // TMA boxes of 64 columns cannot hold half a concat tile below 128.
  config.rhsTma = options.wgmmaTma &&
                  (op.getTransposeRhs() || !concat || config.tileN >= 128);
  if (options.wgmmaStages > fit)
    return op.emitOpError("wgmma-stages ")
           << options.wgmmaStages << " does not fit the " << config.tileM
           << " x " << config.tileN << " tile in shared memory (at most " << fit
           << " stages)";
  config.stages =
      options.wgmmaStages ? options.wgmmaStages : std::min<int64_t>(fit, 8);
  // 2-CTA clusters (row-tile pairs sharing each weight tile; the kernel
  // without clusters below one row tile per expert, chosen at run time):
  // each CTA multicasts half of the weight tile into both (TMA), so both
  // halves must be whole boxes. Measured on the H200 (bench/results
  // c4666f5 against 2a60201): DeepSeek-V3 T=4096 9290 -> 7699 us,
  // gpt-oss-120b T=4096 2449 -> 2125, Mixtral-8x7B T=4096 4935 -> 4774, no
  // cell slower beyond run-to-run noise.
  bool clusterable = config.rhsTma && config.tileN >= 128;
  if (options.wgmmaCluster == 2 && !clusterable)
    return op.emitOpError("wgmma-cluster=2 needs the weight tiles by TMA "
                          "(wgmma-tma) and tile-n >= 128");
  // fp8_block: no clusters by default (H100, bench/NOTES.md v76, two
  // rounds: Qwen3-30B-A3B T = 4096 629 - 634 -> 594 us, T = 16384 2043 -
  // 2070 -> 1925 - 2003; DeepSeek-V3 within +-1%; small T unchanged: the
  // 128 x 128 FP8 tile's stage is consumed twice as fast as bf16's, and
  // the pair's coupled stage releases cost more than the halved weight
  // reads save).
  config.cluster = options.wgmmaCluster    ? options.wgmmaCluster
                   : (clusterable && !fp8) ? 2
                                           : 1;
  config.programmatic = options.programmaticLaunch;
  config.producerRegisters = options.wgmmaProducerRegisters;
  return config;
}

/// The small-M kernel's epilogue staging: up to swapStagingTokens(tileN)
/// token rows (wider tiles store in passes of that many) of tileN + 4 f32
/// (WgmmaEpilogue.cpp, the padding keeps the fragment stores conflict-free).
int64_t gpu_lowering::wgmmaSwapStagingBytes(int64_t tileM, int64_t tileN) {
  return std::min<int64_t>(tileM, swapStagingTokens(tileN)) * (tileN + 4) * 4;
}

/// Average rows per expert up to which the host picks the small-M kernel
/// (bench/NOTES.md v27: at 16 per expert, gpt-oss-120b T=512 and
/// Mixtral-8x7B T=64, it was 1-2% slower than the main kernel; at 2-4,
/// T = 8 and 64, 2-11% faster).
constexpr int64_t kSwapRowsDefault = 8;
/// The same for MN-major weights (bench/NOTES.md v36, .nt layers: at up to
/// 0.5 rows per expert, T = 1 and 8, 9-29% faster than the main kernel,
/// e.g. Mixtral-8x7B T=1 276 -> 195 us; at 2 per expert, DeepSeek-V3 T=64,
/// 6% slower, its down GEMM's MN-major small-M kernel the cause).
constexpr int64_t kSwapRowsMnMajorDefault = 1;

/// Rows per expert up to which the wide small-M kernel (32-token tiles) is
/// launched above the 16-token one (bench/NOTES.md v40: K-major weights,
/// at 16-32 rows per expert, Qwen3-30B-A3B / gpt-oss-120b / DeepSeek-V3
/// T=512 and Mixtral-8x7B T=64, 1.6-4.4% faster than the main kernel; the
/// 16-token kernel stays below, where the 32-token one was up to 2%
/// slower). MN-major weights the same, above their 16-token kernel's 1 row
/// (v47: Qwen3-30B-A3B.nt T=64 339 -> 303 us, T=512 355 -> 336; 64-token
/// tiles were slower than the main kernel, 364 / 399).
constexpr int64_t kWideSwapRowsDefault = 32;

/// One small-M configuration beside `main`: `tileM` tokens per tile, up to
/// `rows` rows per expert (mxfp4: `mxfp4StageK` K a stage).
static GemmKernelConfig swapConfig(const ConvertMoeToGPUPassOptions &options,
                                   const GemmKernelConfig &main, int64_t rows,
                                   int64_t tileM, int64_t mxfp4StageK) {
  GemmKernelConfig config = main;
  config.swapAB = true;
  config.swapRows = rows;
  config.cluster = 1;
  config.tileM = tileM;
  config.tileN = options.wgmmaSwapTileN ? options.wgmmaSwapTileN : 64;
  // 64 weight rows: one consumer warpgroup, 256 threads, two blocks per
  // SM (more loads in flight per SM); 128: two consumers, one block per SM
  // (their token-tile accumulators need no setmaxnreg).
  config.ctasPerSM = config.tileN == 64 ? 2 : 1;
  // mxfp4 at 64 weight rows, 16 or 32 tokens: three blocks per SM (more
  // warps to hide the decode's latency; bench/NOTES.md v72, v74: four
  // blocks of 16 tokens at 48 / 80 registers lost 5-15%), the producer
  // giving registers to the consumer (setmaxnreg, WgmmaKernel.h: 80 a
  // thread at entry, 48 / 112).
  if (config.mxfp4 && config.tileN == 64 && (tileM == 16 || tileM == 32))
    config.ctasPerSM = 3;
  config.l2PromotionBytes = 0;
  config.stageK = config.mxfp4 ? mxfp4StageK : 128;
  // Per block: the SM's shared memory over its blocks, less the 1 KiB the
  // hardware reserves per block. (fp8_block: 128 K is one 128-byte row of
  // e4m3 per operand row, plus the stage's scales; mxfp4: stageK / 2
  // bytes of e2m1 pairs per weight row.)
  int64_t stageBytes =
      config.fp8 ? wgmmaStageBytes(config.tileM, config.tileN) +
                       wgmmaFp8ScaleBytes(config.tileM)
      : config.mxfp4
          ? wgmmaMxfp4StageBytes(config.tileM, config.tileN, config.stageK)
          : wgmmaStageBytes(config.tileM, config.tileN, config.stageK);
  int64_t budget = kMaxSharedBytes / config.ctasPerSM - 1024;
  int64_t fit = (budget - kSwapSharedOverheadBytes -
                 wgmmaSwapStagingBytes(config.tileM, config.tileN)) /
                stageBytes;
  // An explicit wgmma-stages (checked against the main kernel's tile) is
  // capped at what fits.
  config.stages =
      std::min<int64_t>(fit, options.wgmmaStages ? options.wgmmaStages : 8);
  assert(config.stages >= 2 && "small-M tiles leave room for two stages");
  return config;
}

SmallVector<GemmKernelConfig>
gpu_lowering::chooseSwapConfigs(ExpertGemmOp op,
                                const ConvertMoeToGPUPassOptions &options,
                                const GemmKernelConfig &main) {
  bool kMajor = op.getTransposeRhs();
  int64_t rows = options.wgmmaSwapRows >= 0 ? options.wgmmaSwapRows
                 : kMajor                   ? kSwapRowsDefault
                                            : kSwapRowsMnMajorDefault;
  int64_t wideRows = options.wgmmaWideSwapRows >= 0 ? options.wgmmaWideSwapRows
                                                    : kWideSwapRowsDefault;
  // Weights by TMA only. K-major ([E, N, K]) always; MN-major ([E, K, N]:
  // the transposed A of wgmma, boxes of 64 weight columns) with
  // wgmma-swap-mn-major and without a concat GLU (its gate and up halves of
  // a 64-row tile would be 32-column boxes, narrower than the 128-byte
  // swizzle atom).
  bool concat =
      op.hasGluEpilogue() && gluParamsOf(op).layout == GluLayout::concat;
  bool mnMajorOk = options.wgmmaSwapMnMajor && !concat;
  SmallVector<GemmKernelConfig> configs;
  // wgmma-swap-rows=0: no small-M kernel at all.
  if (main.engine != GemmEngine::Wgmma || rows == 0 || !main.rhsTma ||
      (!kMajor && !mnMajorOk))
    return configs;
  int64_t tileM = options.wgmmaSwapTileM ? options.wgmmaSwapTileM : 16;
  configs.push_back(
      swapConfig(options, main, rows, tileM, mxfp4StageK(op, tileM)));
  // The wide kernel only above the first one's rows and with wider tiles.
  if (wideRows > rows && options.wgmmaWideSwapTileM > tileM)
    configs.push_back(swapConfig(options, main, wideRows,
                                 options.wgmmaWideSwapTileM,
                                 mxfp4StageK(op, options.wgmmaWideSwapTileM)));
  return configs;
}
