// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.route: scores (softmax | sigmoid) in f32, optional bias for selection
// only, group-limited selection (max | top2_sum), k best by the biased score
// (ties: lower index), weights = unbiased scores, optional normalisation,
// then scaling. Non-finite logits: NaN counts as -inf, +inf as the largest
// finite f32; rows whose selected scores are all zero get weights 0 (never
// NaN) and distinct ids.
//
// Expected values were computed from the ops' definitions (docs/) with
// numpy (float64, then rounded to the result type); a value within a
// few f32 ulps of a printing boundary accepts either rendering.

func.func private @printMemrefF32(memref<*xf32>)
func.func private @printMemrefI32(memref<*xi32>)
func.func private @printMemrefShapeF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @printMemrefShapeI32(memref<*xi32>) attributes {llvm.emit_c_interface}
func.func private @printNewline()

func.func @print_bf16_2d(%t: tensor<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %n0 = tensor.dim %t, %c0 : tensor<?x?xbf16>
  %c1 = arith.constant 1 : index
  %n1 = tensor.dim %t, %c1 : tensor<?x?xbf16>
  %e = tensor.empty(%n0, %n1) : tensor<?x?xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x?xbf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: bf16, %b: f32):
    %x = arith.extf %a : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<?x?xf32>
  %m = bufferization.to_buffer %w : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @print_f16_2d(%t: tensor<?x?xf16>) {
  %c0 = arith.constant 0 : index
  %n0 = tensor.dim %t, %c0 : tensor<?x?xf16>
  %c1 = arith.constant 1 : index
  %n1 = tensor.dim %t, %c1 : tensor<?x?xf16>
  %e = tensor.empty(%n0, %n1) : tensor<?x?xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x?xf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f16, %b: f32):
    %x = arith.extf %a : f16 to f32
    linalg.yield %x : f32
  } -> tensor<?x?xf32>
  %m = bufferization.to_buffer %w : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @print_f32_2d(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @shape_f32_2d(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefShapeF32(%u) : (memref<*xf32>) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @print_i32_2d(%t: tensor<?x?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xi32> to memref<?x?xi32>
  %u = memref.cast %m : memref<?x?xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @shape_i32_2d(%t: tensor<?x?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xi32> to memref<?x?xi32>
  %u = memref.cast %m : memref<?x?xi32> to memref<*xi32>
  call @printMemrefShapeI32(%u) : (memref<*xi32>) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @main() {

  // softmax, normalize = false: non-finite logits and ties.
  %c1 = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [0.0, 0x7F800000, 0x7FC00000, 1.0], [0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000], [2.0, 2.0, 2.0, 2.0], [0.5, 0xFF800000, 0.5, 0x7FC00000], [0x7F800000, 0x7F800000, 0.0, 0.0]]> : tensor<7x4xf32>
  %d2 = tensor.cast %c1 : tensor<7x4xf32> to tensor<?x4xf32>
  %w3, %i4 = moe.route %d2 k = 2 scoring = softmax : tensor<?x4xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p5 = tensor.cast %w3 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p5) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [7, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(0\.643914|0\.643915)}},   0.236883],
  // CHECK-NEXT:  [{{(0\.999999|1)}},   0],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [0.25,   0.25],
  // CHECK-NEXT:  [{{(0\.499999|0\.5)}},   {{(0\.499999|0\.5)}}],
  // CHECK-NEXT:  [{{(0\.499999|0\.5)}},   {{(0\.499999|0\.5)}}]]
  %p6 = tensor.cast %i4 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p6) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [7, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}3,   2],
  // CHECK-NEXT:  [1,   0],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [0,   2],
  // CHECK-NEXT:  [0,   1]]

  // softmax, normalize = true, scaling = 2: the all -inf rows stay 0.
  %c7 = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [0.0, 0x7F800000, 0x7FC00000, 1.0], [0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000], [2.0, 2.0, 2.0, 2.0], [0.5, 0xFF800000, 0.5, 0x7FC00000], [0x7F800000, 0x7F800000, 0.0, 0.0]]> : tensor<7x4xf32>
  %d8 = tensor.cast %c7 : tensor<7x4xf32> to tensor<?x4xf32>
  %w9, %i10 = moe.route %d8 k = 2 scoring = softmax {normalize = true, scaling = 2.0 : f32} : tensor<?x4xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p11 = tensor.cast %w9 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p11) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [7, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1.46212,   {{(0\.537882|0\.537883)}}],
  // CHECK-NEXT:  [2,   0],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [{{(0\.999999|1)}},   {{(0\.999999|1)}}],
  // CHECK-NEXT:  [{{(0\.999999|1)}},   {{(0\.999999|1)}}],
  // CHECK-NEXT:  [{{(0\.999999|1)}},   {{(0\.999999|1)}}]]
  %p12 = tensor.cast %i10 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p12) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [7, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}3,   2],
  // CHECK-NEXT:  [1,   0],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [0,   2],
  // CHECK-NEXT:  [0,   1]]

  // sigmoid, normalize = true, non-finite logits.
  %c13 = arith.constant dense<[[0x7FC00000, 0x7F800000, 0xFF800000, 0.0], [0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000], [-1.0, 0.5, 3.0, -0.25]]> : tensor<3x4xf32>
  %d14 = tensor.cast %c13 : tensor<3x4xf32> to tensor<?x4xf32>
  %w15, %i16 = moe.route %d14 k = 2 scoring = sigmoid {normalize = true} : tensor<?x4xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p17 = tensor.cast %w15 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p17) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(0\.666666|0\.666667)}},   {{(0\.333333|0\.333334)}}],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [{{(0\.604796|0\.604797)}},   {{(0\.395203|0\.395204)}}]]
  %p18 = tensor.cast %i16 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p18) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [3, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1,   3],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [2,   1]]

  // softmax with a bias: the bias steers selection, weights stay the
  // unbiased softmax scores.
  %c19 = arith.constant dense<[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [3.0, -1.0, 2.5]]> : tensor<3x3xf32>
  %d20 = tensor.cast %c19 : tensor<3x3xf32> to tensor<?x3xf32>
  %b21 = arith.constant dense<[0.875, 0.0, -0.5]> : tensor<3xf32>
  %w22, %i23 = moe.route %d20 bias(%b21 : tensor<3xf32>) k = 2 scoring = softmax : tensor<?x3xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p24 = tensor.cast %w22 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p24) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(0\.0900305|0\.0900306|0\.0900307)}},   {{(0\.244728|0\.244729)}}],
  // CHECK-NEXT:  [{{(0\.333333|0\.333334)}},   {{(0\.333333|0\.333334)}}],
  // CHECK-NEXT:  [{{(0\.615442|0\.615443)}},   0.0112722]]
  %p25 = tensor.cast %i23 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p25) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [3, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   1],
  // CHECK-NEXT:  [0,   1],
  // CHECK-NEXT:  [0,   1]]

  // DeepSeek-V3 style (noaux_tc): sigmoid, bias, 4 groups of 2, keep 2
  // by top2_sum, k = 3, normalize, scaling 2.5.
  %c26 = arith.constant dense<[[2.0, -1.0, 0.5, 0.75, -2.0, 1.5, 0.0, 0.25], [-0.5, 1.0, 1.25, -3.0, 0.5, 0.5, -1.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<3x8xf32>
  %d27 = tensor.cast %c26 : tensor<3x8xf32> to tensor<?x8xf32>
  %b28 = arith.constant dense<[0.0, 0.25, 0.0, 0.0, 0.5, -0.125, 0.0, 0.0]> : tensor<8xf32>
  %w29, %i30 = moe.route %d27 bias(%b28 : tensor<8xf32>) k = 3 scoring = sigmoid {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32} : tensor<?x8xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  %p31 = tensor.cast %w29 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p31) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}1.2115,   1.12454,   0.163959],
  // CHECK-NEXT:  [{{(0\.787533|0\.787534)}},   {{(0\.924932|0\.924933|0\.924934)}},   {{(0\.787533|0\.787534)}}],
  // CHECK-NEXT:  [{{(0\.833332|0\.833333|0\.833334)}},   {{(0\.833332|0\.833333|0\.833334)}},   {{(0\.833332|0\.833333|0\.833334)}}]]
  %p32 = tensor.cast %i30 : tensor<?x3xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p32) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   5,   4],
  // CHECK-NEXT:  [4,   1,   5],
  // CHECK-NEXT:  [4,   1,   0]]

  // The same without the bias (top2_sum).
  %c33 = arith.constant dense<[[2.0, -1.0, 0.5, 0.75, -2.0, 1.5, 0.0, 0.25], [-0.5, 1.0, 1.25, -3.0, 0.5, 0.5, -1.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<3x8xf32>
  %d34 = tensor.cast %c33 : tensor<3x8xf32> to tensor<?x8xf32>
  %w35, %i36 = moe.route %d34 k = 3 scoring = sigmoid {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>, scaling = 2.5 : f32} : tensor<?x8xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  %p37 = tensor.cast %w35 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p37) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}1.00896,   {{(0\.778005|0\.778006)}},   {{(0\.713032|0\.713033|0\.713034)}}],
  // CHECK-NEXT:  [1.03588,   {{(0\.732058|0\.732059)}},   {{(0\.732058|0\.732059)}}],
  // CHECK-NEXT:  [{{(0\.833332|0\.833333|0\.833334)}},   {{(0\.833332|0\.833333|0\.833334)}},   {{(0\.833332|0\.833333|0\.833334)}}]]
  %p38 = tensor.cast %i36 : tensor<?x3xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p38) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   3,   2],
  // CHECK-NEXT:  [7,   4,   5],
  // CHECK-NEXT:  [0,   1,   2]]

  // The same by group max.
  %c39 = arith.constant dense<[[2.0, -1.0, 0.5, 0.75, -2.0, 1.5, 0.0, 0.25], [-0.5, 1.0, 1.25, -3.0, 0.5, 0.5, -1.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<3x8xf32>
  %d40 = tensor.cast %c39 : tensor<3x8xf32> to tensor<?x8xf32>
  %w41, %i42 = moe.route %d40 k = 3 scoring = sigmoid {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<max>, scaling = 2.5 : f32} : tensor<?x8xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  %p43 = tensor.cast %w41 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p43) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}1.11929,   1.03895,   {{(0\.341762|0\.341763)}}],
  // CHECK-NEXT:  [1.14268,   1.00841,   0.348905],
  // CHECK-NEXT:  [{{(0\.833332|0\.833333|0\.833334)}},   {{(0\.833332|0\.833333|0\.833334)}},   {{(0\.833332|0\.833333|0\.833334)}}]]
  %p44 = tensor.cast %i42 : tensor<?x3xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p44) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   5,   1],
  // CHECK-NEXT:  [7,   2,   6],
  // CHECK-NEXT:  [0,   1,   2]]

  // group_limited_greedy: softmax, 3 groups of 2, keep 1 by max (group
  // ties: lower group index), normalize = false.
  %c45 = arith.constant dense<[[1.0, 3.0, 3.0, 0.0, 2.0, 1.0], [0.0, 1.0, 5.0, 4.0, 5.0, 0.5], [-1.0, 0.0, 0.25, -2.0, 4.0, 6.0]]> : tensor<3x6xf32>
  %d46 = tensor.cast %c45 : tensor<3x6xf32> to tensor<?x6xf32>
  %w47, %i48 = moe.route %d46 k = 2 scoring = softmax {n_group = 3 : i64, topk_group = 1 : i64} : tensor<?x6xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p49 = tensor.cast %w47 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p49) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(0\.371977|0\.371978)}},   {{(0\.0503416|0\.0503417)}}],
  // CHECK-NEXT:  [{{(0\.415966|0\.415967)}},   {{(0\.153025|0\.153026)}}],
  // CHECK-NEXT:  [{{(0\.875469|0\.87547)}},   0.118482]]
  %p50 = tensor.cast %i48 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p50) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [3, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1,   0],
  // CHECK-NEXT:  [2,   3],
  // CHECK-NEXT:  [5,   4]]

  // Mixtral style with bf16 logits and bf16 weights: softmax, top-2,
  // normalize.
  %c51 = arith.constant dense<[[0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 0.0, 1.0], [-2.0, 1.0, -0.75, 3.0, 0.5, 3.0, -1.5, 0.0]]> : tensor<2x8xbf16>
  %d52 = tensor.cast %c51 : tensor<2x8xbf16> to tensor<?x8xbf16>
  %w53, %i54 = moe.route %d52 k = 2 scoring = softmax {normalize = true} : tensor<?x8xbf16> -> tensor<?x2xbf16>, tensor<?x2xi32>
  %p55 = tensor.cast %w53 : tensor<?x2xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p55) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}0.621094,   0.376953],
  // CHECK-NEXT:  [0.5,   0.5]]
  %p56 = tensor.cast %i54 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p56) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}2,   4],
  // CHECK-NEXT:  [3,   5]]

  // bf16 logits, f32 weights.
  %c57 = arith.constant dense<[[0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 0.0, 1.0], [-2.0, 1.0, -0.75, 3.0, 0.5, 3.0, -1.5, 0.0]]> : tensor<2x8xbf16>
  %d58 = tensor.cast %c57 : tensor<2x8xbf16> to tensor<?x8xbf16>
  %w59, %i60 = moe.route %d58 k = 2 scoring = softmax {normalize = true} : tensor<?x8xbf16> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p61 = tensor.cast %w59 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p61) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(0\.622459|0\.62246)}},   {{(0\.37754|0\.377541)}}],
  // CHECK-NEXT:  [{{(0\.499999|0\.5)}},   {{(0\.499999|0\.5)}}]]
  %p62 = tensor.cast %i60 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p62) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}2,   4],
  // CHECK-NEXT:  [3,   5]]

  // Negative biased scores (c = sigmoid - 1 < 0 everywhere): 2 groups of 3,
  // keep 1 by top2_sum, k = 2, no normalisation.
  %c63 = arith.constant dense<[[-3.0, -1.0, 0.5, -2.0, 1.0, -0.25], [2.0, -2.0, -1.0, 0.0, 1.5, 0.25]]> : tensor<2x6xf32>
  %d64 = tensor.cast %c63 : tensor<2x6xf32> to tensor<?x6xf32>
  %b65 = arith.constant dense<[-1.0, -1.0, -1.0, -1.0, -1.0, -1.0]> : tensor<6xf32>
  %w66, %i67 = moe.route %d64 bias(%b65 : tensor<6xf32>) k = 2 scoring = sigmoid {n_group = 2 : i64, topk_group = 1 : i64, group_score = #moe.group_score<top2_sum>} : tensor<?x6xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p68 = tensor.cast %w66 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p68) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(0\.731058|0\.731059)}},   {{(0\.437823|0\.437824)}}],
  // CHECK-NEXT:  [{{(0\.817574|0\.817575)}},   {{(0\.562176|0\.562177)}}]]
  %p69 = tensor.cast %i67 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p69) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}4,   5],
  // CHECK-NEXT:  [4,   5]]

  // f16 logits, f16 weights, sigmoid with scaling 0.5.
  %c70 = arith.constant dense<[[0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 0.0, 1.0], [-2.0, 1.0, -0.75, 3.0, 0.5, 3.0, -1.5, 0.0]]> : tensor<2x8xf16>
  %d71 = tensor.cast %c70 : tensor<2x8xf16> to tensor<?x8xf16>
  %w72, %i73 = moe.route %d71 k = 3 scoring = sigmoid {scaling = 0.5 : f32} : tensor<?x8xf16> -> tensor<?x3xf16>, tensor<?x3xi32>
  %p74 = tensor.cast %w72 : tensor<?x3xf16> to tensor<?x?xf16>
  call @print_f16_2d(%p74) : (tensor<?x?xf16>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0.44043,   0.408691,   0.365479],
  // CHECK-NEXT:  [0.476318,   0.476318,   0.365479]]
  %p75 = tensor.cast %i73 : tensor<?x3xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p75) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}2,   4,   7],
  // CHECK-NEXT:  [3,   5,   1]]

  // T = 0.
  %c76 = arith.constant dense<> : tensor<0x8xf32>
  %d77 = tensor.cast %c76 : tensor<0x8xf32> to tensor<?x8xf32>
  %b78 = arith.constant dense<[0.0, 0.25, 0.0, 0.0, 0.5, -0.125, 0.0, 0.0]> : tensor<8xf32>
  %w0, %i0 = moe.route %d77 bias(%b78 : tensor<8xf32>) k = 3 scoring = sigmoid {normalize = true, n_group = 4 : i64, topk_group = 2 : i64, group_score = #moe.group_score<top2_sum>} : tensor<?x8xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  %p79 = tensor.cast %w0 : tensor<?x3xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p79) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 3] strides = [3, 1]{{$}}
  %p80 = tensor.cast %i0 : tensor<?x3xi32> to tensor<?x?xi32>
  call @shape_i32_2d(%p80) : (tensor<?x?xi32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 3] strides = [3, 1]{{$}}
  return
}
