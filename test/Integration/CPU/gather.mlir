// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.gather: out[m] = input[indices[m]]; an index outside [0, T) yields a
// zero row (never an out-of-bounds read).
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

func.func @main() {

  // f32: repeats, and -1, 3 (= T) and 100 read as zero rows.
  %c1 = arith.constant dense<[[1.0, -2.0, 0.5], [3.25, 4.0, -0.125], [-6.0, 7.5, 8.0]]> : tensor<3x3xf32>
  %d2 = tensor.cast %c1 : tensor<3x3xf32> to tensor<?x3xf32>
  %c3 = arith.constant dense<[2, 0, -1, 3, 1, 2, 100]> : tensor<7xi32>
  %d4 = tensor.cast %c3 : tensor<7xi32> to tensor<?xi32>
  %g5 = moe.gather %d2[%d4] : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %p6 = tensor.cast %g5 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p6) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [7, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}-6,   7.5,   8],
  // CHECK-NEXT:  [1,   -2,   0.5],
  // CHECK-NEXT:  [0,   0,   0],
  // CHECK-NEXT:  [0,   0,   0],
  // CHECK-NEXT:  [3.25,   4,   -0.125],
  // CHECK-NEXT:  [-6,   7.5,   8],
  // CHECK-NEXT:  [0,   0,   0]]

  // bf16, static M.
  %c7 = arith.constant dense<[[1.0, -2.0, 0.5], [3.25, 4.0, -0.125], [-6.0, 7.5, 8.0]]> : tensor<3x3xbf16>
  %d8 = tensor.cast %c7 : tensor<3x3xbf16> to tensor<?x3xbf16>
  %c9 = arith.constant dense<[1, -5, 1, 0]> : tensor<4xi32>
  %g10 = moe.gather %d8[%c9] : tensor<?x3xbf16>, tensor<4xi32> -> tensor<4x3xbf16>
  %p11 = tensor.cast %g10 : tensor<4x3xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p11) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [4, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}3.25,   4,   -0.125],
  // CHECK-NEXT:  [0,   0,   0],
  // CHECK-NEXT:  [3.25,   4,   -0.125],
  // CHECK-NEXT:  [1,   -2,   0.5]]

  // f16.
  %c12 = arith.constant dense<[[1.0, -2.0, 0.5], [3.25, 4.0, -0.125], [-6.0, 7.5, 8.0]]> : tensor<3x3xf16>
  %d13 = tensor.cast %c12 : tensor<3x3xf16> to tensor<?x3xf16>
  %c14 = arith.constant dense<[2, 2, 1]> : tensor<3xi32>
  %d15 = tensor.cast %c14 : tensor<3xi32> to tensor<?xi32>
  %g16 = moe.gather %d13[%d15] : tensor<?x3xf16>, tensor<?xi32> -> tensor<?x3xf16>
  %p17 = tensor.cast %g16 : tensor<?x3xf16> to tensor<?x?xf16>
  call @print_f16_2d(%p17) : (tensor<?x?xf16>) -> ()
  // CHECK: sizes = [3, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}-6,   7.5,   8],
  // CHECK-NEXT:  [-6,   7.5,   8],
  // CHECK-NEXT:  [3.25,   4,   -0.125]]

  // T = 0: every index is out of range, so all rows are zero.
  %c18 = arith.constant dense<> : tensor<0x3xf32>
  %d19 = tensor.cast %c18 : tensor<0x3xf32> to tensor<?x3xf32>
  %c20 = arith.constant dense<[0, -1]> : tensor<2xi32>
  %d21 = tensor.cast %c20 : tensor<2xi32> to tensor<?xi32>
  %g22 = moe.gather %d19[%d21] : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %p23 = tensor.cast %g22 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p23) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   0,   0],
  // CHECK-NEXT:  [0,   0,   0]]

  // M = 0.
  %c24 = arith.constant dense<[[1.0, -2.0, 0.5], [3.25, 4.0, -0.125], [-6.0, 7.5, 8.0]]> : tensor<3x3xf32>
  %d25 = tensor.cast %c24 : tensor<3x3xf32> to tensor<?x3xf32>
  %c26 = arith.constant dense<> : tensor<0xi32>
  %d27 = tensor.cast %c26 : tensor<0xi32> to tensor<?xi32>
  %g28 = moe.gather %d25[%d27] : tensor<?x3xf32>, tensor<?xi32> -> tensor<?x3xf32>
  %p29 = tensor.cast %g28 : tensor<?x3xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p29) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 3] strides = [3, 1]{{$}}
  return
}
