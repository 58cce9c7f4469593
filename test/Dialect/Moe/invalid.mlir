// RUN: moe-opt %s -split-input-file -verify-diagnostics

// One broken rule per chunk. Every diagnostic site of MoeOps.cpp is covered
// (for the shared helpers once per op that uses them), plus the
// ODS-generated checks that matter to users: ranks, element types, operand
// and result counts, missing or mistyped attributes in the generic form.

//===----------------------------------------------------------------------===//
// Enum keywords (custom form) and enum attributes (generic form)
//===----------------------------------------------------------------------===//

func.func @route_unknown_scoring_keyword(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{custom op 'moe.route' unknown keyword 'softplus'}}
  %w, %i = moe.route %l k = 2 scoring = softplus : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @glu_unknown_activation_keyword(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{custom op 'moe.glu' unknown keyword 'relu'}}
  %r = moe.glu %h relu concat : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

// Keywords are case-sensitive.
func.func @glu_unknown_layout_keyword(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{custom op 'moe.glu' unknown keyword 'Concat'}}
  %r = moe.glu %h silu Concat : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

// The two keywords are positional: activation first, then layout.
func.func @glu_keywords_swapped(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{custom op 'moe.glu' unknown keyword 'concat'}}
  %r = moe.glu %h concat silu : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @ffn_unknown_layout_keyword(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{custom op 'moe.ffn' unknown keyword 'stacked'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = stacked : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @route_generic_unknown_scoring(%l: tensor<4x8xf32>) {
  // expected-error @+2 {{expected ::mlir::moe::ScoringFn to be one of: softmax, sigmoid}}
  // expected-error @+1 {{failed to parse Moe_ScoringAttr parameter 'value' which is to be a `::mlir::moe::ScoringFn`}}
  %w, %i = "moe.route"(%l) <{k = 2 : i64, scoring = #moe.scoring<tanh>}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_generic_unknown_group_score(%l: tensor<4x8xf32>) {
  // expected-error @+2 {{expected ::mlir::moe::GroupScore to be one of: max, top2_sum}}
  // expected-error @+1 {{failed to parse Moe_GroupScoreAttr parameter 'value' which is to be a `::mlir::moe::GroupScore`}}
  %w, %i = "moe.route"(%l) <{k = 2 : i64, scoring = #moe.scoring<softmax>, group_score = #moe.group_score<mean>}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

// An enum attribute of the wrong enum.
func.func @glu_generic_activation_of_wrong_enum(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{Invalid attribute `activation` in property conversion: #moe.glu_layout<concat>}}
  %r = "moe.glu"(%h) <{activation = #moe.glu_layout<concat>, layout = #moe.glu_layout<concat>}> : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attribute types and required attributes (generic form)
//===----------------------------------------------------------------------===//

func.func @topk_missing_k(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op requires attribute 'k'}}
  %v, %i = "moe.topk"(%x) : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @topk_k_not_i64(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op attribute 'k' failed to satisfy constraint: 64-bit signless integer attribute}}
  %v, %i = "moe.topk"(%x) <{k = 2 : i32}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_missing_scoring(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op requires attribute 'scoring'}}
  %w, %i = "moe.route"(%l) <{k = 2 : i64}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_scaling_not_f32(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op attribute 'scaling' failed to satisfy constraint: 32-bit float attribute}}
  %w, %i = "moe.route"(%l) <{k = 2 : i64, scoring = #moe.scoring<softmax>, scaling = 1.0 : f64}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_normalize_not_bool(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{Invalid attribute `normalize` in property conversion: 1 : i64}}
  %w, %i = "moe.route"(%l) <{k = 2 : i64, scoring = #moe.scoring<softmax>, normalize = 1 : i64}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_n_group_not_i64(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op attribute 'n_group' failed to satisfy constraint: 64-bit signless integer attribute}}
  %w, %i = "moe.route"(%l) <{k = 2 : i64, scoring = #moe.scoring<softmax>, n_group = 2 : i32}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @cumsum_missing_num_experts(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op requires attribute 'num_experts'}}
  %cs = "moe.cumsum"(%ids) : (tensor<4x2xi32>) -> tensor<32xi32>
  return
}

// -----

func.func @get_indptr_missing_num_experts(%cs: tensor<32xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op requires attribute 'num_experts'}}
  %o = "moe.get_indptr"(%cs) : (tensor<32xi32>) -> tensor<9xi32>
  return
}

// -----

func.func @get_indptr_inclusive_unit_attr(%cs: tensor<32xi32>) {
  // expected-error @+1 {{Invalid attribute `inclusive` in property conversion: unit}}
  %o = "moe.get_indptr"(%cs) <{num_experts = 8 : i64, inclusive}> : (tensor<32xi32>) -> tensor<8xi32>
  return
}

// -----

func.func @glu_missing_layout(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op requires attribute 'layout'}}
  %r = "moe.glu"(%h) <{activation = #moe.activation<silu>}> : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @glu_limit_not_f32(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op attribute 'limit' failed to satisfy constraint: 32-bit float attribute}}
  %r = moe.glu %h silu concat {limit = 7.0 : f64} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @multihot_to_indices_missing_k(%pm: tensor<4x8xf32>, %pos: tensor<4x8xi32>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op requires attribute 'k'}}
  %r = "moe.multihot_to_indices"(%pm, %pos) : (tensor<4x8xf32>, tensor<4x8xi32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @indices_to_multihot_missing_num_experts(%ids: tensor<4x2xi32>, %p: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op requires attribute 'num_experts'}}
  %mh, %pm, %pos = "moe.indices_to_multihot"(%ids, %p) : (tensor<4x2xi32>, tensor<4x2xf32>) -> (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>)
  return
}

// -----

func.func @ffn_missing_activation(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op requires attribute 'activation'}}
  %y = "moe.ffn"(%x, %l, %wu, %wd) <{k = 2 : i64, scoring = #moe.scoring<softmax>, layout = #moe.glu_layout<concat>}> : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Operand and result counts (generic form)
//===----------------------------------------------------------------------===//

func.func @topk_two_operands(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op requires a single operand}}
  %v, %i = "moe.topk"(%x, %x) <{k = 2 : i64}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @topk_one_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected 2 results}}
  %v = "moe.topk"(%x) <{k = 2 : i64}> : (tensor<4x8xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @get_indices_missing_operand(%cs: tensor<32xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected 2 operands, but found 1}}
  %rev, %tok = "moe.get_indices"(%cs) : (tensor<32xi32>) -> (tensor<8xi32>, tensor<8xi32>)
  return
}

// -----

func.func @gather_three_operands(%x: tensor<4x16xf32>, %t: tensor<8xi32>) {
  // expected-error @+1 {{'moe.gather' op expected 2 operands, but found 3}}
  %r = "moe.gather"(%x, %t, %t) : (tensor<4x16xf32>, tensor<8xi32>, tensor<8xi32>) -> tensor<8x16xf32>
  return
}

// -----

// Only one optional operand (bias) may follow logits.
func.func @route_two_optional_operands(%l: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'moe.route' op operand group starting at #1 requires 0 or 1 element, but found 2}}
  %w, %i = "moe.route"(%l, %b, %b) <{k = 2 : i64, scoring = #moe.scoring<softmax>}> : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @grouped_matmul_missing_offsets(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 3 or more operands, but found 2}}
  %r = "moe.grouped_matmul"(%a, %w) : (tensor<8x16xf32>, tensor<4x16x32xf32>) -> tensor<8x32xf32>
  return
}

// -----

func.func @indices_to_multihot_two_results(%ids: tensor<4x2xi32>, %p: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected 3 results}}
  %mh, %pm = "moe.indices_to_multihot"(%ids, %p) <{num_experts = 8 : i64}> : (tensor<4x2xi32>, tensor<4x2xf32>) -> (tensor<4x8xi1>, tensor<4x8xf32>)
  return
}

// -----

func.func @ffn_missing_w_down(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 4 or more operands, but found 3}}
  %y = "moe.ffn"(%x, %l, %wu) <{k = 2 : i64, scoring = #moe.scoring<softmax>, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>}> : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>) -> tensor<4x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Ranks and element types (ODS)
//===----------------------------------------------------------------------===//

func.func @topk_rank_3_input(%x: tensor<4x8x1xf32>) {
  // expected-error @+1 {{'moe.topk' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8x1xf32>'}}
  %v, %i = "moe.topk"(%x) <{k = 2 : i64}> : (tensor<4x8x1xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @topk_unranked_input(%x: tensor<*xf32>) {
  // expected-error @+1 {{'moe.topk' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<*xf32>'}}
  %v, %i = "moe.topk"(%x) <{k = 2 : i64}> : (tensor<*xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @topk_f64_input(%x: tensor<4x8xf64>) {
  // expected-error @+1 {{'moe.topk' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xf64>'}}
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf64> -> tensor<4x2xf64>, tensor<4x2xi32>
  return
}

// -----

func.func @topk_i64_indices(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op result #1 must be 2D tensor of 32-bit signless integer values, but got 'tensor<4x2xi64>'}}
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi64>
  return
}

// -----

func.func @topk_memref_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op result #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'memref<4x2xf32>'}}
  %v, %i = "moe.topk"(%x) <{k = 2 : i64}> : (tensor<4x8xf32>) -> (memref<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_f64_weights(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op result #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x2xf64>'}}
  %w, %i = moe.route %l k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x2xf64>, tensor<4x2xi32>
  return
}

// -----

func.func @route_integer_logits(%l: tensor<4x8xi32>) {
  // expected-error @+1 {{'moe.route' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xi32>'}}
  %w, %i = moe.route %l k = 2 scoring = softmax : tensor<4x8xi32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_bias_not_f32(%l: tensor<4x8xf16>, %b: tensor<8xf16>) {
  // expected-error @+1 {{'moe.route' op operand #1 must be 1D tensor of 32-bit float values, but got 'tensor<8xf16>'}}
  %w, %i = moe.route %l bias(%b : tensor<8xf16>) k = 2 scoring = softmax : tensor<4x8xf16> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_bias_rank_2(%l: tensor<4x8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{'moe.route' op operand #1 must be 1D tensor of 32-bit float values, but got 'tensor<1x8xf32>'}}
  %w, %i = moe.route %l bias(%b : tensor<1x8xf32>) k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @cumsum_i64_indices(%ids: tensor<4x2xi64>) {
  // expected-error @+1 {{'moe.cumsum' op operand #0 must be 2D tensor of 32-bit signless integer values, but got 'tensor<4x2xi64>'}}
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x2xi64> -> tensor<32xi32>
  return
}

// -----

func.func @cumsum_i64_result(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op result #0 must be 1D tensor of 32-bit signless integer values, but got 'tensor<32xi64>'}}
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x2xi32> -> tensor<32xi64>
  return
}

// -----

func.func @get_indices_rank_2_cumsum(%cs: tensor<8x4xi32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.get_indices' op operand #0 must be 1D tensor of 32-bit signless integer values, but got 'tensor<8x4xi32>'}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<8x4xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @get_indptr_i16_result(%cs: tensor<32xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op result #0 must be 1D tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<9xi16>'}}
  %o = moe.get_indptr %cs num_experts = 8 : tensor<32xi32> -> tensor<9xi16>
  return
}

// -----

func.func @gather_i64_indices(%x: tensor<4x16xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{'moe.gather' op operand #1 must be 1D tensor of 32-bit signless integer values, but got 'tensor<8xi64>'}}
  %r = moe.gather %x[%t] : tensor<4x16xf32>, tensor<8xi64> -> tensor<8x16xf32>
  return
}

// -----

func.func @scatter_f64_input(%y: tensor<8x16xf64>, %r: tensor<8xi32>) {
  // expected-error @+1 {{'moe.scatter' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<8x16xf64>'}}
  %s = moe.scatter %y[%r] : tensor<8x16xf64>, tensor<8xi32> -> tensor<8x16xf64>
  return
}

// -----

func.func @grouped_matmul_rank_2_rhs(%a: tensor<8x16xf32>, %w: tensor<16x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op operand #1 must be 3D tensor of 32-bit float or 16-bit float or bfloat16 type or f8E4M3FN type or 8-bit signless integer values, but got 'tensor<16x32xf32>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_i64_offsets(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<5xi64>) {
  // expected-error @+1 {{'moe.grouped_matmul' op operand #2 must be 1D tensor of 32-bit signless integer values, but got 'tensor<5xi64>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi64>) : tensor<8x16xf32>, tensor<4x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @glu_f64_input(%h: tensor<4x8xf64>) {
  // expected-error @+1 {{'moe.glu' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x8xf64>'}}
  %r = moe.glu %h silu concat : tensor<4x8xf64> -> tensor<4x4xf64>
  return
}

// -----

func.func @combine_rank_2_input(%p: tensor<4x16xf32>) {
  // expected-error @+1 {{'moe.combine' op operand #0 must be 3D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x16xf32>'}}
  %r = moe.combine %p : tensor<4x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @combine_integer_weights(%p: tensor<4x2x16xf32>, %w: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.combine' op operand #1 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4x2xi32>'}}
  %r = moe.combine %p weights(%w : tensor<4x2xi32>) : tensor<4x2x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @indices_to_multihot_i8_multihot(%ids: tensor<4x2xi32>, %p: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op result #0 must be 2D tensor of 1-bit signless integer values, but got 'tensor<4x8xi8>'}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 8 : tensor<4x2xi32>, tensor<4x2xf32> -> tensor<4x8xi8>, tensor<4x8xf32>, tensor<4x8xi32>
  return
}

// -----

func.func @multihot_to_indices_i64_position_map(%pm: tensor<4x8xf32>, %pos: tensor<4x8xi64>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op operand #1 must be 2D tensor of 32-bit signless integer values, but got 'tensor<4x8xi64>'}}
  %r = moe.multihot_to_indices %pm, %pos k = 2 : tensor<4x8xf32>, tensor<4x8xi64> -> tensor<4x2xf32>
  return
}

// -----

func.func @ffn_rank_2_w_up(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op operand #2 must be 3D tensor of 32-bit float or 16-bit float or bfloat16 type or f8E4M3FN type or 8-bit signless integer values, but got 'tensor<16x64xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.topk
//===----------------------------------------------------------------------===//

func.func @topk_dynamic_e(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.topk' op expected E (dimension 1 of 'input') to be static}}
  %v, %i = moe.topk %x k = 2 : tensor<4x?xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @topk_k_zero(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected k in [1, E = 8], got 0}}
  %v, %i = moe.topk %x k = 0 : tensor<4x8xf32> -> tensor<4x0xf32>, tensor<4x0xi32>
  return
}

// -----

func.func @topk_k_negative(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected k in [1, E = 8], got -1}}
  %v, %i = moe.topk %x k = -1 : tensor<4x8xf32> -> tensor<4x?xf32>, tensor<4x?xi32>
  return
}

// -----

func.func @topk_k_larger_than_e(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected k in [1, E = 8], got 9}}
  %v, %i = moe.topk %x k = 9 : tensor<4x8xf32> -> tensor<4x9xf32>, tensor<4x9xi32>
  return
}

// -----

func.func @topk_zero_experts(%x: tensor<0x0xf32>) {
  // expected-error @+1 {{'moe.topk' op expected E (dimension 1 of 'input') to be non-zero}}
  %v, %i = moe.topk %x k = 1 : tensor<0x0xf32> -> tensor<0x1xf32>, tensor<0x1xi32>
  return
}

// -----

func.func @topk_values_wrong_k(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected result #0 to be 'tensor<4x2xf32>', got 'tensor<4x3xf32>'}}
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @topk_values_wrong_element_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected result #0 to be 'tensor<4x2xf32>', got 'tensor<4x2xf16>'}}
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf32> -> tensor<4x2xf16>, tensor<4x2xi32>
  return
}

// -----

// A dynamic k in a result is not "compatible enough": results are exact.
func.func @topk_indices_dynamic_k(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected result #1 to be 'tensor<4x2xi32>', got 'tensor<4x?xi32>'}}
  %v, %i = moe.topk %x k = 2 : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x?xi32>
  return
}

// -----

func.func @topk_result_static_t_for_dynamic_t(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.topk' op expected result #0 to be 'tensor<?x2xf32>', got 'tensor<4x2xf32>'}}
  %v, %i = moe.topk %x k = 2 : tensor<?x8xf32> -> tensor<4x2xf32>, tensor<?x2xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

func.func @route_dynamic_e(%l: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.route' op expected E (dimension 1 of 'logits') to be static}}
  %w, %i = moe.route %l k = 2 scoring = softmax : tensor<4x?xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_n_group_zero(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected n_group >= 1, got 0}}
  %w, %i = moe.route %l k = 2 scoring = softmax {n_group = 0 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_n_group_negative(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected n_group >= 1, got -2}}
  %w, %i = moe.route %l k = 2 scoring = softmax {n_group = -2 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_e_not_divisible_by_n_group(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected E = 8 to be divisible by n_group = 3}}
  %w, %i = moe.route %l k = 2 scoring = softmax {n_group = 3 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_topk_group_zero(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected topk_group in [1, n_group = 4], got 0}}
  %w, %i = moe.route %l k = 2 scoring = softmax {n_group = 4 : i64, topk_group = 0 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_topk_group_larger_than_n_group(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected topk_group in [1, n_group = 4], got 5}}
  %w, %i = moe.route %l k = 2 scoring = softmax {n_group = 4 : i64, topk_group = 5 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

// topk_group defaults to 1, so n_group = 1 with topk_group = 2 is invalid.
func.func @route_topk_group_without_groups(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected topk_group in [1, n_group = 1], got 2}}
  %w, %i = moe.route %l k = 2 scoring = softmax {topk_group = 2 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_top2_sum_one_expert_per_group(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected at least two experts per group for top2_sum, got 1}}
  %w, %i = moe.route %l k = 2 scoring = sigmoid {n_group = 8 : i64, topk_group = 4 : i64, group_score = #moe.group_score<top2_sum>} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_k_zero(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected k in [1, topk_group * E / n_group = 8], got 0}}
  %w, %i = moe.route %l k = 0 scoring = softmax : tensor<4x8xf32> -> tensor<4x0xf32>, tensor<4x0xi32>
  return
}

// -----

func.func @route_k_larger_than_e(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected k in [1, topk_group * E / n_group = 8], got 9}}
  %w, %i = moe.route %l k = 9 scoring = softmax : tensor<4x8xf32> -> tensor<4x9xf32>, tensor<4x9xi32>
  return
}

// -----

// 4 groups of 4 experts, 2 groups kept: only 8 experts are selectable.
func.func @route_k_larger_than_selectable_experts(%l: tensor<4x16xf32>) {
  // expected-error @+1 {{'moe.route' op expected k in [1, topk_group * E / n_group = 8], got 9}}
  %w, %i = moe.route %l k = 9 scoring = softmax {n_group = 4 : i64, topk_group = 2 : i64} : tensor<4x16xf32> -> tensor<4x9xf32>, tensor<4x9xi32>
  return
}

// -----

func.func @route_scaling_inf(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected a finite scaling, got INF}}
  %w, %i = moe.route %l k = 2 scoring = softmax {scaling = 0x7F800000 : f32} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_scaling_nan(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected a finite scaling, got nan}}
  %w, %i = moe.route %l k = 2 scoring = softmax {scaling = 0x7FC00000 : f32} : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_bias_wrong_length(%l: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'moe.route' op expected 'bias' to have E = 8 elements, got 4}}
  %w, %i = moe.route %l bias(%b : tensor<4xf32>) k = 2 scoring = sigmoid : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_bias_dynamic_length(%l: tensor<4x8xf32>, %b: tensor<?xf32>) {
  // expected-error @+1 {{'moe.route' op expected 'bias' to have E = 8 elements, got ?}}
  %w, %i = moe.route %l bias(%b : tensor<?xf32>) k = 2 scoring = sigmoid : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_weights_wrong_k(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected 'weights' to be 4x2 (T x k), got 'tensor<4x3xf32>'}}
  %w, %i = moe.route %l k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_weights_dynamic_t_for_static_t(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected 'weights' to be 4x2 (T x k), got 'tensor<?x2xf32>'}}
  %w, %i = moe.route %l k = 2 scoring = softmax : tensor<4x8xf32> -> tensor<?x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @route_indices_wrong_t(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.route' op expected 'indices' to be ?x2 (T x k), got 'tensor<4x2xi32>'}}
  %w, %i = moe.route %l k = 2 scoring = softmax : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<4x2xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.cumsum
//===----------------------------------------------------------------------===//

func.func @cumsum_num_experts_zero(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected num_experts >= 1, got 0}}
  %cs = moe.cumsum %ids num_experts = 0 : tensor<4x2xi32> -> tensor<0xi32>
  return
}

// -----

func.func @cumsum_num_experts_negative(%ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected num_experts >= 1, got -3}}
  %cs = moe.cumsum %ids num_experts = -3 : tensor<?x2xi32> -> tensor<?xi32>
  return
}

// -----

func.func @cumsum_num_experts_too_large(%ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected num_experts = 2147483648 to fit i32 (< 2^31)}}
  %cs = moe.cumsum %ids num_experts = 2147483648 : tensor<?x2xi32> -> tensor<?xi32>
  return
}

// -----

func.func @cumsum_dynamic_k(%ids: tensor<4x?xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected k (dimension 1 of 'indices') to be static}}
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x?xi32> -> tensor<32xi32>
  return
}

// -----

func.func @cumsum_e_times_t_overflows_i32(%ids: tensor<268435456x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected E * T = 8 * 268435456 to fit i32 (< 2^31)}}
  %cs = moe.cumsum %ids num_experts = 8 : tensor<268435456x2xi32> -> tensor<2147483648xi32>
  return
}

// -----

// E * T wraps around to 0 in 64 bits; the verifier must not be fooled.
func.func @cumsum_e_times_t_overflows_i64(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected num_experts = 4611686018427387904 to fit i32 (< 2^31)}}
  %cs = moe.cumsum %ids num_experts = 4611686018427387904 : tensor<4x2xi32> -> tensor<0xi32>
  return
}

// -----

func.func @cumsum_result_wrong_length(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected result #0 to be 'tensor<32xi32>', got 'tensor<8xi32>'}}
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x2xi32> -> tensor<8xi32>
  return
}

// -----

func.func @cumsum_result_dynamic_for_static_t(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.cumsum' op expected result #0 to be 'tensor<32xi32>', got 'tensor<?xi32>'}}
  %cs = moe.cumsum %ids num_experts = 8 : tensor<4x2xi32> -> tensor<?xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.get_indices
//===----------------------------------------------------------------------===//

func.func @get_indices_dynamic_k(%cs: tensor<32xi32>, %ids: tensor<4x?xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected k (dimension 1 of 'indices') to be static}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<32xi32>, tensor<4x?xi32> -> tensor<?xi32>, tensor<?xi32>
  return
}

// -----

func.func @get_indices_cumsum_too_long(%cs: tensor<2147483648xi32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected the 'cumsum' length 2147483648 (E * T) to fit i32 (< 2^31)}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<2147483648xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  return
}

// -----

func.func @get_indices_t_times_k_overflows_i32(%cs: tensor<?xi32>, %ids: tensor<1073741824x2xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected T * k = 1073741824 * 2 to fit i32 (< 2^31)}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<?xi32>, tensor<1073741824x2xi32> -> tensor<2147483648xi32>, tensor<2147483648xi32>
  return
}

// -----

// T * k wraps around to 0 in 64 bits; the verifier must not be fooled.
func.func @get_indices_t_times_k_overflows_i64(%cs: tensor<0xi32>, %ids: tensor<4611686018427387904x4xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected T * k = 4611686018427387904 * 4 to fit i32 (< 2^31)}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<0xi32>, tensor<4611686018427387904x4xi32> -> tensor<0xi32>, tensor<0xi32>
  return
}

// -----

func.func @get_indices_cumsum_not_multiple_of_t(%cs: tensor<31xi32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected the 'cumsum' length 31 to be a multiple E * T of T = 4}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<31xi32>, tensor<4x2xi32> -> tensor<8xi32>, tensor<8xi32>
  return
}

// -----

func.func @get_indices_nonempty_cumsum_for_zero_tokens(%cs: tensor<8xi32>, %ids: tensor<0x2xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected the 'cumsum' length 8 to be a multiple E * T of T = 0}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<8xi32>, tensor<0x2xi32> -> tensor<0xi32>, tensor<0xi32>
  return
}

// -----

func.func @get_indices_result_wrong_length(%cs: tensor<32xi32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected result #0 to be 'tensor<8xi32>', got 'tensor<32xi32>'}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<32xi32>, tensor<4x2xi32> -> tensor<32xi32>, tensor<8xi32>
  return
}

// -----

func.func @get_indices_token_indices_static_for_dynamic_t(%cs: tensor<?xi32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.get_indices' op expected result #1 to be 'tensor<?xi32>', got 'tensor<8xi32>'}}
  %rev, %tok = moe.get_indices %cs, %ids : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.get_indptr
//===----------------------------------------------------------------------===//

func.func @get_indptr_num_experts_zero(%cs: tensor<32xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op expected num_experts >= 1, got 0}}
  %o = moe.get_indptr %cs num_experts = 0 : tensor<32xi32> -> tensor<1xi32>
  return
}

// -----

// E + 1 would overflow int64 and read as a dynamic size.
func.func @get_indptr_num_experts_too_large(%cs: tensor<?xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op expected num_experts = 9223372036854775807 to fit i32 (< 2^31)}}
  %o = moe.get_indptr %cs num_experts = 9223372036854775807 : tensor<?xi32> -> tensor<?xi32>
  return
}

// -----

func.func @get_indptr_cumsum_too_long(%cs: tensor<4294967296xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op expected the 'cumsum' length 4294967296 (E * T) to fit i32 (< 2^31)}}
  %o = moe.get_indptr %cs num_experts = 8 : tensor<4294967296xi32> -> tensor<9xi32>
  return
}

// -----

func.func @get_indptr_cumsum_not_multiple_of_e(%cs: tensor<30xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op expected the 'cumsum' length 30 to be a multiple of num_experts = 8}}
  %o = moe.get_indptr %cs num_experts = 8 : tensor<30xi32> -> tensor<9xi32>
  return
}

// -----

func.func @get_indptr_exclusive_result_has_e_elements(%cs: tensor<32xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op expected the result to have E + 1 = 9 elements, got 8}}
  %o = moe.get_indptr %cs num_experts = 8 : tensor<32xi32> -> tensor<8xi32>
  return
}

// -----

func.func @get_indptr_inclusive_result_has_e_plus_1_elements(%cs: tensor<32xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op expected the result to have E = 8 elements, got 9}}
  %o = moe.get_indptr %cs num_experts = 8 {inclusive = true} : tensor<32xi32> -> tensor<9xi64>
  return
}

// -----

func.func @get_indptr_dynamic_result(%cs: tensor<?xi32>) {
  // expected-error @+1 {{'moe.get_indptr' op expected the result to have E + 1 = 9 elements, got ?}}
  %o = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<?xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.gather and moe.scatter
//===----------------------------------------------------------------------===//

func.func @gather_dynamic_h(%x: tensor<4x?xf32>, %t: tensor<8xi32>) {
  // expected-error @+1 {{'moe.gather' op expected H (dimension 1 of 'input') to be static}}
  %r = moe.gather %x[%t] : tensor<4x?xf32>, tensor<8xi32> -> tensor<8x?xf32>
  return
}

// -----

func.func @gather_result_rows_not_m(%x: tensor<4x16xf32>, %t: tensor<8xi32>) {
  // expected-error @+1 {{'moe.gather' op expected result #0 to be 'tensor<8x16xf32>', got 'tensor<4x16xf32>'}}
  %r = moe.gather %x[%t] : tensor<4x16xf32>, tensor<8xi32> -> tensor<4x16xf32>
  return
}

// -----

func.func @gather_result_wrong_element_type(%x: tensor<?x16xbf16>, %t: tensor<?xi32>) {
  // expected-error @+1 {{'moe.gather' op expected result #0 to be 'tensor<?x16xbf16>', got 'tensor<?x16xf32>'}}
  %r = moe.gather %x[%t] : tensor<?x16xbf16>, tensor<?xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @scatter_dynamic_h(%y: tensor<8x?xf32>, %r: tensor<8xi32>) {
  // expected-error @+1 {{'moe.scatter' op expected H (dimension 1 of 'input') to be static}}
  %s = moe.scatter %y[%r] : tensor<8x?xf32>, tensor<8xi32> -> tensor<8x?xf32>
  return
}

// -----

func.func @scatter_indices_length_not_m(%y: tensor<8x16xf32>, %r: tensor<4xi32>) {
  // expected-error @+1 {{'moe.scatter' op expected dimension 0 of 'indices' (M) to match dimension 0 of 'input', got 4 vs 8}}
  %s = moe.scatter %y[%r] : tensor<8x16xf32>, tensor<4xi32> -> tensor<8x16xf32>
  return
}

// -----

func.func @scatter_result_static_for_dynamic_m(%y: tensor<?x16xf32>, %r: tensor<8xi32>) {
  // expected-error @+1 {{'moe.scatter' op expected result #0 to be 'tensor<?x16xf32>', got 'tensor<8x16xf32>'}}
  %s = moe.scatter %y[%r] : tensor<?x16xf32>, tensor<8xi32> -> tensor<8x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.grouped_matmul
//===----------------------------------------------------------------------===//

func.func @grouped_matmul_dynamic_lhs_k(%a: tensor<8x?xf32>, %w: tensor<4x16x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected K (dimension 1 of 'lhs') to be static}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x?xf32>, tensor<4x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_dynamic_e(%a: tensor<8x16xf32>, %w: tensor<?x16x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected E (dimension 0 of 'rhs') to be static}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xf32>, tensor<?x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_dynamic_rhs_k(%a: tensor<8x16xf32>, %w: tensor<4x?x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected K (dimension 1 of 'rhs') to be static}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xf32>, tensor<4x?x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_dynamic_n(%a: tensor<8x16xf32>, %w: tensor<4x16x?xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected N (dimension 2 of 'rhs') to be static}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xf32>, tensor<4x16x?xf32> -> tensor<8x?xf32>
  return
}

// -----

// With transpose_rhs the rhs is E x N x K: dimension 1 is N.
func.func @grouped_matmul_transposed_dynamic_n(%a: tensor<8x16xf32>, %w: tensor<4x?x16xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected N (dimension 1 of 'rhs') to be static}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<8x16xf32>, tensor<4x?x16xf32> -> tensor<8x?xf32>
  return
}

// -----

func.func @grouped_matmul_transposed_dynamic_k(%a: tensor<8x16xf32>, %w: tensor<4x32x?xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected K (dimension 2 of 'rhs') to be static}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<8x16xf32>, tensor<4x32x?xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_rhs_element_type_mismatch(%a: tensor<8x16xbf16>, %w: tensor<4x16x32xf16>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'rhs' element type 'bf16' (as 'lhs'), got 'f16'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xbf16>, tensor<4x16x32xf16> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_k_mismatch(%a: tensor<8x16xf32>, %w: tensor<4x24x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected dimension 1 of 'rhs' (K) to match dimension 1 of 'lhs', got 24 vs 16}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xf32>, tensor<4x24x32xf32> -> tensor<8x32xf32>
  return
}

// -----

// A K x N rhs used with transpose_rhs: K is looked up in dimension 2.
func.func @grouped_matmul_transposed_k_mismatch(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected dimension 2 of 'rhs' (K) to match dimension 1 of 'lhs', got 32 vs 16}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<8x16xf32>, tensor<4x16x32xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @grouped_matmul_offsets_e_elements(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<4xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'offsets' to have E + 1 = 5 elements, got 4}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<4xi32>) : tensor<8x16xf32>, tensor<4x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_dynamic_offsets(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<?xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'offsets' to have E + 1 = 5 elements, got ?}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<?xi32>) : tensor<8x16xf32>, tensor<4x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

// E + 1 overflows int64 to the dynamic-size marker; a dynamic offsets tensor
// must still be rejected.
func.func @grouped_matmul_huge_e_dynamic_offsets(%a: tensor<8x16xf32>, %w: tensor<9223372036854775807x16x32xf32>, %off: tensor<?xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'offsets' to have E + 1 = 9223372036854775808 elements, got ?}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<?xi32>) : tensor<8x16xf32>, tensor<9223372036854775807x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_bias_element_type_mismatch(%a: tensor<8x16xf16>, %w: tensor<4x16x32xf16>, %off: tensor<5xi32>, %b: tensor<4x32xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'bias' element type 'f16' (as 'lhs'), got 'f32'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<4x32xf32>) : tensor<8x16xf16>, tensor<4x16x32xf16> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_bias_wrong_shape(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<5xi32>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'bias' to be 4x32 (E x N), got 'tensor<4x16xf32>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<4x16xf32>) : tensor<8x16xf32>, tensor<4x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_bias_dynamic_e(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<5xi32>, %b: tensor<?x32xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'bias' to be 4x32 (E x N), got 'tensor<?x32xf32>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<?x32xf32>) : tensor<8x16xf32>, tensor<4x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_result_element_type_neither_f_nor_f32(%a: tensor<8x16xf16>, %w: tensor<4x16x32xf16>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected result element type 'f16' or f32, got 'bf16'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xf16>, tensor<4x16x32xf16> -> tensor<8x32xbf16>
  return
}

// -----

func.func @grouped_matmul_result_wrong_n(%a: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected the result to be 8x32 (M x N), got 'tensor<8x16xf32>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<8x16xf32>, tensor<4x16x32xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @grouped_matmul_result_static_m_for_dynamic_m(%a: tensor<?x16xf32>, %w: tensor<4x16x32xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected the result to be ?x32 (M x N), got 'tensor<8x32xf32>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) : tensor<?x16xf32>, tensor<4x16x32xf32> -> tensor<8x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.glu
//===----------------------------------------------------------------------===//

func.func @glu_dynamic_2n(%h: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.glu' op expected 2N (dimension 1 of 'input') to be static}}
  %r = moe.glu %h silu concat : tensor<4x?xf32> -> tensor<4x?xf32>
  return
}

// -----

func.func @glu_odd_columns(%h: tensor<4x7xf32>) {
  // expected-error @+1 {{'moe.glu' op expected an even number of input columns (2N), got 7}}
  %r = moe.glu %h silu interleaved : tensor<4x7xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @glu_alpha_inf(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op expected a finite alpha, got INF}}
  %r = moe.glu %h silu concat {alpha = 0x7F800000 : f32} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @glu_up_bias_nan(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op expected a finite up_bias, got nan}}
  %r = moe.glu %h silu concat {up_bias = 0x7FC00000 : f32} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @glu_limit_zero(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op expected limit to be finite and > 0, got 0.000000e+00}}
  %r = moe.glu %h silu concat {limit = 0.0 : f32} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @glu_limit_negative(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op expected limit to be finite and > 0, got -7.000000e+00}}
  %r = moe.glu %h silu interleaved {limit = -7.0 : f32} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @glu_limit_inf(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op expected limit to be finite and > 0, got INF}}
  %r = moe.glu %h silu concat {limit = 0x7F800000 : f32} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @glu_limit_nan(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op expected limit to be finite and > 0, got nan}}
  %r = moe.glu %h silu concat {limit = 0x7FC00000 : f32} : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @glu_result_not_half_width(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu' op expected result #0 to be 'tensor<4x4xf32>', got 'tensor<4x8xf32>'}}
  %r = moe.glu %h silu concat : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @glu_result_wrong_element_type(%h: tensor<?x8xbf16>) {
  // expected-error @+1 {{'moe.glu' op expected result #0 to be 'tensor<?x4xbf16>', got 'tensor<?x4xf32>'}}
  %r = moe.glu %h gelu concat : tensor<?x8xbf16> -> tensor<?x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.combine
//===----------------------------------------------------------------------===//

func.func @combine_dynamic_k(%p: tensor<4x?x16xf32>) {
  // expected-error @+1 {{'moe.combine' op expected k (dimension 1 of 'input') to be static}}
  %r = moe.combine %p : tensor<4x?x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @combine_dynamic_h(%p: tensor<4x2x?xf32>) {
  // expected-error @+1 {{'moe.combine' op expected H (dimension 2 of 'input') to be static}}
  %r = moe.combine %p : tensor<4x2x?xf32> -> tensor<4x?xf32>
  return
}

// -----

func.func @combine_weights_wrong_t(%p: tensor<4x2x16xf32>, %w: tensor<5x2xf32>) {
  // expected-error @+1 {{'moe.combine' op expected dimension 0 of 'weights' (T) to match dimension 0 of 'input', got 5 vs 4}}
  %r = moe.combine %p weights(%w : tensor<5x2xf32>) : tensor<4x2x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @combine_weights_wrong_k(%p: tensor<4x2x16xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+1 {{'moe.combine' op expected dimension 1 of 'weights' (k) to be 2, got 3}}
  %r = moe.combine %p weights(%w : tensor<4x3xf32>) : tensor<4x2x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @combine_weights_dynamic_k(%p: tensor<?x2x16xf32>, %w: tensor<?x?xf32>) {
  // expected-error @+1 {{'moe.combine' op expected dimension 1 of 'weights' (k) to be 2, got ?}}
  %r = moe.combine %p weights(%w : tensor<?x?xf32>) : tensor<?x2x16xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @combine_result_wrong_element_type(%p: tensor<4x2x16xbf16>, %w: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.combine' op expected result #0 to be 'tensor<4x16xbf16>', got 'tensor<4x16xf32>'}}
  %r = moe.combine %p weights(%w : tensor<4x2xf32>) : tensor<4x2x16xbf16> -> tensor<4x16xf32>
  return
}

// -----

func.func @combine_result_keeps_k(%p: tensor<4x2x16xf32>) {
  // expected-error @+1 {{'moe.combine' op expected result #0 to be 'tensor<4x16xf32>', got 'tensor<4x2xf32>'}}
  %r = moe.combine %p : tensor<4x2x16xf32> -> tensor<4x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.indices_to_multihot
//===----------------------------------------------------------------------===//

func.func @indices_to_multihot_num_experts_zero(%ids: tensor<4x2xi32>, %p: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected num_experts >= 1, got 0}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 0 : tensor<4x2xi32>, tensor<4x2xf32> -> tensor<4x0xi1>, tensor<4x0xf32>, tensor<4x0xi32>
  return
}

// -----

// A negative count must not slip through as a dynamic E.
func.func @indices_to_multihot_num_experts_negative(%ids: tensor<4x2xi32>, %p: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected num_experts >= 1, got -9223372036854775808}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = -9223372036854775808 : tensor<4x2xi32>, tensor<4x2xf32> -> tensor<4x?xi1>, tensor<4x?xf32>, tensor<4x?xi32>
  return
}

// -----

func.func @indices_to_multihot_dynamic_k(%ids: tensor<4x?xi32>, %p: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected k (dimension 1 of 'indices') to be static}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 8 : tensor<4x?xi32>, tensor<4x?xf32> -> tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>
  return
}

// -----

func.func @indices_to_multihot_probs_wrong_t(%ids: tensor<4x2xi32>, %p: tensor<3x2xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected dimension 0 of 'probs' (T) to match dimension 0 of 'indices', got 3 vs 4}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 8 : tensor<4x2xi32>, tensor<3x2xf32> -> tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>
  return
}

// -----

func.func @indices_to_multihot_probs_wrong_k(%ids: tensor<4x2xi32>, %p: tensor<4x3xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected dimension 1 of 'probs' (k) to be 2, got 3}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 8 : tensor<4x2xi32>, tensor<4x3xf32> -> tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>
  return
}

// -----

func.func @indices_to_multihot_position_map_wrong_e(%ids: tensor<4x2xi32>, %p: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected result #2 to be 'tensor<4x8xi32>', got 'tensor<4x4xi32>'}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 8 : tensor<4x2xi32>, tensor<4x2xf32> -> tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x4xi32>
  return
}

// -----

func.func @indices_to_multihot_probs_multihot_wrong_element_type(%ids: tensor<4x2xi32>, %p: tensor<4x2xf16>) {
  // expected-error @+1 {{'moe.indices_to_multihot' op expected result #1 to be 'tensor<4x8xf16>', got 'tensor<4x8xf32>'}}
  %mh, %pm, %pos = moe.indices_to_multihot %ids, %p num_experts = 8 : tensor<4x2xi32>, tensor<4x2xf16> -> tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.multihot_to_indices
//===----------------------------------------------------------------------===//

func.func @multihot_to_indices_k_zero(%pm: tensor<4x8xf32>, %pos: tensor<4x8xi32>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op expected k >= 1, got 0}}
  %r = moe.multihot_to_indices %pm, %pos k = 0 : tensor<4x8xf32>, tensor<4x8xi32> -> tensor<4x0xf32>
  return
}

// -----

// A negative k must not slip through as a dynamic result dimension.
func.func @multihot_to_indices_k_negative(%pm: tensor<4x8xf32>, %pos: tensor<4x8xi32>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op expected k >= 1, got -1}}
  %r = moe.multihot_to_indices %pm, %pos k = -1 : tensor<4x8xf32>, tensor<4x8xi32> -> tensor<4x?xf32>
  return
}

// -----

func.func @multihot_to_indices_dynamic_e(%pm: tensor<4x?xf32>, %pos: tensor<4x?xi32>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op expected E (dimension 1 of 'probs_multihot') to be static}}
  %r = moe.multihot_to_indices %pm, %pos k = 2 : tensor<4x?xf32>, tensor<4x?xi32> -> tensor<4x2xf32>
  return
}

// -----

func.func @multihot_to_indices_position_map_wrong_t(%pm: tensor<4x8xf32>, %pos: tensor<3x8xi32>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op expected dimension 0 of 'position_map' (T) to match dimension 0 of 'probs_multihot', got 3 vs 4}}
  %r = moe.multihot_to_indices %pm, %pos k = 2 : tensor<4x8xf32>, tensor<3x8xi32> -> tensor<4x2xf32>
  return
}

// -----

func.func @multihot_to_indices_position_map_wrong_e(%pm: tensor<4x8xf32>, %pos: tensor<4x?xi32>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op expected dimension 1 of 'position_map' (E) to be 8, got ?}}
  %r = moe.multihot_to_indices %pm, %pos k = 2 : tensor<4x8xf32>, tensor<4x?xi32> -> tensor<4x2xf32>
  return
}

// -----

func.func @multihot_to_indices_result_wrong_k(%pm: tensor<?x8xbf16>, %pos: tensor<?x8xi32>) {
  // expected-error @+1 {{'moe.multihot_to_indices' op expected result #0 to be 'tensor<?x2xbf16>', got 'tensor<?x8xbf16>'}}
  %r = moe.multihot_to_indices %pm, %pos k = 2 : tensor<?x8xbf16>, tensor<?x8xi32> -> tensor<?x8xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.ffn
//===----------------------------------------------------------------------===//

func.func @ffn_dynamic_h(%x: tensor<4x?xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected H (dimension 1 of 'x') to be static}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x?xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x?xf32>
  return
}

// -----

func.func @ffn_dynamic_e(%x: tensor<4x16xf32>, %l: tensor<4x?xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected E (dimension 1 of 'logits') to be static}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x?xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_logits_wrong_t(%x: tensor<4x16xf32>, %l: tensor<5x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected dimension 0 of 'logits' (T) to match dimension 0 of 'x', got 5 vs 4}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<5x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_logits_element_type_mismatch(%x: tensor<4x16xbf16>, %l: tensor<4x8xf16>, %wu: tensor<8x16x64xbf16>, %wd: tensor<8x32x16xbf16>) {
  // expected-error @+1 {{'moe.ffn' op expected 'logits' element type 'bf16' (as 'x') or f32, got 'f16'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xbf16>, tensor<4x8xf16>, tensor<8x16x64xbf16>, tensor<8x32x16xbf16> -> tensor<4x16xbf16>
  return
}

// -----

func.func @ffn_logits_narrower_than_x(%x: tensor<4x16xf32>, %l: tensor<4x8xbf16>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'logits' element type 'f32' (as 'x') or f32, got 'bf16'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xbf16>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_w_up_element_type_mismatch(%x: tensor<4x16xf16>, %l: tensor<4x8xf16>, %wu: tensor<8x16x64xbf16>, %wd: tensor<8x32x16xf16>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_up' element type 'f16' (as 'x'), got 'bf16'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf16>, tensor<4x8xf16>, tensor<8x16x64xbf16>, tensor<8x32x16xf16> -> tensor<4x16xf16>
  return
}

// -----

func.func @ffn_w_down_element_type_mismatch(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf16>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_down' element type 'f32' (as 'x'), got 'f16'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf16> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_w_up_dynamic_2i(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x?xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_up' to have a static shape, got 'tensor<8x16x?xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x?xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_w_up_wrong_e(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<4x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_up' to be E x H x 2I with E = 8, H = 16 and an even 2I, got 'tensor<4x16x64xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_w_up_odd_2i(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x63xf32>, %wd: tensor<8x31x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_up' to be E x H x 2I with E = 8, H = 16 and an even 2I, got 'tensor<8x16x63xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x63xf32>, tensor<8x31x16xf32> -> tensor<4x16xf32>
  return
}

// -----

// An E x H x 2I w_up given with transpose_weights (which wants E x 2I x H).
func.func @ffn_transposed_w_up_in_plain_layout(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x16x32xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_up' to be E x 2I x H with E = 8, H = 16 and an even 2I, got 'tensor<8x16x64xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {transpose_weights = true} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x16x32xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_w_down_wrong_i(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x64x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_down' to be E x I x H = 8x32x16, got 'tensor<8x64x16xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x64x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_w_down_dynamic(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x?x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_down' to be E x I x H = 8x32x16, got 'tensor<8x?x16xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x?x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_transposed_w_down_in_plain_layout(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x16xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_down' to be E x H x I = 8x16x32, got 'tensor<8x32x16xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {transpose_weights = true} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x64x16xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_k_larger_than_e(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected k in [1, topk_group * E / n_group = 8], got 9}}
  %y = moe.ffn %x, %l, %wu, %wd k = 9 scoring = softmax activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_n_group_zero(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected n_group >= 1, got 0}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {n_group = 0 : i64} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_e_not_divisible_by_n_group(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected E = 8 to be divisible by n_group = 3}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {n_group = 3 : i64} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_topk_group_larger_than_n_group(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected topk_group in [1, n_group = 2], got 3}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {n_group = 2 : i64, topk_group = 3 : i64} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_top2_sum_one_expert_per_group(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected at least two experts per group for top2_sum, got 1}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = sigmoid activation = silu layout = concat {n_group = 8 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_scaling_nan(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected a finite scaling, got nan}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {scaling = 0x7FC00000 : f32} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_bias_wrong_length(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 'bias' to have E = 8 elements, got 16}}
  %y = moe.ffn %x, %l, %wu, %wd bias(%b : tensor<16xf32>) k = 2 scoring = sigmoid activation = silu layout = concat : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_bias_not_f32(%x: tensor<4x16xbf16>, %l: tensor<4x8xbf16>, %wu: tensor<8x16x64xbf16>, %wd: tensor<8x32x16xbf16>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{'moe.ffn' op expected 'bias' to be a 1-D f32 tensor, got 'tensor<8xbf16>'}}
  %y = moe.ffn %x, %l, %wu, %wd bias(%b : tensor<8xbf16>) k = 2 scoring = sigmoid activation = silu layout = concat : tensor<4x16xbf16>, tensor<4x8xbf16>, tensor<8x16x64xbf16>, tensor<8x32x16xbf16> -> tensor<4x16xbf16>
  return
}

// -----

func.func @ffn_expert_bias_wrong_up_shape(%x: tensor<4x16xbf16>, %l: tensor<4x8xf32>, %wu: tensor<8x64x16xbf16>, %wd: tensor<8x16x32xbf16>, %ub: tensor<8x32xbf16>, %db: tensor<8x16xbf16>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_up_bias' to be E x 2I = 8x64, got 'tensor<8x32xbf16>'}}
  %y = moe.ffn %x, %l, %wu, %wd expert_bias(%ub, %db : tensor<8x32xbf16>, tensor<8x16xbf16>) k = 2 scoring = softmax activation = silu layout = interleaved {transpose_weights = true} : tensor<4x16xbf16>, tensor<4x8xf32>, tensor<8x64x16xbf16>, tensor<8x16x32xbf16> -> tensor<4x16xbf16>
  return
}

// -----

func.func @ffn_expert_bias_wrong_down_shape(%x: tensor<4x16xbf16>, %l: tensor<4x8xbf16>, %wu: tensor<8x16x64xbf16>, %wd: tensor<8x32x16xbf16>, %ub: tensor<8x64xbf16>, %db: tensor<8x32xbf16>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_down_bias' to be E x H = 8x16, got 'tensor<8x32xbf16>'}}
  %y = moe.ffn %x, %l, %wu, %wd expert_bias(%ub, %db : tensor<8x64xbf16>, tensor<8x32xbf16>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xbf16>, tensor<4x8xbf16>, tensor<8x16x64xbf16>, tensor<8x32x16xbf16> -> tensor<4x16xbf16>
  return
}

// -----

func.func @ffn_expert_bias_element_type(%x: tensor<4x16xbf16>, %l: tensor<4x8xbf16>, %wu: tensor<8x16x64xbf16>, %wd: tensor<8x32x16xbf16>, %ub: tensor<8x64xf32>, %db: tensor<8x16xbf16>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_up_bias' element type 'bf16' (as 'x'), got 'f32'}}
  %y = moe.ffn %x, %l, %wu, %wd expert_bias(%ub, %db : tensor<8x64xf32>, tensor<8x16xbf16>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x16xbf16>, tensor<4x8xbf16>, tensor<8x16x64xbf16>, tensor<8x32x16xbf16> -> tensor<4x16xbf16>
  return
}

// -----

// Generic form: expert_bias = true needs the two expert-bias operands.
func.func @ffn_expert_bias_missing_operands(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 6 or 7 operands (x, logits, w_up, w_down, [bias], w_up_bias, w_down_bias) with expert_bias = true, got 5}}
  %y = "moe.ffn"(%x, %l, %wu, %wd, %b) <{k = 2 : i64, scoring = #moe.scoring<softmax>, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, expert_bias = true}> : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Generic form: without expert_bias at most the routing bias follows w_down.
func.func @ffn_too_many_operands(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>, %ub: tensor<8x64xf32>, %db: tensor<8x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected 4 or 5 operands (x, logits, w_up, w_down, [bias]) with expert_bias = false, got 6}}
  %y = "moe.ffn"(%x, %l, %wu, %wd, %ub, %db) <{k = 2 : i64, scoring = #moe.scoring<softmax>, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>}> : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32>, tensor<8x64xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_alpha_inf(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected a finite alpha, got -INF}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {alpha = 0xFF800000 : f32} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_up_bias_inf(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected a finite up_bias, got INF}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {up_bias = 0x7F800000 : f32} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_limit_negative(%x: tensor<4x16xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected limit to be finite and > 0, got -1.000000e+00}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = interleaved {limit = -1.0 : f32} : tensor<4x16xf32>, tensor<4x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @ffn_e_too_large(%x: tensor<?x16xf32>, %l: tensor<?x2147483648xf32>, %wu: tensor<2147483648x16x64xf32>, %wd: tensor<2147483648x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected E = 2147483648 to fit i32 (< 2^31)}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<?x16xf32>, tensor<?x2147483648xf32>, tensor<2147483648x16x64xf32>, tensor<2147483648x32x16xf32> -> tensor<?x16xf32>
  return
}

// -----

// The decomposed moe.cumsum would be E * T = 2^32 long.
func.func @ffn_e_times_t_overflows_i32(%x: tensor<268435456x16xf32>, %l: tensor<268435456x16xf32>, %wu: tensor<16x16x64xf32>, %wd: tensor<16x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected E * T = 16 * 268435456 to fit i32 (< 2^31)}}
  %y = moe.ffn %x, %l, %wu, %wd k = 1 scoring = softmax activation = silu layout = concat : tensor<268435456x16xf32>, tensor<268435456x16xf32>, tensor<16x16x64xf32>, tensor<16x32x16xf32> -> tensor<268435456x16xf32>
  return
}

// -----

func.func @ffn_result_wrong_element_type(%x: tensor<?x16xf32>, %l: tensor<?x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected result #0 to be 'tensor<?x16xf32>', got 'tensor<?x16xf16>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<?x16xf32>, tensor<?x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<?x16xf16>
  return
}

// -----

func.func @ffn_result_static_t_for_dynamic_t(%x: tensor<?x16xf32>, %l: tensor<?x8xf32>, %wu: tensor<8x16x64xf32>, %wd: tensor<8x32x16xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected result #0 to be 'tensor<?x16xf32>', got 'tensor<4x16xf32>'}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<?x16xf32>, tensor<?x8xf32>, tensor<8x16x64xf32>, tensor<8x32x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @glu_grad_odd_columns(%d: tensor<4x3xf32>, %h: tensor<4x7xf32>) {
  // expected-error @+1 {{'moe.glu_grad' op expected an even number of input columns (2N), got 7}}
  %r = moe.glu_grad %d, %h silu interleaved : tensor<4x3xf32>, tensor<4x7xf32> -> tensor<4x7xf32>
  return
}

// -----

func.func @glu_grad_dynamic_columns(%d: tensor<4x4xf32>, %h: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.glu_grad' op expected 2N (dimension 1 of 'input') to be static}}
  %r = moe.glu_grad %d, %h silu concat : tensor<4x4xf32>, tensor<4x?xf32> -> tensor<4x?xf32>
  return
}

// -----

func.func @glu_grad_rows(%d: tensor<3x4xf32>, %h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu_grad' op expected dimension 0 of 'grad' (M) to match dimension 0 of 'input', got 3 vs 4}}
  %r = moe.glu_grad %d, %h silu concat : tensor<3x4xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @glu_grad_columns(%d: tensor<4x8xf32>, %h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu_grad' op expected 'grad' to have 4 columns (N, half of the input's), got 8}}
  %r = moe.glu_grad %d, %h silu concat : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @glu_grad_element_type(%d: tensor<4x4xbf16>, %h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu_grad' op expected 'grad' element type 'f32' (as 'input'), got 'bf16'}}
  %r = moe.glu_grad %d, %h silu concat : tensor<4x4xbf16>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @glu_grad_limit(%d: tensor<4x4xf32>, %h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu_grad' op expected limit to be finite and > 0, got -1.000000e+00}}
  %r = moe.glu_grad %d, %h silu concat {limit = -1.0 : f32} : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @glu_grad_result(%d: tensor<4x4xf32>, %h: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.glu_grad' op expected result #0 to be 'tensor<4x8xf32>', got 'tensor<4x4xf32>'}}
  %r = moe.glu_grad %d, %h silu concat : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @wgrad_k_dynamic(%a: tensor<4x?xf32>, %b: tensor<4x3xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected K (dimension 1 of 'lhs') to be static}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) : tensor<4x?xf32>, tensor<4x3xf32> -> tensor<2x2x3xf32>
  return
}

// -----

func.func @wgrad_n_zero(%a: tensor<4x2xf32>, %b: tensor<4x0xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected N (dimension 1 of 'rhs') to be non-zero}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) : tensor<4x2xf32>, tensor<4x0xf32> -> tensor<2x2x0xf32>
  return
}

// -----

func.func @wgrad_element_types(%a: tensor<4x2xf32>, %b: tensor<4x3xbf16>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected 'rhs' element type 'f32' (as 'lhs'), got 'bf16'}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) : tensor<4x2xf32>, tensor<4x3xbf16> -> tensor<2x2x3xf32>
  return
}

// -----

func.func @wgrad_rows(%a: tensor<4x2xf32>, %b: tensor<5x3xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected dimension 0 of 'rhs' (M) to match dimension 0 of 'lhs', got 5 vs 4}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) : tensor<4x2xf32>, tensor<5x3xf32> -> tensor<2x2x3xf32>
  return
}

// -----

// A gathered operand's row count is its indices' length.
func.func @wgrad_gathered_rows(%a: tensor<4x2xf32>, %b: tensor<9x3xf32>, %i: tensor<5xi32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected dimension 0 of 'rhs_gather' (M) to match dimension 0 of 'lhs', got 5 vs 4}}
  %r = moe.grouped_matmul_wgrad %a, %b[%i : tensor<5xi32>] offsets(%o : tensor<3xi32>) : tensor<4x2xf32>, tensor<9x3xf32> -> tensor<2x2x3xf32>
  return
}

// -----

func.func @wgrad_both_gathered_rows(%a: tensor<9x2xf32>, %b: tensor<9x3xf32>, %i: tensor<5xi32>, %j: tensor<6xi32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected dimension 0 of 'rhs_gather' (M) to match dimension 0 of 'lhs_gather', got 6 vs 5}}
  %r = moe.grouped_matmul_wgrad %a[%i : tensor<5xi32>], %b[%j : tensor<6xi32>] offsets(%o : tensor<3xi32>) : tensor<9x2xf32>, tensor<9x3xf32> -> tensor<2x2x3xf32>
  return
}

// -----

func.func @wgrad_offsets_dynamic(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>, %o: tensor<?xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected 'offsets' to have E + 1 >= 2 static elements, got ?}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<?xi32>) : tensor<4x2xf32>, tensor<4x3xf32> -> tensor<2x2x3xf32>
  return
}

// -----

func.func @wgrad_offsets_one(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>, %o: tensor<1xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected 'offsets' to have E + 1 >= 2 static elements, got 1}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<1xi32>) : tensor<4x2xf32>, tensor<4x3xf32> -> tensor<0x2x3xf32>
  return
}

// -----

func.func @wgrad_result_type(%a: tensor<4x2xbf16>, %b: tensor<4x3xbf16>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected result element type 'bf16' or f32, got 'f16'}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) : tensor<4x2xbf16>, tensor<4x3xbf16> -> tensor<2x2x3xf16>
  return
}

// -----

func.func @wgrad_result_shape(%a: tensor<?x2xf32>, %b: tensor<?x3xf32>, %o: tensor<3xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected the result to be 2x2x3 (E x K x N), got 'tensor<2x3x2xf32>'}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) : tensor<?x2xf32>, tensor<?x3xf32> -> tensor<2x3x2xf32>
  return
}

// -----

func.func @wgrad_acc_shape(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>, %o: tensor<3xi32>, %c: tensor<2x3x2xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected 'acc' to be 2x2x3xf32 (E x K x N), got 'tensor<2x3x2xf32>'}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) accumulate(%c : tensor<2x3x2xf32>) : tensor<4x2xf32>, tensor<4x3xf32> -> tensor<2x2x3xf32>
  return
}

// -----

func.func @wgrad_acc_result(%a: tensor<4x2xbf16>, %b: tensor<4x3xbf16>, %o: tensor<3xi32>, %c: tensor<2x2x3xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op expected an f32 result with 'acc', got 'bf16'}}
  %r = moe.grouped_matmul_wgrad %a, %b offsets(%o : tensor<3xi32>) accumulate(%c : tensor<2x2x3xf32>) : tensor<4x2xbf16>, tensor<4x3xbf16> -> tensor<2x2x3xbf16>
  return
}

// -----

func.func @combine_grad_h_dynamic(%g: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.combine_grad' op expected H (dimension 1 of 'grad') to be static}}
  %r = moe.combine_grad %g : tensor<4x?xf32> -> tensor<4x2x3xf32>
  return
}

// -----

func.func @combine_grad_k_dynamic(%g: tensor<4x3xf32>) {
  // expected-error @+1 {{'moe.combine_grad' op expected k (dimension 1 of 'result') to be static}}
  %r = moe.combine_grad %g : tensor<4x3xf32> -> tensor<4x?x3xf32>
  return
}

// -----

func.func @combine_grad_k_zero(%g: tensor<4x3xf32>) {
  // expected-error @+1 {{'moe.combine_grad' op expected k (dimension 1 of 'result') to be non-zero}}
  %r = moe.combine_grad %g : tensor<4x3xf32> -> tensor<4x0x3xf32>
  return
}

// -----

func.func @combine_grad_element_type(%g: tensor<4x3xbf16>) {
  // expected-error @+1 {{'moe.combine_grad' op expected result element type 'bf16' (as 'grad'), got 'f32'}}
  %r = moe.combine_grad %g : tensor<4x3xbf16> -> tensor<4x2x3xf32>
  return
}

// -----

func.func @combine_grad_rows(%g: tensor<4x3xf32>) {
  // expected-error @+1 {{'moe.combine_grad' op expected dimension 0 of 'result' (T) to match dimension 0 of 'grad', got 5 vs 4}}
  %r = moe.combine_grad %g : tensor<4x3xf32> -> tensor<5x2x3xf32>
  return
}

// -----

func.func @combine_grad_h(%g: tensor<4x3xf32>) {
  // expected-error @+1 {{'moe.combine_grad' op expected dimension 2 of 'result' (H) to be 3, got 4}}
  %r = moe.combine_grad %g : tensor<4x3xf32> -> tensor<4x2x4xf32>
  return
}

// -----

func.func @combine_grad_weight_rows(%g: tensor<4x3xf32>, %w: tensor<5x2xf32>) {
  // expected-error @+1 {{'moe.combine_grad' op expected dimension 0 of 'weights' (T) to match dimension 0 of 'grad', got 5 vs 4}}
  %r = moe.combine_grad %g weights(%w : tensor<5x2xf32>) : tensor<4x3xf32> -> tensor<4x2x3xf32>
  return
}

// -----

func.func @combine_grad_weight_k(%g: tensor<4x3xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+1 {{'moe.combine_grad' op expected dimension 1 of 'weights' (k) to be 2, got 3}}
  %r = moe.combine_grad %g weights(%w : tensor<4x3xf32>) : tensor<4x3xf32> -> tensor<4x2x3xf32>
  return
}

// -----

func.func @route_grad_e_dynamic(%g: tensor<4x2xf32>, %l: tensor<4x?xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected E (dimension 1 of 'logits') to be static}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<4x2xf32>, tensor<4x?xf32>, tensor<4x2xi32> -> tensor<4x?xf32>
  return
}

// -----

func.func @route_grad_k_dynamic(%g: tensor<4x?xf32>, %l: tensor<4x8xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected k (dimension 1 of 'grad') to be static}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<4x?xf32>, tensor<4x8xf32>, tensor<4x2xi32> -> tensor<4x8xf32>
  return
}

// -----

func.func @route_grad_grad_rows(%g: tensor<3x2xf32>, %l: tensor<4x8xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected dimension 0 of 'grad' (T) to match dimension 0 of 'logits', got 3 vs 4}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<3x2xf32>, tensor<4x8xf32>, tensor<4x2xi32> -> tensor<4x8xf32>
  return
}

// -----

func.func @route_grad_indices_rows(%g: tensor<4x2xf32>, %l: tensor<4x8xf32>, %i: tensor<5x2xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected dimension 0 of 'indices' (T) to match dimension 0 of 'logits', got 5 vs 4}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<4x2xf32>, tensor<4x8xf32>, tensor<5x2xi32> -> tensor<4x8xf32>
  return
}

// -----

func.func @route_grad_k(%g: tensor<4x2xf32>, %l: tensor<4x8xf32>, %i: tensor<4x3xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected dimension 1 of 'indices' (k) to match dimension 1 of 'grad', got 3 vs 2}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<4x2xf32>, tensor<4x8xf32>, tensor<4x3xi32> -> tensor<4x8xf32>
  return
}

// -----

func.func @route_grad_scaling(%g: tensor<4x2xf32>, %l: tensor<4x8xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected a finite scaling, got INF}}
  %r = moe.route_grad %g, %l, %i scoring = sigmoid {scaling = 0x7F800000 : f32} : tensor<4x2xf32>, tensor<4x8xf32>, tensor<4x2xi32> -> tensor<4x8xf32>
  return
}

// -----

func.func @route_grad_result_type(%g: tensor<4x2xf32>, %l: tensor<4x8xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected result element type 'bf16' or f32, got 'f16'}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<4x2xf32>, tensor<4x8xbf16>, tensor<4x2xi32> -> tensor<4x8xf16>
  return
}

// -----

func.func @route_grad_result_shape(%g: tensor<?x2xf32>, %l: tensor<?x8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.route_grad' op expected the result to be ?x8 (T x E), got 'tensor<?x7xf32>'}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<?x2xf32>, tensor<?x8xf32>, tensor<?x2xi32> -> tensor<?x7xf32>
  return
}

// -----

func.func @row_dot_n_dynamic(%a: tensor<4x?xf32>, %b: tensor<4x?xf32>) {
  // expected-error @+1 {{'moe.row_dot' op expected N (dimension 1 of 'lhs') to be static}}
  %r = moe.row_dot %a, %b : tensor<4x?xf32>, tensor<4x?xf32> -> tensor<4xf32>
  return
}

// -----

func.func @row_dot_rhs_type(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>) {
  // expected-error @+1 {{'moe.row_dot' op expected 'rhs' element type 'f32' (as 'lhs'), got 'bf16'}}
  %r = moe.row_dot %a, %b : tensor<4x8xf32>, tensor<4x8xbf16> -> tensor<4xf32>
  return
}

// -----

func.func @row_dot_rows(%a: tensor<4x8xf32>, %b: tensor<5x8xf32>) {
  // expected-error @+1 {{'moe.row_dot' op expected dimension 0 of 'rhs' (M) to match dimension 0 of 'lhs', got 5 vs 4}}
  %r = moe.row_dot %a, %b : tensor<4x8xf32>, tensor<5x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @row_dot_cols(%a: tensor<4x8xf32>, %b: tensor<4x6xf32>) {
  // expected-error @+1 {{'moe.row_dot' op expected dimension 1 of 'rhs' (N) to be 8, got 6}}
  %r = moe.row_dot %a, %b : tensor<4x8xf32>, tensor<4x6xf32> -> tensor<4xf32>
  return
}

// -----

func.func @row_dot_result_type(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>) {
  // expected-error @+1 {{'moe.row_dot' op expected result element type 'bf16' or f32, got 'f16'}}
  %r = moe.row_dot %a, %b : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4xf16>
  return
}

// -----

func.func @row_dot_result_rows(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.row_dot' op expected dimension 0 of 'result' (M) to match dimension 0 of 'lhs', got 3 vs 4}}
  %r = moe.row_dot %a, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<3xf32>
  return
}

// -----

func.func @row_dot_acc_rows(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<5xf32>) {
  // expected-error @+1 {{'moe.row_dot' op expected dimension 0 of 'acc' (M) to match dimension 0 of 'lhs', got 5 vs 4}}
  %r = moe.row_dot %a, %b accumulate(%c : tensor<5xf32>) : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @row_dot_acc_result_type(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'moe.row_dot' op expected an f32 result with 'acc', got 'bf16'}}
  %r = moe.row_dot %a, %b accumulate(%c : tensor<4xf32>) : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4xbf16>
  return
}

// -----

func.func @row_dot_acc_not_f32(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<4xbf16>) {
  // expected-error @+1 {{'moe.row_dot' op operand #2 must be 1D tensor of 32-bit float values}}
  %r = moe.row_dot %a, %b accumulate(%c : tensor<4xbf16>) : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @ffn_grad_fp8_weights(%dy: tensor<4x256xbf16>, %x: tensor<4x256xbf16>, %l: tensor<4x8xf32>, %wu: tensor<8x256x256xf8E4M3FN>, %wd: tensor<8x256x128xf8E4M3FN>, %su: tensor<8x2x2xf32>, %sd: tensor<8x2x1xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op needs bf16/f16/f32 weights (weight_format plain; training on quantized weights is out of scope), got weight_format fp8_block}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd scales(%su, %sd : tensor<8x2x2xf32>, tensor<8x2x1xf32>) k = 2 scoring = softmax activation = silu layout = concat {transpose_weights = true, weight_format = #moe.weight_format<fp8_block>} : tensor<4x256xbf16>, tensor<4x256xbf16>, tensor<4x8xf32>, tensor<8x256x256xf8E4M3FN>, tensor<8x256x128xf8E4M3FN> -> tensor<4x256xbf16>, tensor<4x8xf32>, tensor<8x256x256xf32>, tensor<8x256x128xf32>
  return
}

// -----

func.func @ffn_grad_operand_count(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 5, 6, 8 or 9 operands (dy, x, logits, w_up, w_down, [bias], [h, weights, indices]) with expert_bias = false, got 7}}
  %r:4 = "moe.ffn_grad"(%dy, %x, %l, %wu, %wd, %b, %b) <{k = 2 : i64, scoring = #moe.scoring<softmax>, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>}> : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>)
  return
}

// -----

func.func @ffn_grad_routing_rule(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected k in [1, topk_group * E / n_group = 8], got 9}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 9 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dy_rows(%dy: tensor<3x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected dimension 0 of 'dy' (T) to match dimension 0 of 'x', got 3 vs 4}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<3x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dy_type(%dy: tensor<4x64xbf16>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dy' to be T x H = 4x64 of 'f32' (as 'x'), got 'tensor<4x64xbf16>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xbf16>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dy_cols(%dy: tensor<4x32xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dy' to be T x H = 4x64 of 'f32' (as 'x'), got 'tensor<4x32xf32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x32xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dx_type(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dx' to be 'tensor<4x64xf32>' (as 'x'), got 'tensor<?x64xf32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<?x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dlogits_type(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dlogits' to be 'tensor<4x8xf32>' (as 'logits'), got 'tensor<4x8xbf16>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xbf16>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dw_up_type(%dy: tensor<4x64xbf16>, %x: tensor<4x64xbf16>, %l: tensor<4x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dw_up' to be 'tensor<8x64x256xf32>' or 'tensor<8x64x256xbf16>' (the weights' shape, f32 or the weights' type), got 'tensor<8x64x256xf16>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xbf16>, tensor<4x64xbf16>, tensor<4x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<4x64xbf16>, tensor<4x8xbf16>, tensor<8x64x256xf16>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dw_types_differ(%dy: tensor<4x64xbf16>, %x: tensor<4x64xbf16>, %l: tensor<4x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dw_up' and 'dw_down' of one element type, got 'bf16' and 'f32'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xbf16>, tensor<4x64xbf16>, tensor<4x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<4x64xbf16>, tensor<4x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dw_down_shape(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dw_down' to be 'tensor<8x128x64xf32>' (the weights' shape, f32 or the weights' type), got 'tensor<8x64x128xf32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x64x128xf32>
  return
}

// -----

func.func @ffn_grad_bias_grads_without_expert_bias(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 4 results (dx, dlogits, dw_up, dw_down) with expert_bias = false, got 6}}
  %r:6 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>, tensor<8x256xf32>, tensor<8x64xf32>
  return
}

// -----

func.func @ffn_grad_bias_grads_missing(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %bu: tensor<8x256xf32>, %bd: tensor<8x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 6 results (dx, dlogits, dw_up, dw_down, dw_up_bias, dw_down_bias) with expert_bias = true, got 4}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd expert_bias(%bu, %bd : tensor<8x256xf32>, tensor<8x64xf32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_dw_up_bias_type(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %bu: tensor<8x256xf32>, %bd: tensor<8x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dw_up_bias' to be 'tensor<8x256xf32>' (E x 2I, f32), got 'tensor<8x128xf32>'}}
  %r:6 = moe.ffn_grad %dy, %x, %l, %wu, %wd expert_bias(%bu, %bd : tensor<8x256xf32>, tensor<8x64xf32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>, tensor<8x128xf32>, tensor<8x64xf32>
  return
}

// -----

func.func @ffn_grad_dw_down_bias_type(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %bu: tensor<8x256xf32>, %bd: tensor<8x64xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 'dw_down_bias' to be 'tensor<8x64xf32>' (E x H, f32), got 'tensor<8x64xf16>'}}
  %r:6 = moe.ffn_grad %dy, %x, %l, %wu, %wd expert_bias(%bu, %bd : tensor<8x256xf32>, tensor<8x64xf32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>, tensor<8x256xf32>, tensor<8x64xf16>
  return
}

// -----

func.func @ffn_train_routing_rule(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected k in [1, topk_group * E / n_group = 8], got 9}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 9 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<36x256xf32>, tensor<4x9xf32>, tensor<4x9xi32>
  return
}

// -----

func.func @ffn_train_operand_count(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected 4 or 5 operands (x, logits, w_up, w_down, [bias]) with expert_bias = false, got 6}}
  %y, %h, %w, %i = "moe.ffn_train"(%x, %l, %wu, %wd, %b, %b) <{k = 2 : i64, scoring = #moe.scoring<softmax>, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>}> : (tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x64xf32>, tensor<8x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @ffn_train_y_type(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected result #0 to be 'tensor<4x64xf32>', got 'tensor<?x64xf32>'}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<?x64xf32>, tensor<8x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @ffn_train_h_rows(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected result #1 to be 'tensor<8x256xf32>', got 'tensor<4x256xf32>'}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @ffn_train_h_width(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected result #1 to be 'tensor<8x256xf32>', got 'tensor<8x128xf32>'}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<8x128xf32>, tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @ffn_train_h_type(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected result #1 to be 'tensor<8x256xf32>', got 'tensor<8x256xbf16>'}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<8x256xbf16>, tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @ffn_train_weights_shape(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected result #2 to be 'tensor<4x2xf32>', got 'tensor<4x3xf32>'}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<8x256xf32>, tensor<4x3xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @ffn_train_indices_shape(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op expected result #3 to be 'tensor<4x2xi32>', got 'tensor<?x2xi32>'}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<8x256xf32>, tensor<4x2xf32>, tensor<?x2xi32>
  return
}

// -----

func.func @ffn_train_weights_not_f32(%x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op result #2 must be 2D tensor of 32-bit float values, but got 'tensor<4x2xbf16>'}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<8x256xf32>, tensor<4x2xbf16>, tensor<4x2xi32>
  return
}

// -----

func.func @ffn_train_fp8_weights(%x: tensor<4x256xbf16>, %l: tensor<4x8xf32>, %wu: tensor<8x256x256xf8E4M3FN>, %wd: tensor<8x256x128xf8E4M3FN>, %su: tensor<8x2x2xf32>, %sd: tensor<8x2x1xf32>) {
  // expected-error @+1 {{'moe.ffn_train' op needs bf16/f16/f32 weights (weight_format plain; training on quantized weights is out of scope), got weight_format fp8_block}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd scales(%su, %sd : tensor<8x2x2xf32>, tensor<8x2x1xf32>) k = 2 scoring = softmax activation = silu layout = concat {transpose_weights = true, weight_format = #moe.weight_format<fp8_block>} : tensor<4x256xbf16>, tensor<4x8xf32>, tensor<8x256x256xf8E4M3FN>, tensor<8x256x128xf8E4M3FN> -> tensor<4x256xbf16>, tensor<8x256xbf16>, tensor<4x2xf32>, tensor<4x2xi32>
  return
}

// -----

func.func @ffn_grad_saved_h_type(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<8x256xbf16>, %w: tensor<4x2xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'h' to be (T*k) x 2I = 8x256 of 'f32' (as moe.ffn_train returns it), got 'tensor<8x256xbf16>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<8x256xbf16>, tensor<4x2xf32>, tensor<4x2xi32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_h_width(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<8x128xf32>, %w: tensor<4x2xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'h' to be (T*k) x 2I = 8x256 of 'f32' (as moe.ffn_train returns it), got 'tensor<8x128xf32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<8x128xf32>, tensor<4x2xf32>, tensor<4x2xi32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_h_rows(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<4x256xf32>, %w: tensor<4x2xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'h' to be (T*k) x 2I = 8x256 of 'f32' (as moe.ffn_train returns it), got 'tensor<4x256xf32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<4x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_h_rank(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<4x2x256xf32>, %w: tensor<4x2xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'h' to be (T*k) x 2I = 8x256 of 'f32' (as moe.ffn_train returns it), got 'tensor<4x2x256xf32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<4x2x256xf32>, tensor<4x2xf32>, tensor<4x2xi32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_weights_type(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<8x256xf32>, %w: tensor<4x2xbf16>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'weights' to be T x k = 4x2 of 'f32' (as moe.ffn_train returns it), got 'tensor<4x2xbf16>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<8x256xf32>, tensor<4x2xbf16>, tensor<4x2xi32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_weights_k(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<8x256xf32>, %w: tensor<4x3xf32>, %i: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'weights' to be T x k = 4x2 of 'f32' (as moe.ffn_train returns it), got 'tensor<4x3xf32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<8x256xf32>, tensor<4x3xf32>, tensor<4x2xi32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_indices_type(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<8x256xf32>, %w: tensor<4x2xf32>, %i: tensor<4x2xi64>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'indices' to be T x k = 4x2 of 'i32' (as moe.ffn_train returns it), got 'tensor<4x2xi64>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<8x256xf32>, tensor<4x2xf32>, tensor<4x2xi64>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_indices_rows(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %h: tensor<8x256xf32>, %w: tensor<4x2xf32>, %i: tensor<3x2xi32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected saved 'indices' to be T x k = 4x2 of 'i32' (as moe.ffn_train returns it), got 'tensor<3x2xi32>'}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<8x256xf32>, tensor<4x2xf32>, tensor<3x2xi32>) k = 2 scoring = softmax activation = silu layout = concat : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32> -> tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>
  return
}

// -----

func.func @ffn_grad_saved_count(%dy: tensor<4x64xf32>, %x: tensor<4x64xf32>, %l: tensor<4x8xf32>, %wu: tensor<8x64x256xf32>, %wd: tensor<8x128x64xf32>, %bu: tensor<8x256xf32>, %bd: tensor<8x64xf32>, %h: tensor<8x256xf32>, %w: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.ffn_grad' op expected 7, 8, 10 or 11 operands (dy, x, logits, w_up, w_down, [bias], w_up_bias, w_down_bias, [h, weights, indices]) with expert_bias = true, got 9}}
  %r:6 = "moe.ffn_grad"(%dy, %x, %l, %wu, %wd, %bu, %bd, %h, %w) <{k = 2 : i64, scoring = #moe.scoring<softmax>, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>, expert_bias = true}> : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>, tensor<8x256xf32>, tensor<8x64xf32>, tensor<8x256xf32>, tensor<4x2xf32>) -> (tensor<4x64xf32>, tensor<4x8xf32>, tensor<8x64x256xf32>, tensor<8x128x64xf32>, tensor<8x256xf32>, tensor<8x64xf32>)
  return
}
