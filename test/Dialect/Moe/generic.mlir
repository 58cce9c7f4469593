// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC --implicit-check-not=operandSegmentSizes

// Every public op written only in the generic form, with exactly the operand
// order, attribute names and attribute types the contract pins: integer attributes
// i64, float attributes f32, flags BoolAttr, enums `#moe.<enum><keyword>`,
// optional operands last (no operand segment sizes). The default run checks
// the custom form that comes out; the GENERIC run checks that the printer
// keeps the pinned spelling.

// CHECK-LABEL: func.func @topk
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>)
func.func @topk(%x: tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>) {
  // CHECK: %[[V:[a-z0-9_]+]], %[[I:[a-z0-9_]+]] = moe.topk %[[X]] k = 2 : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  // CHECK: return %[[V]], %[[I]]
  // GENERIC-LABEL: sym_name = "topk"
  // GENERIC: "moe.topk"(%{{.*}}) <{k = 2 : i64}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  %v, %i = "moe.topk"(%x) <{k = 2 : i64}> : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return %v, %i : tensor<4x2xf32>, tensor<4x2xi32>
}

// Required attributes only: softmax.
// CHECK-LABEL: func.func @route_softmax
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x8xf16>)
func.func @route_softmax(%l: tensor<?x8xf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  // CHECK: moe.route %[[L]] k = 2 scoring = softmax : tensor<?x8xf16> -> tensor<?x2xf32>, tensor<?x2xi32>
  // GENERIC-LABEL: sym_name = "route_softmax"
  // Defaults are printed in the generic form, with their pinned names and types.
  // GENERIC: "moe.route"(%{{.*}}) <{group_score = #moe.group_score<max>, k = 2 : i64, n_group = 1 : i64, normalize = false, scaling = 1.000000e+00 : f32, scoring = #moe.scoring<softmax>, topk_group = 1 : i64}> : (tensor<?x8xf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %w, %i = "moe.route"(%l) <{k = 2 : i64, scoring = #moe.scoring<softmax>}>
      : (tensor<?x8xf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return %w, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

// Every route attribute, the optional bias as the last operand.
// CHECK-LABEL: func.func @route_sigmoid_all_attrs
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<?x16xf32>, %[[B:[a-z0-9_]+]]: tensor<16xf32>)
func.func @route_sigmoid_all_attrs(%l: tensor<?x16xf32>, %b: tensor<16xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>) {
  // CHECK: moe.route %[[L]] bias(%[[B]] : tensor<16xf32>) k = 4 scoring = sigmoid
  // CHECK-SAME: {group_score = #moe.group_score<top2_sum>, n_group = 4 : i64, normalize = true, scaling = 2.500000e+00 : f32, topk_group = 2 : i64}
  // CHECK-SAME: : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  // GENERIC-LABEL: sym_name = "route_sigmoid_all_attrs"
  // GENERIC: "moe.route"(%{{.*}}, %{{.*}}) <{group_score = #moe.group_score<top2_sum>, k = 4 : i64, n_group = 4 : i64, normalize = true, scaling = 2.500000e+00 : f32, scoring = #moe.scoring<sigmoid>, topk_group = 2 : i64}> : (tensor<?x16xf32>, tensor<16xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>)
  %w, %i = "moe.route"(%l, %b) <{k = 4 : i64, scoring = #moe.scoring<sigmoid>, normalize = true,
                                 n_group = 4 : i64, topk_group = 2 : i64,
                                 group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32}>
      : (tensor<?x16xf32>, tensor<16xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>)
  return %w, %i : tensor<?x4xf32>, tensor<?x4xi32>
}

// group_score = max spelled out; normalize = false spelled out.
// CHECK-LABEL: func.func @route_group_max
// CHECK-SAME: (%[[L:[a-z0-9_]+]]: tensor<4x8xbf16>)
func.func @route_group_max(%l: tensor<4x8xbf16>) -> (tensor<4x2xbf16>, tensor<4x2xi32>) {
  // CHECK: moe.route %[[L]] k = 2 scoring = softmax {n_group = 2 : i64} : tensor<4x8xbf16> -> tensor<4x2xbf16>, tensor<4x2xi32>
  %w, %i = "moe.route"(%l) <{k = 2 : i64, scoring = #moe.scoring<softmax>, normalize = false,
                             n_group = 2 : i64, topk_group = 1 : i64,
                             group_score = #moe.group_score<max>, scaling = 1.0 : f32}>
      : (tensor<4x8xbf16>) -> (tensor<4x2xbf16>, tensor<4x2xi32>)
  return %w, %i : tensor<4x2xbf16>, tensor<4x2xi32>
}

// CHECK-LABEL: func.func @cumsum
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<4x2xi32>)
func.func @cumsum(%ids: tensor<4x2xi32>) -> tensor<24xi32> {
  // CHECK: moe.cumsum %[[IDS]] num_experts = 6 : tensor<4x2xi32> -> tensor<24xi32>
  // GENERIC-LABEL: sym_name = "cumsum"
  // GENERIC: "moe.cumsum"(%{{.*}}) <{num_experts = 6 : i64}> : (tensor<4x2xi32>) -> tensor<24xi32>
  %cs = "moe.cumsum"(%ids) <{num_experts = 6 : i64}> : (tensor<4x2xi32>) -> tensor<24xi32>
  return %cs : tensor<24xi32>
}

// CHECK-LABEL: func.func @get_indices
// CHECK-SAME: (%[[CS:[a-z0-9_]+]]: tensor<?xi32>, %[[IDS:[a-z0-9_]+]]: tensor<?x2xi32>)
func.func @get_indices(%cs: tensor<?xi32>, %ids: tensor<?x2xi32>) -> (tensor<?xi32>, tensor<?xi32>) {
  // CHECK: %[[REV:[a-z0-9_]+]], %[[TOK:[a-z0-9_]+]] = moe.get_indices %[[CS]], %[[IDS]] : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  // CHECK: return %[[REV]], %[[TOK]]
  // GENERIC-LABEL: sym_name = "get_indices"
  // GENERIC: "moe.get_indices"(%{{.*}}, %{{.*}}) : (tensor<?xi32>, tensor<?x2xi32>) -> (tensor<?xi32>, tensor<?xi32>)
  %rev, %tok = "moe.get_indices"(%cs, %ids) : (tensor<?xi32>, tensor<?x2xi32>) -> (tensor<?xi32>, tensor<?xi32>)
  return %rev, %tok : tensor<?xi32>, tensor<?xi32>
}

// CHECK-LABEL: func.func @get_indptr
// CHECK-SAME: (%[[CS:[a-z0-9_]+]]: tensor<?xi32>)
func.func @get_indptr(%cs: tensor<?xi32>) -> (tensor<9xi32>, tensor<9xi64>, tensor<8xi64>) {
  // CHECK: moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
  // CHECK: moe.get_indptr %[[CS]] num_experts = 8 : tensor<?xi32> -> tensor<9xi64>
  // CHECK: moe.get_indptr %[[CS]] num_experts = 8 {inclusive = true} : tensor<?xi32> -> tensor<8xi64>
  // GENERIC-LABEL: sym_name = "get_indptr"
  // GENERIC: "moe.get_indptr"(%{{.*}}) <{inclusive = false, num_experts = 8 : i64}> : (tensor<?xi32>) -> tensor<9xi32>
  // GENERIC: "moe.get_indptr"(%{{.*}}) <{inclusive = false, num_experts = 8 : i64}> : (tensor<?xi32>) -> tensor<9xi64>
  // GENERIC: "moe.get_indptr"(%{{.*}}) <{inclusive = true, num_experts = 8 : i64}> : (tensor<?xi32>) -> tensor<8xi64>
  %a = "moe.get_indptr"(%cs) <{num_experts = 8 : i64}> : (tensor<?xi32>) -> tensor<9xi32>
  %b = "moe.get_indptr"(%cs) <{num_experts = 8 : i64, inclusive = false}> : (tensor<?xi32>) -> tensor<9xi64>
  %c = "moe.get_indptr"(%cs) <{num_experts = 8 : i64, inclusive = true}> : (tensor<?xi32>) -> tensor<8xi64>
  return %a, %b, %c : tensor<9xi32>, tensor<9xi64>, tensor<8xi64>
}

// CHECK-LABEL: func.func @gather_scatter
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[T:[a-z0-9_]+]]: tensor<?xi32>)
func.func @gather_scatter(%x: tensor<?x64xbf16>, %t: tensor<?xi32>) -> tensor<?x64xbf16> {
  // CHECK: %[[G:[a-z0-9_]+]] = moe.gather %[[X]][%[[T]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
  // CHECK: %[[S:[a-z0-9_]+]] = moe.scatter %[[G]][%[[T]]] : tensor<?x64xbf16>, tensor<?xi32> -> tensor<?x64xbf16>
  // CHECK: return %[[S]]
  // GENERIC-LABEL: sym_name = "gather_scatter"
  // GENERIC: "moe.gather"(%{{.*}}, %{{.*}}) : (tensor<?x64xbf16>, tensor<?xi32>) -> tensor<?x64xbf16>
  // GENERIC: "moe.scatter"(%{{.*}}, %{{.*}}) : (tensor<?x64xbf16>, tensor<?xi32>) -> tensor<?x64xbf16>
  %g = "moe.gather"(%x, %t) : (tensor<?x64xbf16>, tensor<?xi32>) -> tensor<?x64xbf16>
  %s = "moe.scatter"(%g, %t) : (tensor<?x64xbf16>, tensor<?xi32>) -> tensor<?x64xbf16>
  return %s : tensor<?x64xbf16>
}

// Optional bias as the fourth operand, transpose_rhs as a BoolAttr.
// CHECK-LABEL: func.func @grouped_matmul
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<?x64xf16>, %[[W:[a-z0-9_]+]]: tensor<8x64x32xf16>, %[[WT:[a-z0-9_]+]]: tensor<8x32x64xf16>, %[[O:[a-z0-9_]+]]: tensor<9xi32>, %[[B:[a-z0-9_]+]]: tensor<8x32xf16>)
func.func @grouped_matmul(%a: tensor<?x64xf16>, %w: tensor<8x64x32xf16>, %wt: tensor<8x32x64xf16>,
                          %off: tensor<9xi32>, %b: tensor<8x32xf16>) -> (tensor<?x32xf32>, tensor<?x32xf16>) {
  // CHECK: moe.grouped_matmul %[[A]], %[[W]] offsets(%[[O]] : tensor<9xi32>) : tensor<?x64xf16>, tensor<8x64x32xf16> -> tensor<?x32xf32>
  // CHECK: moe.grouped_matmul %[[A]], %[[WT]] offsets(%[[O]] : tensor<9xi32>) bias(%[[B]] : tensor<8x32xf16>) {transpose_rhs = true} : tensor<?x64xf16>, tensor<8x32x64xf16> -> tensor<?x32xf16>
  // GENERIC-LABEL: sym_name = "grouped_matmul"
  // GENERIC: "moe.grouped_matmul"(%{{.*}}, %{{.*}}, %{{.*}}) <{scale_fmt = #moe.scale_fmt<f32>, transpose_rhs = false, weight_format = #moe.weight_format<plain>}> : (tensor<?x64xf16>, tensor<8x64x32xf16>, tensor<9xi32>) -> tensor<?x32xf32>
  // GENERIC: "moe.grouped_matmul"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{scale_fmt = #moe.scale_fmt<f32>, transpose_rhs = true, weight_format = #moe.weight_format<plain>}> : (tensor<?x64xf16>, tensor<8x32x64xf16>, tensor<9xi32>, tensor<8x32xf16>) -> tensor<?x32xf16>
  %r = "moe.grouped_matmul"(%a, %w, %off) <{transpose_rhs = false}>
      : (tensor<?x64xf16>, tensor<8x64x32xf16>, tensor<9xi32>) -> tensor<?x32xf32>
  %s = "moe.grouped_matmul"(%a, %wt, %off, %b) <{transpose_rhs = true}>
      : (tensor<?x64xf16>, tensor<8x32x64xf16>, tensor<9xi32>, tensor<8x32xf16>) -> tensor<?x32xf16>
  return %r, %s : tensor<?x32xf32>, tensor<?x32xf16>
}

// Every activation and layout keyword; alpha, limit, up_bias as f32.
// CHECK-LABEL: func.func @glu
// CHECK-SAME: (%[[H:[a-z0-9_]+]]: tensor<?x256xf32>)
func.func @glu(%h: tensor<?x256xf32>) -> (tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>) {
  // CHECK: moe.glu %[[H]] silu concat : tensor<?x256xf32> -> tensor<?x128xf32>
  // CHECK: moe.glu %[[H]] gelu interleaved {limit = 7.000000e+00 : f32} : tensor<?x256xf32> -> tensor<?x128xf32>
  // CHECK: moe.glu %[[H]] gelu_tanh interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32} : tensor<?x256xf32> -> tensor<?x128xf32>
  // GENERIC-LABEL: sym_name = "glu"
  // GENERIC: "moe.glu"(%{{.*}}) <{activation = #moe.activation<silu>, alpha = 1.000000e+00 : f32, layout = #moe.glu_layout<concat>, up_bias = 0.000000e+00 : f32}>
  // GENERIC: "moe.glu"(%{{.*}}) <{activation = #moe.activation<gelu>, alpha = 1.000000e+00 : f32, layout = #moe.glu_layout<interleaved>, limit = 7.000000e+00 : f32, up_bias = 0.000000e+00 : f32}>
  // GENERIC: "moe.glu"(%{{.*}}) <{activation = #moe.activation<gelu_tanh>, alpha = 1.702000e+00 : f32, layout = #moe.glu_layout<interleaved>, limit = 7.000000e+00 : f32, up_bias = 1.000000e+00 : f32}>
  %a = "moe.glu"(%h) <{activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>}>
      : (tensor<?x256xf32>) -> tensor<?x128xf32>
  %b = "moe.glu"(%h) <{activation = #moe.activation<gelu>, layout = #moe.glu_layout<interleaved>,
                       limit = 7.0 : f32}>
      : (tensor<?x256xf32>) -> tensor<?x128xf32>
  %c = "moe.glu"(%h) <{activation = #moe.activation<gelu_tanh>, layout = #moe.glu_layout<interleaved>,
                       alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32}>
      : (tensor<?x256xf32>) -> tensor<?x128xf32>
  return %a, %b, %c : tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x128xf32>
}

// Optional weights as the second operand, and absent.
// CHECK-LABEL: func.func @combine
// CHECK-SAME: (%[[P:[a-z0-9_]+]]: tensor<?x2x64xbf16>, %[[W:[a-z0-9_]+]]: tensor<?x2xf32>)
func.func @combine(%p: tensor<?x2x64xbf16>, %w: tensor<?x2xf32>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  // CHECK: moe.combine %[[P]] weights(%[[W]] : tensor<?x2xf32>) : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
  // CHECK: moe.combine %[[P]] : tensor<?x2x64xbf16> -> tensor<?x64xbf16>
  // GENERIC-LABEL: sym_name = "combine"
  // GENERIC: "moe.combine"(%{{.*}}, %{{.*}}) : (tensor<?x2x64xbf16>, tensor<?x2xf32>) -> tensor<?x64xbf16>
  // GENERIC: "moe.combine"(%{{.*}}) : (tensor<?x2x64xbf16>) -> tensor<?x64xbf16>
  %a = "moe.combine"(%p, %w) : (tensor<?x2x64xbf16>, tensor<?x2xf32>) -> tensor<?x64xbf16>
  %b = "moe.combine"(%p) : (tensor<?x2x64xbf16>) -> tensor<?x64xbf16>
  return %a, %b : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @multihot_converters
// CHECK-SAME: (%[[IDS:[a-z0-9_]+]]: tensor<?x2xi32>, %[[P:[a-z0-9_]+]]: tensor<?x2xf16>)
func.func @multihot_converters(%ids: tensor<?x2xi32>, %p: tensor<?x2xf16>) -> (tensor<?x8xi1>, tensor<?x2xf16>) {
  // CHECK: %[[MH:[a-z0-9_]+]], %[[PM:[a-z0-9_]+]], %[[POS:[a-z0-9_]+]] = moe.indices_to_multihot %[[IDS]], %[[P]] num_experts = 8 : tensor<?x2xi32>, tensor<?x2xf16> -> tensor<?x8xi1>, tensor<?x8xf16>, tensor<?x8xi32>
  // CHECK: %[[R:[a-z0-9_]+]] = moe.multihot_to_indices %[[PM]], %[[POS]] k = 2 : tensor<?x8xf16>, tensor<?x8xi32> -> tensor<?x2xf16>
  // CHECK: return %[[MH]], %[[R]]
  // GENERIC-LABEL: sym_name = "multihot_converters"
  // GENERIC: "moe.indices_to_multihot"(%{{.*}}, %{{.*}}) <{num_experts = 8 : i64}>
  // GENERIC: "moe.multihot_to_indices"(%{{.*}}, %{{.*}}) <{k = 2 : i64}>
  %mh, %pm, %pos = "moe.indices_to_multihot"(%ids, %p) <{num_experts = 8 : i64}>
      : (tensor<?x2xi32>, tensor<?x2xf16>) -> (tensor<?x8xi1>, tensor<?x8xf16>, tensor<?x8xi32>)
  %r = "moe.multihot_to_indices"(%pm, %pos) <{k = 2 : i64}>
      : (tensor<?x8xf16>, tensor<?x8xi32>) -> tensor<?x2xf16>
  return %mh, %r : tensor<?x8xi1>, tensor<?x2xf16>
}

// Required attributes only.
// CHECK-LABEL: func.func @ffn_minimal
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x64xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x8xbf16>, %[[WU:[a-z0-9_]+]]: tensor<8x64x256xbf16>, %[[WD:[a-z0-9_]+]]: tensor<8x128x64xbf16>)
func.func @ffn_minimal(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x256xbf16>, %wd: tensor<8x128x64xbf16>) -> tensor<?x64xbf16> {
  // CHECK: moe.ffn %[[X]], %[[L]], %[[WU]], %[[WD]] k = 2 scoring = softmax activation = silu layout = concat : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16> -> tensor<?x64xbf16>
  // GENERIC-LABEL: sym_name = "ffn_minimal"
  // GENERIC: "moe.ffn"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{activation = #moe.activation<silu>, alpha = 1.000000e+00 : f32, expert_bias = false, group_score = #moe.group_score<max>, k = 2 : i64, layout = #moe.glu_layout<concat>, n_group = 1 : i64, normalize = false, scale_fmt = #moe.scale_fmt<f32>, scaling = 1.000000e+00 : f32, scoring = #moe.scoring<softmax>, topk_group = 1 : i64, transpose_weights = false, up_bias = 0.000000e+00 : f32, weight_format = #moe.weight_format<plain>}>
  %y = "moe.ffn"(%x, %l, %wu, %wd) <{k = 2 : i64, scoring = #moe.scoring<softmax>,
                                     activation = #moe.activation<silu>,
                                     layout = #moe.glu_layout<concat>}>
      : (tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x256xbf16>, tensor<8x128x64xbf16>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// Every ffn attribute (all route and glu attributes plus transpose_weights),
// the optional routing bias as the fifth operand.
// CHECK-LABEL: func.func @ffn_all_attrs
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x32xf16>, %[[L:[a-z0-9_]+]]: tensor<4x16xf16>, %[[WU:[a-z0-9_]+]]: tensor<16x64x32xf16>, %[[WD:[a-z0-9_]+]]: tensor<16x32x32xf16>, %[[B:[a-z0-9_]+]]: tensor<16xf32>)
func.func @ffn_all_attrs(%x: tensor<4x32xf16>, %l: tensor<4x16xf16>, %wu: tensor<16x64x32xf16>,
                         %wd: tensor<16x32x32xf16>, %b: tensor<16xf32>) -> tensor<4x32xf16> {
  // CHECK: moe.ffn %[[X]], %[[L]], %[[WU]], %[[WD]] bias(%[[B]] : tensor<16xf32>) k = 4 scoring = sigmoid activation = gelu_tanh layout = interleaved
  // CHECK-SAME: {alpha = 1.702000e+00 : f32, group_score = #moe.group_score<top2_sum>, limit = 7.000000e+00 : f32, n_group = 4 : i64, normalize = true, scaling = 2.500000e+00 : f32, topk_group = 2 : i64, transpose_weights = true, up_bias = 1.000000e+00 : f32}
  // CHECK-SAME: : tensor<4x32xf16>, tensor<4x16xf16>, tensor<16x64x32xf16>, tensor<16x32x32xf16> -> tensor<4x32xf16>
  // GENERIC-LABEL: sym_name = "ffn_all_attrs"
  // GENERIC: "moe.ffn"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{activation = #moe.activation<gelu_tanh>, alpha = 1.702000e+00 : f32, expert_bias = false, group_score = #moe.group_score<top2_sum>, k = 4 : i64, layout = #moe.glu_layout<interleaved>, limit = 7.000000e+00 : f32, n_group = 4 : i64, normalize = true, scale_fmt = #moe.scale_fmt<f32>, scaling = 2.500000e+00 : f32, scoring = #moe.scoring<sigmoid>, topk_group = 2 : i64, transpose_weights = true, up_bias = 1.000000e+00 : f32, weight_format = #moe.weight_format<plain>}>
  %y = "moe.ffn"(%x, %l, %wu, %wd, %b) <{k = 4 : i64, scoring = #moe.scoring<sigmoid>, normalize = true,
                                         n_group = 4 : i64, topk_group = 2 : i64,
                                         group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32,
                                         activation = #moe.activation<gelu_tanh>,
                                         layout = #moe.glu_layout<interleaved>,
                                         alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32,
                                         transpose_weights = true}>
      : (tensor<4x32xf16>, tensor<4x16xf16>, tensor<16x64x32xf16>, tensor<16x32x32xf16>, tensor<16xf32>) -> tensor<4x32xf16>
  return %y : tensor<4x32xf16>
}

// The expert biases (expert_bias = true): operands 6 and 7 after the routing
// bias, here with f32 logits on bf16 activations (DeepSeek-V3's router).
// CHECK-LABEL: func.func @ffn_expert_bias
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<?x32xbf16>, %[[L:[a-z0-9_]+]]: tensor<?x16xf32>, %[[WU:[a-z0-9_]+]]: tensor<16x32x64xbf16>, %[[WD:[a-z0-9_]+]]: tensor<16x32x32xbf16>, %[[B:[a-z0-9_]+]]: tensor<16xf32>, %[[UB:[a-z0-9_]+]]: tensor<16x64xbf16>, %[[DB:[a-z0-9_]+]]: tensor<16x32xbf16>)
func.func @ffn_expert_bias(%x: tensor<?x32xbf16>, %l: tensor<?x16xf32>, %wu: tensor<16x32x64xbf16>,
                           %wd: tensor<16x32x32xbf16>, %b: tensor<16xf32>, %ub: tensor<16x64xbf16>,
                           %db: tensor<16x32xbf16>) -> tensor<?x32xbf16> {
  // CHECK: moe.ffn %[[X]], %[[L]], %[[WU]], %[[WD]] bias(%[[B]] : tensor<16xf32>) expert_bias(%[[UB]], %[[DB]] : tensor<16x64xbf16>, tensor<16x32xbf16>) k = 2 scoring = softmax activation = silu layout = interleaved
  // CHECK-NOT: expert_bias =
  // CHECK-SAME: : tensor<?x32xbf16>, tensor<?x16xf32>, tensor<16x32x64xbf16>, tensor<16x32x32xbf16> -> tensor<?x32xbf16>
  // GENERIC-LABEL: sym_name = "ffn_expert_bias"
  // GENERIC: "moe.ffn"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{activation = #moe.activation<silu>, alpha = 1.000000e+00 : f32, expert_bias = true, group_score = #moe.group_score<max>, k = 2 : i64, layout = #moe.glu_layout<interleaved>, n_group = 1 : i64, normalize = false, scale_fmt = #moe.scale_fmt<f32>, scaling = 1.000000e+00 : f32, scoring = #moe.scoring<softmax>, topk_group = 1 : i64, transpose_weights = false, up_bias = 0.000000e+00 : f32, weight_format = #moe.weight_format<plain>}>
  %y = "moe.ffn"(%x, %l, %wu, %wd, %b, %ub, %db) <{k = 2 : i64, scoring = #moe.scoring<softmax>,
                                                  activation = #moe.activation<silu>,
                                                  layout = #moe.glu_layout<interleaved>,
                                                  expert_bias = true}>
      : (tensor<?x32xbf16>, tensor<?x16xf32>, tensor<16x32x64xbf16>, tensor<16x32x32xbf16>, tensor<16xf32>, tensor<16x64xbf16>, tensor<16x32xbf16>) -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// Expert biases without the routing bias: operands 5 and 6.
// CHECK-LABEL: func.func @ffn_expert_bias_only
// CHECK: moe.ffn %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} expert_bias(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<16x64xf32>, tensor<16x32xf32>) k = 2
// GENERIC-LABEL: sym_name = "ffn_expert_bias_only"
// GENERIC: "moe.ffn"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{{{.*}}expert_bias = true
func.func @ffn_expert_bias_only(%x: tensor<4x32xf32>, %l: tensor<4x16xf32>, %wu: tensor<16x32x64xf32>,
                                %wd: tensor<16x32x32xf32>, %ub: tensor<16x64xf32>,
                                %db: tensor<16x32xf32>) -> tensor<4x32xf32> {
  %y = moe.ffn %x, %l, %wu, %wd expert_bias(%ub, %db : tensor<16x64xf32>, tensor<16x32xf32>)
      k = 2 scoring = softmax activation = silu layout = concat
      : tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x32x64xf32>, tensor<16x32x32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
