// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.get_indices: slot (b, j) with e = indices[b][j] goes to
// p = cumsum[e*T + b] - 1: reverse_indices[p] = b*k + j, token_indices[p] = b.
// A row naming an expert twice takes consecutive places in slot order;
// slots with ids outside [0, E) go after all dispatched rows in (b, j) order.
//
// Expected values were computed from the ops' definitions (docs/) with
// numpy (float64, then rounded to the result type); a value within a
// few f32 ulps of a printing boundary accepts either rendering.

func.func private @printMemrefI32(memref<*xi32>)
func.func private @printMemrefShapeI32(memref<*xi32>) attributes {llvm.emit_c_interface}
func.func private @printNewline()

func.func @print_i32_1d(%t: tensor<?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?xi32> to memref<?xi32>
  %u = memref.cast %m : memref<?xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @shape_i32_1d(%t: tensor<?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?xi32> to memref<?xi32>
  %u = memref.cast %m : memref<?xi32> to memref<*xi32>
  call @printMemrefShapeI32(%u) : (memref<*xi32>) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @main() {

  // The seed example (E = 6) through moe.cumsum.
  %c1 = arith.constant dense<[[0, 1], [1, 2], [3, 4], [2, 5]]> : tensor<4x2xi32>
  %d2 = tensor.cast %c1 : tensor<4x2xi32> to tensor<?x2xi32>
  %cs3 = moe.cumsum %d2 num_experts = 6 : tensor<?x2xi32> -> tensor<?xi32>
  %rev4, %tok5 = moe.get_indices %cs3, %d2 : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  call @print_i32_1d(%rev4) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [8] strides = [1] data =
  // CHECK-NEXT: [0,  1,  2,  3,  6,  4,  5,  7]
  call @print_i32_1d(%tok5) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [8] strides = [1] data =
  // CHECK-NEXT: [0,  0,  1,  1,  3,  2,  2,  3]

  // The same from a constant cumsum.
  %c6 = arith.constant dense<[[0, 1], [1, 2], [3, 4], [2, 5]]> : tensor<4x2xi32>
  %d7 = tensor.cast %c6 : tensor<4x2xi32> to tensor<?x2xi32>
  %c9 = arith.constant dense<[1, 1, 1, 1, 2, 3, 3, 3, 3, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 7, 8]> : tensor<24xi32>
  %d10 = tensor.cast %c9 : tensor<24xi32> to tensor<?xi32>
  %rev11, %tok12 = moe.get_indices %d10, %d7 : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  call @print_i32_1d(%rev11) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [8] strides = [1] data =
  // CHECK-NEXT: [0,  1,  2,  3,  6,  4,  5,  7]
  call @print_i32_1d(%tok12) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [8] strides = [1] data =
  // CHECK-NEXT: [0,  0,  1,  1,  3,  2,  2,  3]

  // Duplicated id (row 0 names expert 1 twice) and undispatched ids -1,
  // -7 and 4 (E = 4): they take positions 7, 8, 9 in (b, j) order.
  %c13 = arith.constant dense<[[1, 1], [-1, 2], [0, 4], [2, 0], [-7, 1]]> : tensor<5x2xi32>
  %d14 = tensor.cast %c13 : tensor<5x2xi32> to tensor<?x2xi32>
  %cs15 = moe.cumsum %d14 num_experts = 4 : tensor<?x2xi32> -> tensor<?xi32>
  %rev16, %tok17 = moe.get_indices %cs15, %d14 : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  call @print_i32_1d(%rev16) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [10] strides = [1] data =
  // CHECK-NEXT: [4,  7,  0,  1,  9,  3,  6,  2,  5,  8]
  call @print_i32_1d(%tok17) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [10] strides = [1] data =
  // CHECK-NEXT: [2,  3,  0,  0,  4,  1,  3,  1,  2,  4]

  // Nothing dispatched (every id out of range).
  %c18 = arith.constant dense<[[-1, 5], [7, -1]]> : tensor<2x2xi32>
  %d19 = tensor.cast %c18 : tensor<2x2xi32> to tensor<?x2xi32>
  %cs20 = moe.cumsum %d19 num_experts = 3 : tensor<?x2xi32> -> tensor<?xi32>
  %rev21, %tok22 = moe.get_indices %cs20, %d19 : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  call @print_i32_1d(%rev21) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [4] strides = [1] data =
  // CHECK-NEXT: [0,  1,  2,  3]
  call @print_i32_1d(%tok22) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [4] strides = [1] data =
  // CHECK-NEXT: [0,  0,  1,  1]

  // T = 0.
  %c23 = arith.constant dense<> : tensor<0x2xi32>
  %d24 = tensor.cast %c23 : tensor<0x2xi32> to tensor<?x2xi32>
  %cs0 = moe.cumsum %d24 num_experts = 6 : tensor<?x2xi32> -> tensor<?xi32>
  %rev0, %tok0 = moe.get_indices %cs0, %d24 : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  call @shape_i32_1d(%rev0) : (tensor<?xi32>) -> ()
  // CHECK: rank = 1 offset = 0 sizes = [0] strides = [1]{{$}}
  call @shape_i32_1d(%tok0) : (tensor<?xi32>) -> ()
  // CHECK: rank = 1 offset = 0 sizes = [0] strides = [1]{{$}}
  return
}
