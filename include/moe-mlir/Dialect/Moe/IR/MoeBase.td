//===- MoeBase.td - moe dialect and its enum attributes ----*- tablegen -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The `moe` dialect record, its enum attributes and the type constraints
// shared by the ops. The ops themselves live in MoeOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_DIALECT_MOE_IR_MOEBASE_TD
#define MOE_MLIR_DIALECT_MOE_IR_MOEBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Moe_Dialect : Dialect {
  let name = "moe";
  let cppNamespace = "::mlir::moe";
  let summary = "Mixture-of-Experts layers: routing, dispatch, expert GEMMs, combine";
  let description = [{
    The `moe` dialect models Mixture-of-Experts (MoE) layers at the tensor
    level: routing (top-k, softmax/sigmoid gating, DeepSeek group-limited
    selection), dispatch metadata (cumsum, indices, indptr), gather, grouped
    matmul over ragged expert groups, gated activations, scatter, weighted
    combine, the indices <-> multi-hot converters, and the composite
    `moe.ffn`.

    All ops have value semantics on ranked tensors. `T` (tokens) and `M`
    (dispatched rows) may be dynamic; every other dimension must be static.
    Index tensors are `i32`. Floats are `f32`, `f16` or `bf16`; accumulation
    and routing math happen in `f32`. Values only known at run time (ids out
    of range, NaN logits, empty experts) have defined behaviour, written in
    each op's description.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Moe_ScoringFn : I32EnumAttr<"ScoringFn", "routing score function", [
    I32EnumAttrCase<"softmax", 0>,
    I32EnumAttrCase<"sigmoid", 1>
  ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}
def Moe_ScoringAttr : EnumAttr<Moe_Dialect, Moe_ScoringFn, "scoring"> {
  let assemblyFormat = "`<` $value `>`";
}

def Moe_GroupScore : I32EnumAttr<"GroupScore",
    "how a group of experts is scored in group-limited routing", [
    I32EnumAttrCase<"max", 0>,
    I32EnumAttrCase<"top2_sum", 1>
  ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}
def Moe_GroupScoreAttr : EnumAttr<Moe_Dialect, Moe_GroupScore, "group_score"> {
  let assemblyFormat = "`<` $value `>`";
}

def Moe_Activation : I32EnumAttr<"Activation", "gate activation of a GLU", [
    I32EnumAttrCase<"silu", 0>,
    I32EnumAttrCase<"gelu", 1>,
    I32EnumAttrCase<"gelu_tanh", 2>
  ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}
def Moe_ActivationAttr : EnumAttr<Moe_Dialect, Moe_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}

def Moe_GluLayout : I32EnumAttr<"GluLayout",
    "where the gate and up halves of a GLU input live", [
    I32EnumAttrCase<"concat", 0>,
    I32EnumAttrCase<"interleaved", 1>
  ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}
def Moe_GluLayoutAttr : EnumAttr<Moe_Dialect, Moe_GluLayout, "glu_layout"> {
  let assemblyFormat = "`<` $value `>`";
}

def Moe_WeightFormat : I32EnumAttr<"WeightFormat",
    "how the expert weights of a GEMM are stored", [
    I32EnumAttrCase<"plain", 0>,
    I32EnumAttrCase<"fp8_block", 1>,
    I32EnumAttrCase<"mxfp4", 2>,
    I32EnumAttrCase<"mxfp4_hopper", 3>
  ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}
def Moe_WeightFormatAttr : EnumAttr<Moe_Dialect, Moe_WeightFormat,
                                    "weight_format"> {
  let assemblyFormat = "`<` $value `>`";
}

def Moe_ScaleFmt : I32EnumAttr<"ScaleFmt",
    "the activation scales of fp8_block weights", [
    I32EnumAttrCase<"f32", 0>,
    I32EnumAttrCase<"ue8m0", 1>
  ]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}
def Moe_ScaleFmtAttr : EnumAttr<Moe_Dialect, Moe_ScaleFmt, "scale_fmt"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

/// Activation / weight element types.
defvar Moe_FloatTypes = [F32, F16, BF16];

class Moe_FloatTensorOfRank<int rank> : TensorRankOf<Moe_FloatTypes, [rank]>;

/// Expert weight element types: the activation types (weight_format
/// plain), e4m3 (fp8_block) and bytes of two packed e2m1 (mxfp4).
defvar Moe_WeightTypes = [F32, F16, BF16, F8E4M3FN, I8];
class Moe_WeightTensorOfRank<int rank> : TensorRankOf<Moe_WeightTypes, [rank]>;

/// The quantization attributes of an expert GEMM (defaults: plain
/// weights, f32 activation scales).
defvar Moe_WeightFormatAttrs = (ins
    DefaultValuedAttr<Moe_WeightFormatAttr,
                      "::mlir::moe::WeightFormat::plain">:$weight_format,
    DefaultValuedAttr<Moe_ScaleFmtAttr, "::mlir::moe::ScaleFmt::f32">:$scale_fmt);
class Moe_IndexTensorOfRank<int rank> : TensorRankOf<[I32], [rank]>;

def Moe_F32Vector : TensorRankOf<[F32], [1]>;

#endif // MOE_MLIR_DIALECT_MOE_IR_MOEBASE_TD
