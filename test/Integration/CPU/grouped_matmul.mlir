// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.grouped_matmul: row m with offsets[e] <= m < offsets[e+1] is
// lhs[m] @ rhs[e] (+ bias[e]), accumulated in f32; rows outside
// [offsets[0], offsets[E]) and rows of empty experts are zero; offsets are
// clamped to [0, M] and a decreasing pair is an empty group.
//
// Expected values were computed from the ops' definitions (docs/) with
// numpy (float64, then rounded to the result type); a value within a
// few f32 ulps of a printing boundary accepts either rendering.

func.func private @printMemrefF32(memref<*xf32>)
func.func private @printMemrefShapeF32(memref<*xf32>) attributes {llvm.emit_c_interface}
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

func.func @main() {

  // f32, offsets [0, 2, 2, 5] with M = 6: expert 1 is empty, row 5 is
  // past offsets[E] and stays zero.
  %c1 = arith.constant dense<[[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.25, 4.0], [2.0, 2.0], [-3.0, 1.0]]> : tensor<6x2xf32>
  %d2 = tensor.cast %c1 : tensor<6x2xf32> to tensor<?x2xf32>
  %w3 = arith.constant dense<[[[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]], [[0.5, -2.0, 3.0], [1.0, 1.0, 1.0]], [[-1.0, 4.0, 0.25], [0.0, -0.5, 2.0]]]> : tensor<3x2x3xf32>
  %off4 = arith.constant dense<[0, 2, 2, 5]> : tensor<4xi32>
  %mm5 = moe.grouped_matmul %d2, %w3 offsets(%off4 : tensor<4xi32>) : tensor<?x2xf32>, tensor<3x2x3xf32> -> tensor<?x3xf32>
  %p6 = tensor.cast %mm5 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p6) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [6, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}5,   2,   0],
  // CHECK-NEXT:  [0,   0.5,   1.25],
  // CHECK-NEXT:  [-3,   13,   -3.25],
  // CHECK-NEXT:  [-0.25,   -1,   8.0625],
  // CHECK-NEXT:  [-2,   7,   4.5],
  // CHECK-NEXT:  [0,   0,   0]]

  // Offsets [1, 3, 3, 4]: row 0 is before offsets[0]; rows 4 and 5 are zero.
  %c7 = arith.constant dense<[[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.25, 4.0], [2.0, 2.0], [-3.0, 1.0]]> : tensor<6x2xf32>
  %d8 = tensor.cast %c7 : tensor<6x2xf32> to tensor<?x2xf32>
  %w9 = arith.constant dense<[[[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]], [[0.5, -2.0, 3.0], [1.0, 1.0, 1.0]], [[-1.0, 4.0, 0.25], [0.0, -0.5, 2.0]]]> : tensor<3x2x3xf32>
  %off10 = arith.constant dense<[1, 3, 3, 4]> : tensor<4xi32>
  %mm11 = moe.grouped_matmul %d8, %w9 offsets(%off10 : tensor<4xi32>) : tensor<?x2xf32>, tensor<3x2x3xf32> -> tensor<?x3xf32>
  %p12 = tensor.cast %mm11 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p12) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [6, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   0,   0],
  // CHECK-NEXT:  [0,   0.5,   1.25],
  // CHECK-NEXT:  [-1,   -2,   -4],
  // CHECK-NEXT:  [-0.25,   -1,   8.0625],
  // CHECK-NEXT:  [0,   0,   0],
  // CHECK-NEXT:  [0,   0,   0]]

  // Out-of-range offsets are clamped: [-2, 1, 3, 9] with M = 4 is [0, 1, 3, 4].
  %c13 = arith.constant dense<[[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.25, 4.0]]> : tensor<4x2xf32>
  %d14 = tensor.cast %c13 : tensor<4x2xf32> to tensor<?x2xf32>
  %w15 = arith.constant dense<[[[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]], [[0.5, -2.0, 3.0], [1.0, 1.0, 1.0]], [[-1.0, 4.0, 0.25], [0.0, -0.5, 2.0]]]> : tensor<3x2x3xf32>
  %off16 = arith.constant dense<[-2, 1, 3, 9]> : tensor<4xi32>
  %mm17 = moe.grouped_matmul %d14, %w15 offsets(%off16 : tensor<4xi32>) : tensor<?x2xf32>, tensor<3x2x3xf32> -> tensor<?x3xf32>
  %p18 = tensor.cast %mm17 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p18) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [4, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}5,   2,   0],
  // CHECK-NEXT:  [0,   2.5,   -2.5],
  // CHECK-NEXT:  [-0.5,   -8,   7],
  // CHECK-NEXT:  [-0.25,   -1,   8.0625]]

  // Decreasing offsets [2, 0, 0, 0]: every group is empty, all rows zero.
  %c19 = arith.constant dense<[[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0]]> : tensor<3x2xf32>
  %d20 = tensor.cast %c19 : tensor<3x2xf32> to tensor<?x2xf32>
  %w21 = arith.constant dense<[[[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]], [[0.5, -2.0, 3.0], [1.0, 1.0, 1.0]], [[-1.0, 4.0, 0.25], [0.0, -0.5, 2.0]]]> : tensor<3x2x3xf32>
  %off22 = arith.constant dense<[2, 0, 0, 0]> : tensor<4xi32>
  %mm23 = moe.grouped_matmul %d20, %w21 offsets(%off22 : tensor<4xi32>) : tensor<?x2xf32>, tensor<3x2x3xf32> -> tensor<?x3xf32>
  %p24 = tensor.cast %mm23 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p24) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   0,   0],
  // CHECK-NEXT:  [0,   0,   0],
  // CHECK-NEXT:  [0,   0,   0]]

  // transpose_rhs (rhs is E x N x K) with a bias.
  %c25 = arith.constant dense<[[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.25, 4.0], [2.0, 2.0], [-3.0, 1.0]]> : tensor<6x2xf32>
  %d26 = tensor.cast %c25 : tensor<6x2xf32> to tensor<?x2xf32>
  %w27 = arith.constant dense<[[[1.0, 2.0], [0.0, 1.0], [-1.0, 0.5]], [[0.5, 1.0], [-2.0, 1.0], [3.0, 1.0]], [[-1.0, 0.0], [4.0, -0.5], [0.25, 2.0]]]> : tensor<3x3x2xf32>
  %off28 = arith.constant dense<[0, 2, 4, 6]> : tensor<4xi32>
  %bias29 = arith.constant dense<[[0.5, -0.5, 1.0], [10.0, 20.0, 30.0], [-1.0, 0.0, 0.125]]> : tensor<3x3xf32>
  %mm30 = moe.grouped_matmul %d26, %w27 offsets(%off28 : tensor<4xi32>) bias(%bias29 : tensor<3x3xf32>) {transpose_rhs = true} : tensor<?x2xf32>, tensor<3x3x2xf32> -> tensor<?x3xf32>
  %p31 = tensor.cast %mm30 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p31) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [6, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}5.5,   1.5,   1],
  // CHECK-NEXT:  [0.5,   0,   2.25],
  // CHECK-NEXT:  [9.5,   12,   37],
  // CHECK-NEXT:  [14.125,   23.5,   34.75],
  // CHECK-NEXT:  [-3,   7,   4.625],
  // CHECK-NEXT:  [2,   -12.5,   1.375]]

  // Bias without transpose, static M.
  %c32 = arith.constant dense<[[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.25, 4.0], [2.0, 2.0], [-3.0, 1.0]]> : tensor<6x2xf32>
  %w33 = arith.constant dense<[[[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]], [[0.5, -2.0, 3.0], [1.0, 1.0, 1.0]], [[-1.0, 4.0, 0.25], [0.0, -0.5, 2.0]]]> : tensor<3x2x3xf32>
  %off34 = arith.constant dense<[0, 1, 3, 6]> : tensor<4xi32>
  %bias35 = arith.constant dense<[[0.5, -0.5, 1.0], [10.0, 20.0, 30.0], [-1.0, 0.0, 0.125]]> : tensor<3x3xf32>
  %mm36 = moe.grouped_matmul %c32, %w33 offsets(%off34 : tensor<4xi32>) bias(%bias35 : tensor<3x3xf32>) : tensor<6x2xf32>, tensor<3x2x3xf32> -> tensor<6x3xf32>
  %p37 = tensor.cast %mm36 : tensor<6x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p37) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [6, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}5.5,   1.5,   1],
  // CHECK-NEXT:  [10,   22.5,   27.5],
  // CHECK-NEXT:  [9.5,   12,   37],
  // CHECK-NEXT:  [-1.25,   -1,   8.1875],
  // CHECK-NEXT:  [-3,   7,   4.625],
  // CHECK-NEXT:  [2,   -12.5,   1.375]]

  // bf16 operands, f32 result: accumulation in f32 keeps 1 + 2^-8.
  %c38 = arith.constant dense<[[1.0, 0.00390625], [0.5, 0.5], [-2.0, 0.0078125], [3.0, 1.0]]> : tensor<4x2xbf16>
  %d39 = tensor.cast %c38 : tensor<4x2xbf16> to tensor<?x2xbf16>
  %w40 = arith.constant dense<[[[1.0, 2.0], [1.0, 0.0]], [[1.0, -1.0], [1.0, 4.0]]]> : tensor<2x2x2xbf16>
  %off41 = arith.constant dense<[0, 2, 4]> : tensor<3xi32>
  %mm42 = moe.grouped_matmul %d39, %w40 offsets(%off41 : tensor<3xi32>) : tensor<?x2xbf16>, tensor<2x2x2xbf16> -> tensor<?x2xf32>
  %p43 = tensor.cast %mm42 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p43) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [4, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1.00391,   2],
  // CHECK-NEXT:  [1,   1],
  // CHECK-NEXT:  [-1.99219,   2.03125],
  // CHECK-NEXT:  [4,   1]]

  // bf16 operands and result: 1 + 2^-8 rounds (to even) to 1.
  %c44 = arith.constant dense<[[1.0, 0.00390625], [0.5, 0.5], [-2.0, 0.0078125], [3.0, 1.0]]> : tensor<4x2xbf16>
  %d45 = tensor.cast %c44 : tensor<4x2xbf16> to tensor<?x2xbf16>
  %w46 = arith.constant dense<[[[1.0, 2.0], [1.0, 0.0]], [[1.0, -1.0], [1.0, 4.0]]]> : tensor<2x2x2xbf16>
  %off47 = arith.constant dense<[0, 2, 4]> : tensor<3xi32>
  %mm48 = moe.grouped_matmul %d45, %w46 offsets(%off47 : tensor<3xi32>) : tensor<?x2xbf16>, tensor<2x2x2xbf16> -> tensor<?x2xbf16>
  %p49 = tensor.cast %mm48 : tensor<?x2xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p49) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [4, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1,   2],
  // CHECK-NEXT:  [1,   1],
  // CHECK-NEXT:  [-1.99219,   2.03125],
  // CHECK-NEXT:  [4,   1]]

  // bf16 with bias and transpose_rhs, row 3 outside the groups.
  %c50 = arith.constant dense<[[1.0, 0.00390625], [0.5, 0.5], [-2.0, 0.0078125], [3.0, 1.0]]> : tensor<4x2xbf16>
  %d51 = tensor.cast %c50 : tensor<4x2xbf16> to tensor<?x2xbf16>
  %w52 = arith.constant dense<[[[1.0, 1.0], [2.0, 0.0]], [[1.0, 1.0], [-1.0, 4.0]]]> : tensor<2x2x2xbf16>
  %off53 = arith.constant dense<[0, 1, 3]> : tensor<3xi32>
  %bias54 = arith.constant dense<[[0.5, -0.5], [2.0, 0.25]]> : tensor<2x2xbf16>
  %mm55 = moe.grouped_matmul %d51, %w52 offsets(%off53 : tensor<3xi32>) bias(%bias54 : tensor<2x2xbf16>) {transpose_rhs = true} : tensor<?x2xbf16>, tensor<2x2x2xbf16> -> tensor<?x2xbf16>
  %p56 = tensor.cast %mm55 : tensor<?x2xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p56) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [4, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1.5,   1.5],
  // CHECK-NEXT:  [3,   1.75],
  // CHECK-NEXT:  [0.0078125,   2.28125],
  // CHECK-NEXT:  [0,   0]]

  // f16 operands, f32 result.
  %c57 = arith.constant dense<[[1.0, 0.00390625], [0.5, 0.5], [-2.0, 0.0078125], [3.0, 1.0]]> : tensor<4x2xf16>
  %d58 = tensor.cast %c57 : tensor<4x2xf16> to tensor<?x2xf16>
  %w59 = arith.constant dense<[[[1.0, 2.0], [1.0, 0.0]], [[1.0, -1.0], [1.0, 4.0]]]> : tensor<2x2x2xf16>
  %off60 = arith.constant dense<[0, 3, 4]> : tensor<3xi32>
  %mm61 = moe.grouped_matmul %d58, %w59 offsets(%off60 : tensor<3xi32>) : tensor<?x2xf16>, tensor<2x2x2xf16> -> tensor<?x2xf32>
  %p62 = tensor.cast %mm61 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p62) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [4, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1.00391,   2],
  // CHECK-NEXT:  [1,   1],
  // CHECK-NEXT:  [-1.99219,   -4],
  // CHECK-NEXT:  [4,   1]]

  // M = 0.
  %c63 = arith.constant dense<> : tensor<0x2xf32>
  %d64 = tensor.cast %c63 : tensor<0x2xf32> to tensor<?x2xf32>
  %w65 = arith.constant dense<[[[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]], [[0.5, -2.0, 3.0], [1.0, 1.0, 1.0]], [[-1.0, 4.0, 0.25], [0.0, -0.5, 2.0]]]> : tensor<3x2x3xf32>
  %off66 = arith.constant dense<[0, 0, 0, 0]> : tensor<4xi32>
  %mm67 = moe.grouped_matmul %d64, %w65 offsets(%off66 : tensor<4xi32>) : tensor<?x2xf32>, tensor<3x2x3xf32> -> tensor<?x3xf32>
  %p68 = tensor.cast %mm67 : tensor<?x3xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p68) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 3] strides = [3, 1]{{$}}
  return
}
