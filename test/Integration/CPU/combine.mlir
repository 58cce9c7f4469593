// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.combine: out[t] = sum_j weights[t][j] * input[t][j] (plain sum
// without weights), accumulated in f32 in slot order j = 0..k-1.
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

  // Plain sum, T = 2, k = 3, H = 2.
  %c1 = arith.constant dense<[[[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]], [[-1.5, 0.25], [3.0, -4.0], [0.5, 0.5]]]> : tensor<2x3x2xf32>
  %d2 = tensor.cast %c1 : tensor<2x3x2xf32> to tensor<?x3x2xf32>
  %y3 = moe.combine %d2 : tensor<?x3x2xf32> -> tensor<?x2xf32>
  %p4 = tensor.cast %y3 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p4) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}111,   222],
  // CHECK-NEXT:  [2,   -3.25]]

  // Weighted.
  %c5 = arith.constant dense<[[[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]], [[-1.5, 0.25], [3.0, -4.0], [0.5, 0.5]]]> : tensor<2x3x2xf32>
  %d6 = tensor.cast %c5 : tensor<2x3x2xf32> to tensor<?x3x2xf32>
  %c7 = arith.constant dense<[[0.5, 0.25, 2.0], [1.0, -1.0, 0.0]]> : tensor<2x3xf32>
  %d8 = tensor.cast %c7 : tensor<2x3xf32> to tensor<?x3xf32>
  %y9 = moe.combine %d6 weights(%d8 : tensor<?x3xf32>) : tensor<?x3x2xf32> -> tensor<?x2xf32>
  %p10 = tensor.cast %y9 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p10) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}203,   406],
  // CHECK-NEXT:  [-4.5,   4.25]]

  // Slot order is observable: (1e8 + 1) - 1e8 = 0 in f32, while
  // another order would give 1; column 1: (1e8 - 1e8) + 1 = 1.
  %c11 = arith.constant dense<[[[100000000.0, 100000000.0], [1.0, -100000000.0], [-100000000.0, 1.0]]]> : tensor<1x3x2xf32>
  %d12 = tensor.cast %c11 : tensor<1x3x2xf32> to tensor<?x3x2xf32>
  %y13 = moe.combine %d12 : tensor<?x3x2xf32> -> tensor<?x2xf32>
  %p14 = tensor.cast %y13 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p14) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [1, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   1]]

  // bf16 input, f32 weights (result rounded to bf16 once).
  %c15 = arith.constant dense<[[[1.0, -2.0, 0.5], [0.75, 3.0, -1.0]], [[2.0, 2.0, 2.0], [-4.0, 8.0, 0.125]]]> : tensor<2x2x3xbf16>
  %d16 = tensor.cast %c15 : tensor<2x2x3xbf16> to tensor<?x2x3xbf16>
  %c17 = arith.constant dense<[[0.5, 0.25], [0.375, 1.5]]> : tensor<2x2xf32>
  %d18 = tensor.cast %c17 : tensor<2x2xf32> to tensor<?x2xf32>
  %y19 = moe.combine %d16 weights(%d18 : tensor<?x2xf32>) : tensor<?x2x3xbf16> -> tensor<?x3xbf16>
  %p20 = tensor.cast %y19 : tensor<?x3xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p20) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0.6875,   -0.25,   0],
  // CHECK-NEXT:  [-5.25,   12.75,   0.9375]]

  // bf16 accumulates in f32: 1 + 2^-8 + 2^-8 = 1 + 2^-7 (a bf16 running sum
  // would round back to 1 twice).
  %c21 = arith.constant dense<[[[1.0, -1.0], [0.00390625, -0.00390625], [0.00390625, -0.00390625]]]> : tensor<1x3x2xbf16>
  %d22 = tensor.cast %c21 : tensor<1x3x2xbf16> to tensor<?x3x2xbf16>
  %y23 = moe.combine %d22 : tensor<?x3x2xbf16> -> tensor<?x2xbf16>
  %p24 = tensor.cast %y23 : tensor<?x2xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p24) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [1, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1.00781,   -1.00781]]

  // f32 input, bf16 weights.
  %c25 = arith.constant dense<[[[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]], [[-1.5, 0.25], [3.0, -4.0], [0.5, 0.5]]]> : tensor<2x3x2xf32>
  %d26 = tensor.cast %c25 : tensor<2x3x2xf32> to tensor<?x3x2xf32>
  %c27 = arith.constant dense<[[0.5, 0.25, 2.0], [1.0, -1.0, 0.0]]> : tensor<2x3xbf16>
  %d28 = tensor.cast %c27 : tensor<2x3xbf16> to tensor<?x3xbf16>
  %y29 = moe.combine %d26 weights(%d28 : tensor<?x3xbf16>) : tensor<?x3x2xf32> -> tensor<?x2xf32>
  %p30 = tensor.cast %y29 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p30) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}203,   406],
  // CHECK-NEXT:  [-4.5,   4.25]]

  // T = 0.
  %c31 = arith.constant dense<> : tensor<0x3x2xf32>
  %d32 = tensor.cast %c31 : tensor<0x3x2xf32> to tensor<?x3x2xf32>
  %c33 = arith.constant dense<> : tensor<0x3xf32>
  %d34 = tensor.cast %c33 : tensor<0x3xf32> to tensor<?x3xf32>
  %y0 = moe.combine %d32 weights(%d34 : tensor<?x3xf32>) : tensor<?x3x2xf32> -> tensor<?x2xf32>
  %p35 = tensor.cast %y0 : tensor<?x2xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p35) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 2] strides = [2, 1]{{$}}
  return
}
