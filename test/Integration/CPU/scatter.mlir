// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.scatter: out[indices[i]] = input[i]; rows nothing writes are zero;
// an index outside [0, M) drops that row; on a duplicate the later row wins.
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

  // A permutation.
  %c1 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]> : tensor<5x2xf32>
  %d2 = tensor.cast %c1 : tensor<5x2xf32> to tensor<?x2xf32>
  %c3 = arith.constant dense<[4, 2, 0, 1, 3]> : tensor<5xi32>
  %d4 = tensor.cast %c3 : tensor<5xi32> to tensor<?xi32>
  %s5 = moe.scatter %d2[%d4] : tensor<?x2xf32>, tensor<?xi32> -> tensor<?x2xf32>
  %p6 = tensor.cast %s5 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p6) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [5, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}5,   6],
  // CHECK-NEXT:  [7,   8],
  // CHECK-NEXT:  [3,   4],
  // CHECK-NEXT:  [9,   10],
  // CHECK-NEXT:  [1,   2]]

  // Rows 0 and 3 both go to 3 (row 3 wins); -1 and 7 (>= M) are dropped;
  // rows 1, 2 and 4 stay zero.
  %c7 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]> : tensor<5x2xf32>
  %d8 = tensor.cast %c7 : tensor<5x2xf32> to tensor<?x2xf32>
  %c9 = arith.constant dense<[3, -1, 0, 3, 7]> : tensor<5xi32>
  %d10 = tensor.cast %c9 : tensor<5xi32> to tensor<?xi32>
  %s11 = moe.scatter %d8[%d10] : tensor<?x2xf32>, tensor<?xi32> -> tensor<?x2xf32>
  %p12 = tensor.cast %s11 : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p12) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [5, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}5,   6],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [7,   8],
  // CHECK-NEXT:  [0,   0]]

  // bf16.
  %c13 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]> : tensor<5x2xbf16>
  %d14 = tensor.cast %c13 : tensor<5x2xbf16> to tensor<?x2xbf16>
  %c15 = arith.constant dense<[1, 1, 5, 0, 2]> : tensor<5xi32>
  %d16 = tensor.cast %c15 : tensor<5xi32> to tensor<?xi32>
  %s17 = moe.scatter %d14[%d16] : tensor<?x2xbf16>, tensor<?xi32> -> tensor<?x2xbf16>
  %p18 = tensor.cast %s17 : tensor<?x2xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p18) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [5, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}7,   8],
  // CHECK-NEXT:  [3,   4],
  // CHECK-NEXT:  [9,   10],
  // CHECK-NEXT:  [0,   0],
  // CHECK-NEXT:  [0,   0]]

  // M = 0.
  %c19 = arith.constant dense<> : tensor<0x2xf32>
  %d20 = tensor.cast %c19 : tensor<0x2xf32> to tensor<?x2xf32>
  %c21 = arith.constant dense<> : tensor<0xi32>
  %d22 = tensor.cast %c21 : tensor<0xi32> to tensor<?xi32>
  %s23 = moe.scatter %d20[%d22] : tensor<?x2xf32>, tensor<?xi32> -> tensor<?x2xf32>
  %p24 = tensor.cast %s23 : tensor<?x2xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p24) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 2] strides = [2, 1]{{$}}
  return
}
