//===- GemmKernel.h - the expert GEMM emitter's parts ------------*- C++
//-*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// moe.expert_gemm becomes one kernel built from swappable parts:
//
//   GemmConfig.cpp    kernel configuration: engine + tiles, chosen by a cost
//                     model from the op's shapes and types, overridable by
//                     pass options (`gemm=simt|wgmma`, `wgmma-tile-m`, ...)
//   RaggedTiles.cpp   tile scheduler: the row tiles of the ragged expert
//                     groups, found on the device from the offsets
//   Epilogue.cpp      bias, GLU, routing-weight scale and scatter store of
//                     one output element (both engines)
//   SimtEngine.cpp    portable engine: shared-memory tiled f32 FMA
//   WgmmaEngine.cpp   Hopper engine (sm_90a): warp-specialised producer /
//                     consumer warpgroups, cp.async operand loaders with the
//                     128-byte swizzle, TMA weights (multicast in 2-CTA
//                     clusters), mbarrier pipeline, wgmma
//   WgmmaWgrad.cpp    Hopper kernel of moe.grouped_matmul_wgrad (the
//                     ragged-K weight gradients; not an expert_gemm)
//   NVVMBuilder.h     the thin layer over the NVVM / LLVM ops the Hopper
//                     engine uses (pointers, mbarriers, cp.async, wgmma)
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_LIB_CONVERSION_MOETOGPU_GEMM_GEMMKERNEL_H
#define MOE_MLIR_LIB_CONVERSION_MOETOGPU_GEMM_GEMMKERNEL_H

#include "MoeToGPU/KernelBuilder.h"

#include "Utils/Glu.h"
#include "moe-mlir/Conversion/MoeToGPU/MoeToGPU.h"
#include "moe-mlir/Conversion/Passes.h"
#include "moe-mlir/Dialect/Moe/IR/MoeOps.h"

namespace mlir {
namespace moe {
namespace gpu_lowering {

/// fp8_block activations quantized per row and 128 columns: e4m3 codes
/// (i8, [rows, K]) and f32 scales ([rows, ceil(K / 128)]), with the scale
/// rule of the GEMM that reads them (ue8m0: powers of two).
struct QuantizedRows {
  Value codes, scales;
  bool ue8m0 = false;
};

/// The buffers and static facts of one moe.expert_gemm.
struct GemmOperands {
  Value lhs, rhs, offsets;            // always present
  Value gather, bias, scatter, scale; // optional (null when absent)
  Value out;                          // result buffer, zero-filled
  Value m, lhsRows;                   // rows of the GEMM / of lhs (index)
  int64_t numExperts = 0, kDim = 0;
  int64_t outN = 0;        // output columns
  int64_t gemmN = 0;       // rhs columns (2 * outN with GLU)
  bool transposed = false; // rhs is [E, N, K]
  std::optional<GluParams> glu;
  Type inElem, outElem;
  /// Low-precision weights (moe.grouped_matmul's weight_format): the rhs
  /// holds e4m3 codes (fp8_block) or packed e2m1 pairs (mxfp4, [E, N,
  /// K/2] bytes), `rhsScale` their block scales.
  WeightFormat format = WeightFormat::plain;
  bool ue8m0 = false;
  Value rhsScale;
  /// fp8_block, after quantizeActivations: `lhs` holds the activations'
  /// e4m3 codes (i8, [rows, K]) and `lhsScale` their scales (f32, [rows,
  /// ceil(K / 128)]).
  Value lhsScale;
  /// fp8_block activations of the next GEMM, quantized by this one
  /// (ExpertComputeToGPU.cpp's handoff): when set, the kernels write e4m3
  /// codes and scales of the output rows (QuantizedRows) as
  /// quantizeActivations would from `out`: the Hopper main kernel in its
  /// epilogue, the other paths by quantizeRows on `out` after them.
  std::optional<QuantizedRows> quantizedOut;

  bool fp8() const { return format == WeightFormat::fp8_block; }
  bool mxfp4() const { return isMxfp4(format); }
  /// The f32 value of lhs element (row, k) as the GEMM multiplies it (an
  /// fp8_block activation dequantized: code x its group's scale).
  Value lhsValue(LoweringBuilder &b, Value row, Value k) const;
  /// The f32 value of weight (expert, GEMM column col, k), dequantized.
  Value rhsValue(LoweringBuilder &b, Value expert, Value col, Value k) const;

  /// GEMM (rhs) column of accumulator `a` (0 gate/plain, 1 up) of output
  /// column `c`.
  Value gemmColumn(LoweringBuilder &b, int64_t a, Value c) const;
};

GemmOperands gemmOperandsOf(LoweringBuilder &b, ExpertGemmOp op);

/// fp8_block: one kernel quantizes the lhs rows (before any gather: each
/// row once) per 128 columns to e4m3 codes and f32 scales, exactly as
/// --moe-lower-to-cpu does (LowPrecision.h), and points `g.lhs` /
/// `g.lhsScale` at them.
void quantizeActivations(LoweringBuilder &b, GemmOperands &g);
/// Scratch buffers for `rows` x `k` quantized activations.
QuantizedRows allocQuantizedRows(LoweringBuilder &b, Value rows, int64_t k,
                                 bool ue8m0);
/// One kernel quantizes rows [0, rows) of `src` ([rows, k], 16-bit or
/// f32) into `q`, as quantizeActivations does.
void quantizeRows(LoweringBuilder &b, Value src, Value rows, int64_t k,
                  const QuantizedRows &q);

/// Shared memory of the Hopper engine's epilogue staging per consumer
/// warpgroup (64 rows x 256 bytes; see WgmmaEngine.cpp).
constexpr int64_t kWgmmaStagingBytes = 64 * 256;

/// Tokens per pass of the small-M kernel's epilogue staging
/// (WgmmaEpilogue.cpp): wider token tiles are staged and stored in passes;
/// 32 for the 192-row MXFP4 main kernel (its 64-token staging would leave
/// shared memory for one stage only), else 64.
constexpr int64_t swapStagingTokens(int64_t tileN) {
  return tileN > 128 ? 32 : 64;
}
int64_t wgmmaSwapStagingBytes(int64_t tileM, int64_t tileN);

/// Shared memory of one fp8_block stage's scales: the tileM lhs rows'
/// activation scales (f32) and up to two weight scales, padded to 16 bytes
/// (WgmmaKernel::scaleArea).
constexpr int64_t wgmmaFp8ScaleBytes(int64_t tileM) { return tileM * 4 + 16; }

/// mxfp4: K elements per stage, 256 (one 128-byte row of packed e2m1
/// pairs per weight row, 128-byte swizzled) or 128 (64-byte rows, 64-byte
/// swizzle: the mxfp4_hopper main kernel, four stages instead of two), and
/// the shared memory of one stage: the tileM token rows (bf16, stageK / 64
/// 128-byte swizzled slices of 64 K), the tileN weight rows (stageK / 2
/// bytes each) and their E8M0 scales (16 bytes per row: the aligned 4-byte
/// words that hold the stage's stageK / 32 scale bytes).
constexpr int64_t kMxfp4StageK = 256;
constexpr int64_t wgmmaMxfp4StageBytes(int64_t tileM, int64_t tileN,
                                       int64_t stageK) {
  return tileM * stageK * 2 + tileN * (stageK / 2) + tileN * 16;
}

/// Kernel engines.
enum class GemmEngine { Simt, Wgmma };

/// One kernel configuration.
struct GemmKernelConfig {
  GemmEngine engine = GemmEngine::Simt;
  MoeGemmTiles simt; // SIMT engine tiles
  /// wgmma: fp8_block operands (e4m3 tiles, one 128-K scale block per
  /// stage, stageK = 128, tileN <= 128).
  bool fp8 = false;
  /// wgmma: mxfp4 weights (the small-M form only, every tier: the packed
  /// e2m1 pairs by TMA, dequantized in registers into wgmma's register A
  /// operand; stageK = kMxfp4StageK, or 128 for the mxfp4_hopper main
  /// kernel).
  bool mxfp4 = false;
  int64_t tileM = 128;  // wgmma: rows per block (64 per consumer warpgroup)
  int64_t tileN = 128;  // wgmma: rhs columns per block (the wgmma N)
  int64_t stages = 4;   // wgmma: pipeline depth
  int64_t stageK = 64;  // wgmma: K elements per stage (64 or 128: one
                        // or two 128-byte swizzled K slices; the small-M
                        // kernel's 128 streamed the weights 0.2-2.5%
                        // faster at T <= 64, bench/NOTES.md v38)
  int64_t numSMs = 132; // persistent grid size
  bool rhsTma = true;   // wgmma: rhs tiles by TMA (else cp.async)
  int64_t cluster = 1;  // wgmma: CTAs per cluster (2: weight multicast
                        // when the host launches it in clusters)
  /// wgmma main kernel: registers per thread the producer keeps after
  /// setmaxnreg (0: the engine's defaults, WgmmaKernel::registerBudget).
  int64_t producerRegisters = 0;
  /// wgmma small-M form ("swap AB"): the rhs (weight) tile is the wgmma A
  /// operand, 64 weight rows per consumer warpgroup, the tileM lhs rows
  /// (tokens) the B operand (m64n<tileM>k16; tileM 16, 32 or 64); the
  /// epilogue goes through shared memory. K-major rhs by TMA only.
  bool swapAB = false;
  int64_t ctasPerSM = 1; // blocks per SM the persistent grid counts on
  /// L2 promotion of the rhs TMA loads in bytes (0: none, 64, 128, 256).
  /// The main kernel's 256: its weight tiles are read again from L2 by the
  /// expert's other row tiles (none made T = 512 3-4% slower); the small-M
  /// kernel's none: its weights are read once, and without the promotion
  /// they streamed 1-2% faster (bench/NOTES.md v37).
  int64_t l2PromotionBytes = 256;
  /// swapAB: the host launches this kernel instead of the other one when
  /// the GEMM's rows are at most swapRows x experts.
  int64_t swapRows = 0;
  /// Launched programmatically (moe-gpu-programmatic-launch): waits for
  /// the previous kernel on the device before any global access, then
  /// lets the next one start.
  bool programmatic = false;
};

/// Why the Hopper engine cannot run `op` (nullopt when it can).
std::optional<std::string> wgmmaUnsupportedReason(ExpertGemmOp op,
                                                  StringRef chip);
/// The configuration for `op` under `options`: the cost model's choice,
/// with the options' overrides. Fails (diagnostic on `op`) when an
/// explicitly requested engine cannot run the op.
FailureOr<GemmKernelConfig>
chooseGemmConfig(ExpertGemmOp op, const ConvertMoeToGPUPassOptions &options);
/// The small-M (swap-AB) kernel configurations to launch beside `main` (a
/// wgmma configuration) at few rows per expert, by ascending swapRows (the
/// host takes the first whose swapRows x experts bounds the rows): none
/// when the cost model or the options leave them out or the op's weights
/// are not tiles by TMA; else the 16-token kernel and, above its rows, the
/// wide one (wgmma-wide-swap-rows). An explicit wgmma-stages is capped at
/// what fits.
SmallVector<GemmKernelConfig>
chooseSwapConfigs(ExpertGemmOp op, const ConvertMoeToGPUPassOptions &options,
                  const GemmKernelConfig &main);

//===----------------------------------------------------------------------===//
// Tile scheduler
//===----------------------------------------------------------------------===//

/// Experts examined per round of RaggedTiles::advance by default.
constexpr int64_t kAdvanceUnroll = 8;

/// Row tiles of `tileM` rows over the ragged expert groups
/// [offsets[e], offsets[e+1]) (clamped into [0, m]).
struct RaggedTiles {
  Value offsets, m;
  int64_t numExperts, tileM;

  Value offsetAt(LoweringBuilder &b, Value expert) const;
  /// Rows of the group [lo, hi) (none when hi < lo).
  Value rowsIn(LoweringBuilder &b, Value lo, Value hi) const;
  /// Row tiles of `rows` rows.
  Value tilesOfRows(LoweringBuilder &b, Value rows) const;
  /// Row tiles of the group [lo, hi) (none when hi < lo).
  Value tilesIn(LoweringBuilder &b, Value lo, Value hi) const;
  Value tilesOf(LoweringBuilder &b, Value expert) const;
  /// Sum of tilesOf over all experts.
  Value total(LoweringBuilder &b) const;
  /// Advances (expert, tilesBefore) so that `unit` lies in `expert`'s range
  /// [tilesBefore * scale, (tilesBefore + tilesOf(expert)) * scale) (units
  /// must be visited in increasing order; scale > 1 numbers `scale` work
  /// items per row tile); returns the new pair. The walk examines `unroll`
  /// experts per round (their offsets loaded together).
  std::pair<Value, Value> advance(LoweringBuilder &b, Value unit, Value expert,
                                  Value before, int64_t scale = 1,
                                  int64_t unroll = kAdvanceUnroll) const;
  /// advance for work units counted by `unitsOf(rows)` per expert:
  /// `before` counts the units of the experts before `expert`.
  std::pair<Value, Value>
  advanceUnits(LoweringBuilder &b, Value unit, Value expert, Value before,
               function_ref<Value(LoweringBuilder &, Value)> unitsOf,
               int64_t unroll = kAdvanceUnroll) const;
  /// Upper bound of total() for consistent offsets: ceil(m / tileM) + E.
  Value upperBound(LoweringBuilder &b) const;

  /// Where a walk over work units starts, found by a whole warp at once.
  struct Start {
    /// Units of all experts.
    Value total;
    /// The expert of unit `threshold`'s row tile and the units of the
    /// experts before it (for units past the end: the last expert).
    Value expert, before;
  };
  /// Start for the units counted by `unitsOf(rows)` per expert: the
  /// expert is the number of experts whose units all end at or before
  /// `threshold` (the inclusive unit prefix <= threshold), clamped to E -
  /// 1. Lane `lane` takes experts [lane * c, lane * c + c), c = ceil(E /
  /// 32): their offsets are independent loads, the sums a warp scan and
  /// reduction (every lane of the warp must reach it together). A serial
  /// walk over the experts made every step a dependent L2 load: at T = 1
  /// each block waited tens of us before its first copy (bench/NOTES.md
  /// v28).
  Start locate(LoweringBuilder &b, Value lane, Value threshold,
               function_ref<Value(LoweringBuilder &, Value)> unitsOf) const;

private:
  /// locate with more than a few experts per lane (RaggedTiles.cpp).
  Start locateStreamed(LoweringBuilder &b, Value lane, Value threshold,
                       function_ref<Value(LoweringBuilder &, Value)> unitsOf,
                       int64_t chunk) const;
};

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

/// Where one GEMM row goes: destination row (scatter applied), whether it
/// is in range, and the routing-weight factor (null without scale).
struct RowTarget {
  Value dest, valid, factor;
};
/// Without `withFactor` the factor stays null (no load).
RowTarget rowTarget(LoweringBuilder &b, const GemmOperands &g, Value row,
                    bool withFactor = true);

/// The value stored at output column `c` (in the output element type):
/// `acc` as for storeOutput, `factor` the row's routing weight (or null).
/// The bias is read at column `c`, so c < outN must hold.
Value outputValue(LoweringBuilder &b, const GemmOperands &g, Value factor,
                  Value expert, Value c, ArrayRef<Value> acc);

/// Stores output column `c` of a valid row: `acc` holds the f32
/// accumulators of gemmColumn(0, c) (and gemmColumn(1, c) with GLU); adds
/// the bias, applies the GLU and the factor, converts and stores. The
/// caller guarantees c < outN.
void storeOutput(LoweringBuilder &b, const GemmOperands &g,
                 const RowTarget &target, Value expert, Value c,
                 ArrayRef<Value> acc);

/// How an expert GEMM's output rows that no expert writes get their zeros
/// (ExpertComputeToGPU.cpp, uncoveredFillOf): not at all (nothing reads
/// them), the rows outside [offsets[0], offsets[E]) themselves, their
/// targets through a permutation scatter, or per-row flags.
enum class UncoveredFill { Unread, Rows, PermutedRows, Flags };

/// Inside a kernel: blocks `block` (of `grid`) stride over the uncovered
/// GEMM rows and zero each (Rows) or its scatter target (PermutedRows),
/// threads `thread` (of `threads`) over the columns.
void zeroUncoveredStrided(LoweringBuilder &b, const GemmOperands &g,
                          UncoveredFill fill, Value block, Value grid,
                          Value thread, int64_t threads);

//===----------------------------------------------------------------------===//
// Engines
//===----------------------------------------------------------------------===//

void emitSimtExpertGemm(LoweringBuilder &b, const GemmOperands &g,
                        const MoeGemmTiles &tiles);
/// `rhsMap`: the rhs tensor map (i64 device address, from
/// emitRhsTensorMap) when config.rhsTma, else null.
/// `fill` (Rows or PermutedRows, else Unread = none): the kernel's
/// consumer warpgroups zero the uncovered rows first (elide-fills).
void emitWgmmaExpertGemm(LoweringBuilder &b, const GemmOperands &g,
                         const GemmKernelConfig &config, Value rhsMap,
                         UncoveredFill fill = UncoveredFill::Unread);
/// Host code: the rhs TMA tensor map for `config` (moeRuntimeTensorMap3D,
/// declared in `module` on first use); 0 when TMA cannot describe it.
Value emitRhsTensorMap(LoweringBuilder &b, ModuleOp module,
                       const GemmOperands &g, const GemmKernelConfig &config);
/// Run-time condition (host side) under which the Hopper engine's operand
/// loaders are valid: unit inner strides, 16-byte aligned rows.
Value wgmmaOperandsAligned(LoweringBuilder &b, const GemmOperands &g);

//===----------------------------------------------------------------------===//
// The Hopper weight-gradient kernel (WgmmaWgrad.cpp)
//===----------------------------------------------------------------------===//

/// The buffers and static facts of one moe.grouped_matmul_wgrad.
struct WgradOperands {
  Value lhs, rhs, offsets;    // [M, K], [M, N] (16-bit), [E + 1] i32
  Value lhsGather, rhsGather; // [M] i32 row indices into lhs / rhs, or null
  Value acc;                  // [E, K, N] f32 or null
  Value out;                  // [E, K, N], identity layout
  Value m;                    // contracted rows (index)
  Value lhsRows, rhsRows;     // rows of the lhs / rhs buffers (index)
  int64_t numExperts = 0, kDim = 0, nDim = 0;
  Type inElem, outElem;

  /// The buffer row read as contracted row `r` of `gather`'s operand
  /// (`r` itself without a gather), and whether it is inside the buffer's
  /// `rows` (a gathered index outside reads as zero).
  static std::pair<Value, Value> sourceRow(LoweringBuilder &b, Value gather,
                                           Value rows, Value r);
};
/// Its configuration: output columns per item (the wgmma N) and stages.
struct WgradConfig {
  int64_t tileN = 256, stages = 4, numSMs = 132;
};
/// The Hopper kernel's configuration for `op` (nullopt: the portable
/// kernel runs it: another chip, gemm=simt, f32 operands, an output type
/// other than f32 or the operands', K or N not a multiple of 64).
std::optional<WgradConfig>
chooseWgradConfig(GroupedMatmulWgradOp op,
                  const ConvertMoeToGPUPassOptions &options);
/// Run-time condition (host side) for the kernel's 16-byte row copies.
Value wgradOperandsAligned(LoweringBuilder &b, const WgradOperands &w);
void emitWgmmaWgrad(LoweringBuilder &b, const WgradOperands &w,
                    const WgradConfig &config);

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_LIB_CONVERSION_MOETOGPU_GEMM_GEMMKERNEL_H
